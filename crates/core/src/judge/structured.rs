//! The structured judge seam: "this prompt, these variables → a validated, typed reply".
//!
//! Metrics that need an LLM (STEF's LLM judge, FLEX, ROSE, Hybrid-EX) describe a call as a
//! [`StructuredCall`] and get a [`StructuredOutcome`] back through [`call_structured`], which
//! talks to any [`StructuredJudge`]: the daemon's OpenAI-compatible client (with its caches,
//! rate limits, retries and repair turn), or an in-memory judge in tests. The trait is
//! object-safe (the call's variables are type-erased with `erased_serde`, the reply type by a
//! [`ReplyDecoder`]), so metrics hold an `Arc<dyn StructuredJudge>` and never see HTTP.
//!
//! Every reply goes through [`parse_reply`]: strict JSON first, then the first JSON object found
//! in the text (code fences, prose around it), then serde with strict types
//! (`deny_unknown_fields` on the reply types), then the type's own range checks.

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{JudgeError, JudgeTotals, TokenUsage};

/// Why a model's reply was refused. Its text is shown to the model in the repair turn and kept
/// in `details` when the repair fails too, so each variant reads as an instruction.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReplyError {
    /// The server's answer carried no text to read (no choices, a refusal, empty content).
    #[error("{0}")]
    NoText(String),
    /// The reply is JSON, but not an object.
    #[error("reply is JSON but not an object (got {0})")]
    NotAnObject(&'static str),
    /// No JSON object anywhere in the reply; the reply's start.
    #[error("reply contains no JSON object (starts with {0:?})")]
    NoObject(String),
    /// The object does not follow the reply type's schema (serde's strict types).
    #[error("schema violation: {0}")]
    Schema(#[source] Arc<serde_json::Error>),
    /// The typed reply could not be written back as JSON.
    #[error("re-encoding: {0}")]
    Reencode(#[source] Arc<serde_json::Error>),
    /// The reply follows the schema but fails a check serde cannot express.
    #[error(transparent)]
    Check(#[from] ReplyCheck),
    /// The server stopped at the token cap, which is why the reply is unreadable.
    #[error("the reply was cut off at {cap} (finish_reason = length): {error}")]
    CutOff {
        /// Which cap, and where it was set.
        cap: String,
        /// What was wrong with what came back.
        #[source]
        error: Box<ReplyError>,
    },
}

/// A reply that follows its schema but breaks a check serde cannot express: a range, a length,
/// consistency with the request. Written `{field} {problem}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {problem}")]
pub struct ReplyCheck {
    /// The reply's field, as the schema names it (`confidence`, `question_spec.outputs`).
    pub field: String,
    /// What is wrong with it (`must not be empty`).
    pub problem: String,
}

impl ReplyCheck {
    /// `field` fails with `problem`.
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> ReplyCheck {
        ReplyCheck {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// A caller's extra check on a typed reply (see [`call_structured`]).
pub type ReplyCheckFn<'c, T> = dyn Fn(&T) -> Result<(), ReplyCheck> + Sync + 'c;

/// The check that accepts every reply.
pub fn no_check<T>(_: &T) -> Result<(), ReplyCheck> {
    Ok(())
}

/// One structured call: which prompt, with which variables, in which cache scope.
#[derive(Debug, Clone, Copy)]
pub struct StructuredCall<'a, V, K = V> {
    /// Prompt template name (`prompts/NAME.system.j2` + `NAME.user.j2`).
    pub prompt: &'a str,
    /// Template variables: everything the prompt shows the model, already normalized. Rendered
    /// only on a cache miss.
    pub vars: &'a V,
    /// What determines the reply, hashed into the cache key: the normalized inputs (often the
    /// variables themselves; STEF uses Qu, Qe, S and the dialect, since everything else it
    /// shows is derived from them by code and the rule profile).
    pub identity: &'a K,
    /// Extra cache scope, e.g. the rule-profile version.
    pub scope: &'a str,
    /// A narrower schema than the reply type's own, for what this call already knows (STEF
    /// without an enriched question: its enrichment status can only be `absent`). Its hash is
    /// part of the cache key; `None` uses [`StructuredReply::schema`].
    pub schema: Option<&'static ReplySchema>,
}

impl<'a, V> StructuredCall<'a, V, V> {
    /// A call whose cache identity is its template variables.
    pub fn new(prompt: &'a str, vars: &'a V, scope: &'a str) -> StructuredCall<'a, V, V> {
        StructuredCall {
            prompt,
            vars,
            identity: vars,
            scope,
            schema: None,
        }
    }
}

impl<'a, V, K> StructuredCall<'a, V, K>
where
    V: Serialize + Sync,
    K: Serialize + Sync,
{
    /// The same call with its types erased, replies decoded by `reply`.
    pub fn erased(&self, reply: &'a dyn ReplyDecoder) -> ErasedCall<'a> {
        ErasedCall {
            prompt: self.prompt,
            vars: self.vars,
            identity: self.identity,
            scope: self.scope,
            reply,
        }
    }
}

/// A validated reply and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct StructuredOutcome<T> {
    /// The reply.
    pub value: T,
    /// Tokens spent by this call (zero when it was answered from a cache).
    pub usage: TokenUsage,
    /// Answered from the in-memory or durable cache, or by an identical in-flight call.
    pub cached: bool,
    /// Version of the prompt that produced the reply.
    pub prompt_version: String,
    /// How the structured reply was requested from the server (`json_schema`, `json_object`,
    /// `plain_text`); `None` when the reply came from a cache or a judge without a wire.
    pub response_mode: Option<&'static str>,
}

/// A typed reply behind `Any` (what a [`ReplyDecoder`] produced), shared by cache entries.
pub type AnyReply = Arc<dyn Any + Send + Sync>;

/// The reply type of a call, type-erased: its schema, and how a JSON value becomes the typed
/// reply (serde, the type's own checks, and the caller's extra check).
pub trait ReplyDecoder: Sync {
    /// The schema the reply must follow.
    fn schema(&self) -> &'static ReplySchema;

    /// Validate `value` into the typed reply; also returns its canonical JSON (what caches
    /// store). The error message is shown to the model in the repair turn.
    fn decode(&self, value: Value) -> Result<(AnyReply, Value), ReplyError>;
}

/// A [`StructuredCall`] with its variables and reply type erased (what a [`StructuredJudge`]
/// receives).
pub struct ErasedCall<'a> {
    /// Prompt template name.
    pub prompt: &'a str,
    /// Template variables (rendered only on a cache miss).
    pub vars: &'a (dyn erased_serde::Serialize + Sync),
    /// Cache identity (hashed into the key).
    pub identity: &'a (dyn erased_serde::Serialize + Sync),
    /// Extra cache scope.
    pub scope: &'a str,
    /// The reply type.
    pub reply: &'a dyn ReplyDecoder,
}

/// What a [`StructuredJudge`] answers: the typed reply behind `Any`, and what it cost.
pub type ErasedOutcome = StructuredOutcome<AnyReply>;

/// Anything that answers structured calls: the daemon's LLM client, or a scripted judge in
/// tests. Implementations cache, limit and retry as they see fit; callers use
/// [`call_structured`].
#[async_trait]
pub trait StructuredJudge: Send + Sync {
    /// `llm:<model>` (recorded on rows and in summaries).
    fn kind(&self) -> String;

    /// Answer one call.
    async fn call(&self, call: ErasedCall<'_>) -> Result<ErasedOutcome, JudgeError>;

    /// Version (hash) of prompt `name`, if the judge knows it.
    fn prompt_version(&self, name: &str) -> Option<String>;

    /// Running totals (calls, cache hits, tokens, retries, failures).
    fn totals(&self) -> JudgeTotals {
        JudgeTotals::default()
    }

    /// Finish background work (queued durable-cache writes) before the process exits. Never
    /// fails: a judge logs what it could not finish.
    async fn flush(&self) {}
}

/// [`ReplyDecoder`] for a concrete reply type `T` plus a caller's extra check.
pub struct TypedDecoder<'c, T> {
    check: &'c ReplyCheckFn<'c, T>,
    schema: Option<&'static ReplySchema>,
}

impl<'c, T> TypedDecoder<'c, T> {
    /// A decoder that also applies `check`, asking for `schema` (a narrowing of `T`'s own; `None`:
    /// `T::schema()`).
    pub fn new(
        check: &'c ReplyCheckFn<'c, T>,
        schema: Option<&'static ReplySchema>,
    ) -> TypedDecoder<'c, T> {
        TypedDecoder { check, schema }
    }
}

impl<T: StructuredReply> ReplyDecoder for TypedDecoder<'_, T> {
    fn schema(&self) -> &'static ReplySchema {
        self.schema.unwrap_or_else(T::schema)
    }

    fn decode(&self, value: Value) -> Result<(AnyReply, Value), ReplyError> {
        let (typed, canonical) = validate_value::<T>(value)?;
        (self.check)(&typed)?;
        Ok((Arc::new(typed), canonical))
    }
}

/// Ask `judge` for a reply of type `T` that passes `T::validate` and `check`.
pub async fn call_structured<T, V, K>(
    judge: &dyn StructuredJudge,
    call: StructuredCall<'_, V, K>,
    check: &ReplyCheckFn<'_, T>,
) -> Result<StructuredOutcome<T>, JudgeError>
where
    T: StructuredReply,
    V: Serialize + Sync,
    K: Serialize + Sync,
{
    let decoder = TypedDecoder::new(check, call.schema);
    let outcome = judge.call(call.erased(&decoder)).await?;
    // The decoder made the value, and caches key entries by the reply schema, so a reply of
    // another type here is a judge bug, reported as an invalid reply (never a panic).
    let value = outcome.value.downcast_ref::<T>().cloned().ok_or_else(|| {
        JudgeError::InvalidReply(format!(
            "judge answered prompt {:?} with another reply type",
            call.prompt
        ))
    })?;
    Ok(StructuredOutcome {
        value,
        usage: outcome.usage,
        cached: outcome.cached,
        prompt_version: outcome.prompt_version,
        response_mode: outcome.response_mode,
    })
}

/// At most `max` characters of `text`, with an ellipsis when cut.
pub fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// A JSON schema offered to the endpoint (`response_format` json_schema) and to the prompt.
///
/// Schemas are static per reply type, so both of their texts are rendered once here rather than
/// on every call.
#[derive(Debug, Clone)]
pub struct ReplySchema {
    /// Schema name (`^[a-zA-Z0-9_-]+$`, as OpenAI requires).
    pub name: String,
    /// The JSON schema (strict-mode compatible: every property required, no extra properties).
    pub schema: Value,
    /// Short content hash of the schema; part of every cache key.
    pub hash: String,
    /// The schema as compact JSON, as the request body carries it.
    pub compact: Box<serde_json::value::RawValue>,
    /// The schema with every free string and list bounded ([`GRAMMAR_MAX_STRING`],
    /// [`GRAMMAR_MAX_ITEMS`]), as compact JSON: what `response_format: json_object` carries to
    /// servers that compile the schema into a decoding grammar (llama.cpp, vLLM). A small model
    /// held to the plain schema can fill one string until `max_tokens` cuts it off; OpenAI's
    /// strict mode rejects `maxLength`, so the `json_schema` request keeps [`Self::compact`].
    pub bounded: Box<serde_json::value::RawValue>,
    /// The schema as pretty-printed JSON, as prompts show it.
    pub pretty: String,
    /// Completion tokens a reply of this schema needs at most, with room for a model that
    /// writes its free strings long (default [`DEFAULT_REPLY_MAX_TOKENS`]); a call asks for
    /// the smaller of this and the judge's `max_tokens` setting.
    pub max_tokens: u32,
}

/// [`ReplySchema::max_tokens`] unless a schema sets its own: the largest replies (STEF's
/// assessment, Hybrid-EX's alignment: several lists and a rationale).
pub const DEFAULT_REPLY_MAX_TOKENS: u32 = 2048;

impl ReplySchema {
    /// A schema with its hash and texts computed.
    pub fn new(name: &str, schema: Value) -> ReplySchema {
        let text = schema.to_string();
        let hash = hex::encode(Sha256::digest(text.as_bytes()));
        let pretty = serde_json::to_string_pretty(&schema).unwrap_or_else(|_| text.clone());
        // `text` is JSON that `Value` itself produced, so it is valid raw JSON.
        let compact = serde_json::value::RawValue::from_string(text)
            .unwrap_or_else(|_| serde_json::value::to_raw_value(&schema).unwrap_or_default());
        let mut bounded_schema = schema.clone();
        bound_lengths(&mut bounded_schema);
        let bounded =
            serde_json::value::to_raw_value(&bounded_schema).unwrap_or_else(|_| compact.clone());
        ReplySchema {
            name: name.to_string(),
            schema,
            hash: hash.get(..16).unwrap_or(&hash).to_string(),
            compact,
            bounded,
            pretty,
            max_tokens: DEFAULT_REPLY_MAX_TOKENS,
        }
    }

    /// The same schema with its own completion-token cap (a reply that is one verdict and a
    /// paragraph needs far fewer than [`DEFAULT_REPLY_MAX_TOKENS`]).
    pub fn with_max_tokens(mut self, max_tokens: u32) -> ReplySchema {
        self.max_tokens = max_tokens;
        self
    }
}

/// Longest free string (no `enum`, `pattern` or own `maxLength`) in [`ReplySchema::bounded`], in
/// characters: a rationale of a few sentences. Below every reply type's own length check.
pub const GRAMMAR_MAX_STRING: u64 = 400;

/// Most entries of a list without its own `maxItems` in [`ReplySchema::bounded`].
pub const GRAMMAR_MAX_ITEMS: u64 = 12;

/// Add `maxLength` to every free string and `maxItems` to every list of a schema, recursively
/// (properties, items, additionalProperties, anyOf/oneOf branches).
fn bound_lengths(schema: &mut Value) {
    let Value::Object(node) = schema else {
        return;
    };
    let types: Vec<&str> = match node.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let is_string = types.contains(&"string");
    let is_array = types.contains(&"array");
    if is_string
        && !["enum", "pattern", "maxLength", "const"]
            .iter()
            .any(|k| node.contains_key(*k))
    {
        node.insert("maxLength".into(), GRAMMAR_MAX_STRING.into());
    }
    if is_array && !node.contains_key("maxItems") {
        node.insert("maxItems".into(), GRAMMAR_MAX_ITEMS.into());
    }
    if let Some(Value::Object(properties)) = node.get_mut("properties") {
        properties.values_mut().for_each(bound_lengths);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = node.get_mut(key) {
            bound_lengths(child);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = node.get_mut(key) {
            branches.iter_mut().for_each(bound_lengths);
        }
    }
}

/// A reply type the structured-call layer can request: serde with strict types, a schema, and
/// range checks that serde cannot express.
pub trait StructuredReply: DeserializeOwned + Serialize + Clone + Send + Sync + 'static {
    /// The schema the reply must follow.
    fn schema() -> &'static ReplySchema;

    /// Checks beyond types (ranges, lengths, consistency). The message is shown to the model in
    /// the repair retry and ends up in `details` when the repair fails too.
    fn validate(&self) -> Result<(), ReplyCheck> {
        Ok(())
    }
}

/// Parse and validate a model's text as `T`, returning the typed value and its canonical JSON.
pub fn parse_reply<T: StructuredReply>(text: &str) -> Result<(T, Value), ReplyError> {
    let value = json_in_text(text)?;
    validate_value::<T>(value)
}

/// Validate an already-parsed JSON value as `T` (used for durable-cache entries too).
pub fn validate_value<T: StructuredReply>(value: Value) -> Result<(T, Value), ReplyError> {
    let typed: T = serde_json::from_value(value).map_err(|e| ReplyError::Schema(Arc::new(e)))?;
    typed.validate()?;
    let canonical = serde_json::to_value(&typed).map_err(|e| ReplyError::Reencode(Arc::new(e)))?;
    Ok((typed, canonical))
}

/// The JSON object a text holds: the whole text if it is one, else the first `{…}` in it that
/// parses as a JSON object. A reply cut short of its closing braces — as the released FLEX
/// false-negative template invites (it ends without `}` or a closing fence) — is read from its
/// first `{` to the end (less a trailing code fence) with at most [`MAX_MISSING_BRACES`] `}`
/// appended, before any object nested inside it is considered.
pub fn json_in_text(text: &str) -> Result<Value, ReplyError> {
    let trimmed = text.trim();
    match serde_json::from_str::<Value>(trimmed) {
        Ok(v @ Value::Object(_)) => return Ok(v),
        Ok(other) => {
            return Err(ReplyError::NotAnObject(kind_of(&other)));
        }
        Err(_) => {}
    }
    for (i, (start, _)) in trimmed.match_indices('{').enumerate() {
        let Some(rest) = trimmed.get(start..) else {
            continue;
        };
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        if let Some(Ok(v @ Value::Object(_))) = stream.next() {
            return Ok(v);
        }
        // The outermost object cut short: complete it before settling for an inner object.
        if i == 0
            && let Some(v) = unterminated_object(rest)
        {
            return Ok(v);
        }
    }
    Err(ReplyError::NoObject(truncate_chars(trimmed, 80)))
}

/// Closing braces [`json_in_text`] may add to an object that the reply left open.
pub const MAX_MISSING_BRACES: usize = 2;

/// `text` (which starts with `{`) to its end, less a trailing code fence, completed with up to
/// [`MAX_MISSING_BRACES`] closing braces; `None` when no completion parses as an object.
fn unterminated_object(text: &str) -> Option<Value> {
    let mut rest = text.trim_end();
    if let Some(stripped) = rest.strip_suffix("```") {
        rest = stripped.trim_end();
    }
    let mut candidate = rest.to_string();
    for _ in 0..MAX_MISSING_BRACES {
        candidate.push('}');
        if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(&candidate) {
            return Some(v);
        }
    }
    None
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_json_in_text() {
        assert_eq!(json_in_text(r#" {"a":1} "#).unwrap()["a"], 1);
        let fenced = "Here you go:\n```json\n{\"a\": {\"b\": \"}\"}}\n```\nThanks";
        assert_eq!(json_in_text(fenced).unwrap()["a"]["b"], "}");
        // A broken brace before the real object is skipped.
        assert_eq!(json_in_text("{oops {\"a\":2}").unwrap()["a"], 2);
        assert!(
            json_in_text("[1,2]")
                .unwrap_err()
                .to_string()
                .contains("not an object")
        );
        assert!(
            json_in_text("no json here")
                .unwrap_err()
                .to_string()
                .contains("no JSON")
        );
        assert!(json_in_text("").is_err());
    }

    #[test]
    fn accepts_an_object_missing_its_closing_braces() {
        // The released FLEX FN template ends without `}` and without a closing fence.
        let cut = "```json\n{\"a\": {\"issued\": true, \"explanation\": \"x\"}\n";
        assert_eq!(json_in_text(cut).unwrap()["a"]["issued"], true);
        let two = "{\"a\": {\"issued\": false, \"explanation\": \"\"";
        assert_eq!(json_in_text(two).unwrap()["a"]["issued"], false);
        let fenced = "{\"a\": 1\n```";
        assert_eq!(json_in_text(fenced).unwrap()["a"], 1);
        // More than MAX_MISSING_BRACES missing, or a cut inside a string: still no object.
        assert!(json_in_text("{\"a\": {\"b\": {\"c\": 1").is_err());
        assert!(json_in_text("{\"a\": \"unterminated").is_err());
    }

    #[test]
    fn the_bounded_schema_limits_free_strings_and_lists_only() {
        let schema = ReplySchema::new(
            "t",
            serde_json::json!({"type": "object", "properties": {
                "why": {"type": "string"},
                "maybe": {"type": ["string", "null"]},
                "verdict": {"type": "string", "enum": ["a", "b"]},
                "short": {"type": "string", "maxLength": 5},
                "names": {"type": "array", "items": {"type": "string"}},
                "map": {"type": "object", "additionalProperties": {"type": "string"}},
                "n": {"type": "number"}
            }}),
        );
        let bounded: Value = serde_json::from_str(schema.bounded.get()).unwrap();
        let p = &bounded["properties"];
        assert_eq!(p["why"]["maxLength"], GRAMMAR_MAX_STRING);
        assert_eq!(p["maybe"]["maxLength"], GRAMMAR_MAX_STRING);
        assert!(p["verdict"].get("maxLength").is_none());
        assert_eq!(p["short"]["maxLength"], 5);
        assert_eq!(p["names"]["maxItems"], GRAMMAR_MAX_ITEMS);
        assert_eq!(p["names"]["items"]["maxLength"], GRAMMAR_MAX_STRING);
        assert_eq!(
            p["map"]["additionalProperties"]["maxLength"],
            GRAMMAR_MAX_STRING
        );
        assert!(p["n"].get("maxLength").is_none());
        // The strict schema, its hash and the prompt's text are unchanged.
        assert!(!schema.compact.get().contains("maxLength\":400"));
        assert!(!schema.pretty.contains(&GRAMMAR_MAX_STRING.to_string()));
    }
}
