//! The scaffolding of a daemon test: the servers it needs ([`Servers`], one ClickHouse or a
//! cluster, and tansu) and a [`Harness`] with a migrated database, a producer and a config.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::producer::FutureProducer;

use super::clickhouse::ClickHouse;
use super::cluster::{self};
use super::corpus::{corpus_events, malformed};
use super::daemon::Daemon;
use super::kafka::{
    BrokerStorage, DLQ_TOPIC, GROUP, PARTITIONS, SESSION_TIMEOUT, TOPIC, Tansu, committed,
    produce_all, producer,
};
use super::process::{attempts, eventually, free_port, skip, state_dir};

/// ClickHouse + tansu for one test, in one temp dir. With a cluster
/// ([`Servers::start_cluster`]), `clickhouse` is the node of shard 1, replica 1 and `cluster`
/// holds ZooKeeper and the other nodes.
pub struct Servers {
    pub clickhouse: ClickHouse,
    pub kafka: Tansu,
    pub cluster: Option<cluster::ClickHouseCluster>,
    pub dir: tempfile::TempDir,
}

impl Servers {
    /// Start both; `None` (after a loud message) if they cannot be started on this machine.
    pub fn start(test: &str) -> Option<Servers> {
        Servers::start_with(test, BrokerStorage::Sqlite)
    }

    /// [`Servers::start`] with the broker's topics in `storage`.
    pub fn start_with(test: &str, storage: BrokerStorage) -> Option<Servers> {
        let started = attempts(test, || {
            let dir = state_dir(test);
            let clickhouse = ClickHouse::start_in(dir.path())?;
            let kafka = Tansu::start_with(dir.path(), storage)?;
            Ok(Servers {
                clickhouse,
                kafka,
                cluster: None,
                dir,
            })
        });
        match started {
            Ok(servers) => Some(servers),
            Err(e) => {
                skip(test, &e);
                None
            }
        }
    }

    /// Start a cluster of `shards × replicas` ClickHouse nodes with ZooKeeper
    /// ([`super::cluster`]) and tansu; `None` (after a loud message) if they cannot be started.
    pub fn start_cluster(test: &str, shards: u32, replicas: u32) -> Option<Servers> {
        let started = attempts(test, || {
            let dir = state_dir(test);
            let mut cluster = cluster::ClickHouseCluster::start_in(dir.path(), shards, replicas)?;
            let kafka = Tansu::start_in(dir.path())?;
            let first = cluster
                .nodes
                .iter()
                .position(|n| n.shard == 1 && n.replica == 1)
                .expect("node 1/1");
            let clickhouse = cluster.nodes.remove(first).server;
            Ok(Servers {
                clickhouse,
                kafka,
                cluster: Some(cluster),
                dir,
            })
        });
        match started {
            Ok(servers) => Some(servers),
            Err(e) => {
                skip(test, &e);
                None
            }
        }
    }

    /// The ClickHouse node of `shard`, `replica` (1/1 is `clickhouse`; a single server is 1/1).
    pub fn node(&self, shard: u32, replica: u32) -> &ClickHouse {
        match (&self.cluster, shard, replica) {
            (_, 1, 1) | (None, _, _) => &self.clickhouse,
            (Some(c), s, r) => c.node(s, r),
        }
    }

    /// The same, to stop or restart it.
    pub fn node_mut(&mut self, shard: u32, replica: u32) -> &mut ClickHouse {
        match (&mut self.cluster, shard, replica) {
            (_, 1, 1) | (None, _, _) => &mut self.clickhouse,
            (Some(c), s, r) => c.node_mut(s, r),
        }
    }
}

