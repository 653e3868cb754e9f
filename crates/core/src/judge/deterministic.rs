//! The built-in judge: no LLM. Its question spec and enrichment status are the deterministic
//! ones computed by [`crate::stef::prepare`]; its verdict is derived from the alignment record by
//! the rule table below, first matching rule wins.
//!
//! | # | condition (from the alignment / enrichment record and the checks' findings) | verdict | γ |
//! |---|---|---|---|
//! | 0 | a finding of severity `error` (`stef::checks`: the SQL contradicts a definition it was given, names a column or table the catalogue does not have, divides integers, …) | incorrect | 0.75 |
//! | 1 | filters were required and none matched (`not_applied`) | incorrect | 0.75 |
//! | 2 | a result restriction that was not asked for (LIMIT < λ_min without top-k, or a LIMIT that contradicts the top-k) **and** a content mismatch (missing/mismatched filter, missing aggregation, unanswered output) | incorrect | 0.70 |
//! | 3 | `partially_applied`; a requested aggregation missing; a top-k/LIMIT contradiction; a LIMIT < λ_min without top-k; an enrichment that drops constraints / drifted; or a finding of severity `warning` | potentially_incorrect | 0.60 |
//! | 4 | filters and aggregations fine, but: an unanswered output, a returned column nobody asked for, a grouping difference, a non-benign extra filter, an ORDER BY no rule explains, an enrichment that adds constraints, or nothing in the question could be checked | likely_correct | 0.70 |
//! | 5 | otherwise (every required filter matched — extras, if any, benign — and outputs, aggregations and grouping match, nothing unexplained) | correct | 0.80 if at least two aspects were checked, else 0.70 |
//!
//! "Aspects checked" are: required filters, requested aggregations, requested grouping,
//! recognised outputs, a top-k request. Confidence never reaches 0.85 (the `high` band): lexicons
//! cannot read intent, so a deterministic verdict is at most a moderate-confidence signal and a
//! perfect deterministic Φ is 80 (`good`).

use async_trait::async_trait;

use super::{Judge, JudgeAssessment, JudgeError, JudgeRequest};
use crate::stef::{
    Alignment, Enrichment, EnrichmentStatus, FilterStatus, Prepared, QuestionSpec, RuleProfile,
    Severity, StefOutcome, Verdict,
};

/// Highest confidence the deterministic judge ever reports (below the 0.85 `high` band).
pub const MAX_CONFIDENCE: f64 = 0.80;

/// Judge that derives the verdict from the deterministic alignment record by documented rules.
/// Its confidence never reaches 0.85: it cannot read intent.
#[derive(Debug, Clone, Default)]
pub struct DeterministicJudge;

impl DeterministicJudge {
    /// Synchronous assessment (the deterministic judge never waits on anything).
    pub fn assess_prepared(&self, prepared: &Prepared) -> JudgeAssessment {
        let (verdict, confidence, rationale) = verdict(prepared);
        JudgeAssessment::deterministic(
            prepared.question_spec.clone(),
            prepared.enrichment.clone(),
            verdict,
            confidence,
            rationale,
        )
    }

    /// [`DeterministicJudge::assess_prepared`], the question spec and enrichment moved out of
    /// `prepared` instead of copied (they are the assessment's; `prepared` keeps defaults).
    fn assess_owned(&self, prepared: &mut Prepared) -> JudgeAssessment {
        let (verdict, confidence, rationale) = verdict(prepared);
        JudgeAssessment::deterministic(
            std::mem::take(&mut prepared.question_spec),
            std::mem::replace(&mut prepared.enrichment, Enrichment::absent()),
            verdict,
            confidence,
            rationale,
        )
    }

    /// The outcome of `prepared` with this judge — `stef::finish_owned(prepared,
    /// assess_prepared(&prepared), profile)`, without copying the question spec and enrichment
    /// into the assessment and comparing them with the originals: the assessment's spec is the
    /// prepared one, so the prepared alignment stands.
    pub fn finish(&self, mut prepared: Prepared, profile: &RuleProfile) -> StefOutcome {
        let assessment = self.assess_owned(&mut prepared);
        crate::stef::finish_own_spec(prepared, assessment, profile)
    }
}

#[async_trait]
impl Judge for DeterministicJudge {
    fn kind(&self) -> String {
        "deterministic".into()
    }

    async fn assess(&self, request: JudgeRequest<'_>) -> Result<JudgeAssessment, JudgeError> {
        Ok(self.assess_prepared(request.prepared))
    }

    fn is_deterministic(&self) -> bool {
        true
    }
}

