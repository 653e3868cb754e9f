//! The STEF flow for one event, end to end: [`prepare`] (SQL spec, deterministic question spec,
//! enrichment, alignment) → a judge's [`JudgeAssessment`] → [`finish`] (alignment against the
//! judge's question spec, rules, Φ) → [`StefOutcome::to_row`]; SQL that cannot be scored becomes
//! [`non_scorable_row`].

use compact_str::CompactString;
use serde::{Deserialize, Serialize};

use super::correctness::{FeatureInput, QuestionShape, VerdictModel};
use super::profile::RuleProfile;
use super::score::{ConfidenceTier, QualityTier, Score, compose};
use super::summary::SqlSummary;
use super::text::QuestionTexts;
use super::{
    Alignment, CatalogueNote, CatalogueStatus, Enrichment, EnrichmentStatus, Evidence,
    FilterStatus, Finding, JudgeAssessment, Prepared, QuestionSpec, Verdict, align, checks,
    enrichment, question, text,
};
use crate::catalogue::DbSchema;
use crate::event::Event;
use crate::sqlspec::{SpecError, SqlSpec};

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
    prepare_with(
        event,
        profile,
        &PrepareOptions {
            max_sql_bytes,
            catalogue: CatalogueSelection::None,
        },
    )
}

/// Knobs of [`prepare_with`].
#[derive(Debug, Clone, Copy)]
pub struct PrepareOptions<'a> {
    /// SQL longer than this is refused unparsed ([`SpecError::TooLarge`]).
    pub max_sql_bytes: usize,
    /// The event's database schema as the caller's catalogues found it.
    pub catalogue: CatalogueSelection<'a>,
}

/// The schema the catalogue checks use for one event.
#[derive(Debug, Clone, Copy, Default)]
pub enum CatalogueSelection<'a> {
    /// No catalogue applies to the event: schema-free checks only, nothing recorded.
    #[default]
    None,
    /// The event's database: the catalogue checks run (`details.catalogue.status = used`).
    Schema(&'a DbSchema),
    /// A catalogue applies but cannot give the schema (`details.catalogue.status =
    /// unavailable` with the reason).
    Unavailable {
        /// The database asked for.
        db_id: Option<&'a str>,
        /// Why there is no schema.
        reason: &'a str,
    },
}

impl<'a> CatalogueSelection<'a> {
    fn schema(&self) -> Option<&'a DbSchema> {
        match self {
            CatalogueSelection::Schema(s) => Some(s),
            _ => None,
        }
    }

    fn note(&self) -> Option<CatalogueNote> {
        match self {
            CatalogueSelection::None => None,
            CatalogueSelection::Schema(s) => Some(CatalogueNote {
                db_id: Some(s.db_id.clone()),
                status: CatalogueStatus::Used,
                reason: None,
            }),
            CatalogueSelection::Unavailable { db_id, reason } => Some(CatalogueNote {
                db_id: db_id.map(str::to_string),
                status: CatalogueStatus::Unavailable,
                reason: Some((*reason).to_string()),
            }),
        }
    }
}

/// [`prepare`] with explicit options: the scorer's entry point.
///
/// The dialect is the event's, else the profile's, else generic (sqlspec adds its fallbacks).
/// The SQL's references ([`SqlSpec::references`]) are collected when a check can use them: with
/// a schema, with an enriched question holding quoted values (definitions to hold literals
/// to), or with a division.
pub fn prepare_with(
    event: &Event,
    profile: &RuleProfile,
    options: &PrepareOptions<'_>,
) -> Result<Prepared, SpecError> {
    let dialect = event.dialect.as_deref().or(profile.dialect.as_deref());
    let mut extract = crate::sqlspec::ExtractOptions::for_dialect(dialect);
    extract.max_sql_bytes = options.max_sql_bytes;
    extract.collect_references = options.catalogue.schema().is_some()
        || event
            .enriched_question
            .as_deref()
            .is_some_and(|e| e.contains(['\'', '"']))
        || event.sql.contains('/');
    let sql_spec = crate::sqlspec::extract_with(&event.sql, &extract)?;
    let mut prepared = prepare_checked(event, profile, sql_spec, options.catalogue.schema());
    prepared.catalogue = options.catalogue.note();
    Ok(prepared)
}

