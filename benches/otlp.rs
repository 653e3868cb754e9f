//! The OTLP/HTTP source against the file source, whole process, on the same events:
//!
//!   cargo bench --bench otlp -- [--events N]
//!
//! N events (default 100,000: the shared BIRD and Spider predictions, cycled with fresh ids, no
//! gold data), each also written as an agent's trace — a root span with the question
//! (`input.value`), an LLM span (`gen_ai.request.model`) and a database span (the SQL) — packed
//! 500 traces (1,500 spans) per protobuf `ExportTraceServiceRequest`, about what a Collector's
//! batch processor sends.
//!
//! 1. **File**: the release `sqlgrade run`, file source → JSONL: wall time, events/s, the
//!    child's CPU per event (`getrusage(RUSAGE_CHILDREN)`).
//! 2. **OTLP/HTTP**: the same binary with `[source] kind = "otlp"` → JSONL; 8 concurrent
//!    clients post the requests (a Collector's sending queue has 10 consumers); each answer comes once the request's events are written, so
//!    the time from the first post to the last answer is the throughput; CPU per event likewise.
//!    Target: ≥ 80 % of the file source's events/s.
//! 3. **Memory of pending traces**: 10,000 traces whose root never comes (database spans only,
//!    a long assembly window) sent to a fresh daemon; its resident memory before and after.
//!
//! Results are recorded in `benches/README.md` ("OTLP source").

mod support;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message as _;

/// Traces per request (three spans each).
const TRACES_PER_REQUEST: usize = 500;
/// Requests in flight at once.
const CLIENTS: usize = 8;

fn events_arg() -> usize {
    let argv: Vec<String> = std::env::args().collect();
    argv.iter()
        .position(|a| a == "--events")
        .and_then(|i| argv.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

fn children_cpu() -> Duration {
    support::children_usage().0
}

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
    }
}

/// The three spans of event `i`'s trace (`with_root = false`: the database span only).
fn trace_of(i: usize, event: &sqlgrade::event::Event, with_root: bool) -> Vec<Span> {
    let mut trace_id = [0u8; 16];
    trace_id[..8].copy_from_slice(&(i as u64 + 1).to_be_bytes());
    trace_id[8] = 1;
    let span = |id: u8, parent: Option<u8>, start: u64, end: u64, attributes| Span {
        trace_id: trace_id.to_vec(),
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: format!("span {id}"),
        start_time_unix_nano: 1_767_225_600_000_000_000 + start,
        end_time_unix_nano: 1_767_225_600_000_000_000 + end,
        attributes,
        ..Default::default()
    };
    let mut db = vec![
        kv("db.system.name", "sqlite"),
        kv("db.query.text", &event.sql),
    ];
    if let Some(db_id) = &event.db_id {
        db.push(kv("db.namespace", db_id));
    }
    let mut spans = vec![span(3, Some(1), 50_000, 90_000, db)];
    if with_root {
        spans.push(span(
            2,
            Some(1),
            10_000,
            40_000,
            vec![kv("gen_ai.request.model", "m")],
        ));
        spans.push(span(
            1,
            None,
            0,
            100_000,
            vec![kv("input.value", &event.question)],
        ));
    }
    spans
}

fn request(spans: Vec<Span>) -> Vec<u8> {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", "bench-agent")],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A daemon with the OTLP source on a free port, writing to `out`.
fn spawn_otlp(
    dir: &std::path::Path,
    out: &std::path::Path,
    window_ms: u64,
) -> (std::process::Child, u16) {
    let port = sqlgrade_testkit::servers::free_port();
    let config = dir.join(format!("otlp-{port}.toml"));
    std::fs::write(
        &config,
        format!(
            "[source]\nkind = \"otlp\"\n[source.otlp]\nlisten = \"127.0.0.1:{port}\"\n\
             assembly_window_ms = {window_ms}\nrequest_timeout_ms = 600000\n\
             [sink]\nkind = \"jsonl\"\ndir = {:?}\n[server]\nlisten = \"\"\n",
            out.display().to_string()
        ),
    )
    .expect("config");
    let child = Command::new(sqlgrade_testkit::bin::sqlgrade())
        .args(["run", "--config"])
        .arg(&config)
        .env("RUST_LOG", "warn")
        .current_dir(dir)
        .stdout(Stdio::null())
        .spawn()
        .expect("sqlgrade");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the OTLP receiver did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, port)
}

