//! ClickHouse sink: evaluation rows into `evaluations`, dead letters into `dead_letters`.
//!
//! Each [`Batch`] the pipeline's batcher hands over (the batcher bounds it by rows, bytes and
//! time) becomes one `INSERT … FORMAT RowBinary` per table. [`Sink::write`] returns only once the
//! server has accepted the batch, so the pipeline acknowledges (and the Kafka source commits) only
//! stored data:
//!
//! - **transient failures** (network, timeouts, server overload, a stopped server) are retried
//!   with capped exponential backoff while the batch — and therefore its offsets — is held;
//! - **data the server rejects** (parse/type errors) is bisected down to the offending rows,
//!   which are written to `dead_letters` with the server's error, while the rest is stored.
//!
//! Writes are idempotent: `evaluations` is a `ReplacingMergeTree` keyed by (event_id, metric),
//! so a batch re-sent after a timeout or redelivered after a crash collapses on merge (queries read
//! it with `FINAL`). Client schema validation is off (`with_validation(false)`) so that the
//! crate works with ClickHouse 18.16 as well as current servers; the row types below mirror
//! `deploy/clickhouse/001_evaluations.sql` and `002_dead_letters.sql`.
//!
//! The password is only handed to the client; neither it nor the URL's userinfo is logged.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{Batch, Sink, SinkError};
use crate::config::redact_url;
use crate::evaluation::{DeadLetter, EvaluationRow};
use crate::health::{ComponentHealth, Health};

/// Connection and retry settings of the ClickHouse sink.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClickHouseSettings {
    /// HTTP(S) URL of the server (`http://127.0.0.1:8123`).
    pub url: String,
    /// Database holding the tables (created by `sqlgrade migrate`).
    pub database: String,
    /// User (`default` when unset).
    pub user: Option<String>,
    /// Password (never logged).
    pub password: Option<String>,
    /// Table for evaluation rows.
    pub table: String,
    /// Table for dead letters.
    pub dead_letter_table: String,
    /// First retry delay after a transient failure.
    pub retry_initial_ms: u64,
    /// Largest retry delay (the delay doubles up to this).
    pub retry_max_ms: u64,
    /// Give up after retrying this long (0 = retry until the server is back).
    pub retry_give_up_ms: u64,
    /// Per-request timeout.
    pub request_timeout_ms: u64,
}

impl Default for ClickHouseSettings {
    fn default() -> Self {
        ClickHouseSettings {
            url: "http://127.0.0.1:8123".into(),
            database: "sqlgrade".into(),
            user: None,
            password: None,
            table: "evaluations".into(),
            dead_letter_table: "dead_letters".into(),
            retry_initial_ms: 100,
            retry_max_ms: 5_000,
            retry_give_up_ms: 0,
            request_timeout_ms: 30_000,
        }
    }
}

impl std::fmt::Debug for ClickHouseSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClickHouseSettings")
            .field("url", &redact_url(&self.url))
            .field("database", &self.database)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("table", &self.table)
            .field("dead_letter_table", &self.dead_letter_table)
            .field("retry_initial_ms", &self.retry_initial_ms)
            .field("retry_max_ms", &self.retry_max_ms)
            .field("retry_give_up_ms", &self.retry_give_up_ms)
            .field("request_timeout_ms", &self.request_timeout_ms)
            .finish()
    }
}

impl ClickHouseSettings {
    /// The sink settings of a configuration's `[sink]` section.
    pub fn from_config(sink: &crate::config::SinkConfig) -> ClickHouseSettings {
        let defaults = ClickHouseSettings::default();
        ClickHouseSettings {
            url: sink.url.clone().unwrap_or(defaults.url),
            database: sink.database.clone(),
            user: sink.user.clone(),
            password: sink
                .password
                .as_ref()
                .filter(|p| !p.is_empty())
                .map(|p| p.expose().to_string()),
            retry_initial_ms: sink.retry_initial_ms,
            retry_max_ms: sink.retry_max_ms,
            retry_give_up_ms: sink.retry_give_up_ms,
            request_timeout_ms: sink.request_timeout_ms,
            ..defaults
        }
    }

