//! What the stages pass each other and what the topology reports: the knobs, the errors, a
//! decoded event on its way (`Work`), what a message became (`Completed`), the second pass's
//! parts, the source after its stage.

use std::sync::Arc;
use std::time::Duration;

use crate::evaluation::{DeadLetter, EvaluationRow};
use crate::event::Event;
use crate::pipeline::config::PipelineConfig;
use crate::review::EventInputs;
use crate::second_pass::{JudgeStage, JudgeWork, Planner, WorkError, WorkSink};
use crate::sources::{AckToken, Source, SourceError};
use crate::stores::config::SinkConfig;
use crate::stores::{Batch, SinkError};

/// Rough size of one serialized row, for `batch_bytes` accounting.
pub(super) const ROW_BYTES_ESTIMATE: usize = 1024;

/// The topology's knobs, read from `[pipeline]` and `[sink]` (zeros clamped to 1).
#[derive(Debug, Clone)]
pub(super) struct Knobs {
    /// Events scored concurrently.
    pub(super) workers: usize,
    /// Capacity of each bounded channel.
    pub(super) channel_capacity: usize,
    /// Larger payloads are dead-lettered unread.
    pub(super) max_event_bytes: usize,
    /// Write a batch at this many rows plus dead letters …
    pub(super) batch_rows: usize,
    /// … or at about this many bytes …
    pub(super) batch_bytes: usize,
    /// … or when its oldest entry has waited this long.
    pub(super) flush_interval: Duration,
    /// Hand each scored event's inputs to the sink (`[sink] store_inputs`).
    pub(super) store_inputs: bool,
    /// Batches being written at once, at most (`[sink] inflight_batches`).
    pub(super) inflight_batches: usize,
}

impl Knobs {
    pub(super) fn new(pipeline: &PipelineConfig, sink: &SinkConfig) -> Knobs {
        Knobs {
            workers: pipeline.workers.get(),
            channel_capacity: pipeline.channel_capacity.get(),
            max_event_bytes: pipeline.max_event_bytes,
            batch_rows: sink.batch_rows.max(1),
            batch_bytes: sink.batch_bytes.max(1),
            flush_interval: Duration::from_millis(sink.flush_interval_ms.max(1)),
            store_inputs: sink.store_inputs,
            inflight_batches: sink.inflight_batches.max(1),
        }
    }
}

/// Why a run failed. Messages not yet acknowledged are redelivered by sources that track offsets.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// Judge work could not be handed over (the Kafka work topic failed).
    #[error(transparent)]
    Work(#[from] WorkError),
    /// The source failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The sink failed.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// A stage's own invariant broke (a writer missing from its pool): a bug, reported
    /// rather than a panic.
    #[error("pipeline task failed: {0}")]
    Task(&'static str),
    /// The scorer pool's permits were closed under work still waiting for one.
    #[error("pipeline task failed: scorer pool: its permits were closed")]
    ScorerPool(#[source] tokio::sync::AcquireError),
    /// A pipeline task panicked or was cancelled.
    #[error("pipeline task failed: {task}: {source}")]
    Joined {
        /// Which task (`pipeline`, `sink writer`, a stage's name).
        task: String,
        /// Tokio's account of it (the panic's message, or the cancellation).
        #[source]
        source: tokio::task::JoinError,
    },
    /// Shutdown did not finish within `pipeline.shutdown_timeout_ms`: what was not written
    /// stays unacknowledged (uncommitted) and is redelivered on the next start.
    #[error(
        "shutdown did not finish within {limit:?} (pipeline.shutdown_timeout_ms); still pending: \
         {pending}. Events not yet written stay uncommitted and are redelivered on the next start"
    )]
    ShutdownTimeout {
        /// The limit that ran out.
        limit: std::time::Duration,
        /// The components that were not healthy then.
        pending: String,
    },
}

/// Rewrites each decoded event before scoring (e.g. backfill's `--run-id`).
pub type EventTransform = Arc<dyn Fn(&mut Event) + Send + Sync>;

/// Told how many messages were completed (written and acknowledged) after each batch.
pub type ProgressFn = Arc<dyn Fn(u64) + Send + Sync>;

/// The second, LLM-judged pass of a run (see [`crate::second_pass`]).
pub struct SecondPass {
    /// Selects events right after scoring.
    pub planner: Arc<Planner>,
    /// Where the writer hands selected work once the line-rate rows are written.
    pub work_sink: Arc<dyn WorkSink>,
    /// The judge stage.
    pub stage: JudgeStage,
    /// Kafka: the consumer task feeding the stage's queue from the work topic.
    pub feeder: Option<tokio::task::JoinHandle<Box<dyn Source>>>,
    /// The pass's counters (for the summary).
    pub stats: Arc<crate::second_pass::JudgeStats>,
}

/// A decoded event on its way to the scorer.
pub(super) struct Work {
    pub(super) event: Event,
    /// The rows' time when the event has no `ts` (empty when it has one).
    pub(super) fallback_ts: String,
    pub(super) origin: String,
    pub(super) payload: Vec<u8>,
    pub(super) ack: AckToken,
}

