//! The OTLP/HTTP source (`[source] kind = "otlp"`): the receiver answered per the OTLP
//! specification (in process, with a consumer standing in for the pipeline), and the daemon fed
//! by a fake agent instrumented with the real OpenTelemetry Python SDK, whose rows must equal
//! those of the equivalent JSON events; with `[telemetry] evaluations` each row goes back to the
//! agent's trace as a `gen_ai.evaluation.result` event on its SQL span.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message as _;
use serde_json::Value;
use sqlgrade::sources::Source as _;
use sqlgrade::sources::config::OtlpConfig;
use sqlgrade::sources::otlp::OtlpSource;
use sqlgrade::spans::SpanMapping;
use sqlgrade_testkit::servers::{Daemon, free_port, skip, wait_until};
use tokio::sync::mpsc;

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
    }
}

fn span(trace: u8, id: u8, parent: Option<u8>, attributes: Vec<KeyValue>) -> Span {
    Span {
        trace_id: vec![trace; 16],
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: format!("span {id}"),
        start_time_unix_nano: 1_767_225_600_000_000_000 + u64::from(id) * 1_000_000,
        end_time_unix_nano: 1_767_225_600_000_000_000 + u64::from(id) * 2_000_000,
        attributes,
        ..Default::default()
    }
}

/// The three spans of one agent trace: root (question), LLM (model, ends before the query
/// starts), database (SQL).
fn trace_spans(trace: u8) -> (Span, Span, Span) {
    let timed = |mut s: Span, from_ms: u64, to_ms: u64| {
        let base = 1_767_225_600_000_000_000u64;
        s.start_time_unix_nano = base + from_ms * 1_000_000;
        s.end_time_unix_nano = base + to_ms * 1_000_000;
        s
    };
    let (root, llm, db) = (
        timed(
            span(trace, 1, None, vec![kv("input.value", "How many schools?")]),
            0,
            100,
        ),
        timed(
            span(trace, 2, Some(1), vec![kv("gen_ai.request.model", "m1")]),
            10,
            40,
        ),
        span(
            trace,
            3,
            Some(1),
            vec![
                kv("db.system.name", "sqlite"),
                kv("db.query.text", "SELECT COUNT(*) FROM schools"),
            ],
        ),
    );
    (root, llm, timed(db, 50, 90))
}

fn request(spans: Vec<Span>) -> Vec<u8> {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", "agent")],
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

/// A receiver and a consumer standing in for the pipeline: each message's payload is
/// forwarded, and acknowledged while `ack` is true.
struct Receiver {
    url: String,
    payloads: mpsc::UnboundedReceiver<(String, Value)>,
    ack: Arc<AtomicBool>,
    http: reqwest::Client,
}

fn start(config: OtlpConfig) -> Receiver {
    let mut source = OtlpSource::bind(&config, &SpanMapping::default(), None).unwrap();
    let url = format!("http://{}/v1/traces", source.local_addr());
    let (tx, payloads) = mpsc::unbounded_channel();
    let ack = Arc::new(AtomicBool::new(true));
    let acking = Arc::clone(&ack);
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok(Some(message)) = source.next().await {
            let payload: Value = serde_json::from_slice(&message.payload).unwrap();
            let _ = tx.send((message.origin.clone(), payload));
            if acking.load(Ordering::SeqCst) {
                message.ack.ack();
            } else {
                held.push(message.ack);
            }
        }
    });
    Receiver {
        url,
        payloads,
        ack,
        http: reqwest::Client::new(),
    }
}

fn config() -> OtlpConfig {
    OtlpConfig {
        listen: "127.0.0.1:0".into(),
        max_body_bytes: 16 * 1024,
        assembly_window_ms: 300,
        request_timeout_ms: 1_000,
        ..OtlpConfig::default()
    }
}

impl Receiver {
    async fn post(&self, body: Vec<u8>, content_type: &str) -> reqwest::Response {
        self.http
            .post(&self.url)
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap()
    }

    async fn next_payload(&mut self) -> (String, Value) {
        tokio::time::timeout(Duration::from_secs(10), self.payloads.recv())
            .await
            .expect("an event within 10 s")
            .unwrap()
    }
}