    /// A `clickhouse` client for these settings (validation off, database selected).
    pub fn client(&self) -> clickhouse::Client {
        let mut client = clickhouse::Client::default()
            .with_url(&self.url)
            .with_database(&self.database)
            .with_validation(false);
        if let Some(user) = &self.user {
            client = client.with_user(user);
        }
        if let Some(password) = &self.password {
            client = client.with_password(password);
        }
        client
    }

    /// The same client without a database selected (to create it).
    pub fn server_client(&self) -> clickhouse::Client {
        let mut client = clickhouse::Client::default()
            .with_url(&self.url)
            .with_validation(false);
        if let Some(user) = &self.user {
            client = client.with_user(user);
        }
        if let Some(password) = &self.password {
            client = client.with_password(password);
        }
        client
    }
}

/// One row of `evaluations` in RowBinary column order (see 001_evaluations.sql).
#[derive(Debug, clickhouse::Row, Serialize)]
struct EvaluationRecord<'a> {
    event_id: &'a str,
    ts: u32,
    app_id: Option<&'a str>,
    agent_id: Option<&'a str>,
    agent_version: Option<&'a str>,
    model: Option<&'a str>,
    run_id: Option<&'a str>,
    metric: &'static str,
    value: f64,
    verdict: Option<u8>,
    status: &'static str,
    details: String,
    quality_tier: Option<&'a str>,
    filter_status: Option<&'a str>,
    semantic_verdict: Option<&'a str>,
    confidence: Option<f64>,
    confidence_tier: Option<&'a str>,
    sigma_filters: Option<u8>,
    sigma_verdict: Option<u8>,
    leniency: Option<u8>,
    rules_fired: &'a [String],
    enrichment_status: Option<&'a str>,
    judge: Option<&'a str>,
    judge_cached: Option<u8>,
    prompt_version: Option<&'a str>,
    rules_version: Option<&'a str>,
    prompt_tokens: u64,
    completion_tokens: u64,
    latency_us: u64,
    scored_at: u32,
}

const NO_RULES: &[String] = &[];

impl<'a> EvaluationRecord<'a> {
    fn new(row: &'a EvaluationRow, scored_at: u32) -> EvaluationRecord<'a> {
        let stef = row.stef.as_ref();
        EvaluationRecord {
            event_id: &row.event_id,
            ts: epoch_seconds(&row.ts).unwrap_or(scored_at),
            app_id: row.app_id.as_deref(),
            agent_id: row.agent_id.as_deref(),
            agent_version: row.agent_version.as_deref(),
            model: row.model.as_deref(),
            run_id: row.run_id.as_deref(),
            metric: row.metric.as_str(),
            value: row.value,
            verdict: row.verdict.map(u8::from),
            status: row.status.as_str(),
            details: row.details.to_string(),
            quality_tier: stef.map(|s| s.quality_tier.as_str()),
            filter_status: stef.map(|s| s.filter_status.as_str()),
            semantic_verdict: stef.map(|s| s.semantic_verdict.as_str()),
            confidence: stef.map(|s| s.confidence),
            confidence_tier: stef.map(|s| s.confidence_tier.as_str()),
            sigma_filters: stef.map(|s| s.sigma_filters),
            sigma_verdict: stef.map(|s| s.sigma_verdict),
            leniency: stef.map(|s| s.leniency),
            rules_fired: stef.map_or(NO_RULES, |s| s.rules_fired.as_slice()),
            enrichment_status: stef.map(|s| s.enrichment_status.as_str()),
            judge: stef.map(|s| s.judge.as_str()),
            judge_cached: stef.map(|s| u8::from(s.judge_cached)),
            prompt_version: stef.and_then(|s| s.prompt_version.as_deref()),
            rules_version: stef.map(|s| s.rules_version.as_str()),
            prompt_tokens: stef.map_or(0, |s| s.prompt_tokens),
            completion_tokens: stef.map_or(0, |s| s.completion_tokens),
            latency_us: stef.map_or(0, |s| s.latency_us),
            scored_at,
        }
    }
}

/// One row of `dead_letters` (see 002_dead_letters.sql).
#[derive(Debug, clickhouse::Row, Serialize)]
struct DeadLetterRecord<'a> {
    received_at: u32,
    source: &'a str,
    reason: &'a str,
    payload: &'a str,
    payload_encoding: &'a str,
    error: &'a str,
}

