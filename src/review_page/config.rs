//! `[server]`: the HTTP endpoint (health, and the review page when `review`), the review
//! page's token and limits, its calibration slice and the agreement monitor's poll.

use serde::{Deserialize, Serialize};

use crate::settings::Secret;

/// `[server]` settings of the HTTP endpoint (health, and the review page when `review`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// Review page: host names (the `Host` header, port aside) it answers besides IP addresses
    /// and `localhost`, e.g. `["review.example.internal"]` behind an ingress. Empty: without a
    /// token only IP addresses and `localhost` are answered (a page on another site that
    /// rebinds its own name to this address is refused); with a token, any host.
    pub allowed_hosts: Vec<String>,
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
            allowed_hosts: Vec::new(),
            review_max_rows: 200_000,
            calibration_per_week: 20,
            calibration_salt: "calibration".into(),
            agreement_poll_ms: 60_000,
        }
    }
}

impl ServerSettings {
    /// What is wrong with these keys (each a sentence naming the key): the review page beyond
    /// localhost without a token is refused.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let token = self.token.as_ref().map_or("", |t| t.expose().trim());
        if !token.is_empty() && PLACEHOLDER_TOKENS.contains(&token.to_ascii_lowercase().as_str()) {
            problems.push(
                "[server] token is a placeholder (change-me): set a real one, e.g. \
                 `openssl rand -hex 32`"
                    .to_string(),
            );
        }
        if self.review
            && token.is_empty()
            && !self.listen.trim().is_empty()
            && !is_loopback(&self.listen)
        {
            problems.push(unprotected_review(&self.listen));
        }
        problems
    }
}

/// Tokens that examples ship and nobody should run with.
const PLACEHOLDER_TOKENS: &[&str] = &["change-me", "changeme", "change_me", "secret", "token"];

/// The refusal of a review page beyond localhost without a token.
pub fn unprotected_review(listen: &str) -> String {
    format!(
        "[server] the review page on {listen} (beyond localhost) needs [server] token \
         (SQLGRADE__SERVER__TOKEN): without one, anyone who reaches the port reads every event \
         and writes labels. Set a token, or listen on 127.0.0.1"
    )
}

/// Whether `listen` (`host:port`) is a loopback address (`127.0.0.1`, `[::1]`, `localhost`).
pub fn is_loopback(listen: &str) -> bool {
    if let Ok(addr) = listen.trim().parse::<std::net::SocketAddr>() {
        return addr.ip().is_loopback();
    }
    let host = listen
        .trim()
        .rsplit_once(':')
        .map_or(listen.trim(), |(host, _)| host);
    host.eq_ignore_ascii_case("localhost")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Secret;

    #[test]
    fn a_review_page_beyond_localhost_needs_a_token() {
        let review = |listen: &str, token: Option<&str>| ServerSettings {
            listen: listen.into(),
            review: true,
            token: token.map(Secret::new),
            ..ServerSettings::default()
        };
        for listen in ["127.0.0.1:9464", "[::1]:9464", "localhost:9464"] {
            assert!(review(listen, None).problems().is_empty(), "{listen}");
        }
        for listen in [
            "0.0.0.0:9464",
            "10.1.2.3:80",
            "[::]:9464",
            "review.internal:9464",
        ] {
            let problems = review(listen, None).problems();
            assert_eq!(problems.len(), 1, "{listen}");
            assert!(problems[0].contains("needs [server] token"), "{problems:?}");
            assert!(review(listen, Some("  ")).problems().len() == 1, "{listen}");
            assert!(
                review(listen, Some("t0ken")).problems().is_empty(),
                "{listen}"
            );
        }
        assert!(review("0.0.0.0:9464", Some("change-me")).problems()[0].contains("placeholder"));
        let health_only = ServerSettings {
            listen: "0.0.0.0:9464".into(),
            ..ServerSettings::default()
        };
        assert!(health_only.problems().is_empty());
    }
}
