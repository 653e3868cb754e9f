//! `[telemetry] evaluations`: every evaluation row as an OpenTelemetry **evaluation event** on
//! the agent's own trace, so a person looking at the trace of a wrong answer sees its score, and
//! a person looking at a score can open its trace.
//!
//! Each row (`stef`, `stef_judged`, the gold metrics) becomes one OTLP log record with event name
//! `gen_ai.evaluation.result`, posted as a protobuf `ExportLogsServiceRequest` to
//! `<otlp_endpoint>/v1/logs`, with the record's trace and span ids set to the evaluated span (the
//! event's [`TraceContext`]: the SQL span's for events made from traces, the `traceparent` or
//! `trace_id` + `span_id` fields of JSON events). Conventions followed: the GenAI evaluation
//! event as specified in semantic-conventions **v1.38.0** and, unchanged, in
//! `open-telemetry/semantic-conventions-genai` `model/gen-ai/events.yaml` as read on 2026-12-03
//! (status *development*; that repository has no release to pin) — see [`SCHEMA_URL`]:
//!
//! | attribute | value |
//! |---|---|
//! | `gen_ai.evaluation.name` (required) | the metric (`stef`, `stef_judged`, `ex`, …) |
//! | `gen_ai.evaluation.score.value` | the row's value (Φ 0–100 for STEF, 0–1 otherwise); absent when the row is not scored |
//! | `gen_ai.evaluation.score.label` | `correct` / `incorrect` (the row's verdict; low cardinality, as the conventions ask) |
//! | `gen_ai.evaluation.explanation` | the top findings (`code (severity): evidence`), else the judge's rationale or the error, at most [`EXPLANATION_BYTES`] |
//! | `error.type` | the row's status when it is not `ok` |
//! | `sqlgrade.*` | `event_id`, `judge_identity`, `quality_tier`, `p_correct`, `app_id`, `agent_id`, `agent_version`, `model`, `run_id` where the row has them |
//!
//! Delivery: rows are handed to a bounded queue ([`TelemetryConfig::evaluations_queue`]) without
//! waiting — scoring never slows for the collector — and a task of its own sends them in batches
//! of up to [`BATCH`] (or what came within [`LINGER`]), retrying a transport error, a 5xx or a
//! 429 with backoff (100 ms doubling to 5 s) for as long as the collector is away. Meanwhile
//! records wait in the queue; beyond it they are dropped and counted, as are records the
//! collector refuses (another 4xx: retrying cannot help) and those still waiting when shutdown's
//! grace ends. The counts go to the run summary and to telemetry. The store never depends on
//! this: rows are sent when they are observed, independently of the sink (a row the sink then
//! fails to write, and the source redelivers, may be sent twice — at least once, like OTLP).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use memchr::memmem::Finder;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs, SeverityNumber};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message as _;
use serde::Deserialize;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::evaluation::{Details, EvaluationRow, RowStatus};
use crate::event::TraceContext;
use crate::telemetry::config::TelemetryConfig;
use crate::telemetry::stats::EvaluationEventCounts;

/// The event name of every record.
pub const EVENT_NAME: &str = "gen_ai.evaluation.result";
/// The semantic-conventions schema the records follow (the scope's `schema_url`).
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.38.0";
/// Records per export request at most.
pub const BATCH: usize = 512;
/// How long a batch waits for more records after its first.
pub const LINGER: Duration = Duration::from_millis(500);
/// The explanation's length at most (bytes, cut at a character boundary).
pub const EXPLANATION_BYTES: usize = 512;
/// Findings named in the explanation at most (the most severe first).
const EXPLANATION_FINDINGS: usize = 3;
/// The first retry's wait, doubled per failed attempt up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Why the evaluation exporter could not start.
#[derive(Debug, thiserror::Error)]
pub enum EvaluationExportError {
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client for evaluation events")]
    Client(#[source] reqwest::Error),
}

/// One row waiting to be sent, with the span it evaluates.
struct Pending {
    row: EvaluationRow,
    trace: Option<TraceContext>,
}

/// The counters of one exporter (shared by its senders and its task).
#[derive(Debug, Default)]
struct Counters {
    submitted: AtomicU64,
    sent: AtomicU64,
    dropped_queue_full: AtomicU64,
    refused: AtomicU64,
    dropped_at_shutdown: AtomicU64,
    failed_attempts: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> EvaluationEventCounts {
        EvaluationEventCounts {
            submitted: self.submitted.load(Ordering::Relaxed),
            sent: self.sent.load(Ordering::Relaxed),
            dropped_queue_full: self.dropped_queue_full.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            dropped_at_shutdown: self.dropped_at_shutdown.load(Ordering::Relaxed),
            failed_attempts: self.failed_attempts.load(Ordering::Relaxed),
        }
    }
}

/// Hands rows to the exporter; cheap to clone, never waits.
#[derive(Clone)]
pub struct EvaluationSender {
    tx: mpsc::Sender<Pending>,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for EvaluationSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvaluationSender")
            .field("counts", &self.counters.snapshot())
            .finish()
    }
}

