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
pub mod checks;
pub mod correctness;
pub mod elements;
pub mod enrichment;
pub mod findings;
pub mod grounding;
pub mod normalize;
pub mod profile;
pub mod question;
pub mod result_checks;
pub mod score;
pub mod summary;
pub mod text;

mod outcome;

pub use findings::{FINDINGS, FindingCode, FindingEntry};
pub use outcome::{
    CatalogueSelection, PrepareOptions, StefOutcome, add_schema_context, finish, finish_own_spec,
    finish_owned, non_scorable_row, non_scorable_row_with, prepare, prepare_with,
    prepare_with_limit, prepare_with_spec, result_ignored,
};
pub use summary::SqlSummary;

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

pub use assessment::{JudgeAssessment, TokenUsage};
pub use profile::RuleProfile;

use crate::sqlspec::SqlSpec;

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
    /// What the evidence and catalogue checks found ([`checks`]), in check order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// Which catalogue database the checks used, or why none could be (absent: no catalogue
    /// applies to the event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalogue: Option<CatalogueNote>,
    /// What the checks had beyond the texts and the catalogue: the event's `result`, the probe.
    #[serde(default, skip_serializing_if = "Evidence::is_empty")]
    pub evidence: Evidence,
    /// The catalogue tables an LLM judge is shown ([`SchemaContext`]): set only for
    /// events an LLM judges ([`add_schema_context`]), never at line rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_context: Option<SchemaContext>,
    /// What the event is about ([`elements`]): the tables, columns and joins the SQL reads,
    /// the question's type and the query's shape.
    #[serde(default)]
    pub about: About,
}

/// What an event is about (`details.reads`, `details.question_type`, `details.query_shape`):
/// the dimensions the breakdowns count by ([`elements`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct About {
    /// The tables, columns and join edges the SQL reads.
    #[serde(default)]
    pub reads: Elements,
    /// The question's type, from the question alone (its key, [`elements::question_type`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question_type: Option<String>,
    /// The query's shape.
    #[serde(default)]
    pub query_shape: String,
}

/// The part of the catalogue an LLM judge is shown for one event: the tables the SQL reads and
/// the tables of the columns the question names ([`grounding::ground`]), capped at
/// [`grounding::CONTEXT_MAX_TABLES`] tables of [`grounding::CONTEXT_MAX_COLUMNS`] columns (about 6 KB of JSON at
/// most), with their keys. Built only for events an LLM judges, never at line rate.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct SchemaContext {
    /// The database.
    pub db_id: String,
    /// The tables, those the SQL reads first.
    pub tables: Vec<TableContext>,
    /// Tables left out by the cap.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tables_omitted: usize,
}

/// One table of a [`SchemaContext`].
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct TableContext {
    /// Table name as written.
    pub name: String,
    /// Whether the SQL reads it (else only the question names one of its columns).
    pub read_by_sql: bool,
    /// Columns: `name type` with ` PK`, ` -> table.column` and ` -- natural name` when known.
    pub columns: Vec<String>,
    /// Columns left out by the cap.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub columns_omitted: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What the line-rate checks had beyond the event's texts and the catalogue
/// (`details.evidence`, absent when neither): the correctness model weighs findings by the
/// evidence that could have produced them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Evidence {
    /// The event carried what the query returned (`result`) and the result checks read it.
    #[serde(skip_serializing_if = "is_false")]
    pub result: bool,
    /// The read-only probe ran on the event's database (`[stef] probe_databases`).
    #[serde(skip_serializing_if = "is_false")]
    pub probe: bool,
}

