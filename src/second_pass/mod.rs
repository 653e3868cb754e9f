//! The second, LLM-judged pass: which events the LLM judge sees ([`planner`]), how the work
//! travels to it ([`work`]: an in-process queue, or a Kafka topic that survives crashes and
//! spreads over replicas), and the judge stage itself ([`stage`]), which writes one `stef_judged`
//! row per judged event through the same batcher and sink as the line-rate rows, and pauses
//! while the judge cannot be reached ([`breaker`]).
//!
//! The line-rate pass never waits for it: a line-rate row is written and its offset acknowledged
//! as soon as the sink has it. The judge stage runs `judge.max_concurrency` calls in flight,
//! within the quota and the daily caps of `[judge.budget]`; when offered work exceeds what it
//! can judge, the least important work is shed and counted by reason — never a row.

pub mod breaker;
pub mod kafka_work;
pub mod planner;
pub mod stage;
pub mod work;

pub use crate::telemetry::stats::judge_pass::{JudgeStats, JudgeStatsSnapshot};
pub use planner::Planner;
pub use stage::{JudgeStage, JudgedOutput};
pub use work::{JudgeWork, WorkError, WorkQueue, WorkSink};
