//! The gold metrics against the shared benchmark data and the official evaluators' verdicts
//! (EX, ESM, ESM+, ETM, ts_ex, the LLM-judged metrics, the gold scorer, the audit). Each file
//! below was once its own test binary, each linking the whole daemon; they are modules of the
//! in-process binary now.

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