/// [`prepare`] for an already extracted SQL spec (tests, callers that cache specs); the
/// catalogue checks need a schema and the spec's references, so they do not run here.
pub fn prepare_with_spec(event: &Event, profile: &RuleProfile, sql_spec: SqlSpec) -> Prepared {
    prepare_checked(event, profile, sql_spec, None)
}

fn prepare_checked(
    event: &Event,
    profile: &RuleProfile,
    sql_spec: SqlSpec,
    schema: Option<&DbSchema>,
) -> Prepared {
    let texts = QuestionTexts::new(&event.question, event.enriched_question.as_deref());
    let question_spec = question::extract_texts(&texts, Some(&sql_spec), profile);
    let enrichment = enrichment::validate_texts(&texts, profile);
    let alignment = align::align(&question_spec, &sql_spec, profile);
    let checks::CheckRun {
        mut findings,
        grounding,
        resolved,
    } = checks::run_grounded(&checks::CheckInput {
        texts: &texts,
        sql: &event.sql,
        spec: &sql_spec,
        question_spec: &question_spec,
        dialect: event.dialect.as_deref().or(profile.dialect.as_deref()),
        schema,
        profile,
    });
    let evidence = super::Evidence {
        result: event.result.is_some(),
        probe: false,
    };
    if let Some(result) = &event.result {
        findings.extend(super::result_checks::run(
            &super::result_checks::ResultCheckInput {
                texts: &texts,
                question_spec: &question_spec,
                result,
                source: super::result_checks::ResultSource::Event,
            },
        ));
    }
    let names = super::elements::QueryNames::resolved(&sql_spec, schema, resolved.as_deref());
    super::elements::name_findings(&mut findings, &names);
    let reads = names.reads();
    let about = super::About {
        question_type: Some(super::elements::question_type(
            &texts,
            schema,
            grounding.as_ref(),
        )),
        query_shape: super::elements::query_shape(&sql_spec, &reads),
        reads,
    };
    Prepared {
        sql_spec,
        question_spec,
        enrichment,
        alignment,
        findings,
        catalogue: None,
        evidence,
        schema_context: None,
        about,
    }
}

/// Attach the catalogue tables an LLM judge is shown (`grounding::schema_context`: the tables
/// the SQL reads and those of the columns the question names, capped) to an event about to be
/// judged by an LLM. Not done at line rate: only the judge reads it.
pub fn add_schema_context(prepared: &mut Prepared, event: &Event, schema: &DbSchema) {
    let texts = QuestionTexts::new(&event.question, event.enriched_question.as_deref());
    let grounding = super::grounding::ground(&texts, schema);
    let mut tables_read: Vec<usize> = Vec::new();
    let mut add = |name: &str| {
        if let Some(t) = schema.table_index(name)
            && !tables_read.contains(&t)
        {
            tables_read.push(t);
        }
    };
    match prepared.sql_spec.references.as_deref() {
        Some(refs) => {
            for src in refs.scopes.iter().flat_map(|s| &s.sources) {
                if let crate::sqlspec::RefSourceKind::Table(name) = &src.kind {
                    add(name);
                }
            }
        }
        None => prepared.sql_spec.tables.iter().for_each(|t| add(t)),
    }
    prepared.schema_context = Some(super::grounding::schema_context(
        schema,
        &tables_read,
        &grounding,
        &event.sql.to_ascii_lowercase(),
    ));
}

/// Whether a `stef` row says its event's `result` was set aside
/// (`details.result_ignored`): a prefix test on the line-rate row's rendered details (the key
/// is rendered first), a lookup on a value tree — no parse, so the run summary can count it
/// per row.
pub fn result_ignored(details: &crate::evaluation::Details) -> bool {
    match details {
        crate::evaluation::Details::Rendered(raw) => raw.starts_with("{\"result_ignored\":"),
        crate::evaluation::Details::Tree(value) => value.get("result_ignored").is_some(),
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
    /// The deterministic checks' findings (the prepared event's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// What the catalogue did (the prepared event's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalogue: Option<CatalogueNote>,
    /// The event's result and the probe (the prepared event's).
    #[serde(default, skip_serializing_if = "Evidence::is_empty")]
    pub evidence: Evidence,
    /// What the event is about (the prepared event's).
    #[serde(default)]
    pub about: super::About,
}

/// The question spec as stored in `details`: aggregations and filters rendered as readable
/// strings (`count distinct(hero)`, `publisher_name = 'marvel comics'`, `? > 15` when the
/// dimension is unknown) — compact for drill-down, and far fewer JSON objects per row.
struct QuestionSummary<'a>(&'a QuestionSpec);

