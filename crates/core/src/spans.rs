//! From OpenTelemetry spans to events: a text-to-SQL agent's trace already holds what an event
//! needs — the user's question on the agent's root span (OpenInference `input.value`) or in an
//! LLM span's `gen_ai.input.messages` (OTel GenAI), the model on the LLM span, and on the
//! database client span (OTel DB conventions) the SQL, the database, the rows returned, the
//! error and the duration. [`events_of_trace`] makes one event per database client span of one
//! assembled trace, as the JSON payload of the input contract (`crate::event`), so the decode
//! stage treats it like any other producer's event.
//!
//! Pure: the receiver (OTLP/HTTP, OTLP on Kafka) decodes the wire format into [`Span`]s and
//! assembles traces; this module only reads them. Every attribute name is a setting
//! ([`SpanMapping`], `[source.otlp_mapping]`).

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// An attribute value (OTLP `AnyValue`, reduced to what the mapping reads).
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Double(f64),
    /// A boolean.
    Bool(bool),
    /// Anything else (arrays, maps, bytes), as JSON text.
    Other(String),
}

impl AttrValue {
    /// The value as text (numbers and booleans written out).
    pub fn as_text(&self) -> String {
        match self {
            AttrValue::Str(s) | AttrValue::Other(s) => s.clone(),
            AttrValue::Int(i) => i.to_string(),
            AttrValue::Double(d) => d.to_string(),
            AttrValue::Bool(b) => b.to_string(),
        }
    }

    /// The value as a non-negative count, when it is one (an integer, or a string or float
    /// that holds a whole non-negative number).
    pub fn as_count(&self) -> Option<u64> {
        match self {
            AttrValue::Int(i) => u64::try_from(*i).ok(),
            AttrValue::Double(d) if d.is_finite() && *d >= 0.0 && d.fract() == 0.0 => {
                Some(*d as u64)
            }
            AttrValue::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
}

/// Attributes by key.
pub type Attributes = Vec<(String, AttrValue)>;

fn attr<'a>(attributes: &'a Attributes, key: &str) -> Option<&'a AttrValue> {
    attributes
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

/// A span's status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatusCode {
    /// Not set.
    #[default]
    Unset,
    /// Ok.
    Ok,
    /// Error.
    Error,
}

/// A span event (an `exception` event carries `exception.message` and `exception.type`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SpanEvent {
    /// Event name.
    pub name: String,
    /// Its attributes.
    pub attributes: Attributes,
}

/// One span, as the receiver decoded it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Span {
    /// Trace id, lower-case hex (32 digits).
    pub trace_id: String,
    /// Span id, lower-case hex (16 digits).
    pub span_id: String,
    /// Parent span id (hex); `None` for a root span.
    pub parent_span_id: Option<String>,
    /// Span name.
    pub name: String,
    /// Start, nanoseconds since the Unix epoch.
    pub start_unix_nano: u64,
    /// End, nanoseconds since the Unix epoch.
    pub end_unix_nano: u64,
    /// Span attributes.
    pub attributes: Attributes,
    /// Status code.
    pub status: StatusCode,
    /// Status description.
    pub status_message: String,
    /// Span events.
    pub events: Vec<SpanEvent>,
    /// The resource's attributes (`service.name`, `service.version`, …), shared by the spans
    /// of one resource.
    pub resource: Arc<Attributes>,
}

impl Span {
    /// Whether the span is a trace's root (no parent).
    pub fn is_root(&self) -> bool {
        self.parent_span_id.is_none()
    }

    /// The first of `keys` this span carries.
    pub fn first_attr(&self, keys: &[String]) -> Option<&AttrValue> {
        keys.iter().find_map(|k| attr(&self.attributes, k))
    }

    fn first_resource_attr(&self, keys: &[String]) -> Option<&AttrValue> {
        keys.iter().find_map(|k| attr(&self.resource, k))
    }
}

