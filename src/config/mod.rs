//! Layered configuration: built-in defaults, then an optional TOML file, then the environment
//! (`SQLGRADE__SECTION__KEY`, separator `__`), loaded through the `config` crate.
//!
//! Every setting is declared here once, typed, and components take their section directly
//! (`[sink]` → the ClickHouse client and sink, `[judge]` → the LLM client, …); there is no
//! second "settings" struct per component.
//!
//! Every key has a default, so `sqlgrade run` works without a file. [`Config::validate`] checks the
//! cross-field rules that serde cannot express, and [`Config::to_redacted_toml`] renders the
//! effective configuration for `check-config` with every secret replaced by [`REDACTED`].
//! Secrets are held in [`Secret`], whose `Debug` never shows the value, so they cannot leak
//! through logging.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::evaluation::Metric;
use crate::metrics::ex::ExConvention;

pub mod alerts;
mod observability;
mod secret;

pub use alerts::{AlertsConfig, SeriesLabel};
pub use observability::{ServerSettings, TelemetryConfig};
use secret::redact;
pub use secret::{REDACTED, Secret, is_secret_key, redact_url};

/// Environment variable prefix (`SQLGRADE__JUDGE__BASE_URL` → `judge.base_url`).
pub const ENV_PREFIX: &str = "SQLGRADE";

/// Separator between prefix, section and key in environment variable names.
pub const ENV_SEPARATOR: &str = "__";

/// Default maximum SQL size scored, in bytes (larger SQL gets status `sql_too_large`).
pub const DEFAULT_MAX_SQL_BYTES: usize = crate::sqlspec::DEFAULT_MAX_SQL_BYTES;

/// Why configuration could not be loaded or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read or a value has the wrong type / an unknown key.
    #[error("cannot load configuration: {0}")]
    Load(String),
    /// The configuration parsed but breaks one or more rules.
    #[error("invalid configuration:\n  - {}", .0.join("\n  - "))]
    Invalid(Vec<String>),
    /// The effective configuration could not be rendered.
    #[error("cannot render configuration: {0}")]
    Render(String),
}

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where events come from.
    pub source: SourceConfig,
    /// Where rows and dead letters go.
    pub sink: SinkConfig,
    /// Who supplies the STEF question understanding and verdict.
    pub judge: JudgeConfig,
    /// Per-app rule profiles.
    pub rules: RulesConfig,
    /// The line-rate STEF score: schema catalogues for its checks.
    pub stef: StefConfig,
    /// Gold-metric databases.
    pub gold: GoldConfig,
    /// Topology knobs.
    pub pipeline: PipelineConfig,
    /// Health endpoint (`/healthz`, `/readyz`).
    pub server: ServerSettings,
    /// Score-drop alerting (`[alerts]`).
    pub alerts: AlertsConfig,
    /// OpenTelemetry metrics export (`[telemetry]`).
    pub telemetry: TelemetryConfig,
}

/// Source kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// A JSONL file (optionally tailed).
    #[default]
    File,
    /// Kafka topics through a consumer group.
    Kafka,
    /// JSONL on standard input.
    Stdin,
}

/// `[source]`. Its `Debug` redacts secret-looking `kafka_properties` (SASL passwords).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourceConfig {
    /// `file` | `kafka` | `stdin`.
    pub kind: SourceKind,
    /// JSONL file for `kind = "file"`.
    pub path: PathBuf,
    /// Keep tailing the file after EOF (like `tail -f`).
    pub follow: bool,
    /// Kafka bootstrap servers (`host:port,host:port`).
    pub brokers: Option<String>,
    /// Kafka topics to consume (a list, or a comma-separated string from the environment).
    #[serde(deserialize_with = "string_or_list")]
    pub topics: Vec<String>,
    /// Kafka consumer group.
    pub group_id: String,
    /// Kafka static group membership (librdkafka `group.instance.id`, KIP-345): a stable name
    /// for this member (in Kubernetes, the StatefulSet pod's name). A member that restarts
    /// with the same id within the session timeout takes its own partitions back without a
    /// rebalance of the others. Unique per process: a second process with the same id fences
    /// the first (a fatal error; that process stops consuming and exits non-zero).
    pub group_instance_id: Option<String>,
    /// Kafka topic for dead letters (when unset, dead letters go to the sink).
    pub dead_letter_topic: Option<String>,
    /// Extra librdkafka properties passed through verbatim (`"security.protocol" = "SSL"`).
    /// Underscores in keys are read as dots, so they can be set from the environment too.
    #[serde(deserialize_with = "kafka_properties")]
    pub kafka_properties: BTreeMap<String, String>,
    /// Kafka: messages handed out and not yet written by the sink, at most (back-pressure).
    pub max_in_flight: usize,
    /// Kafka: how often completed offsets are committed.
    pub commit_interval_ms: u64,
}

impl fmt::Debug for SourceConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let properties: BTreeMap<&str, &str> = self
            .kafka_properties
            .iter()
            .map(|(k, v)| {
                let shown = if is_secret_key(k) {
                    REDACTED
                } else {
                    v.as_str()
                };
                (k.as_str(), shown)
            })
            .collect();
        f.debug_struct("SourceConfig")
            .field("kind", &self.kind)
            .field("path", &self.path)
            .field("follow", &self.follow)
            .field("brokers", &self.brokers)
            .field("topics", &self.topics)
            .field("group_id", &self.group_id)
            .field("group_instance_id", &self.group_instance_id)
            .field("dead_letter_topic", &self.dead_letter_topic)
            .field("kafka_properties", &properties)
            .field("max_in_flight", &self.max_in_flight)
            .field("commit_interval_ms", &self.commit_interval_ms)
            .finish()
    }
}

impl Default for SourceConfig {
    fn default() -> Self {
        SourceConfig {
            kind: SourceKind::File,
            path: PathBuf::from("examples/events.jsonl"),
            follow: false,
            brokers: None,
            topics: Vec::new(),
            group_id: "sqlgrade".into(),
            group_instance_id: None,
            dead_letter_topic: None,
            kafka_properties: BTreeMap::new(),
            max_in_flight: 20_000,
            commit_interval_ms: 1_000,
        }
    }
}

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

