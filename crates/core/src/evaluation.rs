//! The output contract: one [`EvaluationRow`] per (event, metric), and [`DeadLetter`]s for
//! payloads that could not be decoded. These names are public interface (dashboards and scripts
//! depend on them); see the output reference, `docs/reference/output.md`.
//!
//! A row's short texts (ids, time, labels, tiers, statuses) are `CompactString`s: up to 24 bytes
//! live inside the row and fixed names are static references, so a row waiting in a batch owns
//! a few heap blocks instead of ~18 (CHANGELOG.md, "Short texts inline"). They serialize as
//! plain strings.

use base64::Engine as _;
use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::Event;

/// Which metric a row carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Schema-free production score, 0–100: the line-rate row every event gets, from the
    /// deterministic path.
    Stef,
    /// STEF as the LLM judge scores it (0–100): the second pass, for selected events only; the
    /// row says why the event was selected and which line-rate score it revises.
    StefJudged,
    /// Execution accuracy.
    Ex,
    /// Spider exact set matching.
    Esm,
    /// Enhanced exact set matching.
    EsmPlus,
    /// Enhanced tree matching (ETM, the successor of ESM+): rewritten syntax trees are equal.
    Etm,
    /// Execution on generated databases (test suite) and the real one, with a counterexample
    /// when the results differ; the generated databases keep the database's constraints
    /// (declared, observed in its data, or assumed from the schema).
    TsEx,
    /// `ts_ex` on databases that need keep no constraint but unique primary keys (the
    /// constraint-free suites): finds more differences, some on data no real database holds.
    TsExStrict,
    /// BADGER hybrid execution accuracy.
    HybridEx,
    /// FLEX LLM judge.
    Flex,
    /// ROSE Prover–Refuter judge.
    Rose,
}

/// Where a metric's rows come from, which decides where it can be switched on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// Every event's line-rate row (STEF).
    LineRate,
    /// The LLM judge's second pass over a budgeted sample (`judge.budget`).
    SecondPass,
    /// Computed when an event carries gold data, deterministically (`gold.metrics`).
    Gold,
    /// Computed when an event carries gold data, by an LLM judge (`gold.metrics`; needs
    /// `[judge]` or `[gold.judge]` to be an LLM).
    JudgedGold,
}

/// One metric's entry in [`METRICS`]: what the config, the alerts, the gold scorer and the
/// readers of rows know about it.
#[derive(Debug, Clone, Copy)]
pub struct MetricEntry {
    /// The metric.
    pub metric: Metric,
    /// Its name in the `metric` column, the config and the alerts (public interface).
    pub name: &'static str,
    /// Where its rows come from.
    pub kind: MetricKind,
    /// Whether it executes SQL on the event's database (gold metrics: `gold.databases`).
    pub needs_database: bool,
    /// Whether `gold.metrics` lists it by default (gold metrics only).
    pub on_by_default: bool,
    /// The top of its value range: 100 for STEF's points, 1 for the others.
    pub scale: f64,
}

/// Every metric, one entry each, in the enum's order. The config's `gold.metrics`
/// (names, default), the alerts' metric list, the gold scorer's row order and every name
/// lookup derive from this table; a unit test holds it to the enum and to serde's names.
pub const METRICS: [MetricEntry; 11] = [
    entry(
        Metric::Stef,
        "stef",
        MetricKind::LineRate,
        false,
        false,
        100.0,
    ),
    entry(
        Metric::StefJudged,
        "stef_judged",
        MetricKind::SecondPass,
        false,
        false,
        100.0,
    ),
    entry(Metric::Ex, "ex", MetricKind::Gold, true, true, 1.0),
    entry(Metric::Esm, "esm", MetricKind::Gold, false, true, 1.0),
    entry(
        Metric::EsmPlus,
        "esm_plus",
        MetricKind::Gold,
        false,
        true,
        1.0,
    ),
    entry(Metric::Etm, "etm", MetricKind::Gold, false, true, 1.0),
    entry(Metric::TsEx, "ts_ex", MetricKind::Gold, true, false, 1.0),
    entry(
        Metric::TsExStrict,
        "ts_ex_strict",
        MetricKind::Gold,
        true,
        false,
        1.0,
    ),
    entry(
        Metric::HybridEx,
        "hybrid_ex",
        MetricKind::JudgedGold,
        true,
        false,
        1.0,
    ),
    entry(
        Metric::Flex,
        "flex",
        MetricKind::JudgedGold,
        true,
        false,
        1.0,
    ),
    entry(
        Metric::Rose,
        "rose",
        MetricKind::JudgedGold,
        true,
        false,
        1.0,
    ),
];

