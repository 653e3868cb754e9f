//! A real Kafka-protocol broker (tansu) as a child process, a producer, reading a topic and
//! committed offsets, and the daemon tests' topic names.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};

use super::process::{find_binary, free_port, port_open, stop_child, wait_for_start};

/// Where a [`Tansu`] broker keeps its topics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BrokerStorage {
    /// `sqlite://tansu.db` in the broker's directory: what the tests use, as it survives
    /// [`Tansu::restart`] and [`Tansu::kill`]. tansu stores and re-reads every record in SQLite,
    /// ~35–40 µs of CPU per event on the 2-core VM (CHANGELOG.md).
    #[default]
    Sqlite,
    /// `memory://tansu/`: gone when the broker stops, and needs a tansu built with its
    /// `dynostore` feature, as `scripts/services.sh install` builds it (`cargo install tansu
    /// --version 0.6.0 --features libsql,dynostore`). What the throughput benches use by
    /// default: there a broker that costs more CPU per event than the daemon would share the
    /// daemon's cores, which a production Kafka on machines of its own does not.
    Memory,
}

impl BrokerStorage {
    /// The value of tansu's `--storage-engine`. tansu resolves a sqlite path against its
    /// working directory (an absolute path gets the cwd prefixed), so it is relative to the
    /// broker's directory.
    fn engine(self) -> &'static str {
        match self {
            BrokerStorage::Sqlite => "sqlite://tansu.db",
            BrokerStorage::Memory => "memory://tansu/",
        }
    }

    /// `sqlite` or `memory`, as benches take and print it.
    pub fn parse(name: &str) -> Option<BrokerStorage> {
        match name {
            "sqlite" => Some(BrokerStorage::Sqlite),
            "memory" => Some(BrokerStorage::Memory),
            _ => None,
        }
    }

    /// The name [`BrokerStorage::parse`] takes.
    pub fn name(self) -> &'static str {
        match self {
            BrokerStorage::Sqlite => "sqlite",
            BrokerStorage::Memory => "memory",
        }
    }
}

/// A tansu broker process.
pub struct Tansu {
    dir: PathBuf,
    pub port: u16,
    child: Option<Child>,
    binary: PathBuf,
    storage: BrokerStorage,
}

impl Tansu {
    /// Start a broker with its state under `root/tansu`, in SQLite.
    pub fn start_in(root: &Path) -> Result<Tansu, String> {
        Tansu::start_with(root, BrokerStorage::Sqlite)
    }

    /// Start a broker under `root/tansu` that keeps its topics in `storage`.
    pub fn start_with(root: &Path, storage: BrokerStorage) -> Result<Tansu, String> {
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
            .unwrap_or_default();
        let binary = find_binary("tansu", &[home.join("bin")])
            .ok_or("tansu not installed (run scripts/services.sh install)")?;
        let dir = root.join("tansu");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let mut t = Tansu {
            dir,
            port: free_port(),
            child: None,
            binary,
            storage,
        };
        t.launch()?;
        Ok(t)
    }

