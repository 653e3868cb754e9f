//! Pipeline topology: sources → decode/validate → scorer pool → batcher → sinks
//! (`ARCHITECTURE.md`, "The topology").
//!
//! Back-pressure is structural (bounded channels). A message is acknowledged to its source
//! ([`AckToken::ack`]) only after the sink has durably written everything it produced (its rows or
//! its dead letter), so a Kafka offset is never committed ahead of the data.
//!
//! ```text
//! source task ──raw──▶ decode task ──work──▶ dispatcher ─spawn ≤ workers─▶ ──done──▶ batcher ─▶ writer ─▶ sink
//!                          └──────────── dead letters ───────────────────────────▲            │
//!                                          judge stage ──judged rows────────────┘            │
//!                                               ▲ work queue / Kafka work topic ◀─ selected ──┘
//! ```
//!
//! With a second pass ([`crate::judging`]), the scorer's planner selects events for the LLM
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

pub mod config;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, mpsc, watch};

use crate::alert::config::SeriesLabel;
use crate::evaluation::{DeadLetter, EvaluationRow};
use crate::event::Event;
use crate::judging::{JudgeStage, JudgeWork, JudgedOutput, Planner, WorkError, WorkSink};
use crate::pipeline::config::PipelineConfig;
use crate::review::EventInputs;
use crate::score::{Scorer, now_rfc3339};
use crate::sink::config::SinkConfig;
use crate::sink::{Batch, Sink, SinkError};
use crate::source::{AckToken, Source, SourceError, SourceMessage};
use crate::stats::RunStats;
use crate::summary::Summary;

/// Rough size of one serialized row, for `batch_bytes` accounting.
const ROW_BYTES_ESTIMATE: usize = 1024;

/// The topology's knobs, read from `[pipeline]` and `[sink]` (zeros clamped to 1).
#[derive(Debug, Clone)]
struct Knobs {
    /// Events scored concurrently.
    workers: usize,
    /// Capacity of each bounded channel.
    channel_capacity: usize,
    /// Larger payloads are dead-lettered unread.
    max_event_bytes: usize,
    /// Write a batch at this many rows plus dead letters …
    batch_rows: usize,
    /// … or at about this many bytes …
    batch_bytes: usize,
    /// … or when its oldest entry has waited this long.
    flush_interval: Duration,
    /// Hand each scored event's inputs to the sink (`[sink] store_inputs`).
    store_inputs: bool,
    /// Batches being written at once, at most (`[sink] inflight_batches`).
    inflight_batches: usize,
}

