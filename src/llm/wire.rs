//! The OpenAI chat-completions wire format: request and reply bodies, structured-output modes,
//! endpoint URLs and `Retry-After` parsing.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::judge::structured::{ReplyError, ReplySchema};

/// How structured output is requested. Servers differ (OpenAI, vLLM, Ollama, gateways), so the
/// client starts with the strictest mode and steps down when a server rejects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseMode {
    /// `response_format: {type: json_schema, json_schema: {name, schema, strict: true}}`.
    JsonSchema,
    /// `response_format: {type: json_object, schema}` (the bounded schema, which grammar-based
    /// servers enforce); the schema is also in the prompt.
    JsonObject,
    /// No `response_format`; the first JSON object is extracted from the text.
    PlainText,
}

impl ResponseMode {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ResponseMode::JsonSchema => "json_schema",
            ResponseMode::JsonObject => "json_object",
            ResponseMode::PlainText => "plain_text",
        }
    }

    /// The next, less demanding mode.
    pub fn fallback(self) -> Option<ResponseMode> {
        match self {
            ResponseMode::JsonSchema => Some(ResponseMode::JsonObject),
            ResponseMode::JsonObject => Some(ResponseMode::PlainText),
            ResponseMode::PlainText => None,
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            ResponseMode::JsonSchema => 0,
            ResponseMode::JsonObject => 1,
            ResponseMode::PlainText => 2,
        }
    }

    fn from_u8(v: u8) -> ResponseMode {
        match v {
            0 => ResponseMode::JsonSchema,
            1 => ResponseMode::JsonObject,
            _ => ResponseMode::PlainText,
        }
    }
}

/// The mode that works for one endpoint, remembered across calls; it only ever steps down.
#[derive(Debug)]
pub struct ModeMemory(AtomicU8);

impl ModeMemory {
    /// Start with `mode`.
    pub fn new(mode: ResponseMode) -> ModeMemory {
        ModeMemory(AtomicU8::new(mode.to_u8()))
    }

    /// The mode to use now.
    pub fn current(&self) -> ResponseMode {
        ResponseMode::from_u8(self.0.load(Ordering::Relaxed))
    }

    /// Step down from `rejected` (if no other caller already did). Returns the mode to use next
    /// and whether this call moved it (so the change is logged once), or `None` when `rejected`
    /// was already the last mode.
    pub fn step_down(&self, rejected: ResponseMode) -> Option<(ResponseMode, bool)> {
        let next = rejected.fallback()?;
        let before = self.0.fetch_max(next.to_u8(), Ordering::Relaxed);
        Some((self.current(), before < next.to_u8()))
    }
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// Text content.
    pub content: String,
}

impl ChatMessage {
    /// A message with the given role.
    pub fn new(role: &str, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.to_string(),
            content: content.into(),
        }
    }
}

/// Body of `POST /v1/chat/completions`.
#[derive(Debug, Clone, Serialize)]
pub struct ChatRequest<'a> {
    /// Model name.
    pub model: &'a str,
    /// Conversation.
    pub messages: &'a [ChatMessage],
    /// Always 0: the judge must be reproducible.
    pub temperature: f64,
    /// Completion token cap, as `max_tokens` (most servers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Completion token cap, as `max_completion_tokens` (OpenAI's reasoning models, which reject
    /// `max_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    /// Structured-output request, by mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat<'a>>,
}

/// The `response_format` member: `{"type": "json_schema", "json_schema": {name, schema,
/// strict: true}}` or `{"type": "json_object"}`. It borrows the schema's pre-rendered JSON, so
/// a request copies it instead of building and dropping a tree per call.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat<'a> {
    /// Strict JSON-schema output.
    JsonSchema {
        /// The named schema.
        json_schema: NamedSchema<'a>,
    },
    /// A JSON object; the schema rides along with its strings and lists bounded
    /// ([`ReplySchema::bounded`]): llama.cpp's and vLLM's servers turn it into a grammar; servers
    /// that ignore the member still get the schema in the prompt.
    JsonObject {
        /// The schema, as JSON text.
        schema: &'a RawValue,
    },
}

/// `response_format.json_schema`.
#[derive(Debug, Clone, Serialize)]
pub struct NamedSchema<'a> {
    /// Schema name.
    pub name: &'a str,
    /// The schema, as JSON text.
    pub schema: &'a RawValue,
    /// Always true: the reply must follow the schema exactly.
    pub strict: bool,
}

