//! The durable judge verdict cache on ClickHouse: the LLM client's second cache level, after its
//! in-memory (moka) cache and before the LLM, shared by every replica and surviving restarts.
//!
//! [`ClickHouseJudgeCache`] implements [`DurableCache`] over the `judge_cache` table
//! (`deploy/clickhouse/004_judge_cache.sql`) so that a slow or absent ClickHouse never stalls or
//! fails scoring:
//!
//! - **lookups** are reads by key (deduplicated with `FINAL`, newest first) — one key, or many in
//!   one query ([`DurableCache::get_many`], the judge stage's batches) — each limited to
//!   `judge.durable_cache_timeout_ms`; a failure or a late answer is a miss — the client asks
//!   the LLM and logs a warning — and opens a short *outage window* during which lookups are
//!   skipped (an immediate miss) instead of each waiting for the dead server;
//! - **writes** never wait: [`DurableCache::put`] queues the entry and a background task inserts
//!   batches (up to [`ClickHouseJudgeCacheOptions::write_batch`] entries, or every
//!   [`ClickHouseJudgeCacheOptions::write_interval`]); a failed batch is kept and retried after
//!   the outage window, and the queue is bounded (beyond it, new entries are dropped and
//!   counted: losing a cache write only costs a future LLM call);
//! - [`DurableCache::flush`] writes what is queued (the daemon calls it when it drains), so the
//!   verdicts a process paid for are stored before it exits.
//!
//! Stored values are the whole [`DurableEntry`] as JSON (reply, prompt version, model, tokens).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use super::now_seconds;
use crate::llm::{DurableCache, DurableCacheError, DurableEntry};
use crate::stores::SinkError;
use crate::stores::clickhouse::config::ClickHouseConfig;

/// Tuning of [`ClickHouseJudgeCache`]. The defaults suit the daemon; tests shorten them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClickHouseJudgeCacheOptions {
    /// Longest wait for one lookup (then: a miss).
    pub lookup_timeout: Duration,
    /// Longest wait for one batch insert.
    pub write_timeout: Duration,
    /// Entries per INSERT at most.
    pub write_batch: usize,
    /// How long a queued entry waits for more before its batch is written.
    pub write_interval: Duration,
    /// Entries waiting to be written at most (queued plus held after a failed insert).
    pub max_queued: usize,
    /// After a failed lookup or insert: lookups are skipped (misses) and a failed batch waits
    /// this long before the next attempt.
    pub outage_backoff: Duration,
}

impl Default for ClickHouseJudgeCacheOptions {
    fn default() -> Self {
        ClickHouseJudgeCacheOptions {
            lookup_timeout: Duration::from_secs(1),
            write_timeout: Duration::from_secs(10),
            write_batch: 500,
            write_interval: Duration::from_secs(1),
            max_queued: 10_000,
            outage_backoff: Duration::from_secs(5),
        }
    }
}

/// Counters of one [`ClickHouseJudgeCache`] (since it was built).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DurableCacheStats {
    /// Keys looked up in ClickHouse (a batch lookup, [`DurableCache::get_many`], counts each of
    /// its keys; it is one query).
    pub lookups: u64,
    /// Lookups that found an entry.
    pub hits: u64,
    /// Keys whose lookup was skipped (answered "miss" at once) during an outage window.
    pub skipped: u64,
    /// Keys whose lookup failed or timed out.
    pub lookup_errors: u64,
    /// Stored values that could not be decoded (treated as misses).
    pub invalid: u64,
    /// Entries written.
    pub written: u64,
    /// Batch inserts that failed (the batch is retried).
    pub write_errors: u64,
    /// Entries dropped because the write queue was full.
    pub dropped: u64,
}

#[derive(Debug, Default)]
struct Counters {
    lookups: AtomicU64,
    hits: AtomicU64,
    skipped: AtomicU64,
    lookup_errors: AtomicU64,
    invalid: AtomicU64,
    written: AtomicU64,
    write_errors: AtomicU64,
    dropped: AtomicU64,
}

impl Counters {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn snapshot(&self) -> DurableCacheStats {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        DurableCacheStats {
            lookups: r(&self.lookups),
            hits: r(&self.hits),
            skipped: r(&self.skipped),
            lookup_errors: r(&self.lookup_errors),
            invalid: r(&self.invalid),
            written: r(&self.written),
            write_errors: r(&self.write_errors),
            dropped: r(&self.dropped),
        }
    }
}

