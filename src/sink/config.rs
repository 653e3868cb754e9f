//! `[sink]`: where rows and dead letters go (a JSONL directory, ClickHouse — one server or a
//! cluster — or stdout), with the writer's batching and retry settings and redaction.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::settings::{Secret, redact_url};

/// Sink kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    /// `evaluations.jsonl` + `dead_letters.jsonl` in a directory.
    #[default]
    Jsonl,
    /// ClickHouse tables.
    Clickhouse,
    /// JSON lines on standard output.
    Stdout,
}

/// `[sink]`. Its `Debug` hides the password and a password inside the URL.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SinkConfig {
    /// `jsonl` | `clickhouse` | `stdout`.
    pub kind: SinkKind,
    /// Output directory of the JSONL sink.
    pub dir: PathBuf,
    /// ClickHouse HTTP URL.
    pub url: Option<String>,
    /// ClickHouse database.
    pub database: String,
    /// ClickHouse user.
    pub user: Option<String>,
    /// ClickHouse password (secret).
    pub password: Option<Secret>,
    /// A batch is written once it holds this many rows plus dead letters.
    pub batch_rows: usize,
    /// … or roughly this many bytes (input payload bytes plus a fixed estimate per row).
    pub batch_bytes: usize,
    /// … or when its oldest entry has waited this long.
    pub flush_interval_ms: u64,
    /// Batches being written at once, at most, where the sink allows it (ClickHouse; the JSONL
    /// and stdout sinks append in order and write one at a time). Batches are still
    /// acknowledged in order, each only once it and every batch before it are stored.
    pub inflight_batches: usize,
    /// ClickHouse: first retry delay after a transient failure (doubles per attempt).
    pub retry_initial_ms: u64,
    /// ClickHouse: largest retry delay.
    pub retry_max_ms: u64,
    /// ClickHouse: give up (and fail the run) after retrying this long; 0 = retry until the
    /// server is back.
    pub retry_give_up_ms: u64,
    /// ClickHouse: per-request timeout.
    pub request_timeout_ms: u64,
    /// ClickHouse cluster layout (`[sink.cluster]`); unset = one server.
    pub cluster: ClusterConfig,
    /// Store each scored event's question, enriched question, SQL (and gold SQL) beside its
    /// rows (`inputs.jsonl`, ClickHouse `event_inputs`), so the review page (`sqlgrade serve`)
    /// can show them. Turn off when the inputs must not be kept.
    pub store_inputs: bool,
}

/// `[sink.cluster]`: the daemon writes and reads through `Distributed` tables named like the
/// single-server ones (`sqlgrade migrate --cluster NAME` creates them; `deploy/clickhouse/README.md`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// The cluster's name in the servers' `remote_servers`; unset = a single server.
    pub name: Option<String>,
    /// ZooKeeper path of each replicated table: `{shard}` is the servers' macro, `{database}` and
    /// `{table}` are filled in by `migrate`.
    pub replica_path: String,
    /// Replica name of each replicated table (a servers' macro by default).
    pub replica_name: String,
    /// Write through the `Distributed` tables synchronously (`insert_distributed_sync = 1`): an
    /// insert returns — and offsets are committed — only once every shard has its rows. `false`
    /// lets the node queue rows for other shards on its disk first (faster, but a node lost
    /// before it forwards them loses acknowledged rows).
    pub insert_sync: bool,
    /// Where the daemon writes evaluation rows: through the `Distributed` tables, or straight
    /// into each shard's local table.
    pub write: ClusterWrite,
    /// With `write = "shards"`: the HTTP URLs of each shard's replicas, one list per shard in the
    /// order of the cluster's `remote_servers` (all shards of weight 1). A row goes to shard
    /// `cityHash64(event_id) % shards` — the `Distributed` tables' own rule — trying its replicas
    /// in turn.
    pub shard_urls: Vec<Vec<String>>,
}

impl fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shard_urls: Vec<Vec<String>> = self
            .shard_urls
            .iter()
            .map(|shard| shard.iter().map(|u| redact_url(u)).collect())
            .collect();
        f.debug_struct("ClusterConfig")
            .field("name", &self.name)
            .field("replica_path", &self.replica_path)
            .field("replica_name", &self.replica_name)
            .field("insert_sync", &self.insert_sync)
            .field("write", &self.write)
            .field("shard_urls", &shard_urls)
            .finish()
    }
}