/// Build the `response_format` member for a mode.
pub fn response_format(mode: ResponseMode, schema: &ReplySchema) -> Option<ResponseFormat<'_>> {
    match mode {
        ResponseMode::JsonSchema => Some(ResponseFormat::JsonSchema {
            json_schema: NamedSchema {
                name: &schema.name,
                schema: &schema.compact,
                strict: true,
            },
        }),
        ResponseMode::JsonObject => Some(ResponseFormat::JsonObject {
            schema: &schema.bounded,
        }),
        ResponseMode::PlainText => None,
    }
}

/// Token usage as reported by the server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct WireUsage {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Completion tokens (reasoning tokens included, where the server counts them).
    #[serde(default)]
    pub completion_tokens: u64,
    /// OpenAI's breakdown of the completion tokens.
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

impl WireUsage {
    /// Reasoning tokens, where the server reports them.
    pub fn reasoning_tokens(&self) -> u64 {
        self.completion_tokens_details
            .as_ref()
            .map_or(0, |d| d.reasoning_tokens)
    }
}

/// `usage.completion_tokens_details`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct CompletionTokensDetails {
    /// Tokens the model spent reasoning before it answered.
    #[serde(default)]
    pub reasoning_tokens: u64,
}

/// The parts of a chat-completions reply the judge uses.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatReply {
    /// Choices; the first one is used.
    #[serde(default)]
    pub choices: Vec<ChatChoice>,
    /// Usage, when the server reports it.
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// The model that answered, as the server names it (may differ from the requested name:
    /// a dated snapshot, the GGUF file llama.cpp loaded, another model behind an alias).
    #[serde(default)]
    pub model: Option<String>,
}

/// One choice of a reply.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatChoice {
    /// The assistant message.
    pub message: ReplyMessage,
    /// `stop`, `length`, `content_filter`, …
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// The assistant message of a choice.
#[derive(Debug, Clone, Deserialize)]
pub struct ReplyMessage {
    /// Text content (null when the model refused).
    #[serde(default)]
    pub content: Option<String>,
    /// Refusal text (OpenAI structured outputs).
    #[serde(default)]
    pub refusal: Option<String>,
}

impl ChatReply {
    /// Whether the server cut the reply off at the token cap (`finish_reason = "length"`).
    pub fn cut_off(&self) -> bool {
        self.choices
            .first()
            .and_then(|c| c.finish_reason.as_deref())
            == Some("length")
    }

    /// The first choice's text without reasoning (`<think>…</think>` blocks; a separate
    /// `reasoning_content` field is never read as the answer), or why there is none.
    pub fn content(&self) -> Result<&str, ReplyError> {
        let choice = self
            .choices
            .first()
            .ok_or_else(|| ReplyError::NoText("reply has no choices".to_string()))?;
        let answer = choice.message.content.as_deref().map(strip_reasoning);
        match (answer, &choice.message.refusal) {
            (Some(text), _) if !text.trim().is_empty() => Ok(text),
            (_, Some(refusal)) => Err(ReplyError::NoText(format!(
                "model refused: {}",
                truncate(refusal, 300)
            ))),
            _ => Err(ReplyError::NoText(format!(
                "reply has no message content (finish_reason: {})",
                choice.finish_reason.as_deref().unwrap_or("none")
            ))),
        }
    }
}

/// `text` after its reasoning: what follows the last `</think>` (DeepSeek-R1, Qwen3 and other
/// reasoning models put their thinking first, in the content). A `<think>` that never closes —
/// the reply was cut off while thinking — leaves no answer. Text without the tags is returned
/// as it is.
pub fn strip_reasoning(text: &str) -> &str {
    const OPEN: &str = "<think>";
    const CLOSE: &str = "</think>";
    if let Some(end) = text.rfind(CLOSE) {
        return &text[end + CLOSE.len()..];
    }
    match text.find(OPEN) {
        Some(start) => &text[..start],
        None => text,
    }
}

/// Why `judge.base_url` cannot be the chat-completions endpoint (the URL shown redacted).
#[derive(Debug, thiserror::Error)]
pub enum BaseUrlError {
    /// Not a URL at all.
    #[error("judge.base_url {url:?} is not a URL: {source}")]
    NotAUrl {
        /// The setting, credentials redacted.
        url: String,
        /// The URL parser's reason.
        #[source]
        source: url::ParseError,
    },
    /// A URL of another scheme than http or https.
    #[error("judge.base_url {0:?} must be http or https")]
    Scheme(String),
}

