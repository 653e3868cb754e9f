//! `[sink]`: where rows and dead letters go — a JSONL directory, ClickHouse (the `[clickhouse]`
//! server or cluster), or stdout — with the writer's batching settings shared by every kind
//! (their defaults are the kind's own: ClickHouse merges every insert again and gains from
//! batches twice as large as an append needs, [`SinkKind::default_batch`]).
//!
//! The section is an enum of per-kind settings ([`SinkKind`], each kind's keys a derived struct)
//! in Rust and flat in the file (`kind = "jsonl"` and `dir = "…"` side by side): it is read by
//! [`WrittenSection`], which drops a key of another kind with a warning (`dir` with
//! `kind = "clickhouse"`: a leftover, not a typo — unknown keys are still refused), and keeps
//! the ClickHouse connection keys older configs wrote here ([`ClickHouseKeys`]) for
//! `Config::load` to move to `[clickhouse]`.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize};

pub use crate::stores::jsonl::config::{DEFAULT_DIR, JsonlSinkConfig};

use crate::settings::{ReadSection, Secret, SectionError, WrittenSection};

/// Where rows go, with what only that kind needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
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
    /// speed, peak RSS 155-172 → 270-280 MiB). CHANGELOG.md, "Batches of 10,000 rows",
    /// "Batches of 25,000 rows" and "Batches of 64 MiB".
    pub fn default_batch(&self) -> (usize, usize) {
        match self {
            SinkKind::Clickhouse => (50_000, 64 * 1024 * 1024),
            SinkKind::Jsonl(_) | SinkKind::Stdout => (25_000, 32 * 1024 * 1024),
        }
    }
}

crate::kinded_settings!(SinkKind {
    Jsonl(JsonlSinkConfig) = "jsonl",
    Clickhouse = "clickhouse",
    Stdout = "stdout",
});

/// `[sink]`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
// Every key has a default (what the schema says; reading is `ReadSection`'s).
#[serde(default)]
pub struct SinkConfig {
    /// `jsonl` | `clickhouse` | `stdout`, with that kind's keys.
    #[serde(flatten)]
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
    #[serde(flatten)]
    pub clickhouse_keys: ClickHouseKeys,
}

/// `[sink]`'s writer keys, shared by every kind; a batch key not given is the kind's
/// ([`SinkKind::default_batch`]).
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
struct WriterKeys {
    batch_rows: Option<usize>,
    batch_bytes: Option<usize>,
    flush_interval_ms: u64,
    inflight_batches: usize,
    store_inputs: bool,
}

impl Default for WriterKeys {
    fn default() -> Self {
        WriterKeys {
            batch_rows: None,
            batch_bytes: None,
            flush_interval_ms: 1000,
            inflight_batches: 2,
            store_inputs: true,
        }
    }
}

impl WriterKeys {
    /// A sink of `kind` written with these keys.
    fn with_kind(self, kind: SinkKind, clickhouse_keys: ClickHouseKeys) -> SinkConfig {
        let (batch_rows, batch_bytes) = kind.default_batch();
        SinkConfig {
            kind,
            batch_rows: self.batch_rows.unwrap_or(batch_rows),
            batch_bytes: self.batch_bytes.unwrap_or(batch_bytes),
            flush_interval_ms: self.flush_interval_ms,
            inflight_batches: self.inflight_batches,
            store_inputs: self.store_inputs,
            clickhouse_keys,
        }
    }
}

impl ReadSection for SinkConfig {
    const SECTION: &'static str = "sink";

    /// The chosen kind's keys, the writer's and the older `[clickhouse]` ones.
    fn read_parts(written: &mut WrittenSection) -> Result<Self, SectionError> {
        let kind = written.kind()?;
        let writer: WriterKeys = written.part()?;
        Ok(writer.with_kind(kind, written.part()?))
    }
}

impl<'de> Deserialize<'de> for SinkConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        SinkConfig::deserialize_section(deserializer)
    }
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
        WriterKeys::default().with_kind(kind, ClickHouseKeys::default())
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

/// The `[clickhouse]` keys as an older config wrote them under `[sink]` (`sink.url`,
/// `[sink.cluster]`, …): each `None` unless written there. Its `Debug` names the keys given,
/// never their values.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ClickHouseKeys {
    /// `sink.url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `sink.database`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// `sink.user`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// `sink.password`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<Secret>,
    /// `sink.request_timeout_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_timeout_ms: Option<u64>,
    /// `sink.retry_initial_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_initial_ms: Option<u64>,
    /// `sink.retry_max_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_max_ms: Option<u64>,
    /// `sink.retry_give_up_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_give_up_ms: Option<u64>,
    /// `[sink.cluster]`, as written (`[clickhouse.cluster]`'s type lives with ClickHouse, a
    /// layer above this one; `ClickHouseConfig::adopt_sink_keys` reads it).
    #[serde(skip_serializing)]
    #[schemars(with = "Option<std::collections::BTreeMap<String, serde_json::Value>>")]
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
