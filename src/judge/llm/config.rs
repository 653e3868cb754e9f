//! `[judge]` settings of the LLM judge (endpoint, limits, cache, retries).
//!
//! The CLI's config loader deserializes the `[judge]` section into [`LlmConfig`] (unknown keys such
//! as `kind` are ignored here). Every field has a default so that a minimal section only names
//! `base_url` and `model`.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Configuration of one OpenAI-compatible judge endpoint and the limits applied to it.
///
/// Rate limits are per process: with several replicas, give each `global quota / replicas`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LlmConfig {
    /// Endpoint base, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8000`. The client
    /// posts to `<base>/chat/completions` when the path ends in `/v1` (or another path is
    /// given), to `<base>/v1/chat/completions` when the URL has no path, and to the URL itself
    /// when it already ends in `/chat/completions`.
    pub base_url: String,
    /// Model name sent in every request and shown as `llm:<model>` in rows.
    pub model: String,
    /// Name of the environment variable holding the API key. Empty: no `Authorization` header
    /// (local vLLM/Ollama). The key itself is never logged, stored, or put in rows.
    pub api_key_env: String,
    /// Requests per second towards the endpoint, retries included; 0 disables the limit.
    pub max_requests_per_second: f64,
    /// GCRA burst of the request limiter. 0 (default) chooses automatically: 2 from 60
    /// requests/s up, else 1 (see [`super::limits::request_burst`]). A burst of 2 keeps a
    /// permit granted late (timer or scheduling delay) from pushing later permits back, so
    /// throughput stays at the paced rate; 1 spaces requests strictly.
    pub rate_burst: u32,
    /// Estimated tokens per minute (prompt length / 4); 0 disables the limit.
    pub max_tokens_per_minute: u32,
    /// Maximum HTTP requests in flight.
    pub max_concurrency: usize,
    /// Per-request timeout (whole request, including the body) in milliseconds.
    pub timeout_ms: u64,
    /// Retries after the first attempt for 429, 5xx, timeouts and connection errors.
    pub max_retries: u32,
    /// First backoff delay in milliseconds (doubles per retry, with jitter).
    pub backoff_initial_ms: u64,
    /// Largest backoff delay in milliseconds.
    pub backoff_max_ms: u64,
    /// Largest `Retry-After` honoured, in milliseconds (longer hints are clamped to this).
    pub retry_after_max_ms: u64,
    /// Completion token cap sent as `max_tokens`; `None` leaves it to the server.
    pub max_completion_tokens: Option<u32>,
    /// In-memory verdict cache capacity (entries); 0 disables the in-memory cache.
    pub cache_capacity: u64,
    /// Time to live of an in-memory cache entry, in seconds.
    pub cache_ttl_secs: u64,
    /// Directory with prompt templates overriding the built-in ones (`prompts/` layout).
    pub prompts_dir: Option<PathBuf>,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            base_url: "http://127.0.0.1:8000/v1".into(),
            model: "gpt-4o-mini".into(),
            api_key_env: String::new(),
            max_requests_per_second: 10.0,
            rate_burst: 0,
            max_tokens_per_minute: 0,
            max_concurrency: 16,
            timeout_ms: 30_000,
            max_retries: 3,
            backoff_initial_ms: 250,
            backoff_max_ms: 10_000,
            retry_after_max_ms: 60_000,
            max_completion_tokens: None,
            cache_capacity: 100_000,
            cache_ttl_secs: 24 * 3600,
            prompts_dir: None,
        }
    }
}

impl LlmConfig {
    /// The LLM settings of the daemon's `[judge]` section; keys the section does not have keep
    /// their defaults. (An inline `api_key` is handled by [`super::LlmJudge::from_judge_config`].)
    pub fn from_judge_config(judge: &crate::config::JudgeConfig) -> LlmConfig {
        LlmConfig {
            base_url: judge.base_url.clone(),
            model: judge.model.clone(),
            api_key_env: judge.api_key_env.clone(),
            max_requests_per_second: judge.max_requests_per_second,
            rate_burst: judge.rate_burst,
            max_tokens_per_minute: judge.max_tokens_per_minute,
            max_concurrency: judge.max_concurrency,
            timeout_ms: judge.timeout_ms,
            max_retries: judge.max_retries,
            cache_capacity: judge.cache_capacity,
            cache_ttl_secs: judge.cache_ttl_secs,
            prompts_dir: judge.prompts_dir.clone(),
            ..LlmConfig::default()
        }
    }

    /// The per-request timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// Reject settings that cannot work, with a message naming the key.
    pub fn validate(&self) -> Result<(), String> {
        if self.base_url.trim().is_empty() {
            return Err("judge.base_url must not be empty".into());
        }
        if self.model.trim().is_empty() {
            return Err("judge.model must not be empty".into());
        }
        if !self.max_requests_per_second.is_finite() || self.max_requests_per_second < 0.0 {
            return Err("judge.max_requests_per_second must be a finite number ≥ 0".into());
        }
        if self.max_concurrency == 0 {
            return Err("judge.max_concurrency must be at least 1".into());
        }
        if self.timeout_ms == 0 {
            return Err("judge.timeout_ms must be at least 1".into());
        }
        Ok(())
    }
}
