//! Gold metrics: EX, ESM, ESM+, and the LLM-judged Hybrid-EX, FLEX and ROSE.
//!
//! Everything here is pure: execution goes through the [`crate::exec::Executor`] trait, LLM
//! verdicts through [`crate::judge::StructuredJudge`], and schemas are loaded at the edge.
//!
//! Imports run one way: `judged` (orchestration) → `flex`, `rose`, `hybrid_ex` → `judge_case`
//! (their shared types) → `ex`, with `offload` for CPU-heavy steps; `gold` (EX/ESM/ESM+) → `esm`, `ex`.

pub mod avoid;
pub mod esm;
pub mod etm;
pub mod ex;
pub mod flex;
pub mod gold;
pub mod hybrid_ex;
pub mod judge_case;
pub mod judged;
#[cfg(test)]
mod judged_tests;
pub mod offload;
pub mod rose;
pub mod ts_ex;
