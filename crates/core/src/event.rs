//! The input contract: one JSON object per Kafka message or JSONL line
//! (`docs/reference/input.md`).
//!
//! Decoding never panics: every byte string either becomes a validated [`Event`] or a
//! [`DecodeError`] whose message is the dead-letter reason.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Largest accepted encoded event, in bytes. Larger payloads are dead-lettered unread.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// One agent interaction to be scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Idempotency key; derived from a content hash when the producer omits it.
    pub event_id: String,
    /// When the agent produced the SQL (RFC 3339), if the producer said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<String>,
    /// Application the agent serves; selects the STEF rule profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_id: Option<String>,
    /// Agent identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Agent release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// Model behind the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The user's original question (Qu).
    pub question: String,
    /// The agent's reformulation of the question (Qe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enriched_question: Option<String>,
    /// The SQL the agent produced (S).
    pub sql: String,
    /// SQL dialect of `sql` (overrides the app profile's dialect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialect: Option<String>,
    /// Batch/backfill run this event belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Database the SQL runs against: selects its schema in the STEF catalogues (and is the
    /// gold database when `gold.db_id` is absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_id: Option<String>,
    /// Reference data that switches on the gold metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gold: Option<Gold>,
    /// What the agent got when it ran the SQL (its trace): the error, or the rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<QueryResult>,
    /// Why the event's `result` was set aside: it was malformed, so the event is scored
    /// without it (an auxiliary field never costs an event its score). Kept when the event is
    /// encoded again (the judge-work topic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_ignored: Option<String>,
    /// The span the SQL ran in (W3C trace context): from the event's `traceparent`, or its
    /// `trace_id` and `span_id` (hex); an event made from an OTLP trace carries its database
    /// span's. Evaluation events (`[telemetry] evaluations`) are parented to it. Malformed,
    /// it is left out: an auxiliary field never costs an event its score. Encoded again as
    /// `traceparent`.
    #[serde(
        default,
        rename = "traceparent",
        skip_serializing_if = "Option::is_none",
        with = "traceparent_text"
    )]
    pub trace: Option<TraceContext>,
    /// Unknown fields, kept for forward compatibility.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The span an event's SQL ran in: a W3C trace context's trace id and parent (span) id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceContext {
    /// The trace id (16 bytes, not all zero).
    pub trace_id: [u8; 16],
    /// The span id (8 bytes, not all zero).
    pub span_id: [u8; 8],
}

impl TraceContext {
    /// From hex ids (32 and 16 hex digits, case-insensitive); `None` when malformed or zero.
    pub fn from_hex(trace_id: &str, span_id: &str) -> Option<TraceContext> {
        let mut trace = [0u8; 16];
        let mut span = [0u8; 8];
        hex::decode_to_slice(trace_id.trim(), &mut trace).ok()?;
        hex::decode_to_slice(span_id.trim(), &mut span).ok()?;
        (trace != [0; 16] && span != [0; 8]).then_some(TraceContext {
            trace_id: trace,
            span_id: span,
        })
    }

    /// From a W3C `traceparent` (`00-<trace id>-<span id>-<flags>`); `None` when malformed.
    pub fn from_traceparent(text: &str) -> Option<TraceContext> {
        let mut parts = text.trim().split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        // Version 00 has exactly four parts; later versions may append more.
        if version.len() != 2
            || version.eq_ignore_ascii_case("ff")
            || (version == "00" && parts.next().is_some())
            || trace.len() != 32
            || span.len() != 16
            || flags.len() != 2
            || !flags.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return None;
        }
        TraceContext::from_hex(trace, span)
    }

    /// The W3C `traceparent` (version 00, sampled).
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-01",
            hex::encode(self.trace_id),
            hex::encode(self.span_id)
        )
    }
}

/// [`Event::trace`] as a `traceparent` string.
mod traceparent_text {
    use super::TraceContext;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Option<TraceContext>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(trace) => s.serialize_str(&trace.traceparent()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TraceContext>, D::Error> {
        Ok(Option::<String>::deserialize(d)?
            .as_deref()
            .and_then(TraceContext::from_traceparent))
    }
}

/// Gold (reference) data attached to an event.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Gold {
    /// Reference SQL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql: Option<String>,
    /// Database in the executor catalogue (`<db_id>/<db_id>.sqlite`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_id: Option<String>,
    /// External knowledge / hint (BIRD evidence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// Schema text, when the producer supplies it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Benchmark difficulty/hardness label, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difficulty: Option<String>,
    /// Unknown fields, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Most rows of a `result` sample kept; the rest are dropped and `truncated` set.
pub const MAX_RESULT_ROWS: usize = 100;
/// Most columns of a `result` kept (names and cells beyond are dropped).
pub const MAX_RESULT_COLUMNS: usize = 64;
/// Longest cell text, column name or error message kept, in characters (longer ones are cut).
pub const MAX_RESULT_TEXT: usize = 256;

/// What the agent got when it ran the SQL (the input contract's optional `result`): the error,
/// or the result's shape and a sample of its rows. Decoding caps it ([`MAX_RESULT_ROWS`],
/// [`MAX_RESULT_COLUMNS`], [`MAX_RESULT_TEXT`]) and says so in `truncated`; cells are JSON
/// scalars (a nested array or object is kept as its JSON text).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct QueryResult {
    /// The error the database answered, when the query failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Rows the query returned in all (the sample may hold fewer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_count: Option<u64>,
    /// Column names, as the result named them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<String>,
    /// A sample of the rows (the first ones), each a list of cells.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<Vec<Value>>,
    /// The sample is not the whole result (the producer said so, or decoding cut it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// How long the query ran, in milliseconds (any non-negative number: tracers report
    /// fractions, `6.48`). A whole number is written back as an integer (`7`, not `7.0`), as
    /// the producer wrote it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "whole_as_integer"
    )]
    pub elapsed_ms: Option<f64>,
}

