//! STEF: the schema-free production score (`shared/specs/stef.md`).
//!
//! Pure and synchronous. The flow per event is
//! [`prepare`] (SQL spec + deterministic question spec + deterministic alignment) →
//! a judge's [`JudgeAssessment`] (the deterministic judge, or an LLM at the edge) → [`finish`]
//! (alignment against the judge's question spec, normalization rules, composite score Φ) →
//! [`StefOutcome::to_row`]. SQL that cannot be scored becomes [`non_scorable_row`].

use serde::{Deserialize, Serialize};

use crate::sqlspec::{AggFunc, FilterOp};

pub mod align;
pub mod assessment;
pub mod enrichment;
pub mod normalize;
pub mod question;
pub mod score;
pub mod text;

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

/// The question-side spec Sq (stef.md §2.2). Serialized compactly (empty lists and an absent
/// top-k are omitted; missing fields deserialize to their defaults).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct QuestionSpec {
    /// Requested outputs (NL terms).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<String>,
    /// Requested aggregations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub aggregations: Vec<QuestionAggregation>,
    /// Required filters.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<QuestionFilter>,
    /// Requested grouping dimensions ("by X", "per X", "for each X").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub group_by: Vec<String>,
    /// "ranked by", "sorted", "top k", "highest first", …
    pub explicit_order: bool,
    /// k of a top-k request.
    #[serde(skip_serializing_if = "Option::is_none")]
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

pub mod profile;

pub use assessment::{JudgeAssessment, TokenUsage};
pub use profile::RuleProfile;

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
///
/// Serialized compactly: empty lists and absent values are omitted (they deserialize back to
/// their defaults).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Alignment {
    /// Filter status; `None` only before alignment ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter_status: Option<FilterStatus>,
    /// Required filters that matched an SQL filter (rendered).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub matched: Vec<String>,
    /// Required filters with no SQL counterpart.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// Required filters whose dimension matched but op/value did not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mismatched: Vec<String>,
    /// SQL filters no required filter asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extras: Vec<ExtraFilter>,
    /// Whether projections match the requested outputs.
    pub projections_match: bool,
    /// Whether aggregations match the requested ones.
    pub aggregations_match: bool,
    /// Whether grouping matches (after the normalization rules).
    pub grouping_match: bool,
    /// Production normalization rules that fired.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules_fired: Vec<NormalizationRule>,
    /// A LIMIT below λ_min without a top-k request (flagged for the verdict).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspicious_limit: Option<u64>,
    /// ORDER BY present that no rule exempts and the question did not ask for.
    pub unexplained_order: bool,
    /// Filters removed from both sides because their dimension is in `ignore_filters`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<String>,
    /// Number of required filters after `ignore_filters` were removed.
    pub required_filters: usize,
    /// Requested outputs no projection answers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unmatched_outputs: Vec<String>,
    /// Projections that answer nothing the question asked for (returned in addition).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra_projections: Vec<String>,
    /// Requested aggregations the SQL does not compute (`count distinct(hero)`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_aggregations: Vec<String>,
    /// Requested grouping dimensions the SQL does not group by.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_group_by: Vec<String>,
    /// GROUP BY columns neither requested nor exempted by a normalization rule.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unexplained_group_by: Vec<String>,
    /// A top-k request the LIMIT does not implement (`top 5 requested, LIMIT 10`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k_mismatch: Option<String>,
}

/// An SQL filter not asked for by the question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtraFilter {
    /// Rendered `lhs op rhs`.
    pub filter: String,
    /// Whether it matches an entry of `benign_filters`.
    pub benign: bool,
}

/// Extract the SQL spec and the deterministic question spec, enrichment and alignment, with the
/// default SQL size limit ([`prepare_with_limit`]).
pub fn prepare(event: &Event, profile: &RuleProfile) -> Result<Prepared, SpecError> {
    prepare_with_limit(event, profile, crate::sqlspec::DEFAULT_MAX_SQL_BYTES)
}

/// [`prepare`] with SQL longer than `max_sql_bytes` refused unparsed ([`SpecError::TooLarge`]).
/// The scorer's entry point.
///
/// The dialect is the event's, else the profile's, else generic (sqlspec adds its fallbacks).
pub fn prepare_with_limit(
    event: &Event,
    profile: &RuleProfile,
    max_sql_bytes: usize,
) -> Result<Prepared, SpecError> {
    let dialect = event.dialect.as_deref().or(profile.dialect.as_deref());
    let mut options = crate::sqlspec::ExtractOptions::for_dialect(dialect);
    options.max_sql_bytes = max_sql_bytes;
    let sql_spec = crate::sqlspec::extract_with(&event.sql, &options)?;
    Ok(prepare_with_spec(event, profile, sql_spec))
}