/// Whether ClickHouse is believed reachable: after a failure, lookups are skipped until the
/// outage window has passed; the first failure and the recovery are logged once each.
#[derive(Debug)]
struct Availability {
    epoch: Instant,
    /// Milliseconds since `epoch` before which lookups are skipped.
    down_until_ms: AtomicU64,
    down: AtomicBool,
    backoff: Duration,
}

impl Availability {
    fn new(backoff: Duration) -> Availability {
        Availability {
            epoch: Instant::now(),
            down_until_ms: AtomicU64::new(0),
            down: AtomicBool::new(false),
            backoff,
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether a lookup should be tried now.
    fn usable(&self) -> bool {
        self.now_ms() >= self.down_until_ms.load(Ordering::Relaxed)
    }

    fn failed(&self, what: &str, error: &str) {
        let until = self
            .now_ms()
            .saturating_add(u64::try_from(self.backoff.as_millis()).unwrap_or(u64::MAX));
        self.down_until_ms.fetch_max(until, Ordering::Relaxed);
        if !self.down.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                what,
                %error,
                retry_in_ms = self.backoff.as_millis() as u64,
                "durable judge cache (ClickHouse judge_cache) unavailable; lookups count as misses \
                 and verdicts come from the LLM until it is back"
            );
        }
    }

    fn succeeded(&self) {
        if self.down.swap(false, Ordering::Relaxed) {
            tracing::info!("durable judge cache (ClickHouse judge_cache) available again");
        }
    }
}

/// A message to the writer task.
enum WriterCommand {
    Put(DurableEntry),
    Flush(oneshot::Sender<Result<(), DurableCacheError>>),
}

/// State shared by the cache handle and its writer task.
#[derive(Debug)]
struct Shared {
    store: JudgeCacheStore,
    options: ClickHouseJudgeCacheOptions,
    availability: Availability,
    counters: Counters,
}

/// The ClickHouse-backed [`DurableCache`] (`judge_cache`). Build one per process and share it
/// through the LLM client; see the module docs for its failure behaviour.
pub struct ClickHouseJudgeCache {
    shared: Arc<Shared>,
    /// The writer task's queue, started on the first `put` (inside the runtime).
    writer: Mutex<Option<mpsc::Sender<WriterCommand>>>,
}

impl std::fmt::Debug for ClickHouseJudgeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClickHouseJudgeCache")
            .field("store", &self.shared.store)
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}

impl ClickHouseJudgeCache {
    /// A cache on the server and database of `settings` (credentials included).
    pub fn new(
        settings: &ClickHouseConfig,
        options: ClickHouseJudgeCacheOptions,
    ) -> ClickHouseJudgeCache {
        let store = JudgeCacheStore::new(settings)
            .with_read_timeout(options.lookup_timeout)
            .with_write_timeout(options.write_timeout);
        ClickHouseJudgeCache {
            shared: Arc::new(Shared {
                store,
                availability: Availability::new(options.outage_backoff),
                counters: Counters::default(),
                options,
            }),
            writer: Mutex::new(None),
        }
    }

    /// Counters since the cache was built.
    pub fn stats(&self) -> DurableCacheStats {
        self.shared.counters.snapshot()
    }

    /// The writer queue, starting the writer task on first use.
    fn writer(&self) -> Result<mpsc::Sender<WriterCommand>, DurableCacheError> {
        let mut slot = self
            .writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(sender) = slot.as_ref().filter(|s| !s.is_closed()) {
            return Ok(sender.clone());
        }
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| DurableCacheError(format!("cannot start the judge_cache writer: {e}")))?;
        let (sender, receiver) = mpsc::channel(self.shared.options.max_queued.max(1));
        runtime.spawn(run_writer(Arc::clone(&self.shared), receiver));
        *slot = Some(sender.clone());
        Ok(sender)
    }
}

