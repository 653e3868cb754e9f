//! `[sink]`: where rows and dead letters go — a JSONL directory, ClickHouse (the `[clickhouse]`
//! server or cluster), or stdout — with the writer's batching settings shared by every kind
//! (their defaults are the kind's own: ClickHouse merges every insert again and gains from
//! batches twice as large as an append needs, [`SinkKind::default_batch`]).
//!
//! The section is an enum of per-kind settings ([`SinkKind`]) in Rust and flat in the file
//! (`kind = "jsonl"` and `dir = "…"` side by side): it is read through [`SinkSection`], which
//! drops a key of another kind with a warning (`dir` with `kind = "clickhouse"`: a leftover, not
//! a typo — unknown keys are still refused) and keeps the ClickHouse connection keys older
//! configs wrote here for `Config::load` to move to `[clickhouse]`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use std::fmt;

use crate::config::settings::Secret;

/// Where rows go, with what only that kind needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkKind {
    /// `evaluations.jsonl` + `dead_letters.jsonl` (+ `inputs.jsonl`) in a directory.
    Jsonl(JsonlSinkConfig),
    /// ClickHouse tables on the `[clickhouse]` server.
    Clickhouse,
    /// JSON lines on standard output.
    Stdout,
}

impl Default for SinkKind {
    fn default() -> Self {
        SinkKind::Jsonl(JsonlSinkConfig::default())
    }
}

impl SinkKind {
    /// The kind's name in the config (`jsonl`, `clickhouse`, `stdout`).
    pub fn name(&self) -> &'static str {
        match self {
            SinkKind::Jsonl(_) => "jsonl",
            SinkKind::Clickhouse => "clickhouse",
            SinkKind::Stdout => "stdout",
        }
    }

    /// A JSONL directory sink at `dir`.
    pub fn jsonl(dir: impl Into<PathBuf>) -> SinkKind {
        SinkKind::Jsonl(JsonlSinkConfig { dir: dir.into() })
    }

    /// The batch this kind's writer closes at unless `sink.batch_rows` / `sink.batch_bytes`
    /// say otherwise: `(rows, bytes)`.
    ///
    /// ClickHouse: 50,000 rows or 64 MiB, so that a busy sink writes about one part a second
    /// per table, not several. Each insert is a part of `evaluations`, of `event_inputs` and of
    /// every materialized view's table, and the server merges them all again: 10,000 rows and
    /// 32 MiB halved ClickHouse's CPU per event against 5,000 rows and 4 MiB (which closed
    /// batches at ~2,000 rows); 25,000 rows cut it by another quarter, and 50,000 rows and
    /// 64 MiB (a batch of real events closes at ~46,000 rows on bytes, or on
    /// `flush_interval_ms` below ~46,000 events/s) by another 25-35 %, for ~40-60 MiB more
    /// resident memory. JSONL and stdout: 25,000 rows or 32 MiB. An append costs the same per
    /// row whatever the batch, and 64 MiB batches only held more (file → JSONL at the same
    /// speed, peak RSS 155-172 → 270-280 MiB). benches/README.md, "Batches of 10,000 rows",
    /// "Batches of 25,000 rows" and "Batches of 64 MiB".
    pub fn default_batch(&self) -> (usize, usize) {
        match self {
            SinkKind::Clickhouse => (50_000, 64 * 1024 * 1024),
            SinkKind::Jsonl(_) | SinkKind::Stdout => (25_000, 32 * 1024 * 1024),
        }
    }
}

/// `[sink] kind = "jsonl"`: its own key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonlSinkConfig {
    /// Output directory.
    pub dir: PathBuf,
}

impl Default for JsonlSinkConfig {
    fn default() -> Self {
        JsonlSinkConfig {
            dir: PathBuf::from(DEFAULT_DIR),
        }
    }
}

impl JsonlSinkConfig {
    /// What is wrong with these keys.
    pub fn problems(&self) -> Vec<String> {
        if self.dir.as_os_str().is_empty() {
            vec!["sink.dir is required for sink.kind = \"jsonl\"".to_string()]
        } else {
            Vec::new()
        }
    }
}

