//! ClickHouse sink: evaluation rows into `evaluations`, the scored events' inputs into
//! `event_inputs` (for the review page), dead letters into `dead_letters`.
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
//! Writes are idempotent: `evaluations` is a `ReplacingMergeTree` whose sorting key (migration
//! 011: run, app, agent, agent version — each '' when absent — metric, event time, event id) is
//! a function of the event and the metric, so a batch re-sent after a timeout or redelivered
//! after a crash collapses on merge (queries read it with `FINAL`). On a cluster the same insert
//! goes through the `Distributed` table of that name, synchronously unless
//! `[clickhouse.cluster] insert_sync = false`. Client schema validation is off
//! (`with_validation(false)`) so that the crate works with ClickHouse 18.16 as well as current
//! servers; the row types below mirror the columns of `deploy/clickhouse/` (001, 002 and the
//! migrations that add to them; `finding_codes` is sent, computed as its DEFAULT would be).
//!
//! On a cluster with `[clickhouse.cluster] write = "shards"` the sink routes each row itself to the
//! shard the `Distributed` table would pick ([`shard_of`]: ClickHouse's `cityHash64(event_id)`
//! modulo the shard count) and inserts it into that shard's local table on the first replica
//! that answers.
//!
//! The password is only handed to the client; neither it nor the URL's userinfo is logged.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use compact_str::CompactString;
use futures::future::BoxFuture;
use serde::Serialize;

use super::rowbinary;
use super::{
    Backoff, DEAD_LETTERS_TABLE, EVALUATIONS_TABLE, EVENT_INPUTS_TABLE, FailureKind, classify,
};
use super::{INSERT_COMPRESSION, epoch_seconds, now_seconds};
use crate::evaluation::{DeadLetter, EvaluationRow};
use crate::review::EventInputs;
use crate::stores::clickhouse::config::{ClickHouseConfig, ClusterWrite};
use crate::stores::{Batch, Sink, SinkError};
use crate::telemetry::health::{ComponentHealth, Health};

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
    details: std::borrow::Cow<'a, str>,
    quality_tier: Option<&'a str>,
    filter_status: Option<&'a str>,
    semantic_verdict: Option<&'a str>,
    confidence: Option<f64>,
    confidence_tier: Option<&'a str>,
    sigma_filters: Option<u8>,
    sigma_verdict: Option<u8>,
    leniency: Option<u8>,
    rules_fired: &'a [CompactString],
    enrichment_status: Option<&'a str>,
    judge: Option<&'a str>,
    judge_cached: Option<u8>,
    prompt_version: Option<&'a str>,
    rules_version: Option<&'a str>,
    prompt_tokens: u64,
    completion_tokens: u64,
    latency_us: u64,
    scored_at: u32,
    selection: &'a str,
    inclusion_probability: Option<f64>,
    revised_value: Option<f64>,
    revised_verdict: Option<&'a str>,
    /// `run_id` or '' (part of the sorting key since migration 010).
    run_key: &'a str,
    /// `app_id`, `agent_id`, `agent_version` or '' (the sorting key since migration 011).
    app_key: &'a str,
    agent_key: &'a str,
    version_key: &'a str,
    /// The codes of the row's findings (migration 012). The column's DEFAULT computes the same
    /// from `details` with a regular expression on the server; sending it saves ClickHouse that
    /// work on every inserted row.
    finding_codes: Vec<std::borrow::Cow<'a, str>>,
    /// Which judge produced the verdict (migration 015); '' on rows of other metrics.
    judge_identity: &'a str,
    /// The line-rate row's probability that people call the query correct (migration 016).
    p_correct: Option<f64>,
    /// `stef_judged`: the revised line-rate row's `p_correct` and verdict (migration 016).
    revised_p_correct: Option<f64>,
    revised_correct: Option<u8>,
}

const NO_RULES: &[CompactString] = &[];