/// The entry in `value`, stored under `key`: `None` (counted as invalid, with a warning) when it
/// cannot be decoded or names another key; counted as a hit otherwise.
fn decode_entry(shared: &Shared, key: &str, value: &str) -> Option<DurableEntry> {
    match serde_json::from_str::<DurableEntry>(value) {
        Ok(entry) if entry.key == key => {
            Counters::add(&shared.counters.hits, 1);
            Some(entry)
        }
        Ok(_) => {
            Counters::add(&shared.counters.invalid, 1);
            tracing::warn!(
                key,
                "judge_cache entry stored under another key; ignoring it"
            );
            None
        }
        Err(error) => {
            Counters::add(&shared.counters.invalid, 1);
            tracing::warn!(key, %error, "judge_cache entry cannot be decoded; ignoring it");
            None
        }
    }
}

#[async_trait]
impl DurableCache for ClickHouseJudgeCache {
    async fn get(&self, key: &str) -> Result<Option<DurableEntry>, DurableCacheError> {
        let shared = &self.shared;
        if !shared.availability.usable() {
            Counters::add(&shared.counters.skipped, 1);
            return Ok(None);
        }
        Counters::add(&shared.counters.lookups, 1);
        let value = match shared.store.get(key).await {
            Ok(value) => {
                shared.availability.succeeded();
                value
            }
            Err(error) => {
                Counters::add(&shared.counters.lookup_errors, 1);
                let error = error.to_string();
                shared.availability.failed("lookup", &error);
                return Err(DurableCacheError(error));
            }
        };
        Ok(value.and_then(|value| decode_entry(shared, key, &value)))
    }

    async fn get_many(
        &self,
        keys: &[&str],
    ) -> Result<HashMap<String, DurableEntry>, DurableCacheError> {
        let shared = &self.shared;
        if keys.is_empty() {
            return Ok(HashMap::new());
        }
        if !shared.availability.usable() {
            Counters::add(&shared.counters.skipped, keys.len() as u64);
            return Ok(HashMap::new());
        }
        Counters::add(&shared.counters.lookups, keys.len() as u64);
        let values = match shared.store.get_many(keys).await {
            Ok(values) => {
                shared.availability.succeeded();
                values
            }
            Err(error) => {
                Counters::add(&shared.counters.lookup_errors, keys.len() as u64);
                let error = error.to_string();
                shared.availability.failed("lookup", &error);
                return Err(DurableCacheError(error));
            }
        };
        Ok(values
            .into_iter()
            .filter_map(|(key, value)| {
                let entry = decode_entry(shared, &key, &value)?;
                Some((key, entry))
            })
            .collect())
    }

    async fn put(&self, entry: &DurableEntry) -> Result<(), DurableCacheError> {
        let writer = self.writer()?;
        match writer.try_send(WriterCommand::Put(entry.clone())) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => {
                Counters::add(&self.shared.counters.dropped, 1);
                tracing::debug!(key = %entry.key, "judge_cache write queue full; entry dropped");
                Ok(())
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(DurableCacheError(
                "the judge_cache writer has stopped".into(),
            )),
        }
    }

    async fn flush(&self) -> Result<(), DurableCacheError> {
        let sender = {
            let slot = self
                .writer
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            slot.clone()
        };
        // Nothing was ever queued.
        let Some(sender) = sender else {
            return Ok(());
        };
        let (ack, done) = oneshot::channel();
        let limit = self.shared.options.write_timeout + self.shared.options.write_timeout;
        let flushed = async {
            sender
                .send(WriterCommand::Flush(ack))
                .await
                .map_err(|_| DurableCacheError("the judge_cache writer has stopped".into()))?;
            done.await
                .map_err(|_| DurableCacheError("the judge_cache writer has stopped".into()))?
        };
        let result = match tokio::time::timeout(limit, flushed).await {
            Ok(result) => result,
            Err(_) => Err(DurableCacheError(format!(
                "flush took longer than {} ms",
                limit.as_millis()
            ))),
        };
        let stats = self.stats();
        tracing::info!(
            lookups = stats.lookups,
            hits = stats.hits,
            skipped = stats.skipped,
            lookup_errors = stats.lookup_errors,
            written = stats.written,
            write_errors = stats.write_errors,
            dropped = stats.dropped,
            "durable judge cache flushed"
        );
        result
    }
}

