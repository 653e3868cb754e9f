//! STEF: the schema-free production score (`shared/specs/stef.md`).
//!
//! Pure and synchronous. The flow per event is
//! [`prepare`] (SQL spec + deterministic question spec + deterministic alignment) →
//! a [`crate::judge::Judge`] assessment (edge, possibly async) → [`finish`] (alignment against the
//! judge's question spec, normalization rules, composite score Φ).

use serde::{Deserialize, Serialize};

use crate::sqlspec::{AggFunc, FilterOp};

pub mod score;

pub use score::{ConfidenceTier, QualityTier, Score, TierThresholds, compose};

/// The four filter-alignment outcomes (stef.md §2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FilterStatus {
    /// Every required filter matched, no extras (also: none required, none present).
    FullyApplied,
    /// Every required filter matched, at least one extra.
    FullyAppliedWithExtras,
    /// Some but not all required filters matched.
    PartiallyApplied,
    /// Filters were required and none matched.
    NotApplied,
}

impl FilterStatus {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            FilterStatus::FullyApplied => "fully_applied",
            FilterStatus::FullyAppliedWithExtras => "fully_applied_with_extras",
            FilterStatus::PartiallyApplied => "partially_applied",
            FilterStatus::NotApplied => "not_applied",
        }
    }
}

/// The four-point semantic verdict (stef.md §2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Fully and unambiguously satisfies the intent.
    Correct,
    /// Well aligned, minor non-critical differences.
    LikelyCorrect,
    /// Partially aligned; may be wrong in some database states.
    PotentiallyIncorrect,
    /// Fundamentally misaligned.
    Incorrect,
}

impl Verdict {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Correct => "correct",
            Verdict::LikelyCorrect => "likely_correct",
            Verdict::PotentiallyIncorrect => "potentially_incorrect",
            Verdict::Incorrect => "incorrect",
        }
    }
}

/// Whether the enriched question Qe is faithful to the original Qu (stef.md §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnrichmentStatus {
    /// No enriched question in the event.
    Absent,
    /// Qe says what Qu says (explicit mappings/clarifications count as faithful).
    Faithful,
    /// Qe adds constraints Qu did not ask for.
    AddsConstraints,
    /// Qe drops constraints Qu asked for.
    DropsConstraints,
    /// Qe asks a different question.
    Drifted,
}

impl EnrichmentStatus {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            EnrichmentStatus::Absent => "absent",
            EnrichmentStatus::Faithful => "faithful",
            EnrichmentStatus::AddsConstraints => "adds_constraints",
            EnrichmentStatus::DropsConstraints => "drops_constraints",
            EnrichmentStatus::Drifted => "drifted",
        }
    }
}

/// Enrichment validation result: status plus the constraints added or dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Enrichment {
    /// Overall status.
    pub status: EnrichmentStatus,
    /// Constraints present in Qe but not Qu (rendered `lhs op rhs` or value text).
    pub added: Vec<String>,
    /// Constraints present in Qu but not Qe.
    pub dropped: Vec<String>,
}

impl Enrichment {
    /// The result for an event without an enriched question.
    pub fn absent() -> Enrichment {
        Enrichment {
            status: EnrichmentStatus::Absent,
            added: Vec::new(),
            dropped: Vec::new(),
        }
    }
}

/// One aggregation the question asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct QuestionAggregation {
    /// Function family implied by the wording (total → SUM, how many → COUNT, …).
    pub func: AggFunc,
    /// The NL term or column it applies to, if recognisable.
    pub column: Option<String>,
    /// "distinct"/"unique" wording.
    pub distinct: bool,
}

/// One filter the question requires.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct QuestionFilter {
    /// Dimension (NL term or column name, normalized) when known; `None` when only the value is
    /// known (the deterministic judge often knows just "China" or "2023").
    pub lhs: Option<String>,
    /// Comparison implied by the wording.
    pub op: FilterOp,
    /// Normalized value text (lowercased, unquoted; numbers canonical).
    pub value: String,
}

/// The question-side spec Sq (stef.md §2.2).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct QuestionSpec {
    /// Requested outputs (NL terms).
    pub outputs: Vec<String>,
    /// Requested aggregations.
    pub aggregations: Vec<QuestionAggregation>,
    /// Required filters.
    pub filters: Vec<QuestionFilter>,
    /// Requested grouping dimensions ("by X", "per X", "for each X").
    pub group_by: Vec<String>,
    /// "ranked by", "sorted", "top k", "highest first", …
    pub explicit_order: bool,
    /// k of a top-k request.
    pub top_k: Option<u64>,
}

