//! OpenTelemetry metrics over OTLP/HTTP (protobuf), configured by `[telemetry]`.
//!
//! Instruments (all prefixed `sqlgrade.`): `events.consumed`, `events.scored`,
//! `events.dead_lettered` (counters); `stef.phi` (histogram of Φ); `judge.calls`,
//! `judge.cache_hits`, `judge.fallbacks`, `judge.tokens` (counters, tokens with a `kind`
//! attribute `prompt`/`completion`); `judge.latency` and `score.latency` (histograms, seconds);
//! `sink.batch.size` (histogram, rows + dead letters) and `sink.batch.latency` (seconds);
//! `consumer.lag` (gauge, messages, with `topic`/`partition`); `judge.cache.lookups` (observable
//! counter from the judge's totals, `result` = `memory_hit`/`durable_hit`/`miss`, registered with
//! [`Telemetry::observe_judge`]). The other judge numbers are derived from the
//! STEF rows (`judge`, `judge_cached`, `status`, tokens, latency), so every judge implementation is
//! covered without instrumenting it separately.
//!
//! Per-event tracing spans (`score_event` with `event_id`) are emitted by the pipeline through
//! `tracing`; they reach whatever subscriber the binary installs.

use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{
    Counter, Gauge, Histogram, Meter, MeterProvider as _, ObservableCounter,
};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use serde::{Deserialize, Serialize};

use crate::evaluation::{EvaluationRow, Metric, RowStatus};
use crate::judge::JudgeTotals;

/// `[telemetry]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Export metrics.
    pub enabled: bool,
    /// OTLP/HTTP endpoint: a collector base URL (`http://otel-collector:4318`, `/v1/metrics` is
    /// appended) or the full metrics URL.
    pub otlp_endpoint: String,
    /// Export interval.
    pub export_interval_ms: u64,
    /// Export request timeout.
    pub export_timeout_ms: u64,
    /// `service.name` resource attribute.
    pub service_name: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            enabled: false,
            otlp_endpoint: "http://localhost:4318".into(),
            export_interval_ms: 10_000,
            export_timeout_ms: 5_000,
            service_name: "sqlgrade".into(),
        }
    }
}

impl TelemetryConfig {
    /// The metrics URL the exporter posts to.
    pub fn metrics_url(&self) -> String {
        let base = self.otlp_endpoint.trim_end_matches('/');
        if base.ends_with("/v1/metrics") {
            base.to_string()
        } else {
            format!("{base}/v1/metrics")
        }
    }
}

/// Why telemetry could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The OTLP exporter could not be built.
    #[error("cannot build the OTLP metrics exporter: {0}")]
    Exporter(String),
    /// Flushing or shutting down failed.
    #[error("telemetry shutdown: {0}")]
    Shutdown(String),
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

    /// A message was taken from the source.
    pub fn consumed(&self) {
        self.events_consumed.add(1, &[]);
    }

    /// One event's rows were produced.
    pub fn scored(&self, rows: &[EvaluationRow]) {
        self.events_scored.add(1, &[]);
        for row in rows.iter().filter(|r| r.metric == Metric::Stef) {
            self.phi.record(row.value, &[]);
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

/// A running OTLP metrics pipeline; call [`Telemetry::shutdown`] to export the last values.
pub struct Telemetry {
    provider: SdkMeterProvider,
    metrics: PipelineMetrics,
    /// Observable instruments, kept alive for as long as telemetry runs.
    observers: Vec<ObservableCounter<u64>>,
}

impl Telemetry {
    /// Start periodic OTLP/HTTP export as `[telemetry]` says.
    pub fn start(config: &TelemetryConfig) -> Result<Telemetry, TelemetryError> {
        let exporter = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(config.metrics_url())
            .with_timeout(Duration::from_millis(config.export_timeout_ms.max(1)))
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let reader = PeriodicReader::builder(exporter)
            .with_interval(Duration::from_millis(config.export_interval_ms.max(1)))
            .build();
        let provider = SdkMeterProvider::builder()
            .with_reader(reader)
            .with_resource(
                Resource::builder()
                    .with_service_name(config.service_name.clone())
                    .build(),
            )
            .build();
        let metrics = PipelineMetrics::new(&provider.meter("sqlgrade"));
        Ok(Telemetry {
            provider,
            metrics,
            observers: Vec::new(),
        })
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

    /// The instruments (clone into the pipeline).
    pub fn metrics(&self) -> PipelineMetrics {
        self.metrics.clone()
    }

    /// Export what is pending now.
    pub fn flush(&self) -> Result<(), TelemetryError> {
        self.provider
            .force_flush()
            .map_err(|e| TelemetryError::Shutdown(e.to_string()))
    }

    /// Export the last values and stop.
    pub fn shutdown(self) -> Result<(), TelemetryError> {
        self.provider
            .shutdown()
            .map_err(|e| TelemetryError::Shutdown(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_url_appends_the_signal_path_once() {
        let mut c = TelemetryConfig::default();
        assert_eq!(c.metrics_url(), "http://localhost:4318/v1/metrics");
        c.otlp_endpoint = "http://c:4318/v1/metrics/".into();
        assert_eq!(c.metrics_url(), "http://c:4318/v1/metrics");
    }
}