impl Serialize for QuestionSummary<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let q = self.0;
        let mut map = serializer.serialize_map(None)?;
        if !q.outputs.is_empty() {
            map.serialize_entry("outputs", &q.outputs)?;
        }
        if !q.aggregations.is_empty() {
            let aggs: Vec<String> = q
                .aggregations
                .iter()
                .map(align::question_aggregation_label)
                .collect();
            map.serialize_entry("aggregations", &aggs)?;
        }
        if !q.filters.is_empty() {
            let filters: Vec<String> = q.filters.iter().map(text::render_question_filter).collect();
            map.serialize_entry("filters", &filters)?;
        }
        if !q.group_by.is_empty() {
            map.serialize_entry("group_by", &q.group_by)?;
        }
        map.serialize_entry("explicit_order", &q.explicit_order)?;
        if let Some(k) = q.top_k {
            map.serialize_entry("top_k", &k)?;
        }
        map.end()
    }
}

/// The line-rate row's `details`, serialised once straight to JSON text (see
/// [`Details::Rendered`](crate::evaluation::Details::Rendered)); the output reference (`docs/reference/output.md`)
/// documents the keys.
#[derive(Serialize)]
struct StefDetails<'a> {
    /// Why the event's `result` was set aside (first, so that the run summary can count it
    /// with a prefix test: [`RESULT_IGNORED_PREFIX`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    result_ignored: Option<&'a str>,
    sql: &'a SqlSummary,
    question_spec: QuestionSummary<'a>,
    alignment: &'a Alignment,
    enrichment: &'a super::Enrichment,
    rationale: &'a str,
    judge_filter_status: Option<&'static str>,
    /// How the LLM judge was asked for its reply (fresh LLM replies only).
    #[serde(skip_serializing_if = "Option::is_none")]
    response_mode: Option<&'a str>,
    #[serde(skip_serializing_if = "<[Finding]>::is_empty")]
    findings: &'a [Finding],
    #[serde(skip_serializing_if = "Option::is_none")]
    catalogue: Option<&'a CatalogueNote>,
    #[serde(skip_serializing_if = "Evidence::is_empty")]
    evidence: Evidence,
    components: Components,
    /// What the event is about (last, so the keys before keep their place).
    reads: &'a super::Elements,
    #[serde(skip_serializing_if = "Option::is_none")]
    question_type: Option<&'a str>,
    query_shape: &'a str,
}

/// Φ's components in `details.components`.
#[derive(Serialize)]
struct Components {
    sigma_filters: u8,
    sigma_verdict: u8,
    leniency: u8,
    base: u8,
    confidence: f64,
    multiplier: f64,
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
        judged_alignment(&assessment, prepared, profile)
    };
    outcome_of(
        alignment,
        assessment,
        profile,
        SqlSummary::of(&prepared.sql_spec),
        prepared.findings.clone(),
        prepared.catalogue.clone(),
        prepared.evidence,
        prepared.about.clone(),
    )
}

/// [`finish`] for a `prepared` nothing reads afterwards (the line-rate row): its alignment,
/// findings, catalogue note and elements move into the outcome instead of being copied.
pub fn finish_owned(
    prepared: Prepared,
    assessment: JudgeAssessment,
    profile: &RuleProfile,
) -> StefOutcome {
    if assessment.question_spec == prepared.question_spec {
        return finish_own_spec(prepared, assessment, profile);
    }
    let alignment = judged_alignment(&assessment, &prepared, profile);
    finish_own_spec(
        Prepared {
            alignment,
            ..prepared
        },
        assessment,
        profile,
    )
}

/// [`finish_owned`] for an assessment whose question spec is `prepared`'s own — moved out of
/// it by the deterministic judge, or aligned into `prepared.alignment` already: the prepared
/// alignment stands, with nothing compared.
pub fn finish_own_spec(
    prepared: Prepared,
    assessment: JudgeAssessment,
    profile: &RuleProfile,
) -> StefOutcome {
    let sql_summary = SqlSummary::of(&prepared.sql_spec);
    outcome_of(
        prepared.alignment,
        assessment,
        profile,
        sql_summary,
        prepared.findings,
        prepared.catalogue,
        prepared.evidence,
        prepared.about,
    )
}