impl<'a> DeadLetterRecord<'a> {
    fn new(letter: &'a DeadLetter, error: &'a str, now: u32) -> DeadLetterRecord<'a> {
        DeadLetterRecord {
            received_at: epoch_seconds(&letter.received_at).unwrap_or(now),
            source: &letter.source,
            reason: &letter.reason,
            payload: &letter.payload,
            payload_encoding: &letter.payload_encoding,
            error,
        }
    }
}

/// RFC 3339 → seconds since the epoch, clamped to ClickHouse `DateTime`'s range.
fn epoch_seconds(ts: &str) -> Option<u32> {
    let secs = chrono::DateTime::parse_from_rfc3339(ts).ok()?.timestamp();
    Some(secs.clamp(0, i64::from(u32::MAX)) as u32)
}

fn now_seconds() -> u32 {
    chrono::Utc::now().timestamp().clamp(0, i64::from(u32::MAX)) as u32
}

/// How a failed insert should be handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Try the same data again later (network, overload, server down, unknown).
    Transient,
    /// The server rejected the data itself; retrying the same rows cannot succeed.
    RejectedData,
}

/// ClickHouse exception codes that mean "this data is bad", not "try later".
const DATA_ERROR_CODES: &[u32] = &[
    6,   // CANNOT_PARSE_TEXT
    26,  // CANNOT_PARSE_QUOTED_STRING
    27,  // CANNOT_PARSE_INPUT_ASSERTION_FAILED
    32,  // ATTEMPT_TO_READ_AFTER_EOF
    33,  // CANNOT_READ_ALL_DATA
    38,  // CANNOT_PARSE_DATE
    41,  // CANNOT_PARSE_DATETIME
    53,  // TYPE_MISMATCH
    69,  // ARGUMENT_OUT_OF_BOUND
    70,  // CANNOT_CONVERT_TYPE
    72,  // CANNOT_PARSE_NUMBER
    117, // INCORRECT_DATA
    131, // TOO_LARGE_STRING_SIZE
    349, // CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN
];

/// The `Code: N` of a ClickHouse exception message, if present.
pub fn exception_code(message: &str) -> Option<u32> {
    let start = message.find("Code: ")? + "Code: ".len();
    let digits: String = message[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Classify an insert error.
pub fn classify(error: &clickhouse::error::Error) -> FailureKind {
    use clickhouse::error::Error;
    match error {
        Error::BadResponse(message) => match exception_code(message) {
            Some(code) if DATA_ERROR_CODES.contains(&code) => FailureKind::RejectedData,
            _ => FailureKind::Transient,
        },
        // Our own rows failed to serialize: resending cannot help.
        Error::Custom(_)
        | Error::SequenceMustHaveLength
        | Error::InvalidUtf8Encoding(_)
        | Error::DataFormat(_) => FailureKind::RejectedData,
        _ => FailureKind::Transient,
    }
}

/// Capped exponential backoff.
#[derive(Debug, Clone)]
struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff { next: initial, max }
    }

    fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        delay
    }
}

/// The ClickHouse [`Sink`].
pub struct ClickHouseSink {
    client: clickhouse::Client,
    settings: ClickHouseSettings,
    health: Option<Arc<Health>>,
}

impl std::fmt::Debug for ClickHouseSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClickHouseSink")
            .field("settings", &self.settings)
            .finish()
    }
}

/// Outcome of inserting one chunk with bisection.
struct Rejected<T> {
    item: T,
    error: String,
}

impl ClickHouseSink {
    /// A sink for these settings. Connects lazily (the first write).
    pub fn new(settings: ClickHouseSettings) -> ClickHouseSink {
        ClickHouseSink {
            client: settings.client(),
            settings,
            health: None,
        }
    }

    /// Report the sink's state (`clickhouse` component) to a health registry.
    pub fn with_health(mut self, health: Arc<Health>) -> ClickHouseSink {
        health.set("clickhouse", ComponentHealth::Ok);
        self.health = Some(health);
        self
    }

