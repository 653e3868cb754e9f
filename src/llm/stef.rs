//! The STEF LLM judge: one structured call per event (prompt `stef`), its reply schema, and the
//! mapping of the reply into a [`JudgeAssessment`].
//!
//! The judge sees Qu, Qe, S, the app's rules, the deterministic SQL spec, alignment and
//! findings (`stef::checks`), what the query returned (the event's `result`, capped:
//! [`PROMPT_RESULT_ROWS`] rows of [`PROMPT_RESULT_COLUMNS`] cells of
//! [`PROMPT_RESULT_CELL_BYTES`] bytes, or the error) and the catalogue tables the SQL reads or
//! the question names (`stef::SchemaContext`, capped in the core), all as JSON data
//! blocks. Its reply is validated with strict types and range checks; code then
//! normalizes its question spec (case, whitespace, quotes, numbers) and forces the enrichment
//! status to `absent` when the event has no enriched question. Alignment, the normalization
//! rules and Φ stay in [`crate::stef::finish`], the same code the deterministic judge uses.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::json;

use super::client::{LlmClient, LlmSetupError};
use crate::judge::structured::{ReplyCheck, ReplySchema, StructuredCall, StructuredReply};
use crate::judge::{
    Judge, JudgeAssessment, JudgeError, JudgeRequest, JudgeTotals, StructuredJudge,
};
use crate::sqlspec::{AggFunc, FilterOp, SqlSpec};
use crate::stef::SchemaContext;
use crate::stef::text::{clip_marked, normalize_value, strip_quotes};
use crate::stef::{
    Alignment, Enrichment, EnrichmentStatus, FilterStatus, Finding, QuestionAggregation,
    QuestionFilter, QuestionSpec, Verdict,
};

/// Name of the STEF prompt (`prompts/stef.system.j2`, `prompts/stef.user.j2`).
pub const STEF_PROMPT: &str = "stef";

/// Most entries accepted in any list of a reply.
const MAX_LIST: usize = 64;
/// Longest string accepted in a reply's lists and fields.
const MAX_TEXT: usize = 500;
/// Longest rationale accepted.
const MAX_RATIONALE: usize = 2000;

/// The judge's reply, exactly as the schema defines it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StefReply {
    /// The question spec Sq.
    pub question_spec: ReplyQuestionSpec,
    /// Enrichment validation.
    pub enrichment: ReplyEnrichment,
    /// The judge's own filter assessment.
    pub filter_status: FilterStatus,
    /// Semantic verdict.
    pub verdict: Verdict,
    /// Confidence γ ∈ [0, 1].
    pub confidence: f64,
    /// Short rationale.
    pub rationale: String,
}

/// Question spec as replied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplyQuestionSpec {
    /// Requested outputs.
    pub outputs: Vec<String>,
    /// Requested aggregations.
    pub aggregations: Vec<ReplyAggregation>,
    /// Required filters.
    pub filters: Vec<ReplyFilter>,
    /// Requested grouping.
    pub group_by: Vec<String>,
    /// Whether an order was asked for.
    pub explicit_order: bool,
    /// k of a top-k request (present, possibly null).
    #[serde(deserialize_with = "present")]
    pub top_k: Option<u64>,
}

/// Aggregation function as replied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyAggFunc {
    /// SUM.
    Sum,
    /// AVG.
    Avg,
    /// COUNT.
    Count,
    /// MIN.
    Min,
    /// MAX.
    Max,
    /// Anything else.
    Other,
}

/// One aggregation as replied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplyAggregation {
    /// Function.
    pub func: ReplyAggFunc,
    /// Column or NL term (present, possibly null).
    #[serde(deserialize_with = "present")]
    pub column: Option<String>,
    /// Distinct wording.
    pub distinct: bool,
}

/// One filter as replied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplyFilter {
    /// Dimension (present, possibly null).
    #[serde(deserialize_with = "present")]
    pub lhs: Option<String>,
    /// Comparison.
    pub op: FilterOp,
    /// Value text.
    pub value: String,
}

