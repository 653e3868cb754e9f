//! The exporter itself: the meter and tracer providers, the pipeline's instruments, the
//! observable instruments of the judges, the second pass, the agreement board and the
//! components' outages, and the span layers (module documentation of `telemetry`).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{
    Counter, Gauge, Histogram, Meter, MeterProvider as _, ObservableCounter,
};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider,
};
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{FilterExt as _, FilterFn, LevelFilter, Targets, filter_fn};
use tracing_subscriber::{Registry, reload};

use crate::evaluation::{EvaluationRow, Metric, RowStatus};
use crate::judge::JudgeTotals;
use crate::telemetry::config::TelemetryConfig;

/// Why telemetry could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// An OTLP exporter could not be built.
    #[error("cannot build the OTLP exporter")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
    /// Flushing or shutting down an exporter failed.
    #[error("telemetry shutdown: {what}: {source}")]
    Shutdown {
        /// Which exporter (`metrics`, `spans`).
        what: &'static str,
        /// The SDK's error.
        #[source]
        source: opentelemetry_sdk::error::OTelSdkError,
    },
}

/// The instruments the pipeline records into.
#[derive(Debug, Clone)]
pub struct PipelineMetrics {
    events_consumed: Counter<u64>,
    events_scored: Counter<u64>,
    events_dead_lettered: Counter<u64>,
    phi: Histogram<f64>,
    judge_calls: Counter<u64>,
    judge_cache_hits: Counter<u64>,
    judge_fallbacks: Counter<u64>,
    judge_tokens: Counter<u64>,
    judge_latency: Histogram<f64>,
    score_latency: Histogram<f64>,
    sink_batch_size: Histogram<u64>,
    sink_batch_latency: Histogram<f64>,
    consumer_lag: Gauge<i64>,
}

impl PipelineMetrics {
    /// Create the instruments on `meter`.
    pub fn new(meter: &Meter) -> PipelineMetrics {
        PipelineMetrics {
            events_consumed: meter
                .u64_counter("sqlgrade.events.consumed")
                .with_description("Messages taken from the source")
                .build(),
            events_scored: meter
                .u64_counter("sqlgrade.events.scored")
                .with_description("Events scored")
                .build(),
            events_dead_lettered: meter
                .u64_counter("sqlgrade.events.dead_lettered")
                .with_description("Messages dead-lettered")
                .build(),
            phi: meter
                .f64_histogram("sqlgrade.stef.phi")
                .with_description("STEF score Φ (0–100)")
                .with_boundaries(vec![10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0])
                .build(),
            judge_calls: meter
                .u64_counter("sqlgrade.judge.calls")
                .with_description("LLM judge verdicts not served from a cache")
                .build(),
            judge_cache_hits: meter
                .u64_counter("sqlgrade.judge.cache_hits")
                .with_description("Judge verdicts served from a cache")
                .build(),
            judge_fallbacks: meter
                .u64_counter("sqlgrade.judge.fallbacks")
                .with_description(
                    "Rows scored by the deterministic fallback after the LLM judge failed",
                )
                .build(),
            judge_tokens: meter
                .u64_counter("sqlgrade.judge.tokens")
                .with_description("LLM tokens spent (kind = prompt | completion)")
                .build(),
            judge_latency: meter
                .f64_histogram("sqlgrade.judge.latency")
                .with_unit("s")
                .with_description("Scoring latency of rows judged by an LLM")
                .build(),
            score_latency: meter
                .f64_histogram("sqlgrade.score.latency")
                .with_unit("s")
                .with_description("STEF scoring latency per event")
                .build(),
            sink_batch_size: meter
                .u64_histogram("sqlgrade.sink.batch.size")
                .with_description("Rows plus dead letters per sink write")
                .build(),
            sink_batch_latency: meter
                .f64_histogram("sqlgrade.sink.batch.latency")
                .with_unit("s")
                .with_description("Sink write latency")
                .build(),
            consumer_lag: meter
                .i64_gauge("sqlgrade.consumer.lag")
                .with_description("Messages behind the partition's high watermark")
                .build(),
        }
    }