/// `Some(7.0)` as `7`, `Some(6.48)` as `6.48`.
fn whole_as_integer<S: serde::Serializer>(value: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(x) if x.fract() == 0.0 && (0.0..9.0e15).contains(x) => s.serialize_u64(*x as u64),
        Some(x) => s.serialize_f64(*x),
        None => s.serialize_none(),
    }
}

/// Why an event's `result` member was set aside (the event is still scored, without it; the
/// reason is kept as `result_ignored`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResultShapeError {
    /// The member is not a JSON object.
    #[error("expected an object, got {0}")]
    NotAnObject(&'static str),
    /// A field of it has the wrong JSON type or range.
    #[error("{field}: expected {expected}, got {got}")]
    WrongType {
        /// The field (`rows[3]`, `row_count`).
        field: std::borrow::Cow<'static, str>,
        /// What it must be (`an array`).
        expected: &'static str,
        /// What it is (a JSON type's name, or the number given).
        got: std::borrow::Cow<'static, str>,
    },
    /// `row_count` is below the rows sampled.
    #[error("row_count {row_count} is less than the {sample_rows} sample rows")]
    CountBelowSample {
        /// The total the event gave.
        row_count: u64,
        /// The rows it sampled.
        sample_rows: usize,
    },
}

impl ResultShapeError {
    fn wrong_type(
        field: impl Into<std::borrow::Cow<'static, str>>,
        expected: &'static str,
        got: impl Into<std::borrow::Cow<'static, str>>,
    ) -> ResultShapeError {
        ResultShapeError::WrongType {
            field: field.into(),
            expected,
            got: got.into(),
        }
    }
}

impl QueryResult {
    /// Rows in all: `row_count` when given, else the sample's size when it is the whole result.
    pub fn total_rows(&self) -> Option<u64> {
        self.row_count
            .or_else(|| (!self.truncated).then_some(self.rows.len() as u64))
    }

    /// Decode the `result` member (module documentation: caps, cells), or say what is wrong.
    fn from_value(value: Value) -> Result<QueryResult, ResultShapeError> {
        let Value::Object(mut obj) = value else {
            return Err(ResultShapeError::NotAnObject(json_type_name(&value)));
        };
        let mut result = QueryResult {
            error: optional_text(obj.remove("error").unwrap_or(Value::Null), "error")?,
            row_count: optional_count(obj.remove("row_count").unwrap_or(Value::Null), "row_count")?,
            elapsed_ms: optional_duration(
                obj.remove("elapsed_ms").unwrap_or(Value::Null),
                "elapsed_ms",
            )?,
            ..QueryResult::default()
        };
        match obj.remove("truncated") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => result.truncated = b,
            Some(other) => {
                return Err(ResultShapeError::wrong_type(
                    "truncated",
                    "a boolean",
                    json_type_name(&other),
                ));
            }
        }
        match obj.remove("columns") {
            None | Some(Value::Null) => {}
            Some(Value::Array(names)) => {
                if names.len() > MAX_RESULT_COLUMNS {
                    result.truncated = true;
                }
                for name in names.into_iter().take(MAX_RESULT_COLUMNS) {
                    result.columns.push(match name {
                        Value::String(s) => clip_text(&s),
                        other => clip_text(&other.to_string()),
                    });
                }
            }
            Some(other) => {
                return Err(ResultShapeError::wrong_type(
                    "columns",
                    "an array",
                    json_type_name(&other),
                ));
            }
        }
        match obj.remove("rows") {
            None | Some(Value::Null) => {}
            Some(Value::Array(rows)) => {
                if rows.len() > MAX_RESULT_ROWS {
                    result.truncated = true;
                }
                for (i, row) in rows.into_iter().take(MAX_RESULT_ROWS).enumerate() {
                    let Value::Array(cells) = row else {
                        return Err(ResultShapeError::wrong_type(
                            format!("rows[{i}]"),
                            "an array of cells",
                            json_type_name(&row),
                        ));
                    };
                    if cells.len() > MAX_RESULT_COLUMNS {
                        result.truncated = true;
                    }
                    result.rows.push(
                        cells
                            .into_iter()
                            .take(MAX_RESULT_COLUMNS)
                            .map(clip_cell)
                            .collect(),
                    );
                }
            }
            Some(other) => {
                return Err(ResultShapeError::wrong_type(
                    "rows",
                    "an array",
                    json_type_name(&other),
                ));
            }
        }
        if let Some(n) = result.row_count
            && (n as usize) < result.rows.len()
        {
            return Err(ResultShapeError::CountBelowSample {
                row_count: n,
                sample_rows: result.rows.len(),
            });
        }
        Ok(result)
    }
}