/// Enrichment as replied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplyEnrichment {
    /// Status.
    pub status: EnrichmentStatus,
    /// Constraints added by Qe.
    pub added: Vec<String>,
    /// Constraints dropped by Qe.
    pub dropped: Vec<String>,
}

/// A nullable field that must still be present (serde would default a missing `Option` to
/// `None`; the schema says every property is required).
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}

fn nullable(kind: &str) -> serde_json::Value {
    json!({ "type": [kind, "null"] })
}

fn strings() -> serde_json::Value {
    json!({ "type": "array", "items": { "type": "string" } })
}

fn object(properties: serde_json::Value) -> serde_json::Value {
    let required: Vec<String> = properties
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

const FILTER_OPS: &[&str] = &[
    "eq",
    "not_eq",
    "lt",
    "lt_eq",
    "gt",
    "gt_eq",
    "contains",
    "starts_with",
    "ends_with",
    "like",
    "not_like",
    "in",
    "not_in",
    "is_null",
    "is_not_null",
];

/// Every enrichment status.
const ENRICHMENT_STATUSES: &[&str] = &[
    "absent",
    "faithful",
    "adds_constraints",
    "drops_constraints",
    "drifted",
];

/// The reply schema for one event: with an enriched question the status cannot be `absent`,
/// without one it can only be `absent`. A server that decodes by the schema (llama.cpp, vLLM,
/// OpenAI's strict mode) then cannot reply inconsistently; [`enrichment_check`] still holds the
/// others to it.
fn schema_for(has_enriched: bool) -> &'static ReplySchema {
    static WITH_ENRICHED: OnceLock<ReplySchema> = OnceLock::new();
    static WITHOUT_ENRICHED: OnceLock<ReplySchema> = OnceLock::new();
    if has_enriched {
        WITH_ENRICHED.get_or_init(|| stef_schema(&ENRICHMENT_STATUSES[1..]))
    } else {
        WITHOUT_ENRICHED.get_or_init(|| stef_schema(&ENRICHMENT_STATUSES[..1]))
    }
}

/// The STEF call for `vars` (its identity borrowed from the caller).
fn stef_call<'a>(
    vars: &'a StefVars<'a>,
    identity: &'a StefIdentity<'a>,
    scope: &'a str,
) -> StructuredCall<'a, StefVars<'a>, StefIdentity<'a>> {
    StructuredCall {
        prompt: STEF_PROMPT,
        vars,
        identity,
        scope,
        schema: Some(schema_for(vars.enriched_question.is_some())),
    }
}

fn stef_schema(enrichment_statuses: &[&str]) -> ReplySchema {
    let aggregation = object(json!({
        "func": { "type": "string", "enum": ["sum", "avg", "count", "min", "max", "other"] },
        "column": nullable("string"),
        "distinct": { "type": "boolean" }
    }));
    let filter = object(json!({
        "lhs": nullable("string"),
        "op": { "type": "string", "enum": FILTER_OPS },
        "value": { "type": "string" }
    }));
    let question_spec = object(json!({
        "outputs": strings(),
        "aggregations": { "type": "array", "items": aggregation },
        "filters": { "type": "array", "items": filter },
        "group_by": strings(),
        "explicit_order": { "type": "boolean" },
        "top_k": nullable("integer")
    }));
    let enrichment = object(json!({
        "status": { "type": "string", "enum": enrichment_statuses },
        "added": strings(),
        "dropped": strings()
    }));
    ReplySchema::new(
        "stef_assessment",
        object(json!({
            "question_spec": question_spec,
            "enrichment": enrichment,
            "filter_status": {
                "type": "string",
                "enum": ["fully_applied", "fully_applied_with_extras", "partially_applied", "not_applied"]
            },
            "verdict": {
                "type": "string",
                "enum": ["correct", "likely_correct", "potentially_incorrect", "incorrect"]
            },
            "confidence": { "type": "number", "description": "between 0 and 1" },
            "rationale": { "type": "string", "description": "at most 400 characters" }
        })),
    )
}