/// Servers + a migrated database + a daemon config: the scaffolding of a daemon test.
pub struct Harness {
    pub servers: Servers,
    pub producer: FutureProducer,
    /// Every valid event to be produced: (event_id, payload).
    pub events: Vec<(String, Vec<u8>)>,
    pub malformed: Vec<Vec<u8>>,
    /// Where each produced valid event landed (event_id → (partition, offset)).
    pub positions: std::collections::HashMap<String, (i32, i64)>,
    next: usize,
    daemons: u32,
    dead_letter_topic: bool,
    /// `sink.batch_rows` / `sink.flush_interval_ms` of the daemons (tests: small and quick),
    /// unless `sink_config` sets them.
    pub batch: (usize, u64),
    /// `source.max_in_flight` of the daemons (tests: 5,000; production's config: 100,000),
    /// unless `source_config` sets it.
    pub max_in_flight: usize,
    /// TOML appended to every daemon config (e.g. a `[judge]` section).
    pub extra_config: String,
    /// Keys added to the `[source]` section of every daemon config (e.g. a commit interval).
    pub source_config: String,
    /// ClickHouse URL of daemon k: `sink_urls[k % len]` (default: the one server).
    pub sink_urls: Vec<String>,
    /// Keys added to the `[sink]` section of every daemon config (e.g. `compression`).
    pub sink_config: String,
    /// The `sqlgrade` binary the daemons run (benchmarks compare builds); unset = the one
    /// built with the tests ([`crate::bin::sqlgrade`]).
    pub binary: Option<PathBuf>,
    /// Write the server's keys under `[sink]`, with no `[clickhouse]` section, as builds before
    /// `a7152d2` read them (benchmarks against an older base).
    pub older_config: bool,
    /// Environment variables every daemon starts with (e.g. a test hook).
    pub daemon_env: Vec<(String, String)>,
}