const fn entry(
    metric: Metric,
    name: &'static str,
    kind: MetricKind,
    needs_database: bool,
    on_by_default: bool,
    scale: f64,
) -> MetricEntry {
    MetricEntry {
        metric,
        name,
        kind,
        needs_database,
        on_by_default,
        scale,
    }
}

impl Metric {
    /// The metric's entry in [`METRICS`].
    pub fn entry(self) -> &'static MetricEntry {
        // The table is in declaration order (a unit test holds it there).
        &METRICS[self as usize]
    }

    /// The metric's name as stored in the `metric` column.
    pub fn as_str(self) -> &'static str {
        self.entry().name
    }

    /// The metric named `name` (as stored), if any.
    pub fn from_name(name: &str) -> Option<Metric> {
        METRICS.iter().find(|e| e.name == name).map(|e| e.metric)
    }

    /// Where its rows come from.
    pub fn kind(self) -> MetricKind {
        self.entry().kind
    }

    /// Whether it is computed from gold data (switched on in `gold.metrics`).
    pub fn is_gold(self) -> bool {
        matches!(self.kind(), MetricKind::Gold | MetricKind::JudgedGold)
    }

    /// Whether it needs an LLM judge.
    pub fn is_llm_judged(self) -> bool {
        matches!(self.kind(), MetricKind::SecondPass | MetricKind::JudgedGold)
    }

    /// The gold metrics, in [`METRICS`]' order.
    pub fn gold() -> impl Iterator<Item = Metric> {
        METRICS.iter().map(|e| e.metric).filter(|m| m.is_gold())
    }
}

/// A set of metrics (a bit per [`METRICS`] entry): what a scorer is asked to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MetricSet(u32);

impl MetricSet {
    /// Whether `metric` is in the set.
    pub fn has(self, metric: Metric) -> bool {
        self.0 & (1 << metric as u32) != 0
    }

    /// The set with `metric` added.
    pub fn with(self, metric: Metric) -> MetricSet {
        MetricSet(self.0 | 1 << metric as u32)
    }

    /// The metrics in the set, in [`METRICS`]' order.
    pub fn iter(self) -> impl Iterator<Item = Metric> {
        METRICS
            .iter()
            .map(|e| e.metric)
            .filter(move |m| self.has(*m))
    }
}