/// [`prepare`] for an already extracted SQL spec (tests, callers that cache specs).
pub fn prepare_with_spec(event: &Event, profile: &RuleProfile, sql_spec: SqlSpec) -> Prepared {
    let enriched = event.enriched_question.as_deref();
    let question_spec = question::extract(&event.question, enriched, Some(&sql_spec), profile);
    let enrichment = enrichment::validate(&event.question, enriched, profile);
    let alignment = align::align(&question_spec, &sql_spec, profile);
    Prepared {
        sql_spec,
        question_spec,
        enrichment,
        alignment,
    }
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
    pub assessment: JudgeAssessment,
    /// Compact rendering of the SQL spec for drill-down.
    #[serde(default)]
    pub sql_summary: SqlSummary,
}

/// A readable summary of the SQL spec, stored in the row's `details`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SqlSummary {
    /// Dialect that parsed the SQL.
    pub dialect: String,
    /// Projections (`expr` or `expr AS alias`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub projections: Vec<String>,
    /// Aggregations (`count(distinct molecule_id)`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub aggregations: Vec<String>,
    /// Filters (`lhs op rhs`, HAVING/depth/OR marked).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<String>,
    /// GROUP BY.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub group_by: Vec<String>,
    /// ORDER BY (`expr asc|desc`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub order_by: Vec<String>,
    /// LIMIT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// SELECT DISTINCT.
    pub distinct: bool,
    /// Tables referenced.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tables: Vec<String>,
    /// Nested subqueries walked.
    pub subqueries: usize,
    /// Set operations present.
    pub set_operations: bool,
    /// Window functions present.
    pub window_functions: bool,
}

/// The question spec as stored in `details`: aggregations and filters rendered as readable
/// strings (`count distinct(hero)`, `publisher_name = 'marvel comics'`, `? > 15` when the
/// dimension is unknown) — compact for drill-down, and far fewer JSON objects per row.
fn question_summary(q: &QuestionSpec) -> serde_json::Value {
    use serde_json::Value;
    let strings = |v: &[String]| Value::Array(v.iter().cloned().map(Value::String).collect());
    let mut map = serde_json::Map::new();
    if !q.outputs.is_empty() {
        map.insert("outputs".into(), strings(&q.outputs));
    }
    if !q.aggregations.is_empty() {
        let aggs = q
            .aggregations
            .iter()
            .map(|a| {
                let mut s = align::agg_name(&a.func).to_string();
                if a.distinct {
                    s.push_str(" distinct");
                }
                if let Some(c) = &a.column {
                    s.push('(');
                    s.push_str(c);
                    s.push(')');
                }
                Value::String(s)
            })
            .collect();
        map.insert("aggregations".into(), Value::Array(aggs));
    }
    if !q.filters.is_empty() {
        let filters = q
            .filters
            .iter()
            .map(|f| Value::String(text::render_question_filter(f)))
            .collect();
        map.insert("filters".into(), Value::Array(filters));
    }
    if !q.group_by.is_empty() {
        map.insert("group_by".into(), strings(&q.group_by));
    }
    map.insert("explicit_order".into(), Value::Bool(q.explicit_order));
    if let Some(k) = q.top_k {
        map.insert("top_k".into(), Value::from(k));
    }
    Value::Object(map)
}

impl SqlSummary {
    /// Summarize a spec.
    pub fn of(spec: &SqlSpec) -> SqlSummary {
        let agg = |a: &crate::sqlspec::Aggregation| {
            format!(
                "{}({}{})",
                align::agg_name(&a.func),
                if a.distinct { "distinct " } else { "" },
                a.arg
            )
        };
        SqlSummary {
            dialect: spec.dialect.clone(),
            projections: spec
                .projections
                .iter()
                .map(|p| match &p.alias {
                    Some(a) => format!("{} as {a}", p.expr),
                    None => p.expr.clone(),
                })
                .collect(),
            aggregations: spec.aggregations.iter().map(agg).collect(),
            filters: spec
                .filters
                .iter()
                .map(|f| {
                    let mut s = text::render_filter(f);
                    if f.clause == crate::sqlspec::Clause::Having {
                        s.push_str(" [having]");
                    }
                    if f.in_disjunction {
                        s.push_str(" [or]");
                    }
                    if f.depth > 0 {
                        s.push_str(&format!(" [depth {}]", f.depth));
                    }
                    s
                })
                .collect(),
            group_by: spec.group_by.clone(),
            order_by: spec
                .order_by
                .iter()
                .map(|o| {
                    let dir = match o.dir {
                        crate::sqlspec::SortDir::Asc => "asc",
                        crate::sqlspec::SortDir::Desc => "desc",
                    };
                    format!("{} {dir}", o.expr)
                })
                .collect(),
            limit: spec.limit,
            distinct: spec.distinct,
            tables: spec.tables.clone(),
            subqueries: spec.subqueries,
            set_operations: spec.set_operations,
            window_functions: spec.window_functions,
        }
    }
}