/// The smallest `judge.max_tokens` accepted: below it no reply schema fits (tests of the cut-off
/// path use the smallest value).
pub const MIN_JUDGE_MAX_TOKENS: u32 = 8;

/// `[judge] response_mode`: how structured output is requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseModeSetting {
    /// Start with `json_schema`, step down on rejection, remember per endpoint.
    #[default]
    Auto,
    /// Always `response_format: {type: json_schema}`.
    JsonSchema,
    /// Always `response_format: {type: json_object, schema}`.
    JsonObject,
    /// No `response_format`: the JSON object is taken from the text.
    PlainText,
}

/// `[judge] system_prompt`: where the prompt's instructions go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SystemPromptSetting {
    /// A `system` message, then the `user` message with the data.
    #[default]
    System,
    /// One `user` message: the instructions, a blank line, the data. For models and chat
    /// templates without a system role (Gemma on llama-cpp-python's `--chat_format gemma`, which
    /// drops system messages).
    InUser,
}

/// Judge kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JudgeKind {
    /// The built-in deterministic judge (no network).
    #[default]
    Deterministic,
    /// An OpenAI-compatible chat-completions endpoint.
    Llm,
}

/// Where the LLM judge keeps verdicts beyond its in-memory cache (`judge.durable_cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DurableCacheMode {
    /// ClickHouse `judge_cache` when the sink is ClickHouse (the server is already there and
    /// migrated); none otherwise.
    #[default]
    Auto,
    /// ClickHouse `judge_cache` on the `[sink]` server (`sink.url`, `database`, `user`,
    /// `password`), whatever the sink kind.
    Clickhouse,
    /// No durable cache: the in-memory cache, then the LLM.
    Off,
}

impl DurableCacheMode {
    /// Whether this mode, with a sink of kind `sink`, uses ClickHouse `judge_cache`.
    pub fn uses_clickhouse(self, sink: SinkKind) -> bool {
        match self {
            DurableCacheMode::Auto => sink == SinkKind::Clickhouse,
            DurableCacheMode::Clickhouse => true,
            DurableCacheMode::Off => false,
        }
    }
}

/// `[judge]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JudgeConfig {
    /// `deterministic` | `llm`.
    pub kind: JudgeKind,
    /// Base URL of the OpenAI-compatible endpoint (`…/v1`).
    pub base_url: String,
    /// Model name sent to the endpoint.
    pub model: String,
    /// Name of the environment variable that holds the API key (the key itself is never in the
    /// file).
    pub api_key_env: String,
    /// An API key given inline (secret; prefer `api_key_env`).
    pub api_key: Option<Secret>,
    /// Per-process request rate limit (global quota divided by replicas).
    pub max_requests_per_second: f64,
    /// Requests in flight at once.
    pub max_concurrency: usize,
    /// Per-request timeout.
    pub timeout_ms: u64,
    /// Retries on 429/5xx/timeouts before falling back to the deterministic judge.
    pub max_retries: u32,
    /// Entries in the in-memory verdict cache.
    pub cache_capacity: u64,
    /// Time to live of an in-memory verdict-cache entry, in seconds.
    pub cache_ttl_secs: u64,
    /// Estimated prompt tokens per minute (prompt length / 4); 0 disables the limit.
    pub max_tokens_per_minute: u32,
    /// Requests the limiter lets go at once after a quiet spell; 0 = 1 (`llm::limits::Pacing`
    /// says how the rate is paced and what a one-second window can hold).
    pub rate_burst: u32,
    /// Directory of prompt templates overriding the built-in `prompts/` (none: built-in).
    pub prompts_dir: Option<PathBuf>,
    /// Durable verdict cache after the in-memory one (`auto` | `clickhouse` | `off`).
    pub durable_cache: DurableCacheMode,
    /// Longest wait for one durable-cache lookup; a slower answer counts as a miss.
    pub durable_cache_timeout_ms: u64,
    /// Durable-cache entries written per INSERT at most (verdicts are queued and written in
    /// the background).
    pub durable_cache_write_batch: usize,
    /// After a failed durable-cache lookup or insert: how long lookups are skipped (immediate
    /// misses) and a failed batch waits before it is retried.
    pub durable_cache_retry_ms: u64,
    /// Durable-cache entries waiting to be written at most; beyond it new entries are dropped
    /// and counted (a lost cache write only costs a future LLM call).
    pub durable_cache_max_queued: usize,
    /// First backoff delay before a retry, doubling per retry with jitter. Not a configuration
    /// key (fixed in production; tests shorten it).
    #[serde(skip)]
    pub backoff_initial_ms: u64,
    /// Largest backoff delay. Not a configuration key.
    #[serde(skip)]
    pub backoff_max_ms: u64,
    /// Largest `Retry-After` honoured (longer hints are clamped). Not a configuration key.
    #[serde(skip)]
    pub retry_after_max_ms: u64,
    /// Completion tokens one call may produce, at most: sent as `max_tokens`, or as
    /// `max_completion_tokens` to a server that rejects `max_tokens` (OpenAI's reasoning models).
    /// A reply cut off at the cap (`finish_reason = "length"`) gets one repair turn, then is a
    /// `judge_error` saying so. The default leaves every reply schema room (a STEF judgment
    /// takes ~300) and bounds a model that rambles or reasons at length.
    pub max_tokens: u32,
    /// How structured output is asked for: `auto` starts with `json_schema` and steps down
    /// (`json_object` with the schema, then plain text) when the endpoint rejects it; a named
    /// mode is used as it is, and a rejection of it is an error.
    pub response_mode: ResponseModeSetting,
    /// Where the instructions go: a `system` message (default) or the start of the `user`
    /// message (`in_user`, for chat templates without a system role).
    pub system_prompt: SystemPromptSetting,
    /// Which events the LLM judge sees and what it may spend (`[judge.budget]`).
    pub budget: JudgeBudgetConfig,
}