fn check_list(field: &str, items: &[String]) -> Result<(), ReplyCheck> {
    if items.len() > MAX_LIST {
        return Err(ReplyCheck::new(
            field,
            format!("has {} entries (at most {MAX_LIST})", items.len()),
        ));
    }
    check_texts(field, items.iter().map(String::as_str))
}

fn check_texts<'a>(
    field: &str,
    items: impl IntoIterator<Item = &'a str>,
) -> Result<(), ReplyCheck> {
    for item in items {
        if item.chars().count() > MAX_TEXT {
            return Err(ReplyCheck::new(
                field,
                format!("has an entry longer than {MAX_TEXT} characters"),
            ));
        }
    }
    Ok(())
}

impl StructuredReply for StefReply {
    fn schema() -> &'static ReplySchema {
        static SCHEMA: OnceLock<ReplySchema> = OnceLock::new();
        SCHEMA.get_or_init(|| stef_schema(ENRICHMENT_STATUSES))
    }

    fn validate(&self) -> Result<(), ReplyCheck> {
        if !self.confidence.is_finite() || !(0.0..=1.0).contains(&self.confidence) {
            return Err(ReplyCheck::new(
                "confidence",
                format!("must be a number between 0 and 1, got {}", self.confidence),
            ));
        }
        if self.rationale.trim().is_empty() {
            return Err(ReplyCheck::new("rationale", "must not be empty"));
        }
        if self.rationale.chars().count() > MAX_RATIONALE {
            return Err(ReplyCheck::new(
                "rationale",
                format!("is longer than {MAX_RATIONALE} characters"),
            ));
        }
        let q = &self.question_spec;
        check_list("question_spec.outputs", &q.outputs)?;
        check_list("question_spec.group_by", &q.group_by)?;
        check_list("enrichment.added", &self.enrichment.added)?;
        check_list("enrichment.dropped", &self.enrichment.dropped)?;
        if q.aggregations.len() > MAX_LIST || q.filters.len() > MAX_LIST {
            return Err(ReplyCheck::new(
                "question_spec",
                format!("lists at most {MAX_LIST} aggregations and filters"),
            ));
        }
        check_texts(
            "question_spec.aggregations",
            q.aggregations.iter().filter_map(|a| a.column.as_deref()),
        )?;
        check_texts(
            "question_spec.filters",
            q.filters
                .iter()
                .flat_map(|f| [f.lhs.as_deref().unwrap_or(""), f.value.as_str()]),
        )?;
        if q.top_k == Some(0) {
            return Err(ReplyCheck::new(
                "question_spec.top_k",
                "must be at least 1 or null",
            ));
        }
        Ok(())
    }
}

/// The rules as shown to the judge.
#[derive(Debug, Serialize)]
struct RulesView<'a> {
    column_mappings: &'a BTreeMap<String, String>,
    benign_filters: &'a [String],
    ignore_filters: &'a [String],
    limit_min: u64,
    notes: Option<&'a str>,
}

/// Everything the STEF prompt shows, normalized (rendered only on a cache miss).
#[derive(Debug, Serialize)]
struct StefVars<'a> {
    question: Cow<'a, str>,
    enriched_question: Option<Cow<'a, str>>,
    sql: Cow<'a, str>,
    dialect: Option<&'a str>,
    rules: RulesView<'a>,
    sql_spec: &'a SqlSpec,
    alignment: &'a Alignment,
    findings: &'a [Finding],
    /// What the query returned (the event's `result`), capped ([`ResultView`]).
    result: Option<ResultView>,
    /// The catalogue tables the SQL reads or the question names (capped in the core:
    /// `stef::SchemaContext`).
    schema: Option<&'a SchemaContext>,
}

