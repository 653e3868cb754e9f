//! The LLM judge layer: an OpenAI-compatible client with structured output, versioned prompt
//! templates, caching (moka + a durable store), rate limits (governor + a semaphore), retries
//! and cost accounting — and the STEF judge built on it.
//!
//! Layout:
//! - [`config`]: the `[judge]` settings ([`LlmConfig`]).
//! - [`client`]: [`LlmClient::call_structured`], the generic layer every LLM metric reuses.
//! - [`wire`]: the chat-completions wire format and structured-output modes.
//! - [`reply`]: JSON extraction, strict typed validation ([`StructuredReply`]).
//! - [`prompt`]: minijinja templates under `prompts/` and their versions.
//! - [`cache`]: cache keys, the in-memory cache, the [`DurableCache`] seam.
//! - [`limits`]: requests/s, tokens/min and concurrency admission.
//! - [`stats`]: running totals.
//! - [`stef`]: the STEF judge ([`LlmJudge`]).

pub mod cache;
pub mod client;
pub mod config;
pub mod limits;
pub mod prompt;
pub mod reply;
pub mod stats;
pub mod stef;
pub mod wire;

pub use cache::{DurableCache, DurableCacheError, DurableEntry, NoDurableCache};
pub use client::{LlmClient, LlmSetupError, StructuredCall, StructuredOutcome};
pub use config::LlmConfig;
pub use reply::{ReplySchema, StructuredReply};
pub use stef::{LlmJudge, STEF_PROMPT, StefReply};
pub use wire::ResponseMode;
