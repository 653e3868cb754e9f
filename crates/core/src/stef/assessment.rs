//! What a judge says about one event ([`JudgeAssessment`]) and what it cost ([`TokenUsage`]).
//!
//! These types belong to STEF: [`super::finish`] turns an assessment into Φ. Judges (the
//! deterministic one in `crate::judge`, the LLM judge at the edge) produce them; keeping the
//! types here means STEF never imports the judges.

use serde::{Deserialize, Serialize};

use super::{Enrichment, FilterStatus, QuestionSpec, Verdict};

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
    /// How the structured reply was requested (`json_schema`, `json_object`, `plain_text`; LLM
    /// replies fresh from the server only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_mode: Option<String>,
    /// The judge's identity ([`llm_identity`]) when the judge knows more about itself than its
    /// kind (the LLM judge: model, served model, prompt, response mode); `None` for judges whose
    /// identity is their kind, the sqlgrade version and the rule profile ([`rule_identity`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
}

impl JudgeAssessment {
    /// An assessment by the deterministic rules (the deterministic judge, and the scorer's last
    /// resort when every judge failed): no filter status of its own, no cache, no prompt, no
    /// tokens, its identity its kind.
    pub fn deterministic(
        question_spec: QuestionSpec,
        enrichment: Enrichment,
        verdict: Verdict,
        confidence: f64,
        rationale: String,
    ) -> JudgeAssessment {
        JudgeAssessment {
            question_spec,
            enrichment,
            filter_status: None,
            verdict,
            confidence,
            rationale,
            judge: "deterministic".into(),
            cached: false,
            prompt_version: None,
            usage: TokenUsage::default(),
            response_mode: None,
            identity: None,
        }
    }
}

/// The sqlgrade version, part of every judge identity that runs sqlgrade's own rules.
pub const SQLGRADE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The identity of an LLM judge: the endpoint's model name, the model id the server reported
/// (`?` until it reports one), the prompt version and the response mode in use. Any change of
/// these is a change of judge: its agreement with people is tracked separately.
pub fn llm_identity(
    model: &str,
    served_model: Option<&str>,
    prompt_version: &str,
    response_mode: &str,
) -> String {
    format!(
        "llm model={model} served={} prompt={prompt_version} mode={response_mode}",
        served_model.unwrap_or("?")
    )
}

/// The identity of a judge without more to say about itself (the deterministic judge, test
/// judges): its kind, the sqlgrade version and the rule-profile version that scored the row.
pub fn rule_identity(judge: &str, rules_version: &str) -> String {
    format!("{judge} sqlgrade={SQLGRADE_VERSION} rules={rules_version}")
}