/// The chat-completions URL for a configured base URL (`judge.base_url`).
pub fn endpoint_url(base_url: &str) -> Result<reqwest::Url, BaseUrlError> {
    let mut url = reqwest::Url::parse(base_url.trim()).map_err(|source| BaseUrlError::NotAUrl {
        url: crate::settings::redact_url(base_url),
        source,
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(BaseUrlError::Scheme(crate::settings::redact_url(base_url)));
    }
    let path = url.path().trim_end_matches('/').to_string();
    let full = if path.ends_with("/chat/completions") {
        path
    } else if path.is_empty() {
        "/v1/chat/completions".to_string()
    } else {
        format!("{path}/chat/completions")
    };
    url.set_path(&full);
    Ok(url)
}

/// Parse `retry-after-ms` (milliseconds) or `Retry-After` (seconds or an HTTP date).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let text = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = text.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = chrono::DateTime::parse_from_rfc2822(text).ok()?;
    let wait = when.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

pub use crate::judge::structured::truncate_chars as truncate;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_urls() {
        let u = |s: &str| endpoint_url(s).unwrap().to_string();
        assert_eq!(
            u("https://api.openai.com/v1"),
            "https://api.openai.com/v1/chat/completions"
        );
        assert_eq!(
            u("http://127.0.0.1:8000/"),
            "http://127.0.0.1:8000/v1/chat/completions"
        );
        assert_eq!(
            u("http://h/v1/chat/completions"),
            "http://h/v1/chat/completions"
        );
        assert_eq!(u("http://h/api/v1/"), "http://h/api/v1/chat/completions");
        assert!(endpoint_url("ftp://h").is_err());
        assert!(endpoint_url("not a url").is_err());
    }

    #[test]
    fn retry_after_forms() {
        let mut h = reqwest::header::HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after", "0.25".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        h.insert("retry-after", "soon".parse().unwrap());
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after-ms", "1500".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn modes_step_down_monotonically() {
        let m = ModeMemory::new(ResponseMode::JsonSchema);
        assert_eq!(
            m.step_down(ResponseMode::JsonSchema),
            Some((ResponseMode::JsonObject, true))
        );
        // A late caller that still saw json_schema does not move it back up, nor log it again.
        assert_eq!(
            m.step_down(ResponseMode::JsonSchema),
            Some((ResponseMode::JsonObject, false))
        );
        assert_eq!(
            m.step_down(ResponseMode::JsonObject),
            Some((ResponseMode::PlainText, true))
        );
        assert_eq!(m.step_down(ResponseMode::PlainText), None);
        assert_eq!(m.current(), ResponseMode::PlainText);
    }

    #[test]
    fn reasoning_is_stripped() {
        assert_eq!(strip_reasoning("{\"a\":1}"), "{\"a\":1}");
        assert_eq!(
            strip_reasoning("<think>maybe {\"a\":2}</think>\n{\"a\":1}"),
            "\n{\"a\":1}"
        );
        // Several blocks: the answer follows the last.
        assert_eq!(strip_reasoning("<think>a</think>x<think>b</think>y"), "y");
        // Cut off while thinking: no answer at all.
        assert_eq!(strip_reasoning("<think>still {\"a\":1} thinking"), "");
        let r: ChatReply = serde_json::from_str(
            r#"{"choices":[{"message":{"content":"<think>long</think>","reasoning_content":"x"},"finish_reason":"length"}]}"#,
        )
        .unwrap();
        assert!(r.cut_off());
        assert!(
            r.content()
                .unwrap_err()
                .to_string()
                .contains("finish_reason: length")
        );
    }

    #[test]
    fn reply_content_reasons() {
        let r: ChatReply = serde_json::from_str(r#"{"choices":[]}"#).unwrap();
        assert!(r.content().unwrap_err().to_string().contains("no choices"));
        let r: ChatReply = serde_json::from_str(
            r#"{"choices":[{"message":{"content":null,"refusal":"no"},"finish_reason":"stop"}]}"#,
        )
        .unwrap();
        assert!(r.content().unwrap_err().to_string().contains("refused"));
        let r: ChatReply = serde_json::from_str(
            r#"{"choices":[{"message":{"content":"{}"}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#,
        )
        .unwrap();
        assert_eq!(r.content().unwrap(), "{}");
        assert_eq!(r.usage.unwrap().prompt_tokens, 3);
        assert_eq!(truncate("héllo", 2), "hé…");
    }
}