impl EvaluationSender {
    /// Queue one event's rows (or one judged row), evaluating the span `trace`. A full queue
    /// drops the rows that do not fit and counts them.
    pub fn submit(&self, rows: &[EvaluationRow], trace: Option<TraceContext>) {
        for row in rows {
            self.counters.submitted.fetch_add(1, Ordering::Relaxed);
            let pending = Pending {
                row: row.clone(),
                trace,
            };
            if self.tx.try_send(pending).is_err() {
                self.counters
                    .dropped_queue_full
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The counts so far.
    pub fn counts(&self) -> EvaluationEventCounts {
        self.counters.snapshot()
    }
}

/// The running exporter: its task and a sender for the pipeline.
pub struct EvaluationExporter {
    sender: EvaluationSender,
    stopping: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl EvaluationExporter {
    /// Start the exporter's task as `[telemetry]` says (`evaluations` is the caller's to check).
    pub fn start(config: &TelemetryConfig) -> Result<EvaluationExporter, EvaluationExportError> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(config.export_timeout_ms.max(1)))
            .build()
            .map_err(EvaluationExportError::Client)?;
        let (tx, rx) = mpsc::channel(config.evaluations_queue.max(1));
        let counters = Arc::new(Counters::default());
        let (stopping, stop_rx) = watch::channel(false);
        let export = Export {
            client,
            url: config.logs_url(),
            resource: resource(&config.service_name),
            counters: Arc::clone(&counters),
            stopping: stop_rx,
        };
        let task = tokio::spawn(export.run(rx));
        Ok(EvaluationExporter {
            sender: EvaluationSender { tx, counters },
            stopping,
            task,
        })
    }

    /// A sender for the pipeline.
    pub fn sender(&self) -> EvaluationSender {
        self.sender.clone()
    }

    /// Send what is queued, within `grace` (a collector that is away is retried until then),
    /// then stop; what is still waiting is dropped and counted. Call once the pipeline (every
    /// other sender) is done.
    pub async fn finish(self, grace: Duration) -> EvaluationEventCounts {
        let EvaluationExporter {
            sender,
            stopping,
            mut task,
        } = self;
        let counters = Arc::clone(&sender.counters);
        drop(sender);
        let deadline = tokio::time::Instant::now() + grace;
        // Retries go on until the deadline; after it the task gives up on its batch.
        let stop_at_deadline = async {
            tokio::time::sleep_until(deadline).await;
            let _ = stopping.send(true);
            // A last moment for the task to count what it held, then it is aborted.
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        tokio::select! {
            _ = &mut task => {}
            () = stop_at_deadline => {
                task.abort();
                let _ = task.await;
            }
        }
        // Whatever was neither sent, refused nor dropped is lost with the process.
        let c = counters.snapshot();
        let accounted = c.sent + c.dropped_queue_full + c.refused + c.dropped_at_shutdown;
        if c.submitted > accounted {
            counters
                .dropped_at_shutdown
                .fetch_add(c.submitted - accounted, Ordering::Relaxed);
        }
        let counts = counters.snapshot();
        if counts.dropped() > 0 {
            tracing::warn!(
                dropped_queue_full = counts.dropped_queue_full,
                refused = counts.refused,
                dropped_at_shutdown = counts.dropped_at_shutdown,
                "evaluation events were not all delivered"
            );
        }
        counts
    }
}

/// The exporter task's state.
struct Export {
    client: reqwest::Client,
    url: String,
    resource: Resource,
    counters: Arc<Counters>,
    stopping: watch::Receiver<bool>,
}

impl Export {
    async fn run(mut self, mut rx: mpsc::Receiver<Pending>) {
        let mut batch: Vec<Pending> = Vec::with_capacity(BATCH);
        while let Some(first) = rx.recv().await {
            batch.push(first);
            let linger = tokio::time::sleep(LINGER);
            tokio::pin!(linger);
            while batch.len() < BATCH {
                tokio::select! {
                    biased;
                    next = rx.recv() => match next {
                        Some(p) => batch.push(p),
                        None => break,
                    },
                    () = &mut linger => break,
                }
            }
            let n = batch.len() as u64;
            let body = encode_request(&self.resource, &batch, SystemTime::now()).encode_to_vec();
            batch.clear();
            match self.deliver(body).await {
                Delivery::Sent => self.counters.sent.fetch_add(n, Ordering::Relaxed),
                Delivery::Refused => self.counters.refused.fetch_add(n, Ordering::Relaxed),
                Delivery::GaveUp => self
                    .counters
                    .dropped_at_shutdown
                    .fetch_add(n, Ordering::Relaxed),
            };
        }
    }

    /// Post one request until it is taken, refused, or shutdown's grace ends.
    async fn deliver(&mut self, body: Vec<u8>) -> Delivery {
        let mut backoff = FIRST_BACKOFF;
        let mut warned = false;
        loop {
            let attempt = self
                .client
                .post(&self.url)
                .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
                .body(body.clone())
                .send()
                .await;
            let why = match attempt {
                Ok(response) if response.status().is_success() => {
                    if warned {
                        tracing::info!("the collector takes evaluation events again");
                    }
                    return Delivery::Sent;
                }
                Ok(response) => {
                    let status = response.status();
                    if status.is_client_error() && status != reqwest::StatusCode::TOO_MANY_REQUESTS
                    {
                        tracing::warn!(%status, "the collector refused evaluation events; dropping the batch");
                        return Delivery::Refused;
                    }
                    format!("HTTP {status}")
                }
                // Without the URL: it may carry a credential.
                Err(error) => transport_error(&error),
            };
            self.counters
                .failed_attempts
                .fetch_add(1, Ordering::Relaxed);
            if !warned {
                tracing::warn!(%why, "cannot send evaluation events; retrying with backoff");
                warned = true;
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                _ = self.stopping.wait_for(|stop| *stop) => return Delivery::GaveUp,
            }
            if *self.stopping.borrow() {
                return Delivery::GaveUp;
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

/// What became of one request.
enum Delivery {
    Sent,
    Refused,
    GaveUp,
}

/// A transport error's kind and causes, without the URL (`reqwest`'s own text names it).
fn transport_error(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "cannot connect"
    } else {
        "transport error"
    };
    let mut text = kind.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn resource(service_name: &str) -> Resource {
    Resource {
        attributes: vec![text_kv("service.name", service_name)],
        ..Default::default()
    }
}

/// The export request of one batch (records in the order they were observed).
fn encode_request(
    resource: &Resource,
    batch: &[Pending],
    now: SystemTime,
) -> ExportLogsServiceRequest {
    let observed = unix_nanos(now);
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(resource.clone()),
            scope_logs: vec![ScopeLogs {
                scope: Some(InstrumentationScope {
                    name: "sqlgrade".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                log_records: batch
                    .iter()
                    .map(|p| log_record(&p.row, p.trace, observed))
                    .collect(),
                schema_url: SCHEMA_URL.into(),
            }],
            schema_url: SCHEMA_URL.into(),
        }],
    }
}

/// One row as a `gen_ai.evaluation.result` log record (module documentation).
pub fn log_record(
    row: &EvaluationRow,
    trace: Option<TraceContext>,
    observed_nanos: u64,
) -> LogRecord {
    let metric = row.metric.as_str();
    let mut attributes = vec![text_kv("gen_ai.evaluation.name", metric)];
    let scored = row.status.is_scored();
    if scored && row.value.is_finite() {
        attributes.push(kv(
            "gen_ai.evaluation.score.value",
            any_value::Value::DoubleValue(row.value),
        ));
    }
    let label = row
        .verdict
        .filter(|_| scored)
        .map(|correct| if correct { "correct" } else { "incorrect" });
    if let Some(label) = label {
        attributes.push(text_kv("gen_ai.evaluation.score.label", label));
    }
    if let Some(explanation) = explanation(&row.details) {
        attributes.push(text_kv("gen_ai.evaluation.explanation", &explanation));
    }
    if row.status != RowStatus::Ok {
        attributes.push(text_kv("error.type", row.status.as_str()));
    }
    attributes.push(text_kv("sqlgrade.event_id", &row.event_id));
    if let Some(stef) = &row.stef {
        attributes.push(text_kv("sqlgrade.judge_identity", &stef.judge_identity));
        attributes.push(text_kv("sqlgrade.quality_tier", stef.quality_tier.as_str()));
        if let Some(p) = stef.p_correct.filter(|p| p.is_finite()) {
            attributes.push(kv("sqlgrade.p_correct", any_value::Value::DoubleValue(p)));
        }
    }
    for (key, value) in [
        ("sqlgrade.app_id", &row.app_id),
        ("sqlgrade.agent_id", &row.agent_id),
        ("sqlgrade.agent_version", &row.agent_version),
        ("sqlgrade.model", &row.model),
        ("sqlgrade.run_id", &row.run_id),
    ] {
        if let Some(value) = value {
            attributes.push(text_kv(key, value));
        }
    }
    let body = match label {
        Some(label) => format!("{metric} {} ({label})", row.value),
        None if scored => format!("{metric} {}", row.value),
        None => format!("{metric} not scored: {}", row.status.as_str()),
    };
    let (trace_id, span_id, flags) = match trace {
        Some(t) => (t.trace_id.to_vec(), t.span_id.to_vec(), 1),
        None => (Vec::new(), Vec::new(), 0),
    };
    LogRecord {
        time_unix_nano: row_time_nanos(&row.ts).unwrap_or(observed_nanos),
        observed_time_unix_nano: observed_nanos,
        severity_number: SeverityNumber::Info as i32,
        severity_text: "INFO".into(),
        body: Some(AnyValue {
            value: Some(any_value::Value::StringValue(body)),
        }),
        attributes,
        dropped_attributes_count: 0,
        flags,
        trace_id,
        span_id,
        event_name: EVENT_NAME.into(),
    }
}

/// A finding as the explanation names it.
#[derive(Deserialize)]
struct FindingText {
    code: String,
    severity: String,
    #[serde(default)]
    evidence: String,
}

/// The keys whose text explains a row without findings, in the order they are preferred.
const EXPLAINING_KEYS: [&str; 6] = [
    "judge_error",
    "error",
    "gold_error",
    "gold_parse_error",
    "rationale",
    "reasoning",
];

/// `"key":` searchers for `findings` and the [`EXPLAINING_KEYS`], built once.
static KEY_FINDERS: LazyLock<(Finder<'static>, Vec<Finder<'static>>)> = LazyLock::new(|| {
    let finder = |key: &str| Finder::new(format!("\"{key}\":").as_bytes()).into_owned();
    (
        finder("findings"),
        EXPLAINING_KEYS.iter().map(|k| finder(k)).collect(),
    )
});

/// The value after the first `"key":` in a details object's JSON text, parsed as `T` (only that
/// value is read: a line-rate row's details run to kilobytes, and parsing all of them for every
/// row was most of this exporter's cost). Quotes inside strings are escaped in JSON text, so the
/// pattern only matches a key.
fn value_after<T: serde::de::DeserializeOwned>(text: &str, key: &Finder<'static>) -> Option<T> {
    let at = key.find(text.as_bytes())? + key.needle().len();
    serde_json::Deserializer::from_str(&text[at..])
        .into_iter::<T>()
        .next()?
        .ok()
}

fn severity_rank(severity: &str) -> u8 {
    match severity {
        "error" => 0,
        "warning" => 1,
        _ => 2,
    }
}

/// The explanation of a row: its most severe findings, else the judge's rationale, else the
/// error its details name; bounded by [`EXPLANATION_BYTES`]. `None` when the details hold none.
pub fn explanation(details: &Details) -> Option<String> {
    let text = details.json_text();
    let (findings_key, explaining_keys) = &*KEY_FINDERS;
    let mut findings: Vec<FindingText> = value_after(&text, findings_key).unwrap_or_default();
    let mut out = if findings.is_empty() {
        explaining_keys
            .iter()
            .filter_map(|key| value_after::<String>(&text, key))
            .find(|t| !t.trim().is_empty())?
    } else {
        findings.sort_by_key(|f| severity_rank(&f.severity));
        let named: Vec<String> = findings
            .iter()
            .take(EXPLANATION_FINDINGS)
            .map(|f| {
                if f.evidence.is_empty() {
                    format!("{} ({})", f.code, f.severity)
                } else {
                    format!("{} ({}): {}", f.code, f.severity, f.evidence)
                }
            })
            .collect();
        let mut text = named.join("; ");
        if findings.len() > EXPLANATION_FINDINGS {
            text.push_str(&format!(
                "; and {} more",
                findings.len() - EXPLANATION_FINDINGS
            ));
        }
        text
    };
    if out.len() > EXPLANATION_BYTES {
        let mut cut = EXPLANATION_BYTES - '…'.len_utf8();
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    }
    Some(out)
}

fn unix_nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The row's time (RFC 3339) in Unix nanoseconds.
fn row_time_nanos(ts: &str) -> Option<u64> {
    let time = chrono::DateTime::parse_from_rfc3339(ts).ok()?;
    u64::try_from(time.timestamp_nanos_opt()?).ok()
}

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
    }
}

fn text_kv(key: &str, value: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(value.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluation::Metric;
    use crate::event::Event;

    fn row(details: serde_json::Value, status: RowStatus) -> EvaluationRow {
        let event = Event::from_value(serde_json::json!({
            "event_id": "e1", "question": "q", "sql": "SELECT 1", "app_id": "shop",
            "ts": "2026-01-02T03:04:05Z"
        }))
        .unwrap();
        let mut row = EvaluationRow::for_event(&event, "2026-01-02T03:04:05Z", Metric::Ex);
        row.value = 1.0;
        row.verdict = Some(true);
        row.status = status;
        row.details = details.into();
        row
    }

    fn attr(record: &LogRecord, key: &str) -> Option<any_value::Value> {
        record
            .attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.clone()?.value)
    }

    #[test]
    fn a_row_becomes_an_evaluation_event_on_its_span() {
        let trace = TraceContext::from_traceparent(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        );
        let record = log_record(&row(serde_json::json!({}), RowStatus::Ok), trace, 7);
        assert_eq!(record.event_name, EVENT_NAME);
        assert_eq!(
            hex::encode(&record.trace_id),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(hex::encode(&record.span_id), "b7ad6b7169203331");
        assert_eq!(
            attr(&record, "gen_ai.evaluation.name"),
            Some(any_value::Value::StringValue("ex".into()))
        );
        assert_eq!(
            attr(&record, "gen_ai.evaluation.score.value"),
            Some(any_value::Value::DoubleValue(1.0))
        );
        assert_eq!(
            attr(&record, "gen_ai.evaluation.score.label"),
            Some(any_value::Value::StringValue("correct".into()))
        );
        assert_eq!(
            attr(&record, "sqlgrade.app_id"),
            Some(any_value::Value::StringValue("shop".into()))
        );
        assert_eq!(attr(&record, "error.type"), None);
        assert_eq!(record.time_unix_nano, 1_767_323_045_000_000_000);
        assert_eq!(record.observed_time_unix_nano, 7);
    }

    #[test]
    fn a_row_that_is_not_scored_has_no_score_and_names_its_error() {
        let record = log_record(
            &row(
                serde_json::json!({"gold_error": "no such table: t"}),
                RowStatus::GoldError,
            ),
            None,
            7,
        );
        assert!(record.trace_id.is_empty() && record.span_id.is_empty());
        assert_eq!(attr(&record, "gen_ai.evaluation.score.value"), None);
        assert_eq!(attr(&record, "gen_ai.evaluation.score.label"), None);
        assert_eq!(
            attr(&record, "error.type"),
            Some(any_value::Value::StringValue("gold_error".into()))
        );
        assert_eq!(
            attr(&record, "gen_ai.evaluation.explanation"),
            Some(any_value::Value::StringValue("no such table: t".into()))
        );
    }

    #[test]
    fn the_explanation_names_the_most_severe_findings_first_and_is_bounded() {
        let details: Details = serde_json::json!({
            "rationale": "looks fine",
            "findings": [
                {"code": "a_info", "severity": "info", "category": "x", "evidence": "i"},
                {"code": "b_error", "severity": "error", "category": "x", "evidence": "e"},
                {"code": "c_warning", "severity": "warning", "category": "x", "evidence": "w"},
                {"code": "d_warning", "severity": "warning", "category": "x", "evidence": "w2"},
            ]
        })
        .into();
        assert_eq!(
            explanation(&details).as_deref(),
            Some("b_error (error): e; c_warning (warning): w; d_warning (warning): w2; and 1 more")
        );
        let long: Details = serde_json::json!({"rationale": "é".repeat(1000)}).into();
        let text = explanation(&long).unwrap();
        assert!(text.len() <= EXPLANATION_BYTES && text.ends_with('…'));
        assert_eq!(explanation(&serde_json::json!({"sql": {}}).into()), None);
    }
}
