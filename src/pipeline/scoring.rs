//! The scoring stage: at most `pipeline.workers` scoring tasks, each taking a run of queued
//! messages, decoding each ([`Decoder`]) and scoring the events, yielding to its thread every
//! millisecond; a panic becomes the event's dead letter.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::FutureExt;
use tokio::sync::{Semaphore, mpsc};

use super::read::{Decoded, Decoder};
use super::types::{Completed, PipelineError, Work};
use crate::evaluation::DeadLetter;
use crate::review::EventInputs;
use crate::score::Scorer;
use crate::second_pass::Planner;
use crate::sources::SourceMessage;

/// Most events one scoring task takes at once.
pub(super) const MAX_EVENTS_PER_TASK: usize = 32;

/// Longest stretch a scoring task scores without yielding to the other tasks of its runtime
/// thread (the alert engine, the batcher, the writer, the source): about 20 events of the
/// release build. Yielding after every event cost a fifth of the throughput (measured).
pub(super) const SCORING_SLICE: Duration = Duration::from_micros(1_000);

/// The scorer pool: at most `workers` scoring tasks at a time, each holding a permit. A task
/// scores a run of events one after another: the first that arrived plus, when events queue up, a
/// fair share of the queue (queued / workers, at most [`MAX_EVENTS_PER_TASK`]). So at most
/// `workers` events are in flight, a lone event is scored at once, and under a backlog the
/// per-event cost of spawning a task and taking a permit is paid once per run. A run yields to
/// the thread's other tasks every [`SCORING_SLICE`] of scoring. (Long-lived workers
/// sharing one receiver were tried: the runtime then wakes the next worker in the current
/// thread's LIFO slot, where the other thread cannot steal it, and two cores score like one.)
pub(super) async fn score_stage(
    mut work_rx: mpsc::Receiver<SourceMessage>,
    decoder: Arc<Decoder>,
    done_tx: mpsc::Sender<Vec<Completed>>,
    scorer: Arc<Scorer>,
    workers: usize,
    store_inputs: bool,
    planner: Option<Arc<Planner>>,
) -> Result<(), PipelineError> {
    let permits = Arc::new(Semaphore::new(workers));
    loop {
        let first = tokio::select! {
            biased;
            // The batcher stopped (sink failure): stop taking work so the stages upstream unwind.
            () = done_tx.closed() => None,
            work = work_rx.recv() => work,
        };
        let Some(first) = first else { break };
        let permit = Arc::clone(&permits)
            .acquire_owned()
            .await
            .map_err(PipelineError::ScorerPool)?;
        let run = take_run(&mut work_rx, first, workers);
        let scorer = Arc::clone(&scorer);
        let done_tx = done_tx.clone();
        let planner = planner.clone();
        let decoder = Arc::clone(&decoder);
        tokio::spawn(async move {
            let mut slice_started = Instant::now();
            let mut done = Vec::with_capacity(run.len());
            for message in run {
                if slice_started.elapsed() >= SCORING_SLICE {
                    // Scoring is CPU work that never waits: hand over what is done, and let the
                    // tasks queued on this thread (the alert engine, the writer, the source) run.
                    if !send_completed(&done_tx, &mut done).await {
                        break;
                    }
                    tokio::task::yield_now().await;
                    slice_started = Instant::now();
                }
                message.ack.scoring();
                done.push(match decoder.decode(message) {
                    Decoded::Work(work) => {
                        score_one(&scorer, work, planner.as_deref(), store_inputs).await
                    }
                    Decoded::DeadLetter(dead_letter) => dead_letter,
                    Decoded::Routed => continue,
                });
            }
            send_completed(&done_tx, &mut done).await;
            drop(permit);
        });
    }
    Ok(())
}

/// A scoring task's run: `first` and, when messages queue up, a fair share of the queue
/// (queued / `workers`, at most [`MAX_EVENTS_PER_TASK`] in all), taken from the channel at once
/// (its room is given back once for the run; a receive per message took and released the
/// channel's lock each). Never waits.
#[doc(hidden)]
pub fn take_run(
    work_rx: &mut mpsc::Receiver<SourceMessage>,
    first: SourceMessage,
    workers: usize,
) -> Vec<SourceMessage> {
    let share = (work_rx.len() / workers.max(1)).min(MAX_EVENTS_PER_TASK - 1);
    let mut run = Vec::with_capacity(share + 1);
    run.push(first);
    if share > 0 {
        // Ready at once: `share` messages are queued (the pool is their one receiver).
        let _taken = work_rx.recv_many(&mut run, share).now_or_never();
    }
    run
}

