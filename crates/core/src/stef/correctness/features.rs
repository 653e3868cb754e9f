//! The line-rate evidence of one scored event as named numbers: what the correctness model
//! ([`super::model`]) weighs.
//!
//! Every feature is read from what the line-rate row stores — the STEF columns (filter status,
//! semantic verdict, γ, enrichment) and `details` (alignment, SQL summary, question spec,
//! findings, catalogue, `evidence`) — so a row read back from a store gives exactly the
//! features it was scored with ([`FeatureInput::from_stored`]); the refit of a deployment's
//! model (`calibrate --fit`) depends on it, and a test holds the two paths equal on every
//! labelled item.
//!
//! The names are public interface: a model file weighs features by name, and a file naming a
//! feature this build does not know is refused. They are `group:value` (`filter_status:not_applied`,
//! `finding:empty_result`) or `group.count` (`sql.tables`); counts are capped (the cap is in
//! [`FEATURES`]' doc line) so that one odd query cannot dominate a linear model.

use std::sync::{LazyLock, OnceLock};

use memchr::memmem::Finder;

use serde_json::Value;

use super::super::summary::SqlSummary;
use super::super::{
    Alignment, ConfirmedBy, EnrichmentStatus, ErrorCategory, Evidence, FilterStatus, Finding,
    FindingCode, NormalizationRule, Severity, Verdict,
};

/// The fixed features (everything but the per-code and per-category ones), in vector order.
/// Each: its name and what it counts (with its cap).
pub const BASE_FEATURES: [(&str, &str); 59] = [
    (
        "filter_status:fully_applied_with_extras",
        "every required filter matched, with extras",
    ),
    (
        "filter_status:partially_applied",
        "some required filters matched",
    ),
    (
        "filter_status:not_applied",
        "filters required, none matched",
    ),
    (
        "verdict_at_most:likely_correct",
        "the deterministic judge's verdict is likely_correct or worse (the verdicts are \
         ordered: each step down adds its own weight)",
    ),
    (
        "verdict_at_most:potentially_incorrect",
        "the deterministic judge's verdict is potentially_incorrect or worse",
    ),
    (
        "verdict_at_most:incorrect",
        "the deterministic judge's verdict is incorrect",
    ),
    ("confidence", "γ of the deterministic judge (0–1)"),
    ("enrichment:absent", "no enriched question"),
    (
        "enrichment:adds_constraints",
        "the enriched question adds constraints",
    ),
    (
        "enrichment:drops_constraints",
        "the enriched question drops constraints",
    ),
    (
        "enrichment:drifted",
        "the enriched question asks something else",
    ),
    (
        "alignment.required_filters",
        "filters the question requires (≤ 4)",
    ),
    ("alignment.matched", "required filters matched (≤ 4)"),
    ("alignment.missing", "required filters missing (≤ 4)"),
    (
        "alignment.mismatched",
        "required filters on the right dimension with another value (≤ 4)",
    ),
    (
        "alignment.extras",
        "SQL filters nobody asked for, not benign (≤ 4)",
    ),
    ("alignment.benign_extras", "benign extra filters (≤ 4)"),
    (
        "alignment.missing_aggregations",
        "requested aggregations not computed (≤ 4)",
    ),
    (
        "alignment.unmatched_outputs",
        "requested outputs no projection answers (≤ 4)",
    ),
    (
        "alignment.extra_projections",
        "projections nothing asked for (≤ 4)",
    ),
    (
        "alignment.missing_group_by",
        "requested groupings missing (≤ 4)",
    ),
    (
        "alignment.unexplained_group_by",
        "GROUP BY columns nothing explains (≤ 4)",
    ),
    (
        "alignment.unexplained_order",
        "an ORDER BY nothing asked for",
    ),
    (
        "alignment.suspicious_limit",
        "a LIMIT below λ_min without a top-k request",
    ),
    (
        "alignment.top_k_mismatch",
        "a top-k request the LIMIT does not implement",
    ),
    (
        "alignment.projections_match",
        "projections match the requested outputs",
    ),
    (
        "alignment.aggregations_match",
        "aggregations match the requested ones",
    ),
    ("alignment.grouping_match", "grouping matches"),
    ("rule:required_group_by", "normalization rule 1 fired"),
    ("rule:benign_group_by", "normalization rule 2 fired"),
    ("rule:default_order_by", "normalization rule 3 fired"),
    ("rule:safety_limit", "normalization rule 4 fired"),
    ("question.outputs", "outputs the question asks for (≤ 4)"),
    (
        "question.aggregations",
        "aggregations the question asks for (≤ 4)",
    ),
    ("question.filters", "filters the question states (≤ 4)"),
    ("question.group_by", "groupings the question asks for (≤ 4)"),
    ("question.explicit_order", "an ordering asked for"),
    ("question.top_k", "a top k asked for"),
    ("sql.tables", "tables the SQL reads (≤ 6)"),
    ("sql.subqueries", "nested subqueries (≤ 4)"),
    ("sql.set_operations", "UNION / INTERSECT / EXCEPT"),
    ("sql.window_functions", "window functions"),
    ("sql.aggregations", "aggregate calls (≤ 4)"),
    ("sql.filters", "WHERE and HAVING conditions (≤ 6)"),
    ("sql.or_filters", "a condition inside an OR"),
    ("sql.having", "a HAVING condition"),
    ("sql.group_by", "GROUP BY expressions (≤ 4)"),
    ("sql.order_by", "ORDER BY expressions (≤ 4)"),
    ("sql.limit", "a LIMIT"),
    ("sql.distinct", "SELECT DISTINCT"),
    ("sql.projections", "projections (≤ 6)"),
    (
        "evidence:catalogue",
        "the catalogue checks ran (the schema was found)",
    ),
    (
        "evidence:result",
        "the event carried what the query returned",
    ),
    (
        "evidence:probe",
        "the read-only probe ran on the event's database",
    ),
    (
        "findings.warning_or_error",
        "findings of severity warning or error (≤ 3)",
    ),
    (
        "findings.error",
        "findings of severity error (≤ 3), beyond their count as warning or error",
    ),
    ("findings.info", "findings of severity info (≤ 3)"),
    (
        "findings.distinct_codes",
        "different finding codes that fired (≤ 4)",
    ),
    (
        "findings.confirmed",
        "findings of severity warning or error that the data confirmed (the result or the probe; ≤ 3)",
    ),
];