impl Evidence {
    /// Neither a result nor a probe.
    pub fn is_empty(&self) -> bool {
        !self.result && !self.probe
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What the catalogue did for one event (`details.catalogue`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogueNote {
    /// The database looked up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_id: Option<String>,
    /// `used`, or `unavailable` (the reason says why: unknown database, a catalogue that
    /// failed to load, no `db_id` for a catalogue of several databases).
    pub status: CatalogueStatus,
    /// Why it is unavailable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Whether the catalogue checks ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatalogueStatus {
    /// The schema was found; the catalogue checks ran.
    Used,
    /// A catalogue applies to the event, but it could not give the schema; only the
    /// schema-free checks ran.
    Unavailable,
}

/// One thing a deterministic check found wrong (or suspicious) in the SQL, explained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// What was checked (stable name; `docs/reference/findings.md` lists every code).
    pub code: FindingCode,
    /// How much it weighs in the verdict (the rule table of `judge::deterministic`).
    pub severity: Severity,
    /// The error category it indicates.
    pub category: ErrorCategory,
    /// What in the question and the SQL made it fire, for people.
    pub evidence: String,
    /// What settled it, when data did: the agent's `result`, the read-only probe, or the
    /// catalogue's facts; absent for a suspicion read from the question and the SQL alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed_by: Option<ConfirmedBy>,
    /// The schema elements it is about ([`elements::name_findings`]): the tables, columns,
    /// join edges and literal values of the query that its evidence names; absent when it
    /// names none.
    #[serde(default, skip_serializing_if = "Elements::is_empty")]
    pub elements: Elements,
}

/// Schema elements: tables, `table.column`s, join edges (`a.x = b.y`, the two sides in order)
/// and literal values — canonical through the catalogue when the event has one (its spelling),
/// as the SQL writes them otherwise (lowercased). What a finding is about
/// ([`Finding::elements`]) and what a query reads (`details.reads`), the keys the breakdowns
/// count by.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Elements {
    /// Tables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tables: Vec<String>,
    /// Columns, `table.column` (a bare `column` where the SQL leaves its table unknown).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<String>,
    /// Join edges, `a.x = b.y` with the two sides in sorted order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub joins: Vec<String>,
    /// Literal values the SQL compares with, as written (findings only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl Elements {
    /// Whether it names nothing.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
            && self.columns.is_empty()
            && self.joins.is_empty()
            && self.values.is_empty()
    }
}

/// What settled a finding (`details.findings[].confirmed_by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfirmedBy {
    /// What the query returned, as the event carried it (the agent's own run).
    Result,
    /// The read-only probe's run on a replica of the event's database.
    Probe,
    /// The schema catalogue's facts (keys, types, names).
    Catalogue,
}

/// How much a finding weighs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth knowing; does not change the verdict.
    Info,
    /// Likely wrong: the verdict is at most `potentially_incorrect`.
    Warning,
    /// Wrong as written (the query fails, or contradicts a definition it was given): the
    /// verdict is `incorrect`.
    Error,
}

/// The error taxonomy findings map to (the categories expert annotators use for text-to-SQL
/// errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCategory {
    /// Wrong, missing or hallucinated table; a join off the declared keys.
    Table,
    /// Wrong, missing or hallucinated column.
    Attribute,
    /// A literal that is not the value meant (case, format, a different value).
    Value,
    /// A wrong or missing condition.
    Condition,
    /// A wrong function or aggregation (integer division, unscaled percentage, counting joined
    /// rows, SUM/AVG over text).
    Function,
    /// A missing or wrong clause (DISTINCT, ORDER BY for a superlative).
    Clause,
    /// A wrong subquery.
    Subquery,
    /// A wrong operator.
    Operator,
    /// Anything else.
    Other,
}

impl ErrorCategory {
    /// Every category, in declaration order (`ALL[c as usize] == c`).
    pub const ALL: [ErrorCategory; 9] = [
        ErrorCategory::Table,
        ErrorCategory::Attribute,
        ErrorCategory::Value,
        ErrorCategory::Condition,
        ErrorCategory::Function,
        ErrorCategory::Clause,
        ErrorCategory::Subquery,
        ErrorCategory::Operator,
        ErrorCategory::Other,
    ];

    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCategory::Table => "table",
            ErrorCategory::Attribute => "attribute",
            ErrorCategory::Value => "value",
            ErrorCategory::Condition => "condition",
            ErrorCategory::Function => "function",
            ErrorCategory::Clause => "clause",
            ErrorCategory::Subquery => "subquery",
            ErrorCategory::Operator => "operator",
            ErrorCategory::Other => "other",
        }
    }
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
