//! The topology itself: [`Pipeline`] spawns the stages, joins them by bounded channels, and
//! finishes the source once everything it handed out is written or abandoned.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use super::batching::{BatchOptions, batch_stage};
use super::read::{Decoder, source_stage};
use super::scoring::score_stage;
use super::types::{Completed, EventTransform, Knobs, PipelineError, ProgressFn, SecondPass, join};
use crate::pipeline::config::PipelineConfig;
use crate::score::Scorer;
use crate::second_pass::JudgedOutput;
use crate::sources::{Source, SourceMessage};
use crate::stores::Sink;
use crate::stores::config::SinkConfig;
use crate::telemetry::summary::Summary;

/// A configured topology, ready to [`run`](Pipeline::run).
pub struct Pipeline {
    pub(super) source: Box<dyn Source>,
    pub(super) sink: Box<dyn Sink>,
    pub(super) scorer: Arc<Scorer>,
    pub(super) options: Knobs,
    pub(super) transform: Option<EventTransform>,
    pub(super) progress: Option<ProgressFn>,
    pub(super) alerts: Option<crate::alerts::AlertHandle>,
    pub(super) metrics: Option<crate::telemetry::PipelineMetrics>,
    pub(super) evaluations: Option<crate::telemetry::evaluations::EvaluationSender>,
    pub(super) second_pass: Option<SecondPass>,
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
        let mut options = Knobs::new(pipeline, batching);
        // A source whose senders wait for their rows (an OTLP exporter sends one request at a
        // time) asks for batches to be written sooner.
        if let Some(linger) = source.batch_linger() {
            options.flush_interval = options
                .flush_interval
                .min(linger.max(Duration::from_millis(1)));
        }
        Pipeline {
            source,
            sink,
            scorer,
            options,
            transform: None,
            progress: None,
            alerts: None,
            metrics: None,
            evaluations: None,
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
    /// [`lossless`](crate::alerts::AlertHandle::lossless), as in a backfill).
    pub fn with_alerts(mut self, alerts: crate::alerts::AlertHandle) -> Pipeline {
        self.alerts = Some(alerts);
        self
    }

    /// Record OpenTelemetry metrics (events, Φ, judge, sink batches).
    pub fn with_metrics(mut self, metrics: crate::telemetry::PipelineMetrics) -> Pipeline {
        self.metrics = Some(metrics);
        self
    }

    /// Send every row as an evaluation event (`[telemetry] evaluations`; never blocking: a
    /// full queue drops and counts).
    pub fn with_evaluations(
        mut self,
        evaluations: crate::telemetry::evaluations::EvaluationSender,
    ) -> Pipeline {
        self.evaluations = Some(evaluations);
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
            evaluations,
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
        // The scoring tasks hand over their completions a run at a time (up to
        // MAX_EVENTS_PER_TASK events per message): as many events fit as before.
        let (done_tx, done_rx) = mpsc::channel::<Vec<Completed>>(
            capacity
                .div_ceil(super::scoring::MAX_EVENTS_PER_TASK)
                .max(2),
        );

        let decoder = Arc::new(Decoder {
            max_event_bytes: options.max_event_bytes,
            transform,
            dead_letter_route: source.dead_letter_route(),
        });
        let source_task = tokio::spawn(source_stage(source, raw_tx, shutdown, metrics.clone()));
        let judge_observer = match (&planner, &judge_stats) {
            (Some(planner), Some(stats)) => {
                Some((Arc::clone(stats), planner.series_key().to_vec()))
            }
            _ => None,
        };
        let score_task = tokio::spawn(score_stage(
            raw_rx,
            decoder,
            done_tx,
            scorer,
            options.workers,
            options.store_inputs,
            planner,
        ));
        let (stage_task, judged_rx) = spawn_judge_stage(stage, capacity);
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
                evaluations,
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
        let mut source = source_result?;
        let finish_result = source.finish().await;
        summary.source = source.source.report();
        sink.flush().await?;
        source.last_error?;
        finish_result?;
        summary.llm = usage_scorer.llm_usage().since(&usage_before);
        summary.probes = usage_scorer.probe_usage().since(&probes_before);
        summary.elapsed = started.elapsed();
        Ok(summary)
    }
}

/// The second pass's judge stage on a task of its own, and the channel its judged rows come
/// back to the batcher on (neither without a second pass).
fn spawn_judge_stage(
    stage: Option<crate::second_pass::JudgeStage>,
    capacity: usize,
) -> (
    Option<tokio::task::JoinHandle<()>>,
    Option<mpsc::Receiver<JudgedOutput>>,
) {
    match stage {
        Some(stage) => {
            let (tx, rx) = mpsc::channel::<JudgedOutput>(capacity);
            (Some(tokio::spawn(stage.run(tx))), Some(rx))
        }
        None => (None, None),
    }
}