/// Index of the first per-code feature (`finding:<code>`: 1 when the code fired).
const CODES_AT: usize = BASE_FEATURES.len();
/// Index of the first per-category feature (`category:<category>`: findings of that category
/// at warning or error, ≤ 2).
const CATEGORIES_AT: usize = CODES_AT + FindingCode::ALL.len();

/// How many features a vector has.
pub const FEATURE_COUNT: usize = CATEGORIES_AT + ErrorCategory::ALL.len();

/// Every feature's name, in vector order.
pub fn feature_names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names: Vec<String> = BASE_FEATURES.iter().map(|(n, _)| n.to_string()).collect();
        names.extend(
            FindingCode::ALL
                .iter()
                .map(|c| format!("finding:{}", c.as_str())),
        );
        names.extend(
            ErrorCategory::ALL
                .iter()
                .map(|c| format!("category:{}", c.as_str())),
        );
        names
    })
}

/// The index of the feature called `name`, if this build knows it.
pub fn feature_index(name: &str) -> Option<usize> {
    feature_names().iter().position(|n| n == name)
}

/// One event's features, in [`feature_names`]' order.
pub type Features = [f64; FEATURE_COUNT];

/// Counts of the question spec the features read (what `details.question_spec` keeps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QuestionShape {
    /// Requested outputs.
    pub outputs: usize,
    /// Requested aggregations.
    pub aggregations: usize,
    /// Required filters.
    pub filters: usize,
    /// Requested groupings.
    pub group_by: usize,
    /// An ordering asked for.
    pub explicit_order: bool,
    /// A top k asked for.
    pub top_k: bool,
}

/// What the features of one line-rate row are read from.
#[derive(Debug, Clone, Copy)]
pub struct FeatureInput<'a> {
    /// The code-side filter status.
    pub filter_status: FilterStatus,
    /// The deterministic judge's verdict.
    pub verdict: Verdict,
    /// Its γ.
    pub confidence: f64,
    /// The enrichment status.
    pub enrichment: EnrichmentStatus,
    /// The alignment record.
    pub alignment: &'a Alignment,
    /// The question spec's counts.
    pub question: QuestionShape,
    /// The SQL summary.
    pub sql: &'a SqlSummary,
    /// The findings.
    pub findings: &'a [Finding],
    /// Whether the catalogue checks ran.
    pub catalogue_used: bool,
    /// The event's result and the probe.
    pub evidence: Evidence,
}

fn flag(on: bool) -> f64 {
    if on { 1.0 } else { 0.0 }
}

fn count(n: usize, cap: usize) -> f64 {
    n.min(cap) as f64
}