    /// `messages` were taken from the source.
    pub fn consumed(&self, messages: usize) {
        self.events_consumed
            .add(u64::try_from(messages).unwrap_or(u64::MAX), &[]);
    }

    /// One event's rows were produced.
    pub fn scored(&self, rows: &[EvaluationRow]) {
        if rows.iter().any(|r| r.metric != Metric::StefJudged) {
            self.events_scored.add(1, &[]);
        }
        for row in rows
            .iter()
            .filter(|r| matches!(r.metric, Metric::Stef | Metric::StefJudged))
        {
            if row.metric == Metric::Stef {
                self.phi.record(row.value, &[]);
            }
            let Some(stef) = &row.stef else { continue };
            let seconds = stef.latency_us as f64 / 1e6;
            self.score_latency.record(seconds, &[]);
            if stef.judge_cached {
                self.judge_cache_hits.add(1, &[]);
            } else if stef.judge.starts_with("llm:") {
                self.judge_calls.add(1, &[]);
                self.judge_latency.record(seconds, &[]);
            }
            if row.status == RowStatus::JudgeFallback {
                self.judge_fallbacks.add(1, &[]);
            }
            if stef.prompt_tokens > 0 {
                self.judge_tokens
                    .add(stef.prompt_tokens, &[KeyValue::new("kind", "prompt")]);
            }
            if stef.completion_tokens > 0 {
                self.judge_tokens.add(
                    stef.completion_tokens,
                    &[KeyValue::new("kind", "completion")],
                );
            }
        }
    }

    /// A message was dead-lettered.
    pub fn dead_lettered(&self) {
        self.events_dead_lettered.add(1, &[]);
    }

    /// A sink write of `entries` rows plus dead letters took `latency`.
    pub fn sink_batch(&self, entries: usize, latency: Duration) {
        self.sink_batch_size.record(entries as u64, &[]);
        self.sink_batch_latency.record(latency.as_secs_f64(), &[]);
    }

    /// Consumer lag of one partition.
    pub fn consumer_lag(&self, topic: &str, partition: i32, lag: i64) {
        self.consumer_lag.record(
            lag,
            &[
                KeyValue::new("topic", topic.to_string()),
                KeyValue::new("partition", i64::from(partition)),
            ],
        );
    }
}

/// The layer that turns `tracing` spans into OpenTelemetry spans (on the registry).
type SpanLayer = tracing_opentelemetry::OpenTelemetryLayer<Registry, SdkTracer>;

/// Where [`Telemetry::start`] installs its span exporter (registered by [`span_export_layer`]).
static SPAN_EXPORT: OnceLock<reload::Handle<Option<SpanLayer>, Registry>> = OnceLock::new();

/// Whether a span exporter is connected to the [`span_export_layer`]. While it is not, that
/// layer's filter turns the spans away, so a process that exports no traces (and leaves
/// [`EVENT_SPAN`] out of its logs, [`without_event_spans`]) does not build the per-event span at
/// all. Reloading the layer rebuilds `tracing`'s per-callsite interest, so the filter's answer,
/// cached per callsite, follows this flag as it changes.
static EXPORTING_SPANS: AtomicBool = AtomicBool::new(false);

/// The span every event is scored in (`pipeline::scoring`), with `event_id`, `app_id`,
/// `agent_id`, `agent_version`, `model` and `origin`.
pub const EVENT_SPAN: &str = "score_event";

/// A filter for a log layer that leaves the per-event span ([`EVENT_SPAN`]) out of it.
///
/// A text or JSON log layer formats the fields of every span it sees when the span starts,
/// whether or not anything is logged inside it: for [`EVENT_SPAN`] that was ~3 % of the
/// daemon's instructions (`CHANGELOG.md`, the scaling issue). What scoring logs carries
/// the event's id itself (e.g. the judge's fallback warning), so the log lines lose nothing;
/// the span still goes to OTLP when traces are on.
pub fn without_event_spans() -> FilterFn<impl Fn(&tracing::Metadata<'_>) -> bool> {
    // The hint keeps the layer's own level (`And` of two hints is the stricter); without one,
    // `tracing` cannot tell `log`'s bridge a maximum level, and every `log::debug!` of
    // sqlparser's (several per parsed token) becomes a record turned away later: +12 % of the
    // daemon's instructions when this was first tried.
    filter_fn(|meta| !(meta.is_span() && meta.name() == EVENT_SPAN))
        .with_max_level_hint(LevelFilter::TRACE)
}

