//! Real servers for the daemon integration tests: ClickHouse (Debian's `clickhouse-server`) and
//! the Kafka-compatible broker tansu, each started as a child process on free loopback ports with
//! its state in a temp dir, so that a test can stop, kill and restart them to inject faults.
//! Also: the `sqlgrade` daemon as a child process, a Kafka producer, and the event corpus.
//!
//! `scripts/services.sh install` installs the binaries; when they are missing or cannot start,
//! [`Servers::start`] returns `None` and the test prints a loud SKIPPED message.

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};

/// A free loopback TCP port (bound, read, released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn port_open(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Duration::from_millis(200),
    )
    .is_ok()
}

/// Wait until `ready` holds for a child process just spawned: `Ok` when it does, `Err` with the
/// reason — and the tail of its `logs` — when the process exits first or `timeout` passes.
/// Checking for an early exit turns "did not answer in 60 s" into the process's own words at once
/// (a port taken between [`free_port`] and the bind, a bad config).
pub fn wait_for_start(
    what: &str,
    child: &mut Child,
    timeout: Duration,
    logs: &[PathBuf],
    mut ready: impl FnMut() -> bool,
) -> Result<(), String> {
    let started = Instant::now();
    let deadline = started + timeout;
    loop {
        if ready() {
            return Ok(());
        }
        let reason = match child.try_wait() {
            Ok(Some(status)) => format!("{what} exited before it was ready ({status})"),
            _ if Instant::now() >= deadline => {
                format!("{what} was not ready after {} s", timeout.as_secs())
            }
            _ => {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        return Err(format!("{reason}; {}", log_tails(logs, 12)));
    }
}

/// The last `lines` lines of each file in `logs` that exists and is not empty, labelled.
pub fn log_tails(logs: &[PathBuf], lines: usize) -> String {
    let mut out = String::new();
    for path in logs {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let all: Vec<&str> = text.lines().collect();
        if all.is_empty() {
            continue;
        }
        let tail = &all[all.len().saturating_sub(lines)..];
        out.push_str(&format!(
            "\n--- last lines of {} ---\n{}",
            path.display(),
            tail.join("\n")
        ));
    }
    if out.is_empty() {
        "its logs are empty".to_string()
    } else {
        out
    }
}

pub fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

fn find_binary(name: &str, extra_dirs: &[PathBuf]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra_dirs.iter().cloned())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn signal(child: &Child, sig: &str) {
    // Quiet: the process may have exited already ("No such process").
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .stderr(Stdio::null())
        .status();
}

pub fn stop_child(child: &mut Option<Child>, sig: &str, timeout: Duration) {
    if let Some(mut c) = child.take() {
        signal(&c, sig);
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(_)) = c.try_wait() {
                break;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Whether test servers log every query to `system.query_log`
/// (`SQLGRADE_CLICKHOUSE_LOG_QUERIES=1`; benches use it to say what the server spent its CPU on).
pub fn log_queries() -> bool {
    std::env::var("SQLGRADE_CLICKHOUSE_LOG_QUERIES").is_ok_and(|v| v == "1")
}

/// How long a ClickHouse server may take to answer `/ping` after its start.
const CLICKHOUSE_START: Duration = Duration::from_secs(120);

/// How long one `/ping` of a starting server may take.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// How many times [`Servers::start`] and [`Servers::start_cluster`] try, each in a fresh state
/// dir on fresh ports: a port that [`free_port`] handed out can be taken by another process's
/// outgoing connection before the server binds it, and nothing but a new port helps then.
const START_ATTEMPTS: u32 = 3;

/// A ClickHouse server process.
pub struct ClickHouse {
    dir: PathBuf,
    /// Loopback address it listens on (127.0.0.1; other 127.0.0.x for the nodes of a cluster).
    pub host: String,
    pub http_port: u16,
    pub tcp_port: u16,
    child: Option<Child>,
    binary: PathBuf,
}

impl ClickHouse {
    /// Start a server with its state under `root/clickhouse`.
    pub fn start_in(root: &Path) -> Result<ClickHouse, String> {
        ClickHouse::start_node(
            root,
            "clickhouse",
            "127.0.0.1",
            (free_port(), free_port()),
            "",
        )
    }

    /// Start a server with its state under `root/subdir`, listening on `host` (a loopback
    /// address) at (HTTP, TCP) `ports`, with `extra_xml` added to its config (cluster settings).
    pub fn start_node(
        root: &Path,
        subdir: &str,
        host: &str,
        ports: (u16, u16),
        extra_xml: &str,
    ) -> Result<ClickHouse, String> {
        let binary = find_binary(
            "clickhouse-server",
            &[PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")],
        )
        .ok_or("clickhouse-server not installed (run scripts/services.sh install)")?;
        let dir = root.join(subdir);
        std::fs::create_dir_all(dir.join("log")).map_err(|e| e.to_string())?;
        let (http_port, tcp_port) = ports;
        let support = crate::data::repo_root().join("tests/support");
        let config = std::fs::read_to_string(support.join("clickhouse-config.xml.tmpl"))
            .map_err(|e| e.to_string())?
            .replace("@DIR@", &dir.to_string_lossy())
            .replace("@HTTP_PORT@", &http_port.to_string())
            .replace("@TCP_PORT@", &tcp_port.to_string())
            .replace(
                "<listen_host>127.0.0.1</listen_host>",
                &format!("<listen_host>{host}</listen_host>"),
            )
            .replace("</yandex>", &format!("{extra_xml}\n</yandex>"));
        std::fs::write(dir.join("config.xml"), config).map_err(|e| e.to_string())?;
        let mut users = std::fs::read_to_string(support.join("clickhouse-users.xml.tmpl"))
            .map_err(|e| e.to_string())?;
        if log_queries() {
            users = users.replace(
                "<max_memory_usage>",
                "<log_queries>1</log_queries>\n            <max_memory_usage>",
            );
        }
        std::fs::write(dir.join("users.xml"), users).map_err(|e| e.to_string())?;
        let mut ch = ClickHouse {
            dir,
            host: host.to_string(),
            http_port,
            tcp_port,
            child: None,
            binary,
        };
        ch.launch()?;
        Ok(ch)
    }

    fn launch(&mut self) -> Result<(), String> {
        let log =
            std::fs::File::create(self.dir.join("log/stdout.log")).map_err(|e| e.to_string())?;
        let child = Command::new(&self.binary)
            .arg(format!(
                "--config-file={}",
                self.dir.join("config.xml").display()
            ))
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start clickhouse-server: {e}"))?;
        let child = self.child.insert(child);
        let (host, port) = (self.host.clone(), self.http_port);
        let logs = [
            self.dir.join("log/server.err.log"),
            self.dir.join("log/stdout.log"),
        ];
        // A node of a cluster on a busy 2-core machine has been seen to take over a minute.
        wait_for_start(
            &format!("clickhouse-server (HTTP port {port})"),
            child,
            CLICKHOUSE_START,
            &logs,
            || {
                // Short: whatever else holds the port (it was free a moment ago) may never answer.
                http_request_within(&host, port, "GET /ping HTTP/1.0\r\n\r\n", PING_TIMEOUT)
                    .is_ok_and(|(code, b)| code == 200 && b.starts_with("Ok"))
            },
        )
    }

    /// HTTP URL.
    pub fn url(&self) -> String {
        format!("http://{}:{}", self.host, self.http_port)
    }

    /// Process id while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Stop (SIGTERM).
    pub fn stop(&mut self) {
        stop_child(&mut self.child, "TERM", Duration::from_secs(20));
    }

    /// Start again on the same ports and data.
    pub fn restart(&mut self) {
        self.stop();
        self.launch().expect("clickhouse restarts");
    }

    /// Start after [`ClickHouse::stop`].
    pub fn start_again(&mut self) {
        self.launch().expect("clickhouse restarts");
    }

    /// Run a query, return the body (TabSeparated). Panics on failure.
    pub fn query(&self, sql: &str) -> String {
        self.try_query(sql)
            .unwrap_or_else(|e| panic!("query {sql:?} on {} failed: {e}", self.url()))
    }

    /// Run a query; the body, or the error.
    pub fn try_query(&self, sql: &str) -> Result<String, String> {
        self.try_query_at("/", sql)
    }

    /// Run a query in `database`; the body, or the error.
    pub fn try_query_in(&self, database: &str, sql: &str) -> Result<String, String> {
        self.try_query_at(&format!("/?database={database}"), sql)
    }

    fn try_query_at(&self, path: &str, sql: &str) -> Result<String, String> {
        let req = format!(
            "POST {path} HTTP/1.0\r\nHost: {}\r\nContent-Length: {}\r\n\r\n{sql}",
            self.host,
            sql.len()
        );
        match http_request_to(&self.host, self.http_port, &req) {
            Ok((200, body)) => Ok(body),
            Ok((code, body)) => Err(format!("HTTP {code}: {body}")),
            Err(e) => Err(e),
        }
    }

    /// Run a query that returns one number.
    pub fn count(&self, sql: &str) -> u64 {
        let body = self.query(sql);
        body.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{sql:?} returned {body:?}"))
    }
}

impl Drop for ClickHouse {
    fn drop(&mut self) {
        stop_child(&mut self.child, "KILL", Duration::from_secs(5));
    }
}

/// Minimal blocking HTTP/1.0 GET; the body on 200.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    http_request(
        port,
        &format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"),
    )
    .ok()
    .and_then(|(code, body)| (code == 200).then_some(body))
}

/// Minimal blocking HTTP/1.0 POST; the body on 200, the error body otherwise.
pub fn http_post(port: u16, path: &str, body: &str) -> Result<String, String> {
    let req = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    match http_request(port, &req) {
        Ok((200, body)) => Ok(body),
        Ok((code, body)) => Err(format!("HTTP {code}: {body}")),
        Err(e) => Err(e),
    }
}

/// Send a raw request to 127.0.0.1, return (status, body).
pub fn http_request(port: u16, request: &str) -> Result<(u16, String), String> {
    http_request_to("127.0.0.1", port, request)
}

/// Send a raw request to `host`, return (status, body); at most 60 s for the answer.
pub fn http_request_to(host: &str, port: u16, request: &str) -> Result<(u16, String), String> {
    http_request_within(host, port, request, Duration::from_secs(60))
}

/// Send a raw request to `host`, return (status, body); at most `timeout` between reads.
pub fn http_request_within(
    host: &str,
    port: u16,
    request: &str,
    timeout: Duration,
) -> Result<(u16, String), String> {
    use std::io::Read as _;
    let mut s = std::net::TcpStream::connect((host, port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(timeout)).ok();
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .ok_or("bad HTTP response")?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((code, body))
}

/// A tansu broker process (sqlite storage).
pub struct Tansu {
    dir: PathBuf,
    pub port: u16,
    child: Option<Child>,
    binary: PathBuf,
}

impl Tansu {
    /// Start a broker with its state under `root/tansu`.
    pub fn start_in(root: &Path) -> Result<Tansu, String> {
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
            // tansu resolves the sqlite path against its working directory (an absolute path
            // gets the cwd prefixed), so pass it relative to `current_dir`.
            .arg("sqlite://tansu.db")
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

    /// Start after [`Tansu::stop`] on the same port and storage.
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

/// The root under which [`Servers`] make their temp dirs, when set ([`set_state_root`]).
static STATE_ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Keep the state of every server started from now on in a fresh directory under `root`
/// instead of the system temp dir — the daemon benchmark puts it on a tmpfs, so that the file
/// system's own work (ext4 with online discard, freeing what earlier runs wrote) does not drift
/// from run to run. The first call wins; later calls are ignored.
pub fn set_state_root(root: PathBuf) {
    let _ = STATE_ROOT.set(root);
}

/// A fresh temp dir for the servers of `test`.
fn state_dir(test: &str) -> tempfile::TempDir {
    let prefix = format!("sqlgrade-{test}-");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix);
    match STATE_ROOT.get() {
        Some(root) => builder.tempdir_in(root),
        None => builder.tempdir(),
    }
    .unwrap()
}

/// ClickHouse + tansu for one test, in one temp dir. With a cluster
/// ([`Servers::start_cluster`]), `clickhouse` is the node of shard 1, replica 1 and `cluster`
/// holds ZooKeeper and the other nodes.
pub struct Servers {
    pub clickhouse: ClickHouse,
    pub kafka: Tansu,
    pub cluster: Option<crate::cluster::ClickHouseCluster>,
    pub dir: tempfile::TempDir,
}

impl Servers {
    /// Start both; `None` (after a loud message) if they cannot be started on this machine.
    pub fn start(test: &str) -> Option<Servers> {
        let started = attempts(test, || {
            let dir = state_dir(test);
            let clickhouse = ClickHouse::start_in(dir.path())?;
            let kafka = Tansu::start_in(dir.path())?;
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
    /// ([`crate::cluster`]) and tansu; `None` (after a loud message) if they cannot be started.
    pub fn start_cluster(test: &str, shards: u32, replicas: u32) -> Option<Servers> {
        let started = attempts(test, || {
            let dir = state_dir(test);
            let mut cluster =
                crate::cluster::ClickHouseCluster::start_in(dir.path(), shards, replicas)?;
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

/// Run `start` up to [`START_ATTEMPTS`] times, saying why each failed attempt failed; the last
/// error when none succeeds. A missing binary fails every attempt the same way, at once.
fn attempts<T>(test: &str, mut start: impl FnMut() -> Result<T, String>) -> Result<T, String> {
    let mut attempt = 1;
    loop {
        match start() {
            Ok(started) => return Ok(started),
            Err(e) if attempt < START_ATTEMPTS && !e.contains("not installed") => {
                eprintln!(
                    "{test}: starting the test servers failed (attempt {attempt} of \
                     {START_ATTEMPTS}), trying again on fresh ports: {e}"
                );
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Print a loud SKIPPED message (or panic when `SQLGRADE_REQUIRE_SERVERS` is set, as the test
/// script sets it after starting the servers' installation).
pub fn skip(test: &str, why: &str) {
    let msg = format!(
        "\n\n======== SKIPPED {test}: cannot start the test servers: {why}\n======== run `scripts/services.sh install` first\n\n"
    );
    eprintln!("{msg}");
    if std::env::var_os("SQLGRADE_REQUIRE_SERVERS").is_some() {
        panic!("{msg}");
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

/// `n` valid events built from the real corpus (BIRD + Spider questions with predicted SQL),
/// each with a unique `event_id` (`ev-00000`, …), cycling over the corpus.
pub fn corpus_events(n: usize) -> Vec<(String, Vec<u8>)> {
    let base = corpus();
    assert!(!base.is_empty(), "no events found in the shared data");
    (0..n)
        .map(|i| {
            let mut e = base[i % base.len()].clone();
            let id = format!("ev-{i:05}");
            e["event_id"] = serde_json::Value::String(id.clone());
            e["agent_version"] = serde_json::Value::String(format!("v{}", i % 3));
            (id, serde_json::to_vec(&e).unwrap())
        })
        .collect()
}

/// The base corpus: examples/events.jsonl when present, else events built from shared/data.
/// Loaded once per test binary.
pub fn corpus() -> &'static [serde_json::Value] {
    static CORPUS: std::sync::OnceLock<Vec<serde_json::Value>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(load_corpus)
}

fn load_corpus() -> Vec<serde_json::Value> {
    let examples = crate::data::repo_root().join("examples/events.jsonl");
    if let Ok(text) = std::fs::read_to_string(&examples) {
        let events: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v.get("question").is_some() && v.get("sql").is_some())
            .collect();
        if events.len() >= 20 {
            return events;
        }
    }
    events_from_shared_data()
}

fn events_from_shared_data() -> Vec<serde_json::Value> {
    // BIRD and Spider dev questions joined with the real systems' predicted SQL: one event per
    // (question, system). No gold block: these exercise the live (STEF) path.
    let data = crate::data::data_dir();
    let mut out = Vec::new();
    for bench in ["bird", "spider"] {
        let Ok(dev) = std::fs::read_to_string(data.join(bench).join("dev.jsonl")) else {
            continue;
        };
        let questions: std::collections::HashMap<i64, serde_json::Value> = dev
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| Some((v.get("question_id")?.as_i64()?, v)))
            .collect();
        let Ok(entries) = std::fs::read_dir(data.join(bench).join("predictions")) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for file in files {
            let system = file
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            for line in text.lines() {
                let Ok(p) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                let Some(q) = p
                    .get("question_id")
                    .and_then(|v| v.as_i64())
                    .and_then(|id| questions.get(&id))
                else {
                    continue;
                };
                let (Some(question), Some(sql)) = (q.get("question"), p.get("predicted_sql"))
                else {
                    continue;
                };
                out.push(serde_json::json!({
                    "ts": "2026-11-21T10:00:00Z",
                    "app_id": q.get("db_id").cloned().unwrap_or_default(),
                    "agent_id": system,
                    "model": bench,
                    "question": question,
                    "sql": sql,
                    "dialect": "sqlite",
                }));
            }
        }
    }
    out
}

/// Malformed payloads of several kinds (each dead-lettered with a distinct reason class).
pub fn malformed(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| match i % 4 {
            0 => format!("{{not json {i}").into_bytes(),
            1 => format!(r#"{{"event_id":"bad-{i}","sql":"SELECT 1"}}"#).into_bytes(),
            2 => format!("[{i}]").into_bytes(),
            _ => {
                let mut b = format!("bad-{i}-").into_bytes();
                b.extend_from_slice(b"\xff\xfe");
                b
            }
        })
        .collect()
}

/// A running `sqlgrade run` process.
pub struct Daemon {
    pub child: Option<Child>,
    pub config: PathBuf,
    pub log: PathBuf,
    pub health_port: u16,
}

impl Daemon {
    /// Spawn `sqlgrade run --config <config>` with output in `log`.
    pub fn spawn(config: &Path, log: &Path, health_port: u16) -> Daemon {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = Command::new(crate::bin::sqlgrade())
            .args(["run", "--config"])
            .arg(config)
            .env("RUST_LOG", "info,rdkafka=warn")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("sqlgrade spawns");
        Daemon {
            child: Some(child),
            config: config.to_path_buf(),
            log: log.to_path_buf(),
            health_port,
        }
    }

    /// SIGKILL (no cleanup at all).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for the exit code.
    pub fn terminate(&mut self, timeout: Duration) -> Option<i32> {
        let mut c = self.child.take()?;
        signal(&c, "TERM");
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = c.try_wait() {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether `/readyz` answers 200.
    pub fn ready(&self) -> bool {
        http_get(self.health_port, "/readyz").is_some()
    }

    /// The daemon's log so far (ANSI colour codes removed).
    pub fn log_text(&self) -> String {
        strip_ansi(&std::fs::read_to_string(&self.log).unwrap_or_default())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Remove ANSI escape sequences (`ESC [ … letter`).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Poll `check` until it returns true or `timeout` passes.
pub fn eventually(timeout: Duration, check: impl FnMut() -> bool) -> bool {
    wait_until(timeout, check)
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
    /// `sink.batch_rows` / `sink.flush_interval_ms` of the daemons (tests: small and quick).
    pub batch: (usize, u64),
    /// TOML appended to every daemon config (e.g. a `[judge]` section).
    pub extra_config: String,
    /// Keys added to the `[source]` section of every daemon config (e.g. a commit interval).
    pub source_config: String,
    /// ClickHouse URL of daemon k: `sink_urls[k % len]` (default: the one server).
    pub sink_urls: Vec<String>,
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

    /// [`Harness::start`] on a ClickHouse cluster of `shards × replicas` nodes: the daemons'
    /// configs name it in `[sink.cluster]` and `sqlgrade migrate` lays the schema out on it.
    pub fn start_cluster(test: &str, events: usize, shards: u32, replicas: u32) -> Option<Harness> {
        let servers = Servers::start_cluster(test, shards, replicas)?;
        let cluster = format!("[sink.cluster]\nname = \"{}\"\n", crate::cluster::CLUSTER);
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
            extra_config,
            source_config: String::new(),
            sink_urls: Vec::new(),
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
{dlq}max_in_flight = 5000
{source}

[source.kafka_properties]
"session.timeout.ms" = "{session_ms}"
"heartbeat.interval.ms" = "500"

[sink]
kind = "clickhouse"
url = "{url}"
database = "sqlgrade"
batch_rows = {batch_rows}
flush_interval_ms = {flush_ms}
retry_initial_ms = 100
retry_max_ms = 1000

[rules]
dir = "{rules}"

[server]
listen = "127.0.0.1:{health_port}"
"#,
            brokers = self.servers.kafka.brokers(),
            session_ms = SESSION_TIMEOUT.as_millis(),
            source = if self.source_config.contains("commit_interval_ms") {
                self.source_config.clone()
            } else {
                format!("commit_interval_ms = 200\n{}", self.source_config)
            },
            url = self
                .sink_urls
                .get(self.daemons as usize % self.sink_urls.len().max(1))
                .cloned()
                .unwrap_or_else(|| self.servers.clickhouse.url()),
            rules = crate::data::repo_root().join("rules").display(),
            batch_rows = self.batch.0,
            flush_ms = self.batch.1,
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
        Daemon::spawn(&config, &log, port)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that cannot bind its port fails at once, in its own words — not after the
    /// start timeout with "did not answer".
    #[test]
    fn a_clickhouse_whose_port_is_taken_fails_at_once_with_its_log() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let result = ClickHouse::start_node(
            dir.path(),
            "clickhouse",
            "127.0.0.1",
            (port, free_port()),
            "",
        );
        let err = match result {
            Ok(_) => panic!("clickhouse started on a port that is taken"),
            Err(e) if e.contains("not installed") => return skip("servers::tests", &e),
            Err(e) => e,
        };
        eprintln!("{err}");
        assert!(err.contains("exited before it was ready"), "{err}");
        assert!(err.contains("last lines of"), "{err}");
        assert!(
            started.elapsed() < CLICKHOUSE_START / 2,
            "{:?}",
            started.elapsed()
        );
    }
}
