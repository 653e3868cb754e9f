//! A scripted OpenAI-compatible chat-completions server for tests and benches.
//!
//! Bound to `127.0.0.1:0`, it records every request (arrival time, JSON body, `Authorization`
//! header) and answers from a script: a queue of [`Scripted`] replies consumed in order, then a
//! default responder. Replies can be chat completions with any content, HTTP errors with headers
//! (429 + `Retry-After`), delays (slower than the client's timeout), or raw bodies. It can also
//! reject `response_format` types, as servers without structured output do.
//!
//! Use from tests and benches as `sqlgrade_testkit::openai_mock`.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Scripted {
    /// 200 with a chat completion whose message content is this text.
    Content(String),
    /// An HTTP status with headers and a body.
    Status {
        /// Status code.
        status: u16,
        /// Extra headers (e.g. `retry-after`).
        headers: Vec<(String, String)>,
        /// Body text.
        body: String,
    },
    /// 200 with this raw body (not necessarily a chat completion).
    Raw(String),
    /// Wait, then answer.
    Delayed(Duration, Box<Scripted>),
}

impl Scripted {
    /// 200 with `value` serialized as the message content.
    pub fn json(value: &Value) -> Scripted {
        Scripted::Content(value.to_string())
    }

    /// An error status with a JSON error body.
    pub fn status(status: u16) -> Scripted {
        Scripted::Status {
            status,
            headers: Vec::new(),
            body: json!({"error": {"message": format!("scripted {status}")}}).to_string(),
        }
    }

    /// 429 with `Retry-After: secs`.
    pub fn too_many_requests(retry_after_secs: u64) -> Scripted {
        Scripted::Status {
            status: 429,
            headers: vec![("retry-after".into(), retry_after_secs.to_string())],
            body: json!({"error": {"message": "rate limited", "type": "rate_limit_error"}})
                .to_string(),
        }
    }

    /// This answer after `delay`.
    pub fn after(self, delay: Duration) -> Scripted {
        Scripted::Delayed(delay, Box::new(self))
    }
}

/// Computes the answer for a request once the script queue is empty.
pub type Responder = Arc<dyn Fn(&Recorded) -> Scripted + Send + Sync>;

/// One request the server received. The body is kept as bytes and parsed on demand, so the
/// server does as little work as possible per request (its timestamps stay accurate).
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Arrival time since the server started.
    pub at: Duration,
    /// The raw body.
    pub raw: Bytes,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// Request path.
    pub path: String,
}

impl Recorded {
    /// The JSON body (`Value::Null` if it is not JSON).
    pub fn body(&self) -> Value {
        serde_json::from_slice(&self.raw).unwrap_or(Value::Null)
    }