#[tokio::test]
async fn split_and_out_of_order_traces_make_one_event_each() {
    // A long window: nothing here waits for it, and a retry must find the trace remembered.
    let mut receiver = start(OtlpConfig {
        assembly_window_ms: 60_000,
        ..config()
    });
    let (root, llm, db) = trace_spans(7);
    // The database span arrives first, alone: answered at once, nothing emitted yet.
    let response = receiver
        .post(request(vec![db]), "application/x-protobuf")
        .await;
    assert_eq!(response.status(), 200);
    let body = ExportTraceServiceResponse::decode(response.bytes().await.unwrap()).unwrap();
    assert!(body.partial_success.is_none());
    assert!(receiver.payloads.try_recv().is_err());
    // The root and the LLM span complete the trace: one event, with the question and model.
    let response = receiver
        .post(request(vec![root, llm]), "application/x-protobuf")
        .await;
    assert_eq!(response.status(), 200);
    let (origin, event) = receiver.next_payload().await;
    let id = format!("{}-{}", "07".repeat(16), "03".repeat(8));
    assert_eq!(
        origin,
        format!("otlp:trace/{}/span/{}", "07".repeat(16), "03".repeat(8))
    );
    assert_eq!(event["event_id"], id.as_str());
    assert_eq!(event["question"], "How many schools?");
    assert_eq!(event["model"], "m1");
    assert_eq!(event["app_id"], "agent");
    // Sent again (an exporter's retry): taken already, no second event.
    let (root, llm, db) = trace_spans(7);
    let response = receiver
        .post(request(vec![db, llm, root]), "application/x-protobuf")
        .await;
    assert_eq!(response.status(), 200);
    assert!(receiver.payloads.try_recv().is_err());
    // A database span after its root (another batch): it still finds the question.
    let mut late = trace_spans(7).2;
    late.span_id = vec![4; 8];
    let response = receiver
        .post(request(vec![late]), "application/x-protobuf")
        .await;
    assert_eq!(response.status(), 200);
    let (_, event) = receiver.next_payload().await;
    assert_eq!(
        event["event_id"],
        format!("{}-{}", "07".repeat(16), "04".repeat(8))
    );
    assert_eq!(event["question"], "How many schools?");
}

#[tokio::test]
async fn a_trace_without_a_question_goes_out_naming_why() {
    let mut receiver = start(config());
    // The root never comes: after the window the event goes out without a question.
    let (_, _, db) = trace_spans(8);
    assert_eq!(
        receiver
            .post(request(vec![db]), "application/x-protobuf")
            .await
            .status(),
        200
    );
    let (_, event) = receiver.next_payload().await;
    assert!(event.get("question").is_none());
    let why = event["question_missing"].as_str().unwrap();
    assert!(why.contains("no question"), "{why}");
    // A root without `input.value`: the same, at once.
    let (mut root, llm, db) = trace_spans(9);
    root.attributes.clear();
    let response = receiver
        .post(request(vec![root, llm, db]), "application/x-protobuf")
        .await;
    assert_eq!(response.status(), 200);
    assert!(receiver.next_payload().await.1["question_missing"].is_string());
}

#[tokio::test]
async fn bad_requests_are_answered_per_the_spec() {
    let receiver = start(config());
    let response = receiver.post(b"{}".to_vec(), "text/plain").await;
    assert_eq!(response.status(), 415);
    let response = receiver
        .post(
            b"\xff\xff\xff not protobuf".to_vec(),
            "application/x-protobuf",
        )
        .await;
    assert_eq!(response.status(), 400);
    let response = receiver
        .post(b"{\"resourceSpans\": 5".to_vec(), "application/json")
        .await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["code"], 3);
    // Over the body limit, plain and once decompressed.
    let big = vec![b' '; 32 * 1024];
    assert_eq!(
        receiver
            .post(big.clone(), "application/json")
            .await
            .status(),
        413
    );
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&big).unwrap();
    let zipped = gz.finish().unwrap();
    assert!(zipped.len() < 16 * 1024);
    let response = receiver
        .http
        .post(&receiver.url)
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(zipped)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    // A span with malformed ids is rejected and named; the rest is accepted.
    let mut bad = trace_spans(3).2;
    bad.trace_id = vec![1, 2, 3];
    let response = receiver
        .post(request(vec![bad]), "application/x-protobuf")
        .await;
    assert_eq!(response.status(), 200);
    let body = ExportTraceServiceResponse::decode(response.bytes().await.unwrap()).unwrap();
    let partial = body.partial_success.unwrap();
    assert_eq!(partial.rejected_spans, 1);
    assert!(partial.error_message.contains("trace id"));
}