/// Apply the rule table (module doc) to a prepared event: (verdict, γ, rationale).
pub fn verdict(prepared: &Prepared) -> (Verdict, f64, String) {
    let a = &prepared.alignment;
    let status = a.filter_status.unwrap_or(FilterStatus::FullyApplied);
    let enrichment = prepared.enrichment.status;

    // Required filters left unmet (missing, or on the right dimension with a wrong value).
    let mut unmet_filters = Vec::new();
    push_listed(&mut unmet_filters, "missing filters", &a.missing);
    push_listed(&mut unmet_filters, "mismatched filters", &a.mismatched);
    let mut content = unmet_filters.clone();
    push_listed(
        &mut content,
        "missing aggregations",
        &a.missing_aggregations,
    );
    push_listed(&mut content, "unanswered outputs", &a.unmatched_outputs);
    let mut restriction = Vec::new();
    if let Some(limit) = a.suspicious_limit {
        restriction.push(format!("LIMIT {limit} without a top-k request"));
    }
    if let Some(m) = &a.top_k_mismatch {
        restriction.push(m.clone());
    }

    // Rule 0.
    let errors: Vec<String> = prepared
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(finding_line)
        .collect();
    if !errors.is_empty() {
        return (Verdict::Incorrect, 0.75, rule_line("rule 0: ", &errors));
    }
    // Rule 1.
    if status == FilterStatus::NotApplied {
        let why = if unmet_filters.is_empty() {
            "rule 1: no required filter applied".to_string()
        } else {
            format!(
                "rule 1: no required filter applied ({})",
                unmet_filters.join("; ")
            )
        };
        return (Verdict::Incorrect, 0.75, why);
    }
    // Rule 2.
    if !restriction.is_empty() && !content.is_empty() {
        return (
            Verdict::Incorrect,
            0.70,
            format!(
                "rule 2: {} together with {}",
                restriction.join("; "),
                content.join("; ")
            ),
        );
    }
    // Rule 3.
    let rule3 = rule3_reasons(prepared, status, &unmet_filters, &restriction);
    if !rule3.is_empty() {
        return (
            Verdict::PotentiallyIncorrect,
            0.60,
            rule_line("rule 3: ", &rule3),
        );
    }
    // Rule 4.
    let mut rule4 = minor_differences(a);
    if enrichment == EnrichmentStatus::AddsConstraints {
        rule4.push(format!(
            "enrichment adds constraints ({})",
            prepared.enrichment.added.join(", ")
        ));
    }
    let checked = aspects_checked(&prepared.question_spec, a);
    if checked == 0 {
        rule4.push("nothing in the question could be checked".into());
    }
    if !rule4.is_empty() {
        return (Verdict::LikelyCorrect, 0.70, rule_line("rule 4: ", &rule4));
    }
    // Rule 5.
    let confidence = if checked >= 2 { MAX_CONFIDENCE } else { 0.70 };
    (Verdict::Correct, confidence, rule5_rationale(a, checked))
}

/// Rule 3's reasons: partially applied filters, missing aggregations, a suspicious
/// restriction, an enrichment that drops constraints or drifted, and the warnings.
fn rule3_reasons(
    prepared: &Prepared,
    status: FilterStatus,
    unmet_filters: &[String],
    restriction: &[String],
) -> Vec<String> {
    let a = &prepared.alignment;
    let enrichment = prepared.enrichment.status;
    let mut rule3 = Vec::new();
    if status == FilterStatus::PartiallyApplied {
        rule3.push("partially applied filters".to_string());
        rule3.extend(unmet_filters.iter().cloned());
    }
    push_listed(&mut rule3, "missing aggregations", &a.missing_aggregations);
    rule3.extend(restriction.iter().cloned());
    if matches!(
        enrichment,
        EnrichmentStatus::DropsConstraints | EnrichmentStatus::Drifted
    ) {
        rule3.push(format!(
            "enrichment {} (dropped: {})",
            enrichment.as_str(),
            prepared.enrichment.dropped.join(", ")
        ));
    }
    rule3.extend(
        prepared
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
            .map(finding_line),
    );
    rule3
}

/// `"<code>: <evidence>"`, a finding as the verdict rules list it. Built by copying, as the
/// other rationale lines below: the formatting machinery cost more than the copies.
fn finding_line(f: &crate::stef::Finding) -> String {
    let code = f.code.as_str();
    let mut line = String::with_capacity(code.len() + 2 + f.evidence.len());
    line.push_str(code);
    line.push_str(": ");
    line.push_str(&f.evidence);
    line
}

/// `"<rule><reasons joined by "; ">"`.
fn rule_line(rule: &str, reasons: &[String]) -> String {
    let mut line = String::from(rule);
    line.push_str(&reasons.join("; "));
    line
}

/// Rule 5's rationale: how many aspects were checked, and the normalization rules that fired.
fn rule5_rationale(a: &Alignment, checked: usize) -> String {
    let mut why = format!("rule 5: {checked} aspect(s) checked, all aligned");
    if !a.rules_fired.is_empty() {
        let fired: Vec<&str> = a.rules_fired.iter().map(|r| r.as_str()).collect();
        why.push_str("; normalization rules fired: ");
        why.push_str(&fired.join(", "));
    }
    why
}

fn minor_differences(a: &Alignment) -> Vec<String> {
    let mut out = Vec::new();
    push_listed(&mut out, "unanswered outputs", &a.unmatched_outputs);
    push_listed(&mut out, "columns nobody asked for", &a.extra_projections);
    push_listed(&mut out, "grouping missing", &a.missing_group_by);
    push_listed(&mut out, "unrequested grouping", &a.unexplained_group_by);
    let hard_extras: Vec<&str> = a
        .extras
        .iter()
        .filter(|e| !e.benign)
        .map(|e| e.filter.as_str())
        .collect();
    if !hard_extras.is_empty() {
        out.push(format!("extra filters {}", hard_extras.join(", ")));
    }
    if a.unexplained_order {
        out.push("ORDER BY not requested and not a sensible default".into());
    }
    out
}

fn aspects_checked(q: &QuestionSpec, a: &Alignment) -> usize {
    usize::from(a.required_filters > 0)
        + usize::from(!q.aggregations.is_empty())
        + usize::from(!q.group_by.is_empty())
        + usize::from(!q.outputs.is_empty())
        + usize::from(q.top_k.is_some())
}

/// Push `"<label> a, b, c"` when `items` is not empty (diagnosis lines of the verdict rules).
fn push_listed(out: &mut Vec<String>, label: &str, items: &[String]) {
    if !items.is_empty() {
        let mut line = String::with_capacity(label.len() + 1 + items.len() * 16);
        line.push_str(label);
        line.push(' ');
        line.push_str(&items.join(", "));
        out.push(line);
    }
}