impl FromIterator<Metric> for MetricSet {
    fn from_iter<I: IntoIterator<Item = Metric>>(metrics: I) -> MetricSet {
        metrics
            .into_iter()
            .fold(MetricSet::default(), MetricSet::with)
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored row's `metric` column, read back: a metric this build knows, or the name a newer
/// build wrote (kept, shown and counted, never mistaken for a known one). Serialised, compared,
/// hashed and ordered by name, as the column is (so a map keyed by it is looked up by `&str`).
#[derive(Debug, Clone)]
pub enum StoredMetric {
    /// A metric in [`METRICS`].
    Known(Metric),
    /// A name this build does not know.
    Other(String),
}

impl StoredMetric {
    /// The stored name.
    pub fn as_str(&self) -> &str {
        match self {
            StoredMetric::Known(metric) => metric.as_str(),
            StoredMetric::Other(name) => name,
        }
    }

    /// The metric, when this build knows it.
    pub fn known(&self) -> Option<Metric> {
        match self {
            StoredMetric::Known(metric) => Some(*metric),
            StoredMetric::Other(_) => None,
        }
    }

    /// The stored metric named `name`.
    pub fn from_name(name: &str) -> StoredMetric {
        Metric::from_name(name)
            .map_or_else(|| StoredMetric::Other(name.into()), StoredMetric::Known)
    }
}

impl From<Metric> for StoredMetric {
    fn from(metric: Metric) -> Self {
        StoredMetric::Known(metric)
    }
}

impl From<&str> for StoredMetric {
    fn from(name: &str) -> Self {
        StoredMetric::from_name(name)
    }
}

impl PartialEq for StoredMetric {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for StoredMetric {}

impl std::hash::Hash for StoredMetric {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl std::borrow::Borrow<str> for StoredMetric {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<Metric> for StoredMetric {
    fn eq(&self, other: &Metric) -> bool {
        self.known() == Some(*other)
    }
}

impl PartialOrd for StoredMetric {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for StoredMetric {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

/// The name, honouring width and alignment (`{:<10}` pads it as it would a `&str`).
impl std::fmt::Display for StoredMetric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl Serialize for StoredMetric {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StoredMetric {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(StoredMetric::from_name(&name))
    }
}

/// Why a row's value is what it is: `ok`, or the reason the metric could not be computed normally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowStatus {
    /// Scored normally.
    Ok,
    /// The SQL is empty or could not be parsed in any dialect of the fallback chain.
    ParseError,
    /// The SQL is a statement other than a query (INSERT, DROP, …).
    NotAQuery,
    /// The SQL holds more than one statement.
    MultipleStatements,
    /// The SQL exceeds the configured maximum size and was not parsed.
    SqlTooLarge,
    /// The LLM judge failed; the deterministic judge scored the event instead.
    JudgeFallback,
    /// The LLM judge failed and the metric has no deterministic fallback (FLEX, ROSE); the
    /// row keeps everything obtained before the failure in `details`.
    JudgeError,
    /// The predicted SQL failed to execute.
    ExecError,
    /// The gold SQL failed to execute: reported, not scored as a model failure.
    GoldError,
    /// Gold data is incomplete (e.g. unknown `db_id`), so the metric was not computed.
    GoldUnavailable,
    /// Execution hit the time limit.
    Timeout,
    /// The gold SQL could not be parsed by the metric's parser: reported, not scored.
    GoldParseError,
}

impl RowStatus {
    /// Whether the row is *scored*: its value is a judgment of the SQL and enters means and
    /// verdict rates. Scored and wrong counts (a prediction that fails to execute or times out
    /// is 0, as the benchmarks define it; unparseable or non-query SQL is Φ 0); not scored is
    /// reported beside the mean as coverage, never averaged in as 0: the SQL was too large to
    /// parse (`sql_too_large`), the LLM judge gave no verdict (`judge_error`), or the gold side
    /// failed (`gold_error`, `gold_unavailable`, `gold_parse_error`).
    pub fn is_scored(self) -> bool {
        !matches!(
            self,
            RowStatus::SqlTooLarge
                | RowStatus::JudgeError
                | RowStatus::GoldError
                | RowStatus::GoldUnavailable
                | RowStatus::GoldParseError
        )
    }

    /// [`RowStatus::is_scored`] for a status as stored (`status` column); unknown names are
    /// not scored.
    pub fn name_is_scored(name: &str) -> bool {
        serde_json::from_value::<RowStatus>(Value::String(name.to_string()))
            .is_ok_and(RowStatus::is_scored)
    }

    /// The status as stored in the `status` column.
    pub fn as_str(self) -> &'static str {
        match self {
            RowStatus::Ok => "ok",
            RowStatus::ParseError => "parse_error",
            RowStatus::NotAQuery => "not_a_query",
            RowStatus::MultipleStatements => "multiple_statements",
            RowStatus::SqlTooLarge => "sql_too_large",
            RowStatus::JudgeFallback => "judge_fallback",
            RowStatus::JudgeError => "judge_error",
            RowStatus::ExecError => "exec_error",
            RowStatus::GoldError => "gold_error",
            RowStatus::GoldUnavailable => "gold_unavailable",
            RowStatus::Timeout => "timeout",
            RowStatus::GoldParseError => "gold_parse_error",
        }
    }
}

impl std::fmt::Display for RowStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One scored (event, metric) pair: a line of the JSONL sink, a row of ClickHouse `evaluations`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvaluationRow {
    /// The event's idempotency key.
    pub event_id: CompactString,
    /// Event time (RFC 3339): the event's `ts`, else the source's own time of the message (the
    /// Kafka message timestamp, a file's modification time), else the time it was received.
    pub ts: CompactString,
    /// Application id.
    pub app_id: Option<CompactString>,
    /// Agent id.
    pub agent_id: Option<CompactString>,
    /// Agent version.
    pub agent_version: Option<CompactString>,
    /// Model.
    pub model: Option<CompactString>,
    /// Backfill/benchmark run id.
    pub run_id: Option<CompactString>,
    /// Metric of this row.
    pub metric: Metric,
    /// 0–100 for STEF, 0–1 for every other metric.
    pub value: f64,
    /// Binary verdict where the metric has one.
    pub verdict: Option<bool>,
    /// `ok` or the reason the metric could not be computed normally.
    pub status: RowStatus,
    /// Metric-specific diagnosis (JSON object).
    pub details: Details,
    /// STEF-only columns; absent for other metrics.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub stef: Option<StefColumns>,
    /// Second-pass columns of a `stef_judged` row; absent for every other row.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub judged: Option<JudgedColumns>,
}

/// What a `stef_judged` row adds (flattened into the row): why the event was
/// selected for the LLM judge and the line-rate score this row revises.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgedColumns {
    /// Every selection reason, comma-separated, most important first (`uniform`,
    /// `not_correct`, …; `census` when every event is judged).
    pub selection: CompactString,
    /// The probability that the event was in the uniform slice (1 for a census); `null` for an
    /// event picked by priority reasons only (it does not enter the calibrated estimate).
    pub inclusion_probability: Option<f64>,
    /// Φ of the line-rate `stef` row this row revises.
    pub revised_value: f64,
    /// Semantic verdict of that line-rate row.
    pub revised_verdict: CompactString,
    /// That line-rate row's `p_correct` (absent on rows written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revised_p_correct: Option<f64>,
    /// That line-rate row's boolean verdict (`p_correct ≥` the model's threshold): what the
    /// judge's verdict agrees or disagrees with. Absent on rows written before it existed
    /// (readers fall back to `revised_verdict` being `correct` / `likely_correct`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revised_correct: Option<bool>,
}

/// Whether a stored four-point verdict counts as correct (`correct` or `likely_correct`): a
/// row's boolean verdict before the correctness model, and an LLM judge's still.
pub fn four_point_counts_as_correct(name: &str) -> bool {
    matches!(name, "correct" | "likely_correct")
}

impl JudgedColumns {
    /// Whether the line-rate verdict this row revises called the query correct: the stored
    /// boolean, else (rows written before it) the four-point verdict.
    pub fn line_correct(&self) -> bool {
        self.revised_correct
            .unwrap_or_else(|| four_point_counts_as_correct(&self.revised_verdict))
    }

    /// The line-rate value a correctness estimate corrects: `p_correct` where the row has it,
    /// else the verdict as 0/1.
    pub fn line_p(&self) -> f64 {
        self.revised_p_correct
            .unwrap_or(if self.line_correct() { 1.0 } else { 0.0 })
    }
}

impl JudgedColumns {
    /// Whether the row belongs to the uniform slice (or a census), i.e. enters the estimate.
    pub fn uniform(&self) -> bool {
        self.inclusion_probability.is_some()
    }
}

/// Confidence band of γ (STEF's thresholds set it; its multiplier Γ is `stef::score`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfidenceTier {
    /// γ ≥ high threshold (default 0.85): Γ = 1.0.
    High,
    /// moderate ≤ γ < high (default 0.65–0.85): Γ = 0.8.
    Moderate,
    /// γ < moderate threshold: Γ = 0.5.
    Low,
}

impl ConfidenceTier {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfidenceTier::High => "high",
            ConfidenceTier::Moderate => "moderate",
            ConfidenceTier::Low => "low",
        }
    }
}

/// Quality tier of Φ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QualityTier {
    /// 90 ≤ Φ ≤ 100 by default.
    Excellent,
    /// 75 ≤ Φ < 90.
    Good,
    /// 50 ≤ Φ < 75.
    Marginal,
    /// Φ < 50.
    Poor,
}