#[tokio::test]
async fn json_requests_get_json_answers_and_a_token_is_enforced() {
    // `HOME` is set in every test environment: its value is the token.
    let token = std::env::var("HOME").unwrap();
    let mut receiver = start(OtlpConfig {
        token_env: Some("HOME".into()),
        ..config()
    });
    let body = serde_json::json!({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "0a".repeat(16), "spanId": "01".repeat(8), "name": "root",
         "attributes": [{"key": "input.value", "value": {"stringValue": "q?"}}]},
        {"traceId": "0a".repeat(16), "spanId": "02".repeat(8), "parentSpanId": "01".repeat(8),
         "attributes": [{"key": "db.query.text", "value": {"stringValue": "SELECT 1"}}]}
    ]}]}]})
    .to_string()
    .into_bytes();
    let response = receiver.post(body.clone(), "application/json").await;
    assert_eq!(response.status(), 401);
    let response = receiver
        .http
        .post(&receiver.url)
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {token}"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        serde_json::json!({})
    );
    assert_eq!(receiver.next_payload().await.1["question"], "q?");
}

#[tokio::test]
async fn unwritten_events_are_not_acknowledged() {
    let mut receiver = start(config());
    receiver.ack.store(false, Ordering::SeqCst);
    let (root, llm, db) = trace_spans(5);
    let response = receiver
        .post(request(vec![root, llm, db]), "application/x-protobuf")
        .await;
    // The event reached the pipeline but was never written: retry later, not success.
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    receiver.next_payload().await;
}

fn otel_python() -> Option<PathBuf> {
    let venv = std::env::var_os("SQLGRADE_OTEL_VENV")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/sqlgrade/otel-venv"))
        })?;
    let python = venv.join("bin/python");
    python.is_file().then_some(python)
}

/// What must match between the two routes: every field but the processing latency.
fn rows(path: &Path) -> std::collections::BTreeMap<String, Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let mut row: Value = serde_json::from_str(l).unwrap();
            row.as_object_mut().unwrap().remove("latency_us");
            (format!("{}/{}", row["event_id"], row["metric"]), row)
        })
        .collect()
}

