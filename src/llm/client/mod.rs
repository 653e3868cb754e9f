//! The structured-call layer over HTTP: one [`LlmClient`] per endpoint, shared by every LLM
//! metric (the STEF judge, FLEX, ROSE, Hybrid-EX), implementing the core's
//! [`StructuredJudge`] seam.
//!
//! A call renders a prompt, asks for a reply that follows a JSON schema, validates it into the
//! caller's type (through the call's [`ReplyDecoder`]), and shares one in-memory cache (with
//! coalescing of identical in-flight calls), one durable cache, one set of rate limits and one
//! retry policy across all callers.
//!
//! A caller that first asks only the caches ([`LlmClient::lookup_structured`], the judge stage
//! before it spends budget) and then calls on a miss does not pay a second durable lookup: a key
//! the durable store just answered "absent" for is remembered for [`DURABLE_MISS_TTL`], and the
//! next fill of that key goes straight to the LLM (its reply is then stored as usual).
//!
//! A caller about to judge several events can also ask the durable store for all their keys in
//! one request first ([`LlmClient::prefetch_durable`], the judge stage before each batch of
//! work): what it finds is held for the lookups that follow, and what it lacks is remembered as
//! a miss the same way, so those lookups send no query of their own.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use rand::Rng;
use serde::Serialize;
use serde_json::Value;
use tracing::{debug, info, warn};

use super::cache::{
    CachedReply, DurableCache, DurableEntry, KeyParts, MemoryCache, NoDurableCache, ReplyOrigin,
    cache_key, memory_cache,
};
use super::limits::{Limits, estimate_tokens};
use super::prompt::{PromptError, PromptLibrary, RenderedPrompt};
use super::stats::{CallStats, Counter};
use super::wire::{
    BaseUrlError, ChatMessage, ChatReply, ChatRequest, ModeMemory, ResponseMode, endpoint_url,
    response_format, retry_after, truncate,
};
use crate::judge::structured::{
    ErasedCall, ErasedOutcome, ReplyCheckFn, ReplyDecoder, ReplyError, ReplySchema, StructuredCall,
    StructuredOutcome, StructuredReply, json_in_text,
};
use crate::judge::{JudgeError, JudgeTotals, StructuredJudge, TokenUsage};
use crate::llm::config::{LlmJudgeConfig, ResponseModeSetting, SystemPromptSetting};
use crate::settings::Secret;

/// How long a durable-cache miss seen by a cache-only lookup stands in for the next lookup of
/// the same key (module documentation).
pub const DURABLE_MISS_TTL: Duration = Duration::from_secs(30);

/// Keys remembered as durable misses (and entries held from a prefetch), at most.
const DURABLE_MISS_CAPACITY: u64 = 10_000;

/// A map of what the durable store just said about a key, kept for [`DURABLE_MISS_TTL`].
fn durable_memo<V: Clone + Send + Sync + 'static>() -> moka::future::Cache<String, V> {
    moka::future::Cache::builder()
        .max_capacity(DURABLE_MISS_CAPACITY)
        .time_to_live(DURABLE_MISS_TTL)
        .build()
}