/// `[source.otlp_mapping]`: which attributes hold each event field. Each list is tried in
/// order; the defaults follow the OpenTelemetry semantic conventions (DB client spans, GenAI)
/// and OpenInference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default, deny_unknown_fields)]
pub struct SpanMapping {
    /// The SQL on a database client span: a span carrying one of these is an event.
    pub sql: Vec<String>,
    /// The question on the trace's root span (OpenInference `input.value`; a JSON object's
    /// `question`, `query` or `input` string when `input.mime_type` says JSON).
    pub root_question: Vec<String>,
    /// Chat messages on an ancestor span whose last `user` message is the question (OTel
    /// GenAI `gen_ai.input.messages`, JSON text), when the root has none.
    pub question_messages: Vec<String>,
    /// Attributes that hold the question itself, on the database span or any ancestor, when
    /// neither of the above is there (none by default: e.g. `["app.question"]`).
    pub question: Vec<String>,
    /// Attributes that hold the agent's enriched question (database span or ancestors; none by
    /// default).
    pub enriched_question: Vec<String>,
    /// The SQL dialect (database span).
    pub dialect: Vec<String>,
    /// The database (`db_id`; database span).
    pub db_id: Vec<String>,
    /// Rows the query returned (database span).
    pub row_count: Vec<String>,
    /// The model, on an ancestor LLM span (or any span of the trace before the database span).
    pub model: Vec<String>,
    /// `app_id`, a resource attribute.
    pub app_id: Vec<String>,
    /// `agent_version`, a resource attribute.
    pub agent_version: Vec<String>,
    /// `agent_id`: span attributes (database span or ancestors), then resource attributes
    /// (none by default: e.g. `["service.instance.id"]`).
    pub agent_id: Vec<String>,
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

impl Default for SpanMapping {
    fn default() -> Self {
        SpanMapping {
            sql: names(&["db.query.text", "db.statement"]),
            root_question: names(&["input.value"]),
            question_messages: names(&["gen_ai.input.messages"]),
            question: Vec::new(),
            enriched_question: Vec::new(),
            dialect: names(&["db.system.name", "db.system"]),
            db_id: names(&["db.namespace", "db.name"]),
            row_count: names(&["db.response.returned_rows"]),
            model: names(&["gen_ai.request.model", "gen_ai.response.model"]),
            app_id: names(&["service.name"]),
            agent_version: names(&["service.version"]),
            agent_id: Vec::new(),
        }
    }
}

impl SpanMapping {
    /// Whether `span` is a database client span with SQL (it becomes an event).
    pub fn is_sql_span(&self, span: &Span) -> bool {
        span.first_attr(&self.sql)
            .is_some_and(|v| !v.as_text().trim().is_empty())
    }
}

/// One event made from a trace's database span.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEvent {
    /// Trace id (hex).
    pub trace_id: String,
    /// The database span's id (hex).
    pub span_id: String,
    /// The event as the input contract's JSON object. Without a question it lacks
    /// `question`, and the decode stage makes it a dead letter.
    pub payload: Value,
    /// Why the event has no question (`None` when it has one).
    pub missing_question: Option<String>,
}

/// The events of one assembled trace: one per database client span (SQL), in end-time order.
/// A span whose parent is not in `spans` is read as a root for the ancestry walks.
pub fn events_of_trace(spans: &[Span], mapping: &SpanMapping) -> Vec<TraceEvent> {
    let by_id: HashMap<&str, &Span> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let root = spans.iter().find(|s| s.is_root()).or_else(|| {
        // No true root yet: the span whose parent is missing, the earliest first.
        spans
            .iter()
            .filter(|s| {
                s.parent_span_id
                    .as_deref()
                    .is_none_or(|p| !by_id.contains_key(p))
            })
            .min_by_key(|s| s.start_unix_nano)
    });
    let mut sql_spans: Vec<&Span> = spans.iter().filter(|s| mapping.is_sql_span(s)).collect();
    sql_spans.sort_by_key(|s| (s.end_unix_nano, s.span_id.clone()));
    sql_spans
        .into_iter()
        .map(|span| event_of_span(span, root, &ancestors(span, &by_id), spans, mapping))
        .collect()
}