/// The writer task: batches queued entries into INSERTs until every sender is gone.
async fn run_writer(shared: Arc<Shared>, mut queue: mpsc::Receiver<WriterCommand>) {
    let options = shared.options;
    let mut pending: Vec<DurableEntry> = Vec::new();
    // When the pending entries are written even if no more arrive.
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        let command = match deadline {
            Some(at) => match tokio::time::timeout_at(at, queue.recv()).await {
                Ok(command) => command,
                Err(_elapsed) => {
                    deadline = write_pending(&shared, &mut pending).await;
                    continue;
                }
            },
            None => queue.recv().await,
        };
        match command {
            Some(WriterCommand::Put(entry)) => {
                if pending.len() >= options.max_queued.max(1) {
                    // Held entries (a failing server) fill the budget: drop the newest.
                    Counters::add(&shared.counters.dropped, 1);
                    continue;
                }
                pending.push(entry);
                if deadline.is_none() {
                    deadline = Some(tokio::time::Instant::now() + options.write_interval);
                }
                // A full batch goes out at once, unless ClickHouse just failed: then the held
                // entries wait for the retry deadline instead of one attempt per new entry.
                if pending.len() >= options.write_batch.max(1) && shared.availability.usable() {
                    deadline = write_pending(&shared, &mut pending).await;
                }
            }
            Some(WriterCommand::Flush(ack)) => {
                deadline = write_pending(&shared, &mut pending).await;
                let result = if pending.is_empty() {
                    Ok(())
                } else {
                    Err(DurableCacheError(format!(
                        "{} verdicts could not be written (ClickHouse unavailable)",
                        pending.len()
                    )))
                };
                let _ = ack.send(result);
            }
            None => {
                write_pending(&shared, &mut pending).await;
                return;
            }
        }
    }
}

/// Insert the pending entries in batches. On failure the rest stays pending and the next
/// attempt is due after the outage backoff (returned); `None` when nothing is left.
async fn write_pending(
    shared: &Shared,
    pending: &mut Vec<DurableEntry>,
) -> Option<tokio::time::Instant> {
    let batch_size = shared.options.write_batch.max(1);
    while !pending.is_empty() {
        let take = pending.len().min(batch_size);
        let encoded: Vec<(String, String)> = pending
            .iter()
            .take(take)
            .filter_map(|entry| match serde_json::to_string(entry) {
                Ok(value) => Some((entry.key.clone(), value)),
                Err(error) => {
                    tracing::warn!(key = %entry.key, %error, "judge_cache entry cannot be encoded; dropped");
                    None
                }
            })
            .collect();
        let rows: Vec<(&str, &str)> = encoded
            .iter()
            .map(|(key, value)| (key.as_str(), value.as_str()))
            .collect();
        match shared.store.put_many(&rows).await {
            Ok(()) => {
                Counters::add(&shared.counters.written, rows.len() as u64);
                shared.availability.succeeded();
                pending.drain(..take);
            }
            Err(error) => {
                Counters::add(&shared.counters.write_errors, 1);
                shared.availability.failed("insert", &error.to_string());
                return Some(tokio::time::Instant::now() + shared.options.outage_backoff);
            }
        }
    }
    None
}

/// One row of `judge_cache` (see 004_judge_cache.sql).
#[derive(Debug, clickhouse::Row, Serialize)]
struct JudgeCacheRecord<'a> {
    key: &'a str,
    value: &'a str,
    created_at: u32,
}

/// The lookup [`JudgeCacheStore::get`] runs: by key, deduplicated (`FINAL`, and the newest
/// `created_at` first). `PREWHERE` filters on the sorting key before the verdict column is read
/// (with the table's small index granularity, a lookup reads a few KB). Public so that tests
/// can run the exact query on other ClickHouse releases.
pub const JUDGE_CACHE_LOOKUP: &str =
    "SELECT value FROM judge_cache FINAL PREWHERE key = ? ORDER BY created_at DESC LIMIT 1";

/// The lookup [`JudgeCacheStore::get_many`] runs for several keys at once: the newest entry of
/// each key present (`FINAL`, newest `created_at` first, one row per key). `IN_LIST` stands for
/// the `?, ?, …` placeholders, one per key. One query for many keys costs the server about what
/// one point lookup does (it is per-query overhead, not per-key work). Public so that tests can
/// run the exact query on other ClickHouse releases.
pub const JUDGE_CACHE_LOOKUP_MANY: &str = "SELECT key, value FROM judge_cache FINAL PREWHERE key IN (IN_LIST) ORDER BY created_at DESC LIMIT 1 BY key";

/// One `(key, value)` answer of [`JUDGE_CACHE_LOOKUP_MANY`].
#[derive(Debug, clickhouse::Row, serde::Deserialize)]
struct KeyValue {
    key: String,
    value: String,
}

