//! Pipeline topology: sources → scorer pool (decode/validate, score) → batcher → sinks
//! (`ARCHITECTURE.md`, "The topology").
//!
//! Back-pressure is structural (bounded channels). A message is acknowledged to its source
//! ([`AckToken::ack`]) only after the sink has durably written everything it produced (its rows or
//! its dead letter), so a Kafka offset is never committed ahead of the data.
//!
//! ```text
//! source task ──raw──▶ dispatcher ─spawn ≤ workers (decode, score)─▶ ──done──▶ batcher ─▶ writer ─▶ sink
//!                          └──────────── dead letters ───────────────────────────▲            │
//!                                          judge stage ──judged rows────────────┘            │
//!                                               ▲ work queue / Kafka work topic ◀─ selected ──┘
//! ```
//!
//! With a second pass ([`crate::second_pass`]), the scorer's planner selects events for the LLM
//! judge; the writer hands their work over once their line-rate rows are written (the offsets
//! of those events are acknowledged after that hand-over), and the judge stage's `stef_judged`
//! rows come back to the batcher on their own channel. The line-rate pass never waits for the
//! LLM. When the line-rate pass is done, the writer closes the hand-over; the judge stage then
//! drains within its grace period and the batcher ends when both passes are done.
//!
//! Shutdown: when the shutdown signal fires (or the source ends) the source is stopped, each
//! stage finishes what it holds and closes its output channel, the batcher hands the last batch to
//! the writer (which writes batches in order while the batcher fills the next one),
//! the sink is flushed and [`Source::finish`] commits. A panic while scoring one event is caught
//! and turns that event into a dead letter, so one poison message cannot stop the daemon. A sink
//! failure ends the run with [`PipelineError::Sink`]: every stage stops (a source idling at EOF
//! included) and nothing after the last successful write is acknowledged, so sources that track
//! offsets redeliver it.
//!
//! One file per stage — [`read`] (source, decode), [`scoring`], [`batching`], [`writing`] — and
//! [`topology`] joining them; [`types`] holds what they pass each other.

pub mod allocator;
mod batching;
pub mod config;
mod read;
mod scoring;
mod topology;
mod types;
mod writing;

pub use read::decode_payload;
pub use topology::Pipeline;
pub use types::{EventTransform, PipelineError, ProgressFn, SecondPass};
#[doc(hidden)]
pub use {
    read::{ABORT_ON_ENV, send_messages},
    scoring::take_run,
};