impl FeatureInput<'_> {
    /// The feature vector.
    pub fn features(&self) -> Features {
        let mut f = [0.0; FEATURE_COUNT];
        let a = self.alignment;
        let benign = a.extras.iter().filter(|e| e.benign).count();
        let rules = |r: NormalizationRule| flag(a.rules_fired.contains(&r));
        let sql = self.sql;
        // The marks' searchers are built once: `[` is rare in a rendered filter, and the
        // searcher's prefilter jumps to it (a search by the first byte would stop at every space).
        static MARKS: LazyLock<[Finder<'static>; 2]> =
            LazyLock::new(|| [" [or]", " [having]"].map(Finder::new));
        let [or_mark, having_mark] = &*MARKS;
        let marked = |mark: &Finder<'_>| {
            sql.filters
                .iter()
                .any(|x| mark.find(x.as_bytes()).is_some())
        };
        let severity = |s: Severity| self.findings.iter().filter(|x| x.severity == s).count();
        let mut codes = [false; FindingCode::ALL.len()];
        for finding in self.findings {
            codes[finding.code as usize] = true;
        }
        let base = [
            flag(self.filter_status == FilterStatus::FullyAppliedWithExtras),
            flag(self.filter_status == FilterStatus::PartiallyApplied),
            flag(self.filter_status == FilterStatus::NotApplied),
            flag(self.verdict != Verdict::Correct),
            flag(matches!(
                self.verdict,
                Verdict::PotentiallyIncorrect | Verdict::Incorrect
            )),
            flag(self.verdict == Verdict::Incorrect),
            self.confidence.clamp(0.0, 1.0),
            flag(self.enrichment == EnrichmentStatus::Absent),
            flag(self.enrichment == EnrichmentStatus::AddsConstraints),
            flag(self.enrichment == EnrichmentStatus::DropsConstraints),
            flag(self.enrichment == EnrichmentStatus::Drifted),
            count(a.required_filters, 4),
            count(a.matched.len(), 4),
            count(a.missing.len(), 4),
            count(a.mismatched.len(), 4),
            count(a.extras.len() - benign, 4),
            count(benign, 4),
            count(a.missing_aggregations.len(), 4),
            count(a.unmatched_outputs.len(), 4),
            count(a.extra_projections.len(), 4),
            count(a.missing_group_by.len(), 4),
            count(a.unexplained_group_by.len(), 4),
            flag(a.unexplained_order),
            flag(a.suspicious_limit.is_some()),
            flag(a.top_k_mismatch.is_some()),
            flag(a.projections_match),
            flag(a.aggregations_match),
            flag(a.grouping_match),
            rules(NormalizationRule::RequiredGroupBy),
            rules(NormalizationRule::BenignGroupBy),
            rules(NormalizationRule::DefaultOrderBy),
            rules(NormalizationRule::SafetyLimit),
            count(self.question.outputs, 4),
            count(self.question.aggregations, 4),
            count(self.question.filters, 4),
            count(self.question.group_by, 4),
            flag(self.question.explicit_order),
            flag(self.question.top_k),
            count(sql.tables.len(), 6),
            count(sql.subqueries, 4),
            flag(sql.set_operations),
            flag(sql.window_functions),
            count(sql.aggregations.len(), 4),
            count(sql.filters.len(), 6),
            flag(marked(or_mark)),
            flag(marked(having_mark)),
            count(sql.group_by.len(), 4),
            count(sql.order_by.len(), 4),
            flag(sql.limit.is_some()),
            flag(sql.distinct),
            count(sql.projections.len(), 6),
            flag(self.catalogue_used),
            flag(self.evidence.result),
            flag(self.evidence.probe),
            count(severity(Severity::Warning) + severity(Severity::Error), 3),
            count(severity(Severity::Error), 3),
            count(severity(Severity::Info), 3),
            count(codes.iter().filter(|c| **c).count(), 4),
            count(
                self.findings
                    .iter()
                    .filter(|x| {
                        x.severity != Severity::Info
                            && matches!(
                                x.confirmed_by,
                                Some(ConfirmedBy::Result | ConfirmedBy::Probe)
                            )
                    })
                    .count(),
                3,
            ),
        ];
        f[..CODES_AT].copy_from_slice(&base);
        for (i, fired) in codes.iter().enumerate() {
            f[CODES_AT + i] = flag(*fired);
        }
        for finding in self.findings {
            if finding.severity != Severity::Info {
                let slot = &mut f[CATEGORIES_AT + finding.category as usize];
                *slot = (*slot + 1.0).min(2.0);
            }
        }
        f
    }
}