impl QualityTier {
    /// Every tier, best first (the order every table of tiers shows).
    pub const ALL: [QualityTier; 4] = [
        QualityTier::Excellent,
        QualityTier::Good,
        QualityTier::Marginal,
        QualityTier::Poor,
    ];

    /// Every tier's stored name, best first.
    pub const NAMES: [&'static str; 4] = ["excellent", "good", "marginal", "poor"];

    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            QualityTier::Excellent => "excellent",
            QualityTier::Good => "good",
            QualityTier::Marginal => "marginal",
            QualityTier::Poor => "poor",
        }
    }
}

/// A name that is not a tier's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name:?} is not a {what} (expected one of {expected})")]
pub struct UnknownTier {
    /// The name given.
    pub name: String,
    /// Which kind of tier was asked for.
    pub what: &'static str,
    /// The names there are.
    pub expected: &'static str,
}

impl std::str::FromStr for QualityTier {
    type Err = UnknownTier;

    fn from_str(name: &str) -> Result<QualityTier, UnknownTier> {
        QualityTier::ALL
            .into_iter()
            .find(|tier| tier.as_str() == name)
            .ok_or_else(|| UnknownTier {
                name: name.to_string(),
                what: "quality tier",
                expected: "excellent, good, marginal, poor",
            })
    }
}