/// The alignment of a judge's own question spec (its values normalized like SQL literals).
fn judged_alignment(
    assessment: &JudgeAssessment,
    prepared: &Prepared,
    profile: &RuleProfile,
) -> Alignment {
    let mut spec = assessment.question_spec.clone();
    for f in &mut spec.filters {
        f.value = text::normalize_value(&f.value);
    }
    align::align(&spec, &prepared.sql_spec, profile)
}

/// Φ and the outcome from the alignment and the judge's assessment (the body of [`finish`]).
#[allow(clippy::too_many_arguments)]
fn outcome_of(
    alignment: Alignment,
    assessment: JudgeAssessment,
    profile: &RuleProfile,
    sql_summary: SqlSummary,
    findings: Vec<Finding>,
    catalogue: Option<CatalogueNote>,
    evidence: Evidence,
    about: super::About,
) -> StefOutcome {
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
        sql_summary,
        findings,
        catalogue,
        evidence,
        about,
    }
}

impl StefOutcome {
    /// What the correctness model reads of this outcome (the same parts the row stores, so a
    /// stored row gives the same features: `StoredFeatureInput`).
    pub fn feature_input(&self) -> FeatureInput<'_> {
        let q = &self.assessment.question_spec;
        FeatureInput {
            filter_status: self.filter_status,
            verdict: self.assessment.verdict,
            confidence: self.assessment.confidence,
            enrichment: self.assessment.enrichment.status,
            alignment: &self.alignment,
            question: QuestionShape {
                outputs: q.outputs.len(),
                aggregations: q.aggregations.len(),
                filters: q.filters.len(),
                group_by: q.group_by.len(),
                explicit_order: q.explicit_order,
                top_k: q.top_k.is_some(),
            },
            sql: &self.sql_summary,
            findings: &self.findings,
            catalogue_used: self
                .catalogue
                .as_ref()
                .is_some_and(|c| c.status == super::CatalogueStatus::Used),
            evidence: self.evidence,
        }
    }

    /// The `stef` row for this outcome, its `p_correct` and verdict from the shipped
    /// correctness model ([`StefOutcome::to_row_with`]). `ts` is used when the event has none.
    pub fn to_row(
        &self,
        event: &Event,
        ts: &str,
        profile: &RuleProfile,
        latency_us: u64,
    ) -> crate::evaluation::EvaluationRow {
        self.to_row_with(event, ts, profile, latency_us, VerdictModel::shipped())
    }

    /// The `stef` row for this outcome. A deterministic assessment (the line-rate
    /// row) gets `p_correct` from `model`, its verdict is `p_correct ≥` the model's threshold
    /// and its judge identity names the model's version; any other judge's row (the LLM's
    /// second pass) keeps the judge's own verdict (`correct` / `likely_correct`) and no
    /// `p_correct`. `ts` is used when the event has none.
    pub fn to_row_with(
        &self,
        event: &Event,
        ts: &str,
        profile: &RuleProfile,
        latency_us: u64,
        model: &VerdictModel,
    ) -> crate::evaluation::EvaluationRow {
        let mut row =
            crate::evaluation::EvaluationRow::for_event(event, ts, crate::evaluation::Metric::Stef);
        let a = &self.assessment;
        let s = &self.score;
        row.value = s.phi;
        let line_rate = a.judge == "deterministic" && a.identity.is_none();
        let p_correct = line_rate.then(|| model.p_correct(&self.feature_input().features()));
        row.verdict = Some(match p_correct {
            Some(p) => model.verdict(p),
            None => matches!(a.verdict, Verdict::Correct | Verdict::LikelyCorrect),
        });
        row.status = crate::evaluation::RowStatus::Ok;
        row.details = crate::evaluation::Details::rendered(&StefDetails {
            result_ignored: event.result_ignored.as_deref(),
            sql: &self.sql_summary,
            question_spec: QuestionSummary(&a.question_spec),
            alignment: &self.alignment,
            enrichment: &a.enrichment,
            rationale: &a.rationale,
            judge_filter_status: self.judge_filter_status.map(FilterStatus::as_str),
            response_mode: a.response_mode.as_deref(),
            findings: &self.findings,
            catalogue: self.catalogue.as_ref(),
            evidence: self.evidence,
            components: Components {
                sigma_filters: s.sigma_filters,
                sigma_verdict: s.sigma_verdict,
                leniency: s.leniency,
                base: s.base,
                confidence: s.confidence,
                multiplier: s.multiplier,
            },
            reads: &self.about.reads,
            question_type: self.about.question_type.as_deref(),
            query_shape: &self.about.query_shape,
        });
        row.stef = Some(crate::evaluation::StefColumns {
            quality_tier: s.quality_tier,
            filter_status: CompactString::const_new(self.filter_status.as_str()),
            semantic_verdict: CompactString::const_new(a.verdict.as_str()),
            confidence: s.confidence,
            confidence_tier: s.confidence_tier,
            sigma_filters: s.sigma_filters,
            sigma_verdict: s.sigma_verdict,
            leniency: s.leniency,
            rules_fired: self
                .alignment
                .rules_fired
                .iter()
                .map(|r| CompactString::const_new(r.as_str()))
                .collect(),
            enrichment_status: CompactString::const_new(a.enrichment.status.as_str()),
            judge: a.judge.as_str().into(),
            judge_cached: a.cached,
            prompt_version: a.prompt_version.as_deref().map(CompactString::from),
            judge_identity: match &a.identity {
                Some(identity) => identity.as_str().into(),
                None if line_rate => line_rate_identity(profile, model),
                None => super::assessment::rule_identity(&a.judge, &profile.version).into(),
            },
            rules_version: profile.version.as_str().into(),
            prompt_tokens: a.usage.prompt_tokens,
            completion_tokens: a.usage.completion_tokens,
            latency_us,
            p_correct,
        });
        row
    }
}

