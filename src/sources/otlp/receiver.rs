//! The OTLP/HTTP receiver as a [`Source`]: `POST /v1/traces` (protobuf or JSON, optionally
//! gzip), per the OTLP specification. Each request's spans go into the [`TraceBuffer`]; a
//! complete (or expired) trace becomes one event payload per database span
//! (`spans::events_of_trace`), handed to the pipeline with an acknowledgement that counts down
//! the trace's events. A request is answered 200 once every trace it completed (its root span
//! arrived) has all its events written or dead-lettered. Spans of a trace still waiting for
//! its root are acknowledged at once and held in memory for at most `assembly_window_ms`:
//! exporters send one batch at a time, so the batch with the root would never come while the
//! earlier one waited. Those spans are the one thing a crash can lose (a graceful stop emits
//! them); everything in a completed trace is written before its request is answered. Under
//! back-pressure it is answered 429 (too many requests at once) or 503 (the
//! trace buffer is full, or its events were not written within `request_timeout_ms`) with
//! `Retry-After`; the exporter retries, and a re-sent span is the same event (its id is the
//! trace and span id). Malformed bodies are 400, a body over `max_body_bytes` 413, another
//! content type 415, a missing or wrong bearer token 401.

use std::io::Read as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceResponse,
};
use prost::Message as _;
use tokio::sync::{Notify, Semaphore, mpsc, watch};

use super::decode::Decoded;
use super::emit::{Emitter, OtlpStats, Waiter};
use super::traces::{ReadyTrace, TraceBuffer};
use crate::sources::config::OtlpConfig;
use crate::sources::{Source, SourceError, SourceMessage};
use crate::spans::SpanMapping;
use crate::telemetry::health::{ComponentHealth, Health};

/// The health component of the receiver.
pub const HEALTH_COMPONENT: &str = "otlp_receiver";

/// One request waiting for the traces it contributed to.
struct RequestWait {
    remaining: AtomicUsize,
    done: Notify,
}

impl Waiter for RequestWait {
    fn done_one(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.done.notify_one();
        }
    }
}

struct Shared {
    config: OtlpConfig,
    token: Option<String>,
    buffer: Mutex<TraceBuffer<Arc<dyn Waiter>>>,
    tx: mpsc::Sender<SourceMessage>,
    emitter: Emitter,
    permits: Semaphore,
    /// Requests being decompressed and decoded at once (on the blocking pool), at most.
    decoding: Semaphore,
    accepting: AtomicBool,
}

impl Shared {
    /// Hand the events of `ready` traces to the pipeline.
    async fn emit(&self, ready: Vec<ReadyTrace<Arc<dyn Waiter>>>) {
        for trace in ready {
            for message in self.emitter.messages(trace) {
                if self.tx.send(message).await.is_err() {
                    // The source is gone (shutdown): the request is not answered 200.
                    return;
                }
            }
        }
    }
}

/// The OTLP/HTTP receiver (`[source] kind = "otlp"`).
pub struct OtlpSource {
    rx: mpsc::Receiver<SourceMessage>,
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    stop_tx: watch::Sender<bool>,
    stopped: bool,
}