/// A `result` member that may be null or a string (clipped); `what` names it in the error.
fn optional_text(v: Value, what: &'static str) -> Result<Option<String>, ResultShapeError> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(clip_text(&s))),
        other => Err(ResultShapeError::wrong_type(
            what,
            "a string",
            json_type_name(&other),
        )),
    }
}

/// A `result` member that may be null or a non-negative integer.
fn optional_count(v: Value, what: &'static str) -> Result<Option<u64>, ResultShapeError> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => n.as_u64().map(Some).ok_or_else(|| {
            ResultShapeError::wrong_type(what, "a non-negative integer", n.to_string())
        }),
        other => Err(ResultShapeError::wrong_type(
            what,
            "a number",
            json_type_name(&other),
        )),
    }
}

/// A `result` member that may be null or a finite non-negative number (milliseconds).
fn optional_duration(v: Value, what: &'static str) -> Result<Option<f64>, ResultShapeError> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => n
            .as_f64()
            .filter(|ms| ms.is_finite() && *ms >= 0.0)
            .map(Some)
            .ok_or_else(|| {
                ResultShapeError::wrong_type(what, "a non-negative number", n.to_string())
            }),
        other => Err(ResultShapeError::wrong_type(
            what,
            "a number",
            json_type_name(&other),
        )),
    }
}

/// `text` cut to [`MAX_RESULT_TEXT`] characters.
pub(crate) fn clip_text(text: &str) -> String {
    match text.char_indices().nth(MAX_RESULT_TEXT) {
        Some((cut, _)) => text[..cut].to_string(),
        None => text.to_string(),
    }
}

/// A result cell as a JSON scalar: strings cut, nested values kept as their (cut) JSON text.
fn clip_cell(cell: Value) -> Value {
    match cell {
        Value::String(s) => Value::String(clip_text(&s)),
        v @ (Value::Array(_) | Value::Object(_)) => Value::String(clip_text(&v.to_string())),
        scalar => scalar,
    }
}