/// The span's ancestors, nearest first (bounded by the trace's size, so a cycle in hostile
/// input cannot loop).
fn ancestors<'a>(span: &Span, by_id: &HashMap<&str, &'a Span>) -> Vec<&'a Span> {
    let mut out: Vec<&Span> = Vec::new();
    let mut next = span.parent_span_id.as_deref();
    while let Some(id) = next {
        let Some(parent) = by_id.get(id) else { break };
        if out.len() >= by_id.len() {
            break;
        }
        out.push(parent);
        next = parent.parent_span_id.as_deref();
    }
    out
}

fn event_of_span(
    span: &Span,
    root: Option<&Span>,
    ancestors: &[&Span],
    trace: &[Span],
    mapping: &SpanMapping,
) -> TraceEvent {
    let mut event = Map::new();
    event.insert(
        "event_id".into(),
        Value::String(format!("{}-{}", span.trace_id, span.span_id)),
    );
    if let Some(ts) = rfc3339_nanos(span.end_unix_nano) {
        event.insert("ts".into(), Value::String(ts));
    }
    let sql = span
        .first_attr(&mapping.sql)
        .map(AttrValue::as_text)
        .unwrap_or_default();
    event.insert("sql".into(), Value::String(sql));
    let question = question_of(span, root, ancestors, mapping);
    let missing_question = match &question {
        Some(q) => {
            event.insert("question".into(), Value::String(q.clone()));
            None
        }
        None => Some(format!(
            "trace {} has SQL (span {}) but no question: none of {} on its root span, no user \
             message in {} on an ancestor, none of [{}] on the span or an ancestor",
            span.trace_id,
            span.span_id,
            list(&mapping.root_question),
            list(&mapping.question_messages),
            mapping.question.join(", ")
        )),
    };
    let chain = || std::iter::once(span).chain(ancestors.iter().copied());
    let text_in_chain = |keys: &[String]| {
        chain()
            .find_map(|s| s.first_attr(keys))
            .map(AttrValue::as_text)
            .filter(|t| !t.trim().is_empty())
    };
    if let Some(enriched) = text_in_chain(&mapping.enriched_question) {
        event.insert("enriched_question".into(), Value::String(enriched));
    }
    let own_text = |keys: &[String]| {
        span.first_attr(keys)
            .map(AttrValue::as_text)
            .filter(|t| !t.trim().is_empty())
    };
    if let Some(dialect) = own_text(&mapping.dialect) {
        event.insert("dialect".into(), Value::String(dialect));
    }
    if let Some(db_id) = own_text(&mapping.db_id) {
        event.insert("db_id".into(), Value::String(db_id));
    }
    let resource_text = |keys: &[String]| {
        span.first_resource_attr(keys)
            .map(AttrValue::as_text)
            .filter(|t| !t.trim().is_empty())
    };
    if let Some(app_id) = resource_text(&mapping.app_id) {
        event.insert("app_id".into(), Value::String(app_id));
    }
    if let Some(version) = resource_text(&mapping.agent_version) {
        event.insert("agent_version".into(), Value::String(version));
    }
    if let Some(agent) =
        text_in_chain(&mapping.agent_id).or_else(|| resource_text(&mapping.agent_id))
    {
        event.insert("agent_id".into(), Value::String(agent));
    }
    if let Some(model) = model_of(span, ancestors, trace, mapping) {
        event.insert("model".into(), Value::String(model));
    }
    event.insert("result".into(), result_of(span, mapping));
    // The span the SQL ran in: evaluation events are parented to it.
    event.insert("trace_id".into(), Value::String(span.trace_id.clone()));
    event.insert("span_id".into(), Value::String(span.span_id.clone()));
    TraceEvent {
        trace_id: span.trace_id.clone(),
        span_id: span.span_id.clone(),
        payload: Value::Object(event),
        missing_question,
    }
}

fn list(keys: &[String]) -> String {
    if keys.is_empty() {
        "(none)".to_string()
    } else {
        keys.join(", ")
    }
}