/// The four production normalization rules (stef.md §2.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NormalizationRule {
    /// Rule 1: GROUP BY structurally required by a mixed SELECT.
    RequiredGroupBy,
    /// Rule 2: GROUP BY on a column constrained to a literal.
    BenignGroupBy,
    /// Rule 3: ORDER BY that is a sensible presentation default.
    DefaultOrderBy,
    /// Rule 4: LIMIT ≥ λ_min without a top-k request.
    SafetyLimit,
}

impl NormalizationRule {
    /// Stored name (as in `rules_fired`).
    pub fn as_str(self) -> &'static str {
        match self {
            NormalizationRule::RequiredGroupBy => "required_group_by",
            NormalizationRule::BenignGroupBy => "benign_group_by",
            NormalizationRule::DefaultOrderBy => "default_order_by",
            NormalizationRule::SafetyLimit => "safety_limit",
        }
    }
}

pub mod rules;

pub use rules::RuleProfile;

use crate::event::Event;
use crate::sqlspec::{SpecError, SqlSpec};

/// Everything computed before the judge is asked: the SQL spec and the deterministic view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prepared {
    /// Ssql, extracted with sqlparser.
    pub sql_spec: SqlSpec,
    /// Sq as the deterministic lexicon/pattern extractor sees it.
    pub question_spec: QuestionSpec,
    /// Deterministic enrichment validation.
    pub enrichment: Enrichment,
    /// Deterministic alignment of `question_spec` against `sql_spec` under the profile.
    pub alignment: Alignment,
}

/// Result of aligning a question spec with a SQL spec (stef.md §2.4), for scoring and drill-down.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Alignment {
    /// Filter status; `None` only before alignment ran.
    pub filter_status: Option<FilterStatus>,
    /// Required filters that matched an SQL filter (rendered).
    pub matched: Vec<String>,
    /// Required filters with no SQL counterpart.
    pub missing: Vec<String>,
    /// Required filters whose dimension matched but op/value did not.
    pub mismatched: Vec<String>,
    /// SQL filters no required filter asked for.
    pub extras: Vec<ExtraFilter>,
    /// Whether projections match the requested outputs.
    pub projections_match: bool,
    /// Whether aggregations match the requested ones.
    pub aggregations_match: bool,
    /// Whether grouping matches (after the normalization rules).
    pub grouping_match: bool,
    /// Production normalization rules that fired.
    pub rules_fired: Vec<NormalizationRule>,
    /// A LIMIT below λ_min without a top-k request (flagged for the verdict).
    pub suspicious_limit: Option<u64>,
    /// ORDER BY present that no rule exempts and the question did not ask for.
    pub unexplained_order: bool,
    /// Filters removed from both sides because their dimension is in `ignore_filters`.
    pub ignored: Vec<String>,
}

/// An SQL filter not asked for by the question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtraFilter {
    /// Rendered `lhs op rhs`.
    pub filter: String,
    /// Whether it matches an entry of `benign_filters`.
    pub benign: bool,
}

/// Extract the SQL spec and the deterministic question spec, enrichment and alignment.
pub fn prepare(event: &Event, profile: &RuleProfile) -> Result<Prepared, SpecError> {
    let _ = (event, profile);
    todo!("stef::prepare")
}

/// The STEF result for one scorable event, before it becomes a row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StefOutcome {
    /// Composite score and its components.
    pub score: Score,
    /// Code-side filter status (decides σ_filters).
    pub filter_status: FilterStatus,
    /// The judge's own filter status when it gave one and it disagrees with the code's.
    pub judge_filter_status: Option<FilterStatus>,
    /// Alignment of the judge's question spec against the SQL spec.
    pub alignment: Alignment,
    /// The judge's assessment (verdict, γ, rationale, enrichment, usage, …).
    pub assessment: crate::judge::JudgeAssessment,
}

/// Align the judge's question spec with the SQL spec, apply the normalization rules and compute Φ.
pub fn finish(
    prepared: &Prepared,
    assessment: crate::judge::JudgeAssessment,
    profile: &RuleProfile,
) -> StefOutcome {
    let _ = (prepared, assessment, profile);
    todo!("stef::finish")
}

impl StefOutcome {
    /// The `metric = "stef"` row for this outcome. `ts` is used when the event has none.
    pub fn to_row(
        &self,
        event: &Event,
        ts: &str,
        profile: &RuleProfile,
        latency_us: u64,
    ) -> crate::evaluation::EvaluationRow {
        let _ = (event, ts, profile, latency_us);
        todo!("StefOutcome::to_row")
    }
}

/// The `metric = "stef"` row for SQL that could not be scored (Φ = 0, explicit status, parser
/// message in `details`).
pub fn non_scorable_row(
    event: &Event,
    ts: &str,
    error: &SpecError,
    profile: &RuleProfile,
) -> crate::evaluation::EvaluationRow {
    let _ = (event, ts, error, profile);
    todo!("stef::non_scorable_row")
}
