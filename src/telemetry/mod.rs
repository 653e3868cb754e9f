//! OpenTelemetry metrics and per-event trace spans over OTLP/HTTP (protobuf), configured by
//! `[telemetry]`.
//!
//! Instruments (all prefixed `sqlgrade.`): `events.consumed`, `events.scored`,
//! `events.dead_lettered` (counters); `stef.phi` (histogram of Φ); `judge.calls`,
//! `judge.cache_hits`, `judge.fallbacks`, `judge.tokens` (counters, tokens with a `kind`
//! attribute `prompt`/`completion`); `judge.latency` and `score.latency` (histograms, seconds);
//! `sink.batch.size` (histogram, rows + dead letters) and `sink.batch.latency` (seconds);
//! `consumer.lag` (gauge, messages, with `topic`/`partition`; fed by the Kafka source from
//! librdkafka's statistics); `judge.cache.lookups` (observable counter from the judge's totals,
//! `result` = `memory_hit`/`durable_hit`/`miss`, registered with [`Telemetry::observe_judge`]).
//! The other judge numbers are derived from the STEF rows (`judge`, `judge_cached`, `status`,
//! tokens, latency), so every judge implementation is covered without instrumenting it
//! separately.
//!
//! Traces: the pipeline scores every event inside a `score_event` span carrying `event_id`,
//! `app_id`, `agent_id`, `agent_version`, `model` and `origin`. With `traces = true` (the
//! default) [`Telemetry::start`] exports the spans of the `sqlgrade` target to
//! `<endpoint>/v1/traces` through whichever of these the process uses:
//! [`span_export_layer`] (the binary installs it in its subscriber at startup, before the
//! configuration is read; it stays inert until telemetry starts) or [`Telemetry::span_layer`]
//! (a layer for a subscriber built after [`Telemetry::start`]). Log layers leave that span out
//! ([`without_event_spans`]): formatting its fields for every event cost ~3 % of the daemon's
//! CPU, and with no exporter connected nothing builds it.
//!
//! Evaluation events (`[telemetry] evaluations`, independent of `enabled`): every row as a
//! `gen_ai.evaluation.result` log record on the evaluated span, from a task of its own
//! ([`evaluations`]).

pub mod config;
pub mod evaluations;
mod export;
pub mod health;
pub mod stats;
pub mod summary;

pub use export::{
    EVENT_SPAN, PipelineMetrics, Telemetry, TelemetryError, span_export_layer, without_event_spans,
};