/// `[judge.budget]`: the second, LLM-judged pass. Every event gets its line-rate STEF row from
/// the deterministic path; the LLM judge sees the uniform slice plus, within the quota
/// (`judge.max_requests_per_second`, `judge.max_tokens_per_minute`) and the daily caps here,
/// the priority slices. The budget is per process: with R replicas give each `1/R` of the quota
/// and of the daily caps (the uniform slice needs no division: each replica applies the same
/// rate to its own share of the traffic).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JudgeBudgetConfig {
    /// Share of events in the uniform slice, in [0, 1] (decided by a hash of `event_id` and
    /// `salt`, the same on every replica and redelivery). The calibrated estimates rest on it.
    pub uniform_rate: f64,
    /// Salt of the uniform hash.
    pub salt: String,
    /// Priority slice: the line-rate verdict is not `correct`.
    pub priority_not_correct: bool,
    /// Priority slice: the line-rate confidence tier is `low`.
    pub priority_low_confidence: bool,
    /// Priority slice: the line-rate quality tier is `poor`.
    pub priority_poor_tier: bool,
    /// Priority slice: the first this-many events of a new (app, agent, agent_version, model);
    /// 0 = off.
    pub priority_new_series: u64,
    /// Priority slice: events of a series an alert currently fires on (needs `[alerts]`).
    pub priority_alerting: bool,
    /// Priority work is offered to the judge stage at most this many times
    /// `judge.max_requests_per_second` (per process, one second of burst); beyond it, selected
    /// priority events are shed at once (`priority_over_rate`) instead of queued — or produced to
    /// the work topic — only to be shed later. The uniform slice is never limited here. 0 = no
    /// limit.
    pub priority_offer_factor: f64,
    /// Judgments sent to the LLM per UTC day; 0 = no cap.
    pub max_requests_per_day: u64,
    /// Prompt plus completion tokens per UTC day; 0 = no cap.
    pub max_tokens_per_day: u64,
    /// Cost per UTC day (at the prices below); 0 = no cap.
    pub max_cost_per_day: f64,
    /// Price per 1,000 prompt tokens.
    pub price_input_per_1k: f64,
    /// Price per 1,000 completion tokens.
    pub price_output_per_1k: f64,
    /// Work waiting for the judge, at most (in-process queue); beyond it the least important is
    /// shed.
    pub queue_capacity: usize,
    /// Work older than this is shed (`stale`) instead of judged late.
    pub max_wait_ms: u64,
    /// At shutdown, how long the judge stage may still work through its queue; what is left is
    /// counted (`shutdown`) and reported (with Kafka it stays in the work topic). Capped at a
    /// third of `pipeline.shutdown_timeout_ms`, so the whole shutdown fits in that limit.
    pub drain_grace_ms: u64,
    /// Kafka source: the judge-work topic selected events are produced to and the judge stage
    /// consumes (group `<source.group_id>-judge`), so judging survives crashes and spreads over
    /// replicas. Unset: an in-process queue.
    pub work_topic: Option<String>,
}

impl Default for JudgeBudgetConfig {
    fn default() -> Self {
        JudgeBudgetConfig {
            uniform_rate: 0.05,
            salt: String::new(),
            priority_not_correct: true,
            priority_low_confidence: true,
            priority_poor_tier: true,
            priority_new_series: 20,
            priority_alerting: true,
            priority_offer_factor: 2.0,
            max_requests_per_day: 0,
            max_tokens_per_day: 0,
            max_cost_per_day: 0.0,
            price_input_per_1k: 0.0,
            price_output_per_1k: 0.0,
            queue_capacity: 10_000,
            max_wait_ms: 600_000,
            drain_grace_ms: 8_000,
            work_topic: None,
        }
    }
}

impl JudgeBudgetConfig {
    /// Problems with the section (`prefix` names it in messages).
    fn problems(&self, prefix: &str) -> Vec<String> {
        let mut problems = Vec::new();
        if !(self.uniform_rate.is_finite() && (0.0..=1.0).contains(&self.uniform_rate)) {
            problems.push(format!(
                "{prefix}.uniform_rate must be between 0 and 1, not {}",
                self.uniform_rate
            ));
        }
        for (key, value) in [
            ("priority_offer_factor", self.priority_offer_factor),
            ("max_cost_per_day", self.max_cost_per_day),
            ("price_input_per_1k", self.price_input_per_1k),
            ("price_output_per_1k", self.price_output_per_1k),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                problems.push(format!("{prefix}.{key} must be a number ≥ 0, not {value}"));
            }
        }
        if self.max_cost_per_day > 0.0
            && self.price_input_per_1k == 0.0
            && self.price_output_per_1k == 0.0
        {
            problems.push(format!(
                "{prefix}.max_cost_per_day needs prices ({prefix}.price_input_per_1k, \
                 price_output_per_1k): without them every call costs 0"
            ));
        }
        if self.queue_capacity == 0 {
            problems.push(format!("{prefix}.queue_capacity must be at least 1"));
        }
        if self.max_wait_ms == 0 {
            problems.push(format!("{prefix}.max_wait_ms must be at least 1"));
        }
        if self
            .work_topic
            .as_deref()
            .is_some_and(|t| t.trim().is_empty())
        {
            problems.push(format!("{prefix}.work_topic must not be empty when set"));
        }
        problems
    }
}

impl JudgeConfig {
    /// The per-request timeout.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.timeout_ms)
    }
}

impl Default for JudgeConfig {
    fn default() -> Self {
        JudgeConfig {
            kind: JudgeKind::Deterministic,
            base_url: "https://api.openai.com/v1".into(),
            model: "gpt-4o-mini".into(),
            api_key_env: "OPENAI_API_KEY".into(),
            api_key: None,
            max_requests_per_second: 5.0,
            max_concurrency: 8,
            timeout_ms: 30_000,
            max_retries: 3,
            cache_capacity: 100_000,
            cache_ttl_secs: 24 * 3600,
            max_tokens_per_minute: 0,
            rate_burst: 0,
            prompts_dir: None,
            durable_cache: DurableCacheMode::Auto,
            durable_cache_timeout_ms: 1_000,
            durable_cache_write_batch: 500,
            durable_cache_retry_ms: 5_000,
            durable_cache_max_queued: 10_000,
            backoff_initial_ms: 250,
            backoff_max_ms: 10_000,
            retry_after_max_ms: 60_000,
            max_tokens: 2_048,
            response_mode: ResponseModeSetting::Auto,
            system_prompt: SystemPromptSetting::System,
            budget: JudgeBudgetConfig::default(),
        }
    }
}

