//! Judges: who supplies STEF's question understanding and semantic verdict.
//!
//! [`Judge`] is the seam between pure scoring and the outside world. The built-in
//! [`deterministic::DeterministicJudge`] needs nothing; the LLM judge talks to an
//! OpenAI-compatible endpoint.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::event::Event;
use crate::stef::{Enrichment, FilterStatus, Prepared, QuestionSpec, RuleProfile, Verdict};

pub mod deterministic;

/// What a judge is asked about one event.
#[derive(Debug, Clone, Copy)]
pub struct JudgeRequest<'a> {
    /// The event (Qu, Qe, S, labels).
    pub event: &'a Event,
    /// SQL spec and the deterministic comparison record.
    pub prepared: &'a Prepared,
    /// The app's rule profile.
    pub profile: &'a RuleProfile,
}

/// LLM token usage of one assessment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

/// A judge's answer about one event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeAssessment {
    /// The question spec Sq as the judge understands it.
    pub question_spec: QuestionSpec,
    /// Enrichment validation.
    pub enrichment: Enrichment,
    /// The judge's own filter assessment, when it gives one (LLM); code-side alignment decides Φ.
    pub filter_status: Option<FilterStatus>,
    /// Semantic verdict.
    pub verdict: Verdict,
    /// Confidence γ ∈ [0, 1].
    pub confidence: f64,
    /// Short rationale.
    pub rationale: String,
    /// `deterministic` or `llm:<model>`.
    pub judge: String,
    /// Whether this came from a cache.
    pub cached: bool,
    /// Prompt template version (LLM only).
    pub prompt_version: Option<String>,
    /// Tokens spent.
    pub usage: TokenUsage,
}

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
}

/// Supplies question spec, enrichment status and semantic verdict for STEF.
#[async_trait]
pub trait Judge: Send + Sync {
    /// `deterministic` or `llm:<model>`.
    fn kind(&self) -> String;

    /// Assess one event.
    async fn assess(&self, request: JudgeRequest<'_>) -> Result<JudgeAssessment, JudgeError>;
}