/// Spans exported at most per OTLP request.
const SPAN_BATCH: usize = 2_048;
/// Spans buffered for export at most; beyond that new spans are dropped (counted by the SDK),
/// so a slow collector never slows scoring.
const SPAN_QUEUE: usize = 16_384;

/// A `tracing` layer, to be put directly on the [`Registry`] when the process starts, that
/// exports the `sqlgrade` target's spans (INFO and above) once [`Telemetry::start`] runs with
/// traces on, and does nothing before or after. Call it once per process: only the first
/// layer is connected (later ones stay inert).
pub fn span_export_layer() -> impl tracing_subscriber::Layer<Registry> + Send + Sync {
    let (layer, handle) = reload::Layer::new(None::<SpanLayer>);
    if SPAN_EXPORT.set(handle).is_err() {
        tracing::debug!("span_export_layer called twice; the later layer stays inert");
    }
    let exporting = filter_fn(|_| EXPORTING_SPANS.load(Ordering::Relaxed))
        .with_max_level_hint(LevelFilter::TRACE);
    layer.with_filter(span_targets().and(exporting))
}

fn span_targets() -> Targets {
    Targets::new().with_target("sqlgrade", tracing::Level::INFO)
}

/// A running OTLP pipeline (metrics, and spans when `traces` is on); call
/// [`Telemetry::shutdown`] to export the last values.
pub struct Telemetry {
    provider: SdkMeterProvider,
    tracer_provider: Option<SdkTracerProvider>,
    metrics: PipelineMetrics,
    /// Observable instruments, kept alive for as long as telemetry runs.
    observers: Vec<ObservableCounter<u64>>,
    gauges: Vec<opentelemetry::metrics::ObservableGauge<i64>>,
    f64_gauges: Vec<opentelemetry::metrics::ObservableGauge<f64>>,
}

impl Telemetry {
    /// Start periodic OTLP/HTTP export as `[telemetry]` says. With `traces` on, spans start
    /// flowing through the [`span_export_layer`] if the process installed one.
    pub fn start(config: &TelemetryConfig) -> Result<Telemetry, TelemetryError> {
        let exporter = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(config.metrics_url())
            .with_timeout(Duration::from_millis(config.export_timeout_ms.max(1)))
            .build()
            .map_err(TelemetryError::Exporter)?;
        let reader = PeriodicReader::builder(exporter)
            .with_interval(Duration::from_millis(config.export_interval_ms.max(1)))
            .build();
        let resource = Resource::builder()
            .with_service_name(config.service_name.clone())
            .build();
        let provider = SdkMeterProvider::builder()
            .with_reader(reader)
            .with_resource(resource.clone())
            .build();
        let metrics = PipelineMetrics::new(&provider.meter("sqlgrade"));
        let tracer_provider = if config.traces {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(config.traces_url())
                .with_timeout(Duration::from_millis(config.export_timeout_ms.max(1)))
                .build()
                .map_err(TelemetryError::Exporter)?;
            let batch = BatchConfigBuilder::default()
                .with_max_queue_size(SPAN_QUEUE)
                .with_max_export_batch_size(SPAN_BATCH)
                .with_scheduled_delay(Duration::from_millis(config.export_interval_ms.max(1)))
                .build();
            let processor = BatchSpanProcessor::builder(exporter)
                .with_batch_config(batch)
                .build();
            let tracer_provider = SdkTracerProvider::builder()
                .with_span_processor(processor)
                .with_resource(resource)
                .build();
            if let Some(slot) = SPAN_EXPORT.get() {
                let layer =
                    tracing_opentelemetry::layer().with_tracer(tracer_provider.tracer("sqlgrade"));
                // Set before the reload, which makes `tracing` ask the filter again.
                EXPORTING_SPANS.store(true, Ordering::Relaxed);
                if let Err(error) = slot.reload(Some(layer)) {
                    EXPORTING_SPANS.store(false, Ordering::Relaxed);
                    tracing::warn!(%error, "cannot connect the span exporter");
                }
            }
            Some(tracer_provider)
        } else {
            None
        };
        Ok(Telemetry {
            provider,
            tracer_provider,
            metrics,
            observers: Vec::new(),
            gauges: Vec::new(),
            f64_gauges: Vec::new(),
        })
    }