/// The JSONL sink's directory when `sink.dir` is not given.
pub const DEFAULT_DIR: &str = "sqlgrade-out";

/// `[sink]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "SinkSection", into = "SinkSection")]
pub struct SinkConfig {
    /// `jsonl` | `clickhouse` | `stdout`, with that kind's keys.
    pub kind: SinkKind,
    /// A batch is written once it holds this many rows plus dead letters (by default the
    /// kind's: [`SinkKind::default_batch`]).
    pub batch_rows: usize,
    /// … or roughly this many bytes (input payload bytes plus a fixed estimate per row).
    pub batch_bytes: usize,
    /// … or when its oldest entry has waited this long.
    pub flush_interval_ms: u64,
    /// Batches being written at once, at most, where the sink allows it (ClickHouse; the JSONL
    /// and stdout sinks append in order and write one at a time). Batches are still
    /// acknowledged in order, each only once it and every batch before it are stored.
    pub inflight_batches: usize,
    /// Store each scored event's question, enriched question, SQL (and gold SQL) beside its
    /// rows (`inputs.jsonl`, ClickHouse `event_inputs`), so the review page (`sqlgrade serve`)
    /// can show them. Turn off when the inputs must not be kept.
    pub store_inputs: bool,
    /// `[clickhouse]` keys written here by an older config; `Config::load` moves them.
    pub clickhouse_keys: ClickHouseKeys,
}

impl Default for SinkConfig {
    /// The JSONL sink's settings ([`SinkConfig::of_kind`] of the default kind).
    fn default() -> Self {
        SinkConfig::of_kind(SinkKind::default())
    }
}

impl SinkConfig {
    /// A sink of `kind` with every other key at its default; the batch is the kind's own
    /// ([`SinkKind::default_batch`]).
    pub fn of_kind(kind: SinkKind) -> SinkConfig {
        let (batch_rows, batch_bytes) = kind.default_batch();
        SinkConfig {
            kind,
            batch_rows,
            batch_bytes,
            flush_interval_ms: 1000,
            inflight_batches: 2,
            store_inputs: true,
            clickhouse_keys: ClickHouseKeys::default(),
        }
    }

    /// The JSONL directory, when rows go to one.
    pub fn dir(&self) -> Option<&std::path::Path> {
        match &self.kind {
            SinkKind::Jsonl(jsonl) => Some(&jsonl.dir),
            _ => None,
        }
    }

    /// What is wrong with this section alone (each a sentence naming the key); the rules that
    /// span sections stay in `Config::validate`.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = match &self.kind {
            SinkKind::Jsonl(jsonl) => jsonl.problems(),
            SinkKind::Clickhouse | SinkKind::Stdout => Vec::new(),
        };
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

/// `[sink]` as written in a file or the environment: every kind's keys side by side, and the
/// older place of the `[clickhouse]` keys. Read into [`SinkConfig`], which keeps the chosen
/// kind's keys (another kind's are dropped with a warning).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SinkSection {
    kind: SinkKindName,
    #[serde(skip_serializing_if = "Option::is_none")]
    dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    batch_rows: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    batch_bytes: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    flush_interval_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inflight_batches: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    store_inputs: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    database: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    password: Option<Secret>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_timeout_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_initial_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_max_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_give_up_ms: Option<u64>,
    #[serde(skip_serializing)]
    cluster: Option<config::Value>,
}

/// The `[clickhouse]` keys as an older config wrote them under `[sink]` (`sink.url`,
/// `[sink.cluster]`, …): each `None` unless written there. Its `Debug` names the keys given,
/// never their values.
#[derive(Clone, Default, PartialEq)]
pub struct ClickHouseKeys {
    /// `sink.url`.
    pub url: Option<String>,
    /// `sink.database`.
    pub database: Option<String>,
    /// `sink.user`.
    pub user: Option<String>,
    /// `sink.password`.
    pub password: Option<Secret>,
    /// `sink.request_timeout_ms`.
    pub request_timeout_ms: Option<u64>,
    /// `sink.retry_initial_ms`.
    pub retry_initial_ms: Option<u64>,
    /// `sink.retry_max_ms`.
    pub retry_max_ms: Option<u64>,
    /// `sink.retry_give_up_ms`.
    pub retry_give_up_ms: Option<u64>,
    /// `[sink.cluster]`, as written (`[clickhouse.cluster]`'s type lives with ClickHouse, a
    /// layer above this one; `ClickHouseConfig::adopt_sink_keys` reads it).
    pub cluster: Option<config::Value>,
}