/// Send what a scoring task has completed to the batcher, as one message: every event crosses
/// this channel, so it is crossed once per slice of a run (up to [`MAX_EVENTS_PER_TASK`]
/// events), not once per event by every worker. False when the batcher has stopped (a sink
/// failure; it reports the error, and what was not handed over is not acknowledged, so a source
/// that tracks offsets redelivers it).
async fn send_completed(done_tx: &mpsc::Sender<Vec<Completed>>, done: &mut Vec<Completed>) -> bool {
    if done.is_empty() {
        return true;
    }
    let rest = done.capacity() - done.len();
    let completed = std::mem::replace(done, Vec::with_capacity(rest));
    done_tx.send(completed).await.is_ok()
}

/// Score one event; a panic in scoring becomes a dead letter carrying the original payload.
pub(super) async fn score_one(
    scorer: &Scorer,
    work: Work,
    planner: Option<&Planner>,
    store_inputs: bool,
) -> Completed {
    let Work {
        event,
        fallback_ts,
        origin,
        payload,
        ack,
    } = work;
    // One span per event (exported over OTLP when telemetry traces are on; left out of the
    // logs, and not built at all when nothing wants it: `telemetry::EVENT_SPAN`).
    let span = tracing::info_span!(
        crate::telemetry::EVENT_SPAN,
        event_id = %event.event_id,
        app_id = event.app_id.as_deref(),
        agent_id = event.agent_id.as_deref(),
        agent_version = event.agent_version.as_deref(),
        model = event.model.as_deref(),
        %origin,
    );
    // The rows' time: the event's own `ts`, else the fallback the decoder wrote for it.
    let row_ts = event.ts.as_deref().unwrap_or(&fallback_ts);
    let scoring = tracing::Instrument::instrument(scorer.score_at(&event, row_ts), span);
    // Pinned in place (in this task's own state): no allocation, no copy into a box per event.
    let scored = CatchUnwind(std::pin::pin!(scoring)).await;
    ack.scored();
    match scored {
        Ok(rows) => {
            let no_row_ts;
            let ts = match rows.first() {
                Some(row) => row.ts.as_str(),
                None => {
                    no_row_ts = row_ts.to_string();
                    no_row_ts.as_str()
                }
            };
            let work = planner.and_then(|p| p.plan(&event, &rows, ts).map(Box::new));
            let trace = event.trace;
            let inputs = (store_inputs && !rows.is_empty())
                .then(|| Box::new(EventInputs::from_event(event, ts)));
            Completed::Rows {
                trace,
                work,
                inputs,
                rows,
                payload_bytes: payload.len(),
                ack,
            }
        }
        Err(message) => {
            tracing::error!(%origin, event_id = %event.event_id, %message, "scoring panicked; dead-lettering the event");
            Completed::DeadLetter {
                dead_letter: DeadLetter::new(
                    origin,
                    format!("internal error: scoring panicked: {message}"),
                    &payload,
                ),
                ack,
            }
        }
    }
}

/// A panic caught while scoring one event, with the panic's message.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(super) struct ScoringPanic {
    message: String,
}

impl ScoringPanic {
    fn of(panic: &(dyn std::any::Any + Send)) -> ScoringPanic {
        let message = if let Some(s) = panic.downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = panic.downcast_ref::<String>() {
            s.clone()
        } else {
            "unknown panic".into()
        };
        ScoringPanic { message }
    }
}

/// Polls a future and turns a panic into [`ScoringPanic`].
pub(super) struct CatchUnwind<'a, T>(Pin<&'a mut (dyn Future<Output = T> + Send + 'a)>);

impl<T> Future for CatchUnwind<'_, T> {
    type Output = Result<T, ScoringPanic>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(ScoringPanic::of(panic.as_ref()))),
        }
    }
}