/// The TOML lines `given`, preceded by `key = value` for each of `defaults` whose key no line of
/// `given` sets (a key set twice in one section is a TOML error).
pub fn keys_with_defaults(given: &str, defaults: &[(&str, String)]) -> String {
    let sets = |key: &str| {
        given.lines().any(|line| {
            line.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
    };
    let mut keys = String::new();
    for (key, value) in defaults.iter().filter(|(key, _)| !sets(key)) {
        keys.push_str(&format!("{key} = {value}\n"));
    }
    keys + given
}

impl Harness {
    /// Start the servers, create the topics, run `sqlgrade migrate`. `None` = skipped.
    pub fn start(
        test: &str,
        events: usize,
        malformed: usize,
        dead_letter_topic: bool,
    ) -> Option<Harness> {
        let servers = Servers::start(test)?;
        Some(Harness::on(
            servers,
            events,
            malformed,
            dead_letter_topic,
            String::new(),
        ))
    }

    /// [`Harness::start`] (no malformed events, no dead-letter topic) with the broker's topics
    /// in `storage`: for throughput benches ([`BrokerStorage::Memory`]).
    pub fn start_with_broker(test: &str, events: usize, storage: BrokerStorage) -> Option<Harness> {
        let servers = Servers::start_with(test, storage)?;
        Some(Harness::on(servers, events, 0, false, String::new()))
    }

    /// [`Harness::start`] on a ClickHouse cluster of `shards × replicas` nodes: the daemons'
    /// configs name it in `[clickhouse.cluster]` and `sqlgrade migrate` lays the schema out on it.
    pub fn start_cluster(test: &str, events: usize, shards: u32, replicas: u32) -> Option<Harness> {
        let servers = Servers::start_cluster(test, shards, replicas)?;
        let cluster = format!("[clickhouse.cluster]\nname = \"{}\"\n", cluster::CLUSTER);
        Some(Harness::on(servers, events, 0, false, cluster))
    }

    fn on(
        servers: Servers,
        events: usize,
        malformed: usize,
        dead_letter_topic: bool,
        extra_config: String,
    ) -> Harness {
        servers.kafka.create_topic(TOPIC, PARTITIONS as u32);
        servers.kafka.create_topic(DLQ_TOPIC, 1);
        let producer = producer(&servers.kafka.brokers());
        let h = Harness {
            servers,
            producer,
            events: corpus_events(events),
            malformed: self::malformed(malformed),
            positions: Default::default(),
            next: 0,
            daemons: 0,
            dead_letter_topic,
            batch: (1000, 200),
            max_in_flight: 5000,
            extra_config,
            source_config: String::new(),
            sink_urls: Vec::new(),
            sink_config: String::new(),
            binary: None,
            older_config: false,
            daemon_env: Vec::new(),
        };
        let config = h.write_config("migrate", free_port());
        let out = Command::new(crate::bin::sqlgrade())
            .args(["migrate", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "migrate failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        h
    }

    /// Write a daemon config; returns its path.
    pub fn write_config(&self, name: &str, health_port: u16) -> PathBuf {
        // The poison-event guard's markers in this test's folder (not the machine's temporary
        // folder, which every test's daemons of the same group would share). Builds before it
        // (benchmarks against an older base) do not know the key.
        let poison_dir = if self.binary.is_none() {
            vec![(
                "poison.dir",
                format!(
                    "{:?}",
                    self.servers.dir.path().join("poison").display().to_string()
                ),
            )]
        } else {
            Vec::new()
        };
        let dlq = if self.dead_letter_topic {
            format!("dead_letter_topic = \"{DLQ_TOPIC}\"\n")
        } else {
            String::new()
        };
        let text = format!(
            r#"[source]
kind = "kafka"
brokers = "{brokers}"
topics = ["{TOPIC}"]
group_id = "{GROUP}"
{dlq}{source}

[sink]
kind = "clickhouse"
{sink}
{clickhouse_section}url = "{url}"
database = "sqlgrade"
retry_initial_ms = 100
retry_max_ms = 1000

[rules]
dir = "{rules}"

[server]
listen = "127.0.0.1:{health_port}"
"#,
            brokers = self.servers.kafka.brokers(),
            source = keys_with_defaults(
                &self.source_config,
                &[
                    ("commit_interval_ms", "200".to_string()),
                    ("max_in_flight", self.max_in_flight.to_string()),
                    // Dotted keys, so `source_config` can set these or add other properties.
                    (
                        r#"kafka_properties."session.timeout.ms""#,
                        format!("\"{}\"", SESSION_TIMEOUT.as_millis()),
                    ),
                    (
                        r#"kafka_properties."heartbeat.interval.ms""#,
                        "\"500\"".to_string(),
                    ),
                ]
                .into_iter()
                .chain(poison_dir)
                .collect::<Vec<_>>(),
            ),
            url = self
                .sink_urls
                .get(self.daemons as usize % self.sink_urls.len().max(1))
                .cloned()
                .unwrap_or_else(|| self.servers.clickhouse.url()),
            rules = crate::data::repo_root().join("rules").display(),
            clickhouse_section = if self.older_config {
                ""
            } else {
                "\n[clickhouse]\n"
            },
            sink = keys_with_defaults(
                &self.sink_config,
                &[
                    ("batch_rows", self.batch.0.to_string()),
                    ("flush_interval_ms", self.batch.1.to_string()),
                ],
            ),
        );
        let text = format!("{text}\n{}\n", self.extra_config);
        let path = self.servers.dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Start a daemon (its own config, log and health port).
    pub fn spawn_daemon(&mut self) -> Daemon {
        self.daemons += 1;
        let name = format!("daemon-{}", self.daemons);
        let port = free_port();
        let config = self.write_config(&name, port);
        let log = self.servers.dir.path().join(format!("{name}.log"));
        let binary = self.binary.clone().unwrap_or_else(crate::bin::sqlgrade);
        Daemon::spawn_with_env(&binary, &config, &log, port, &self.daemon_env)
    }

    /// Produce the next `n` valid events, with malformed ones mixed in proportionally.
    pub async fn produce(&mut self, n: usize) {
        let end = (self.next + n).min(self.events.len());
        let total = self.events.len().max(1);
        let mut payloads = Vec::new();
        let mut ids = Vec::new();
        for i in self.next..end {
            payloads.push(self.events[i].1.clone());
            ids.push(Some(self.events[i].0.clone()));
            // Malformed message k goes right after valid event k * total / malformed.len().
            let m = self.malformed.len();
            for k in 0..m {
                if k * total / m == i {
                    payloads.push(self.malformed[k].clone());
                    ids.push(None);
                }
            }
        }
        self.next = end;
        let positions = produce_all(&self.producer, TOPIC, PARTITIONS, &payloads).await;
        for (id, pos) in ids.into_iter().zip(positions) {
            if let Some(id) = id {
                self.positions.insert(id, pos);
            }
        }
    }

    /// Produce everything not produced yet.
    pub async fn produce_rest(&mut self) {
        let rest = self.events.len() - self.next;
        self.produce(rest).await;
    }

    /// Distinct STEF rows in ClickHouse (deduplicated read).
    pub fn stef_rows(&self) -> u64 {
        self.servers
            .clickhouse
            .count("SELECT count() FROM sqlgrade.evaluations FINAL WHERE metric = 'stef'")
    }

    /// Wait until `n` STEF rows are stored (`false` on timeout).
    pub fn wait_rows(&self, n: u64, timeout: Duration) -> bool {
        eventually(timeout, || {
            self.servers
                .clickhouse
                .try_query("SELECT count() FROM sqlgrade.evaluations FINAL WHERE metric = 'stef'")
                .ok()
                .and_then(|b| b.trim().parse::<u64>().ok())
                .is_some_and(|c| c >= n)
        })
    }

    /// The events a live second pass selects by its uniform slice: the scorable ones (`stef`
    /// rows `ok` or `judge_fallback`, deduplicated) whose hash with `salt` falls under `rate`.
    pub fn uniform_slice(&self, salt: &str, rate: f64) -> std::collections::BTreeSet<String> {
        self.servers
            .clickhouse
            .query(
                "SELECT event_id FROM sqlgrade.evaluations FINAL WHERE metric = 'stef' \
                 AND status IN ('ok', 'judge_fallback') ORDER BY event_id",
            )
            .lines()
            .filter(|id| sqlgrade_core::sampling::uniform_draw(salt, id) < rate)
            .map(str::to_string)
            .collect()
    }

    /// The event_ids stored (metric stef), sorted, from a deduplicated read.
    pub fn stored_ids(&self) -> Vec<String> {
        let body = self.servers.clickhouse.query(
            "SELECT event_id FROM sqlgrade.evaluations FINAL WHERE metric = 'stef' ORDER BY event_id",
        );
        body.lines().map(str::to_string).collect()
    }

    /// Per partition of [`TOPIC`]: (the group's committed offset, the end of the log).
    pub fn committed_offsets(&self) -> std::collections::BTreeMap<i32, (i64, i64)> {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let brokers = self.servers.kafka.brokers();
        let committed = committed(&brokers, GROUP, TOPIC, PARTITIONS);
        let reader: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &brokers)
            .set("group.id", "sqlgrade-test-watermarks")
            .create()
            .unwrap();
        (0..PARTITIONS)
            .map(|p| {
                let (_, high) = reader
                    .fetch_watermarks(TOPIC, p, Duration::from_secs(10))
                    .unwrap_or((-1, -1));
                (p, (committed.get(&p).copied().unwrap_or(-1), high))
            })
            .collect()
    }

    /// Wait until the group has committed every partition of [`TOPIC`] to the end of its log:
    /// every partition was consumed, and everything in it written (`false` on timeout).
    pub fn wait_all_partitions_committed(&self, timeout: Duration) -> bool {
        eventually(timeout, || {
            self.committed_offsets()
                .values()
                .all(|&(committed, end)| end >= 0 && committed == end)
        })
    }

    /// Assert that every produced event is stored exactly once (deduplicated) and nothing else.
    pub fn assert_exactly_all_events(&self) {
        let ids = self.stored_ids();
        let mut want: Vec<String> = self.events.iter().map(|(id, _)| id.clone()).collect();
        want.sort();
        let stored: std::collections::BTreeSet<&String> = ids.iter().collect();
        let missing: Vec<&String> = want
            .iter()
            .filter(|id| !stored.contains(id))
            .take(10)
            .collect();
        assert!(missing.is_empty(), "missing events (first 10): {missing:?}");
        assert_eq!(ids.len(), want.len(), "FINAL row count");
        assert_eq!(ids, want);
        let distinct = self.servers.clickhouse.count(
            "SELECT uniqExact(event_id) FROM sqlgrade.evaluations FINAL WHERE metric = 'stef'",
        );
        assert_eq!(distinct, want.len() as u64);
    }
}

/// The `[judge]` and `[judge.budget]` sections of a live second pass on the Kafka judge-work
/// topic `work_topic`: an LLM judge at `base_url` (limits sized for tests), the uniform slice
/// `rate` drawn with `salt`, no priority slices, work that waits up to ten minutes for the
/// judge.
pub fn second_pass_config(base_url: &str, rate: f64, salt: &str, work_topic: &str) -> String {
    format!(
        r#"[judge]
kind = "llm"
base_url = "{base_url}"
model = "judge-test"
api_key_env = ""
max_requests_per_second = 100.0
max_concurrency = 8
max_retries = 1
timeout_ms = 3000

[judge.budget]
uniform_rate = {rate}
salt = "{salt}"
priority_not_correct = false
priority_low_confidence = false
priority_poor_tier = false
priority_new_series = 0
priority_alerting = false
work_topic = "{work_topic}"
max_wait_ms = 600000
drain_grace_ms = 1000
"#
    )
}

#[cfg(test)]
mod tests {
    use super::keys_with_defaults;

    #[test]
    fn a_default_is_written_only_where_no_line_sets_its_key() {
        let defaults = [
            ("batch_rows", "1000".to_string()),
            ("flush_interval_ms", "200".to_string()),
        ];
        assert_eq!(
            keys_with_defaults("", &defaults),
            "batch_rows = 1000\nflush_interval_ms = 200\n"
        );
        assert_eq!(
            keys_with_defaults("  batch_rows=5\nbatch_rows_extra = 1", &defaults),
            "flush_interval_ms = 200\n  batch_rows=5\nbatch_rows_extra = 1"
        );
    }
}
