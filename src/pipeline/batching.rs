//! The batcher: rows, dead letters and inputs gathered into batches closed by rows, bytes or
//! time, observed once (statistics, telemetry, alerts) and handed to the writer.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;

use super::types::{
    Completed, Knobs, PendingBatch, PipelineError, ProgressFn, ROW_BYTES_ESTIMATE, join,
};
use super::writing::write_stage;
use crate::alerts::config::SeriesLabel;
use crate::evaluation::{DeadLetter, EvaluationRow};
use crate::second_pass::{JudgedOutput, WorkSink};
use crate::stores::Sink;
use crate::telemetry::stats::RunStats;
use crate::telemetry::summary::Summary;

/// Everything that watches what the pipeline completes, fed in one place: the run statistics
/// (the summary and the calibrated estimates), the OpenTelemetry instruments and the alert
/// engine.
pub(super) struct Observers {
    pub(super) stats: RunStats,
    pub(super) metrics: Option<crate::telemetry::PipelineMetrics>,
    pub(super) alerts: Option<crate::alerts::AlertHandle>,
    /// The second pass's counters and estimates, and the series key of the estimates.
    pub(super) judge: Option<(Arc<crate::second_pass::JudgeStats>, Vec<SeriesLabel>)>,
    /// Every row as an evaluation event (`[telemetry] evaluations`).
    pub(super) evaluations: Option<crate::telemetry::evaluations::EvaluationSender>,
    /// The series text of the row being observed (one buffer for the run, not one per row).
    pub(super) series: String,
}

impl Observers {
    /// Observers of a run that has seen no row yet.
    pub(super) fn new(
        metrics: Option<crate::telemetry::PipelineMetrics>,
        alerts: Option<crate::alerts::AlertHandle>,
        judge: Option<(Arc<crate::second_pass::JudgeStats>, Vec<SeriesLabel>)>,
        evaluations: Option<crate::telemetry::evaluations::EvaluationSender>,
    ) -> Observers {
        Observers {
            stats: RunStats::default(),
            metrics,
            alerts,
            judge,
            evaluations,
            series: String::new(),
        }
    }

    /// One scored event's rows, or one judged row.
    pub(super) async fn rows(
        &mut self,
        rows: &[EvaluationRow],
        event: bool,
        trace: Option<crate::event::TraceContext>,
    ) {
        if event {
            self.stats.events += 1;
        }
        if let Some(evaluations) = &self.evaluations {
            evaluations.submit(rows, trace);
        }
        if let Some(metrics) = &self.metrics {
            metrics.scored(rows);
        }
        if let Some(alerts) = &self.alerts {
            alerts
                .submit(crate::alerts::AlertInput::Rows(rows.to_vec()))
                .await;
        }
        for row in rows {
            self.stats.observe_row(row);
            if let Some((stats, key)) = &self.judge {
                crate::second_pass::planner::write_series(row, key, &mut self.series);
                stats.observe_estimate(row, &self.series);
            }
        }
    }

    /// One dead letter.
    pub(super) async fn dead_letter(&mut self, dead_letter: &DeadLetter) {
        self.stats.observe_dead_letter(dead_letter);
        if let Some(metrics) = &self.metrics {
            metrics.dead_lettered();
        }
        if let Some(alerts) = &self.alerts {
            alerts.submit(crate::alerts::AlertInput::DeadLetter).await;
        }
    }
}

/// Add one completed source message (its rows, or its dead letter) to the pending batch.
pub(super) async fn absorb(
    pending: &mut PendingBatch,
    observers: &mut Observers,
    completed: Completed,
) {
    match completed {
        Completed::Rows {
            rows,
            payload_bytes,
            ack,
            work,
            inputs,
            trace,
        } => {
            observers.rows(&rows, true, trace).await;
            if let Some(inputs) = inputs {
                pending.bytes += payload_bytes;
                pending.contents.inputs.push(inputs);
            }
            pending.entries += rows.len().max(1);
            pending.bytes += payload_bytes + rows.len() * ROW_BYTES_ESTIMATE;
            pending.contents.add_rows(rows);
            pending.acks.push(ack);
            if let Some(work) = work {
                pending.work.push(*work);
            }
        }
        Completed::DeadLetter { dead_letter, ack } => {
            observers.dead_letter(&dead_letter).await;
            pending.entries += 1;
            pending.bytes += dead_letter.payload.len() + ROW_BYTES_ESTIMATE;
            pending.contents.dead_letters.push(dead_letter);
            pending.acks.push(ack);
        }
    }
    observers.stats.messages += 1;
    pending.messages += 1;
}

/// What [`absorb_all`] did with a hand-over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Absorbed {
    /// Every message is in the pending batch, which is not full.
    Pending,
    /// A batch filled on the way and went to the writer (the rest, if any, is pending).
    HandedOver,
    /// The writer has stopped: the messages not yet in a batch are not acknowledged.
    WriterStopped,
}