/// The line-rate judge's identity: the deterministic rules' (sqlgrade and rule-profile
/// versions) and the correctness model's version, since either changes what a row says.
fn line_rate_identity(profile: &RuleProfile, model: &VerdictModel) -> CompactString {
    let rules = profile.compiled().deterministic_identity.as_str();
    let mut identity = CompactString::with_capacity(rules.len() + 9 + model.version().len());
    identity.push_str(rules);
    identity.push_str(" verdict=");
    identity.push_str(model.version());
    identity
}

/// A non-scorable row's details: `enrichment`, `error`, `sql_bytes`, `status`, in the order a
/// JSON value tree renders its keys (sorted, nested objects too).
///
/// Rendered here, in the scoring task, from the typed data: the sink's writer then copies the
/// text as it copies a line-rate row's, instead of rendering a value tree on its one task (under
/// a flood of unparseable SQL every row is such a row). The text is the value tree's, byte for
/// byte (`non_scorable_details_render_as_their_value_tree`). An event whose `result` was set
/// aside keeps the tree with `result_ignored` among its keys, since [`result_ignored`] finds the
/// key in rendered details only when it comes first.
#[derive(Serialize)]
struct NonScorableDetails<'a> {
    enrichment: SortedEnrichment<'a>,
    error: String,
    sql_bytes: usize,
    status: &'static str,
}

/// [`Enrichment`] with its keys in sorted order.
#[derive(Serialize)]
struct SortedEnrichment<'a> {
    added: &'a [String],
    dropped: &'a [String],
    status: EnrichmentStatus,
}

fn non_scorable_details(
    event: &Event,
    error: &SpecError,
    status: crate::evaluation::RowStatus,
    enrichment: &Enrichment,
) -> crate::evaluation::Details {
    let details = NonScorableDetails {
        enrichment: SortedEnrichment {
            added: &enrichment.added,
            dropped: &enrichment.dropped,
            status: enrichment.status,
        },
        error: error.to_string(),
        sql_bytes: event.sql.len(),
        status: status.as_str(),
    };
    let Some(why) = &event.result_ignored else {
        return crate::evaluation::Details::rendered(&details);
    };
    match serde_json::to_value(&details) {
        Ok(mut tree) => {
            if let Some(map) = tree.as_object_mut() {
                map.insert("result_ignored".into(), why.clone().into());
            }
            tree.into()
        }
        // Unreachable for these types (string keys only); `rendered` says so in the details.
        Err(_) => crate::evaluation::Details::rendered(&details),
    }
}