impl OtlpSource {
    /// Bind `config.listen` and start serving; must be called inside a tokio runtime. The
    /// bearer token is read from `config.token_env` now (unset or empty: an error).
    pub fn bind(
        config: &OtlpConfig,
        mapping: &SpanMapping,
        health: Option<Arc<Health>>,
    ) -> Result<OtlpSource, SourceError> {
        let io = |what: String| move |source| SourceError::Io { what, source };
        let token = match &config.token_env {
            Some(var) => match std::env::var(var) {
                Ok(token) if !token.trim().is_empty() => Some(token),
                _ => {
                    return Err(SourceError::Io {
                        what: format!("source.otlp.token_env: ${var}"),
                        source: std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            "the variable is unset or empty",
                        ),
                    });
                }
            },
            None => None,
        };
        let listener = std::net::TcpListener::bind(&config.listen)
            .map_err(io(format!("listening on {}", config.listen)))?;
        listener
            .set_nonblocking(true)
            .map_err(io("the OTLP listener".into()))?;
        let local_addr = listener
            .local_addr()
            .map_err(io("the OTLP listener".into()))?;
        let listener =
            tokio::net::TcpListener::from_std(listener).map_err(io("the OTLP listener".into()))?;
        let (tx, rx) = mpsc::channel(4096);
        let shared = Arc::new(Shared {
            config: config.clone(),
            token,
            buffer: Mutex::new(TraceBuffer::new(
                Duration::from_millis(config.assembly_window_ms.max(1)),
                config.max_pending_traces,
                config.max_pending_bytes,
            )),
            tx,
            emitter: Emitter::new(mapping.clone()),
            permits: Semaphore::new(config.max_concurrent_requests.max(1)),
            decoding: Semaphore::new(DECODING_AT_ONCE),
            accepting: AtomicBool::new(true),
        });
        let (stop_tx, stop_rx) = watch::channel(false);
        let app = Router::new()
            .route("/v1/traces", post(traces))
            // The handler reads the body itself, bounded, once it holds a request permit.
            .layer(DefaultBodyLimit::disable())
            .with_state(Arc::clone(&shared));
        let mut server_stop = stop_rx.clone();
        tokio::spawn(crate::telemetry::health::serve_bounded(
            listener,
            app,
            crate::telemetry::health::ConnectionLimits::default(),
            async move {
                let _ = server_stop.wait_for(|s| *s).await;
            },
        ));
        tokio::spawn(expire_traces(Arc::clone(&shared), stop_rx));
        if let Some(health) = &health {
            health.set(HEALTH_COMPONENT, ComponentHealth::Ok);
        }
        tracing::info!(listen = %local_addr, "OTLP/HTTP receiver listening (POST /v1/traces)");
        Ok(OtlpSource {
            rx,
            shared,
            local_addr,
            stop_tx,
            stopped: false,
        })
    }

    /// The address it listens on (the port when `listen` asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A snapshot of its counters.
    pub fn stats(&self) -> OtlpStats {
        self.shared.emitter.counters.snapshot()
    }

    /// A handle that reads the counters while the pipeline owns the source.
    pub fn stats_handle(&self) -> impl Fn() -> OtlpStats + Send + Sync + 'static {
        let shared = Arc::clone(&self.shared);
        move || shared.emitter.counters.snapshot()
    }
}

/// Requests decoded at once: decoding is CPU work on the blocking pool, and what a request
/// decodes to (bounded by `max_spans_per_request` and `max_attributes_per_request`) is the
/// receiver's largest allocation, so a few at a time bound both.
const DECODING_AT_ONCE: usize = 2;

/// How long a request's body may take to arrive once its headers have.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Emit the traces whose window passed, a few times per window.
async fn expire_traces(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let tick = Duration::from_millis((shared.config.assembly_window_ms / 4).clamp(10, 250));
    loop {
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let due = shared
            .buffer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .expired(Instant::now());
        if !due.is_empty() {
            shared.emit(due).await;
        }
    }
}

#[async_trait]
impl Source for OtlpSource {
    async fn next(&mut self) -> Result<Option<SourceMessage>, SourceError> {
        let mut stop = self.stop_tx.subscribe();
        if !self.stopped {
            return tokio::select! {
                message = self.rx.recv() => Ok(message),
                _ = stop.wait_for(|s| *s) => Ok(self.rx.try_recv().ok()),
            };
        }
        // Stopping: hand out what the pending traces made, until their emission is done (the
        // stop signal is sent after it) and the channel is empty.
        loop {
            if let Ok(message) = self.rx.try_recv() {
                return Ok(Some(message));
            }
            if *stop.borrow_and_update() {
                return Ok(self.rx.try_recv().ok());
            }
            tokio::select! {
                message = self.rx.recv() => return Ok(message),
                _ = stop.changed() => {}
            }
        }
    }

    fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        self.shared.accepting.store(false, Ordering::Release);
        // What is pending goes out now, so the requests that brought it can still be answered.
        let pending = self
            .shared
            .buffer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain();
        let shared = Arc::clone(&self.shared);
        let stop_tx = self.stop_tx.clone();
        if pending.is_empty() {
            let _ = stop_tx.send(true);
        } else {
            tokio::spawn(async move {
                shared.emit(pending).await;
                let _ = stop_tx.send(true);
            });
        }
    }

    fn report(&self) -> Vec<(String, String)> {
        self.stats().report("HTTP requests")
    }

    fn batch_linger(&self) -> Option<Duration> {
        Some(Duration::from_millis(
            self.shared.config.batch_linger_ms.max(1),
        ))
    }

    async fn finish(&mut self) -> Result<(), SourceError> {
        let _ = self.stop_tx.send(true);
        let stats = self.stats();
        tracing::info!(?stats, "OTLP receiver finished");
        Ok(())
    }
}

/// Whether the request asked for JSON (else protobuf).
fn is_json(headers: &HeaderMap) -> Option<bool> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match content_type.as_str() {
        "application/json" => Some(true),
        "application/x-protobuf" | "application/protobuf" => Some(false),
        _ => None,
    }
}