/// `[rules]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RulesConfig {
    /// Directory of `<app_id>.toml` rule profiles.
    pub dir: PathBuf,
    /// How often the directory is checked for changed profiles (0 = never reload).
    pub reload_interval_ms: u64,
}

impl Default for RulesConfig {
    fn default() -> Self {
        RulesConfig {
            dir: PathBuf::from("rules"),
            reload_interval_ms: 2000,
        }
    }
}

/// `[stef]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StefConfig {
    /// Schema catalogues for every app (an app's `catalogue` in its rule profile comes first):
    /// Spider/BIRD `tables.json` files, SQLite files (introspected read-only; the file's stem
    /// is its `db_id`) or the JSON/TOML catalogue form. An event's schema is the one its
    /// `db_id` (else `gold.db_id`) names; a catalogue of one database serves events without a
    /// `db_id`. Reloaded when a file changes (every `rules.reload_interval_ms`).
    pub catalogues: Vec<PathBuf>,
    /// A read-only replica to probe, laid out as `<db_id>/<db_id>.sqlite` (like
    /// `gold.databases`): for events whose catalogue schema was found and whose database is
    /// here, the checks ask whether the query returns rows and whether its literals occur in
    /// their columns. Unset = no probes.
    pub probe_databases: Option<PathBuf>,
    /// Time limit of one probe query (ms); a probe past it concludes nothing
    /// (`probe_inconclusive`).
    pub probe_timeout_ms: u64,
    /// Probe queries running at the same time.
    pub probe_workers: usize,
}

impl Default for StefConfig {
    fn default() -> Self {
        StefConfig {
            catalogues: Vec::new(),
            probe_databases: None,
            probe_timeout_ms: 200,
            probe_workers: 2,
        }
    }
}

/// `[gold]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GoldConfig {
    /// Directory laid out as `<db_id>/<db_id>.sqlite`; unset = gold metrics off (unless a
    /// benchmark backfill supplies its own).
    pub databases: Option<PathBuf>,
    /// Spider-format `tables.json` files with the schemas ESM/ESM+ need (databases missing from
    /// them are introspected from the SQLite files).
    pub tables: Vec<PathBuf>,
    /// EX convention: `bird` (set equality) or `spider` (test-suite: multiset, column
    /// permutations, order only when the gold orders).
    #[serde(with = "ex_convention_name")]
    pub ex_convention: ExConvention,
    /// Which gold metrics to compute (`ex`, `esm`, `esm_plus`, `etm`, `ts_ex`, `ts_ex_strict`, and the LLM-judged `flex`,
    /// `rose`, `hybrid_ex`); a list, or a comma-separated string from the environment.
    #[serde(deserialize_with = "gold_metric_list")]
    pub metrics: Vec<Metric>,
    /// Per-query execution time limit.
    pub timeout_ms: u64,
    /// Largest result a query may return, in rows.
    pub max_rows: usize,
    /// Queries executed at the same time (default: the number of CPUs).
    pub workers: usize,
    /// LLM-judged metrics: skip the judge where deterministic evidence decides (ESM+-equivalent
    /// prediction, prediction that fails to execute, identical result tables) and record why.
    pub avoidance: bool,
    /// FLEX: how execution results are rendered in the prompt (`paper` or `repo_v1`).
    pub flex_render: crate::metrics::flex::RenderPreset,
    /// FLEX: a second call classifies the error categories of incorrect verdicts.
    pub flex_error_categories: bool,
    /// ROSE: rows of each execution result shown in the prompts (the released code's 20).
    pub rose_preview_rows: usize,
    /// Hybrid-EX: verdict cut-off θ (pass iff score ≥ θ).
    pub hybrid_cutoff: f64,
    /// Hybrid-EX: default relative numeric tolerance δ0.
    pub hybrid_tolerance: f64,
    /// The LLM endpoint of `flex`, `rose` and `hybrid_ex` (same keys as `[judge]`, with
    /// `kind = "llm"`). Unset: they use `[judge]`, which must then be an LLM judge; the client
    /// (cache, limits) is shared with STEF whenever both name the same endpoint and model.
    pub judge: Option<JudgeConfig>,
}

/// Metrics accepted in `gold.metrics`.
pub const GOLD_METRICS: [Metric; 9] = [
    Metric::Ex,
    Metric::Esm,
    Metric::EsmPlus,
    Metric::Etm,
    Metric::TsEx,
    Metric::TsExStrict,
    Metric::Flex,
    Metric::Rose,
    Metric::HybridEx,
];

/// The LLM-judged gold metrics (need an LLM judge).
pub const JUDGED_GOLD_METRICS: [Metric; 3] = [Metric::Flex, Metric::Rose, Metric::HybridEx];

impl GoldConfig {
    /// Whether `metric` is switched on.
    pub fn has(&self, metric: Metric) -> bool {
        self.metrics.contains(&metric)
    }

    /// Whether any LLM-judged metric is switched on.
    pub fn wants_judged(&self) -> bool {
        JUDGED_GOLD_METRICS.iter().any(|m| self.has(*m))
    }
}

impl Default for GoldConfig {
    fn default() -> Self {
        GoldConfig {
            databases: None,
            tables: Vec::new(),
            ex_convention: ExConvention::Bird,
            metrics: vec![Metric::Ex, Metric::Esm, Metric::EsmPlus, Metric::Etm],
            timeout_ms: 30_000,
            max_rows: 1_000_000,
            workers: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            avoidance: true,
            flex_render: crate::metrics::flex::RenderPreset::Paper,
            flex_error_categories: false,
            rose_preview_rows: crate::metrics::rose::DEFAULT_PREVIEW_ROWS,
            hybrid_cutoff: crate::metrics::hybrid_ex::DEFAULT_CUTOFF,
            hybrid_tolerance: crate::metrics::hybrid_ex::DEFAULT_TOLERANCE,
            judge: None,
        }
    }
}