/// Add what a scoring task handed over, message by message; a batch that fills on the way is
/// handed to the writer at once, so no batch exceeds its limits by a hand-over.
async fn absorb_all(
    pending: &mut PendingBatch,
    observers: &mut Observers,
    completed: Vec<Completed>,
    batch_tx: &mpsc::Sender<PendingBatch>,
    knobs: &Knobs,
) -> Absorbed {
    let mut absorbed = Absorbed::Pending;
    for completed in completed {
        if pending.opened_at.is_none() {
            pending.opened_at = Some(tokio::time::Instant::now());
        }
        absorb(pending, observers, completed).await;
        if pending.is_full(knobs) {
            if !hand_over(batch_tx, pending).await {
                return Absorbed::WriterStopped;
            }
            absorbed = Absorbed::HandedOver;
        }
    }
    absorbed
}

/// What the batcher needs besides its channels and the sink.
pub(super) struct BatchOptions {
    pub(super) knobs: Knobs,
    pub(super) progress: Option<ProgressFn>,
    pub(super) alerts: Option<crate::alerts::AlertHandle>,
    pub(super) metrics: Option<crate::telemetry::PipelineMetrics>,
    pub(super) work_sink: Option<Arc<dyn WorkSink>>,
    pub(super) judge: Option<(Arc<crate::second_pass::JudgeStats>, Vec<SeriesLabel>)>,
    pub(super) evaluations: Option<crate::telemetry::evaluations::EvaluationSender>,
}