/// Why a stored row's features cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureError {
    /// A STEF column holds a name this build does not know.
    #[error("{column} {value:?} is not a name this build knows")]
    UnknownName {
        /// The column.
        column: &'static str,
        /// What it holds.
        value: String,
    },
    /// A part of `details` is missing or malformed.
    #[error("details.{part}: {message}")]
    Details {
        /// Which part.
        part: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// The parts of a stored line-rate row the features are read from, owned (read back from a
/// store); [`StoredFeatureInput::input`] lends them as a [`FeatureInput`].
#[derive(Debug, Clone)]
pub struct StoredFeatureInput {
    filter_status: FilterStatus,
    verdict: Verdict,
    confidence: f64,
    enrichment: EnrichmentStatus,
    alignment: Alignment,
    question: QuestionShape,
    sql: SqlSummary,
    findings: Vec<Finding>,
    catalogue_used: bool,
    evidence: Evidence,
}

fn parse_name<T: serde::de::DeserializeOwned>(
    column: &'static str,
    value: &str,
) -> Result<T, FeatureError> {
    serde_json::from_value(Value::String(value.to_string())).map_err(|_| {
        FeatureError::UnknownName {
            column,
            value: value.to_string(),
        }
    })
}

fn part<T: serde::de::DeserializeOwned + Default>(
    details: &Value,
    key: &'static str,
) -> Result<T, FeatureError> {
    match details.get(key) {
        None | Some(Value::Null) => Ok(T::default()),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| FeatureError::Details {
            part: key,
            message: e.to_string(),
        }),
    }
}

impl StoredFeatureInput {
    /// Read a stored `stef` row's features: its STEF columns as stored (names) and its
    /// `details` object. Findings whose code this build does not know (a newer build wrote
    /// them) are left out.
    pub fn from_stored(
        filter_status: &str,
        verdict: &str,
        confidence: f64,
        details: &Value,
    ) -> Result<StoredFeatureInput, FeatureError> {
        let enrichment = details
            .get("enrichment")
            .and_then(|e| e.get("status"))
            .and_then(Value::as_str)
            .unwrap_or("absent");
        let question = details.get("question_spec");
        let len = |key: &str| {
            question
                .and_then(|q| q.get(key))
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
        };
        let findings = details
            .get("findings")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|f| serde_json::from_value::<Finding>(f.clone()).ok())
                    .collect()
            })
            .unwrap_or_default();
        let catalogue_used = details
            .get("catalogue")
            .and_then(|c| c.get("status"))
            .and_then(Value::as_str)
            == Some("used");
        Ok(StoredFeatureInput {
            filter_status: parse_name("filter_status", filter_status)?,
            verdict: parse_name("semantic_verdict", verdict)?,
            confidence,
            enrichment: parse_name("enrichment_status", enrichment)?,
            alignment: part(details, "alignment")?,
            question: QuestionShape {
                outputs: len("outputs"),
                aggregations: len("aggregations"),
                filters: len("filters"),
                group_by: len("group_by"),
                explicit_order: question
                    .and_then(|q| q.get("explicit_order"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                top_k: question.and_then(|q| q.get("top_k")).is_some(),
            },
            sql: part(details, "sql")?,
            findings,
            catalogue_used,
            evidence: part(details, "evidence")?,
        })
    }

    /// The parts as a [`FeatureInput`].
    pub fn input(&self) -> FeatureInput<'_> {
        FeatureInput {
            filter_status: self.filter_status,
            verdict: self.verdict,
            confidence: self.confidence,
            enrichment: self.enrichment,
            alignment: &self.alignment,
            question: self.question,
            sql: &self.sql,
            findings: &self.findings,
            catalogue_used: self.catalogue_used,
            evidence: self.evidence,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_cover_the_vector() {
        let names = feature_names();
        assert_eq!(names.len(), FEATURE_COUNT);
        let mut sorted = names.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), FEATURE_COUNT, "a feature name repeats");
        assert_eq!(
            feature_index("finding:empty_result").map(|i| i >= CODES_AT),
            Some(true)
        );
        assert_eq!(feature_index("no such feature"), None);
        for (i, code) in FindingCode::ALL.iter().enumerate() {
            assert_eq!(
                *code as usize, i,
                "FindingCode::ALL is in declaration order"
            );
        }
        for (i, cat) in ErrorCategory::ALL.iter().enumerate() {
            assert_eq!(
                *cat as usize, i,
                "ErrorCategory::ALL is in declaration order"
            );
        }
    }
}
