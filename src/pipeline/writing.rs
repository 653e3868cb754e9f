//! The writer: each batch to the sink (several at once where the sink allows), completions
//! taken in batch order, and only then the batch's messages acknowledged.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;

use super::types::{PendingBatch, PipelineError, ProgressFn};
use crate::second_pass::{JudgeWork, WorkSink};
use crate::sources::AckToken;
use crate::stores::Sink;

/// Write batches and acknowledge each, in order, once the sink has it and every batch before
/// it; stops at the first sink error (the batcher then sees the channel closed; batches still in
/// flight are not acknowledged, so their messages are redelivered) and returns the sink when the
/// batcher is done.
///
/// Up to `inflight` batches are written at once when the sink offers concurrent writers
/// ([`Sink::concurrent_writer`]): while one insert waits on the server the next is already
/// sent. Each write runs as its own task, so the batches' row encoding and compression (the
/// ClickHouse sink's CPU) run on as many runtime threads as there are batches in flight instead
/// of one; a sink that writes one batch at a time (JSONL, stdout) has one writer, so its writes
/// still follow one another.
/// Completions are taken in batch order, so acknowledgements, work hand-over and progress
/// happen exactly as with one writer. Dropping this stage aborts the writes still in flight
/// (their batches are not acknowledged, so their messages are redelivered).
pub(super) async fn write_stage(
    mut batch_rx: mpsc::Receiver<PendingBatch>,
    sink: Box<dyn Sink>,
    inflight: usize,
    progress: Option<ProgressFn>,
    metrics: Option<crate::telemetry::PipelineMetrics>,
    work_sink: Option<Arc<dyn WorkSink>>,
) -> Result<Box<dyn Sink>, PipelineError> {
    use futures::stream::{FuturesOrdered, StreamExt};
    use tokio_util::task::AbortOnDropHandle;
    let mut idle: Vec<Box<dyn Sink>> = vec![sink];
    while idle.len() < inflight
        && let Some(writer) = idle[0].concurrent_writer()
    {
        idle.push(writer);
    }
    let mut in_flight = FuturesOrdered::new();
    let mut open = true;
    while open || !in_flight.is_empty() {
        tokio::select! {
            biased;
            Some(written) = in_flight.next(), if !in_flight.is_empty() => {
                let (writer, stored) = written?;
                idle.push(writer);
                acknowledge(stored?, &progress, work_sink.as_deref()).await?;
            }
            received = batch_rx.recv(), if open && !idle.is_empty() => match received {
                Some(pending) => match idle.pop() {
                    Some(writer) => {
                        let write = tokio::spawn(write_batch(writer, pending, metrics.clone()));
                        in_flight.push_back(joined(AbortOnDropHandle::new(write)));
                    }
                    // Not reachable: the branch runs only with an idle writer.
                    None => return Err(PipelineError::Task("no sink writer is free")),
                },
                None => open = false,
            },
        }
    }
    // Every writer is idle again; the first keeps going (the caller flushes it), the others
    // flush now.
    let mut writers = idle.into_iter();
    let Some(sink) = writers.next() else {
        return Err(PipelineError::Task("the sink writer was lost"));
    };
    for mut other in writers {
        other.flush().await?;
    }
    Ok(sink)
}

/// A batch written by [`write_batch`].
type Written = (Box<dyn Sink>, Result<Stored, PipelineError>);

/// The outcome of a write that ran as its own task; a panic in the sink is the stage's error.
async fn joined(
    write: tokio_util::task::AbortOnDropHandle<Written>,
) -> Result<Written, PipelineError> {
    write.await.map_err(|source| PipelineError::Joined {
        task: "sink writer".to_string(),
        source,
    })
}

/// A batch the sink has stored, waiting for its turn to be acknowledged.
pub(super) struct Stored {
    pub(super) acks: Vec<AckToken>,
    pub(super) work: Vec<JudgeWork>,
    pub(super) messages: u64,
    pub(super) last_line_rate: bool,
}

/// Write the pending batch with `sink`; the sink comes back with the outcome so that it can
/// take the next batch.
pub(super) async fn write_batch(
    mut sink: Box<dyn Sink>,
    pending: PendingBatch,
    metrics: Option<crate::telemetry::PipelineMetrics>,
) -> Written {
    let PendingBatch {
        contents,
        acks,
        work,
        messages,
        last_line_rate,
        ..
    } = pending;
    // Laid out flat here, on the writer's side (its own task per batch in flight where the sink
    // writes concurrently), not on the batcher's.
    let batch = contents.into_batch();
    let (rows, dead_letters) = (batch.rows.len(), batch.dead_letters.len());
    if !batch.is_empty() {
        let started = Instant::now();
        if let Err(error) = sink.write(batch).await {
            return (sink, Err(error.into()));
        }
        if let Some(metrics) = &metrics {
            metrics.sink_batch(rows + dead_letters, started.elapsed());
        }
    }
    tracing::debug!(rows, dead_letters, messages, "batch written");
    let stored = Stored {
        acks,
        work,
        messages,
        last_line_rate,
    };
    (sink, Ok(stored))
}

/// Acknowledge a stored batch (every batch before it already is).
pub(super) async fn acknowledge(
    stored: Stored,
    progress: &Option<ProgressFn>,
    work_sink: Option<&dyn WorkSink>,
) -> Result<(), PipelineError> {
    let Stored {
        acks,
        work,
        messages,
        last_line_rate,
    } = stored;
    // The selected events' work is handed over before their offsets are acknowledged, so a
    // crash in between redelivers the events (and selects them again) instead of losing work.
    if !work.is_empty()
        && let Some(work_sink) = work_sink
    {
        work_sink.submit(work).await?;
    }
    crate::sources::ack_all(acks);
    if let Some(progress) = progress {
        progress(messages);
    }
    if last_line_rate && let Some(work_sink) = work_sink {
        work_sink.close();
    }
    Ok(())
}