/// What one message became.
pub(super) enum Completed {
    Rows {
        rows: Vec<EvaluationRow>,
        payload_bytes: usize,
        ack: AckToken,
        /// The event selected for the LLM judge, handed over once the rows are written.
        work: Option<Box<JudgeWork>>,
        /// The event's inputs for the sink (`[sink] store_inputs`).
        inputs: Option<Box<EventInputs>>,
        /// The span the event's SQL ran in (its evaluation events are parented to it).
        trace: Option<crate::event::TraceContext>,
    },
    DeadLetter {
        dead_letter: DeadLetter,
        ack: AckToken,
    },
}

/// The source after its stage ended, with the error that ended it, if any.
pub(super) struct SourceOutcome {
    pub(super) source: Box<dyn Source>,
    pub(super) last_error: Result<(), SourceError>,
}

impl SourceOutcome {
    pub(super) async fn finish(&mut self) -> Result<(), SourceError> {
        self.source.finish().await
    }
}

pub(super) async fn join<T>(
    name: &str,
    handle: tokio::task::JoinHandle<T>,
) -> Result<T, PipelineError> {
    handle.await.map_err(|source| PipelineError::Joined {
        task: name.to_string(),
        source,
    })
}

/// What a batch being filled holds for the sink, as it arrived: each event's rows in their own
/// vector and each event's inputs in their box, so that adding an event on the batcher's task
/// (which every event crosses) moves a few pointers instead of copying ~0.6 KB per row and
/// ~0.4 KB per input (`perf`: that copy was most of the batcher's CPU). [`Contents::into_batch`]
/// lays them out flat on the writer's side.
#[derive(Default)]
pub(super) struct Contents {
    pub(super) rows: Vec<Vec<EvaluationRow>>,
    pub(super) row_count: usize,
    #[allow(
        clippy::vec_box,
        reason = "the batcher moves the box the scoring task made instead of copying the inputs"
    )]
    pub(super) inputs: Vec<Box<EventInputs>>,
    pub(super) dead_letters: Vec<DeadLetter>,
}

impl Contents {
    /// Add one event's (or one judged message's) rows.
    pub(super) fn add_rows(&mut self, rows: Vec<EvaluationRow>) {
        if !rows.is_empty() {
            self.row_count += rows.len();
            self.rows.push(rows);
        }
    }

    /// Whether there is nothing to write.
    pub(super) fn is_empty(&self) -> bool {
        self.row_count == 0 && self.inputs.is_empty() && self.dead_letters.is_empty()
    }

    /// Room for as many events and inputs as `other` held.
    pub(super) fn reserve_like(&mut self, other: &Contents) {
        self.rows.reserve(other.rows.len());
        self.inputs.reserve(other.inputs.len());
    }

    /// The sink's batch: rows and inputs in arrival order.
    pub(super) fn into_batch(self) -> Batch {
        let mut rows = Vec::with_capacity(self.row_count);
        for event_rows in self.rows {
            rows.extend(event_rows);
        }
        Batch {
            rows,
            inputs: self.inputs.into_iter().map(|inputs| *inputs).collect(),
            dead_letters: self.dead_letters,
        }
    }
}

/// Rows, dead letters and tokens of the batch being filled.
#[derive(Default)]
pub(super) struct PendingBatch {
    pub(super) contents: Contents,
    pub(super) acks: Vec<AckToken>,
    /// Work selected for the LLM judge, handed over once the batch is written.
    pub(super) work: Vec<JudgeWork>,
    /// The line-rate pass is done: after this batch, close the work hand-over.
    pub(super) last_line_rate: bool,
    /// Source messages among `acks` (the rest acknowledge judged work).
    pub(super) messages: u64,
    pub(super) bytes: usize,
    pub(super) entries: usize,
    pub(super) opened_at: Option<tokio::time::Instant>,
}

impl PendingBatch {
    /// Whether the batch reached `batch_rows` entries or `batch_bytes` and must be written.
    pub(super) fn is_full(&self, knobs: &Knobs) -> bool {
        self.entries >= knobs.batch_rows || self.bytes >= knobs.batch_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(event: &str) -> EvaluationRow {
        let event: Event = serde_json::from_value(serde_json::json!({
            "event_id": event, "question": "q", "sql": "SELECT 1"
        }))
        .expect("an event");
        EvaluationRow::for_event(
            &event,
            "2026-01-01T00:00:00Z",
            crate::evaluation::Metric::Stef,
        )
    }

    #[test]
    fn contents_lay_rows_out_in_arrival_order() {
        let mut contents = Contents::default();
        assert!(contents.is_empty());
        contents.add_rows(vec![row("a"), row("a")]);
        contents.add_rows(Vec::new());
        contents.add_rows(vec![row("b")]);
        assert_eq!((contents.rows.len(), contents.row_count), (2, 3));
        let batch = contents.into_batch();
        let ids: Vec<&str> = batch.rows.iter().map(|r| r.event_id.as_str()).collect();
        assert_eq!(ids, ["a", "a", "b"]);
        assert_eq!(batch.rows.capacity(), 3);
    }
}