/// `[pipeline]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineConfig {
    /// Events scored concurrently (default: the number of CPUs).
    pub workers: usize,
    /// Capacity of each bounded channel between stages.
    pub channel_capacity: usize,
    /// Larger payloads are dead-lettered unread.
    pub max_event_bytes: usize,
    /// Larger SQL is not parsed (status `sql_too_large`).
    pub max_sql_bytes: usize,
    /// After SIGTERM/SIGINT, the longest the daemon takes to drain, flush, commit and exit,
    /// whatever is unreachable (broker, ClickHouse, the judge endpoint). Past it the process
    /// exits with status 3 and what was not written stays uncommitted (redelivered on the next
    /// start). The default fits Kubernetes' default 30 s grace period.
    pub shutdown_timeout_ms: u64,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            workers: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            channel_capacity: 1024,
            max_event_bytes: crate::event::DEFAULT_MAX_EVENT_BYTES,
            max_sql_bytes: DEFAULT_MAX_SQL_BYTES,
            shutdown_timeout_ms: 25_000,
        }
    }
}

impl Config {
    /// Defaults, then `file` (if given), then the process environment; validated.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        Self::load_with_env(file, None)
    }

    /// Like [`Config::load`], but with an explicit environment map instead of the process
    /// environment when `env` is `Some` (for tests).
    pub fn load_with_env(
        file: Option<&Path>,
        env: Option<HashMap<String, String>>,
    ) -> Result<Config, ConfigError> {
        let mut builder = config::Config::builder();
        if let Some(path) = file {
            builder = builder.add_source(
                config::File::from(path)
                    .format(config::FileFormat::Toml)
                    .required(true),
            );
        }
        builder = builder.add_source(
            config::Environment::with_prefix(ENV_PREFIX)
                .prefix_separator(ENV_SEPARATOR)
                .separator(ENV_SEPARATOR)
                .source(env),
        );
        let config: Config = builder
            .build()
            .and_then(|c| c.try_deserialize())
            .map_err(|e| ConfigError::Load(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Check the rules serde cannot express; lists every problem at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        match self.source.kind {
            SourceKind::File if self.source.path.as_os_str().is_empty() => {
                problems.push("source.path is required for source.kind = \"file\"".to_string());
            }
            SourceKind::Kafka => {
                if self
                    .source
                    .brokers
                    .as_deref()
                    .is_none_or(|b| b.trim().is_empty())
                {
                    problems
                        .push("source.brokers is required for source.kind = \"kafka\"".to_string());
                }
                if self.source.topics.iter().all(|t| t.trim().is_empty()) {
                    problems.push(
                        "source.topics must name at least one topic for source.kind = \"kafka\""
                            .to_string(),
                    );
                }
                if self.source.group_id.trim().is_empty() {
                    problems.push("source.group_id must not be empty".to_string());
                }
                if let Some(id) = &self.source.group_instance_id {
                    if id.trim().is_empty() {
                        problems.push(
                            "source.group_instance_id must not be empty when set (unset it for \
                             dynamic membership)"
                                .to_string(),
                        );
                    }
                    if self
                        .source
                        .kafka_properties
                        .get("group.instance.id")
                        .is_some_and(|given| given != id)
                    {
                        problems.push(
                            "source.group_instance_id and [source.kafka_properties] \
                             \"group.instance.id\" disagree: set only one"
                                .to_string(),
                        );
                    }
                }
                if self.source.max_in_flight == 0 {
                    problems.push("source.max_in_flight must be at least 1".to_string());
                }
                if self.source.commit_interval_ms == 0 {
                    problems.push("source.commit_interval_ms must be at least 1".to_string());
                }
            }
            _ => {}
        }
        problems.extend(self.gold_judge_problems());
        match self.sink.kind {
            SinkKind::Jsonl if self.sink.dir.as_os_str().is_empty() => {
                problems.push("sink.dir is required for sink.kind = \"jsonl\"".to_string());
            }
            SinkKind::Clickhouse if self.sink.url.as_deref().is_none_or(str::is_empty) => {
                problems.push("sink.url is required for sink.kind = \"clickhouse\"".to_string());
            }
            _ => {}
        }
        if let Some(name) = &self.sink.cluster.name
            && (name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        {
            problems.push(format!(
                "sink.cluster.name {name:?} must be a plain identifier (letters, digits, '_')"
            ));
        }
        if self.sink.cluster.write == ClusterWrite::Shards
            && (self.sink.cluster.name.is_none()
                || self.sink.cluster.shard_urls.is_empty()
                || self.sink.cluster.shard_urls.iter().any(Vec::is_empty))
        {
            problems.push(
                "sink.cluster.write = \"shards\" needs sink.cluster.name and a non-empty list of replica URLs per shard in sink.cluster.shard_urls"
                    .to_string(),
            );
        }
        if self.sink.cluster.name.is_some() && !self.sink.cluster.replica_path.contains("{table}") {
            problems.push(
                "sink.cluster.replica_path must contain {table} (each table needs its own ZooKeeper path)"
                    .to_string(),
            );
        }
        if self.sink.batch_rows == 0 {
            problems.push("sink.batch_rows must be at least 1".to_string());
        }
        if self.sink.batch_bytes == 0 {
            problems.push("sink.batch_bytes must be at least 1".to_string());
        }
        if self.sink.flush_interval_ms == 0 {
            problems.push("sink.flush_interval_ms must be at least 1".to_string());
        }
        if self.judge.kind == JudgeKind::Llm {
            if self.judge.base_url.trim().is_empty() {
                problems.push("judge.base_url is required for judge.kind = \"llm\"".to_string());
            }
            if self.judge.model.trim().is_empty() {
                problems.push("judge.model is required for judge.kind = \"llm\"".to_string());
            }
            if self.judge.durable_cache == DurableCacheMode::Clickhouse
                && self.sink.url.as_deref().is_none_or(|u| u.trim().is_empty())
            {
                problems.push(
                    "judge.durable_cache = \"clickhouse\" needs sink.url (the ClickHouse server \
                     holding judge_cache)"
                        .to_string(),
                );
            }
        }
        problems.extend(self.judge.budget.problems("judge.budget"));
        if self.judge.budget.work_topic.is_some() && self.source.kind != SourceKind::Kafka {
            problems.push(
                "judge.budget.work_topic needs source.kind = \"kafka\" (other sources use an \
                 in-process queue)"
                    .to_string(),
            );
        }
        if let Some(gold_judge) = &self.gold.judge
            && gold_judge.budget != JudgeBudgetConfig::default()
        {
            problems.push(
                "gold.judge.budget has no effect: the budget governs the STEF judge's second \
                 pass ([judge.budget]); LLM-judged gold metrics judge every event that carries \
                 gold data"
                    .to_string(),
            );
        }
        problems.extend(durable_cache_problems("judge", &self.judge));
        if !(self.judge.max_requests_per_second.is_finite()
            && self.judge.max_requests_per_second > 0.0)
        {
            problems.push("judge.max_requests_per_second must be a positive number".to_string());
        }
        if self.judge.max_concurrency == 0 {
            problems.push("judge.max_concurrency must be at least 1".to_string());
        }
        if self.judge.timeout_ms == 0 {
            problems.push("judge.timeout_ms must be at least 1".to_string());
        }
        if self.judge.max_tokens < MIN_JUDGE_MAX_TOKENS {
            problems.push(format!(
                "judge.max_tokens must be at least {MIN_JUDGE_MAX_TOKENS} (no reply schema fits in fewer)"
            ));
        }
        if self.stef.probe_timeout_ms == 0 {
            problems.push("stef.probe_timeout_ms must be at least 1".to_string());
        }
        if self.stef.probe_workers == 0 {
            problems.push("stef.probe_workers must be at least 1".to_string());
        }
        if self.pipeline.workers == 0 {
            problems.push("pipeline.workers must be at least 1".to_string());
        }
        if self.pipeline.channel_capacity == 0 {
            problems.push("pipeline.channel_capacity must be at least 1".to_string());
        }
        if self.pipeline.max_event_bytes == 0 {
            problems.push("pipeline.max_event_bytes must be at least 1".to_string());
        }
        if self.pipeline.max_sql_bytes == 0 {
            problems.push("pipeline.max_sql_bytes must be at least 1".to_string());
        }
        problems.extend(self.alerts.problems());
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(problems))
        }
    }

    /// The `[judge]` settings the LLM-judged gold metrics use: `[gold.judge]` when given, else
    /// `[judge]` when it is an LLM judge; `None` when neither is an LLM judge.
    pub fn gold_judge(&self) -> Option<&JudgeConfig> {
        match &self.gold.judge {
            Some(judge) => (judge.kind == JudgeKind::Llm).then_some(judge),
            None => (self.judge.kind == JudgeKind::Llm).then_some(&self.judge),
        }
    }

    /// Problems with the LLM-judged gold metrics' settings.
    fn gold_judge_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let gold = &self.gold;
        let judged: Vec<&str> = JUDGED_GOLD_METRICS
            .iter()
            .copied()
            .filter(|m| gold.has(*m))
            .map(Metric::as_str)
            .collect();
        if let Some(judge) = &gold.judge {
            problems.extend(durable_cache_problems("gold.judge", judge));
            if judge.durable_cache == DurableCacheMode::Clickhouse
                && self.sink.url.as_deref().is_none_or(|u| u.trim().is_empty())
            {
                problems.push(
                    "gold.judge.durable_cache = \"clickhouse\" needs sink.url (the ClickHouse \
                     server holding judge_cache; [gold.judge] uses the [sink] server)"
                        .to_string(),
                );
            }
            if judge.kind != JudgeKind::Llm {
                problems.push(
                    "gold.judge.kind must be \"llm\" ([gold.judge] is the LLM endpoint of flex, \
                     rose and hybrid_ex)"
                        .to_string(),
                );
            }
            if judge.base_url.trim().is_empty() {
                problems.push("gold.judge.base_url must not be empty".to_string());
            }
            if judge.model.trim().is_empty() {
                problems.push("gold.judge.model must not be empty".to_string());
            }
            if !(judge.max_requests_per_second.is_finite() && judge.max_requests_per_second > 0.0) {
                problems.push(
                    "gold.judge.max_requests_per_second must be a positive number".to_string(),
                );
            }
            if judge.max_concurrency == 0 {
                problems.push("gold.judge.max_concurrency must be at least 1".to_string());
            }
            if judge.timeout_ms == 0 {
                problems.push("gold.judge.timeout_ms must be at least 1".to_string());
            }
            if judge.max_tokens < MIN_JUDGE_MAX_TOKENS {
                problems.push(format!(
                    "gold.judge.max_tokens must be at least {MIN_JUDGE_MAX_TOKENS} (no reply schema fits in fewer)"
                ));
            }
        } else if !judged.is_empty() && self.judge.kind != JudgeKind::Llm {
            problems.push(format!(
                "gold.metrics includes {} (LLM-judged), but judge.kind is \"deterministic\": set \
                 [judge] kind = \"llm\", or give these metrics their own [gold.judge] section \
                 with kind = \"llm\"",
                judged.join(", ")
            ));
        }
        if !(1..=crate::metrics::rose::MAX_PREVIEW_ROWS).contains(&gold.rose_preview_rows) {
            problems.push(format!(
                "gold.rose_preview_rows must be between 1 and {}, not {}",
                crate::metrics::rose::MAX_PREVIEW_ROWS,
                gold.rose_preview_rows
            ));
        }
        if !(gold.hybrid_cutoff.is_finite() && (0.0..=1.0).contains(&gold.hybrid_cutoff)) {
            problems.push(format!(
                "gold.hybrid_cutoff must be between 0 and 1, not {}",
                gold.hybrid_cutoff
            ));
        }
        if !(gold.hybrid_tolerance.is_finite() && (0.0..=1.0).contains(&gold.hybrid_tolerance)) {
            problems.push(format!(
                "gold.hybrid_tolerance must be between 0 and 1 (relative), not {}",
                gold.hybrid_tolerance
            ));
        }
        problems
    }

    /// The effective configuration as TOML, with every secret replaced by [`REDACTED`]:
    /// `password`, `api_key`, secret-looking `kafka_properties`, and passwords inside URLs.
    pub fn to_redacted_toml(&self) -> Result<String, ConfigError> {
        let mut value =
            toml::Value::try_from(self).map_err(|e| ConfigError::Render(e.to_string()))?;
        redact(&mut value);
        toml::to_string_pretty(&value).map_err(|e| ConfigError::Render(e.to_string()))
    }
}