impl std::str::FromStr for ConfidenceTier {
    type Err = UnknownTier;

    fn from_str(name: &str) -> Result<ConfidenceTier, UnknownTier> {
        [
            ConfidenceTier::High,
            ConfidenceTier::Moderate,
            ConfidenceTier::Low,
        ]
        .into_iter()
        .find(|tier| tier.as_str() == name)
        .ok_or_else(|| UnknownTier {
            name: name.to_string(),
            what: "confidence tier",
            expected: "high, moderate, low",
        })
    }
}

/// The extra columns a `stef` row carries (flattened into the row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StefColumns {
    /// `excellent` | `good` | `marginal` | `poor`.
    pub quality_tier: QualityTier,
    /// `fully_applied` | `fully_applied_with_extras` | `partially_applied` | `not_applied`.
    pub filter_status: CompactString,
    /// `correct` | `likely_correct` | `potentially_incorrect` | `incorrect`.
    pub semantic_verdict: CompactString,
    /// Judge confidence γ ∈ [0, 1].
    pub confidence: f64,
    /// `high` | `moderate` | `low`.
    pub confidence_tier: ConfidenceTier,
    /// σ_filters ∈ {0, 3, 4, 5}.
    pub sigma_filters: u8,
    /// σ_verdict ∈ {0, 2, 3, 5}.
    pub sigma_verdict: u8,
    /// δ_lenient ∈ {0, 1}.
    pub leniency: u8,
    /// Production normalization rules that fired.
    pub rules_fired: Vec<CompactString>,
    /// `absent` | `faithful` | `adds_constraints` | `drops_constraints` | `drifted`.
    pub enrichment_status: CompactString,
    /// `deterministic` or `llm:<model>`.
    pub judge: CompactString,
    /// Whether the judge verdict came from a cache.
    pub judge_cached: bool,
    /// Version (hash) of the judge prompt, when an LLM judge was used.
    pub prompt_version: Option<CompactString>,
    /// Who produced the verdict, precisely: `deterministic sqlgrade=<version> rules=<profile
    /// version>`, or `llm model=<name> served=<model id the server reported> prompt=<version>
    /// mode=<response mode>`. A change of any part is a change of judge, tracked on its own
    /// (agreement with people, the overview's judge changes). Empty on rows written before it
    /// existed.
    #[serde(default)]
    pub judge_identity: CompactString,
    /// Version (content hash) of the app rule profile.
    pub rules_version: CompactString,
    /// LLM prompt tokens spent on this row (0 for deterministic).
    pub prompt_tokens: u64,
    /// LLM completion tokens spent on this row (0 for deterministic).
    pub completion_tokens: u64,
    /// Scoring latency in microseconds.
    pub latency_us: u64,
    /// The line-rate row's probability that people would call the query correct, from the
    /// correctness model (`stef::correctness`); its `verdict` is `p_correct ≥` the model's
    /// threshold. 0 for scored, unusable SQL (Φ 0); absent on rows that are not scored, on
    /// `stef_judged` rows and on rows written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_correct: Option<f64>,
}

impl EvaluationRow {
    /// A line-rate row's predictor of correctness for the estimates: its `p_correct`, else its
    /// verdict as 0/1.
    pub fn line_rate_p(&self) -> f64 {
        self.stef
            .as_ref()
            .and_then(|s| s.p_correct)
            .unwrap_or(if self.verdict == Some(true) { 1.0 } else { 0.0 })
    }

