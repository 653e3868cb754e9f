//! The gold metrics against the shared benchmark data and the official evaluators' verdicts
//! (EX, ESM, ESM+, ETM, ts_ex, the LLM-judged metrics, the gold scorer, the audit), one test
//! binary: each file below was its own binary, and each binary linked the whole daemon.

#[path = "../support/mod.rs"]
mod support;

mod audit;
mod esm_plus_fixtures;
mod esm_spider;
mod etm_spider;
mod ex_bird;
mod exe_crosscheck;
mod exec_hostile;
mod hostile_backfill;
mod llm_judged;
mod scorer;
mod ts_ex;
mod ts_ex_constraints;