impl Knobs {
    fn new(pipeline: &PipelineConfig, sink: &SinkConfig) -> Knobs {
        Knobs {
            workers: pipeline.workers.max(1),
            channel_capacity: pipeline.channel_capacity.max(1),
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
    /// A pipeline task ended abnormally.
    #[error("pipeline task failed: {0}")]
    Task(String),
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

/// A configured topology, ready to [`run`](Pipeline::run).
pub struct Pipeline {
    source: Box<dyn Source>,
    sink: Box<dyn Sink>,
    scorer: Arc<Scorer>,
    options: Knobs,
    transform: Option<EventTransform>,
    progress: Option<ProgressFn>,
    alerts: Option<crate::alert::AlertHandle>,
    metrics: Option<crate::telemetry::PipelineMetrics>,
    second_pass: Option<SecondPass>,
}

/// The second, LLM-judged pass of a run (see [`crate::judging`]).
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
    pub stats: Arc<crate::judging::JudgeStats>,
}

/// A decoded event on its way to the scorer.
struct Work {
    event: Event,
    fallback_ts: String,
    origin: String,
    payload: Vec<u8>,
    ack: AckToken,
}

/// What one message became.
enum Completed {
    Rows {
        rows: Vec<EvaluationRow>,
        payload_bytes: usize,
        ack: AckToken,
        /// The event selected for the LLM judge, handed over once the rows are written.
        work: Option<Box<JudgeWork>>,
        /// The event's inputs for the sink (`[sink] store_inputs`).
        inputs: Option<Box<EventInputs>>,
    },
    DeadLetter {
        dead_letter: DeadLetter,
        ack: AckToken,
    },
}

impl Pipeline {
    /// Wire `source` → `scorer` → `sink`, with the workers, channels and event size limit of
    /// `[pipeline]` and the batching of `[sink]`.
    pub fn new(
        source: Box<dyn Source>,
        sink: Box<dyn Sink>,
        scorer: Arc<Scorer>,
        pipeline: &PipelineConfig,
        batching: &SinkConfig,
    ) -> Pipeline {
        Pipeline {
            source,
            sink,
            scorer,
            options: Knobs::new(pipeline, batching),
            transform: None,
            progress: None,
            alerts: None,
            metrics: None,
            second_pass: None,
        }
    }

    /// Add the second, LLM-judged pass.
    pub fn with_second_pass(mut self, second_pass: SecondPass) -> Pipeline {
        self.second_pass = Some(second_pass);
        self
    }

    /// Rewrite each decoded event before scoring.
    pub fn with_transform(mut self, transform: EventTransform) -> Pipeline {
        self.transform = Some(transform);
        self
    }

    /// Report completed messages (progress bars).
    pub fn with_progress(mut self, progress: ProgressFn) -> Pipeline {
        self.progress = Some(progress);
        self
    }

    /// Feed every scored event's rows and every dead letter to the alert engine (never
    /// blocking: a full alert queue drops and counts the input — unless the handle is
    /// [`lossless`](crate::alert::AlertHandle::lossless), as in a backfill).
    pub fn with_alerts(mut self, alerts: crate::alert::AlertHandle) -> Pipeline {
        self.alerts = Some(alerts);
        self
    }

    /// Record OpenTelemetry metrics (events, Φ, judge, sink batches).
    pub fn with_metrics(mut self, metrics: crate::telemetry::PipelineMetrics) -> Pipeline {
        self.metrics = Some(metrics);
        self
    }

    /// Run until the source is exhausted or `shutdown` turns `true`, then drain, flush and
    /// finish. Returns what was written.
    pub async fn run(self, shutdown: watch::Receiver<bool>) -> Result<Summary, PipelineError> {
        let started = Instant::now();
        let Pipeline {
            mut source,
            sink,
            scorer,
            options,
            transform,
            progress,
            alerts,
            metrics,
            second_pass,
        } = self;
        if let Some(metrics) = &metrics {
            source.attach_metrics(metrics.clone());
        }
        let (planner, work_sink, stage, feeder, judge_stats) = match second_pass {
            Some(s) => (
                Some(s.planner),
                Some(s.work_sink),
                Some(s.stage),
                s.feeder,
                Some(s.stats),
            ),
            None => (None, None, None, None, None),
        };
        // LLM usage is reported per run, also when the scorer outlives it.
        let usage_before = scorer.llm_usage();
        let probes_before = scorer.probe_usage();
        let usage_scorer = Arc::clone(&scorer);
        let capacity = options.channel_capacity;
        let (raw_tx, raw_rx) = mpsc::channel::<SourceMessage>(capacity);
        let (work_tx, work_rx) = mpsc::channel::<Work>(capacity);
        let (done_tx, done_rx) = mpsc::channel::<Completed>(capacity);

        let dead_letter_route = source.dead_letter_route();
        let source_task = tokio::spawn(source_stage(source, raw_tx, shutdown, metrics.clone()));
        let decode_task = tokio::spawn(decode_stage(
            raw_rx,
            work_tx,
            done_tx.clone(),
            options.max_event_bytes,
            transform,
            dead_letter_route,
        ));
        let judge_observer = match (&planner, &judge_stats) {
            (Some(planner), Some(stats)) => {
                Some((Arc::clone(stats), planner.series_key().to_vec()))
            }
            _ => None,
        };
        let score_task = tokio::spawn(score_stage(
            work_rx,
            done_tx,
            scorer,
            options.workers,
            options.store_inputs,
            planner,
        ));
        let (judged_tx, judged_rx) = match &stage {
            Some(_) => {
                let (tx, rx) = mpsc::channel::<JudgedOutput>(capacity);
                (Some(tx), Some(rx))
            }
            None => (None, None),
        };
        let stage_task = match (stage, judged_tx) {
            (Some(stage), Some(tx)) => Some(tokio::spawn(stage.run(tx))),
            _ => None,
        };
        let batch_task = tokio::spawn(batch_stage(
            done_rx,
            judged_rx,
            sink,
            BatchOptions {
                knobs: options,
                progress,
                alerts,
                metrics,
                work_sink: work_sink.clone(),
                judge: judge_observer,
            },
        ));

        let batch_result = join("batcher", batch_task).await;
        // Whatever happened, no more work will be handed over: let the judge stage finish.
        if let Some(work_sink) = &work_sink {
            work_sink.close();
        }
        let stage_failed = !matches!(batch_result, Ok(Ok(_)));
        if let Some(task) = stage_task {
            if stage_failed {
                task.abort();
            }
            let _ = task.await;
        }
        let score_result = join("scorer", score_task).await;
        let decode_result = join("decoder", decode_task).await;
        let source_result = join("source", source_task).await;
        let work_source = match feeder {
            Some(feeder) => Some(join("judge work consumer", feeder).await?),
            None => None,
        };

        let (mut summary, mut sink) = batch_result??;
        if let Some(mut work_source) = work_source {
            // Commit the judged (and shed) work.
            work_source.finish().await?;
        }
        if let Some(stats) = &judge_stats {
            summary.judge_pass = Some(stats.snapshot());
            summary.estimates = stats.estimates();
        }
        // Every event is scored: store the verdicts the durable judge cache still queues.
        usage_scorer.flush().await;
        score_result??;
        decode_result?;
        let mut source = source_result?;
        let finish_result = source.finish().await;
        sink.flush().await?;
        source.last_error?;
        finish_result?;
        summary.llm = usage_scorer.llm_usage().since(&usage_before);
        summary.probes = usage_scorer.probe_usage().since(&probes_before);
        summary.elapsed = started.elapsed();
        Ok(summary)
    }
}

async fn join<T>(name: &str, handle: tokio::task::JoinHandle<T>) -> Result<T, PipelineError> {
    handle
        .await
        .map_err(|e| PipelineError::Task(format!("{name}: {e}")))
}

/// The source after its stage ended, with the error that ended it, if any.
struct SourceOutcome {
    source: Box<dyn Source>,
    last_error: Result<(), SourceError>,
}

impl SourceOutcome {
    async fn finish(&mut self) -> Result<(), SourceError> {
        self.source.finish().await
    }
}

async fn source_stage(
    mut source: Box<dyn Source>,
    raw_tx: mpsc::Sender<SourceMessage>,
    mut shutdown: watch::Receiver<bool>,
    metrics: Option<crate::telemetry::PipelineMetrics>,
) -> SourceOutcome {
    let mut last_error = Ok(());
    // Whether anyone can still ask for shutdown (the sender may be dropped).
    let mut watching = true;
    loop {
        if watching && *shutdown.borrow() {
            tracing::info!("shutdown requested; stopping the source and draining");
            source.stop();
            break;
        }
        let next = tokio::select! {
            biased;
            changed = shutdown.changed(), if watching => {
                watching = changed.is_ok();
                continue;
            }
            () = raw_tx.closed() => {
                // Downstream stopped (sink failure); it reports its own error. Checked here too
                // so a source idling at EOF (follow, Kafka) does not keep the run alive.
                tracing::debug!("downstream stopped; stopping the source");
                source.stop();
                break;
            }
            next = source.next() => next,
        };
        match next {
            Ok(Some(message)) => {
                if let Some(metrics) = &metrics {
                    metrics.consumed();
                }
                if raw_tx.send(message).await.is_err() {
                    // Downstream stopped (sink failure); it reports its own error.
                    source.stop();
                    break;
                }
            }
            Ok(None) => break,
            Err(error) => {
                tracing::error!(%error, "source failed; draining what was read");
                source.stop();
                last_error = Err(error);
                break;
            }
        }
    }
    SourceOutcome { source, last_error }
}

/// The one place a payload becomes an event or a dead letter: the dead letter goes to the
/// source's own route when it has one (the Kafka dead-letter topic), else to the sink.
async fn decode_stage(
    mut raw_rx: mpsc::Receiver<SourceMessage>,
    work_tx: mpsc::Sender<Work>,
    done_tx: mpsc::Sender<Completed>,
    max_event_bytes: usize,
    transform: Option<EventTransform>,
    dead_letter_route: Option<Arc<dyn crate::source::DeadLetterRoute>>,
) {
    loop {
        let message = tokio::select! {
            biased;
            () = work_tx.closed() => return,
            () = done_tx.closed() => return,
            message = raw_rx.recv() => match message {
                Some(message) => message,
                None => return,
            },
        };
        let SourceMessage {
            payload,
            origin,
            ack,
            source_time,
        } = message;
        // The event time of an event without `ts`: the source's own time of the message (stable
        // across redelivery), else the receive time.
        let fallback_ts = source_time.unwrap_or_else(now_rfc3339);
        match Event::decode_with_limit(&payload, max_event_bytes) {
            Ok(mut event) => {
                if let Some(transform) = &transform {
                    transform(&mut event);
                }
                let work = Work {
                    event,
                    fallback_ts,
                    origin,
                    payload,
                    ack,
                };
                if work_tx.send(work).await.is_err() {
                    return;
                }
            }
            Err(error) => {
                tracing::debug!(%origin, %error, "dead letter");
                if let Some(route) = &dead_letter_route {
                    route.send(payload, origin, error.to_string(), ack);
                    continue;
                }
                let dead_letter = DeadLetter::new(origin, error.to_string(), &payload);
                if done_tx
                    .send(Completed::DeadLetter { dead_letter, ack })
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

/// Most events one scoring task takes at once.
const MAX_EVENTS_PER_TASK: usize = 32;

/// Longest stretch a scoring task scores without yielding to the other tasks of its runtime
/// thread (the alert engine, the batcher, the writer, the source): about 20 events of the
/// release build. Yielding after every event cost a fifth of the throughput (measured).
const SCORING_SLICE: Duration = Duration::from_micros(1_000);

/// The scorer pool: at most `workers` scoring tasks at a time, each holding a permit. A task
/// scores a run of events one after another: the first that arrived plus, when events queue up, a
/// fair share of the queue (queued / workers, at most [`MAX_EVENTS_PER_TASK`]). So at most
/// `workers` events are in flight, a lone event is scored at once, and under a backlog the
/// per-event cost of spawning a task and taking a permit is paid once per run. A run yields to
/// the thread's other tasks every [`SCORING_SLICE`] of scoring. (Long-lived workers
/// sharing one receiver were tried: the runtime then wakes the next worker in the current
/// thread's LIFO slot, where the other thread cannot steal it, and two cores score like one.)
async fn score_stage(
    mut work_rx: mpsc::Receiver<Work>,
    done_tx: mpsc::Sender<Completed>,
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
            .map_err(|e| PipelineError::Task(format!("scorer pool: {e}")))?;
        let share = (work_rx.len() / workers).min(MAX_EVENTS_PER_TASK - 1);
        let mut run = vec![first];
        while run.len() <= share {
            match work_rx.try_recv() {
                Ok(work) => run.push(work),
                Err(_) => break,
            }
        }
        let scorer = Arc::clone(&scorer);
        let done_tx = done_tx.clone();
        let planner = planner.clone();
        tokio::spawn(async move {
            let mut slice_started = Instant::now();
            for work in run {
                if slice_started.elapsed() >= SCORING_SLICE {
                    // Scoring is CPU work that never waits: let the tasks queued on this thread
                    // (the alert engine, the writer, the source) run.
                    tokio::task::yield_now().await;
                    slice_started = Instant::now();
                }
                let completed = score_one(&scorer, work, planner.as_deref(), store_inputs).await;
                // A closed channel means the batcher failed; it reports the error (the rest of
                // the run is not acknowledged, so a source that tracks offsets redelivers it).
                if done_tx.send(completed).await.is_err() {
                    break;
                }
            }
            drop(permit);
        });
    }
    Ok(())
}

/// Score one event; a panic in scoring becomes a dead letter carrying the original payload.
async fn score_one(
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
    // One span per event (exported over OTLP when telemetry traces are on).
    let span = tracing::info_span!(
        "score_event",
        event_id = %event.event_id,
        app_id = event.app_id.as_deref(),
        agent_id = event.agent_id.as_deref(),
        agent_version = event.agent_version.as_deref(),
        model = event.model.as_deref(),
        %origin,
    );
    let scoring = tracing::Instrument::instrument(scorer.score_at(&event, &fallback_ts), span);
    match CatchUnwind(Box::pin(scoring)).await {
        Ok(rows) => {
            let ts = rows.first().map_or(fallback_ts.as_str(), |r| r.ts.as_str());
            let work = planner.and_then(|p| p.plan(&event, &rows, ts).map(Box::new));
            let inputs = (store_inputs && !rows.is_empty())
                .then(|| Box::new(EventInputs::from_event(event, ts)));
            Completed::Rows {
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

/// Polls a future and turns a panic into `Err(message)`.
struct CatchUnwind<'a, T>(Pin<Box<dyn Future<Output = T> + Send + 'a>>);

impl<T> Future for CatchUnwind<'_, T> {
    type Output = Result<T, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(panic_message(panic.as_ref()))),
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".into()
    }
}

/// Everything that watches what the pipeline completes, fed in one place: the run statistics
/// (the summary and the calibrated estimates), the OpenTelemetry instruments and the alert
/// engine.
struct Observers {
    stats: RunStats,
    metrics: Option<crate::telemetry::PipelineMetrics>,
    alerts: Option<crate::alert::AlertHandle>,
    /// The second pass's counters and estimates, and the series key of the estimates.
    judge: Option<(Arc<crate::judging::JudgeStats>, Vec<SeriesLabel>)>,
    /// The series text of the row being observed (one buffer for the run, not one per row).
    series: String,
}

impl Observers {
    /// One scored event's rows, or one judged row.
    async fn rows(&mut self, rows: &[EvaluationRow], event: bool) {
        if event {
            self.stats.events += 1;
        }
        if let Some(metrics) = &self.metrics {
            metrics.scored(rows);
        }
        if let Some(alerts) = &self.alerts {
            alerts
                .submit(crate::alert::AlertInput::Rows(rows.to_vec()))
                .await;
        }
        for row in rows {
            self.stats.observe_row(row);
            if let Some((stats, key)) = &self.judge {
                crate::judging::planner::write_series(row, key, &mut self.series);
                stats.observe_estimate(row, &self.series);
            }
        }
    }

    /// One dead letter.
    async fn dead_letter(&mut self, dead_letter: &DeadLetter) {
        self.stats.observe_dead_letter(dead_letter);
        if let Some(metrics) = &self.metrics {
            metrics.dead_lettered();
        }
        if let Some(alerts) = &self.alerts {
            alerts.submit(crate::alert::AlertInput::DeadLetter).await;
        }
    }
}

/// Rows, dead letters and tokens of the batch being filled.
#[derive(Default)]
struct PendingBatch {
    batch: Batch,
    acks: Vec<AckToken>,
    /// Work selected for the LLM judge, handed over once the batch is written.
    work: Vec<JudgeWork>,
    /// The line-rate pass is done: after this batch, close the work hand-over.
    last_line_rate: bool,
    /// Source messages among `acks` (the rest acknowledge judged work).
    messages: u64,
    bytes: usize,
    entries: usize,
    opened_at: Option<tokio::time::Instant>,
}

impl PendingBatch {
    /// Whether the batch reached `batch_rows` entries or `batch_bytes` and must be written.
    fn is_full(&self, knobs: &Knobs) -> bool {
        self.entries >= knobs.batch_rows || self.bytes >= knobs.batch_bytes
    }
}

/// Add one completed source message (its rows, or its dead letter) to the pending batch.
async fn absorb(pending: &mut PendingBatch, observers: &mut Observers, completed: Completed) {
    match completed {
        Completed::Rows {
            rows,
            payload_bytes,
            ack,
            work,
            inputs,
        } => {
            observers.rows(&rows, true).await;
            if let Some(inputs) = inputs {
                pending.bytes += payload_bytes;
                pending.batch.inputs.push(*inputs);
            }
            pending.entries += rows.len().max(1);
            pending.bytes += payload_bytes + rows.len() * ROW_BYTES_ESTIMATE;
            pending.batch.rows.extend(rows);
            pending.acks.push(ack);
            if let Some(work) = work {
                pending.work.push(*work);
            }
        }
        Completed::DeadLetter { dead_letter, ack } => {
            observers.dead_letter(&dead_letter).await;
            pending.entries += 1;
            pending.bytes += dead_letter.payload.len() + ROW_BYTES_ESTIMATE;
            pending.batch.dead_letters.push(dead_letter);
            pending.acks.push(ack);
        }
    }
    observers.stats.messages += 1;
    pending.messages += 1;
}

/// What the batcher needs besides its channels and the sink.
struct BatchOptions {
    knobs: Knobs,
    progress: Option<ProgressFn>,
    alerts: Option<crate::alert::AlertHandle>,
    metrics: Option<crate::telemetry::PipelineMetrics>,
    work_sink: Option<Arc<dyn WorkSink>>,
    judge: Option<(Arc<crate::judging::JudgeStats>, Vec<SeriesLabel>)>,
}

/// Receive from an optional channel (pending forever without one).
async fn recv_opt<T>(rx: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn batch_stage(
    mut done_rx: mpsc::Receiver<Completed>,
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
    } = options;
    let mut observers = Observers {
        stats: RunStats::default(),
        metrics: metrics.clone(),
        alerts,
        judge,
        series: String::new(),
    };
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
                    if pending.opened_at.is_none() {
                        pending.opened_at = Some(tokio::time::Instant::now());
                    }
                    absorb(&mut pending, &mut observers, completed).await;
                    // Take what else is already waiting without going back through the select
                    // (and its flush timer) for every event; stop at the batch limits. Each one
                    // spends the task's cooperative budget as `recv` would, so the batcher still
                    // yields regularly to the tasks it feeds (the alert engine, the writer).
                    while !pending.is_full(&options) {
                        match done_rx.try_recv() {
                            Ok(completed) => {
                                absorb(&mut pending, &mut observers, completed).await;
                                tokio::task::consume_budget().await;
                            }
                            Err(_) => break,
                        }
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
                Some(JudgedOutput { rows, ack }) => {
                    if pending.opened_at.is_none() {
                        pending.opened_at = Some(tokio::time::Instant::now());
                    }
                    observers.rows(&rows, false).await;
                    pending.entries += rows.len().max(1);
                    pending.bytes += rows.len() * ROW_BYTES_ESTIMATE;
                    pending.batch.rows.extend(rows);
                    pending.acks.push(ack);
                }
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
async fn sleep_until_some(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Pass the pending batch to the writer task; false when the writer has stopped (failed).
async fn hand_over(batch_tx: &mpsc::Sender<PendingBatch>, pending: &mut PendingBatch) -> bool {
    let batch = std::mem::take(pending);
    if batch.acks.is_empty() && batch.batch.is_empty() && !batch.last_line_rate {
        return true;
    }
    batch_tx.send(batch).await.is_ok()
}

/// Write batches and acknowledge each, in order, once the sink has it and every batch before
/// it; stops at the first sink error (the batcher then sees the channel closed; batches still in
/// flight are not acknowledged, so their messages are redelivered) and returns the sink when the
/// batcher is done.
///
/// Up to `inflight` batches are written at once when the sink offers concurrent writers
/// ([`Sink::concurrent_writer`]): while one insert waits on the server the next is already
/// sent. Completions are taken in batch order, so acknowledgements, work hand-over and progress
/// happen exactly as with one writer.
async fn write_stage(
    mut batch_rx: mpsc::Receiver<PendingBatch>,
    sink: Box<dyn Sink>,
    inflight: usize,
    progress: Option<ProgressFn>,
    metrics: Option<crate::telemetry::PipelineMetrics>,
    work_sink: Option<Arc<dyn WorkSink>>,
) -> Result<Box<dyn Sink>, PipelineError> {
    use futures::stream::{FuturesOrdered, StreamExt};
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
            Some((writer, stored)) = in_flight.next(), if !in_flight.is_empty() => {
                idle.push(writer);
                acknowledge(stored?, &progress, work_sink.as_deref()).await?;
            }
            received = batch_rx.recv(), if open && !idle.is_empty() => match received {
                Some(pending) => match idle.pop() {
                    Some(writer) => {
                        in_flight.push_back(write_batch(writer, pending, metrics.clone()));
                    }
                    // Not reachable: the branch runs only with an idle writer.
                    None => return Err(PipelineError::Task("no sink writer is free".into())),
                },
                None => open = false,
            },
        }
    }
    // Every writer is idle again; the first keeps going (the caller flushes it), the others
    // flush now.
    let mut writers = idle.into_iter();
    let Some(sink) = writers.next() else {
        return Err(PipelineError::Task("the sink writer was lost".into()));
    };
    for mut other in writers {
        other.flush().await?;
    }
    Ok(sink)
}

/// A batch the sink has stored, waiting for its turn to be acknowledged.
struct Stored {
    acks: Vec<AckToken>,
    work: Vec<JudgeWork>,
    messages: u64,
    last_line_rate: bool,
}

/// Write the pending batch with `sink`; the sink comes back with the outcome so that it can
/// take the next batch.
async fn write_batch(
    mut sink: Box<dyn Sink>,
    pending: PendingBatch,
    metrics: Option<crate::telemetry::PipelineMetrics>,
) -> (Box<dyn Sink>, Result<Stored, PipelineError>) {
    let PendingBatch {
        batch,
        acks,
        work,
        messages,
        last_line_rate,
        ..
    } = pending;
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
async fn acknowledge(
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
    for ack in acks {
        ack.ack();
    }
    if let Some(progress) = progress {
        progress(messages);
    }
    if last_line_rate && let Some(work_sink) = work_sink {
        work_sink.close();
    }
    Ok(())
}
