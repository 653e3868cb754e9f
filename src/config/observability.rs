//! `[server]` (the HTTP endpoint) and `[telemetry]` (OpenTelemetry export) settings.

use serde::{Deserialize, Serialize};

use super::secret::Secret;

/// `[server]` settings of the HTTP endpoint (health, and the review page when `review`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSettings {
    /// Address to listen on (e.g. `127.0.0.1:9464`, `0.0.0.0:9464` in a container); empty (the
    /// default) = no HTTP endpoint.
    pub listen: String,
    /// Also serve the review page (`sqlgrade serve`'s pages) on this endpoint, reading the
    /// run's own `[sink]` (JSONL directory or ClickHouse).
    pub review: bool,
    /// Review page: a token every request must carry, as `Authorization: Bearer <token>` or as
    /// the password of HTTP basic auth (any user name); unset = no authentication (then keep
    /// `listen` on localhost). Set it from the environment: `SQLGRADE__SERVER__TOKEN`.
    pub token: Option<Secret>,
    /// Review page: how many of the most recent evaluation rows the overview and the queue are
    /// computed over (a JSONL directory or ClickHouse).
    pub review_max_rows: usize,
    /// Review page: events per judge identity and UTC week in the queue's calibration slice
    /// (`/queue?slice=calibration`), drawn uniformly so that agreement with people is measured
    /// on unbiased data — the labelling target per judge and week; 0 = no calibration slice.
    pub calibration_per_week: usize,
    /// Review page: salt of the calibration slice's hash draw (change it to draw another).
    pub calibration_salt: String,
    /// How often `run` reads new human labels (review page or imported) and pairs them with the
    /// judge rows of their events: the agreement the `judge_agreement` alert rule and the
    /// `sqlgrade.judge.agreement.*` metrics watch. Needs `[alerts] enabled` or `[telemetry]
    /// enabled`, and a JSONL or ClickHouse sink; 0 = never.
    pub agreement_poll_ms: u64,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            listen: String::new(),
            review: false,
            token: None,
            review_max_rows: 200_000,
            calibration_per_week: 20,
            calibration_salt: "calibration".into(),
            agreement_poll_ms: 60_000,
        }
    }
}

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
