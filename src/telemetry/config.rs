//! `[telemetry]`: OpenTelemetry export (OTLP/HTTP endpoint, interval, resource attributes), and
//! the evaluation events (`evaluations`: every row as a `gen_ai.evaluation.result` log record
//! on the evaluated span), which are independent of the metrics' `enabled`.

use serde::{Deserialize, Serialize};

/// `[telemetry]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Export metrics (and spans, see `traces`).
    pub enabled: bool,
    /// OTLP/HTTP endpoint: a collector base URL (`http://otel-collector:4318`; `/v1/metrics` and
    /// `/v1/traces` are appended) or the full metrics URL (`…/v1/metrics`; spans then go to the
    /// sibling `…/v1/traces`).
    pub otlp_endpoint: String,
    /// Also export one span per scored event (`score_event`, with `event_id`) when `enabled`.
    pub traces: bool,
    /// Export interval.
    pub export_interval_ms: u64,
    /// Export request timeout.
    pub export_timeout_ms: u64,
    /// `service.name` resource attribute.
    pub service_name: String,
    /// Send every evaluation row (`stef`, `stef_judged`, the gold metrics) as an OTLP log record
    /// with event name `gen_ai.evaluation.result` to `<otlp_endpoint>/v1/logs`, parented to the
    /// event's span (`traceparent`, or `trace_id` + `span_id`; events from traces carry their
    /// SQL span's). Independent of `enabled`.
    pub evaluations: bool,
    /// Evaluation records waiting for the collector at most; beyond that new ones are dropped
    /// and counted (scoring never waits for the collector).
    pub evaluations_queue: usize,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            enabled: false,
            otlp_endpoint: "http://localhost:4318".into(),
            traces: true,
            export_interval_ms: 10_000,
            export_timeout_ms: 5_000,
            service_name: "sqlgrade".into(),
            evaluations: false,
            evaluations_queue: 8_192,
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

    /// The logs URL the evaluation events are posted to (`…/v1/logs`, beside the metrics and
    /// traces URLs).
    pub fn logs_url(&self) -> String {
        let base = self.otlp_endpoint.trim_end_matches('/');
        let root = base
            .strip_suffix("/v1/metrics")
            .or_else(|| base.strip_suffix("/v1/traces"))
            .or_else(|| base.strip_suffix("/v1/logs"))
            .unwrap_or(base);
        format!("{root}/v1/logs")
    }

    /// What is wrong with the section (empty when nothing is).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.evaluations && self.evaluations_queue == 0 {
            problems.push(
                "[telemetry] evaluations_queue must be at least 1 when evaluations = true".into(),
            );
        }
        if (self.enabled || self.evaluations)
            && !(self.otlp_endpoint.starts_with("http://")
                || self.otlp_endpoint.starts_with("https://"))
        {
            // The URL itself is not repeated: it may carry a credential.
            problems.push("[telemetry] otlp_endpoint must be an http:// or https:// URL".into());
        }
        problems
    }

    /// The traces URL the span exporter posts to.
    pub fn traces_url(&self) -> String {
        let base = self.otlp_endpoint.trim_end_matches('/');
        match base.strip_suffix("/v1/metrics") {
            Some(root) => format!("{root}/v1/traces"),
            None if base.ends_with("/v1/traces") => base.to_string(),
            None => format!("{base}/v1/traces"),
        }
    }
}