/// Align the judge's question spec with the SQL spec, apply the normalization rules and compute Φ.
///
/// The code-side alignment decides σ_filters; the judge supplies the verdict and γ. When the
/// judge's question spec is the deterministic one, the prepared alignment is reused. Values in a
/// judge's spec are normalized like SQL literals first.
pub fn finish(
    prepared: &Prepared,
    assessment: JudgeAssessment,
    profile: &RuleProfile,
) -> StefOutcome {
    let alignment = if assessment.question_spec == prepared.question_spec {
        prepared.alignment.clone()
    } else {
        let mut spec = assessment.question_spec.clone();
        for f in &mut spec.filters {
            f.value = text::normalize_value(&f.value);
        }
        align::align(&spec, &prepared.sql_spec, profile)
    };
    let filter_status = alignment
        .filter_status
        .unwrap_or(FilterStatus::FullyApplied);
    let extras_all_benign = alignment.extras.iter().all(|e| e.benign);
    let score = compose(
        filter_status,
        assessment.verdict,
        assessment.confidence,
        extras_all_benign,
        &profile.tiers,
    );
    let judge_filter_status = assessment.filter_status.filter(|s| *s != filter_status);
    StefOutcome {
        score,
        filter_status,
        judge_filter_status,
        alignment,
        assessment,
        sql_summary: SqlSummary::of(&prepared.sql_spec),
    }
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
        let mut row =
            crate::evaluation::EvaluationRow::for_event(event, ts, crate::evaluation::Metric::Stef);
        let a = &self.assessment;
        let s = &self.score;
        row.value = s.phi;
        row.verdict = Some(matches!(
            a.verdict,
            Verdict::Correct | Verdict::LikelyCorrect
        ));
        row.status = crate::evaluation::RowStatus::Ok;
        row.details = serde_json::json!({
            "sql": &self.sql_summary,
            "question_spec": question_summary(&a.question_spec),
            "alignment": &self.alignment,
            "enrichment": &a.enrichment,
            "rationale": &a.rationale,
            "judge_filter_status": self.judge_filter_status.map(FilterStatus::as_str),
            "components": {
                "sigma_filters": s.sigma_filters,
                "sigma_verdict": s.sigma_verdict,
                "leniency": s.leniency,
                "base": s.base,
                "confidence": s.confidence,
                "multiplier": s.multiplier,
            },
        });
        row.stef = Some(crate::evaluation::StefColumns {
            quality_tier: s.quality_tier.as_str().to_string(),
            filter_status: self.filter_status.as_str().to_string(),
            semantic_verdict: a.verdict.as_str().to_string(),
            confidence: s.confidence,
            confidence_tier: s.confidence_tier.as_str().to_string(),
            sigma_filters: s.sigma_filters,
            sigma_verdict: s.sigma_verdict,
            leniency: s.leniency,
            rules_fired: self
                .alignment
                .rules_fired
                .iter()
                .map(|r| r.as_str().to_string())
                .collect(),
            enrichment_status: a.enrichment.status.as_str().to_string(),
            judge: a.judge.clone(),
            judge_cached: a.cached,
            prompt_version: a.prompt_version.clone(),
            rules_version: profile.version.clone(),
            prompt_tokens: a.usage.prompt_tokens,
            completion_tokens: a.usage.completion_tokens,
            latency_us,
        });
        row
    }
}

/// The `metric = "stef"` row for SQL that could not be scored (Φ = 0, explicit status, parser
/// message in `details`).
///
/// No judge is asked: the row carries σ = 0, verdict `incorrect`, γ = 0 (tier `low`), quality tier
/// `poor`, and the deterministic enrichment validation (it does not need the SQL).
pub fn non_scorable_row(
    event: &Event,
    ts: &str,
    error: &SpecError,
    profile: &RuleProfile,
) -> crate::evaluation::EvaluationRow {
    let mut row =
        crate::evaluation::EvaluationRow::for_event(event, ts, crate::evaluation::Metric::Stef);
    let status = error.status();
    let enrichment =
        enrichment::validate(&event.question, event.enriched_question.as_deref(), profile);
    row.value = 0.0;
    row.verdict = Some(false);
    row.status = status;
    row.details = serde_json::json!({
        "error": error.to_string(),
        "status": status.as_str(),
        "sql_bytes": event.sql.len(),
        "enrichment": &enrichment,
    });
    row.stef = Some(crate::evaluation::StefColumns {
        quality_tier: QualityTier::Poor.as_str().to_string(),
        filter_status: FilterStatus::NotApplied.as_str().to_string(),
        semantic_verdict: Verdict::Incorrect.as_str().to_string(),
        confidence: 0.0,
        confidence_tier: ConfidenceTier::Low.as_str().to_string(),
        sigma_filters: 0,
        sigma_verdict: 0,
        leniency: 0,
        rules_fired: Vec::new(),
        enrichment_status: enrichment.status.as_str().to_string(),
        judge: "deterministic".into(),
        judge_cached: false,
        prompt_version: None,
        rules_version: profile.version.clone(),
        prompt_tokens: 0,
        completion_tokens: 0,
        latency_us: 0,
    });
    row
}