/// The durable judge verdict store in ClickHouse (`judge_cache`): shared by every replica and
/// surviving restarts. Values are opaque JSON text; the newest `created_at` wins for a key
/// (ReplacingMergeTree, read with `FINAL`). The LLM client reaches it through
/// [`ClickHouseJudgeCache`], which adds batching, time limits and
/// outage handling; this type is the plain storage access.
#[derive(Clone)]
pub struct JudgeCacheStore {
    client: clickhouse::Client,
    table: String,
    read_timeout: Duration,
    write_timeout: Duration,
}

impl std::fmt::Debug for JudgeCacheStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JudgeCacheStore")
            .field("table", &self.table)
            .field("read_timeout", &self.read_timeout)
            .field("write_timeout", &self.write_timeout)
            .finish()
    }
}

impl JudgeCacheStore {
    /// A store on the sink's server and database (table `judge_cache`); reads and writes are
    /// limited by the sink's `request_timeout_ms`.
    pub fn new(settings: &ClickHouseConfig) -> JudgeCacheStore {
        let timeout = super::request_timeout(settings);
        JudgeCacheStore {
            client: super::client(settings),
            table: "judge_cache".into(),
            read_timeout: timeout,
            write_timeout: timeout,
        }
    }

    /// The same store with another limit on one insert.
    pub fn with_write_timeout(mut self, timeout: Duration) -> JudgeCacheStore {
        self.write_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// The same store with another limit on one lookup (a slow lookup must not stall scoring).
    pub fn with_read_timeout(mut self, timeout: Duration) -> JudgeCacheStore {
        self.read_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// The value stored under `key`, if any (newest wins).
    pub async fn get(&self, key: &str) -> Result<Option<String>, SinkError> {
        let query = JUDGE_CACHE_LOOKUP.replacen("judge_cache", &self.table, 1);
        let fetch = self
            .client
            .query(&query)
            .bind(key)
            .fetch_optional::<String>();
        match tokio::time::timeout(self.read_timeout, fetch).await {
            Ok(result) => result.map_err(|e| SinkError::backend("judge_cache get", e)),
            Err(_) => Err(SinkError::Store(format!(
                "judge_cache get: no answer within {} ms",
                self.read_timeout.as_millis()
            ))),
        }
    }

    /// The values stored under `keys` (newest wins), by key; keys without an entry are absent.
    pub async fn get_many(&self, keys: &[&str]) -> Result<HashMap<String, String>, SinkError> {
        if keys.is_empty() {
            return Ok(HashMap::new());
        }
        let placeholders = vec!["?"; keys.len()].join(", ");
        let query = JUDGE_CACHE_LOOKUP_MANY
            .replacen("judge_cache", &self.table, 1)
            .replacen("IN_LIST", &placeholders, 1);
        let mut bound = self.client.query(&query);
        for key in keys {
            bound = bound.bind(*key);
        }
        let fetch = bound.fetch_all::<KeyValue>();
        match tokio::time::timeout(self.read_timeout, fetch).await {
            Ok(Ok(rows)) => Ok(rows.into_iter().map(|r| (r.key, r.value)).collect()),
            Ok(Err(e)) => Err(SinkError::backend("judge_cache get_many", e)),
            Err(_) => Err(SinkError::Store(format!(
                "judge_cache get_many: no answer within {} ms",
                self.read_timeout.as_millis()
            ))),
        }
    }

    /// Store `value` (JSON text) under `key`. Idempotent: the same key twice collapses on merge.
    pub async fn put(&self, key: &str, value: &str) -> Result<(), SinkError> {
        self.put_many(&[(key, value)]).await
    }

    /// Store several `(key, value)` pairs in one INSERT.
    pub async fn put_many(&self, entries: &[(&str, &str)]) -> Result<(), SinkError> {
        if entries.is_empty() {
            return Ok(());
        }
        let created_at = now_seconds();
        let store = async {
            let mut insert = self
                .client
                .insert::<JudgeCacheRecord<'_>>(&self.table)
                .await?
                .with_timeouts(Some(self.write_timeout), Some(self.write_timeout));
            for (key, value) in entries {
                insert
                    .write(&JudgeCacheRecord {
                        key,
                        value,
                        created_at,
                    })
                    .await?;
            }
            insert.end().await
        };
        match tokio::time::timeout(self.write_timeout, store).await {
            Ok(result) => result.map_err(|e| SinkError::backend("judge_cache put", e)),
            Err(_) => Err(SinkError::Store(format!(
                "judge_cache put: no answer within {} ms",
                self.write_timeout.as_millis()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str) -> DurableEntry {
        DurableEntry {
            key: key.into(),
            prompt: "stef".into(),
            prompt_version: "stef-1".into(),
            model: "m".into(),
            reply: r#"{"verdict":"correct"}"#.into(),
            prompt_tokens: 10,
            completion_tokens: 5,
        }
    }

    /// A server that is not there: port 1 on loopback refuses connections at once.
    fn unreachable(options: ClickHouseJudgeCacheOptions) -> ClickHouseJudgeCache {
        ClickHouseJudgeCache::new(
            &ClickHouseConfig {
                url: Some("http://127.0.0.1:1".into()),
                ..ClickHouseConfig::default()
            },
            options,
        )
    }

    #[tokio::test]
    async fn unreachable_server_is_a_miss_then_skipped_and_writes_never_block() {
        let cache = unreachable(ClickHouseJudgeCacheOptions {
            lookup_timeout: Duration::from_millis(500),
            write_timeout: Duration::from_millis(500),
            outage_backoff: Duration::from_secs(60),
            write_interval: Duration::from_millis(10),
            max_queued: 3,
            ..ClickHouseJudgeCacheOptions::default()
        });
        // The first lookup fails (the client logs it and asks the LLM).
        assert!(cache.get("k").await.is_err());
        // During the outage window lookups are immediate misses.
        assert_eq!(cache.get("k").await.unwrap(), None);
        assert_eq!(cache.get("k2").await.unwrap(), None);
        // Writes queue and return at once, even far beyond the queue bound.
        for i in 0..10 {
            cache.put(&entry(&format!("k{i}"))).await.unwrap();
        }
        // A flush reports what could not be written instead of hanging.
        let flushed = cache.flush().await;
        assert!(flushed.is_err(), "{flushed:?}");
        let stats = cache.stats();
        assert_eq!(stats.lookups, 1);
        assert_eq!(stats.lookup_errors, 1);
        assert_eq!(stats.skipped, 2);
        assert_eq!(stats.written, 0);
        assert!(stats.dropped >= 7, "{stats:?}");
    }

    #[tokio::test]
    async fn a_server_that_never_answers_costs_one_lookup_timeout_then_misses() {
        // Accepts connections (the kernel completes the handshake) but never answers.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let cache = ClickHouseJudgeCache::new(
            &ClickHouseConfig {
                url: Some(format!("http://{}", silent.local_addr().unwrap())),
                ..ClickHouseConfig::default()
            },
            ClickHouseJudgeCacheOptions {
                lookup_timeout: Duration::from_millis(200),
                outage_backoff: Duration::from_secs(60),
                ..ClickHouseJudgeCacheOptions::default()
            },
        );
        let error = cache.get("k").await.unwrap_err();
        assert!(
            error.to_string().contains("no answer within 200 ms"),
            "{error}"
        );
        let started = Instant::now();
        for i in 0..100 {
            assert_eq!(cache.get(&format!("k{i}")).await.unwrap(), None);
            cache.put(&entry(&format!("k{i}"))).await.unwrap();
        }
        // Skipped lookups and queued writes do not wait for the server.
        assert!(
            started.elapsed() < Duration::from_millis(200),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(cache.stats().skipped, 100);
    }

    #[tokio::test]
    async fn flush_without_writes_is_immediate() {
        let cache = unreachable(ClickHouseJudgeCacheOptions::default());
        cache.flush().await.unwrap();
        assert_eq!(cache.stats(), DurableCacheStats::default());
    }

    #[test]
    fn outage_window_opens_on_failure_and_closes_on_success() {
        let a = Availability::new(Duration::from_secs(60));
        assert!(a.usable());
        a.failed("lookup", "connection refused");
        assert!(!a.usable());
        a.succeeded();
        // Success clears the "down" flag; the window still runs out by time.
        assert!(!a.down.load(Ordering::Relaxed));
        let b = Availability::new(Duration::ZERO);
        b.failed("lookup", "x");
        assert!(b.usable());
    }
}
