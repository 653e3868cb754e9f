//! The LLM judge layer: an OpenAI-compatible client with structured output, versioned prompt
//! templates, caching (moka + a durable store), rate limits (governor + a semaphore), retries
//! and cost accounting — and the STEF judge built on it. Configured by a `[judge]` section
//! ([`crate::llm::config::LlmJudgeConfig`]).
//!
//! Layout:
//! - [`client`]: [`LlmClient`], the core's [`StructuredJudge`](crate::judge::StructuredJudge)
//!   over HTTP, shared by every LLM metric.
//! - [`wire`]: the chat-completions wire format and structured-output modes.
//! - reply parsing and validation ([`StructuredReply`]) are pure and live in the core
//!   (`crate::judge::structured`).
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
pub mod stats;
pub mod stef;
pub mod wire;

pub use crate::judge::structured::{
    ReplySchema, StructuredCall, StructuredOutcome, StructuredReply,
};
pub use cache::{DurableCache, DurableCacheError, DurableEntry, NoDurableCache};
pub use client::{LlmClient, LlmSetupError};
pub use stef::{LlmJudge, STEF_PROMPT, StefReply};
pub use wire::ResponseMode;