impl fmt::Debug for ClickHouseKeys {
    /// The names of the keys given, never their values (the URL and password are secrets).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let given = [
            ("sink.url", self.url.is_some()),
            ("sink.database", self.database.is_some()),
            ("sink.user", self.user.is_some()),
            ("sink.password", self.password.is_some()),
            ("sink.request_timeout_ms", self.request_timeout_ms.is_some()),
            ("sink.retry_initial_ms", self.retry_initial_ms.is_some()),
            ("sink.retry_max_ms", self.retry_max_ms.is_some()),
            ("sink.retry_give_up_ms", self.retry_give_up_ms.is_some()),
            ("sink.cluster", self.cluster.is_some()),
        ];
        f.debug_set()
            .entries(given.iter().filter(|(_, set)| *set).map(|(name, _)| name))
            .finish()
    }
}

impl ClickHouseKeys {
    /// Whether none is set.
    pub fn is_empty(&self) -> bool {
        *self == ClickHouseKeys::default()
    }
}

/// `sink.kind` as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum SinkKindName {
    #[default]
    Jsonl,
    Clickhouse,
    Stdout,
}

impl From<SinkSection> for SinkConfig {
    fn from(section: SinkSection) -> Self {
        let dir_given = section.dir.is_some();
        let kind = match section.kind {
            SinkKindName::Jsonl => SinkKind::Jsonl(JsonlSinkConfig {
                dir: section.dir.unwrap_or_else(|| PathBuf::from(DEFAULT_DIR)),
            }),
            SinkKindName::Clickhouse => SinkKind::Clickhouse,
            SinkKindName::Stdout => SinkKind::Stdout,
        };
        let defaults = SinkConfig::of_kind(kind.clone());
        if dir_given && !matches!(kind, SinkKind::Jsonl(_)) {
            // A leftover of another kind (a file's jsonl settings with the kind overridden
            // from the environment, say) costs nothing: say so, go on.
            tracing::warn!(
                "sink.dir is a key of sink.kind = \"jsonl\", not of sink.kind = \"{}\": ignored",
                kind.name()
            );
        }
        SinkConfig {
            kind,
            batch_rows: section.batch_rows.unwrap_or(defaults.batch_rows),
            batch_bytes: section.batch_bytes.unwrap_or(defaults.batch_bytes),
            flush_interval_ms: section
                .flush_interval_ms
                .unwrap_or(defaults.flush_interval_ms),
            inflight_batches: section
                .inflight_batches
                .unwrap_or(defaults.inflight_batches),
            store_inputs: section.store_inputs.unwrap_or(defaults.store_inputs),
            clickhouse_keys: ClickHouseKeys {
                url: section.url,
                database: section.database,
                user: section.user,
                password: section.password,
                request_timeout_ms: section.request_timeout_ms,
                retry_initial_ms: section.retry_initial_ms,
                retry_max_ms: section.retry_max_ms,
                retry_give_up_ms: section.retry_give_up_ms,
                cluster: section.cluster,
            },
        }
    }
}