/// Most result rows the prompt shows.
pub const PROMPT_RESULT_ROWS: usize = 10;
/// Most result columns the prompt shows.
pub const PROMPT_RESULT_COLUMNS: usize = 16;
/// Longest cell (and error text) the prompt shows, in bytes.
pub const PROMPT_RESULT_CELL_BYTES: usize = 120;

/// The event's `result` as the prompt shows it: the error, or the columns, the total row count
/// and the first [`PROMPT_RESULT_ROWS`] rows of at most [`PROMPT_RESULT_COLUMNS`] cells, each
/// cell clipped to [`PROMPT_RESULT_CELL_BYTES`] — about 20 KB of JSON at most, so with the
/// schema context (~6 KB) the prompt stays bounded whatever the event carries.
#[derive(Debug, Serialize)]
struct ResultView {
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    row_count: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    columns: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    rows: Vec<Vec<serde_json::Value>>,
    /// Rows or columns not shown.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    truncated: bool,
}

impl ResultView {
    fn of(result: &crate::event::QueryResult) -> ResultView {
        let clip = |text: &str| clip_marked(text, PROMPT_RESULT_CELL_BYTES);
        let cell = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => serde_json::Value::String(clip(s)),
            serde_json::Value::Array(_) | serde_json::Value::Object(_) => {
                serde_json::Value::String(clip(&v.to_string()))
            }
            other => other.clone(),
        };
        let rows: Vec<Vec<serde_json::Value>> = result
            .rows
            .iter()
            .take(PROMPT_RESULT_ROWS)
            .map(|r| r.iter().take(PROMPT_RESULT_COLUMNS).map(cell).collect())
            .collect();
        let truncated = result.truncated
            || result.rows.len() > PROMPT_RESULT_ROWS
            || result.columns.len() > PROMPT_RESULT_COLUMNS
            || result.rows.iter().any(|r| r.len() > PROMPT_RESULT_COLUMNS);
        ResultView {
            error: result.error.as_deref().map(clip),
            row_count: result.total_rows(),
            columns: result
                .columns
                .iter()
                .take(PROMPT_RESULT_COLUMNS)
                .map(|c| clip(c))
                .collect(),
            rows,
            truncated,
        }
    }
}

impl<'a> StefVars<'a> {
    fn new(request: &JudgeRequest<'a>) -> StefVars<'a> {
        let event = request.event;
        let profile = request.profile;
        StefVars {
            question: collapse_whitespace(&event.question),
            enriched_question: event
                .enriched_question
                .as_deref()
                .map(collapse_whitespace)
                .filter(|q| !q.is_empty()),
            sql: collapse_whitespace(&event.sql),
            dialect: event.dialect.as_deref().or(profile.dialect.as_deref()),
            rules: RulesView {
                column_mappings: &profile.column_mappings,
                benign_filters: &profile.benign_filters,
                ignore_filters: &profile.ignore_filters,
                limit_min: profile.limit_min,
                notes: profile.notes.as_deref(),
            },
            sql_spec: &request.prepared.sql_spec,
            alignment: &request.prepared.alignment,
            findings: &request.prepared.findings,
            result: event.result.as_ref().map(ResultView::of),
            schema: request.prepared.schema_context.as_ref(),
        }
    }
}

/// What determines a STEF reply besides prompt, model and rule profile: the normalized inputs,
/// and the findings (they also depend on the event's catalogue schema, which can change).
/// Everything else the prompt shows (SQL spec, deterministic alignment) is derived from the
/// inputs by this crate's code, whose version is part of the identity.
#[derive(Debug, Serialize)]
struct StefIdentity<'a> {
    question: &'a str,
    enriched_question: Option<&'a str>,
    sql: &'a str,
    dialect: Option<&'a str>,
    #[serde(skip_serializing_if = "<[Finding]>::is_empty")]
    findings: &'a [Finding],
    /// The result and the schema context the prompt shows (both change the reply).
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a ResultView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    schema: Option<&'a SchemaContext>,
    derived_by: &'static str,
}