    /// A row carrying the event's identity and labels; metric fields are filled by the caller.
    pub fn for_event(event: &Event, ts: &str, metric: Metric) -> EvaluationRow {
        EvaluationRow {
            event_id: CompactString::from(&event.event_id),
            ts: CompactString::from(event.ts.as_deref().unwrap_or(ts)),
            app_id: event.app_id.as_deref().map(CompactString::from),
            agent_id: event.agent_id.as_deref().map(CompactString::from),
            agent_version: event.agent_version.as_deref().map(CompactString::from),
            model: event.model.as_deref().map(CompactString::from),
            run_id: event.run_id.as_deref().map(CompactString::from),
            metric,
            value: 0.0,
            verdict: None,
            status: RowStatus::Ok,
            details: Details::default(),
            stef: None,
            judged: None,
        }
    }
}

/// A row's `details` object, held in one of two forms that serialise to the same JSON.
///
/// - [`Details::Tree`]: a [`Value`], for rows whose builders assemble or edit the object piece by
///   piece (gold metrics, judged rows, error rows) and for rows read back from a sink.
/// - [`Details::Rendered`]: JSON text rendered once, straight from typed data, for the line-rate
///   STEF row that every event gets. Building a `Value` tree (a `BTreeMap` per object, a `String`
///   per key) only to serialise and drop it was a tenth of the whole process's CPU per event;
///   sinks copy the rendered text as it is.
///
/// Readers that need a field use [`Details::tree`] (free, `Tree` only) or [`Details::to_value`]
/// (parses `Rendered`: fine for one row, not for a per-event hot path). Equality compares the
/// JSON values, so the two forms of one object are equal.
#[derive(Debug, Clone)]
pub enum Details {
    /// A JSON value (normally an object).
    Tree(Value),
    /// JSON text rendered from typed data; always a valid JSON object.
    Rendered(String),
}

impl Details {
    /// Render `value` once as JSON text. Serialising the typed data cannot normally fail (only
    /// maps with non-string keys can); if it does, the details say so instead of vanishing.
    pub fn rendered<T: Serialize + ?Sized>(value: &T) -> Details {
        // Room for a line-rate row's details (~1,500 bytes) without growing the text as it is
        // written.
        match crate::json_text::to_string_with_capacity(value, RENDERED_CAPACITY) {
            Ok(text) => Details::Rendered(text),
            Err(error) => Details::Tree(serde_json::json!({
                "details_error": format!("details could not be rendered: {error}"),
            })),
        }
    }

    /// The value tree, when held as one (no parsing). `None` for rendered details.
    pub fn tree(&self) -> Option<&Value> {
        match self {
            Details::Tree(value) => Some(value),
            Details::Rendered(_) => None,
        }
    }

    /// The details as a value tree (a clone, or a parse of the rendered text).
    pub fn to_value(&self) -> Value {
        match self {
            Details::Tree(value) => value.clone(),
            Details::Rendered(raw) => parse_rendered(raw),
        }
    }

    /// The JSON text, borrowed when the details are rendered (what the ClickHouse `details`
    /// column stores; the sink then copies no string per row).
    pub fn json_text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Details::Tree(value) => std::borrow::Cow::Owned(value.to_string()),
            Details::Rendered(raw) => std::borrow::Cow::Borrowed(raw),
        }
    }

    /// The details as a mutable value tree (rendered details are parsed into one first).
    pub fn tree_mut(&mut self) -> &mut Value {
        if let Details::Rendered(raw) = self {
            *self = Details::Tree(parse_rendered(raw));
        }
        match self {
            Details::Tree(value) => value,
            Details::Rendered(_) => unreachable!("rendered details were just parsed into a tree"),
        }
    }
}

/// Rendered details are produced by `serde_json` from typed data, so they always parse; a
/// failure would be a bug in `serde_json`, reported in the value rather than by a panic.
fn parse_rendered(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|error| {
        serde_json::json!({"details_error": format!("rendered details do not parse: {error}")})
    })
}

impl std::fmt::Display for Details {
    /// The JSON text (what the ClickHouse `details` column stores).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Details::Tree(value) => value.fmt(f),
            Details::Rendered(raw) => f.write_str(raw),
        }
    }
}

impl Default for Details {
    /// An empty object.
    fn default() -> Details {
        Details::Tree(Value::Object(Default::default()))
    }
}

impl From<Value> for Details {
    fn from(value: Value) -> Details {
        Details::Tree(value)
    }
}

impl PartialEq for Details {
    fn eq(&self, other: &Details) -> bool {
        match (self, other) {
            (Details::Tree(a), Details::Tree(b)) => a == b,
            (Details::Rendered(a), Details::Rendered(b)) if a == b => true,
            _ => self.to_value() == other.to_value(),
        }
    }
}