/// The question: the root's `input.value`, else the last user message of an ancestor's chat
/// messages, else a configured attribute on the span or an ancestor.
fn question_of(
    span: &Span,
    root: Option<&Span>,
    ancestors: &[&Span],
    mapping: &SpanMapping,
) -> Option<String> {
    if let Some(root) = root
        && let Some(value) = root.first_attr(&mapping.root_question)
    {
        let json_mime =
            attr(&root.attributes, "input.mime_type").is_some_and(|m| m.as_text().contains("json"));
        if let Some(q) = input_text(&value.as_text(), json_mime) {
            return Some(q);
        }
    }
    let chain = || std::iter::once(span).chain(ancestors.iter().copied());
    if let Some(q) = chain()
        .filter_map(|s| s.first_attr(&mapping.question_messages))
        .find_map(|v| last_user_message(&v.as_text()))
    {
        return Some(q);
    }
    chain()
        .find_map(|s| s.first_attr(&mapping.question))
        .map(AttrValue::as_text)
        .filter(|t| !t.trim().is_empty())
}

/// OpenInference's `input.value`: plain text, or (JSON mime type) an object whose `question`,
/// `query`, `input` or `text` string is the question, else the text as it is.
fn input_text(text: &str, json_mime: bool) -> Option<String> {
    if text.trim().is_empty() {
        return None;
    }
    if json_mime && let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) {
        for key in ["question", "query", "input", "text"] {
            if let Some(Value::String(s)) = map.get(key)
                && !s.trim().is_empty()
            {
                return Some(s.clone());
            }
        }
    }
    Some(text.to_string())
}

/// The last `user` message of OTel GenAI chat messages (JSON text): the current form
/// (`parts` with `type = "text"` and `content`) or the older `content` string.
fn last_user_message(text: &str) -> Option<String> {
    let Ok(Value::Array(messages)) = serde_json::from_str::<Value>(text) else {
        return None;
    };
    messages.iter().rev().find_map(|m| {
        if m.get("role").and_then(Value::as_str) != Some("user") {
            return None;
        }
        if let Some(content) = m.get("content").and_then(Value::as_str) {
            return Some(content.to_string()).filter(|c| !c.trim().is_empty());
        }
        let parts: Vec<&str> = m
            .get("parts")
            .and_then(Value::as_array)?
            .iter()
            .filter(|p| {
                p.get("type")
                    .and_then(Value::as_str)
                    .is_none_or(|t| t == "text")
            })
            .filter_map(|p| p.get("content").and_then(Value::as_str))
            .collect();
        Some(parts.join("\n")).filter(|c| !c.trim().is_empty())
    })
}

/// The model: on the span or an ancestor, else on the trace's spans that ended before the
/// database span began (the LLM call that wrote the SQL is usually a sibling), the latest.
fn model_of(
    span: &Span,
    ancestors: &[&Span],
    trace: &[Span],
    mapping: &SpanMapping,
) -> Option<String> {
    let text = |s: &Span| {
        s.first_attr(&mapping.model)
            .map(AttrValue::as_text)
            .filter(|t| !t.trim().is_empty())
    };
    std::iter::once(span)
        .chain(ancestors.iter().copied())
        .find_map(text)
        .or_else(|| {
            trace
                .iter()
                .filter(|s| s.end_unix_nano <= span.start_unix_nano)
                .filter_map(|s| text(s).map(|m| (s.end_unix_nano, m)))
                .max_by_key(|(end, _)| *end)
                .map(|(_, m)| m)
        })
}