impl<'a> StefIdentity<'a> {
    fn of(vars: &'a StefVars<'a>) -> StefIdentity<'a> {
        StefIdentity {
            question: &vars.question,
            enriched_question: vars.enriched_question.as_deref(),
            sql: &vars.sql,
            dialect: vars.dialect,
            findings: vars.findings,
            result: vars.result.as_ref(),
            schema: vars.schema,
            derived_by: concat!("sqlgrade ", env!("CARGO_PKG_VERSION")),
        }
    }
}

/// Trim and collapse runs of whitespace to one space; borrows when there is nothing to do.
fn collapse_whitespace(text: &str) -> Cow<'_, str> {
    let trimmed = text.trim();
    let mut previous_space = false;
    let clean = trimmed.chars().all(|c| {
        let ok = c == ' ' && !previous_space || !c.is_whitespace();
        previous_space = c.is_whitespace();
        ok
    });
    if clean {
        Cow::Borrowed(trimmed)
    } else {
        Cow::Owned(trimmed.split_whitespace().collect::<Vec<_>>().join(" "))
    }
}

/// A name for alignment: lowercased, whitespace collapsed, surrounding quotes removed.
fn normalize_name(text: &str) -> String {
    let collapsed = collapse_whitespace(text).to_lowercase();
    strip_quotes(&collapsed).trim().to_string()
}

fn names(items: &[String]) -> Vec<String> {
    items
        .iter()
        .map(|s| normalize_name(s))
        .filter(|s| !s.is_empty())
        .collect()
}

impl ReplyQuestionSpec {
    /// The spec with names and values normalized for alignment.
    fn to_question_spec(&self) -> QuestionSpec {
        QuestionSpec {
            outputs: names(&self.outputs),
            aggregations: self
                .aggregations
                .iter()
                .map(|a| QuestionAggregation {
                    func: match a.func {
                        ReplyAggFunc::Sum => AggFunc::Sum,
                        ReplyAggFunc::Avg => AggFunc::Avg,
                        ReplyAggFunc::Count => AggFunc::Count,
                        ReplyAggFunc::Min => AggFunc::Min,
                        ReplyAggFunc::Max => AggFunc::Max,
                        ReplyAggFunc::Other => AggFunc::Other("other".into()),
                    },
                    column: a
                        .column
                        .as_deref()
                        .map(normalize_name)
                        .filter(|c| !c.is_empty()),
                    distinct: a.distinct,
                })
                .collect(),
            filters: self
                .filters
                .iter()
                .map(|f| QuestionFilter {
                    lhs: f
                        .lhs
                        .as_deref()
                        .map(normalize_name)
                        .filter(|l| !l.is_empty()),
                    op: f.op,
                    value: normalize_value(&f.value),
                })
                .collect(),
            group_by: names(&self.group_by),
            explicit_order: self.explicit_order,
            top_k: self.top_k,
        }
    }
}

/// The STEF judge backed by an OpenAI-compatible LLM.
#[derive(Debug, Clone)]
pub struct LlmJudge {
    client: Arc<LlmClient>,
    kind: String,
}

impl LlmJudge {
    /// A judge over an existing client (share one client between metrics to share its cache
    /// and limits).
    pub fn new(client: Arc<LlmClient>) -> LlmJudge {
        let kind = format!("llm:{}", client.model());
        LlmJudge { client, kind }
    }

    /// Build the client from a `[judge]` section and wrap it (an inline `api_key` wins over
    /// `api_key_env`).
    pub fn from_config(
        config: &crate::llm::config::LlmJudgeConfig,
    ) -> Result<LlmJudge, LlmSetupError> {
        Ok(LlmJudge::new(Arc::new(LlmClient::new(config)?)))
    }

    /// The underlying client.
    pub fn client(&self) -> &Arc<LlmClient> {
        &self.client
    }

    /// Version of the STEF prompt in use.
    pub fn prompt_version(&self) -> Option<&str> {
        self.client.prompt_version(STEF_PROMPT)
    }
}