/// `google.rpc.Status`, the body of an OTLP error response.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

fn error_response(
    shared: &Shared,
    status: StatusCode,
    json: bool,
    message: String,
    retry_after: Option<u64>,
) -> Response {
    shared
        .emitter
        .counters
        .requests_refused
        .fetch_add(1, Ordering::Relaxed);
    // gRPC codes: INVALID_ARGUMENT 3, UNAUTHENTICATED 16, RESOURCE_EXHAUSTED 8, UNAVAILABLE 14.
    let code = match status {
        StatusCode::UNAUTHORIZED => 16,
        StatusCode::TOO_MANY_REQUESTS => 8,
        StatusCode::SERVICE_UNAVAILABLE => 14,
        _ => 3,
    };
    let (content_type, body) = if json {
        (
            "application/json",
            serde_json::json!({"code": code, "message": message})
                .to_string()
                .into_bytes(),
        )
    } else {
        (
            "application/x-protobuf",
            RpcStatus { code, message }.encode_to_vec(),
        )
    };
    let mut response = (status, [(header::CONTENT_TYPE, content_type)], body).into_response();
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

fn success_response(shared: &Shared, json: bool, decoded: &Decoded) -> Response {
    shared
        .emitter
        .counters
        .requests_ok
        .fetch_add(1, Ordering::Relaxed);
    let partial = (decoded.rejected > 0).then(|| ExportTracePartialSuccess {
        rejected_spans: decoded.rejected as i64,
        error_message: decoded.rejections.join("; "),
    });
    if json {
        let body = match &partial {
            Some(p) => serde_json::json!({"partialSuccess": {
                "rejectedSpans": p.rejected_spans.to_string(),
                "errorMessage": p.error_message,
            }}),
            None => serde_json::json!({}),
        };
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response()
    } else {
        let body = ExportTraceServiceResponse {
            partial_success: partial,
        }
        .encode_to_vec();
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/x-protobuf")],
            body,
        )
            .into_response()
    }
}

/// The answer while the receiver stops: 503, come back in 5 s.
fn shutting_down(shared: &Shared, json: bool) -> Response {
    error_response(
        shared,
        StatusCode::SERVICE_UNAVAILABLE,
        json,
        "the receiver is shutting down".into(),
        Some(5),
    )
}

/// Why a gzip body was refused.
#[derive(Debug, thiserror::Error)]
enum GunzipError {
    /// Not gzip, or cut short.
    #[error("the gzip body cannot be read: {0}")]
    Unreadable(#[source] std::io::Error),
    /// Larger than the receiver accepts once decompressed.
    #[error("the body is over {0} bytes once decompressed")]
    TooLarge(usize),
}

/// Decompress a gzip body, refusing more than `limit` bytes.
fn gunzip(body: &[u8], limit: usize) -> Result<Vec<u8>, GunzipError> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(body)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(GunzipError::Unreadable)?;
    if out.len() > limit {
        return Err(GunzipError::TooLarge(limit));
    }
    Ok(out)
}

/// The refusal of a request without the bearer token, when one is configured.
fn unauthorized(shared: &Shared, headers: &HeaderMap, as_json: bool) -> Option<Response> {
    let token = shared.token.as_ref()?;
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    // Compared in constant time (`settings::same_secret`), as the review page's token.
    if !given.is_some_and(|given| crate::settings::same_secret(given, token)) {
        return Some(error_response(
            shared,
            StatusCode::UNAUTHORIZED,
            as_json,
            "a bearer token is required".into(),
            None,
        ));
    }
    None
}

/// The request's body, read within the size limit and the read timeout (the refusal
/// otherwise).
async fn read_body(shared: &Shared, body: axum::body::Body, json: bool) -> Result<Bytes, Response> {
    let limit = shared.config.max_body_bytes;
    match tokio::time::timeout(BODY_READ_TIMEOUT, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(body)) => Ok(body),
        Ok(Err(_)) => Err(error_response(
            shared,
            StatusCode::PAYLOAD_TOO_LARGE,
            json,
            format!("the body is over {limit} bytes (or was cut off)"),
            None,
        )),
        Err(_) => Err(error_response(
            shared,
            StatusCode::REQUEST_TIMEOUT,
            json,
            format!("the body did not arrive within {BODY_READ_TIMEOUT:?}"),
            None,
        )),
    }
}