    /// A layer exporting the `sqlgrade` target's spans through this telemetry, for a
    /// subscriber built by the caller (`None` when traces are off). Not needed when the
    /// process installed [`span_export_layer`].
    pub fn span_layer<S>(&self) -> Option<impl tracing_subscriber::Layer<S> + use<S>>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        let provider = self.tracer_provider.as_ref()?;
        Some(
            tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("sqlgrade"))
                .with_filter(span_targets()),
        )
    }

    /// Export where the judge's verdicts came from as `sqlgrade.judge.cache.lookups`, an
    /// observable counter with attribute `result` = `memory_hit` | `durable_hit` | `miss`, read
    /// from `totals` (e.g. the scorer's judge totals) at each export. The rows' `judge_cached`
    /// flag cannot tell the in-memory cache from the durable one; this can.
    pub fn observe_judge(&mut self, totals: impl Fn() -> JudgeTotals + Send + Sync + 'static) {
        let counter = self
            .provider
            .meter("sqlgrade")
            .u64_observable_counter("sqlgrade.judge.cache.lookups")
            .with_description("LLM judge assessments by where the verdict came from")
            .with_callback(move |observer| {
                let t = totals();
                observer.observe(t.memory_hits(), &[KeyValue::new("result", "memory_hit")]);
                observer.observe(t.durable_hits, &[KeyValue::new("result", "durable_hit")]);
                observer.observe(
                    t.assessments.saturating_sub(t.cache_hits),
                    &[KeyValue::new("result", "miss")],
                );
            })
            .build();
        self.observers.push(counter);
    }

    /// Export what became of the evaluation events (`[telemetry] evaluations`) as
    /// `sqlgrade.evaluation_events`, an observable counter with attribute `outcome` = `sent` |
    /// `dropped_queue_full` | `refused` | `dropped_at_shutdown`, and
    /// `sqlgrade.evaluation_events.failed_attempts` (retried export attempts).
    pub fn observe_evaluation_events(
        &mut self,
        counts: impl Fn() -> crate::telemetry::stats::EvaluationEventCounts + Send + Sync + 'static,
    ) {
        let meter = self.provider.meter("sqlgrade");
        let counts = std::sync::Arc::new(counts);
        let read = std::sync::Arc::clone(&counts);
        self.observers.push(
            meter
                .u64_observable_counter("sqlgrade.evaluation_events")
                .with_description("Evaluation events (gen_ai.evaluation.result) by outcome")
                .with_callback(move |observer| {
                    let c = read();
                    for (outcome, n) in [
                        ("sent", c.sent),
                        ("dropped_queue_full", c.dropped_queue_full),
                        ("refused", c.refused),
                        ("dropped_at_shutdown", c.dropped_at_shutdown),
                    ] {
                        observer.observe(n, &[KeyValue::new("outcome", outcome)]);
                    }
                })
                .build(),
        );
        self.observers.push(
            meter
                .u64_observable_counter("sqlgrade.evaluation_events.failed_attempts")
                .with_description("Evaluation-event export attempts that failed and were retried")
                .with_callback(move |observer| observer.observe(counts().failed_attempts, &[]))
                .build(),
        );
    }

    /// Export each judge identity's agreement with human labels (from `read`, the agreement
    /// monitor's board): `sqlgrade.judge.agreement.kappa`, `….kappa_lower`, `….kappa_upper`,
    /// `….accuracy` and `….labelled`, with attributes `judge` (`stef` / `stef_judged`),
    /// `judge_identity`, `series` and `window` (`all` labels, or the `recent` window).
    pub fn observe_agreement(
        &mut self,
        read: impl Fn() -> Vec<crate::sampling::agreement::AgreementRow> + Send + Sync + 'static,
    ) {
        let meter = self.provider.meter("sqlgrade");
        let read = std::sync::Arc::new(read);
        type Pick = fn(&crate::sampling::agreement::AgreementSummary) -> Option<f64>;
        let instruments: [(&'static str, &'static str, Pick); 5] = [
            (
                "sqlgrade.judge.agreement.kappa",
                "Cohen's kappa of a judge identity against human labels",
                |s| s.kappa,
            ),
            (
                "sqlgrade.judge.agreement.kappa_lower",
                "Lower end of kappa's 95% interval",
                |s| s.kappa_interval.map(|i| i.0),
            ),
            (
                "sqlgrade.judge.agreement.kappa_upper",
                "Upper end of kappa's 95% interval",
                |s| s.kappa_interval.map(|i| i.1),
            ),
            (
                "sqlgrade.judge.agreement.accuracy",
                "Accuracy of a judge identity against human labels",
                |s| s.accuracy,
            ),
            (
                "sqlgrade.judge.agreement.labelled",
                "Human labels beside the judge identity's verdicts",
                |s| Some(s.labelled as f64),
            ),
        ];
        for (name, description, pick) in instruments {
            let read = std::sync::Arc::clone(&read);
            self.f64_gauges.push(
                meter
                    .f64_observable_gauge(name)
                    .with_description(description)
                    .with_callback(move |o| {
                        for row in read() {
                            for (window, summary) in [("all", &row.all), ("recent", &row.recent)] {
                                if let Some(value) = pick(summary) {
                                    o.observe(
                                        value,
                                        &[
                                            KeyValue::new("judge", row.key.metric.to_string()),
                                            KeyValue::new(
                                                "judge_identity",
                                                row.key.identity.clone(),
                                            ),
                                            KeyValue::new("series", row.key.series.clone()),
                                            KeyValue::new("window", window),
                                        ],
                                    );
                                }
                            }
                        }
                    })
                    .build(),
            );
        }
    }

    /// Export the components' outages, by `component`, read from the daemon's health registry:
    /// `sqlgrade.component.outages` (episodes, an observable counter) and
    /// `sqlgrade.component.outage_seconds` (time not `Ok` so far, a gauge) and
    /// `sqlgrade.component.failures` (failed attempts reported while not `Ok`, each retried; an
    /// observable counter).
    pub fn observe_outages(
        &mut self,
        read: impl Fn() -> std::collections::BTreeMap<String, crate::telemetry::stats::OutageStats>
        + Send
        + Sync
        + 'static,
    ) {
        let meter = self.provider.meter("sqlgrade");
        let read = std::sync::Arc::new(read);
        let episodes = std::sync::Arc::clone(&read);
        let failures = std::sync::Arc::clone(&read);
        self.observers.push(
            meter
                .u64_observable_counter("sqlgrade.component.failures")
                .with_description(
                    "Failed attempts a component reported while not Ok (each retried)",
                )
                .with_callback(move |o| {
                    for (component, outage) in failures() {
                        o.observe(outage.failures, &[KeyValue::new("component", component)]);
                    }
                })
                .build(),
        );
        self.observers.push(
            meter
                .u64_observable_counter("sqlgrade.component.outages")
                .with_description("Times a component left Ok (degraded or failed)")
                .with_callback(move |o| {
                    for (component, outage) in episodes() {
                        o.observe(
                            u64::from(outage.episodes),
                            &[KeyValue::new("component", component)],
                        );
                    }
                })
                .build(),
        );
        self.f64_gauges.push(
            meter
                .f64_observable_gauge("sqlgrade.component.outage_seconds")
                .with_description("Time a component was not Ok (degraded or failed)")
                .with_unit("s")
                .with_callback(move |o| {
                    for (component, outage) in read() {
                        o.observe(
                            outage.total.as_secs_f64(),
                            &[KeyValue::new("component", component)],
                        );
                    }
                })
                .build(),
        );
    }

    /// Export the second pass: `sqlgrade.judge.selected` (by `reason`), `.judged`,
    /// `.pass.cache_hits`, `.failures`, `.shed` (by `reason`) — observable counters;
    /// `sqlgrade.judge.queue.depth` and `.queue.oldest_wait` (s); `sqlgrade.judge.budget.spent`
    /// (by `kind` = requests | prompt_tokens | completion_tokens) and `.budget.cost`;
    /// `sqlgrade.judge.budget.left` (by `kind` = requests | tokens | cost, only for the caps that
    /// are set); and the calibrated estimates `sqlgrade.judge.estimate.phi` and
    /// `.estimate.correct_share` (by `series` and `bound` = estimate | lower | upper) with
    /// `.estimate.judged` (the judged uniform slice behind them).
    pub fn observe_judge_pass(
        &mut self,
        stats: std::sync::Arc<crate::telemetry::stats::JudgeStats>,
    ) {
        let meter = self.provider.meter("sqlgrade");
        self.observe_judge_pass_counts(&meter, &stats);
        self.observe_judge_pass_budget(&meter, &stats);
        self.observe_judge_pass_estimates(&meter, stats);
    }

    /// The second pass's counters (selected and shed by reason, judged, cache hits, failures,
    /// put back, paused) and its queue's gauges.
    fn observe_judge_pass_counts(
        &mut self,
        meter: &Meter,
        stats: &std::sync::Arc<crate::telemetry::stats::JudgeStats>,
    ) {
        /// A counter's name, description and the snapshot's number it reports.
        type PlainCounter = (&'static str, &'static str, fn(&Snapshot) -> u64);
        type Snapshot = crate::telemetry::stats::JudgeStatsSnapshot;
        let s = std::sync::Arc::clone(stats);
        self.observers.push(
            meter
                .u64_observable_counter("sqlgrade.judge.selected")
                .with_description("Events selected for the LLM judge, by reason")
                .with_callback(move |o| {
                    for (reason, n) in s.snapshot().reasons {
                        o.observe(n, &[KeyValue::new("reason", reason.as_str())]);
                    }
                })
                .build(),
        );
        let s = std::sync::Arc::clone(stats);
        self.observers.push(
            meter
                .u64_observable_counter("sqlgrade.judge.shed")
                .with_description("Selected events not judged, by reason")
                .with_callback(move |o| {
                    for (reason, n) in s.snapshot().shed {
                        o.observe(n, &[KeyValue::new("reason", reason.as_str())]);
                    }
                })
                .build(),
        );
        let plain: [PlainCounter; 5] = [
            (
                "sqlgrade.judge.judged",
                "stef_judged rows written (cache hits included)",
                |s| s.judged,
            ),
            (
                "sqlgrade.judge.pass.cache_hits",
                "Second-pass judgments answered from a cache (no budget)",
                |s| s.cache_hits,
            ),
            (
                "sqlgrade.judge.failures",
                "Second-pass judgments that failed (judge_error rows)",
                |s| s.failures,
            ),
            (
                "sqlgrade.judge.put_back",
                "Second-pass judgments put back to wait: the judge was unreachable",
                |s| s.put_back,
            ),
            (
                "sqlgrade.judge.paused",
                "Times the judge stage paused (its circuit opened on an unreachable judge)",
                |s| s.paused,
            ),
        ];
        for (name, description, read) in plain {
            let s = std::sync::Arc::clone(stats);
            self.observers.push(
                meter
                    .u64_observable_counter(name)
                    .with_description(description)
                    .with_callback(move |o| o.observe(read(&s.snapshot()), &[]))
                    .build(),
            );
        }
        let s = std::sync::Arc::clone(stats);
        self.gauges.push(
            meter
                .i64_observable_gauge("sqlgrade.judge.queue.depth")
                .with_description("Work waiting for the LLM judge")
                .with_callback(move |o| o.observe(s.snapshot().queue_depth, &[]))
                .build(),
        );
        let s = std::sync::Arc::clone(stats);
        self.f64_gauges.push(
            meter
                .f64_observable_gauge("sqlgrade.judge.queue.oldest_wait")
                .with_unit("s")
                .with_description("How long the oldest waiting work has waited")
                .with_callback(move |o| {
                    o.observe(s.snapshot().oldest_wait_ms as f64 / 1000.0, &[]);
                })
                .build(),
        );
    }

    /// The second pass's spend (requests, tokens, cost) and what is left under the daily caps.
    fn observe_judge_pass_budget(
        &mut self,
        meter: &Meter,
        stats: &std::sync::Arc<crate::telemetry::stats::JudgeStats>,
    ) {
        let s = std::sync::Arc::clone(stats);
        self.observers.push(
            meter
                .u64_observable_counter("sqlgrade.judge.budget.spent")
                .with_description("LLM spend of the second pass (kind = requests | prompt_tokens | completion_tokens)")
                .with_callback(move |o| {
                    let spent = s.snapshot().spent;
                    o.observe(spent.requests, &[KeyValue::new("kind", "requests")]);
                    o.observe(spent.prompt_tokens, &[KeyValue::new("kind", "prompt_tokens")]);
                    o.observe(
                        spent.completion_tokens,
                        &[KeyValue::new("kind", "completion_tokens")],
                    );
                })
                .build(),
        );
        let s = std::sync::Arc::clone(stats);
        self.f64_gauges.push(
            meter
                .f64_observable_gauge("sqlgrade.judge.budget.cost")
                .with_description("Cost of the second pass so far, at the configured prices")
                .with_callback(move |o| o.observe(s.snapshot().spent.cost, &[]))
                .build(),
        );
        let s = std::sync::Arc::clone(stats);
        self.f64_gauges.push(
            meter
                .f64_observable_gauge("sqlgrade.judge.budget.left")
                .with_description(
                    "Left today under each daily cap (kind = requests | tokens | cost)",
                )
                .with_callback(move |o| {
                    let (requests, tokens, cost) = s.snapshot().left_today;
                    if let Some(n) = requests {
                        o.observe(n as f64, &[KeyValue::new("kind", "requests")]);
                    }
                    if let Some(n) = tokens {
                        o.observe(n as f64, &[KeyValue::new("kind", "tokens")]);
                    }
                    if let Some(c) = cost {
                        o.observe(c, &[KeyValue::new("kind", "cost")]);
                    }
                })
                .build(),
        );
    }

    /// The calibrated estimates per series (Φ and the correct share, with their bounds) and the
    /// judged uniform slice behind them.
    fn observe_judge_pass_estimates(
        &mut self,
        meter: &Meter,
        stats: std::sync::Arc<crate::telemetry::stats::JudgeStats>,
    ) {
        for (name, description, share) in [
            (
                "sqlgrade.judge.estimate.phi",
                "Calibrated estimate of the LLM judge's mean Φ over all scored events (PPI)",
                false,
            ),
            (
                "sqlgrade.judge.estimate.correct_share",
                "Calibrated estimate of the share the LLM judge calls correct/likely_correct (PPI)",
                true,
            ),
        ] {
            let s = std::sync::Arc::clone(&stats);
            self.f64_gauges.push(
                meter
                    .f64_observable_gauge(name)
                    .with_description(description)
                    .with_callback(move |o| {
                        for (series, est) in s.estimates().series {
                            let e = if share {
                                est.correct_share()
                            } else {
                                est.phi()
                            };
                            let Some(e) = e else { continue };
                            let label = KeyValue::new("series", series.clone());
                            o.observe(e.mean, &[label.clone(), KeyValue::new("bound", "estimate")]);
                            if let (Some(lo), Some(hi)) = (e.lower, e.upper) {
                                o.observe(lo, &[label.clone(), KeyValue::new("bound", "lower")]);
                                o.observe(hi, &[label, KeyValue::new("bound", "upper")]);
                            }
                        }
                    })
                    .build(),
            );
        }
        let s = stats;
        self.gauges.push(
            meter
                .i64_observable_gauge("sqlgrade.judge.estimate.judged")
                .with_description("Judged uniform-slice events behind each series' estimate")
                .with_callback(move |o| {
                    for (series, est) in s.estimates().series {
                        o.observe(
                            i64::try_from(est.phi_correction.n).unwrap_or(i64::MAX),
                            &[KeyValue::new("series", series)],
                        );
                    }
                })
                .build(),
        );
    }

    /// The instruments (clone into the pipeline).
    pub fn metrics(&self) -> PipelineMetrics {
        self.metrics.clone()
    }

    /// Export what is pending now (blocking).
    pub fn flush(&self) -> Result<(), TelemetryError> {
        if let Some(tracer_provider) = &self.tracer_provider {
            tracer_provider
                .force_flush()
                .map_err(|source| TelemetryError::Shutdown {
                    what: "spans",
                    source,
                })?;
        }
        self.provider
            .force_flush()
            .map_err(|source| TelemetryError::Shutdown {
                what: "metrics",
                source,
            })
    }

    /// Export the last values and spans and stop (blocking). Disconnects the span exporter from
    /// the [`span_export_layer`].
    pub fn shutdown(self) -> Result<(), TelemetryError> {
        let mut spans = Ok(());
        if let Some(tracer_provider) = self.tracer_provider {
            EXPORTING_SPANS.store(false, Ordering::Relaxed);
            if let Some(slot) = SPAN_EXPORT.get()
                && let Err(error) = slot.reload(None)
            {
                tracing::warn!(%error, "cannot disconnect the span exporter");
            }
            spans = tracer_provider
                .shutdown()
                .map_err(|source| TelemetryError::Shutdown {
                    what: "spans",
                    source,
                });
        }
        self.provider
            .shutdown()
            .map_err(|source| TelemetryError::Shutdown {
                what: "metrics",
                source,
            })?;
        spans
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_url_appends_the_signal_path_once() {
        let mut c = TelemetryConfig::default();
        assert_eq!(c.metrics_url(), "http://localhost:4318/v1/metrics");
        assert_eq!(c.traces_url(), "http://localhost:4318/v1/traces");
        c.otlp_endpoint = "http://c:4318/v1/metrics/".into();
        assert_eq!(c.metrics_url(), "http://c:4318/v1/metrics");
        assert_eq!(c.traces_url(), "http://c:4318/v1/traces");
    }

    /// A `MakeWriter` collecting what a log layer writes.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn log_layer_leaves_out_the_event_span_and_keeps_its_level() {
        use tracing::Subscriber as _;
        use tracing_subscriber::layer::SubscriberExt as _;
        let out = Captured::default();
        let writer = out.clone();
        let logs = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(move || writer.clone());
        let filter = tracing_subscriber::EnvFilter::new("info").and(without_event_spans());
        let subscriber = Registry::default().with(logs.with_filter(filter));
        assert_eq!(subscriber.max_level_hint(), Some(LevelFilter::INFO));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(EVENT_SPAN, event_id = "e-1");
            assert!(
                span.is_disabled(),
                "the per-event span is not built for the logs"
            );
            span.in_scope(|| tracing::warn!(event_id = "e-1", "judge failed"));
            tracing::info_span!("other", key = "kept")
                .in_scope(|| tracing::warn!("inside another span"));
            tracing::debug!("below the level");
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(
            text.contains("judge failed") && text.contains("event_id=\"e-1\""),
            "{text}"
        );
        assert!(!text.contains("score_event"), "{text}");
        assert!(text.contains("other{key=\"kept\"}"), "{text}");
        assert!(!text.contains("below the level"), "{text}");
    }
}