#[test]
fn traces_from_the_real_sdk_score_like_the_equivalent_json_events() {
    let Some(python) = otel_python() else {
        skip(
            "traces_from_the_real_sdk_score_like_the_equivalent_json_events",
            "no OpenTelemetry SDK virtualenv (scripts/services.sh install)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (mut daemon, port, out) = spawn_otlp_daemon(dir.path(), "");
    let events = run_agent(
        &python,
        &format!("http://127.0.0.1:{port}/v1/traces"),
        200,
        dir.path(),
    );
    // Every export was answered 200 once its traces were written: stop and read the rows.
    assert_eq!(
        daemon.terminate(Duration::from_secs(30)),
        Some(0),
        "{}",
        daemon.log_text()
    );
    // The summary says what the receiver saw: three spans per trace, one of them SQL.
    let log = daemon.log_text();
    assert!(
        log.contains("600 received: 200 made events, 400 not SQL (dropped), 0 rejected"),
        "{log}"
    );
    let from_traces = rows(&out.join("evaluations.jsonl"));
    let stef: Vec<&Value> = from_traces
        .values()
        .filter(|r| r["metric"] == "stef")
        .collect();
    assert_eq!(stef.len(), 200, "{}", daemon.log_text());
    assert!(
        stef.iter()
            .all(|r| r["app_id"] == "bird-agent" && r["agent_version"] == "2.3.1")
    );
    let failed = stef
        .iter()
        .filter(|r| r.to_string().contains("query_fails"))
        .count();
    assert_eq!(failed, 20);
    assert!(
        !out.join("dead_letters.jsonl").exists() || {
            std::fs::read_to_string(out.join("dead_letters.jsonl"))
                .unwrap()
                .is_empty()
        }
    );
    // The same events as JSON through the file source: the same rows.
    let from_json = rows_of_json_events(&events, dir.path());
    assert_eq!(from_traces.len(), from_json.len());
    for (key, row) in &from_json {
        assert_eq!(from_traces.get(key), Some(row), "{key}");
    }
}

/// A daemon with the OTLP source on a free port and a JSONL sink under `dir/out`, plus `extra`
/// TOML, once ready: (daemon, the source's port, the output directory).
fn spawn_otlp_daemon(dir: &Path, extra: &str) -> (Daemon, u16, PathBuf) {
    let (port, health) = (free_port(), free_port());
    let out = dir.join("out");
    let config = dir.join("sqlgrade.toml");
    std::fs::write(
        &config,
        format!(
            "[source]\nkind = \"otlp\"\n[source.otlp]\nlisten = \"127.0.0.1:{port}\"\n\
             [sink]\nkind = \"jsonl\"\ndir = {:?}\n[server]\nlisten = \"127.0.0.1:{health}\"\n{extra}",
            out.display().to_string()
        ),
    )
    .unwrap();
    let daemon = Daemon::spawn(&config, &dir.join("daemon.log"), health);
    assert!(
        wait_until(Duration::from_secs(60), || daemon.ready()),
        "{}",
        daemon.log_text()
    );
    (daemon, port, out)
}

/// Run the fake agent: `endpoint` is the receiver's URL or `file:PATH` (protobuf batches, one
/// hex line each); returns the equivalent JSON events' file.
fn run_agent(python: &Path, endpoint: &str, count: usize, dir: &Path) -> PathBuf {
    let events = dir.join("events.jsonl");
    let agent = std::process::Command::new(python)
        .arg(sqlgrade_testkit::data::repo_root().join("tests/support/otel_agent.py"))
        .arg(endpoint)
        .arg(sqlgrade_testkit::data::data_dir())
        .arg(count.to_string())
        .arg(&events)
        .arg("gzip")
        .output()
        .unwrap();
    assert!(
        agent.status.success(),
        "{}",
        String::from_utf8_lossy(&agent.stderr)
    );
    events
}

/// The rows of the same events as JSON through the file source (from the repository, like the
/// daemon: the same rule profiles).
fn rows_of_json_events(events: &Path, dir: &Path) -> std::collections::BTreeMap<String, Value> {
    let out = dir.join("file-out");
    let status = sqlgrade_testkit::cli::sqlgrade(&sqlgrade_testkit::data::repo_root())
        .arg("run")
        .env("SQLGRADE__SOURCE__PATH", events)
        .env("SQLGRADE__SINK__DIR", &out)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    rows(&out.join("evaluations.jsonl"))
}

#[test]
fn traces_from_the_real_sdk_through_kafka_as_otlp_proto() {
    let test = "traces_from_the_real_sdk_through_kafka_as_otlp_proto";
    let Some(python) = otel_python() else {
        skip(
            test,
            "no OpenTelemetry SDK virtualenv (scripts/services.sh install)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let kafka = match sqlgrade_testkit::servers::Tansu::start_in(dir.path()) {
        Ok(k) => k,
        Err(e) => {
            skip(test, &e);
            return;
        }
    };
    kafka.create_topic("otlp_spans", 2);
    let batches = dir.path().join("batches.hex");
    let events = run_agent(
        &python,
        &format!("file:{}", batches.display()),
        200,
        dir.path(),
    );
    let mut payloads: Vec<Vec<u8>> = std::fs::read_to_string(&batches)
        .unwrap()
        .lines()
        .map(|l| hex::decode(l).unwrap())
        .collect();
    // A message that is not an OTLP request becomes a dead letter, not a lost or stuck offset.
    payloads.push(b"not protobuf at all \xff\xff".to_vec());
    // Split the batches so the spans of a trace land in different messages and partitions.
    let mut split = Vec::new();
    for payload in payloads {
        match ExportTraceServiceRequest::decode(payload.as_slice()) {
            Ok(request) => {
                for resource in request.resource_spans {
                    for scope in resource.scope_spans {
                        for span in scope.spans {
                            split.push(
                                ExportTraceServiceRequest {
                                    resource_spans: vec![ResourceSpans {
                                        resource: resource.resource.clone(),
                                        scope_spans: vec![ScopeSpans {
                                            spans: vec![span],
                                            ..Default::default()
                                        }],
                                        ..Default::default()
                                    }],
                                }
                                .encode_to_vec(),
                            );
                        }
                    }
                }
            }
            Err(_) => split.push(payload),
        }
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let producer = sqlgrade_testkit::servers::producer(&kafka.brokers());
        sqlgrade_testkit::servers::produce_all(&producer, "otlp_spans", 2, &split).await;
    });
    let out = dir.path().join("out");
    let health = free_port();
    let config = dir.path().join("sqlgrade.toml");
    std::fs::write(
        &config,
        format!(
            "[source]\nkind = \"kafka\"\nformat = \"otlp_proto\"\nbrokers = \"{}\"\n\
             topics = [\"otlp_spans\"]\ngroup_id = \"otlp\"\n[source.otlp]\nassembly_window_ms = 30000\n\
             [sink]\nkind = \"jsonl\"\ndir = {:?}\n[server]\nlisten = \"127.0.0.1:{health}\"\n",
            kafka.brokers(),
            out.display().to_string()
        ),
    )
    .unwrap();
    let mut daemon = Daemon::spawn(&config, &dir.path().join("daemon.log"), health);
    let evaluations = out.join("evaluations.jsonl");
    let count_rows = || {
        std::fs::read_to_string(&evaluations)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    assert!(
        wait_until(Duration::from_secs(90), || count_rows() >= 200),
        "{} rows, dead letters: {}\n{}",
        count_rows(),
        std::fs::read_to_string(out.join("dead_letters.jsonl"))
            .unwrap_or_default()
            .chars()
            .take(3000)
            .collect::<String>(),
        daemon.log_text()
    );
    // Every message's offset is committed once its traces are written, the bad one included.
    assert!(
        wait_until(Duration::from_secs(30), || {
            let committed =
                sqlgrade_testkit::servers::committed(&kafka.brokers(), "otlp", "otlp_spans", 2);
            committed.values().sum::<i64>() == split.len() as i64
        }),
        "{}",
        daemon.log_text()
    );
    assert_eq!(
        daemon.terminate(Duration::from_secs(30)),
        Some(0),
        "{}",
        daemon.log_text()
    );
    let from_kafka = rows(&evaluations);
    let from_json = rows_of_json_events(&events, dir.path());
    assert_eq!(from_kafka.len(), 200);
    for (key, row) in &from_json {
        assert_eq!(from_kafka.get(key), Some(row), "{key}");
    }
    let failed = from_kafka
        .values()
        .filter(|r| r.to_string().contains("query_fails"))
        .count();
    assert_eq!(failed, 20);
    let dead = std::fs::read_to_string(out.join("dead_letters.jsonl")).unwrap();
    assert_eq!(dead.lines().count(), 1, "{dead}");
}

/// An attribute of a log record, as the receiver decoded it.
fn log_attr(record: &LogRecord, key: &str) -> Option<any_value::Value> {
    record
        .attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone()?.value)
}

#[test]
fn evaluation_events_land_on_the_sql_spans_even_when_the_collector_comes_late() {
    let test = "evaluation_events_land_on_the_sql_spans_even_when_the_collector_comes_late";
    let Some(python) = otel_python() else {
        skip(
            test,
            "no OpenTelemetry SDK virtualenv (scripts/services.sh install)",
        );
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let collector = free_port();
    // The collector is away when the traces arrive: nothing listens on its port yet.
    let (mut daemon, port, out) = spawn_otlp_daemon(
        dir.path(),
        &format!(
            "[telemetry]\nevaluations = true\notlp_endpoint = \"http://127.0.0.1:{collector}\"\n"
        ),
    );
    run_agent(
        &python,
        &format!("http://127.0.0.1:{port}/v1/traces"),
        200,
        dir.path(),
    );
    // Every export was answered once its rows were written: the rows are in the store while
    // their evaluation events still wait for the collector.
    let stef_rows: std::collections::BTreeMap<String, Value> = rows(&out.join("evaluations.jsonl"))
        .into_values()
        .filter(|r| r["metric"] == "stef")
        .map(|r| (r["event_id"].as_str().unwrap().to_string(), r))
        .collect();
    assert_eq!(stef_rows.len(), 200, "{}", daemon.log_text());
    // The collector comes up; the queue (8,192 by default) held every record.
    let receiver = runtime.block_on(sqlgrade_testkit::otlp::OtlpReceiver::start_on(collector));
    assert!(
        wait_until(Duration::from_secs(60), || receiver.log_records().len()
            >= 200),
        "{} records; {}",
        receiver.log_records().len(),
        daemon.log_text()
    );
    let records = receiver.log_records();
    assert_eq!(
        records.len(),
        200,
        "one record per row (STEF only: no gold)"
    );
    let mut seen = std::collections::BTreeSet::new();
    for record in &records {
        assert_eq!(record.event_name, "gen_ai.evaluation.result");
        assert_eq!(
            log_attr(record, "gen_ai.evaluation.name"),
            Some(any_value::Value::StringValue("stef".into()))
        );
        let Some(any_value::Value::StringValue(event_id)) = log_attr(record, "sqlgrade.event_id")
        else {
            panic!("no event id: {record:?}")
        };
        // The OTLP source names each event `<trace id>-<SQL span id>`: the record sits on it.
        assert_eq!(
            format!(
                "{}-{}",
                hex::encode(&record.trace_id),
                hex::encode(&record.span_id)
            ),
            event_id
        );
        let row = &stef_rows[&event_id];
        let Some(any_value::Value::DoubleValue(value)) =
            log_attr(record, "gen_ai.evaluation.score.value")
        else {
            panic!("no score: {record:?}")
        };
        assert!((value - row["value"].as_f64().unwrap()).abs() < 1e-9);
        let label = if row["verdict"] == true {
            "correct"
        } else {
            "incorrect"
        };
        assert_eq!(
            log_attr(record, "gen_ai.evaluation.score.label"),
            Some(any_value::Value::StringValue(label.into()))
        );
        // (serde_json's default float parsing may be a unit in the last place off.)
        let Some(any_value::Value::DoubleValue(p)) = log_attr(record, "sqlgrade.p_correct") else {
            panic!("no p_correct: {record:?}")
        };
        assert!((p - row["p_correct"].as_f64().unwrap()).abs() < 1e-12);
        assert!(seen.insert(event_id));
    }
    // A failed query's record explains itself.
    assert!(records.iter().any(|r| matches!(
        log_attr(r, "gen_ai.evaluation.explanation"),
        Some(any_value::Value::StringValue(text)) if text.contains("query_fails")
    )));
    assert_eq!(
        daemon.terminate(Duration::from_secs(30)),
        Some(0),
        "{}",
        daemon.log_text()
    );
    let log = daemon.log_text();
    assert!(
        log.contains("evaluation events 200 of 200 sent to the collector (0 dropped"),
        "{log}"
    );
}

/// The acceptance of issue 79: two gzipped requests of a million empty spans each (2 MB,
/// 2 KB gzipped), sent at once to a running daemon, are refused (413) for what they hold
/// before anything is decoded; the daemon stays up, answers a normal request after them, and
/// its peak resident memory stays under 400 MB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn million_span_requests_are_refused_before_they_are_decoded() {
    let dir = tempfile::tempdir().unwrap();
    let (mut daemon, port, _out) = spawn_otlp_daemon(dir.path(), "");
    let pid = daemon.child.as_ref().unwrap().id();
    // ScopeSpans.spans (field 2) with no fields: two bytes a span.
    let empty_spans: Vec<u8> = [0x12u8, 0x00].repeat(1_000_000);
    let body = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans::default()],
            ..Default::default()
        }],
    }
    .encode_to_vec();
    // The spans are the ScopeSpans' content; ResourceSpans.scope_spans (field 2) holds it and
    // the request's resource_spans (field 1) that, lengths encoded by hand.
    let mut resource = Vec::new();
    put_len(2, &empty_spans, &mut resource);
    let mut million = Vec::new();
    put_len(1, &resource, &mut million);
    assert!(body.len() < 16 && million.len() > 2_000_000);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&million).unwrap();
    let gzipped = gz.finish().unwrap();
    eprintln!("{} bytes, {} gzipped", million.len(), gzipped.len());
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/v1/traces");
    let send = || {
        http.post(&url)
            .header("Content-Type", "application/x-protobuf")
            .header("Content-Encoding", "gzip")
            .body(gzipped.clone())
            .send()
    };
    let (a, b) = tokio::join!(send(), send());
    for answer in [a.unwrap(), b.unwrap()] {
        assert_eq!(answer.status(), 413);
        // google.rpc.Status: its message is plain text inside the protobuf.
        let status = String::from_utf8_lossy(&answer.bytes().await.unwrap()).into_owned();
        assert!(status.contains("20000 spans"), "{status}");
    }
    // Still up, and a normal request is answered.
    let (root, _, _) = trace_spans(1);
    let ok = http
        .post(&url)
        .header("Content-Type", "application/x-protobuf")
        .body(request(vec![root]))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert!(daemon.exited().is_none(), "{}", daemon.log_text());
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let peak_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    eprintln!("daemon peak resident set: {} MiB", peak_kb / 1024);
    assert!(peak_kb < 400 * 1024, "peak {} MiB", peak_kb / 1024);
    assert_eq!(daemon.terminate(Duration::from_secs(30)), Some(0));
}

/// Append protobuf field `field` (length-delimited) holding `bytes`.
fn put_len(field: u8, bytes: &[u8], out: &mut Vec<u8>) {
    out.push((field << 3) | 2);
    let mut n = bytes.len() as u64;
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(bytes);
}