impl<'a> EvaluationRecord<'a> {
    /// The record of `row`; `ts` is its event time in seconds (see [`EventTimes`]).
    fn new(row: &'a EvaluationRow, ts: u32, scored_at: u32) -> EvaluationRecord<'a> {
        let stef = row.stef.as_ref();
        let judged = row.judged.as_ref();
        let details = row.details.json_text();
        // Borrowed from the row's rendered details (no allocation per code); owned only for
        // details held as a value tree, whose text is rendered here.
        let finding_codes = match &details {
            std::borrow::Cow::Borrowed(text) => finding_codes(text)
                .into_iter()
                .map(std::borrow::Cow::Borrowed)
                .collect(),
            std::borrow::Cow::Owned(text) => finding_codes(text)
                .into_iter()
                .map(|code| std::borrow::Cow::Owned(code.to_string()))
                .collect(),
        };
        EvaluationRecord {
            event_id: &row.event_id,
            ts,
            app_id: row.app_id.as_deref(),
            agent_id: row.agent_id.as_deref(),
            agent_version: row.agent_version.as_deref(),
            model: row.model.as_deref(),
            run_id: row.run_id.as_deref(),
            metric: row.metric.as_str(),
            value: row.value,
            verdict: row.verdict.map(u8::from),
            status: row.status.as_str(),
            details,
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
            selection: judged.map_or("", |j| j.selection.as_str()),
            inclusion_probability: judged.and_then(|j| j.inclusion_probability),
            revised_value: judged.map(|j| j.revised_value),
            revised_verdict: judged.map(|j| j.revised_verdict.as_str()),
            run_key: row.run_id.as_deref().unwrap_or(""),
            app_key: row.app_id.as_deref().unwrap_or(""),
            agent_key: row.agent_id.as_deref().unwrap_or(""),
            version_key: row.agent_version.as_deref().unwrap_or(""),
            finding_codes,
            judge_identity: stef.map_or("", |s| s.judge_identity.as_str()),
            p_correct: stef.and_then(|s| s.p_correct),
            revised_p_correct: judged.and_then(|j| j.revised_p_correct),
            revised_correct: judged.and_then(|j| j.revised_correct).map(u8::from),
        }
    }
}

/// Event times in seconds, parsed once per run of rows with the same RFC 3339 text (an event's
/// rows share it, and a batch holds them together).
struct EventTimes<'a> {
    last: Option<(&'a str, u32)>,
    /// What an unparseable time becomes (the insert's time).
    fallback: u32,
}

impl<'a> EventTimes<'a> {
    fn new(fallback: u32) -> EventTimes<'a> {
        EventTimes {
            last: None,
            fallback,
        }
    }

    fn seconds(&mut self, ts: &'a str) -> u32 {
        match self.last {
            Some((text, seconds)) if text == ts => seconds,
            _ => {
                let seconds = epoch_seconds(ts).unwrap_or(self.fallback);
                self.last = Some((ts, seconds));
                seconds
            }
        }
    }
}

/// What `extractAll(details, '"code":"([a-z_0-9]+)","severity"')` (the DEFAULT of
/// `evaluations.finding_codes`, migration 012) returns for `details`: every finding's code, in
/// order. A `"code"` inside evidence text is escaped in the JSON (`\"code\"`), so it never
/// matches.
fn finding_codes(details: &str) -> Vec<&str> {
    const OPEN: &str = "\"code\":\"";
    const CLOSE: &str = "\",\"severity\"";
    static FIND_OPEN: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(OPEN));
    let mut codes = Vec::new();
    let mut rest = details;
    while let Some(at) = FIND_OPEN.find(rest.as_bytes()) {
        let after = &rest[at + OPEN.len()..];
        let len = after
            .bytes()
            .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
            .count();
        if len > 0 && after[len..].starts_with(CLOSE) {
            codes.push(&after[..len]);
            rest = &after[len + CLOSE.len()..];
        } else {
            // As the regular expression does, try again one character further.
            rest = &rest[at + 1..];
        }
    }
    codes
}

/// The shard (0-based, of `shards` of weight 1) that a `Distributed` table sharded by
/// `cityHash64(event_id)` sends `event_id` to: ClickHouse's CityHash64 (v1.0.2) modulo the
/// shard count.
pub fn shard_of(event_id: &str, shards: usize) -> usize {
    (ch_cityhash102::cityhash64(event_id.as_bytes()) % shards.max(1) as u64) as usize
}