    fn report(&self, state: ComponentHealth) {
        if let Some(h) = &self.health {
            h.set("clickhouse", state);
        }
    }

    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_millis(
            self.settings.request_timeout_ms.max(1),
        ))
    }

    async fn insert_evaluations(&self, rows: &[EvaluationRow]) -> clickhouse::error::Result<()> {
        let scored_at = now_seconds();
        let mut insert = self
            .client
            .insert::<EvaluationRecord<'_>>(&self.settings.table)
            .await?
            .with_timeouts(self.timeout(), self.timeout());
        for row in rows {
            insert.write(&EvaluationRecord::new(row, scored_at)).await?;
        }
        insert.end().await
    }

    async fn insert_dead_letters(
        &self,
        letters: &[(DeadLetter, String)],
    ) -> clickhouse::error::Result<()> {
        let now = now_seconds();
        let mut insert = self
            .client
            .insert::<DeadLetterRecord<'_>>(&self.settings.dead_letter_table)
            .await?
            .with_timeouts(self.timeout(), self.timeout());
        for (letter, error) in letters {
            insert
                .write(&DeadLetterRecord::new(letter, error, now))
                .await?;
        }
        insert.end().await
    }

    /// Run `attempt` until it succeeds or fails with rejected data, sleeping with backoff between
    /// transient failures. `Err(Ok(message))` = rejected data; `Err(Err(_))` = gave up.
    async fn with_retries<F, Fut>(
        &self,
        what: &str,
        mut attempt: F,
    ) -> Result<(), Result<String, SinkError>>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = clickhouse::error::Result<()>>,
    {
        let mut backoff = Backoff::new(
            Duration::from_millis(self.settings.retry_initial_ms.max(1)),
            Duration::from_millis(self.settings.retry_max_ms.max(1)),
        );
        let started = std::time::Instant::now();
        let mut failures = 0u32;
        loop {
            match attempt().await {
                Ok(()) => {
                    if failures > 0 {
                        tracing::info!(what, failures, "clickhouse insert succeeded after retries");
                        self.report(ComponentHealth::Ok);
                    }
                    return Ok(());
                }
                Err(e) => match classify(&e) {
                    FailureKind::RejectedData => return Err(Ok(e.to_string())),
                    FailureKind::Transient => {
                        failures += 1;
                        let give_up = self.settings.retry_give_up_ms;
                        if give_up > 0 && started.elapsed() >= Duration::from_millis(give_up) {
                            self.report(ComponentHealth::Failed(e.to_string()));
                            return Err(Err(SinkError::Store(format!(
                                "{what}: giving up after {failures} attempts: {e}"
                            ))));
                        }
                        let delay = backoff.next_delay();
                        tracing::warn!(
                            what,
                            failures,
                            retry_in_ms = delay.as_millis() as u64,
                            error = %e,
                            "clickhouse insert failed; holding the batch and retrying"
                        );
                        self.report(ComponentHealth::Degraded(format!(
                            "insert failing ({failures} attempts): {e}"
                        )));
                        tokio::time::sleep(delay).await;
                    }
                },
            }
        }
    }

    /// Insert `rows`, bisecting rejected chunks down to single rows; returns the rejected rows.
    async fn store_rows(
        &self,
        rows: Vec<EvaluationRow>,
    ) -> Result<Vec<Rejected<EvaluationRow>>, SinkError> {
        let mut rejected = Vec::new();
        let mut pending: Vec<Vec<EvaluationRow>> = vec![rows];
        while let Some(chunk) = pending.pop() {
            if chunk.is_empty() {
                continue;
            }
            let result = self
                .with_retries("evaluations", || self.insert_evaluations(&chunk))
                .await;
            match result {
                Ok(()) => {}
                Err(Err(fatal)) => return Err(fatal),
                Err(Ok(error)) if chunk.len() == 1 => {
                    for item in chunk {
                        tracing::warn!(event_id = %item.event_id, %error, "clickhouse rejected a row; dead-lettering it");
                        rejected.push(Rejected {
                            item,
                            error: error.clone(),
                        });
                    }
                }
                Err(Ok(_)) => {
                    let mut left = chunk;
                    let right = left.split_off(left.len() / 2);
                    pending.push(right);
                    pending.push(left);
                }
            }
        }
        Ok(rejected)
    }

    /// Insert dead letters (with their server errors), bisecting rejected chunks; a dead letter
    /// the server rejects even alone is logged and dropped (there is nowhere left to put it).
    async fn store_dead_letters(
        &self,
        letters: Vec<(DeadLetter, String)>,
    ) -> Result<(), SinkError> {
        let mut pending = vec![letters];
        while let Some(chunk) = pending.pop() {
            if chunk.is_empty() {
                continue;
            }
            match self
                .with_retries("dead_letters", || self.insert_dead_letters(&chunk))
                .await
            {
                Ok(()) => {}
                Err(Err(fatal)) => return Err(fatal),
                Err(Ok(error)) if chunk.len() == 1 => {
                    for (letter, _) in &chunk {
                        tracing::error!(source = %letter.source, %error, "clickhouse rejected a dead letter; dropping it");
                    }
                }
                Err(Ok(_)) => {
                    let mut left = chunk;
                    let right = left.split_off(left.len() / 2);
                    pending.push(right);
                    pending.push(left);
                }
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Sink for ClickHouseSink {
    async fn write(&mut self, batch: Batch) -> Result<(), SinkError> {
        let Batch { rows, dead_letters } = batch;
        let rejected = self.store_rows(rows).await?;
        let mut letters: Vec<(DeadLetter, String)> = dead_letters
            .into_iter()
            .map(|d| (d, String::new()))
            .collect();
        for r in rejected {
            let payload =
                serde_json::to_vec(&r.item).map_err(|e| SinkError::Serialize(e.to_string()))?;
            let letter = DeadLetter::new(
                format!("clickhouse:{}:{}", self.settings.table, r.item.event_id),
                "rejected by clickhouse",
                &payload,
            );
            letters.push((letter, r.error));
        }
        self.store_dead_letters(letters).await
    }
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

/// The durable judge verdict store in ClickHouse (`judge_cache`): shared by every replica and
/// surviving restarts. Values are opaque JSON text; the newest `created_at` wins for a key
/// (ReplacingMergeTree, read with `FINAL`). The LLM client reaches it through
/// [`crate::sink::judge_cache::ClickHouseJudgeCache`], which adds batching, time limits and
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
    pub fn new(settings: &ClickHouseSettings) -> JudgeCacheStore {
        let timeout = Duration::from_millis(settings.request_timeout_ms.max(1));
        JudgeCacheStore {
            client: settings.client(),
            table: "judge_cache".into(),
            read_timeout: timeout,
            write_timeout: timeout,
        }
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
            Ok(result) => result.map_err(|e| SinkError::Store(format!("judge_cache get: {e}"))),
            Err(_) => Err(SinkError::Store(format!(
                "judge_cache get: no answer within {} ms",
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
            Ok(result) => result.map_err(|e| SinkError::Store(format!("judge_cache put: {e}"))),
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

    #[test]
    fn exception_codes_are_parsed_and_classified() {
        assert_eq!(
            exception_code("Code: 27, e.displayText() = DB::Exception: Cannot parse input"),
            Some(27)
        );
        assert_eq!(exception_code("no code here"), None);
        let rejected =
            clickhouse::error::Error::BadResponse("Code: 53. DB::Exception: Type mismatch".into());
        assert_eq!(classify(&rejected), FailureKind::RejectedData);
        let overloaded = clickhouse::error::Error::BadResponse(
            "Code: 252. DB::Exception: Too many parts".into(),
        );
        assert_eq!(classify(&overloaded), FailureKind::Transient);
        assert_eq!(
            classify(&clickhouse::error::Error::TimedOut),
            FailureKind::Transient
        );
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(350));
        let delays: Vec<u128> = (0..4).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(delays, vec![100, 200, 350, 350]);
    }

    #[test]
    fn secrets_are_not_in_debug_output() {
        let s = ClickHouseSettings {
            url: "https://alice:hunter2@ch.example:8443".into(),
            password: Some("s3cret".into()),
            ..ClickHouseSettings::default()
        };
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("hunter2"),
            "{shown}"
        );
        assert!(shown.contains("ch.example:8443"));
    }

    #[test]
    fn timestamps_clamp_into_datetime_range() {
        assert_eq!(epoch_seconds("1970-01-01T00:00:10Z"), Some(10));
        assert_eq!(epoch_seconds("1900-01-01T00:00:00Z"), Some(0));
        assert_eq!(epoch_seconds("not a time"), None);
    }
}
