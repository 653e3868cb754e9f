//! `[clickhouse]`: the ClickHouse server (or cluster) sqlgrade talks to — the sink of
//! `[sink] kind = "clickhouse"`, the judge's durable cache, alert records, `migrate`, `prune`,
//! and the review page reading back — with its credentials, timeouts, retries and cluster
//! layout. One connection section whatever the sink's kind, because more than the sink uses it
//! (a JSONL sink with a ClickHouse judge cache is a supported setup).
//!
//! Configs written before this section existed put these keys under `[sink]`; they are still
//! read there (`stores::config::ClickHouseKeys`, moved here by `Config::load` with a warning).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::settings::{Secret, redact_url};
use crate::stores::config::ClickHouseKeys;

/// `[clickhouse]`. Its `Debug` hides the password and a password inside the URLs.
#[derive(Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ClickHouseConfig {
    /// HTTP URL of the server (`DEFAULT_URL` when unset).
    pub url: Option<String>,
    /// Database.
    pub database: String,
    /// User.
    pub user: Option<String>,
    /// Password (secret).
    pub password: Option<Secret>,
    /// Per-request timeout.
    pub request_timeout_ms: u64,
    /// First retry delay after a transient failure (doubles per attempt).
    pub retry_initial_ms: u64,
    /// Largest retry delay.
    pub retry_max_ms: u64,
    /// Give up (and fail the run) after retrying this long; 0 = retry until the server is back.
    pub retry_give_up_ms: u64,
    /// Cluster layout (`[clickhouse.cluster]`); unset = one server.
    pub cluster: ClusterConfig,
}

impl Default for ClickHouseConfig {
    fn default() -> Self {
        ClickHouseConfig {
            url: None,
            database: "sqlgrade".into(),
            user: None,
            password: None,
            request_timeout_ms: 30_000,
            retry_initial_ms: 100,
            retry_max_ms: 5_000,
            retry_give_up_ms: 0,
            cluster: ClusterConfig::default(),
        }
    }
}

impl fmt::Debug for ClickHouseConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClickHouseConfig")
            .field("url", &self.url.as_deref().map(redact_url))
            .field("database", &self.database)
            .field("user", &self.user)
            .field("password", &self.password)
            .field("request_timeout_ms", &self.request_timeout_ms)
            .field("retry_initial_ms", &self.retry_initial_ms)
            .field("retry_max_ms", &self.retry_max_ms)
            .field("retry_give_up_ms", &self.retry_give_up_ms)
            .field("cluster", &self.cluster)
            .finish()
    }
}

impl ClickHouseConfig {
    /// Whether `url` is set (to something other than blanks).
    pub fn has_url(&self) -> bool {
        self.url.as_deref().is_some_and(|u| !u.trim().is_empty())
    }

    /// What is wrong with this section alone (each a sentence naming the key); whether a
    /// ClickHouse server is needed at all is the using sections' rule (`Config::validate`).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(name) = &self.cluster.name
            && (name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        {
            problems.push(format!(
                "clickhouse.cluster.name {name:?} must be a plain identifier (letters, digits, '_')"
            ));
        }
        if self.cluster.write == ClusterWrite::Shards
            && (self.cluster.name.is_none()
                || self.cluster.shard_urls.is_empty()
                || self.cluster.shard_urls.iter().any(Vec::is_empty))
        {
            problems.push(
                "clickhouse.cluster.write = \"shards\" needs clickhouse.cluster.name and a \
                 non-empty list of replica URLs per shard in clickhouse.cluster.shard_urls"
                    .to_string(),
            );
        }
        if self.cluster.name.is_some() && !self.cluster.replica_path.contains("{table}") {
            problems.push(
                "clickhouse.cluster.replica_path must contain {table} (each table needs its own \
                 ZooKeeper path)"
                    .to_string(),
            );
        }
        problems
    }

    /// Take the keys an older config wrote under `[sink]` (`keys`): each one this section does
    /// not set itself is moved here. Returns the keys moved (to warn about) and the problems (a
    /// key set in both places to different values).
    pub fn adopt_sink_keys(&mut self, keys: ClickHouseKeys) -> (Vec<&'static str>, Vec<String>) {
        let defaults = ClickHouseConfig::default();
        let mut adoption = Adoption::default();
        adoption.take("sink.url", &mut self.url, &defaults.url, keys.url.map(Some));
        adoption.take(
            "sink.database",
            &mut self.database,
            &defaults.database,
            keys.database,
        );
        adoption.take(
            "sink.user",
            &mut self.user,
            &defaults.user,
            keys.user.map(Some),
        );
        adoption.take(
            "sink.password",
            &mut self.password,
            &defaults.password,
            keys.password.map(Some),
        );
        adoption.take(
            "sink.request_timeout_ms",
            &mut self.request_timeout_ms,
            &defaults.request_timeout_ms,
            keys.request_timeout_ms,
        );
        adoption.take(
            "sink.retry_initial_ms",
            &mut self.retry_initial_ms,
            &defaults.retry_initial_ms,
            keys.retry_initial_ms,
        );
        adoption.take(
            "sink.retry_max_ms",
            &mut self.retry_max_ms,
            &defaults.retry_max_ms,
            keys.retry_max_ms,
        );
        adoption.take(
            "sink.retry_give_up_ms",
            &mut self.retry_give_up_ms,
            &defaults.retry_give_up_ms,
            keys.retry_give_up_ms,
        );
        if let Some(value) = keys.cluster {
            match value.try_deserialize::<ClusterConfig>() {
                Ok(cluster) => {
                    adoption.take(
                        "sink.cluster",
                        &mut self.cluster,
                        &defaults.cluster,
                        Some(cluster),
                    );
                }
                Err(error) => {
                    adoption.moved.push("sink.cluster");
                    adoption.problems.push(format!("[sink.cluster]: {error}"));
                }
            }
        }
        (adoption.moved, adoption.problems)
    }
}