impl LlmJudge {
    /// The STEF assessment of a validated reply.
    fn assessment(
        &self,
        outcome: crate::judge::structured::StructuredOutcome<StefReply>,
        has_enriched: bool,
    ) -> JudgeAssessment {
        let reply = outcome.value;
        let enrichment = if has_enriched {
            Enrichment {
                status: reply.enrichment.status,
                added: collapse_all(&reply.enrichment.added),
                dropped: collapse_all(&reply.enrichment.dropped),
            }
        } else {
            Enrichment::absent()
        };
        JudgeAssessment {
            question_spec: reply.question_spec.to_question_spec(),
            enrichment,
            filter_status: Some(reply.filter_status),
            verdict: reply.verdict,
            confidence: reply.confidence,
            rationale: collapse_whitespace(&reply.rationale).into_owned(),
            judge: self.kind.clone(),
            cached: outcome.cached,
            identity: Some(crate::stef::assessment::llm_identity(
                self.client.model(),
                self.client.served_model().as_deref(),
                &outcome.prompt_version,
                self.client.response_mode().as_str(),
            )),
            prompt_version: Some(outcome.prompt_version),
            usage: outcome.usage,
            response_mode: outcome.response_mode.map(str::to_string),
        }
    }
}

/// A reply must not call the enrichment `absent` when there is an enriched question.
fn enrichment_check(has_enriched: bool) -> impl Fn(&StefReply) -> Result<(), ReplyCheck> + Sync {
    move |reply: &StefReply| {
        if has_enriched && reply.enrichment.status == EnrichmentStatus::Absent {
            return Err(ReplyCheck::new(
                "enrichment.status",
                "is \"absent\" but an enriched question was given",
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl Judge for LlmJudge {
    fn kind(&self) -> String {
        self.kind.clone()
    }

    async fn assess(&self, request: JudgeRequest<'_>) -> Result<JudgeAssessment, JudgeError> {
        let vars = StefVars::new(&request);
        let has_enriched = vars.enriched_question.is_some();
        let check = enrichment_check(has_enriched);
        let identity = StefIdentity::of(&vars);
        let outcome = self
            .client
            .call_structured::<StefReply, _, _>(
                stef_call(&vars, &identity, &request.profile.version),
                &check,
            )
            .await?;
        Ok(self.assessment(outcome, has_enriched))
    }

    async fn assess_cached(&self, request: JudgeRequest<'_>) -> Option<JudgeAssessment> {
        let vars = StefVars::new(&request);
        let has_enriched = vars.enriched_question.is_some();
        let check = enrichment_check(has_enriched);
        let identity = StefIdentity::of(&vars);
        let outcome = self
            .client
            .lookup_structured::<StefReply, _, _>(
                stef_call(&vars, &identity, &request.profile.version),
                &check,
            )
            .await?;
        Some(self.assessment(outcome, has_enriched))
    }

    async fn prefetch(&self, requests: &[JudgeRequest<'_>]) {
        let keys: Vec<String> = requests
            .iter()
            .filter_map(|request| {
                let vars = StefVars::new(request);
                let identity = StefIdentity::of(&vars);
                self.client.structured_key::<StefReply, _, _>(stef_call(
                    &vars,
                    &identity,
                    &request.profile.version,
                ))
            })
            .collect();
        self.client.prefetch_durable(&keys).await;
    }

    fn totals(&self) -> JudgeTotals {
        self.client.totals()
    }

    async fn flush(&self) {
        StructuredJudge::flush(self.client.as_ref()).await;
    }

    fn structured_judge(&self) -> Option<Arc<dyn StructuredJudge>> {
        Some(Arc::clone(&self.client) as Arc<dyn StructuredJudge>)
    }
}

fn collapse_all(items: &[String]) -> Vec<String> {
    items
        .iter()
        .map(|s| collapse_whitespace(s).into_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::structured::parse_reply;

    fn valid() -> serde_json::Value {
        json!({
            "question_spec": {
                "outputs": ["Total Spend"],
                "aggregations": [{"func": "sum", "column": "spend", "distinct": false}],
                "filters": [{"lhs": " Country ", "op": "eq", "value": "'China'"},
                            {"lhs": null, "op": "eq", "value": "2023.0"}],
                "group_by": ["Year"],
                "explicit_order": false,
                "top_k": null
            },
            "enrichment": {"status": "faithful", "added": [], "dropped": []},
            "filter_status": "fully_applied",
            "verdict": "correct",
            "confidence": 0.9,
            "rationale": "Sums spend for China per year."
        })
    }

    /// The prompt shows the result (capped) and the schema context, and both enter the cache
    /// identity; without them the blocks are absent.
    #[test]
    fn the_prompt_shows_the_result_and_the_schema_bounded() {
        use crate::catalogue::SchemaCatalog;
        use crate::event::{Event, QueryResult};
        use crate::stef::{self, CatalogueSelection, PrepareOptions, RuleProfile};

        let catalogue = SchemaCatalog::parse_simple(
            r#"db_id = "shop"
[[tables]]
name = "orders"
primary_key = ["id"]
columns = [{ name = "id", type = "integer" }, { name = "country", type = "text", description = "country of the buyer" },
           { name = "spend", type = "real" }]"#,
            false,
        )
        .unwrap();
        let schema = catalogue.get("shop").unwrap();
        let long = "x".repeat(10_000);
        let mut event: Event = serde_json::from_value(serde_json::json!({
            "event_id": "e1", "question": "Total spend of buyers from China?",
            "sql": "SELECT SUM(spend) FROM orders WHERE country = 'China'", "db_id": "shop"
        }))
        .unwrap();
        event.result = Some(QueryResult {
            columns: (0..40).map(|i| format!("c{i}")).collect(),
            rows: (0..500)
                .map(|_| {
                    (0..40)
                        .map(|_| serde_json::Value::String(long.clone()))
                        .collect()
                })
                .collect(),
            row_count: Some(500),
            ..Default::default()
        });
        let profile = RuleProfile::default();
        let mut prepared = stef::prepare_with(
            &event,
            &profile,
            &PrepareOptions {
                max_sql_bytes: 1 << 20,
                catalogue: CatalogueSelection::Schema(schema),
            },
        )
        .unwrap();
        stef::add_schema_context(&mut prepared, &event, schema);
        let request = JudgeRequest {
            event: &event,
            prepared: &prepared,
            profile: &profile,
        };
        let vars = StefVars::new(&request);
        let prompts = crate::llm::prompt::PromptLibrary::builtin().unwrap();
        let rendered = prompts.render(STEF_PROMPT, &vars, "{}").unwrap();
        assert!(rendered.user.contains("<data name=\"query_result\">"));
        assert!(rendered.user.contains("<data name=\"schema\">"));
        assert!(
            rendered
                .user
                .contains("country text -- country of the buyer")
        );
        assert!(rendered.user.contains("\"truncated\":true"));
        // 500 rows of 40 cells of 10 KB: the prompt shows 10 rows of 16 clipped cells.
        assert!(
            rendered.user.len() < 30_000,
            "{} bytes",
            rendered.user.len()
        );
        let identity = serde_json::to_value(StefIdentity::of(&vars)).unwrap();
        assert!(identity.get("result").is_some() && identity.get("schema").is_some());

        event.result = None;
        prepared.schema_context = None;
        let request = JudgeRequest {
            event: &event,
            prepared: &prepared,
            profile: &profile,
        };
        let vars = StefVars::new(&request);
        let rendered = prompts.render(STEF_PROMPT, &vars, "{}").unwrap();
        assert!(
            !rendered.user.contains("query_result") && !rendered.user.contains("name=\"schema\"")
        );
    }

    #[test]
    fn valid_reply_maps_to_a_normalized_spec() {
        let (reply, _) = parse_reply::<StefReply>(&valid().to_string()).unwrap();
        let spec = reply.question_spec.to_question_spec();
        assert_eq!(spec.outputs, vec!["total spend"]);
        assert_eq!(spec.filters[0].lhs.as_deref(), Some("country"));
        assert_eq!(spec.filters[0].value, "china");
        assert_eq!(spec.filters[1].lhs, None);
        assert_eq!(spec.filters[1].value, "2023");
        assert_eq!(spec.aggregations[0].func, AggFunc::Sum);
        assert_eq!(spec.group_by, vec!["year"]);
    }

    #[test]
    fn strictness() {
        let mut missing = valid();
        missing.as_object_mut().unwrap().remove("verdict");
        let err = parse_reply::<StefReply>(&missing.to_string())
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing field `verdict`"), "{err}");

        let mut missing_nullable = valid();
        missing_nullable["question_spec"]
            .as_object_mut()
            .unwrap()
            .remove("top_k");
        let err = parse_reply::<StefReply>(&missing_nullable.to_string())
            .unwrap_err()
            .to_string();
        assert!(err.contains("top_k"), "{err}");

        let mut extra = valid();
        extra["score"] = json!(100);
        assert!(
            parse_reply::<StefReply>(&extra.to_string())
                .unwrap_err()
                .to_string()
                .contains("unknown field")
        );

        let mut bad_enum = valid();
        bad_enum["verdict"] = json!("probably");
        assert!(parse_reply::<StefReply>(&bad_enum.to_string()).is_err());

        let mut wrong_type = valid();
        wrong_type["confidence"] = json!("high");
        assert!(parse_reply::<StefReply>(&wrong_type.to_string()).is_err());

        for c in [1.5, -0.1] {
            let mut out_of_range = valid();
            out_of_range["confidence"] = json!(c);
            let err = parse_reply::<StefReply>(&out_of_range.to_string())
                .unwrap_err()
                .to_string();
            assert!(err.contains("between 0 and 1"), "{err}");
        }

        let mut empty_rationale = valid();
        empty_rationale["rationale"] = json!("  ");
        assert!(parse_reply::<StefReply>(&empty_rationale.to_string()).is_err());

        let mut zero_k = valid();
        zero_k["question_spec"]["top_k"] = json!(0);
        assert!(parse_reply::<StefReply>(&zero_k.to_string()).is_err());
    }

    #[test]
    fn schema_is_strict_mode_compatible() {
        fn walk(v: &serde_json::Value) {
            if v.get("type") == Some(&json!("object")) {
                assert_eq!(v["additionalProperties"], json!(false));
                let props: Vec<&String> = v["properties"].as_object().unwrap().keys().collect();
                let required: Vec<&str> = v["required"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r.as_str().unwrap())
                    .collect();
                assert_eq!(props.len(), required.len());
                for p in props {
                    assert!(required.contains(&p.as_str()));
                    walk(&v["properties"][p]);
                }
            }
            if let Some(items) = v.get("items") {
                walk(items);
            }
        }
        walk(&StefReply::schema().schema);
        // Every FilterOp name in the schema deserializes.
        for op in FILTER_OPS {
            serde_json::from_value::<FilterOp>(json!(op)).unwrap();
        }
    }

    #[test]
    fn values_are_normalized_like_sql_literals() {
        for (input, want) in [
            ("507.0", "507"),
            ("+0.50", "0.5"),
            ("'2023'", "2023"),
            ("  'New   York' ", "new york"),
        ] {
            assert_eq!(normalize_value(input), want, "{input}");
        }
        assert_eq!(normalize_name(" \"Eye  Colour\" "), "eye colour");
        assert!(matches!(collapse_whitespace(" a b "), Cow::Borrowed("a b")));
        assert_eq!(collapse_whitespace("a\n  b\tc"), "a b c");
        assert_eq!(collapse_whitespace("a  b"), "a b");
    }
}