impl From<SinkConfig> for SinkSection {
    fn from(config: SinkConfig) -> Self {
        let (kind, dir) = match config.kind {
            SinkKind::Jsonl(jsonl) => (SinkKindName::Jsonl, Some(jsonl.dir)),
            SinkKind::Clickhouse => (SinkKindName::Clickhouse, None),
            SinkKind::Stdout => (SinkKindName::Stdout, None),
        };
        let keys = config.clickhouse_keys;
        SinkSection {
            kind,
            dir,
            batch_rows: Some(config.batch_rows),
            batch_bytes: Some(config.batch_bytes),
            flush_interval_ms: Some(config.flush_interval_ms),
            inflight_batches: Some(config.inflight_batches),
            store_inputs: Some(config.store_inputs),
            url: keys.url,
            database: keys.database,
            user: keys.user,
            password: keys.password,
            request_timeout_ms: keys.request_timeout_ms,
            retry_initial_ms: keys.retry_initial_ms,
            retry_max_ms: keys.retry_max_ms,
            retry_give_up_ms: keys.retry_give_up_ms,
            cluster: keys.cluster,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<SinkConfig, String> {
        toml::from_str::<SinkConfig>(text).map_err(|e| e.to_string())
    }

    #[test]
    fn each_kind_takes_its_own_keys() {
        assert_eq!(read("").unwrap().kind, SinkKind::jsonl(DEFAULT_DIR));
        assert_eq!(read("dir = \"out\"").unwrap().kind, SinkKind::jsonl("out"));
        let clickhouse = read("kind = \"clickhouse\"\nbatch_rows = 7").unwrap();
        assert_eq!(clickhouse.kind, SinkKind::Clickhouse);
        assert_eq!(clickhouse.batch_rows, 7);
        // Another kind's key is a leftover, dropped (with a warning); an unknown key is refused.
        for (kind, expected) in [
            ("clickhouse", SinkKind::Clickhouse),
            ("stdout", SinkKind::Stdout),
        ] {
            let sink = read(&format!("kind = \"{kind}\"\ndir = \"out\"")).unwrap();
            assert_eq!(sink.kind, expected);
        }
        assert!(read("kind = \"jsonl\"\nnope = 1").is_err());
    }

    #[test]
    fn each_kind_batches_by_its_own_default_unless_told() {
        let clickhouse = read("kind = \"clickhouse\"").unwrap();
        assert_eq!(
            (clickhouse.batch_rows, clickhouse.batch_bytes),
            (50_000, 64 * 1024 * 1024)
        );
        for text in ["", "kind = \"jsonl\"", "kind = \"stdout\""] {
            let sink = read(text).unwrap();
            assert_eq!(
                (sink.batch_rows, sink.batch_bytes),
                (25_000, 32 * 1024 * 1024)
            );
        }
        assert_eq!(
            SinkConfig::default(),
            SinkConfig::of_kind(SinkKind::default())
        );
        // A key given wins over the kind's default, for either key alone.
        let sink = read("kind = \"clickhouse\"\nbatch_bytes = 1024").unwrap();
        assert_eq!((sink.batch_rows, sink.batch_bytes), (50_000, 1024));
        let sink = read("kind = \"jsonl\"\nbatch_rows = 50000").unwrap();
        assert_eq!(
            (sink.batch_rows, sink.batch_bytes),
            (50_000, 32 * 1024 * 1024)
        );
    }

    #[test]
    fn older_clickhouse_keys_are_kept_for_the_config_to_move() {
        let sink = read(
            "kind = \"clickhouse\"\nurl = \"http://ch:8123\"\nretry_max_ms = 9\n[cluster]\nname = \"c\"",
        )
        .unwrap();
        assert_eq!(sink.clickhouse_keys.url.as_deref(), Some("http://ch:8123"));
        assert_eq!(sink.clickhouse_keys.retry_max_ms, Some(9));
        assert!(sink.clickhouse_keys.cluster.is_some());
        assert!(read("").unwrap().clickhouse_keys.is_empty());
    }

    #[test]
    fn written_and_read_back_unchanged() {
        for kind in [
            SinkKind::jsonl("x/y"),
            SinkKind::Clickhouse,
            SinkKind::Stdout,
        ] {
            let sink = SinkConfig {
                kind,
                batch_rows: 3,
                store_inputs: false,
                ..SinkConfig::default()
            };
            let text = toml::to_string(&sink).unwrap();
            assert_eq!(read(&text).unwrap(), sink, "{text}");
        }
    }

    #[test]
    fn problems_name_the_key() {
        let sink = SinkConfig {
            kind: SinkKind::jsonl(""),
            batch_rows: 0,
            ..SinkConfig::default()
        };
        let problems = sink.problems().join("\n");
        assert!(problems.contains("sink.dir is required"), "{problems}");
        assert!(problems.contains("sink.batch_rows"), "{problems}");
    }
}