/// Why a payload could not become an [`Event`]; its `Display` is the dead-letter reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// Payload exceeds the configured maximum size.
    #[error("payload too large: {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Size of the payload.
        size: usize,
        /// Configured limit.
        limit: usize,
    },
    /// Payload is not valid UTF-8.
    #[error("payload is not valid UTF-8: {0}")]
    NotUtf8(#[source] std::str::Utf8Error),
    /// Payload is empty or whitespace.
    #[error("empty payload")]
    Empty,
    /// Payload is not a JSON document.
    #[error("malformed JSON: {0}")]
    MalformedJson(#[source] JsonError),
    /// Payload is JSON but not an object.
    #[error("event must be a JSON object, got {0}")]
    NotAnObject(&'static str),
    /// A required field is absent or null.
    #[error("missing required field `{0}`")]
    MissingField(&'static str),
    /// A field has the wrong type or an invalid value.
    #[error("invalid field `{field}`: {reason}")]
    InvalidField {
        /// Field name.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// serde_json's error behind [`DecodeError::MalformedJson`], kept whole (line, column,
/// category) and shared, so the decode error stays `Clone`; two are equal when they say the
/// same thing (serde's error has no equality of its own).
#[derive(Debug, Clone)]
pub struct JsonError(std::sync::Arc<serde_json::Error>);

impl JsonError {
    /// The line (from 1) where the JSON stopped making sense.
    pub fn line(&self) -> usize {
        self.0.line()
    }

    /// The column (from 1) where the JSON stopped making sense.
    pub fn column(&self) -> usize {
        self.0.column()
    }
}

impl From<serde_json::Error> for JsonError {
    fn from(error: serde_json::Error) -> Self {
        JsonError(std::sync::Arc::new(error))
    }
}

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Transparent: it is serde's error, so its source is serde's source.
impl std::error::Error for JsonError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(self.0.as_ref())
    }
}

impl PartialEq for JsonError {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

/// The longest id (`event_id`, `app_id`, `agent_id`, `agent_version`, `model`, `run_id`,
/// `db_id`) an event may carry, in bytes: ids are keys — of rows, labels, links, series and
/// ClickHouse's sorting key — and the review page labels events by them.
pub const MAX_ID_BYTES: usize = 256;

/// Why an id cannot be used (too long, or a control character in it), if it cannot.
pub fn id_problem(id: &str) -> Option<String> {
    if id.len() > MAX_ID_BYTES {
        return Some(format!(
            "{} bytes long; ids are at most {MAX_ID_BYTES} bytes",
            id.len()
        ));
    }
    id.chars().find(|c| c.is_control()).map(|c| {
        format!(
            "holds the control character U+{:04X}; ids are printable text",
            u32::from(c)
        )
    })
}

impl Event {
    /// Decode and validate one payload with the default size limit.
    pub fn decode(bytes: &[u8]) -> Result<Event, DecodeError> {
        Self::decode_with_limit(bytes, DEFAULT_MAX_EVENT_BYTES)
    }

    /// Decode and validate one payload, rejecting payloads larger than `max_bytes`.
    pub fn decode_with_limit(bytes: &[u8], max_bytes: usize) -> Result<Event, DecodeError> {
        if bytes.len() > max_bytes {
            return Err(DecodeError::TooLarge {
                size: bytes.len(),
                limit: max_bytes,
            });
        }
        let text = std::str::from_utf8(bytes).map_err(DecodeError::NotUtf8)?;
        if text.trim().is_empty() {
            return Err(DecodeError::Empty);
        }
        // An object is read straight into its fields (no map of every key, no key copied for
        // the fields the contract names); anything else — not an object, not JSON — goes the
        // way of any JSON value, so its error is the same.
        if let Ok(fields) = serde_json::from_str::<Fields>(text) {
            return Self::from_fields(fields);
        }
        let value: Value = serde_json::from_str(text)
            .map_err(|e| DecodeError::MalformedJson(JsonError::from(e)))?;
        Self::from_value(value)
    }

    /// Validate an already-parsed JSON value.
    pub fn from_value(value: Value) -> Result<Event, DecodeError> {
        match value {
            Value::Object(map) => Self::from_fields(Fields::from_map(map)),
            other => Err(DecodeError::NotAnObject(json_type_name(&other))),
        }
    }

    /// Validate an object's fields (the checks and their order are the contract's: the first
    /// failing one is the dead letter's reason).
    fn from_fields(mut obj: Fields) -> Result<Event, DecodeError> {
        let question = required_string(&mut obj, "question")?;
        if question.trim().is_empty() {
            return Err(DecodeError::InvalidField {
                field: "question",
                reason: "must not be empty".into(),
            });
        }
        // Empty SQL is a valid event: STEF scores it 0 with status `parse_error`.
        let sql = required_string(&mut obj, "sql")?;
        let mut event = Event {
            event_id: optional_string(&mut obj, "event_id")?.unwrap_or_default(),
            ts: optional_string(&mut obj, "ts")?,
            app_id: optional_string(&mut obj, "app_id")?,
            agent_id: optional_string(&mut obj, "agent_id")?,
            agent_version: optional_string(&mut obj, "agent_version")?,
            model: optional_string(&mut obj, "model")?,
            question,
            enriched_question: optional_string(&mut obj, "enriched_question")?,
            sql,
            dialect: optional_string(&mut obj, "dialect")?,
            run_id: optional_string(&mut obj, "run_id")?,
            db_id: optional_string(&mut obj, "db_id")?,
            gold: None,
            result: None,
            result_ignored: None,
            trace: None,
            extra: Map::new(),
        };
        // The trace context: `traceparent`, else `trace_id` + `span_id`; anything malformed is
        // left out (the event is scored all the same).
        let text = |v: Option<Value>| match v {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        let traceparent = text(obj.remove("traceparent"));
        let (trace_id, span_id) = (text(obj.remove("trace_id")), text(obj.remove("span_id")));
        event.trace = traceparent
            .as_deref()
            .and_then(TraceContext::from_traceparent)
            .or_else(|| TraceContext::from_hex(trace_id.as_deref()?, span_id.as_deref()?));
        // A malformed `result` is set aside, not fatal: the event is scored without it and its
        // row says why. (A `result_ignored` already there is this decoder's own, re-read.)
        if let Some(Value::String(why)) = obj.remove("result_ignored") {
            event.result_ignored = Some(clip_text(&why));
        }
        match obj.remove("result") {
            None | Some(Value::Null) => {}
            Some(v) => match QueryResult::from_value(v) {
                Ok(result) => event.result = Some(result),
                Err(reason) => event.result_ignored = Some(reason.to_string()),
            },
        }
        if let Some(ts) = &event.ts {
            chrono::DateTime::parse_from_rfc3339(ts).map_err(|e| DecodeError::InvalidField {
                field: "ts",
                reason: format!("not an RFC 3339 timestamp ({e})"),
            })?;
        }
        match obj.remove("gold") {
            None | Some(Value::Null) => {}
            Some(v @ Value::Object(_)) => {
                let gold: Gold =
                    serde_json::from_value(v).map_err(|e| DecodeError::InvalidField {
                        field: "gold",
                        reason: e.to_string(),
                    })?;
                event.gold = Some(gold);
            }
            Some(other) => {
                return Err(DecodeError::InvalidField {
                    field: "gold",
                    reason: format!("expected an object, got {}", json_type_name(&other)),
                });
            }
        }
        if let (Some(gold), Some(db_id)) = (event.gold.as_mut(), event.db_id.as_ref())
            && gold.db_id.is_none()
        {
            gold.db_id = Some(db_id.clone());
        }
        event.extra = obj.extra;
        for (field, id) in [
            ("event_id", Some(&event.event_id)),
            ("app_id", event.app_id.as_ref()),
            ("agent_id", event.agent_id.as_ref()),
            ("agent_version", event.agent_version.as_ref()),
            ("model", event.model.as_ref()),
            ("run_id", event.run_id.as_ref()),
            ("db_id", event.db_id.as_ref()),
        ] {
            if let Some(reason) = id.and_then(|id| id_problem(id)) {
                return Err(DecodeError::InvalidField { field, reason });
            }
        }
        if event.event_id.trim().is_empty() {
            event.event_id = event.content_hash();
        }
        Ok(event)
    }

    /// Stable content hash used as `event_id` when the producer sends none: SHA-256 over the
    /// identity-bearing fields, hex, first 32 characters.
    pub fn content_hash(&self) -> String {
        let mut h = Sha256::new();
        for part in [
            Some(self.question.as_str()),
            self.enriched_question.as_deref(),
            Some(self.sql.as_str()),
            self.app_id.as_deref(),
            self.agent_id.as_deref(),
            self.agent_version.as_deref(),
            self.model.as_deref(),
            self.ts.as_deref(),
            self.run_id.as_deref(),
            self.gold.as_ref().and_then(|g| g.sql.as_deref()),
            self.gold.as_ref().and_then(|g| g.db_id.as_deref()),
        ] {
            match part {
                Some(s) => {
                    h.update([1u8]);
                    h.update((s.len() as u64).to_le_bytes());
                    h.update(s.as_bytes());
                }
                None => h.update([0u8]),
            }
        }
        // Added after the first release: hashed only when present, so that the ids of events
        // without it stay what they were.
        if let Some(db_id) = &self.db_id {
            h.update([2u8]);
            h.update((db_id.len() as u64).to_le_bytes());
            h.update(db_id.as_bytes());
        }
        let digest = hex::encode(h.finalize());
        digest[..32].to_string()
    }
}

fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The fields of the input contract, by [`Fields`] index.
const FIELD_NAMES: [&str; 18] = [
    "event_id",
    "ts",
    "app_id",
    "agent_id",
    "agent_version",
    "model",
    "question",
    "enriched_question",
    "sql",
    "dialect",
    "run_id",
    "db_id",
    "gold",
    "result",
    "result_ignored",
    "traceparent",
    "trace_id",
    "span_id",
];

/// An event object split into the contract's fields (each as the JSON value it was given) and
/// the rest (kept in [`Event::extra`]). A key given twice keeps its last value, as a JSON map
/// does.
#[derive(Default)]
struct Fields {
    named: [Option<Value>; FIELD_NAMES.len()],
    extra: Map<String, Value>,
}

impl Fields {
    fn from_map(mut map: Map<String, Value>) -> Fields {
        let mut fields = Fields::default();
        for (slot, name) in fields.named.iter_mut().zip(FIELD_NAMES) {
            *slot = map.remove(name);
        }
        fields.extra = map;
        fields
    }

    /// Take a field's value out (`field` is one of [`FIELD_NAMES`]).
    fn remove(&mut self, field: &str) -> Option<Value> {
        self.named[FieldKey::of(field)?].take()
    }
}

/// A key of an event object: one of [`FIELD_NAMES`] (matched without copying it), or another.
enum FieldKey {
    Named(usize),
    Other(String),
}

impl FieldKey {
    /// The index of `key` in [`FIELD_NAMES`] (a `match`: by length, then the bytes).
    fn of(key: &str) -> Option<usize> {
        Some(match key {
            "event_id" => 0,
            "ts" => 1,
            "app_id" => 2,
            "agent_id" => 3,
            "agent_version" => 4,
            "model" => 5,
            "question" => 6,
            "enriched_question" => 7,
            "sql" => 8,
            "dialect" => 9,
            "run_id" => 10,
            "db_id" => 11,
            "gold" => 12,
            "result" => 13,
            "result_ignored" => 14,
            "traceparent" => 15,
            "trace_id" => 16,
            "span_id" => 17,
            _ => return None,
        })
    }
}

impl<'de> Deserialize<'de> for FieldKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<FieldKey, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = FieldKey;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<FieldKey, E> {
                Ok(FieldKey::of(key)
                    .map_or_else(|| FieldKey::Other(key.to_owned()), FieldKey::Named))
            }
            fn visit_string<E: serde::de::Error>(self, key: String) -> Result<FieldKey, E> {
                Ok(FieldKey::of(&key).map_or(FieldKey::Other(key), FieldKey::Named))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Fields, D::Error> {
        struct FieldsVisitor;
        impl<'de> serde::de::Visitor<'de> for FieldsVisitor {
            type Value = Fields;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an event object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Fields, A::Error> {
                let mut fields = Fields::default();
                while let Some(key) = map.next_key::<FieldKey>()? {
                    let value: Value = map.next_value()?;
                    match key {
                        FieldKey::Named(index) => fields.named[index] = Some(value),
                        FieldKey::Other(key) => {
                            fields.extra.insert(key, value);
                        }
                    }
                }
                Ok(fields)
            }
        }
        deserializer.deserialize_map(FieldsVisitor)
    }
}

fn required_string(obj: &mut Fields, field: &'static str) -> Result<String, DecodeError> {
    optional_string(obj, field)?.ok_or(DecodeError::MissingField(field))
}

fn optional_string(obj: &mut Fields, field: &'static str) -> Result<Option<String>, DecodeError> {
    match obj.remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        // Numeric ids are common (benchmark question ids); accept them as strings.
        Some(Value::Number(n)) if field.ends_with("_id") || field == "agent_version" => {
            Ok(Some(n.to_string()))
        }
        Some(other) => Err(DecodeError::InvalidField {
            field,
            reason: format!("expected a string, got {}", json_type_name(&other)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_keys_match_the_field_names() {
        for (index, name) in FIELD_NAMES.iter().enumerate() {
            assert_eq!(FieldKey::of(name), Some(index), "{name}");
        }
        assert_eq!(FieldKey::of("questions"), None);
        assert_eq!(FieldKey::of(""), None);
    }

    /// The object path (fields read directly) and the value path (`from_value`, also what every
    /// payload that is not an object takes) give the same event or the same error, for every
    /// shape the contract has: names given twice, escaped keys, extra fields, numeric ids,
    /// nulls, wrong types, nested results and gold.
    #[test]
    fn object_path_and_value_path_agree() {
        let payloads: &[&str] = &[
            r#"{"question":"How many?","sql":"SELECT 1"}"#,
            r#"{"event_id":"e1","question":"q","sql":"s","extra":{"a":[1,2]},"zzz":null,"aaa":"x"}"#,
            r#"{"event_id":7,"db_id":12,"agent_version":3,"question":"q","sql":"s"}"#,
            r#"{"event_id":"e","question":"q","sql":"s","run_id":1.5}"#,
            r#"{"event_id":"e","question":"q","sql":"s","app_id":7}"#,
            r#"{"event_id":"e","question":"first","sql":"s","question":"second"}"#,
            r#"{"event_id":"e","question":"q","sql":"s","extra":1,"extra":2}"#,
            r#"{"event_\u0069d":"escaped","que\u0073tion":"q","sql":"s"}"#,
            r#"{"event_id":null,"question":"q","sql":"s","ts":null,"model":null}"#,
            r#"{"question":"q","sql":"s","ts":"2026-11-29T10:00:00Z"}"#,
            r#"{"question":"q","sql":"s","ts":"yesterday"}"#,
            r#"{"question":"  ","sql":"s"}"#,
            r#"{"question":3,"sql":"s"}"#,
            r#"{"question":"q"}"#,
            r#"{"sql":"s"}"#,
            r#"{"question":"q","sql":"s","result":{"columns":["a"],"rows":[[1]]}}"#,
            r#"{"question":"q","sql":"s","result":"not an object"}"#,
            r#"{"question":"q","sql":"s","result":null,"result_ignored":"earlier"}"#,
            r#"{"question":"q","sql":"s","result_ignored":5}"#,
            r#"{"question":"q","sql":"s","db_id":"d","gold":{"sql":"SELECT 2"}}"#,
            r#"{"question":"q","sql":"s","gold":[1]}"#,
            r#"{"question":"q","sql":"s","gold":{"sql":5}}"#,
            r#"[{"question":"q","sql":"s"}]"#,
            r#""a string""#,
            r#"{"question":"q","sql":"s""#,
            r#"{"question":"q","sql":"s"} trailing"#,
            r#"{"question":"q","sql":"s",}"#,
            r#"{"question":"q","sql":"s","deep":"#,
        ];
        // Objects take the direct path (the fallback is for what it cannot read).
        let fields = serde_json::from_str::<Fields>(payloads[1]).unwrap();
        assert!(fields.named[0].is_some() && fields.extra.len() == 3);
        for payload in payloads {
            let direct = Event::decode(payload.as_bytes());
            let via_value = serde_json::from_str::<Value>(payload)
                .map_err(|e| DecodeError::MalformedJson(JsonError::from(e)))
                .and_then(Event::from_value);
            assert_eq!(
                format!("{direct:?}"),
                format!("{via_value:?}"),
                "payload {payload}"
            );
        }
        // Nested past serde_json's recursion limit: the same error either way.
        let deep = format!(
            r#"{{"question":"q","sql":"s","x":{}1{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let direct = Event::decode(deep.as_bytes());
        assert!(
            matches!(direct, Err(DecodeError::MalformedJson(_))),
            "{direct:?}"
        );
    }

    #[test]
    fn minimal_event_gets_a_content_hash_id() {
        let e = Event::decode(br#"{"question":"How many?","sql":"SELECT 1"}"#).unwrap();
        assert_eq!(e.event_id.len(), 32);
        let again = Event::decode(br#"{ "sql":"SELECT 1", "question":"How many?" }"#).unwrap();
        assert_eq!(e.event_id, again.event_id);
        let other = Event::decode(br#"{"question":"How many?","sql":"SELECT 2"}"#).unwrap();
        assert_ne!(e.event_id, other.event_id);
    }

    #[test]
    fn unknown_fields_are_kept() {
        let e = Event::decode(
            br#"{"question":"q","sql":"s","tenant":"t1","gold":{"db_id":"x","foo":1}}"#,
        )
        .unwrap();
        assert_eq!(e.extra.get("tenant"), Some(&Value::String("t1".into())));
        assert_eq!(e.gold.unwrap().extra.get("foo"), Some(&Value::from(1)));
    }

    #[test]
    fn decode_errors_keep_their_source() {
        use std::error::Error as _;
        let err = Event::decode(b"{\n  \"question\": }").unwrap_err();
        let DecodeError::MalformedJson(json) = &err else {
            panic!("expected malformed JSON, got {err:?}");
        };
        assert_eq!((json.line(), json.column()), (2, 15));
        assert_eq!(
            err.to_string(),
            "malformed JSON: expected value at line 2 column 15"
        );
        assert!(err.source().is_some());
        let err = Event::decode(b"{\"question\": \"\xff\"}").unwrap_err();
        assert!(matches!(err, DecodeError::NotUtf8(_)), "{err:?}");
        assert_eq!(
            err.to_string(),
            "payload is not valid UTF-8: invalid utf-8 sequence of 1 bytes from index 14"
        );
        assert!(err.source().is_some());
    }

    #[test]
    fn bad_inputs_have_reasons() {
        let cases: &[(&[u8], &str)] = &[
            (b"{not json", "malformed JSON"),
            (b"[1,2]", "JSON object"),
            (b"   ", "empty payload"),
            (
                br#"{"sql":"SELECT 1"}"#,
                "missing required field `question`",
            ),
            (br#"{"question":"q"}"#, "missing required field `sql`"),
            (br#"{"question":"q","sql":42}"#, "invalid field `sql`"),
            (
                br#"{"question":"  ","sql":"x"}"#,
                "invalid field `question`",
            ),
            (
                br#"{"question":"q","sql":"x","ts":"yesterday"}"#,
                "invalid field `ts`",
            ),
            (
                br#"{"question":"q","sql":"x","gold":"nope"}"#,
                "invalid field `gold`",
            ),
            (b"\xff\xfe{}", "not valid UTF-8"),
        ];
        for (bytes, want) in cases {
            let err = Event::decode(bytes).unwrap_err().to_string();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
        }
        let big = vec![b' '; 100];
        assert!(matches!(
            Event::decode_with_limit(&big, 10),
            Err(DecodeError::TooLarge {
                size: 100,
                limit: 10
            })
        ));
    }

    #[test]
    fn a_result_is_capped_and_a_malformed_one_is_set_aside() {
        // Caps: rows, columns, texts; nested cells kept as JSON text.
        let rows: Vec<serde_json::Value> = (0..150).map(|i| serde_json::json!([i, "x"])).collect();
        let long = "é".repeat(1000);
        let event = Event::from_value(serde_json::json!({
            "question": "q", "sql": "s",
            "result": {"row_count": 150, "columns": ["a", long], "rows": rows,
                       "elapsed_ms": 3, "future_field": true}
        }))
        .unwrap();
        let r = event.result.unwrap();
        assert_eq!(r.rows.len(), MAX_RESULT_ROWS);
        assert!(r.truncated);
        assert_eq!(r.total_rows(), Some(150));
        assert_eq!(r.columns[1].chars().count(), MAX_RESULT_TEXT);
        let nested = Event::from_value(serde_json::json!({
            "question": "q", "sql": "s",
            "result": {"rows": [[{"a": [1, 2]}, [3], null, true, 1.5]]}
        }))
        .unwrap()
        .result
        .unwrap();
        assert_eq!(nested.rows[0][0], serde_json::json!("{\"a\":[1,2]}"));
        assert_eq!(nested.rows[0][1], serde_json::json!("[3]"));
        assert!(!nested.truncated);
        assert_eq!(nested.total_rows(), Some(1));
        let wide: Vec<u32> = (0..100).collect();
        let wide = Event::from_value(serde_json::json!({
            "question": "q", "sql": "s", "result": {"rows": [wide]}
        }))
        .unwrap()
        .result
        .unwrap();
        assert_eq!(wide.rows[0].len(), MAX_RESULT_COLUMNS);
        assert!(wide.truncated);
        // `null` is no result.
        let none =
            Event::from_value(serde_json::json!({"question": "q", "sql": "s", "result": null}));
        assert_eq!(none.unwrap().result, None);

        // A fractional duration is a duration.
        let timed = Event::from_value(serde_json::json!({
            "question": "q", "sql": "s", "result": {"row_count": 1, "elapsed_ms": 6.48}
        }))
        .unwrap();
        assert_eq!(timed.result.as_ref().unwrap().elapsed_ms, Some(6.48));
        assert_eq!(timed.result_ignored, None);
        // Written back as given: a fraction as a fraction, a whole number as an integer.
        let text = serde_json::to_string(&timed.result).unwrap();
        assert!(text.contains("\"elapsed_ms\":6.48"), "{text}");
        let whole = Event::from_value(serde_json::json!({
            "question": "q", "sql": "s", "result": {"elapsed_ms": 7}
        }))
        .unwrap();
        let text = serde_json::to_string(&whole.result).unwrap();
        assert!(text.contains("\"elapsed_ms\":7}"), "{text}");

        // Malformed: the event stays, without its result, and says why (field named).
        for (result, why) in [
            (serde_json::json!("rows"), "expected an object"),
            (
                serde_json::json!({"rows": "a,b"}),
                "rows: expected an array",
            ),
            (
                serde_json::json!({"rows": [1, 2]}),
                "rows[0]: expected an array of cells",
            ),
            (
                serde_json::json!({"row_count": -1}),
                "row_count: expected a non-negative integer",
            ),
            (
                serde_json::json!({"row_count": 1.5}),
                "row_count: expected a non-negative integer",
            ),
            (
                serde_json::json!({"row_count": 1, "rows": [[1], [2]]}),
                "less than the 2 sample rows",
            ),
            (serde_json::json!({"error": 42}), "error: expected a string"),
            (
                serde_json::json!({"truncated": "yes"}),
                "truncated: expected a boolean",
            ),
            (
                serde_json::json!({"columns": {"a": 1}}),
                "columns: expected an array",
            ),
            (
                serde_json::json!({"elapsed_ms": -1}),
                "elapsed_ms: expected a non-negative number",
            ),
            (
                serde_json::json!({"elapsed_ms": "6 ms"}),
                "elapsed_ms: expected a number",
            ),
        ] {
            let event = Event::from_value(
                serde_json::json!({"question": "q", "sql": "s", "result": result}),
            )
            .expect("a malformed result does not cost the event");
            assert_eq!(event.result, None);
            let ignored = event.result_ignored.clone().unwrap_or_default();
            assert!(ignored.contains(why), "{ignored}");
            // Encoded again (the judge-work topic) and decoded, it still says why.
            let again = Event::decode(&serde_json::to_vec(&event).unwrap()).unwrap();
            assert_eq!(again.result_ignored, event.result_ignored);
            assert_eq!(again.result, None);
        }
    }

    #[test]
    fn ids_too_long_or_with_control_characters_are_refused_by_name() {
        let decode = |field: &str, id: &str| {
            let mut event = serde_json::json!({"event_id": "e", "question": "q", "sql": "s"});
            event[field] = Value::String(id.to_string());
            Event::decode(event.to_string().as_bytes())
        };
        for field in [
            "event_id",
            "app_id",
            "agent_id",
            "agent_version",
            "model",
            "run_id",
            "db_id",
        ] {
            assert!(decode(field, &"x".repeat(MAX_ID_BYTES)).is_ok(), "{field}");
            assert!(decode(field, "app/42 v1.2 é").is_ok(), "{field}");
            for bad in [
                "x".repeat(MAX_ID_BYTES + 1),
                "a\nb".into(),
                "a\u{7}b".into(),
                "\u{85}".into(),
            ] {
                match decode(field, &bad) {
                    Err(DecodeError::InvalidField {
                        field: named,
                        reason,
                    }) => {
                        assert_eq!(named, field);
                        assert!(
                            reason.contains("bytes") || reason.contains("control"),
                            "{reason}"
                        );
                    }
                    other => panic!("{field} {bad:?}: {other:?}"),
                }
            }
        }
    }
}