/// The body decompressed (gzip) and decoded within the request bounds, on the blocking pool
/// (the refusal otherwise).
async fn decode_body(
    shared: &Shared,
    body: Bytes,
    json: bool,
    gzip: bool,
) -> Result<Decoded, Response> {
    let limit = shared.config.max_body_bytes;
    // Decompressing and decoding are CPU work: on the blocking pool, a few requests at a time.
    let Ok(decoding_permit) = shared.decoding.acquire().await else {
        return Err(shutting_down(shared, json));
    };
    let bounds = super::bounds::RequestBounds::of(&shared.config);
    let decoded = tokio::task::spawn_blocking(move || {
        let body = if gzip {
            match gunzip(&body, limit) {
                Ok(body) => Bytes::from(body),
                Err(why @ GunzipError::TooLarge(_)) => {
                    return Err((StatusCode::PAYLOAD_TOO_LARGE, why.to_string()));
                }
                Err(why) => return Err((StatusCode::BAD_REQUEST, why.to_string())),
            }
        } else {
            body
        };
        super::bounds::decode_within(&body, json, bounds).map_err(|refused| match refused {
            super::bounds::Refused::OverBounds(why) => (StatusCode::PAYLOAD_TOO_LARGE, why),
            malformed => (StatusCode::BAD_REQUEST, malformed.to_string()),
        })
    })
    .await;
    drop(decoding_permit);
    match decoded {
        Ok(Ok(decoded)) => Ok(decoded),
        Ok(Err((status, why))) => Err(error_response(shared, status, json, why, None)),
        Err(error) => {
            tracing::error!(%error, "decoding an OTLP request failed");
            Err(error_response(
                shared,
                StatusCode::INTERNAL_SERVER_ERROR,
                json,
                "the request could not be decoded".into(),
                None,
            ))
        }
    }
}

async fn traces(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    let json = is_json(&headers);
    let as_json = json.unwrap_or(false);
    if let Some(refused) = unauthorized(&shared, &headers, as_json) {
        return refused;
    }
    let Some(json) = json else {
        return error_response(
            &shared,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            false,
            "Content-Type must be application/x-protobuf or application/json".into(),
            None,
        );
    };
    if !shared.accepting.load(Ordering::Acquire) {
        return shutting_down(&shared, json);
    }
    let Ok(_permit) = shared.permits.try_acquire() else {
        return error_response(
            &shared,
            StatusCode::TOO_MANY_REQUESTS,
            json,
            "too many requests at once".into(),
            Some(1),
        );
    };
    // The body is read only now, under the permit: requests waiting for one hold no body.
    let body = match read_body(&shared, body, json).await {
        Ok(body) => body,
        Err(refused) => return refused,
    };
    let gzip = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("gzip"));
    let mut decoded = match decode_body(&shared, body, json, gzip).await {
        Ok(decoded) => decoded,
        Err(refused) => return refused,
    };
    shared.emitter.counters.spans.fetch_add(
        (decoded.spans.len() + decoded.rejected) as u64,
        Ordering::Relaxed,
    );
    shared
        .emitter
        .counters
        .spans_rejected
        .fetch_add(decoded.rejected as u64, Ordering::Relaxed);
    let spans = std::mem::take(&mut decoded.spans);
    if spans.is_empty() {
        return success_response(&shared, json, &decoded);
    }
    // One unit per trace the request touches, plus one held until they are all registered.
    let wait = Arc::new(RequestWait {
        remaining: AtomicUsize::new(usize::MAX),
        done: Notify::new(),
    });
    let waiter: Arc<dyn Waiter> = Arc::clone(&wait) as Arc<dyn Waiter>;
    let ready = {
        let mut buffer = shared.buffer.lock().unwrap_or_else(|p| p.into_inner());
        if !buffer.has_room(&spans) {
            drop(buffer);
            return error_response(
                &shared,
                StatusCode::SERVICE_UNAVAILABLE,
                json,
                "the trace buffer is full".into(),
                Some(2),
            );
        }
        let ready = buffer.add(spans, waiter, false, Instant::now());
        // Only the traces ready here count the request down, once emitted below: set the
        // count first.
        wait.remaining.store(ready.len() + 1, Ordering::Release);
        ready
    };
    shared.emit(ready).await;
    wait.done_one();
    let timeout = Duration::from_millis(shared.config.request_timeout_ms.max(1));
    match tokio::time::timeout(timeout, wait.done.notified()).await {
        Ok(()) => success_response(&shared, json, &decoded),
        Err(_) => error_response(
            &shared,
            StatusCode::SERVICE_UNAVAILABLE,
            json,
            format!(
                "the spans' events were not written within {} ms; retry (a re-sent span is the same event)",
                timeout.as_millis()
            ),
            Some(2),
        ),
    }
}