/// Problems with the durable-cache keys of a judge section (`judge` or `gold.judge`).
fn durable_cache_problems(section: &str, judge: &JudgeConfig) -> Vec<String> {
    let mut problems = Vec::new();
    if judge.durable_cache_timeout_ms == 0 {
        problems.push(format!(
            "{section}.durable_cache_timeout_ms must be at least 1"
        ));
    }
    if judge.durable_cache_write_batch == 0 {
        problems.push(format!(
            "{section}.durable_cache_write_batch must be at least 1"
        ));
    }
    if judge.durable_cache_retry_ms == 0 {
        problems.push(format!(
            "{section}.durable_cache_retry_ms must be at least 1"
        ));
    }
    if judge.durable_cache_max_queued < judge.durable_cache_write_batch {
        problems.push(format!(
            "{section}.durable_cache_max_queued ({}) must be at least \
             {section}.durable_cache_write_batch ({})",
            judge.durable_cache_max_queued, judge.durable_cache_write_batch
        ));
    }
    problems
}

fn string_or_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum StringOrList {
        One(String),
        Many(Vec<String>),
    }
    Ok(match StringOrList::deserialize(d)? {
        StringOrList::One(s) => s
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(String::from)
            .collect(),
        StringOrList::Many(v) => v,
    })
}

