//! Judges: who supplies STEF's question understanding and semantic verdict, and the structured
//! judge seam the LLM-judged gold metrics call.
//!
//! [`Judge`] is the seam between pure scoring and the outside world. The built-in
//! [`deterministic::DeterministicJudge`] needs nothing; the LLM judge (in the daemon) talks to an
//! OpenAI-compatible endpoint. [`structured::StructuredJudge`] is the lower-level seam: "this
//! prompt and these variables → a typed reply", implemented by the daemon's LLM client and by
//! in-memory judges in tests.

use serde::{Deserialize, Serialize};

pub mod assess;
pub mod deterministic;
pub mod structured;

#[cfg(test)]
mod stef_tests;

pub use crate::stef::assessment::{JudgeAssessment, TokenUsage};
pub use assess::{Judge, JudgeRequest};
pub use structured::StructuredJudge;

/// Why a judge could not assess an event. The scorer falls back to the deterministic judge.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JudgeError {
    /// Transport failure (connection, TLS, DNS) after retries.
    #[error("judge transport error: {0}")]
    Transport(String),
    /// The endpoint answered with an HTTP error after retries.
    #[error("judge HTTP {status}: {body}")]
    Http {
        /// HTTP status.
        status: u16,
        /// Truncated body.
        body: String,
    },
    /// No answer within the timeout, after retries.
    #[error("judge timed out after {0} ms")]
    Timeout(u64),
    /// The reply did not validate against the schema, even after the repair retry.
    #[error("judge reply invalid: {0}")]
    InvalidReply(String),
    /// The prompt could not be built (unknown or broken template, unencodable variables).
    #[error("judge prompt error: {0}")]
    Prompt(String),
}

/// Running totals of a judge, for run summaries and the backfill table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct JudgeTotals {
    /// Assessments requested.
    pub assessments: u64,
    /// Assessments answered from a cache (in-memory, durable, or an identical in-flight call).
    pub cache_hits: u64,
    /// Of those, answered by the durable cache.
    pub durable_hits: u64,
    /// Completed LLM calls (replies received, repair calls included).
    pub llm_calls: u64,
    /// HTTP requests sent (retries included).
    pub http_requests: u64,
    /// Retries after 429, 5xx, timeouts and connection errors.
    pub retries: u64,
    /// Repair retries after a reply failed validation.
    pub repairs: u64,
    /// Prompt tokens spent.
    pub prompt_tokens: u64,
    /// Completion tokens spent.
    pub completion_tokens: u64,
    /// Of those, tokens the model spent reasoning (where the server reports them).
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// Replies cut off at the token cap (`finish_reason = "length"`).
    #[serde(default)]
    pub cut_off: u64,
    /// Assessments that ended in a [`JudgeError`] (the scorer fell back to the deterministic
    /// judge for each).
    pub failures: u64,
}

impl JudgeTotals {
    /// Assessments answered by the in-memory cache (or an identical in-flight call).
    pub fn memory_hits(&self) -> u64 {
        self.cache_hits.saturating_sub(self.durable_hits)
    }

    /// Field-wise sum (totals of several clients).
    pub fn plus(&self, other: &JudgeTotals) -> JudgeTotals {
        self.zip(other, u64::saturating_add)
    }

    /// What was added since `before`, a snapshot of the same counters taken earlier.
    pub fn since(&self, before: &JudgeTotals) -> JudgeTotals {
        self.zip(before, u64::saturating_sub)
    }

    fn zip(&self, other: &JudgeTotals, f: fn(u64, u64) -> u64) -> JudgeTotals {
        JudgeTotals {
            assessments: f(self.assessments, other.assessments),
            cache_hits: f(self.cache_hits, other.cache_hits),
            durable_hits: f(self.durable_hits, other.durable_hits),
            llm_calls: f(self.llm_calls, other.llm_calls),
            http_requests: f(self.http_requests, other.http_requests),
            retries: f(self.retries, other.retries),
            repairs: f(self.repairs, other.repairs),
            prompt_tokens: f(self.prompt_tokens, other.prompt_tokens),
            completion_tokens: f(self.completion_tokens, other.completion_tokens),
            reasoning_tokens: f(self.reasoning_tokens, other.reasoning_tokens),
            cut_off: f(self.cut_off, other.cut_off),
            failures: f(self.failures, other.failures),
        }
    }

    /// Share of assessments answered from a cache, in [0, 1] (`None` before any assessment).
    pub fn hit_rate(&self) -> Option<f64> {
        (self.assessments > 0).then(|| self.cache_hits as f64 / self.assessments as f64)
    }
}