fn post_all(port: u16, bodies: Vec<Vec<u8>>, clients: usize) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let http = reqwest::Client::new();
        let url = format!("http://127.0.0.1:{port}/v1/traces");
        let queue = Arc::new(std::sync::Mutex::new(bodies));
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let (http, url, queue) = (http.clone(), url.clone(), Arc::clone(&queue));
            tasks.push(tokio::spawn(async move {
                loop {
                    let Some(body) = queue.lock().unwrap().pop() else {
                        return;
                    };
                    let response = http
                        .post(&url)
                        .header("content-type", "application/x-protobuf")
                        .body(body)
                        .send()
                        .await
                        .expect("post");
                    assert_eq!(response.status(), 200, "{:?}", response.text().await);
                }
            }));
        }
        for task in tasks {
            task.await.expect("client");
        }
    });
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("otlp: skipped outside `cargo bench`");
        return;
    }
    let n = events_arg();
    let corpus = support::prediction_events();
    assert!(!corpus.is_empty(), "no shared data");
    let dir = tempfile::tempdir().expect("temp dir");
    let events: Vec<sqlgrade::event::Event> = (0..n)
        .map(|i| {
            let mut e = corpus[i % corpus.len()].clone();
            e.event_id = format!("ev-{i:06}");
            e.gold = None;
            e
        })
        .collect();
    let input = dir.path().join("events.jsonl");
    let text: String = events
        .iter()
        .map(|e| serde_json::to_string(e).expect("event") + "\n")
        .collect();
    std::fs::write(&input, text).expect("events");
    let binary = sqlgrade_testkit::bin::sqlgrade();
    let rows = |out: &std::path::Path| {
        std::fs::read_to_string(out.join("evaluations.jsonl"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };

    // 1. File → JSONL.
    let out = dir.path().join("file-out");
    let cpu0 = children_cpu();
    let started = Instant::now();
    let status = Command::new(&binary)
        .arg("run")
        .env("SQLGRADE__SOURCE__PATH", &input)
        .env("SQLGRADE__SINK__DIR", &out)
        .env("RUST_LOG", "warn")
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .status()
        .expect("run");
    let file_wall = started.elapsed();
    let file_cpu = children_cpu() - cpu0;
    assert!(status.success());
    assert_eq!(rows(&out), n);
    let file_rate = n as f64 / file_wall.as_secs_f64();
    println!(
        "otlp bench: {n} events ({} distinct)\n  file → JSONL: {:.2} s wall = {file_rate:.0} events/s; {:.1} µs CPU per event",
        corpus.len(),
        file_wall.as_secs_f64(),
        file_cpu.as_secs_f64() * 1e6 / n as f64
    );

    // 2. OTLP/HTTP → JSONL.
    let bodies: Vec<Vec<u8>> = (0..n)
        .collect::<Vec<_>>()
        .chunks(TRACES_PER_REQUEST)
        .map(|chunk| {
            request(
                chunk
                    .iter()
                    .flat_map(|&i| trace_of(i, &events[i], true))
                    .collect(),
            )
        })
        .collect();
    let body_bytes: usize = bodies.iter().map(Vec::len).sum();
    let out = dir.path().join("otlp-out");
    let cpu0 = children_cpu();
    let (mut child, port) = spawn_otlp(dir.path(), &out, 5_000);
    let started = Instant::now();
    post_all(port, bodies, CLIENTS);
    let otlp_wall = started.elapsed();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().expect("wait").success());
    let otlp_cpu = children_cpu() - cpu0;
    assert_eq!(rows(&out), n, "one row per event");
    let otlp_rate = n as f64 / otlp_wall.as_secs_f64();
    println!(
        "  OTLP/HTTP (protobuf, {TRACES_PER_REQUEST} traces per request, {CLIENTS} clients, {:.1} MB) → JSONL: {:.2} s = {otlp_rate:.0} events/s ({:.0} % of the file source); {:.1} µs CPU per event (whole run)",
        body_bytes as f64 / 1e6,
        otlp_wall.as_secs_f64(),
        100.0 * otlp_rate / file_rate,
        otlp_cpu.as_secs_f64() * 1e6 / n as f64
    );

    // 3. Memory of 10,000 pending traces.
    let pending = 10_000.min(n);
    let bodies: Vec<Vec<u8>> = (0..pending)
        .collect::<Vec<_>>()
        .chunks(100)
        .map(|chunk| {
            request(
                chunk
                    .iter()
                    .flat_map(|&i| trace_of(i, &events[i], false))
                    .collect(),
            )
        })
        .collect();
    let out = dir.path().join("pending-out");
    let (mut child, port) = spawn_otlp(dir.path(), &out, 600_000);
    std::thread::sleep(Duration::from_millis(500));
    let before = rss_kib(child.id());
    post_all(port, bodies, 1);
    std::thread::sleep(Duration::from_millis(200));
    let after = rss_kib(child.id());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    println!(
        "  {pending} pending traces (database spans waiting for a root): resident memory {:.1} → {:.1} MiB (+{:.1} MiB, {:.0} bytes per trace)",
        before as f64 / 1024.0,
        after as f64 / 1024.0,
        after.saturating_sub(before) as f64 / 1024.0,
        after.saturating_sub(before) as f64 * 1024.0 / pending as f64
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "  load average at the end: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
}