/// `gold.ex_convention` as the config names it: `bird` or `spider`.
mod ex_convention_name {
    use super::*;

    pub fn serialize<S: Serializer>(value: &ExConvention, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match value {
            ExConvention::Bird => "bird",
            ExConvention::SpiderTestSuite => "spider",
        })
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ExConvention, D::Error> {
        let name = String::deserialize(d)?;
        match name.as_str() {
            "bird" => Ok(ExConvention::Bird),
            "spider" => Ok(ExConvention::SpiderTestSuite),
            other => Err(serde::de::Error::custom(format!(
                "gold.ex_convention must be \"bird\" or \"spider\", not {other:?}"
            ))),
        }
    }
}

/// `gold.metrics`: names (a list, or a comma-separated string from the environment) of gold
/// metrics.
fn gold_metric_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Metric>, D::Error> {
    string_or_list(d)?
        .iter()
        .map(|name| {
            GOLD_METRICS
                .iter()
                .copied()
                .find(|m| m.as_str() == name)
                .ok_or_else(|| {
                    let expected: Vec<&str> = GOLD_METRICS.iter().map(|m| m.as_str()).collect();
                    serde::de::Error::custom(format!(
                        "gold.metrics: unknown metric {name:?} (expected {})",
                        expected.join(", ")
                    ))
                })
        })
        .collect()
}