impl Serialize for Details {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Details::Tree(value) => value.serialize(serializer),
            // JSON writers write the text verbatim (as they write a `serde_json` `RawValue`, the
            // same struct); other serialisers get the parsed value.
            Details::Rendered(raw) => {
                if serializer_is_json::<S>() {
                    use serde::ser::SerializeStruct;
                    let token = crate::json_text::RAW_VALUE_TOKEN;
                    let mut text = serializer.serialize_struct(token, 1)?;
                    text.serialize_field(token, raw.as_str())?;
                    text.end()
                } else {
                    parse_rendered(raw).serialize(serializer)
                }
            }
        }
    }
}

impl<'de> Deserialize<'de> for Details {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Details, D::Error> {
        Value::deserialize(deserializer).map(Details::Tree)
    }
}

/// Whether `S` is one of serde_json's serialisers (the writer or `to_value`) or
/// [`crate::json_text`]'s writer, which pass a [`RawValue`](serde_json::value::RawValue) through
/// as JSON. Other serialisers would see its private wrapper struct instead, so they are given the
/// parsed value.
fn serializer_is_json<S>() -> bool {
    // Searchers built once: this runs for every row a JSON sink writes.
    static JSON_PATHS: std::sync::LazyLock<[memchr::memmem::Finder<'static>; 2]> =
        std::sync::LazyLock::new(|| {
            ["serde_json::", "json_text::"].map(memchr::memmem::Finder::new)
        });
    let name = std::any::type_name::<S>().as_bytes();
    JSON_PATHS.iter().any(|path| path.find(name).is_some())
}

/// The capacity a rendered `details` text starts with: a line-rate row's is ~1,500 bytes (BIRD
/// dev), so most are written without growing the buffer.
const RENDERED_CAPACITY: usize = 2048;

/// A payload that could not be decoded or validated, kept losslessly with the reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// When sqlgrade received the payload (RFC 3339).
    pub received_at: String,
    /// Where it came from: `file:<path>:<line>`, `kafka:<topic>/<partition>@<offset>`, `stdin`, ….
    pub source: String,
    /// Why it was rejected.
    pub reason: String,
    /// The original bytes: verbatim when UTF-8, base64 otherwise (see `payload_encoding`).
    pub payload: String,
    /// `utf8` or `base64`.
    pub payload_encoding: String,
}

impl DeadLetter {
    /// Build a dead letter from the original bytes, choosing a lossless encoding.
    pub fn new(source: impl Into<String>, reason: impl Into<String>, payload: &[u8]) -> DeadLetter {
        let (payload, payload_encoding) = match std::str::from_utf8(payload) {
            Ok(s) => (s.to_string(), "utf8"),
            Err(_) => (
                base64::engine::general_purpose::STANDARD.encode(payload),
                "base64",
            ),
        };
        DeadLetter {
            received_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            source: source.into(),
            reason: reason.into(),
            payload,
            payload_encoding: payload_encoding.to_string(),
        }
    }