/// Rows per encoding thread in one wave of an insert (`insert_waves`): ~1.5 MiB of RowBinary for
/// line-rate rows, so a wave holds a few compressed chunks per thread.
pub const WAVE_ROWS_PER_THREAD: usize = 1_024;

/// The client's error for a row the sink could not encode: its text only, so the whole cause
/// chain goes into it.
fn encoding_failed(table: &str, error: &rowbinary::RowBinaryError) -> clickhouse::error::Error {
    let chain = crate::errors::error_chain(error);
    clickhouse::error::Error::Custom(format!("{table}: {chain}"))
}

/// The `evaluations` insert's body for `rows` ([`rowbinary::encode_chunks`]: RowBinary in
/// compressed chunks, on rayon's pool when `parallel`); `scored_at` is the insert's time in
/// seconds, which also stands in for an event time that does not parse.
pub fn encode_evaluations(
    rows: &[&EvaluationRow],
    scored_at: u32,
    parallel: bool,
) -> Result<Vec<rowbinary::Chunk>, rowbinary::RowBinaryError> {
    rowbinary::encode_chunks(
        rows,
        INSERT_COMPRESSION,
        parallel,
        || EventTimes::new(scored_at),
        |times, row, out| {
            let ts = times.seconds(&row.ts);
            rowbinary::encode_into(&EvaluationRecord::new(row, ts, scored_at), out)
        },
    )
}

/// The `event_inputs` insert's body for `inputs`, as [`encode_evaluations`] does.
pub fn encode_inputs(
    inputs: &[EventInputs],
    stored_at: u32,
    parallel: bool,
) -> Result<Vec<rowbinary::Chunk>, rowbinary::RowBinaryError> {
    rowbinary::encode_chunks(
        inputs,
        INSERT_COMPRESSION,
        parallel,
        || (),
        |_, item, out| rowbinary::encode_into(&EventInputsRecord::new(item, stored_at), out),
    )
}

/// `INSERT INTO table(columns of R) FORMAT RowBinary`, the statement the `clickhouse` crate's own
/// `Insert` sends: the column names back-quoted (they are the record types' field names, plain
/// identifiers; a test checks that none needs escaping).
fn insert_sql<R: clickhouse::Row>(table: &str) -> String {
    let mut sql = format!("INSERT INTO {table}(");
    for (i, name) in R::COLUMN_NAMES.iter().enumerate() {
        if i > 0 {
            sql.push(',');
        }
        sql.push('`');
        sql.push_str(name);
        sql.push('`');
    }
    sql.push_str(") FORMAT RowBinary");
    sql
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

/// One row of `event_inputs` (see 013_review.sql).
#[derive(Debug, clickhouse::Row, Serialize)]
struct EventInputsRecord<'a> {
    event_id: &'a str,
    ts: u32,
    app_id: Option<&'a str>,
    agent_id: Option<&'a str>,
    agent_version: Option<&'a str>,
    model: Option<&'a str>,
    run_id: Option<&'a str>,
    question: &'a str,
    enriched_question: Option<&'a str>,
    sql: &'a str,
    gold_sql: Option<&'a str>,
    stored_at: u32,
    result: String,
}