/// Receive from an optional channel (pending forever without one).
pub(super) async fn recv_opt<T>(rx: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Absorb `completed`, then what else is already waiting without going back through the
/// batcher's select (and its flush timer) for every hand-over, until a batch went to the
/// writer. Each one spends the task's cooperative budget as `recv` would, so the batcher still
/// yields regularly to the tasks it feeds (the alert engine, the writer).
async fn absorb_ready(
    done_rx: &mut mpsc::Receiver<Vec<Completed>>,
    pending: &mut PendingBatch,
    observers: &mut Observers,
    completed: Vec<Completed>,
    batch_tx: &mpsc::Sender<PendingBatch>,
    knobs: &Knobs,
) -> Absorbed {
    let mut absorbed = absorb_all(pending, observers, completed, batch_tx, knobs).await;
    while absorbed == Absorbed::Pending {
        match done_rx.try_recv() {
            Ok(completed) => {
                absorbed = absorb_all(pending, observers, completed, batch_tx, knobs).await;
                tokio::task::consume_budget().await;
            }
            Err(_) => break,
        }
    }
    absorbed
}

/// Add a judged row set of the second pass to the pending batch (opening it when empty).
async fn absorb_judged(
    pending: &mut PendingBatch,
    observers: &mut Observers,
    judged: JudgedOutput,
) {
    let JudgedOutput { rows, ack, trace } = judged;
    if pending.opened_at.is_none() {
        pending.opened_at = Some(tokio::time::Instant::now());
    }
    observers.rows(&rows, false, trace).await;
    pending.entries += rows.len().max(1);
    pending.bytes += rows.len() * ROW_BYTES_ESTIMATE;
    pending.contents.add_rows(rows);
    pending.acks.push(ack);
}

pub(super) async fn batch_stage(
    mut done_rx: mpsc::Receiver<Vec<Completed>>,
    mut judged_rx: Option<mpsc::Receiver<JudgedOutput>>,
    sink: Box<dyn Sink>,
    options: BatchOptions,
) -> Result<(Summary, Box<dyn Sink>), PipelineError> {
    let started = Instant::now();
    let BatchOptions {
        knobs: options,
        progress,
        alerts,
        metrics,
        work_sink,
        judge,
        evaluations,
    } = options;
    let mut observers = Observers::new(metrics.clone(), alerts, judge, evaluations);
    let mut pending = PendingBatch::default();
    // The sink writes on its own task, so the next batch fills while the previous one is being
    // inserted; the one-slot channel keeps at most one batch writing and one waiting.
    let (batch_tx, batch_rx) = mpsc::channel::<PendingBatch>(1);
    let writer = tokio::spawn(write_stage(
        batch_rx,
        sink,
        options.inflight_batches,
        progress,
        metrics.clone(),
        work_sink,
    ));
    let mut line_open = true;
    let mut judged_open = judged_rx.is_some();
    loop {
        if !line_open && !judged_open {
            break;
        }
        // Wait for the next completion, the flush deadline, or the writer stopping (a sink
        // error ends the run even while the source idles).
        let deadline = pending
            .opened_at
            .map(|opened| opened + options.flush_interval);
        tokio::select! {
            biased;
            () = batch_tx.closed() => break,
            () = sleep_until_some(deadline) => {
                if !hand_over(&batch_tx, &mut pending).await {
                    break;
                }
                continue;
            }
            received = done_rx.recv(), if line_open => match received {
                Some(completed) => {
                    let absorbed = absorb_ready(
                        &mut done_rx,
                        &mut pending,
                        &mut observers,
                        completed,
                        &batch_tx,
                        &options,
                    )
                    .await;
                    if absorbed == Absorbed::WriterStopped {
                        break;
                    }
                }
                None => {
                    // The line-rate pass is done: write what is pending, then close the work
                    // hand-over so the judge stage can finish.
                    line_open = false;
                    observers.stats.line_rate_elapsed = Some(started.elapsed());
                    pending.last_line_rate = true;
                    if !hand_over(&batch_tx, &mut pending).await {
                        break;
                    }
                    continue;
                }
            },
            received = recv_opt(&mut judged_rx), if judged_open => match received {
                Some(judged) => absorb_judged(&mut pending, &mut observers, judged).await,
                None => {
                    judged_open = false;
                    continue;
                }
            },
        }
        if pending.is_full(&options) && !hand_over(&batch_tx, &mut pending).await {
            break;
        }
    }
    // On a writer failure the loop stopped early: the rows still pending are not acknowledged,
    // so they are redelivered; the writer's error is the run's error.
    hand_over(&batch_tx, &mut pending).await;
    drop(batch_tx);
    let sink = join("sink writer", writer).await??;
    Ok((observers.stats, sink))
}

/// Sleep until `deadline`, or forever without one.
pub(super) async fn sleep_until_some(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Pass the pending batch to the writer task; false when the writer has stopped (failed).
///
/// The next batch starts with room for as many events, inputs and acknowledgements as this one
/// held: under a steady load a batch then fills without growing its vectors, and a quiet stream
/// keeps small ones.
pub(super) async fn hand_over(
    batch_tx: &mpsc::Sender<PendingBatch>,
    pending: &mut PendingBatch,
) -> bool {
    let batch = std::mem::take(pending);
    pending.contents.reserve_like(&batch.contents);
    pending.acks.reserve(batch.acks.len());
    if batch.acks.is_empty() && batch.contents.is_empty() && !batch.last_line_rate {
        return true;
    }
    batch_tx.send(batch).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::config::PipelineConfig;
    use crate::sources::{AckToken, Position};
    use crate::stores::config::SinkConfig;

    fn dead_letter(n: i64) -> Completed {
        Completed::DeadLetter {
            dead_letter: DeadLetter::new(format!("test:{n}"), "broken", b"{"),
            ack: AckToken::untracked(Position {
                stream: "test".into(),
                partition: 0,
                offset: n,
            }),
        }
    }

    /// Batches of `batch_rows` entries, observed by the run statistics alone.
    fn batching_rows(batch_rows: usize) -> (Knobs, Observers) {
        let knobs = Knobs::new(
            &PipelineConfig::default(),
            &SinkConfig {
                batch_rows,
                ..SinkConfig::default()
            },
        );
        let observers = Observers {
            stats: RunStats::default(),
            metrics: None,
            alerts: None,
            judge: None,
            evaluations: None,
            series: String::new(),
        };
        (knobs, observers)
    }

    #[tokio::test]
    async fn a_hand_over_of_several_messages_never_overfills_a_batch() {
        let (knobs, mut observers) = batching_rows(3);
        let (batch_tx, mut batch_rx) = mpsc::channel::<PendingBatch>(8);
        let mut pending = PendingBatch::default();
        let handed = (0..10).map(dead_letter).collect();
        assert_eq!(
            absorb_all(&mut pending, &mut observers, handed, &batch_tx, &knobs).await,
            Absorbed::HandedOver
        );
        drop(batch_tx);
        let mut sizes = Vec::new();
        while let Some(batch) = batch_rx.recv().await {
            assert!(batch.opened_at.is_some(), "each batch knows when it opened");
            sizes.push(batch.acks.len());
        }
        assert_eq!(sizes, [3, 3, 3], "full batches go to the writer at once");
        assert_eq!(
            pending.acks.len(),
            1,
            "the rest waits for the next hand-over"
        );
        assert!(pending.opened_at.is_some(), "and its flush deadline runs");
        assert_eq!(observers.stats.messages, 10);
        assert_eq!(observers.stats.dead_letters, 10);
    }

    #[tokio::test]
    async fn a_stopped_writer_ends_the_hand_over() {
        let (knobs, mut observers) = batching_rows(2);
        let (batch_tx, batch_rx) = mpsc::channel::<PendingBatch>(8);
        drop(batch_rx);
        let mut pending = PendingBatch::default();
        let handed = (0..5).map(dead_letter).collect();
        assert_eq!(
            absorb_all(&mut pending, &mut observers, handed, &batch_tx, &knobs).await,
            Absorbed::WriterStopped
        );
        assert_eq!(
            observers.stats.messages, 2,
            "nothing after the failed hand-over"
        );
    }
}