    /// The original bytes back.
    pub fn payload_bytes(&self) -> Vec<u8> {
        if self.payload_encoding == "base64" {
            base64::engine::general_purpose::STANDARD
                .decode(&self.payload)
                .unwrap_or_default()
        } else {
            self.payload.clone().into_bytes()
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_stored_metric_is_typed_when_known_and_kept_by_name_when_not() {
        use super::{Metric, StoredMetric};
        let known: StoredMetric = serde_json::from_str("\"ts_ex\"").unwrap();
        assert_eq!(known, StoredMetric::Known(Metric::TsEx));
        assert!(known == Metric::TsEx && known != Metric::Ex);
        let newer: StoredMetric = serde_json::from_str("\"bleu\"").unwrap();
        assert_eq!(newer.known(), None);
        assert_eq!(serde_json::to_string(&newer).unwrap(), "\"bleu\"");
        assert_eq!(serde_json::to_string(&known).unwrap(), "\"ts_ex\"");
        // Ordered, compared and looked up by name, as the column is.
        let mut all: [StoredMetric; 4] = [
            known.clone(),
            newer.clone(),
            Metric::Esm.into(),
            Metric::Stef.into(),
        ];
        all.sort();
        let names: Vec<&str> = all.iter().map(StoredMetric::as_str).collect();
        assert_eq!(names, ["bleu", "esm", "stef", "ts_ex"]);
        assert_eq!(
            StoredMetric::Other("ex".into()),
            StoredMetric::from(Metric::Ex)
        );
        let map = std::collections::BTreeMap::from([(known, 1)]);
        assert_eq!(map.get("ts_ex"), Some(&1));
        assert_eq!(
            format!("[{newer:>6}][{:<7}]", StoredMetric::from(Metric::Esm)),
            "[  bleu][esm    ]"
        );
    }

    #[test]
    fn the_metric_table_has_one_entry_per_metric_in_order_with_serde_names() {
        for (i, entry) in super::METRICS.iter().enumerate() {
            assert_eq!(entry.metric as usize, i, "{} out of order", entry.name);
            assert_eq!(
                serde_json::to_value(entry.metric).unwrap(),
                serde_json::Value::String(entry.name.to_string())
            );
            assert_eq!(super::Metric::from_name(entry.name), Some(entry.metric));
        }
        // Adding a variant without an entry fails here: the last variant is the last entry.
        assert_eq!(super::Metric::Rose as usize + 1, super::METRICS.len());
    }

    use super::*;

    #[test]
    fn rendered_and_tree_details_are_the_same_json() {
        #[derive(Serialize)]
        struct Typed<'a> {
            sql: &'a str,
            n: u8,
            missing: Option<&'a str>,
        }
        let rendered = Details::rendered(&Typed {
            sql: "SELECT \"a\"\n",
            n: 3,
            missing: None,
        });
        let tree =
            Details::from(serde_json::json!({"sql": "SELECT \"a\"\n", "n": 3, "missing": null}));
        assert!(matches!(rendered, Details::Rendered(_)));
        assert_eq!(rendered, tree);
        assert_eq!(rendered.to_value(), tree.to_value());
        assert!(rendered.tree().is_none());
        assert_eq!(tree.tree(), Some(&tree.to_value()));
        // Display and the borrowed text are the JSON itself; a row embeds it verbatim.
        assert_eq!(
            rendered.to_string(),
            r#"{"sql":"SELECT \"a\"\n","n":3,"missing":null}"#
        );
        assert!(matches!(
            rendered.json_text(),
            std::borrow::Cow::Borrowed(_)
        ));
        let mut row = EvaluationRow::for_event(
            &Event::from_value(serde_json::json!({"question": "q", "sql": "s", "event_id": "e"}))
                .unwrap(),
            "2026-11-24T00:00:00Z",
            Metric::Stef,
        );
        row.details = rendered.clone();
        let line = serde_json::to_string(&row).unwrap();
        assert!(line.contains(r#""details":{"sql":"SELECT \"a\"\n","n":3,"missing":null}"#));
        // Read back, details are a tree equal to what was written.
        let back: EvaluationRow = serde_json::from_str(&line).unwrap();
        assert!(matches!(back.details, Details::Tree(_)));
        assert_eq!(back, row);
        // Editing rendered details turns them into a tree first.
        let mut edited = rendered;
        edited
            .tree_mut()
            .as_object_mut()
            .unwrap()
            .insert("judge_error".into(), "x".into());
        assert_eq!(edited.to_value()["judge_error"], "x");
        assert_eq!(edited.to_value()["n"], 3);
    }

    #[test]
    fn dead_letter_is_lossless() {
        let bytes = b"\xff\x00abc";
        let dl = DeadLetter::new("stdin", "not utf8", bytes);
        assert_eq!(dl.payload_encoding, "base64");
        assert_eq!(dl.payload_bytes(), bytes);
        let dl = DeadLetter::new("stdin", "bad", b"{oops");
        assert_eq!(dl.payload, "{oops");
        assert_eq!(dl.payload_bytes(), b"{oops");
    }

    #[test]
    fn non_stef_rows_have_no_stef_columns() {
        let e = Event::decode(br#"{"question":"q","sql":"SELECT 1"}"#).unwrap();
        let row = EvaluationRow::for_event(&e, "2026-01-01T00:00:00Z", Metric::Ex);
        let json = serde_json::to_value(&row).unwrap();
        assert_eq!(json["metric"], "ex");
        assert_eq!(json["status"], "ok");
        assert!(json.get("quality_tier").is_none());
    }
}