/// `[sink.cluster] write`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClusterWrite {
    /// Insert into the `Distributed` tables of `sink.url`: the server routes rows to the shards
    /// (no topology in the daemon's config; one extra hop per row).
    #[default]
    Distributed,
    /// Insert each shard's rows into its local table on one of `shard_urls`' replicas: no hop
    /// and no forwarding queue, but the daemon must know the topology.
    Shards,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            name: None,
            replica_path: "/clickhouse/tables/{shard}/{database}/{table}".into(),
            replica_name: "{replica}".into(),
            insert_sync: true,
            write: ClusterWrite::Distributed,
            shard_urls: Vec::new(),
        }
    }
}

impl fmt::Debug for SinkConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SinkConfig")
            .field("kind", &self.kind)
            .field("dir", &self.dir)
            .field("url", &self.url.as_deref().map(redact_url))
            .field("database", &self.database)
            .field("user", &self.user)
            .field("password", &self.password)
            .field("batch_rows", &self.batch_rows)
            .field("batch_bytes", &self.batch_bytes)
            .field("flush_interval_ms", &self.flush_interval_ms)
            .field("inflight_batches", &self.inflight_batches)
            .field("retry_initial_ms", &self.retry_initial_ms)
            .field("retry_max_ms", &self.retry_max_ms)
            .field("retry_give_up_ms", &self.retry_give_up_ms)
            .field("request_timeout_ms", &self.request_timeout_ms)
            .field("cluster", &self.cluster)
            .field("store_inputs", &self.store_inputs)
            .finish()
    }
}

impl SinkConfig {
    /// What is wrong with this section alone (each a sentence naming the key); the rules that
    /// span sections stay in `Config::validate`.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        match self.kind {
            SinkKind::Jsonl if self.dir.as_os_str().is_empty() => {
                problems.push("sink.dir is required for sink.kind = \"jsonl\"".to_string());
            }
            SinkKind::Clickhouse if self.url.as_deref().is_none_or(str::is_empty) => {
                problems.push("sink.url is required for sink.kind = \"clickhouse\"".to_string());
            }
            _ => {}
        }
        if let Some(name) = &self.cluster.name
            && (name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        {
            problems.push(format!(
                "sink.cluster.name {name:?} must be a plain identifier (letters, digits, '_')"
            ));
        }
        if self.cluster.write == ClusterWrite::Shards
            && (self.cluster.name.is_none()
                || self.cluster.shard_urls.is_empty()
                || self.cluster.shard_urls.iter().any(Vec::is_empty))
        {
            problems.push(
            "sink.cluster.write = \"shards\" needs sink.cluster.name and a non-empty list of replica URLs per shard in sink.cluster.shard_urls"
                .to_string(),
        );
        }
        if self.cluster.name.is_some() && !self.cluster.replica_path.contains("{table}") {
            problems.push(
            "sink.cluster.replica_path must contain {table} (each table needs its own ZooKeeper path)"
                .to_string(),
        );
        }
        if self.batch_rows == 0 {
            problems.push("sink.batch_rows must be at least 1".to_string());
        }
        if self.batch_bytes == 0 {
            problems.push("sink.batch_bytes must be at least 1".to_string());
        }
        if self.flush_interval_ms == 0 {
            problems.push("sink.flush_interval_ms must be at least 1".to_string());
        }
        problems
    }
}

impl Default for SinkConfig {
    fn default() -> Self {
        SinkConfig {
            kind: SinkKind::Jsonl,
            dir: PathBuf::from("sqlgrade-out"),
            url: None,
            database: "sqlgrade".into(),
            user: None,
            password: None,
            batch_rows: 1000,
            batch_bytes: 4 * 1024 * 1024,
            flush_interval_ms: 1000,
            inflight_batches: 2,
            retry_initial_ms: 100,
            retry_max_ms: 5_000,
            retry_give_up_ms: 0,
            request_timeout_ms: 30_000,
            cluster: ClusterConfig::default(),
            store_inputs: true,
        }
    }
}