/// Longest error-body excerpt kept in a [`JudgeError`].
const ERROR_BODY_CHARS: usize = 500;

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LlmSetupError {
    /// Settings are invalid (the config check's problems, joined).
    #[error("invalid judge config: {0}")]
    Config(String),
    /// `judge.base_url` is not an http(s) URL.
    #[error("invalid judge config: {0}")]
    BaseUrl(#[from] BaseUrlError),
    /// `api_key_env` names a variable that is not set.
    #[error("judge.api_key_env names {0:?}, but that environment variable is not set")]
    MissingApiKey(String),
    /// Prompt templates could not be loaded.
    #[error(transparent)]
    Prompt(#[from] PromptError),
    /// The HTTP client could not be built (TLS back end, proxy settings).
    #[error("cannot build the judge HTTP client: {0}")]
    Http(#[source] reqwest::Error),
}

/// A completed chat call: the text (or why there is none) and the tokens it used.
struct Completion {
    content: Result<String, ReplyError>,
    usage: TokenUsage,
    /// The server stopped at the token cap (`finish_reason = "length"`).
    cut_off: bool,
    /// How structured output was requested.
    mode: ResponseMode,
}

/// How one HTTP attempt failed.
enum AttemptError {
    /// Worth retrying after a backoff (429, 5xx, timeout, connection error).
    Transient {
        error: JudgeError,
        retry_after: Option<Duration>,
    },
    /// The server rejected the structured-output request; step down the response mode.
    FormatRejected(JudgeError),
    /// The server rejected `max_tokens` and wants `max_completion_tokens`.
    TokenFieldRejected(JudgeError),
    /// Retrying cannot help (401, 403, 404, other 4xx).
    Fatal(JudgeError),
}

/// Client for one OpenAI-compatible chat-completions endpoint.
#[derive(Debug)]
pub struct LlmClient {
    config: LlmJudgeConfig,
    url: reqwest::Url,
    http: reqwest::Client,
    api_key: Option<Secret>,
    prompts: PromptLibrary,
    limits: Limits,
    memory: Option<MemoryCache>,
    durable: Arc<dyn DurableCache>,
    /// Keys the durable cache just said it lacks (module documentation).
    durable_misses: moka::future::Cache<String, ()>,
    /// Entries a prefetch just found, held for the lookup that follows (module documentation).
    durable_found: moka::future::Cache<String, DurableEntry>,
    mode: ModeMemory,
    /// A mode set in `judge.response_mode` is never stepped down from.
    mode_pinned: bool,
    /// Send the token cap as `max_completion_tokens` (the endpoint rejected `max_tokens`).
    completion_tokens_field: std::sync::atomic::AtomicBool,
    /// The model id the server reported on its latest reply (part of the judge's identity).
    served_model: std::sync::RwLock<Option<String>>,
    stats: CallStats,
}

/// Longest served model id kept (a server's reply is input like any other).
const MAX_SERVED_MODEL_CHARS: usize = 200;

impl std::fmt::Debug for dyn DurableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DurableCache")
    }
}

impl LlmClient {
    /// Build a client for `[judge]`-style settings: validates them, takes the API key (an inline
    /// `api_key` wins over the variable `api_key_env` names; neither: no `Authorization` header),
    /// loads the prompts (built-in, or overridden from `prompts_dir`). No durable cache.
    pub fn new(config: &LlmJudgeConfig) -> Result<LlmClient, LlmSetupError> {
        let api_key = match config
            .api_key
            .as_ref()
            .filter(|k| !k.expose().trim().is_empty())
        {
            Some(key) => Some(Secret::new(key.expose().trim())),
            None => match config.api_key_env.trim() {
                "" => None,
                var => match std::env::var(var) {
                    Ok(key) if !key.trim().is_empty() => Some(Secret::new(key.trim())),
                    _ => return Err(LlmSetupError::MissingApiKey(var.to_string())),
                },
            },
        };
        Self::build(config.clone(), api_key)
    }

    fn build(config: LlmJudgeConfig, api_key: Option<Secret>) -> Result<LlmClient, LlmSetupError> {
        let problems = config.problems("judge");
        if !problems.is_empty() {
            return Err(LlmSetupError::Config(problems.join("; ")));
        }
        let url = endpoint_url(&config.base_url)?;
        let prompts = match &config.prompts_dir {
            Some(dir) => PromptLibrary::with_overrides(dir)?,
            None => PromptLibrary::builtin()?,
        };
        let http = reqwest::Client::builder()
            .connect_timeout(config.timeout())
            .pool_max_idle_per_host(config.max_concurrency)
            .build()
            .map_err(LlmSetupError::Http)?;
        let memory = (config.cache_capacity > 0).then(|| {
            memory_cache(
                config.cache_capacity,
                config.cache_bytes,
                Duration::from_secs(config.cache_ttl_secs.max(1)),
            )
        });
        Ok(LlmClient {
            limits: Limits::new(&config),
            url,
            http,
            api_key,
            prompts,
            memory,
            durable: Arc::new(NoDurableCache),
            durable_misses: durable_memo(),
            durable_found: durable_memo(),
            mode: ModeMemory::new(match config.response_mode {
                ResponseModeSetting::Auto | ResponseModeSetting::JsonSchema => {
                    ResponseMode::JsonSchema
                }
                ResponseModeSetting::JsonObject => ResponseMode::JsonObject,
                ResponseModeSetting::PlainText => ResponseMode::PlainText,
            }),
            mode_pinned: config.response_mode != ResponseModeSetting::Auto,
            completion_tokens_field: std::sync::atomic::AtomicBool::new(false),
            served_model: std::sync::RwLock::new(None),
            stats: CallStats::default(),
            config,
        })
    }

    /// Use a durable cache (consulted after the in-memory cache, before the LLM).
    pub fn with_durable_cache(mut self, cache: Arc<dyn DurableCache>) -> LlmClient {
        self.durable = cache;
        self
    }

    /// Write the durable cache's queued entries (call before exiting so that the verdicts
    /// this process paid for are there for the next one).
    pub async fn flush_durable_cache(&self) -> Result<(), super::DurableCacheError> {
        self.durable.flush().await
    }

    /// The configured model.
    pub fn model(&self) -> &str {
        &self.config.model
    }

    /// The configuration in effect.
    pub fn config(&self) -> &LlmJudgeConfig {
        &self.config
    }

    /// The chat-completions URL requests go to.
    pub fn endpoint(&self) -> &reqwest::Url {
        &self.url
    }

    /// The version of prompt `name`.
    pub fn prompt_version(&self, name: &str) -> Option<&str> {
        self.prompts.version(name)
    }

    /// The structured-output mode that currently works for this endpoint.
    pub fn response_mode(&self) -> ResponseMode {
        self.mode.current()
    }

    /// The model id the server reported on its latest reply; `None` until one reported it.
    pub fn served_model(&self) -> Option<String> {
        self.served_model
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Remember the model id a reply named (clipped, control characters dropped); a change
    /// from an earlier id is logged: the judge behind the endpoint changed.
    fn note_served_model(&self, reported: &str) {
        let id: String = reported
            .chars()
            .filter(|c| !c.is_control())
            .take(MAX_SERVED_MODEL_CHARS)
            .collect();
        if id.is_empty()
            || self
                .served_model
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .as_deref()
                == Some(id.as_str())
        {
            return;
        }
        let mut served = self.served_model.write().unwrap_or_else(|p| p.into_inner());
        if let Some(before) = served.as_deref() {
            info!(
                endpoint = %self.url,
                before,
                now = id.as_str(),
                "the server reports another model: the judge identity changes"
            );
        }
        *served = Some(id);
    }

    /// Running totals (calls, cache hits, tokens, retries, failures).
    pub fn totals(&self) -> JudgeTotals {
        self.stats.snapshot()
    }

    /// Render prompt `call.prompt`, get a reply of type `T` that passes `T::validate` and
    /// `check`, through the in-memory cache, the durable cache and the LLM, in that order.
    /// Identical concurrent calls are coalesced into one LLM call.
    pub async fn call_structured<T, V, K>(
        &self,
        call: StructuredCall<'_, V, K>,
        check: &ReplyCheckFn<'_, T>,
    ) -> Result<StructuredOutcome<T>, JudgeError>
    where
        T: StructuredReply,
        V: Serialize + Sync,
        K: Serialize + Sync,
    {
        crate::judge::structured::call_structured(self, call, check).await
    }

    /// The cache key of `call` with its prompt at `prompt_version`.
    fn key_of(&self, call: &ErasedCall<'_>, prompt_version: &str) -> Option<String> {
        cache_key(&KeyParts {
            prompt: call.prompt,
            prompt_version,
            model: &self.config.model,
            scope: call.scope,
            schema_hash: &call.reply.schema().hash,
            identity: call.identity,
        })
        .ok()
    }

    /// The cache key a call of `call` with replies of type `T` is stored under (`None` when its
    /// prompt is unknown or its identity cannot be serialised).
    pub fn structured_key<T, V, K>(&self, call: StructuredCall<'_, V, K>) -> Option<String>
    where
        T: StructuredReply,
        V: Serialize + Sync,
        K: Serialize + Sync,
    {
        let accept = |_: &T| Ok(());
        let decoder = crate::judge::structured::TypedDecoder::new(&accept, call.schema);
        let call = call.erased(&decoder);
        let prompt_version = self.prompts.version(call.prompt)?.to_string();
        self.key_of(&call, &prompt_version)
    }

    /// Ask the durable cache for `keys` in one request (module documentation). Keys the
    /// in-memory cache holds are left out; a failed request changes nothing (each lookup then
    /// asks on its own, or skips during the store's outage window).
    pub async fn prefetch_durable(&self, keys: &[String]) {
        let mut wanted: Vec<&str> = Vec::with_capacity(keys.len());
        for key in keys {
            let known = self.memory.as_ref().is_some_and(|m| m.contains_key(key))
                || self.durable_misses.contains_key(key)
                || self.durable_found.contains_key(key)
                || wanted.contains(&key.as_str());
            if !known {
                wanted.push(key);
            }
        }
        if wanted.is_empty() {
            return;
        }
        let Ok(mut found) = self.durable.get_many(&wanted).await else {
            return;
        };
        for key in wanted {
            match found.remove(key) {
                Some(entry) => self.durable_found.insert(key.to_string(), entry).await,
                None => self.durable_misses.insert(key.to_string(), ()).await,
            }
        }
    }

    /// The reply of `call` if the in-memory or the durable cache holds it; `None` on a miss (no
    /// LLM call is made, nothing is spent). A hit counts as an assessment answered from a cache.
    pub async fn lookup_structured<T, V, K>(
        &self,
        call: StructuredCall<'_, V, K>,
        check: &ReplyCheckFn<'_, T>,
    ) -> Option<StructuredOutcome<T>>
    where
        T: StructuredReply,
        V: Serialize + Sync,
        K: Serialize + Sync,
    {
        let decoder = crate::judge::structured::TypedDecoder::new(check, call.schema);
        let call = call.erased(&decoder);
        let prompt_version = self.prompts.version(call.prompt)?.to_string();
        let key = self.key_of(&call, &prompt_version)?;
        let hit = match self.memory.as_ref() {
            Some(memory) => memory.get(&key).await,
            None => None,
        };
        let reply = match hit {
            Some(reply) => reply,
            None => {
                let found = match self.durable_found.remove(&key).await {
                    Some(entry) => Ok(Some(entry)),
                    // A prefetch (or an earlier lookup) just found it absent; the fill clears
                    // the mark when it asks the LLM.
                    None if self.durable_misses.contains_key(&key) => return None,
                    None => self.durable.get(&key).await,
                };
                let entry = match found {
                    Ok(Some(entry)) => entry,
                    Ok(None) => {
                        self.durable_misses.insert(key, ()).await;
                        return None;
                    }
                    // Unavailable: not a miss; the fill will ask again.
                    Err(_) => return None,
                };
                let value = serde_json::from_str::<Value>(&entry.reply).ok()?;
                let (typed, _) = call.reply.decode(value).ok()?;
                self.stats.bump(Counter::DurableHit);
                let reply = Arc::new(CachedReply {
                    typed,
                    usage: TokenUsage {
                        prompt_tokens: entry.prompt_tokens,
                        completion_tokens: entry.completion_tokens,
                    },
                    origin: ReplyOrigin::Durable,
                    mode: None,
                    bytes: entry.reply.len(),
                });
                if let Some(memory) = &self.memory {
                    memory.insert(key, Arc::clone(&reply)).await;
                }
                reply
            }
        };
        let value = reply.typed.downcast_ref::<T>().cloned()?;
        self.stats.bump(Counter::Assessment);
        self.stats.bump(Counter::CacheHit);
        Some(StructuredOutcome {
            value,
            usage: TokenUsage::default(),
            cached: true,
            prompt_version,
            response_mode: None,
        })
    }

    async fn call_erased(&self, call: ErasedCall<'_>) -> Result<ErasedOutcome, JudgeError> {
        let schema = call.reply.schema();
        let prompt_version = self
            .prompts
            .version(call.prompt)
            .ok_or_else(|| JudgeError::Prompt(format!("unknown prompt {:?}", call.prompt)))?
            .to_string();
        let key = cache_key(&KeyParts {
            prompt: call.prompt,
            prompt_version: &prompt_version,
            model: &self.config.model,
            scope: call.scope,
            schema_hash: &schema.hash,
            identity: call.identity,
        })
        .map_err(|e| JudgeError::Prompt(e.to_string()))?;
        let (reply, fresh) = match &self.memory {
            Some(memory) => match memory.get(&key).await {
                // Fast path: a plain lookup, without building the fill future.
                Some(hit) => (hit, false),
                // Miss: the entry API runs one fill per key; concurrent callers wait for it.
                None => {
                    let fill = self.fill(&key, &call, &prompt_version, schema);
                    let entry = memory
                        .entry_by_ref(&key)
                        .or_try_insert_with(fill)
                        .await
                        .map_err(|e| (*e).clone())?;
                    let fresh = entry.is_fresh();
                    (entry.into_value(), fresh)
                }
            },
            None => (self.fill(&key, &call, &prompt_version, schema).await?, true),
        };
        let cached = !fresh || reply.origin != ReplyOrigin::Llm;
        if cached {
            self.stats.bump(Counter::CacheHit);
        }
        Ok(StructuredOutcome {
            value: Arc::clone(&reply.typed),
            usage: if cached {
                TokenUsage::default()
            } else {
                reply.usage
            },
            cached,
            prompt_version,
            response_mode: if cached { None } else { reply.mode },
        })
    }

    /// Answer a cache miss: durable cache, else the LLM (then store in the durable cache).
    async fn fill(
        &self,
        key: &str,
        call: &ErasedCall<'_>,
        prompt_version: &str,
        schema: &ReplySchema,
    ) -> Result<Arc<CachedReply>, JudgeError> {
        let lookup = match self.durable_found.remove(key).await {
            Some(entry) => Ok(Some(entry)),
            None => match self.durable_misses.remove(key).await {
                Some(()) => Ok(None),
                None => self.durable.get(key).await,
            },
        };
        match lookup {
            Ok(Some(entry)) => {
                let parsed = serde_json::from_str::<Value>(&entry.reply)
                    .map_err(|e| ReplyError::Schema(Arc::new(e)))
                    .and_then(|value| call.reply.decode(value));
                match parsed {
                    Ok((typed, _)) => {
                        self.stats.bump(Counter::DurableHit);
                        return Ok(Arc::new(CachedReply {
                            typed,
                            usage: TokenUsage {
                                prompt_tokens: entry.prompt_tokens,
                                completion_tokens: entry.completion_tokens,
                            },
                            origin: ReplyOrigin::Durable,
                            mode: None,
                            bytes: entry.reply.len(),
                        }));
                    }
                    Err(e) => warn!(key, error = %e, "ignoring invalid durable judge-cache entry"),
                }
            }
            Ok(None) => {}
            Err(e) => warn!(key, error = %e, "durable judge cache unavailable; asking the LLM"),
        }
        let rendered = self
            .prompts
            .render(call.prompt, call.vars, &schema.pretty)
            .map_err(|e| JudgeError::Prompt(e.to_string()))?;
        let (typed, reply, usage, mode) = self.converse(&rendered, schema, call.reply).await?;
        let entry = DurableEntry {
            key: key.to_string(),
            prompt: call.prompt.to_string(),
            prompt_version: prompt_version.to_string(),
            model: self.config.model.clone(),
            reply: reply.to_string(),
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
        };
        if let Err(e) = self.durable.put(&entry).await {
            warn!(key, error = %e, "could not store the reply in the durable judge cache");
        }
        Ok(Arc::new(CachedReply {
            typed,
            usage,
            origin: ReplyOrigin::Llm,
            mode: Some(mode.as_str()),
            bytes: entry.reply.len(),
        }))
    }

    /// Ask the model; on a reply that fails validation, ask once more with the problem stated.
    async fn converse(
        &self,
        rendered: &RenderedPrompt,
        schema: &ReplySchema,
        reply: &dyn ReplyDecoder,
    ) -> Result<
        (
            crate::judge::structured::AnyReply,
            Value,
            TokenUsage,
            ResponseMode,
        ),
        JudgeError,
    > {
        let mut messages = match self.config.system_prompt {
            SystemPromptSetting::System => vec![
                ChatMessage::new("system", rendered.system.clone()),
                ChatMessage::new("user", rendered.user.clone()),
            ],
            SystemPromptSetting::InUser => vec![ChatMessage::new(
                "user",
                format!("{}\n\n{}", rendered.system, rendered.user),
            )],
        };
        let cap = self.config.max_tokens.min(schema.max_tokens);
        // Named only when a reply was cut off (no formatting on the usual path).
        let cap_origin = || {
            if cap == self.config.max_tokens {
                format!("judge.max_tokens = {cap}")
            } else {
                format!(
                    "max_tokens = {cap} (the {} reply's cap; judge.max_tokens = {})",
                    schema.name, self.config.max_tokens
                )
            }
        };
        let validate = |completion: &Completion| {
            let checked = completion
                .content
                .as_deref()
                .map_err(|e| e.clone())
                .and_then(|text| reply.decode(json_in_text(text)?));
            checked.map_err(|e| {
                if completion.cut_off {
                    ReplyError::CutOff {
                        cap: cap_origin(),
                        error: Box::new(e),
                    }
                } else {
                    e
                }
            })
        };
        let estimate = estimate_tokens(rendered.chars());
        let first = self.chat(&messages, schema, estimate).await?;
        let mut usage = first.usage;
        let first_error = match validate(&first) {
            Ok((typed, reply)) => return Ok((typed, reply, usage, first.mode)),
            Err(e) => e,
        };
        debug!(error = %first_error, "judge reply failed validation; sending one repair retry");
        self.stats.bump(Counter::Repair);
        let repair = self
            .prompts
            .render_repair(&first_error.to_string())
            .map_err(|e| JudgeError::Prompt(e.to_string()))?;
        messages.push(ChatMessage::new(
            "assistant",
            first.content.unwrap_or_default(),
        ));
        messages.push(ChatMessage::new("user", repair));
        let estimate = estimate_tokens(messages.iter().map(|m| m.content.len()).sum());
        let second = self.chat(&messages, schema, estimate).await?;
        usage.prompt_tokens += second.usage.prompt_tokens;
        usage.completion_tokens += second.usage.completion_tokens;
        match validate(&second) {
            Ok((typed, reply)) => Ok((typed, reply, usage, second.mode)),
            Err(second_error) => Err(JudgeError::InvalidReply(format!(
                "{second_error} (after one repair retry; the first reply failed with: {first_error})"
            ))),
        }
    }

    /// One chat call with admission control, response-mode fallback and transient retries.
    async fn chat(
        &self,
        messages: &[ChatMessage],
        schema: &ReplySchema,
        estimated_tokens: u32,
    ) -> Result<Completion, JudgeError> {
        let mut retries = 0u32;
        // One deadline for the call and its retries, from the first request on (waiting for
        // admission is not the server's time).
        let mut deadline: Option<std::time::Instant> = None;
        loop {
            let mode = self.mode.current();
            let completion_field = self.completion_tokens_field.load(Ordering::Relaxed);
            let cap = Some(self.config.max_tokens.min(schema.max_tokens));
            let request = ChatRequest {
                model: &self.config.model,
                messages,
                temperature: 0.0,
                max_tokens: if completion_field { None } else { cap },
                max_completion_tokens: if completion_field { cap } else { None },
                response_format: response_format(mode, schema),
            };
            let body = serde_json::to_vec(&request)
                .map_err(|e| JudgeError::Prompt(format!("cannot encode the request: {e}")))?;
            let outcome = {
                let _admission = self.limits.admit(estimated_tokens).await;
                let deadline = *deadline
                    .get_or_insert_with(|| std::time::Instant::now() + self.config.max_call());
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                self.stats.bump(Counter::HttpRequest);
                self.send(
                    body,
                    self.config
                        .timeout()
                        .min(left)
                        .max(Duration::from_millis(1)),
                )
                .await
            };
            match outcome {
                Ok(reply) => return Ok(self.completed(&reply, mode)),
                Err(AttemptError::FormatRejected(error)) => {
                    if self.mode_pinned {
                        return Err(error);
                    }
                    match self.mode.step_down(mode) {
                        Some((next, stepped)) => {
                            if stepped {
                                info!(
                                    endpoint = %self.url,
                                    rejected = mode.as_str(),
                                    next = next.as_str(),
                                    "endpoint rejected the structured-output request; stepping down"
                                );
                            }
                        }
                        None => return Err(error),
                    }
                }
                Err(AttemptError::TokenFieldRejected(error)) => {
                    if completion_field {
                        return Err(error);
                    }
                    if !self.completion_tokens_field.swap(true, Ordering::Relaxed) {
                        info!(
                            endpoint = %self.url,
                            "endpoint rejected max_tokens; sending the cap as max_completion_tokens"
                        );
                    }
                }
                Err(AttemptError::Fatal(error)) => return Err(error),
                Err(AttemptError::Transient { error, retry_after }) => {
                    if retries >= self.config.max_retries {
                        return Err(gave_up(error, retries + 1));
                    }
                    let delay = self.backoff(retries + 1, retry_after);
                    // No retry without time left for it (`max_call_ms`).
                    let left = deadline.map_or(Duration::MAX, |d| {
                        d.saturating_duration_since(std::time::Instant::now())
                    });
                    if left <= delay + MIN_ATTEMPT {
                        return Err(gave_up(error, retries + 1));
                    }
                    retries += 1;
                    self.stats.bump(Counter::Retry);
                    warn!(
                        endpoint = %self.url,
                        error = %error,
                        retry = retries,
                        delay_ms = delay.as_millis() as u64,
                        "judge request failed; retrying"
                    );
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// A reply the server gave: its usage and whether it was cut off counted, the model that
    /// served it noted, its content taken.
    fn completed(&self, reply: &ChatReply, mode: ResponseMode) -> Completion {
        let usage = reply
            .usage
            .map(|u| TokenUsage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
            })
            .unwrap_or_default();
        let reasoning = reply.usage.map_or(0, |u| u.reasoning_tokens());
        let cut_off = reply.cut_off();
        self.stats.completed(usage, reasoning, cut_off);
        if let Some(model) = reply.model.as_deref() {
            self.note_served_model(model);
        }
        Completion {
            content: reply.content().map(str::to_string),
            usage,
            cut_off,
            mode,
        }
    }

    /// Delay before retry number `retry` (1-based): the server's hint when it gave one (capped
    /// by `retry_after_max_ms`), else exponential backoff with equal jitter.
    fn backoff(&self, retry: u32, hint: Option<Duration>) -> Duration {
        if let Some(hint) = hint {
            return hint.min(Duration::from_millis(self.config.retry_after_max_ms));
        }
        let exp = self
            .config
            .backoff_initial_ms
            .saturating_mul(1u64 << retry.saturating_sub(1).min(20))
            .min(self.config.backoff_max_ms);
        let half = exp / 2;
        let jitter = if half > 0 {
            rand::rng().random_range(0..=half)
        } else {
            0
        };
        Duration::from_millis(exp - half + jitter)
    }

    /// Send one request (waiting at most `timeout` for the whole answer) and classify the
    /// outcome.
    async fn send(&self, body: Vec<u8>, timeout: Duration) -> Result<ChatReply, AttemptError> {
        let mut request = self
            .http
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .timeout(timeout)
            .body(body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key.expose());
        }
        let response = request.send().await.map_err(|e| classify(e, timeout))?;
        let status = response.status();
        let hint = retry_after(response.headers());
        let bytes = response.bytes().await.map_err(|e| classify(e, timeout))?;
        if status.is_success() {
            return serde_json::from_slice::<ChatReply>(&bytes).map_err(|e| {
                AttemptError::Transient {
                    error: JudgeError::InvalidReply(format!(
                        "endpoint answered {status} with a body that is not a chat completion ({e}): {}",
                        truncate(&String::from_utf8_lossy(&bytes), 200)
                    )),
                    retry_after: None,
                }
            });
        }
        let text = truncate(&String::from_utf8_lossy(&bytes), ERROR_BODY_CHARS);
        let code = status.as_u16();
        let error = JudgeError::Http {
            status: code,
            body: text.clone(),
        };
        // A rejection of the request's shape is recognised by its body, whatever the status:
        // servers answer it with 400, 422 or even 500 (llama-cpp-python).
        Err(match code {
            400..=599 if rejects_token_field(&text) => AttemptError::TokenFieldRejected(error),
            400..=599 if mentions_response_format(&text) => AttemptError::FormatRejected(error),
            408 | 409 | 425 | 429 | 500..=599 => AttemptError::Transient {
                error,
                retry_after: hint,
            },
            _ => AttemptError::Fatal(error),
        })
    }
}

/// A failed request as an attempt's outcome: a timeout (after `timeout`) or a transport error
/// is transient, a request that could not be built is not.
fn classify(error: reqwest::Error, timeout: Duration) -> AttemptError {
    // reqwest's text names the URL, which may carry a key in its query.
    let error = error.without_url();
    if error.is_builder() {
        return AttemptError::Fatal(JudgeError::Transport(crate::errors::error_chain(&error)));
    }
    let error = if error.is_timeout() {
        JudgeError::Timeout(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX))
    } else {
        JudgeError::Transport(crate::errors::error_chain(&error))
    };
    AttemptError::Transient {
        error,
        retry_after: None,
    }
}

/// The shortest attempt worth starting: a retry with less time left than this (after its
/// backoff) is not sent.
const MIN_ATTEMPT: Duration = Duration::from_millis(100);

/// Whether an error body says the structured-output request itself was the problem (OpenAI:
/// `Invalid parameter: 'response_format' …`; llama-cpp-python: `Input should be 'text' or
/// 'json_object'`; vLLM: `guided_json …`; Ollama, gateways: `… json_schema … not supported`).
fn mentions_response_format(body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    [
        "response_format",
        "json_schema",
        "json_object",
        "guided",
        "structured output",
        "grammar",
    ]
    .iter()
    .any(|hint| lower.contains(hint))
}

/// Whether an error body says the endpoint wants `max_completion_tokens` instead of
/// `max_tokens` (OpenAI's reasoning models: `Unsupported parameter: 'max_tokens' is not
/// supported with this model. Use 'max_completion_tokens' instead.`).
fn rejects_token_field(body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    lower.contains("max_completion_tokens")
        || (lower.contains("max_tokens")
            && [
                "unsupported",
                "not supported",
                "unrecognized",
                "not allowed",
            ]
            .iter()
            .any(|word| lower.contains(word)))
}

/// The error with the number of attempts made, for `details`.
fn gave_up(error: JudgeError, attempts: u32) -> JudgeError {
    match error {
        JudgeError::Http { status, body } => JudgeError::Http {
            status,
            body: format!("{body} (gave up after {attempts} attempts)"),
        },
        JudgeError::Transport(message) => {
            JudgeError::Transport(format!("{message} (gave up after {attempts} attempts)"))
        }
        JudgeError::InvalidReply(message) => {
            JudgeError::InvalidReply(format!("{message} (gave up after {attempts} attempts)"))
        }
        other => other,
    }
}

#[async_trait]
impl StructuredJudge for LlmClient {
    fn kind(&self) -> String {
        format!("llm:{}", self.config.model)
    }

    async fn call(&self, call: ErasedCall<'_>) -> Result<ErasedOutcome, JudgeError> {
        self.stats.bump(Counter::Assessment);
        let result = self.call_erased(call).await;
        if result.is_err() {
            self.stats.bump(Counter::Failure);
        }
        result
    }

    fn prompt_version(&self, name: &str) -> Option<String> {
        self.prompts.version(name).map(str::to_string)
    }

    fn totals(&self) -> JudgeTotals {
        self.stats.snapshot()
    }

    async fn flush(&self) {
        if let Err(error) = self.flush_durable_cache().await {
            warn!(%error, "durable judge cache: queued verdicts not written");
        }
    }
}

#[cfg(test)]
mod tests;