impl<'a> EventInputsRecord<'a> {
    fn new(inputs: &'a EventInputs, now: u32) -> EventInputsRecord<'a> {
        EventInputsRecord {
            event_id: &inputs.event_id,
            ts: epoch_seconds(&inputs.ts).unwrap_or(now),
            app_id: inputs.app_id.as_deref(),
            agent_id: inputs.agent_id.as_deref(),
            agent_version: inputs.agent_version.as_deref(),
            model: inputs.model.as_deref(),
            run_id: inputs.run_id.as_deref(),
            question: &inputs.question,
            enriched_question: inputs.enriched_question.as_deref(),
            sql: &inputs.sql,
            gold_sql: inputs.gold_sql.as_deref(),
            stored_at: now,
            result: inputs
                .result
                .as_ref()
                .and_then(|r| serde_json::to_string(r).ok())
                .unwrap_or_default(),
        }
    }
}

/// The ClickHouse [`Sink`].
pub struct ClickHouseSink {
    client: clickhouse::Client,
    /// With `[clickhouse.cluster] write = "shards"`: a client per replica of each shard.
    shards: Vec<Vec<clickhouse::Client>>,
    settings: ClickHouseConfig,
    health: Option<Arc<Health>>,
    /// Encode and compress a batch's rows on rayon's pool ([`rowbinary::encode_chunks`]);
    /// [`crate::stores::parallel_encoding`] unless set.
    parallel_encoding: bool,
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
    /// A sink on the `[clickhouse]` server (credentials, retries, timeouts). Connects lazily
    /// (the first write).
    pub fn new(settings: &ClickHouseConfig) -> ClickHouseSink {
        let shards = match settings.cluster.write {
            ClusterWrite::Shards if settings.cluster.name.is_some() => settings
                .cluster
                .shard_urls
                .iter()
                .map(|replicas| {
                    replicas
                        .iter()
                        .map(|url| {
                            let replica = ClickHouseConfig {
                                url: Some(url.clone()),
                                ..settings.clone()
                            };
                            super::client(&replica)
                        })
                        .collect()
                })
                .collect(),
            _ => Vec::new(),
        };
        ClickHouseSink {
            client: super::client(settings),
            shards,
            settings: settings.clone(),
            health: None,
            parallel_encoding: crate::stores::parallel_encoding(),
        }
    }

    /// Encode batches on rayon's pool (`true`) or on the writing task (`false`), whatever the
    /// core count says — for tests and benchmarks that compare the two.
    pub fn with_parallel_encoding(mut self, parallel: bool) -> ClickHouseSink {
        self.parallel_encoding = parallel;
        self
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
        if self.shards.is_empty() {
            let rows: Vec<&EvaluationRow> = rows.iter().collect();
            return self
                .insert_evaluations_into(&self.client, EVALUATIONS_TABLE, &rows)
                .await;
        }
        // Straight to the shards: each row to the shard the Distributed table would pick, into
        // its local table, on the first replica that takes it. A retry re-sends every shard's
        // rows; those already stored collapse with their copies (same sorting key).
        let mut by_shard: Vec<Vec<&EvaluationRow>> = vec![Vec::new(); self.shards.len()];
        for row in rows {
            by_shard[shard_of(&row.event_id, self.shards.len())].push(row);
        }
        let local = super::cluster::local_name(EVALUATIONS_TABLE);
        for (replicas, rows) in self.shards.iter().zip(by_shard) {
            if rows.is_empty() {
                continue;
            }
            let mut last_error = None;
            for client in replicas {
                match self.insert_evaluations_into(client, &local, &rows).await {
                    Ok(()) => {
                        last_error = None;
                        break;
                    }
                    Err(e) if classify(&e) == FailureKind::Transient => last_error = Some(e),
                    Err(e) => return Err(e),
                }
            }
            if let Some(e) = last_error {
                return Err(e);
            }
        }
        Ok(())
    }