/// [`non_scorable_row_with`] under the shipped correctness model.
pub fn non_scorable_row(
    event: &Event,
    ts: &str,
    error: &SpecError,
    profile: &RuleProfile,
) -> crate::evaluation::EvaluationRow {
    non_scorable_row_with(event, ts, error, profile, VerdictModel::shipped())
}

/// The `stef` row for SQL that could not be scored (Φ = 0, explicit status, parser
/// message in `details`).
///
/// No judge is asked: the row carries σ = 0, verdict `incorrect`, γ = 0 (tier `low`), quality tier
/// `poor`, and the deterministic enrichment validation (it does not need the SQL). SQL that is
/// scored and unusable (`parse_error`, `not_a_query`, `multiple_statements`) has `p_correct` 0,
/// as it has Φ 0; SQL too large to parse is not scored and has none. The judge identity is the
/// line-rate one under `model`, like every other line-rate row of the run.
pub fn non_scorable_row_with(
    event: &Event,
    ts: &str,
    error: &SpecError,
    profile: &RuleProfile,
    model: &VerdictModel,
) -> crate::evaluation::EvaluationRow {
    let mut row =
        crate::evaluation::EvaluationRow::for_event(event, ts, crate::evaluation::Metric::Stef);
    let status = error.status();
    let enrichment =
        enrichment::validate(&event.question, event.enriched_question.as_deref(), profile);
    row.value = 0.0;
    row.verdict = Some(false);
    row.status = status;
    row.details = non_scorable_details(event, error, status, &enrichment);
    row.stef = Some(crate::evaluation::StefColumns {
        quality_tier: QualityTier::Poor,
        filter_status: CompactString::const_new(FilterStatus::NotApplied.as_str()),
        semantic_verdict: CompactString::const_new(Verdict::Incorrect.as_str()),
        confidence: 0.0,
        confidence_tier: ConfidenceTier::Low,
        sigma_filters: 0,
        sigma_verdict: 0,
        leniency: 0,
        rules_fired: Vec::new(),
        enrichment_status: CompactString::const_new(enrichment.status.as_str()),
        judge: CompactString::const_new("deterministic"),
        judge_cached: false,
        prompt_version: None,
        judge_identity: line_rate_identity(profile, model),
        rules_version: profile.version.as_str().into(),
        prompt_tokens: 0,
        completion_tokens: 0,
        latency_us: 0,
        p_correct: status.is_scored().then_some(0.0),
    });
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(fields: serde_json::Value) -> Event {
        serde_json::from_value(fields).expect("an event")
    }

    /// What the details were before they were rendered in the scoring task: a value tree.
    fn as_tree(event: &Event, error: &SpecError, enrichment: &Enrichment) -> String {
        let mut details = serde_json::json!({
            "error": error.to_string(),
            "status": error.status().as_str(),
            "sql_bytes": event.sql.len(),
            "enrichment": enrichment,
        });
        if let (Some(why), Some(map)) = (&event.result_ignored, details.as_object_mut()) {
            map.insert("result_ignored".into(), why.clone().into());
        }
        details.to_string()
    }

    /// A row's short texts (ids, time, tiers, statuses) live inside the row: a batch holds
    /// thousands of rows for about a second, and every text with a block of its own was a cold
    /// allocation for the scoring thread that reused it (CHANGELOG.md, "Short texts inline").
    #[test]
    fn a_rows_short_texts_have_no_allocation_of_their_own() {
        let profile = RuleProfile::default();
        let event = event(serde_json::json!({
            "event_id": "ev-0000001", "ts": "2026-12-02T04:50:58.900Z",
            "app_id": "bird-toxicology", "agent_id": "CHESS-GPT-4o-mini", "model": "gpt-4o-mini",
            "agent_version": "v2", "run_id": "CHESS-GPT-4o-mini",
            "question": "How many molecules are there?",
            "sql": "SELECT COUNT(*) FROM molecule"
        }));
        let prepared = prepare(&event, &profile).expect("the SQL parses");
        let assessment = crate::judge::deterministic::DeterministicJudge.assess_prepared(&prepared);
        let row = finish(&prepared, assessment, &profile).to_row(&event, "", &profile, 0);
        let stef = row.stef.as_ref().expect("a stef row");
        let texts = [
            Some(&row.event_id),
            Some(&row.ts),
            row.app_id.as_ref(),
            row.agent_id.as_ref(),
            row.agent_version.as_ref(),
            row.model.as_ref(),
            row.run_id.as_ref(),
            Some(&stef.filter_status),
            Some(&stef.semantic_verdict),
            Some(&stef.enrichment_status),
            Some(&stef.judge),
            Some(&stef.rules_version),
        ];
        for text in texts {
            let text = text.expect("the event sets every label");
            assert!(!text.is_heap_allocated(), "{text:?} has a block of its own");
        }
        let inputs = crate::review::EventInputs::from_event(event.clone(), "");
        for text in [&inputs.event_id, &inputs.ts] {
            assert!(!text.is_heap_allocated(), "{text:?} has a block of its own");
        }
        // Longer texts still round-trip whole.
        let long = "x".repeat(40);
        let mut labelled = event.clone();
        labelled.event_id = long.clone();
        let row = crate::evaluation::EvaluationRow::for_event(
            &labelled,
            "",
            crate::evaluation::Metric::Stef,
        );
        assert_eq!(row.event_id, long);
        let json = serde_json::to_string(&row).expect("serializes");
        let back: crate::evaluation::EvaluationRow =
            serde_json::from_str(&json).expect("reads back");
        assert_eq!(back, row);
    }

    #[test]
    fn non_scorable_details_render_as_their_value_tree() {
        let profile = RuleProfile::default();
        let events = [
            event(serde_json::json!({
                "event_id": "e1", "question": "How many heroes?", "sql": "SELEC 1"
            })),
            event(serde_json::json!({
                "event_id": "e2",
                "question": "How many \"heroes\" from Marvel\tComics?",
                "enriched_question": "How many heroes from Marvel Comics with eye colour = 'Blue' and height > 180? \\ é",
                "sql": "DROP TABLE heroes; -- ünïcode"
            })),
            event(serde_json::json!({
                "event_id": "e3",
                "question": "Which heroes have blue eyes and are taller than 180?",
                "enriched_question": "Which heroes?",
                "sql": ""
            })),
        ];
        let errors = [
            SpecError::Empty,
            SpecError::Parse {
                dialect: "generic".into(),
                message: "Expected SELECT, found: \"SELEC\" at Line: 1".into(),
            },
            SpecError::NotAQuery {
                kind: "DROP".into(),
            },
            SpecError::MultipleStatements { count: 2 },
            SpecError::TooLarge {
                size: 70_000,
                limit: 65_536,
            },
        ];
        let mut enrichments = Vec::new();
        for event in &events {
            for error in &errors {
                let row = non_scorable_row(event, "2026-01-01T00:00:00Z", error, &profile);
                let enrichment = enrichment::validate(
                    &event.question,
                    event.enriched_question.as_deref(),
                    &profile,
                );
                assert!(row.details.tree().is_none(), "rendered in the scoring task");
                assert_eq!(
                    row.details.json_text(),
                    as_tree(event, error, &enrichment),
                    "{error}"
                );
                assert!(!result_ignored(&row.details));
                enrichments.push(enrichment);
            }
        }
        // The cases cover an absent enrichment and one that adds or drops constraints.
        assert!(
            enrichments
                .iter()
                .any(|e| e.status == EnrichmentStatus::Absent)
        );
        assert!(
            enrichments
                .iter()
                .any(|e| !e.added.is_empty() || !e.dropped.is_empty())
        );

        // With the `result` set aside the details stay a tree, so the run summary finds the key.
        let mut set_aside = events[1].clone();
        set_aside.result_ignored = Some("result: expected an object".into());
        let error = &errors[1];
        let row = non_scorable_row(&set_aside, "2026-01-01T00:00:00Z", error, &profile);
        let enrichment = enrichment::validate(
            &set_aside.question,
            set_aside.enriched_question.as_deref(),
            &profile,
        );
        assert!(result_ignored(&row.details));
        assert_eq!(
            row.details.json_text(),
            as_tree(&set_aside, error, &enrichment)
        );
    }
}