fn kafka_properties<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    let raw = BTreeMap::<String, String>::deserialize(d)?;
    Ok(raw
        .into_iter()
        .map(|(k, v)| (k.replace('_', "."), v))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Option<HashMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn defaults_need_no_file() {
        let c = Config::load_with_env(None, env(&[])).unwrap();
        assert_eq!(c.source.kind, SourceKind::File);
        assert_eq!(c.source.path, PathBuf::from("examples/events.jsonl"));
        assert_eq!(c.sink.kind, SinkKind::Jsonl);
        assert_eq!(c.sink.dir, PathBuf::from("sqlgrade-out"));
        assert_eq!(c.judge.kind, JudgeKind::Deterministic);
        assert!(c.pipeline.workers >= 1);
    }

    #[test]
    fn file_then_env_override() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            r#"
            [source]
            kind = "kafka"
            brokers = "k1:9092"
            topics = ["agents"]
            [source.kafka_properties]
            "security.protocol" = "SSL"
            [sink]
            kind = "clickhouse"
            url = "http://ch:8123"
            password = "hunter2"
            [judge]
            max_requests_per_second = 2.5
            "#,
        )
        .unwrap();
        let c = Config::load_with_env(
            Some(&path),
            env(&[
                ("SQLGRADE__JUDGE__BASE_URL", "http://llm:8000/v1"),
                ("SQLGRADE__SOURCE__TOPICS", "a, b"),
                ("SQLGRADE__PIPELINE__WORKERS", "7"),
                ("SQLGRADE__SOURCE__FOLLOW", "true"),
                ("SQLGRADE__SOURCE__GROUP_ID", "007"),
                ("SQLGRADE__SOURCE__KAFKA_PROPERTIES__SASL_PASSWORD", "pw"),
                ("OTHER", "ignored"),
            ]),
        )
        .unwrap();
        assert_eq!(c.source.kind, SourceKind::Kafka);
        assert_eq!(c.source.topics, vec!["a", "b"]);
        assert_eq!(c.source.group_id, "007");
        assert!(c.source.follow);
        assert_eq!(c.judge.base_url, "http://llm:8000/v1");
        assert_eq!(c.judge.max_requests_per_second, 2.5);
        assert_eq!(c.pipeline.workers, 7);
        assert_eq!(
            c.sink.password.as_ref().map(Secret::expose),
            Some("hunter2")
        );
        assert_eq!(
            c.source
                .kafka_properties
                .get("security.protocol")
                .map(String::as_str),
            Some("SSL")
        );
        assert_eq!(
            c.source
                .kafka_properties
                .get("sasl.password")
                .map(String::as_str),
            Some("pw")
        );
    }

    #[test]
    fn unknown_keys_and_bad_kinds_are_rejected() {
        let err = Config::load_with_env(None, env(&[("SQLGRADE__SINK__KIND", "parquet")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("parquet"), "{err}");
        let err = Config::load_with_env(None, env(&[("SQLGRADE__JUDGE__MODLE", "x")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("modle"), "{err}");
    }

    #[test]
    fn validation_lists_all_problems() {
        let err = Config::load_with_env(
            None,
            env(&[
                ("SQLGRADE__SOURCE__KIND", "kafka"),
                ("SQLGRADE__PIPELINE__WORKERS", "0"),
            ]),
        )
        .unwrap_err();
        match err {
            ConfigError::Invalid(p) => {
                assert!(p.iter().any(|m| m.contains("source.brokers")), "{p:?}");
                assert!(p.iter().any(|m| m.contains("source.topics")), "{p:?}");
                assert!(p.iter().any(|m| m.contains("pipeline.workers")), "{p:?}");
            }
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn redaction_hides_every_secret() {
        let mut c = Config::default();
        c.sink.password = Some(Secret::new("hunter2"));
        c.sink.url = Some("http://admin:s3cr3t@ch:8123/".into());
        c.judge.api_key = Some(Secret::new("sk-live-abc"));
        c.source
            .kafka_properties
            .insert("sasl.password".into(), "kpw".into());
        c.source
            .kafka_properties
            .insert("security.protocol".into(), "SASL_SSL".into());
        let text = c.to_redacted_toml().unwrap();
        for secret in ["hunter2", "s3cr3t", "sk-live-abc", "kpw"] {
            assert!(!text.contains(secret), "{secret} leaked:\n{text}");
        }
        assert!(text.contains("SASL_SSL"));
        assert!(
            text.contains("OPENAI_API_KEY"),
            "api_key_env is not a secret"
        );
        assert!(text.contains("http://admin:<redacted>@ch:8123/"));
        assert!(!format!("{c:?}").contains("hunter2"));
        // The rendering is itself a loadable config (round trip).
        let back: Config = toml::from_str(&text).unwrap();
        assert_eq!(back.pipeline, c.pipeline);
    }

    #[test]
    fn judged_gold_metrics_need_an_llm_judge() {
        let metrics = ("SQLGRADE__GOLD__METRICS", "ex,rose,hybrid_ex");
        let load = |extra: &[(&str, &str)]| {
            let mut pairs = vec![metrics];
            pairs.extend_from_slice(extra);
            Config::load_with_env(None, env(&pairs))
        };
        let err = load(&[]).unwrap_err().to_string();
        assert!(
            err.contains("gold.metrics includes rose, hybrid_ex"),
            "{err}"
        );
        let c = load(&[("SQLGRADE__JUDGE__KIND", "llm")]).unwrap();
        assert_eq!(c.gold_judge(), Some(&c.judge));
        let c = load(&[
            ("SQLGRADE__GOLD__JUDGE__KIND", "llm"),
            ("SQLGRADE__GOLD__JUDGE__MODEL", "gpt-4o"),
        ])
        .unwrap();
        assert_eq!(c.gold_judge().map(|j| j.model.as_str()), Some("gpt-4o"));
        assert_eq!(c.judge.kind, JudgeKind::Deterministic);
        let err = load(&[("SQLGRADE__GOLD__JUDGE__MODEL", "gpt-4o")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("gold.judge.kind must be \"llm\""), "{err}");
        let err = load(&[
            ("SQLGRADE__JUDGE__KIND", "llm"),
            ("SQLGRADE__GOLD__HYBRID_CUTOFF", "1.5"),
            ("SQLGRADE__GOLD__HYBRID_TOLERANCE", "-1"),
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("gold.hybrid_cutoff") && err.contains("gold.hybrid_tolerance"));
        let err = Config::load_with_env(None, env(&[("SQLGRADE__GOLD__METRICS", "ex,bleu")]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"bleu\"") && err.contains("hybrid_ex"),
            "{err}"
        );
    }

    #[test]
    fn gold_judge_section_renders_redacted_and_round_trips() {
        let mut c = Config::default();
        c.gold.metrics.push(Metric::Flex);
        c.gold.flex_render = crate::metrics::flex::RenderPreset::RepoV1;
        c.gold.judge = Some(JudgeConfig {
            kind: JudgeKind::Llm,
            api_key: Some(Secret::new("sk-gold")),
            ..JudgeConfig::default()
        });
        c.validate().unwrap();
        let text = c.to_redacted_toml().unwrap();
        assert!(!text.contains("sk-gold"), "{text}");
        assert!(text.contains("[gold.judge]") && text.contains("flex_render = \"repo_v1\""));
        let back: Config = toml::from_str(&text).unwrap();
        assert_eq!(back.gold.flex_render, c.gold.flex_render);
        assert_eq!(back.gold.judge.map(|j| j.kind), Some(JudgeKind::Llm));
    }

    #[test]
    fn secrets_are_not_in_debug_output() {
        let sink = SinkConfig {
            url: Some("https://alice:hunter2@ch.example:8443".into()),
            password: Some(Secret::new("s3cret")),
            ..SinkConfig::default()
        };
        let shown = format!("{sink:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("hunter2"),
            "{shown}"
        );
        assert!(shown.contains("ch.example:8443"));
        let mut source = SourceConfig::default();
        source
            .kafka_properties
            .insert("sasl.password".into(), "kpw".into());
        source
            .kafka_properties
            .insert("security.protocol".into(), "SASL_SSL".into());
        let shown = format!("{source:?}");
        assert!(
            !shown.contains("kpw") && shown.contains("SASL_SSL"),
            "{shown}"
        );
    }

    #[test]
    fn url_redaction_leaves_plain_urls_alone() {
        assert_eq!(redact_url("http://ch:8123"), "http://ch:8123");
        assert_eq!(redact_url("http://user@ch:8123"), "http://user@ch:8123");
        assert_eq!(redact_url("not a url"), "not a url");
        assert_eq!(
            redact_url("https://u:p@w@h/x?y=1"),
            "https://u:<redacted>@h/x?y=1"
        );
    }
}
