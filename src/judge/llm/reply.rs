//! Turning a model's text into a validated, typed reply.
//!
//! Every reply goes through [`parse_reply`]: strict JSON first, then the first JSON object found
//! in the text (code fences, prose around it), then serde with strict types
//! (`deny_unknown_fields` on the reply types), then the type's own range checks.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// A JSON schema offered to the endpoint (`response_format` json_schema) and to the prompt.
#[derive(Debug, Clone)]
pub struct ReplySchema {
    /// Schema name (`^[a-zA-Z0-9_-]+$`, as OpenAI requires).
    pub name: String,
    /// The JSON schema (strict-mode compatible: every property required, no extra properties).
    pub schema: Value,
    /// Short content hash of the schema; part of every cache key.
    pub hash: String,
}

impl ReplySchema {
    /// A schema with its hash computed.
    pub fn new(name: &str, schema: Value) -> ReplySchema {
        let hash = hex::encode(Sha256::digest(schema.to_string().as_bytes()));
        ReplySchema {
            name: name.to_string(),
            schema,
            hash: hash.get(..16).unwrap_or(&hash).to_string(),
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
    fn validate(&self) -> Result<(), String>;
}

/// Parse and validate a model's text as `T`, returning the typed value and its canonical JSON.
pub fn parse_reply<T: StructuredReply>(text: &str) -> Result<(T, Value), String> {
    let value = json_in_text(text)?;
    validate_value::<T>(value)
}

/// Validate an already-parsed JSON value as `T` (used for durable-cache entries too).
pub fn validate_value<T: StructuredReply>(value: Value) -> Result<(T, Value), String> {
    let typed: T = serde_json::from_value(value).map_err(|e| format!("schema violation: {e}"))?;
    typed.validate()?;
    let canonical = serde_json::to_value(&typed).map_err(|e| format!("re-encoding: {e}"))?;
    Ok((typed, canonical))
}

/// The JSON object a text holds: the whole text if it is one, else the first `{…}` in it that
/// parses as a JSON object.
pub fn json_in_text(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    match serde_json::from_str::<Value>(trimmed) {
        Ok(v @ Value::Object(_)) => return Ok(v),
        Ok(other) => {
            return Err(format!(
                "reply is JSON but not an object (got {})",
                kind_of(&other)
            ));
        }
        Err(_) => {}
    }
    for (start, _) in trimmed.match_indices('{') {
        let Some(rest) = trimmed.get(start..) else {
            continue;
        };
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        if let Some(Ok(v @ Value::Object(_))) = stream.next() {
            return Ok(v);
        }
    }
    Err(format!(
        "reply contains no JSON object (starts with {:?})",
        super::wire::truncate(trimmed, 80)
    ))
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
        assert!(json_in_text("[1,2]").unwrap_err().contains("not an object"));
        assert!(
            json_in_text("no json here")
                .unwrap_err()
                .contains("no JSON")
        );
        assert!(json_in_text("").is_err());
    }
}
