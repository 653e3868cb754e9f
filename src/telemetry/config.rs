//! `[telemetry]`: OpenTelemetry export (OTLP/HTTP endpoint, interval, resource attributes).

use serde::{Deserialize, Serialize};

/// `[telemetry]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
