//! Verdict caches: an in-memory moka cache (bounded, TTL, coalescing identical in-flight
//! requests) in front of an optional [`DurableCache`] (ClickHouse `judge_cache`, shared by
//! replicas and restarts) in front of the LLM.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::judge::TokenUsage;

/// What a cache key is made of. Two calls with equal parts get the same reply.
#[derive(Debug, Clone, Copy)]
pub struct KeyParts<'a, K: Serialize + ?Sized> {
    /// Prompt template name (`stef`).
    pub prompt: &'a str,
    /// Prompt template version (content hash).
    pub prompt_version: &'a str,
    /// Model name.
    pub model: &'a str,
    /// Rule profile version (or another scope the caller wants separated).
    pub scope: &'a str,
    /// Reply schema hash.
    pub schema_hash: &'a str,
    /// The normalized inputs that determine the reply.
    pub identity: &'a K,
}

/// A call's cache identity could not be written as JSON (a map with non-string keys, a
/// serializer's own error).
#[derive(Debug, thiserror::Error)]
#[error("cannot encode the cache identity: {0}")]
pub struct IdentityEncodeError(#[source] serde_json::Error);

/// SHA-256 (hex) over length-prefixed key parts and the canonical JSON of the identity. Stable
/// across processes and releases (as long as the identity serializes the same), so it can key
/// the durable cache too.
pub fn cache_key<K: Serialize + ?Sized>(
    parts: &KeyParts<'_, K>,
) -> Result<String, IdentityEncodeError> {
    let identity = serde_json::to_vec(parts.identity).map_err(IdentityEncodeError)?;
    let mut hasher = Sha256::new();
    for part in [
        parts.prompt.as_bytes(),
        parts.prompt_version.as_bytes(),
        parts.model.as_bytes(),
        parts.scope.as_bytes(),
        parts.schema_hash.as_bytes(),
        identity.as_slice(),
    ] {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Where a cached reply originally came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyOrigin {
    /// A call to the LLM made by this process.
    Llm,
    /// The durable cache.
    Durable,
}

/// A validated reply as kept in the in-memory cache.
#[derive(Clone)]
pub struct CachedReply {
    /// The validated reply as the caller's Rust type (`StructuredReply`), so hits skip decoding.
    pub typed: Arc<dyn Any + Send + Sync>,
    /// Tokens the original call spent.
    pub usage: TokenUsage,
    /// Where the reply came from.
    pub origin: ReplyOrigin,
    /// How the LLM was asked for it (`None` for a reply read from the durable cache).
    pub mode: Option<&'static str>,
    /// Approximate bytes it holds (its reply's JSON text; the in-memory cache weighs it so).
    pub bytes: usize,
}

impl std::fmt::Debug for CachedReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedReply")
            .field("usage", &self.usage)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

/// The in-memory cache type.
pub type MemoryCache = moka::future::Cache<String, Arc<CachedReply>>;

/// Build the in-memory cache holding at most `capacity` entries and about `bytes` bytes of
/// replies, each kept for `ttl`: an entry weighs its key and reply, and at least
/// `bytes / capacity`.
pub fn memory_cache(capacity: u64, bytes: u64, ttl: Duration) -> MemoryCache {
    let floor = (bytes / capacity.max(1)).max(1);
    moka::future::Cache::builder()
        .max_capacity(bytes.max(1))
        .weigher(move |key: &String, reply: &Arc<CachedReply>| {
            let weight = (key.len() as u64 + reply.bytes as u64 + 64).max(floor);
            u32::try_from(weight).unwrap_or(u32::MAX)
        })
        .time_to_live(ttl)
        .build()
}

/// One durable-cache record: the validated reply plus what produced it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DurableEntry {
    /// Cache key ([`cache_key`]).
    pub key: String,
    /// Prompt template name.
    pub prompt: String,
    /// Prompt template version.
    pub prompt_version: String,
    /// Model that produced the reply.
    pub model: String,
    /// The reply's canonical JSON text.
    pub reply: String,
    /// Prompt tokens of the original call.
    pub prompt_tokens: u64,
    /// Completion tokens of the original call.
    pub completion_tokens: u64,
}

/// Why the durable cache could not be read or written. Never fatal: the judge logs it and goes
/// on to the LLM (on `get`) or keeps only the in-memory copy (on `put`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("durable judge cache: {0}")]
pub struct DurableCacheError(pub String);

/// A verdict store that outlives the process (ClickHouse `judge_cache`), consulted after the
/// in-memory cache and before the LLM.
#[async_trait]
pub trait DurableCache: Send + Sync {
    /// The entry stored under `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<DurableEntry>, DurableCacheError>;

    /// The entries stored under `keys`, by key (keys without an entry are absent). Default: one
    /// [`DurableCache::get`] per key; a store that can answer many keys in one request (one
    /// query instead of one per key) overrides it.
    async fn get_many(
        &self,
        keys: &[&str],
    ) -> Result<HashMap<String, DurableEntry>, DurableCacheError> {
        let mut found = HashMap::new();
        for key in keys {
            if let Some(entry) = self.get(key).await? {
                found.insert((*key).to_string(), entry);
            }
        }
        Ok(found)
    }

    /// Store an entry (idempotent: storing the same key twice is harmless). Implementations
    /// may queue the write and return at once; [`DurableCache::flush`] waits for it.
    async fn put(&self, entry: &DurableEntry) -> Result<(), DurableCacheError>;

    /// Write whatever `put` queued (called before the process exits). Default: nothing queued.
    async fn flush(&self) -> Result<(), DurableCacheError> {
        Ok(())
    }
}

/// The default durable cache: stores nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDurableCache;

#[async_trait]
impl DurableCache for NoDurableCache {
    async fn get(&self, _key: &str) -> Result<Option<DurableEntry>, DurableCacheError> {
        Ok(None)
    }

    async fn put(&self, _entry: &DurableEntry) -> Result<(), DurableCacheError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn key(prompt_version: &str, scope: &str, identity: &Value) -> String {
        cache_key(&KeyParts {
            prompt: "stef",
            prompt_version,
            model: "m",
            scope,
            schema_hash: "s",
            identity,
        })
        .unwrap()
    }

    #[test]
    fn key_depends_on_every_part() {
        let vars = serde_json::json!({"q": "x"});
        let base = key("v1", "r1", &vars);
        assert_eq!(base.len(), 64);
        assert_eq!(base, key("v1", "r1", &vars));
        assert_ne!(base, key("v2", "r1", &vars));
        assert_ne!(base, key("v1", "r2", &vars));
        assert_ne!(base, key("v1", "r1", &serde_json::json!({"q": "y"})));
        // Length prefixes keep part boundaries apart.
        assert_ne!(key("v1r", "1", &vars), key("v1", "r1", &vars));
    }

    fn reply(bytes: usize) -> Arc<CachedReply> {
        Arc::new(CachedReply {
            typed: Arc::new(()),
            usage: TokenUsage::default(),
            origin: ReplyOrigin::Llm,
            mode: None,
            bytes,
        })
    }

    #[tokio::test]
    async fn the_memory_cache_holds_its_bytes_and_its_entries() {
        // 10,000 bytes and 1,000 entries: an entry weighs at least 10 bytes.
        let cache = memory_cache(1_000, 10_000, Duration::from_secs(60));
        for i in 0..200 {
            cache.insert(format!("k{i}"), reply(500)).await;
        }
        cache.run_pending_tasks().await;
        assert!(cache.weighted_size() <= 10_000, "{}", cache.weighted_size());
        assert!(cache.entry_count() <= 20, "{}", cache.entry_count());
        let small = memory_cache(10, 1_000_000, Duration::from_secs(60));
        for i in 0..200 {
            small.insert(format!("k{i}"), reply(1)).await;
        }
        small.run_pending_tasks().await;
        assert!(small.entry_count() <= 10, "{}", small.entry_count());
    }
}