    async fn insert_evaluations_into(
        &self,
        client: &clickhouse::Client,
        table: &str,
        rows: &[&EvaluationRow],
    ) -> clickhouse::error::Result<()> {
        let scored_at = now_seconds();
        let parallel = self.parallel_encoding;
        self.insert_waves::<EvaluationRecord<'_>, _>(client, table, rows, |wave| {
            encode_evaluations(wave, scored_at, parallel)
        })
        .await
    }

    async fn insert_inputs(&self, inputs: &[EventInputs]) -> clickhouse::error::Result<()> {
        let now = now_seconds();
        let parallel = self.parallel_encoding;
        self.insert_waves::<EventInputsRecord<'_>, _>(
            &self.client,
            EVENT_INPUTS_TABLE,
            inputs,
            |wave| encode_inputs(wave, now, parallel),
        )
        .await
    }

    /// One `INSERT INTO table(R's columns) FORMAT RowBinary` of `items`, encoded and compressed a
    /// wave of rows at a time ([`WAVE_ROWS_PER_THREAD`] per encoding thread: on rayon's pool when
    /// the sink encodes there) and each wave's chunks sent before the next is encoded, so what is
    /// held besides the rows is one wave's chunks, not the batch's body. A row that cannot be
    /// encoded ends the insert unfinished (the server drops it: nothing of it is stored) and
    /// fails it as rejected data (`Error::Custom`), so bisection dead-letters the row as it
    /// does rows the server rejects.
    async fn insert_waves<R: clickhouse::Row, T>(
        &self,
        client: &clickhouse::Client,
        table: &str,
        items: &[T],
        encode: impl Fn(&[T]) -> Result<Vec<rowbinary::Chunk>, rowbinary::RowBinaryError>,
    ) -> clickhouse::error::Result<()> {
        let threads = if self.parallel_encoding {
            rayon::current_num_threads()
        } else {
            1
        };
        let mut insert = client
            .insert_formatted_with(insert_sql::<R>(table))
            .with_timeouts(self.timeout(), self.timeout());
        for wave in items.chunks(WAVE_ROWS_PER_THREAD * threads) {
            let chunks = encode(wave).map_err(|e| encoding_failed(table, &e))?;
            for chunk in chunks {
                match chunk {
                    rowbinary::Chunk::Compressed(data) => insert.send_compressed(data).await?,
                    rowbinary::Chunk::Plain(data) => insert.send(data).await?,
                }
            }
        }
        insert.end().await
    }

    /// Insert event inputs, bisecting rejected chunks; returns the inputs the server rejects
    /// even alone (they become dead letters: the event's rows are stored, its inputs are not).
    async fn store_inputs(
        &self,
        inputs: Vec<EventInputs>,
    ) -> Result<Vec<Rejected<EventInputs>>, SinkError> {
        let rejected = self
            .store_bisecting(EVENT_INPUTS_TABLE, inputs, |sink, chunk| {
                Box::pin(sink.insert_inputs(chunk))
            })
            .await?;
        for r in &rejected {
            tracing::warn!(event_id = %r.item.event_id, error = %r.error, "clickhouse rejected an event's inputs; dead-lettering them");
        }
        Ok(rejected)
    }

    async fn insert_dead_letters(
        &self,
        letters: &[(DeadLetter, String)],
    ) -> clickhouse::error::Result<()> {
        let now = now_seconds();
        let parallel = self.parallel_encoding;
        self.insert_waves::<DeadLetterRecord<'_>, _>(
            &self.client,
            DEAD_LETTERS_TABLE,
            letters,
            |wave| {
                rowbinary::encode_chunks(
                    wave,
                    INSERT_COMPRESSION,
                    parallel,
                    || (),
                    |_, (letter, error), out| {
                        rowbinary::encode_into(&DeadLetterRecord::new(letter, error, now), out)
                    },
                )
            },
        )
        .await
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
                            return Err(Err(SinkError::backend(
                                format!("{what}: giving up after {failures} attempts"),
                                e,
                            )));
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

    /// Insert `items` with `insert`, retrying transient failures with backoff and bisecting
    /// chunks the server rejects down to single items; returns the items rejected even alone,
    /// each with the server's error. `what` names the table in logs and errors; `insert` writes
    /// one chunk through the sink it is given.
    async fn store_bisecting<T: Send + 'static>(
        &self,
        what: &str,
        items: Vec<T>,
        insert: impl for<'a> Fn(&'a Self, &'a [T]) -> BoxFuture<'a, clickhouse::error::Result<()>>,
    ) -> Result<Vec<Rejected<T>>, SinkError> {
        let mut rejected = Vec::new();
        let mut pending: Vec<Vec<T>> = vec![items];
        while let Some(chunk) = pending.pop() {
            if chunk.is_empty() {
                continue;
            }
            match self.with_retries(what, || insert(self, &chunk)).await {
                Ok(()) => self.release(chunk),
                Err(Err(fatal)) => return Err(fatal),
                Err(Ok(error)) if chunk.len() == 1 => {
                    rejected.extend(chunk.into_iter().map(|item| Rejected {
                        item,
                        error: error.clone(),
                    }));
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

    /// Free stored items: on rayon's pool when the sink encodes there (from 4 cores on) and the
    /// chunk is big, so the writer task, which every batch crosses, does not spend ~1 µs per
    /// event freeing rows that the scoring threads allocated; here otherwise.
    fn release<T: Send + 'static>(&self, items: Vec<T>) {
        if self.parallel_encoding && items.len() >= rowbinary::MIN_ROWS_PER_ENCODER {
            rayon::spawn(move || {
                // rayon's prelude: the parallel-iterator traits, by the crate's own convention.
                use rayon::prelude::*;
                items.into_par_iter().for_each(drop);
            });
        }
    }

    /// Insert `rows`, bisecting rejected chunks down to single rows; returns the rejected rows.
    async fn store_rows(
        &self,
        rows: Vec<EvaluationRow>,
    ) -> Result<Vec<Rejected<EvaluationRow>>, SinkError> {
        let rejected = self
            .store_bisecting("evaluations", rows, |sink, chunk| {
                Box::pin(sink.insert_evaluations(chunk))
            })
            .await?;
        for r in &rejected {
            tracing::warn!(event_id = %r.item.event_id, error = %r.error, "clickhouse rejected a row; dead-lettering it");
        }
        Ok(rejected)
    }

    /// Insert dead letters (with their server errors), bisecting rejected chunks; a dead letter
    /// the server rejects even alone is logged and dropped (there is nowhere left to put it).
    async fn store_dead_letters(
        &self,
        letters: Vec<(DeadLetter, String)>,
    ) -> Result<(), SinkError> {
        let rejected = self
            .store_bisecting("dead_letters", letters, |sink, chunk| {
                Box::pin(sink.insert_dead_letters(chunk))
            })
            .await?;
        for r in &rejected {
            tracing::error!(source = %r.item.0.source, error = %r.error, "clickhouse rejected a dead letter; dropping it");
        }
        Ok(())
    }
}

#[async_trait]
impl Sink for ClickHouseSink {
    async fn write(&mut self, batch: Batch) -> Result<(), SinkError> {
        let Batch {
            rows,
            inputs,
            dead_letters,
        } = batch;
        let rejected_inputs = self.store_inputs(inputs).await?;
        let rejected = self.store_rows(rows).await?;
        let mut letters: Vec<(DeadLetter, String)> = dead_letters
            .into_iter()
            .map(|d| (d, String::new()))
            .collect();
        for r in rejected_inputs {
            let payload = serde_json::to_vec(&r.item).map_err(SinkError::Serialize)?;
            let letter = DeadLetter::new(
                format!("clickhouse:{EVENT_INPUTS_TABLE}:{}", r.item.event_id),
                "rejected by clickhouse",
                &payload,
            );
            letters.push((letter, r.error));
        }
        for r in rejected {
            let payload = serde_json::to_vec(&r.item).map_err(SinkError::Serialize)?;
            let letter = DeadLetter::new(
                format!("clickhouse:{EVALUATIONS_TABLE}:{}", r.item.event_id),
                "rejected by clickhouse",
                &payload,
            );
            letters.push((letter, r.error));
        }
        self.store_dead_letters(letters).await
    }

    /// Inserts are independent requests (every table deduplicates on its key), so a second
    /// writer is a copy sharing the HTTP clients and the health state.
    fn concurrent_writer(&self) -> Option<Box<dyn Sink>> {
        Some(Box::new(ClickHouseSink {
            client: self.client.clone(),
            shards: self.shards.clone(),
            settings: self.settings.clone(),
            health: self.health.clone(),
            parallel_encoding: self.parallel_encoding,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finding_codes_match_the_columns_default() {
        // The same details as tests/clickhouse_read_key.rs inserts and reads back through the
        // server's DEFAULT: a "code" inside evidence text does not count.
        let details = r#"{"findings":[{"code":"unknown_table","severity":"error","category":"schema","evidence":"table \"x\" with \"code\":\"fake\",\"severity\""},{"code":"ratio_integer_division","severity":"warning","category":"function","evidence":"A / B"}]}"#;
        assert_eq!(
            finding_codes(details),
            ["unknown_table", "ratio_integer_division"]
        );
        assert!(finding_codes("{}").is_empty());
        assert!(finding_codes(r#"{"code":"Upper","severity":"x"}"#).is_empty());
        assert!(finding_codes(r#"{"code":"","severity":"x"}"#).is_empty());
        // A failed match is retried one character on, like the regular expression.
        assert_eq!(
            finding_codes(r#"{"code":"a b","x":{"code":"c_1","severity":"info"}}"#),
            ["c_1"]
        );
        assert!(finding_codes(r#"{"code":"#).is_empty());
    }

    #[test]
    fn inserts_name_the_records_columns() {
        assert_eq!(
            insert_sql::<DeadLetterRecord<'_>>("dead_letters"),
            "INSERT INTO dead_letters(`received_at`,`source`,`reason`,`payload`,\
             `payload_encoding`,`error`) FORMAT RowBinary"
        );
        let evaluations = insert_sql::<EvaluationRecord<'_>>("evaluations");
        assert!(evaluations.starts_with("INSERT INTO evaluations(`event_id`,`ts`,`app_id`,"));
        assert!(evaluations.ends_with(",`finding_codes`,`judge_identity`,`p_correct`,`revised_p_correct`,`revised_correct`) FORMAT RowBinary"));
        let plain = |names: &[&str]| {
            names.iter().all(|n| {
                !n.is_empty()
                    && n.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            })
        };
        assert!(plain(
            <EvaluationRecord<'_> as clickhouse::Row>::COLUMN_NAMES
        ));
        assert!(plain(
            <EventInputsRecord<'_> as clickhouse::Row>::COLUMN_NAMES
        ));
        assert!(plain(
            <DeadLetterRecord<'_> as clickhouse::Row>::COLUMN_NAMES
        ));
    }

    #[test]
    fn an_encoding_error_keeps_its_causes_and_counts_as_rejected_data() {
        let error = rowbinary::RowBinaryError::Compress(clickhouse::error::Error::Compression(
            "block too large".into(),
        ));
        let failed = encoding_failed("evaluations", &error);
        let text = failed.to_string();
        assert!(
            text.contains("evaluations: compressing a RowBinary chunk: ")
                && text.contains("block too large"),
            "{text}"
        );
        assert_eq!(classify(&failed), FailureKind::RejectedData);
    }

    #[test]
    fn event_times_are_parsed_once_per_run_of_one_text() {
        let mut times = EventTimes::new(7);
        assert_eq!(times.seconds("1970-01-01T00:00:10Z"), 10);
        assert_eq!(times.seconds("1970-01-01T00:00:10Z"), 10);
        assert_eq!(times.seconds("1970-01-01T00:01:00Z"), 60);
        assert_eq!(times.seconds("not a time"), 7, "the insert's time");
        assert_eq!(times.seconds("1970-01-01T00:00:10Z"), 10);
    }

    #[test]
    fn shards_follow_clickhouse_city_hash() {
        // cityHash64('abc') and cityHash64('event-000123') as Debian's ClickHouse 18.16 computes
        // them (tests/clickhouse_cluster.rs checks where real rows land).
        assert_eq!(ch_cityhash102::cityhash64(b"abc"), 4220206313085259313);
        assert_eq!(
            ch_cityhash102::cityhash64(b"event-000123"),
            4873621956320177743
        );
        assert_eq!(shard_of("abc", 2), (4220206313085259313u64 % 2) as usize);
        assert_eq!(shard_of("anything", 1), 0);
    }

    #[test]
    fn timestamps_clamp_into_datetime_range() {
        assert_eq!(epoch_seconds("1970-01-01T00:00:10Z"), Some(10));
        assert_eq!(epoch_seconds("1900-01-01T00:00:00Z"), Some(0));
        assert_eq!(epoch_seconds("not a time"), None);
    }
}
