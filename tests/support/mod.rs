//! Helpers of the judge integration tests that need the daemon's own types (the testkit crate,
//! `sqlgrade-testkit`, holds everything else: data, servers, the scripted LLM, events).

#![allow(dead_code)]

use sqlgrade::config::LlmJudgeConfig;

#[allow(unused_imports)]
pub use sqlgrade_testkit::events::{
    benchmark_events, distinct_events, prepare, profile, stef_reply,
};
#[allow(unused_imports)]
pub use sqlgrade_testkit::{cli, openai_mock};

/// A judge config for the scripted server: fast backoff, no request-rate limit.
pub fn config(base_url: &str) -> LlmJudgeConfig {
    LlmJudgeConfig {
        api_key_env: String::new(),
        base_url: base_url.to_string(),
        model: "judge-test".into(),
        timeout_ms: 2_000,
        max_retries: 2,
        backoff_initial_ms: 10,
        backoff_max_ms: 50,
        max_requests_per_second: 0.0,
        max_concurrency: 32,
        ..LlmJudgeConfig::default()
    }
}

/// Scoring people's verdicts on a database we have, with the data (the result, the probe).
pub mod data_labels;
