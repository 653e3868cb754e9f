//! A local OTLP/HTTP receiver for tests: decodes the protobuf `ExportMetricsServiceRequest`s
//! posted to `/v1/metrics`, the `ExportTraceServiceRequest`s posted to `/v1/traces` and the
//! `ExportLogsServiceRequest`s posted to `/v1/logs` (the evaluation events), with the official
//! generated types.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value as NumberValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

#[derive(Default)]
struct Received {
    metrics: Mutex<Vec<ExportMetricsServiceRequest>>,
    traces: Mutex<Vec<ExportTraceServiceRequest>>,
    logs: Mutex<Vec<ExportLogsServiceRequest>>,
}

/// The receiver; runs until the test's runtime ends.
pub struct OtlpReceiver {
    addr: std::net::SocketAddr,
    received: Arc<Received>,
}

async fn receive_metrics(State(received): State<Arc<Received>>, body: Bytes) -> StatusCode {
    match ExportMetricsServiceRequest::decode(body) {
        Ok(request) => {
            received.metrics.lock().unwrap().push(request);
            StatusCode::OK
        }
        Err(_) => StatusCode::BAD_REQUEST,
    }
}

async fn receive_traces(State(received): State<Arc<Received>>, body: Bytes) -> StatusCode {
    match ExportTraceServiceRequest::decode(body) {
        Ok(request) => {
            received.traces.lock().unwrap().push(request);
            StatusCode::OK
        }
        Err(_) => StatusCode::BAD_REQUEST,
    }
}

async fn receive_logs(State(received): State<Arc<Received>>, body: Bytes) -> StatusCode {
    match ExportLogsServiceRequest::decode(body) {
        Ok(request) => {
            received.logs.lock().unwrap().push(request);
            StatusCode::OK
        }
        Err(_) => StatusCode::BAD_REQUEST,
    }
}

/// An attribute's value as a string (strings, ints, doubles, bools).
pub fn attribute_string(attributes: &[KeyValue], key: &str) -> Option<String> {
    let value = attributes
        .iter()
        .find(|kv| kv.key == key)?
        .value
        .as_ref()?
        .value
        .as_ref()?;
    Some(match value {
        AnyValue::StringValue(s) => s.clone(),
        AnyValue::IntValue(i) => i.to_string(),
        AnyValue::DoubleValue(d) => d.to_string(),
        AnyValue::BoolValue(b) => b.to_string(),
        other => format!("{other:?}"),
    })
}

impl OtlpReceiver {
    /// Bind a free local port and serve.
    pub async fn start() -> OtlpReceiver {
        OtlpReceiver::start_on(0).await
    }

    /// Bind `port` on 127.0.0.1 (0: a free one) and serve: a collector that comes up on the
    /// port a daemon was already configured with.
    pub async fn start_on(port: u16) -> OtlpReceiver {
        let received = Arc::new(Received::default());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new()
            .route("/v1/metrics", post(receive_metrics))
            .route("/v1/traces", post(receive_traces))
            .route("/v1/logs", post(receive_logs))
            .with_state(Arc::clone(&received));
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        OtlpReceiver { addr, received }
    }

    /// The collector base URL (`http://127.0.0.1:PORT`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every metrics request received so far.
    pub fn metrics(&self) -> Vec<ExportMetricsServiceRequest> {
        self.received.metrics.lock().unwrap().clone()
    }

    /// Every trace request received so far.
    pub fn traces(&self) -> Vec<ExportTraceServiceRequest> {
        self.received.traces.lock().unwrap().clone()
    }

    /// Every log request received so far.
    pub fn logs(&self) -> Vec<ExportLogsServiceRequest> {
        self.received.logs.lock().unwrap().clone()
    }

    /// Every log record received so far.
    pub fn log_records(&self) -> Vec<LogRecord> {
        self.logs()
            .into_iter()
            .flat_map(|r| r.resource_logs)
            .flat_map(|r| r.scope_logs)
            .flat_map(|s| s.log_records)
            .collect()
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.traces()
            .into_iter()
            .flat_map(|r| r.resource_spans)
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .collect()
    }

    /// The latest value of each data point of the gauge `name`, keyed by its attributes
    /// (`key=value` strings, sorted).
    pub fn gauge(&self, name: &str) -> BTreeMap<Vec<String>, f64> {
        let mut out = BTreeMap::new();
        for request in self.metrics() {
            for resource in &request.resource_metrics {
                for scope in &resource.scope_metrics {
                    for metric in scope.metrics.iter().filter(|m| m.name == name) {
                        let Some(Data::Gauge(gauge)) = &metric.data else {
                            continue;
                        };
                        for point in &gauge.data_points {
                            let mut key: Vec<String> = point
                                .attributes
                                .iter()
                                .map(|kv| {
                                    format!(
                                        "{}={}",
                                        kv.key,
                                        attribute_string(&point.attributes, &kv.key)
                                            .unwrap_or_default()
                                    )
                                })
                                .collect();
                            key.sort();
                            out.insert(key, number(&point.value));
                        }
                    }
                }
            }
        }
        out
    }

    /// Last exported value of every sum (counter) and the count/sum of every histogram, by
    /// name.
    pub fn sums_and_histograms(&self) -> (HashMap<String, f64>, HashMap<String, (u64, f64)>) {
        let mut sums = HashMap::new();
        let mut histograms = HashMap::new();
        for request in self.metrics() {
            for resource in &request.resource_metrics {
                for scope in &resource.scope_metrics {
                    for metric in &scope.metrics {
                        match &metric.data {
                            Some(Data::Sum(sum)) => {
                                let total: f64 =
                                    sum.data_points.iter().map(|p| number(&p.value)).sum();
                                sums.insert(metric.name.clone(), total);
                            }
                            Some(Data::Histogram(h)) => {
                                let count = h.data_points.iter().map(|p| p.count).sum();
                                let sum = h.data_points.iter().filter_map(|p| p.sum).sum();
                                histograms.insert(metric.name.clone(), (count, sum));
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        (sums, histograms)
    }
}

fn number(value: &Option<NumberValue>) -> f64 {
    match value {
        Some(NumberValue::AsInt(v)) => *v as f64,
        Some(NumberValue::AsDouble(v)) => *v,
        None => 0.0,
    }
}