/// The `result` of the database span: the error (status description, else an exception
/// event's message, else `error.type`), the rows returned, the duration.
fn result_of(span: &Span, mapping: &SpanMapping) -> Value {
    let mut result = Map::new();
    if span.status == StatusCode::Error {
        let exception = span
            .events
            .iter()
            .filter(|e| e.name == "exception")
            .find_map(|e| attr(&e.attributes, "exception.message"))
            .map(AttrValue::as_text);
        let message = Some(span.status_message.clone())
            .filter(|m| !m.trim().is_empty())
            .or(exception)
            .or_else(|| attr(&span.attributes, "error.type").map(AttrValue::as_text))
            .unwrap_or_else(|| "error".to_string());
        result.insert("error".into(), Value::String(message));
    } else if let Some(rows) = span
        .first_attr(&mapping.row_count)
        .and_then(AttrValue::as_count)
    {
        result.insert("row_count".into(), json!(rows));
    }
    if span.end_unix_nano >= span.start_unix_nano && span.start_unix_nano > 0 {
        let nanos = span.end_unix_nano - span.start_unix_nano;
        result.insert(
            "elapsed_ms".into(),
            json!((nanos as f64 / 1_000.0).round() / 1_000.0),
        );
    }
    Value::Object(result)
}

/// Nanoseconds since the epoch as RFC 3339 (microseconds), `None` for 0 or out of range.
fn rfc3339_nanos(nanos: u64) -> Option<String> {
    if nanos == 0 {
        return None;
    }
    let secs = i64::try_from(nanos / 1_000_000_000).ok()?;
    let sub = (nanos % 1_000_000_000) as u32;
    chrono::DateTime::<chrono::Utc>::from_timestamp(secs, sub)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(k: &str, v: &str) -> (String, AttrValue) {
        (k.to_string(), AttrValue::Str(v.to_string()))
    }

    fn span(id: &str, parent: Option<&str>, start: u64, end: u64, attributes: Attributes) -> Span {
        Span {
            trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
            span_id: id.into(),
            parent_span_id: parent.map(str::to_string),
            name: id.into(),
            start_unix_nano: start,
            end_unix_nano: end,
            attributes,
            resource: Arc::new(vec![
                s("service.name", "sales-bot"),
                s("service.version", "1.4"),
            ]),
            ..Span::default()
        }
    }

    fn agent_trace() -> Vec<Span> {
        let base = 1_767_225_600_000_000_000u64; // 2026-01-01T00:00:00Z
        vec![
            span(
                "db",
                Some("root"),
                base + 3_000_000,
                base + 9_480_000,
                vec![
                    s("db.system.name", "sqlite"),
                    s("db.namespace", "california_schools"),
                    s("db.query.text", "SELECT COUNT(*) FROM schools"),
                    ("db.response.returned_rows".into(), AttrValue::Int(1)),
                ],
            ),
            span(
                "llm",
                Some("root"),
                base + 1_000_000,
                base + 2_000_000,
                vec![s("gen_ai.request.model", "gpt-4o-mini")],
            ),
            span(
                "root",
                None,
                base,
                base + 10_000_000,
                vec![s("input.value", "How many schools are there?")],
            ),
        ]
    }

    #[test]
    fn an_openinference_trace_becomes_one_event() {
        let events = events_of_trace(&agent_trace(), &SpanMapping::default());
        assert_eq!(events.len(), 1);
        let e = &events[0];
        assert_eq!(e.missing_question, None);
        assert_eq!(
            e.payload,
            json!({
                "event_id": "0af7651916cd43dd8448eb211c80319c-db",
                "ts": "2026-01-01T00:00:00.009480Z",
                "sql": "SELECT COUNT(*) FROM schools",
                "question": "How many schools are there?",
                "dialect": "sqlite",
                "db_id": "california_schools",
                "app_id": "sales-bot",
                "agent_version": "1.4",
                "model": "gpt-4o-mini",
                "result": {"row_count": 1, "elapsed_ms": 6.48},
                "trace_id": "0af7651916cd43dd8448eb211c80319c",
                "span_id": "db"
            })
        );
    }

    #[test]
    fn the_genai_user_message_is_the_question_when_the_root_has_none() {
        let mut trace = agent_trace();
        trace[2].attributes.clear();
        trace[0].parent_span_id = Some("llm".into());
        trace[1].attributes.push(s(
            "gen_ai.input.messages",
            r#"[{"role":"system","parts":[{"type":"text","content":"You write SQL."}]},
                {"role":"user","parts":[{"type":"text","content":"Schools in Alameda?"}]}]"#,
        ));
        let e = &events_of_trace(&trace, &SpanMapping::default())[0];
        assert_eq!(e.payload["question"], "Schools in Alameda?");
        // The model is on the ancestor LLM span.
        assert_eq!(e.payload["model"], "gpt-4o-mini");
        // The older form: a plain `content` string.
        trace[1].attributes.pop();
        trace[1].attributes.push(s(
            "gen_ai.input.messages",
            r#"[{"role":"user","content":"first"},{"role":"assistant","content":"x"},{"role":"user","content":"second"}]"#,
        ));
        let e = &events_of_trace(&trace, &SpanMapping::default())[0];
        assert_eq!(e.payload["question"], "second");
    }

    #[test]
    fn a_json_input_value_yields_its_question_field() {
        let mut trace = agent_trace();
        trace[2].attributes = vec![
            s(
                "input.value",
                r#"{"question": "Top 3 districts?", "chat_history": []}"#,
            ),
            s("input.mime_type", "application/json"),
        ];
        let e = &events_of_trace(&trace, &SpanMapping::default())[0];
        assert_eq!(e.payload["question"], "Top 3 districts?");
    }

    #[test]
    fn a_configured_attribute_is_the_last_resort_and_no_question_says_why() {
        let mut trace = agent_trace();
        trace[2].attributes.clear();
        let e = &events_of_trace(&trace, &SpanMapping::default())[0];
        assert!(e.payload.get("question").is_none());
        let why = e.missing_question.as_deref().unwrap();
        assert!(
            why.contains("no question") && why.contains("input.value"),
            "{why}"
        );
        trace[2].attributes.push(s("app.question", "asked"));
        let mapping = SpanMapping {
            question: vec!["app.question".into()],
            ..SpanMapping::default()
        };
        let e = &events_of_trace(&trace, &mapping)[0];
        assert_eq!(e.payload["question"], "asked");
        assert_eq!(e.missing_question, None);
    }

    #[test]
    fn an_error_status_is_the_result_error() {
        let mut trace = agent_trace();
        trace[0].status = StatusCode::Error;
        trace[0].events.push(SpanEvent {
            name: "exception".into(),
            attributes: vec![s("exception.message", "no such column: nme")],
        });
        let e = &events_of_trace(&trace, &SpanMapping::default())[0];
        assert_eq!(e.payload["result"]["error"], "no such column: nme");
        assert!(e.payload["result"].get("row_count").is_none());
        trace[0].status_message = "OperationalError".into();
        let e = &events_of_trace(&trace, &SpanMapping::default())[0];
        assert_eq!(e.payload["result"]["error"], "OperationalError");
    }

    #[test]
    fn older_conventions_and_several_queries_per_trace() {
        let mut trace = agent_trace();
        trace[0].attributes = vec![
            s("db.system", "postgresql"),
            s("db.name", "shop"),
            s("db.statement", "SELECT 1"),
        ];
        let mut second = trace[0].clone();
        second.span_id = "db2".into();
        second.end_unix_nano += 1;
        second.attributes = vec![s("db.statement", "SELECT 2")];
        trace.push(second);
        // A span without SQL (an HTTP call) makes no event.
        trace.push(span(
            "http",
            Some("root"),
            1,
            2,
            vec![s("http.method", "GET")],
        ));
        let events = events_of_trace(&trace, &SpanMapping::default());
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].payload["dialect"], "postgresql");
        assert_eq!(events[0].payload["db_id"], "shop");
        assert_eq!(events[1].payload["sql"], "SELECT 2");
        assert_eq!(
            events[1].payload["event_id"],
            "0af7651916cd43dd8448eb211c80319c-db2"
        );
    }

    #[test]
    fn a_parent_cycle_in_hostile_input_ends() {
        let mut trace = agent_trace();
        trace[2].parent_span_id = Some("db".into());
        let events = events_of_trace(&trace, &SpanMapping::default());
        assert_eq!(events.len(), 1);
    }
}