/// What [`ClickHouseConfig::adopt_sink_keys`] moved, and the conflicts it found.
#[derive(Default)]
struct Adoption {
    moved: Vec<&'static str>,
    problems: Vec<String>,
}

impl Adoption {
    /// `[sink]`'s `older` value of key `name` (`sink.url`, …) goes to `here`, unless `here` was
    /// set (differs from its `default`) to something else: that is a conflict.
    fn take<T: PartialEq>(
        &mut self,
        name: &'static str,
        here: &mut T,
        default: &T,
        older: Option<T>,
    ) {
        let Some(older) = older else { return };
        self.moved.push(name);
        let key = name.strip_prefix("sink.").unwrap_or(name);
        if *here == *default {
            *here = older;
        } else if *here != older {
            self.problems.push(format!(
                "{name} (the older place of clickhouse.{key}) and clickhouse.{key} are both set, \
                 to different values: keep clickhouse.{key}"
            ));
        }
    }
}

/// `[clickhouse.cluster]`: the daemon writes and reads through `Distributed` tables named like the
/// single-server ones (`sqlgrade migrate --cluster NAME` creates them; `deploy/clickhouse/README.md`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// `[clickhouse.cluster] write`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ClusterWrite {
    /// Insert into the `Distributed` tables of `clickhouse.url`: the server routes rows to the shards
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_sink_keys_move_unless_set_here_differently() {
        let mut clickhouse = ClickHouseConfig {
            database: "mine".into(),
            ..ClickHouseConfig::default()
        };
        let (moved, problems) = clickhouse.adopt_sink_keys(ClickHouseKeys {
            url: Some("http://ch:8123".into()),
            password: Some(Secret::new("pw")),
            database: Some("theirs".into()),
            retry_give_up_ms: Some(5),
            ..ClickHouseKeys::default()
        });
        assert_eq!(
            moved,
            [
                "sink.url",
                "sink.database",
                "sink.password",
                "sink.retry_give_up_ms"
            ]
        );
        assert_eq!(clickhouse.url.as_deref(), Some("http://ch:8123"));
        assert_eq!(clickhouse.password.as_ref().map(Secret::expose), Some("pw"));
        assert_eq!(clickhouse.retry_give_up_ms, 5);
        assert_eq!(clickhouse.database, "mine");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("sink.database") && problems[0].contains("clickhouse.database")
        );

        // The same value in both places is no conflict; nothing written, nothing moved.
        let (moved, problems) = clickhouse.adopt_sink_keys(ClickHouseKeys {
            database: Some("mine".into()),
            ..ClickHouseKeys::default()
        });
        assert_eq!((moved.len(), problems.len()), (1, 0));
        let (moved, problems) = clickhouse.adopt_sink_keys(ClickHouseKeys::default());
        assert!(moved.is_empty() && problems.is_empty());

        // [sink.cluster] as written, read as [clickhouse.cluster]; a wrong value is a problem.
        let written = |text: &str| {
            config::Config::builder()
                .add_source(config::File::from_str(text, config::FileFormat::Toml))
                .build()
                .unwrap()
                .get::<config::Value>("cluster")
                .unwrap()
        };
        let (_, problems) = clickhouse.adopt_sink_keys(ClickHouseKeys {
            cluster: Some(written("[cluster]\nname = \"c\"\ninsert_sync = false")),
            ..ClickHouseKeys::default()
        });
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(clickhouse.cluster.name.as_deref(), Some("c"));
        assert!(!clickhouse.cluster.insert_sync);
        let (_, problems) = ClickHouseConfig::default().adopt_sink_keys(ClickHouseKeys {
            cluster: Some(written("[cluster]\nwrite = \"sideways\"")),
            ..ClickHouseKeys::default()
        });
        assert!(
            problems.len() == 1 && problems[0].starts_with("[sink.cluster]"),
            "{problems:?}"
        );
    }

    #[test]
    fn cluster_problems_name_the_key() {
        let clickhouse = ClickHouseConfig {
            cluster: ClusterConfig {
                name: Some("bad name".into()),
                write: ClusterWrite::Shards,
                replica_path: "/no/table".into(),
                ..ClusterConfig::default()
            },
            ..ClickHouseConfig::default()
        };
        let problems = clickhouse.problems().join("\n");
        for key in [
            "clickhouse.cluster.name",
            "clickhouse.cluster.write",
            "clickhouse.cluster.replica_path",
        ] {
            assert!(problems.contains(key), "{key}: {problems}");
        }
        assert!(ClickHouseConfig::default().problems().is_empty());
    }
}
