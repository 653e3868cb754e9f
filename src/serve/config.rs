//! `[server]`: the HTTP endpoint (health, and the review page when `review`), the review
//! page's token and limits, its calibration slice and the agreement monitor's poll.

use serde::{Deserialize, Serialize};

use crate::settings::Secret;

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