    /// `response_format.type` of the request, if any.
    pub fn response_format(&self) -> Option<String> {
        self.body()
            .get("response_format")
            .and_then(|f| f.get("type"))
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    /// The content of message `index`.
    pub fn message(&self, index: usize) -> Option<String> {
        self.body()
            .get("messages")
            .and_then(|m| m.get(index))
            .and_then(|m| m.get("content"))
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    /// Number of messages.
    pub fn message_count(&self) -> usize {
        self.body()
            .get("messages")
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    }
}

struct Inner {
    started: Instant,
    script: Mutex<VecDeque<Scripted>>,
    responder: Mutex<Option<Responder>>,
    rejected_formats: Mutex<Vec<String>>,
    log: Mutex<Vec<Recorded>>,
}

/// The running server. Dropping it stops the server.
pub struct MockServer {
    /// Bound address.
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl MockServer {
    /// Start a server with an empty script and no responder (unscripted requests get 599).
    ///
    /// The server runs on its own thread and runtime, like a separate process: a busy client
    /// runtime cannot delay its answers or its arrival timestamps. Where allowed (root on
    /// Linux), that thread runs with real-time priority, so a loaded machine does not delay
    /// them either: the timestamps measure the client, not the scheduler.
    pub async fn start() -> MockServer {
        let inner = Arc::new(Inner {
            started: Instant::now(),
            script: Mutex::new(VecDeque::new()),
            responder: Mutex::new(None),
            rejected_formats: Mutex::new(Vec::new()),
            log: Mutex::new(Vec::new()),
        });
        let app = Router::new().fallback(handle).with_state(inner.clone());
        let (addr_tx, addr_rx) = tokio::sync::oneshot::channel::<SocketAddr>();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("openai-mock".into())
            .spawn(move || {
                raise_priority();
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("mock server runtime");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                        .await
                        .expect("bind 127.0.0.1:0");
                    let _ = addr_tx.send(listener.local_addr().expect("local addr"));
                    let _ = axum::serve(listener, app)
                        .with_graceful_shutdown(async {
                            let _ = rx.await;
                        })
                        .await;
                });
            })
            .expect("spawn mock server thread");
        let addr = addr_rx.await.expect("mock server started");
        MockServer {
            addr,
            inner,
            shutdown: Some(tx),
        }
    }

    /// Base URL to configure the client with (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Append scripted answers.
    pub fn push(&self, replies: impl IntoIterator<Item = Scripted>) {
        self.inner
            .script
            .lock()
            .expect("script lock")
            .extend(replies);
    }

    /// Answer unscripted requests with `responder`.
    pub fn respond_with(&self, responder: impl Fn(&Recorded) -> Scripted + Send + Sync + 'static) {
        *self.inner.responder.lock().expect("responder lock") = Some(Arc::new(responder));
    }

    /// Answer every unscripted request with `reply` after `delay` while the returned switch is
    /// on, and 503 while it is off: a judge that can be taken down and brought back.
    pub fn respond_unless_down(
        &self,
        reply: Value,
        delay: Duration,
    ) -> Arc<std::sync::atomic::AtomicBool> {
        let up = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let switch = Arc::clone(&up);
        self.respond_with(move |_| {
            if switch.load(std::sync::atomic::Ordering::SeqCst) {
                Scripted::json(&reply).after(delay)
            } else {
                Scripted::status(503)
            }
        });
        up
    }

    /// Reject requests whose `response_format.type` is `kind` with a 400.
    pub fn reject_format(&self, kind: &str) {
        self.inner
            .rejected_formats
            .lock()
            .expect("formats lock")
            .push(kind.to_string());
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.log.lock().expect("log lock").clone()
    }

    /// Number of requests received so far.
    pub fn request_count(&self) -> usize {
        self.inner.log.lock().expect("log lock").len()
    }

    /// Largest number of requests whose arrival falls in any window `[t, t + window)`.
    pub fn max_in_window(&self, window: Duration) -> usize {
        let mut times: Vec<Duration> = self.requests().iter().map(|r| r.at).collect();
        times.sort();
        let mut best = 0;
        let mut lo = 0;
        for hi in 0..times.len() {
            while times[hi] - times[lo] >= window {
                lo += 1;
            }
            best = best.max(hi - lo + 1);
        }
        best
    }
}

/// Give the calling thread real-time (SCHED_FIFO, lowest) priority when permitted; otherwise
/// leave it as it is. The server thread mostly sleeps in epoll, so this cannot starve others.
fn raise_priority() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 1 };
        // SAFETY: plain FFI call on the current thread with a valid sched_param.
        let _ =
            unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// A chat completion envelope with `content`; usage is estimated from lengths (request body
/// bytes / 4 prompt tokens, content bytes / 4 completion tokens).
pub fn completion(request_bytes: usize, content: &str) -> Value {
    let prompt = request_bytes.div_ceil(4);
    let completion = content.len().div_ceil(4);
    json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": 0,
        "model": "mock",
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": content },
            "finish_reason": "stop"
        }],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion
        }
    })
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let at = inner.started.elapsed();
    let recorded = Recorded {
        at,
        raw: body,
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        path: uri.path().to_string(),
    };
    inner.log.lock().expect("log lock").push(recorded.clone());
    let rejected = inner.rejected_formats.lock().expect("formats lock").clone();
    if !rejected.is_empty()
        && let Some(format) = recorded.response_format()
        && rejected.contains(&format)
    {
        return (
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": format!("response_format type {format} is not supported")}})
                .to_string(),
        )
            .into_response();
    }
    let scripted = inner.script.lock().expect("script lock").pop_front();
    let scripted = match scripted {
        Some(s) => s,
        None => {
            let responder = inner.responder.lock().expect("responder lock").clone();
            match responder {
                Some(r) => r(&recorded),
                None => Scripted::Status {
                    status: 599,
                    headers: Vec::new(),
                    body: "unscripted request".into(),
                },
            }
        }
    };
    answer(recorded.raw.len(), scripted).await
}

async fn answer(request_bytes: usize, mut scripted: Scripted) -> Response {
    loop {
        match scripted {
            Scripted::Delayed(delay, next) => {
                tokio::time::sleep(delay).await;
                scripted = *next;
            }
            Scripted::Content(content) => {
                return (
                    StatusCode::OK,
                    [("content-type", "application/json")],
                    completion(request_bytes, &content).to_string(),
                )
                    .into_response();
            }
            Scripted::Raw(body) => {
                return (StatusCode::OK, [("content-type", "application/json")], body)
                    .into_response();
            }
            Scripted::Status {
                status,
                headers,
                body,
            } => {
                let mut response = (
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                    body,
                )
                    .into_response();
                for (name, value) in headers {
                    if let (Ok(name), Ok(value)) = (
                        axum::http::HeaderName::try_from(name),
                        axum::http::HeaderValue::try_from(value),
                    ) {
                        response.headers_mut().insert(name, value);
                    }
                }
                return response;
            }
        }
    }
}