    fn launch(&mut self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("broker.log"))
            .map_err(|e| e.to_string())?;
        let url = format!("tcp://127.0.0.1:{}", self.port);
        let child = Command::new(&self.binary)
            .arg("broker")
            .arg("--listener-url")
            .arg(&url)
            .arg("--advertised-listener-url")
            .arg(&url)
            .arg("--storage-engine")
            .arg(self.storage.engine())
            .current_dir(&self.dir)
            .env_remove("STORAGE_ENGINE")
            .env_remove("LISTENER_URL")
            .env_remove("ADVERTISED_LISTENER_URL")
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start tansu: {e}"))?;
        let child = self.child.insert(child);
        let port = self.port;
        wait_for_start(
            &format!("tansu (port {port})"),
            child,
            Duration::from_secs(30),
            &[self.dir.join("broker.log")],
            || port_open(port),
        )
        .map_err(|e| match self.storage {
            BrokerStorage::Memory => format!(
                "{e}\n(memory storage needs tansu built with `--features libsql,dynostore`: \
                 run scripts/services.sh install, which rebuilds one without it, or pass \
                 `--broker sqlite`)"
            ),
            BrokerStorage::Sqlite => e,
        })
    }

    /// Process id while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `host:port` for bootstrap.servers.
    pub fn brokers(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Create a topic.
    pub fn create_topic(&self, name: &str, partitions: u32) {
        let out = Command::new(&self.binary)
            .args(["topic", "create", "--broker"])
            .arg(format!("tcp://127.0.0.1:{}", self.port))
            .args(["--partitions", &partitions.to_string(), name])
            .output()
            .expect("tansu topic create runs");
        assert!(
            out.status.success(),
            "tansu topic create {name}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Stop (SIGTERM, then SIGKILL).
    pub fn stop(&mut self) {
        stop_child(&mut self.child, "TERM", Duration::from_secs(10));
    }

    /// SIGKILL (a crash: nothing flushed); [`Tansu::start_again`] brings it back on the same
    /// port and storage.
    pub fn kill(&mut self) {
        stop_child(&mut self.child, "KILL", Duration::from_secs(5));
    }

    /// Start after [`Tansu::stop`] on the same port and storage (empty again with
    /// [`BrokerStorage::Memory`]).
    pub fn start_again(&mut self) {
        self.launch().expect("tansu restarts");
    }

    /// Stop and start on the same port and storage.
    pub fn restart(&mut self) {
        self.stop();
        self.start_again();
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        stop_child(&mut self.child, "KILL", Duration::from_secs(5));
    }
}

/// An async Kafka producer for tests.
pub fn producer(brokers: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "60000")
        .create()
        .expect("producer")
}

/// Produce `payloads` round-robin over `partitions`, waiting for every delivery; returns each
/// payload's (partition, offset).
pub async fn produce_all(
    producer: &FutureProducer,
    topic: &str,
    partitions: i32,
    payloads: &[Vec<u8>],
) -> Vec<(i32, i64)> {
    let mut positions = Vec::with_capacity(payloads.len());
    let mut pending: Vec<DeliveryFuture> = Vec::new();
    for (i, p) in payloads.iter().enumerate() {
        let partition = (i as i32) % partitions;
        let record: FutureRecord<'_, (), [u8]> = FutureRecord::to(topic)
            .payload(p.as_slice())
            .partition(partition);
        let fut = producer.send_result(record).expect("queue has room");
        pending.push(fut);
        if pending.len() >= 2000 {
            drain(&mut pending, &mut positions).await;
        }
    }
    drain(&mut pending, &mut positions).await;
    positions
}

type DeliveryFuture = rdkafka::producer::DeliveryFuture;

async fn drain(pending: &mut Vec<DeliveryFuture>, positions: &mut Vec<(i32, i64)>) {
    for f in pending.drain(..) {
        match f.await {
            Ok(Ok(delivery)) => positions.push((delivery.partition, delivery.offset)),
            Ok(Err((e, _))) => panic!("delivery failed: {e}"),
            Err(_) => panic!("delivery canceled"),
        }
    }
}

/// Committed offsets of `group` for `topic` partitions `0..partitions` (-1 = none).
pub fn committed(
    brokers: &str,
    group: &str,
    topic: &str,
    partitions: i32,
) -> std::collections::BTreeMap<i32, i64> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", group)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let got = consumer
        .committed_offsets(tpl, Duration::from_secs(10))
        .unwrap();
    got.elements()
        .iter()
        .map(|e| {
            let o = match e.offset() {
                Offset::Offset(o) => o,
                _ => -1,
            };
            (e.partition(), o)
        })
        .collect()
}

/// Read up to `expect` records of partition 0 of `topic` from the beginning (60 s at most):
/// payload and headers.
pub fn read_topic(
    brokers: &str,
    topic: &str,
    expect: usize,
) -> Vec<(Vec<u8>, std::collections::BTreeMap<String, String>)> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::{Headers, Message};
    use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "sqlgrade-test-reader")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while out.len() < expect && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let mut headers = std::collections::BTreeMap::new();
            if let Some(h) = m.headers() {
                for header in h.iter() {
                    headers.insert(
                        header.key.to_string(),
                        String::from_utf8_lossy(header.value.unwrap_or_default()).into_owned(),
                    );
                }
            }
            out.push((m.payload().unwrap_or_default().to_vec(), headers));
        }
    }
    out
}

/// Topic the daemon tests consume.
pub const TOPIC: &str = "agent-events";
/// Dead-letter topic of the daemon tests.
pub const DLQ_TOPIC: &str = "agent-events-dlq";
/// Partitions of [`TOPIC`].
pub const PARTITIONS: i32 = 3;
/// Consumer group of the daemon tests.
pub const GROUP: &str = "sqlgrade-test";
/// `session.timeout.ms` of the daemon tests' consumers.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(6);
/// How long a test waits before a replacement joins the group of a member that died without
/// leaving it: tansu 0.6 evicts a dead member when a member joins after the dead one's session
/// timed out (its JoinGroup runs the missed-heartbeat check), while a join within the session
/// can leave the dead member's partitions assigned to it. The session timeout and a margin.
pub const DEAD_MEMBER_EVICTION: Duration = Duration::from_secs(SESSION_TIMEOUT.as_secs() + 2);

#[cfg(test)]
mod tests {
    use super::*;

    /// What a bench prints is what it takes back, each storage has its own tansu engine, and
    /// the default (what every test gets from `Tansu::start_in`) is the one that survives a
    /// restart.
    #[test]
    fn broker_storage_names_and_engines() {
        for storage in [BrokerStorage::Sqlite, BrokerStorage::Memory] {
            assert_eq!(BrokerStorage::parse(storage.name()), Some(storage));
        }
        assert_eq!(BrokerStorage::parse("disk"), None);
        assert_ne!(
            BrokerStorage::Sqlite.engine(),
            BrokerStorage::Memory.engine()
        );
        assert_eq!(BrokerStorage::default(), BrokerStorage::Sqlite);
        assert!(BrokerStorage::default().engine().starts_with("sqlite://"));
    }
}
