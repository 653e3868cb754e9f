//! OTLP carried as the messages of another source: the OpenTelemetry Collector's Kafka exporter
//! writes one `ExportTraceServiceRequest` per message (`[source] format = "otlp_proto"` or
//! `"otlp_json"`), and its file exporter one JSON request per line. [`OtlpMessages`] wraps that
//! source: it decodes each message, assembles traces across messages ([`TraceBuffer`]) and hands
//! out one event message per database span. A message is acknowledged — and its Kafka offset
//! may be committed — only once every trace it contributed to is out and every event of those
//! traces is written or dead-lettered (a message never blocks the next one being read, so it
//! can wait for its trace's root). A message that is not an OTLP request goes to the inner
//! source's dead-letter route (the Kafka dead-letter topic) with the reason, else through the
//! decode stage to the sink's dead letters. When the buffer is full, what is pending goes out
//! early (its events may then lack a question, and are dead letters that say so).

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::emit::{Emitter, OtlpStats, Waiter};
use super::traces::{ReadyTrace, TraceBuffer};
use crate::sources::config::OtlpConfig;
use crate::sources::{AckToken, DeadLetterRoute, Source, SourceError, SourceMessage};
use crate::spans::SpanMapping;

/// The wire format of the wrapped source's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpEncoding {
    /// Protobuf `ExportTraceServiceRequest`.
    Protobuf,
    /// JSON `ExportTraceServiceRequest`.
    Json,
}

/// One wrapped message waiting for its traces; acknowledged when the last is written.
struct MessageAck {
    remaining: AtomicUsize,
    token: Mutex<Option<AckToken>>,
}

impl Waiter for MessageAck {
    fn done_one(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1
            && let Some(token) = self.token.lock().unwrap_or_else(|p| p.into_inner()).take()
        {
            token.ack();
        }
    }
}

/// A source of OTLP requests turned into a source of events.
pub struct OtlpMessages {
    inner: Box<dyn Source>,
    encoding: OtlpEncoding,
    buffer: TraceBuffer<Arc<dyn Waiter>>,
    queue: VecDeque<SourceMessage>,
    emitter: Arc<Emitter>,
    route: Option<Arc<dyn DeadLetterRoute>>,
    tick: Duration,
    inner_done: bool,
    /// The most one message may hold (`max_spans_per_request`, `max_attributes_per_request`).
    bounds: super::bounds::RequestBounds,
}

impl OtlpMessages {
    /// Wrap `inner`, whose messages are OTLP trace requests in `encoding`; traces are assembled
    /// within `config`'s window and bounds.
    pub fn new(
        inner: Box<dyn Source>,
        encoding: OtlpEncoding,
        config: &OtlpConfig,
        mapping: &SpanMapping,
    ) -> OtlpMessages {
        let route = inner.dead_letter_route();
        OtlpMessages {
            inner,
            encoding,
            buffer: TraceBuffer::new(
                Duration::from_millis(config.assembly_window_ms.max(1)),
                config.max_pending_traces,
                config.max_pending_bytes,
            ),
            queue: VecDeque::new(),
            emitter: Arc::new(Emitter::new(mapping.clone())),
            route,
            tick: Duration::from_millis((config.assembly_window_ms / 4).clamp(10, 250)),
            inner_done: false,
            bounds: super::bounds::RequestBounds::of(config),
        }
    }

    /// A handle that reads the counters while the pipeline owns the source.
    pub fn stats_handle(&self) -> impl Fn() -> OtlpStats + Send + Sync + 'static {
        let emitter = Arc::clone(&self.emitter);
        move || emitter.stats()
    }

    fn enqueue(&mut self, ready: Vec<ReadyTrace<Arc<dyn Waiter>>>) {
        for trace in ready {
            self.queue.extend(self.emitter.messages(trace));
        }
    }

    fn take_in(&mut self, message: SourceMessage) {
        let counters = &self.emitter.counters;
        let decoded = super::bounds::decode_within(
            &message.payload,
            matches!(self.encoding, OtlpEncoding::Json),
            self.bounds,
        );
        let mut decoded = match decoded {
            Ok(decoded) => decoded,
            Err(error) => {
                counters.requests_refused.fetch_add(1, Ordering::Relaxed);
                let reason = error.to_string();
                match &self.route {
                    Some(route) => route.send(message.payload, message.origin, reason, message.ack),
                    // The decode stage makes it a dead letter in the sink, with this reason.
                    None => self.queue.push_back(SourceMessage {
                        quarantine: Some(reason),
                        ..message
                    }),
                }
                return;
            }
        };
        counters.requests_ok.fetch_add(1, Ordering::Relaxed);
        counters.spans.fetch_add(
            (decoded.spans.len() + decoded.rejected) as u64,
            Ordering::Relaxed,
        );
        counters
            .spans_rejected
            .fetch_add(decoded.rejected as u64, Ordering::Relaxed);
        if decoded.rejected > 0 {
            tracing::warn!(
                origin = %message.origin,
                rejected = decoded.rejected,
                why = %decoded.rejections.join("; "),
                "OTLP message: spans with malformed ids dropped"
            );
        }
        let spans = std::mem::take(&mut decoded.spans);
        if spans.is_empty() {
            message.ack.ack();
            return;
        }
        if !self.buffer.has_room(&spans) {
            let pending = self.buffer.drain();
            self.enqueue(pending);
        }
        let traces: HashSet<&str> = spans.iter().map(|s| s.trace_id.as_str()).collect();
        let wait = Arc::new(MessageAck {
            remaining: AtomicUsize::new(traces.len() + 1),
            token: Mutex::new(Some(message.ack)),
        });
        let waiter: Arc<dyn Waiter> = Arc::clone(&wait) as Arc<dyn Waiter>;
        let ready = self.buffer.add(spans, waiter, true, Instant::now());
        self.enqueue(ready);
        wait.done_one();
    }
}

#[async_trait]
impl Source for OtlpMessages {
    async fn next(&mut self) -> Result<Option<SourceMessage>, SourceError> {
        // Cancel-safe as the inner source is: a message is taken in without an await point.
        loop {
            if let Some(message) = self.queue.pop_front() {
                return Ok(Some(message));
            }
            let due = self.buffer.expired(Instant::now());
            if !due.is_empty() {
                self.enqueue(due);
                continue;
            }
            if self.inner_done {
                let rest = self.buffer.drain();
                if rest.is_empty() {
                    return Ok(None);
                }
                self.enqueue(rest);
                continue;
            }
            let next = tokio::select! {
                next = self.inner.next() => next?,
                _ = tokio::time::sleep(self.tick) => continue,
            };
            match next {
                Some(message) => self.take_in(message),
                None => self.inner_done = true,
            }
        }
    }

    fn stop(&mut self) {
        self.inner.stop();
    }

    fn report(&self) -> Vec<(String, String)> {
        self.emitter.stats().report("messages")
    }

    async fn finish(&mut self) -> Result<(), SourceError> {
        tracing::info!(stats = ?self.emitter.stats(), "OTLP messages finished");
        self.inner.finish().await
    }

    fn attach_metrics(&mut self, metrics: crate::telemetry::PipelineMetrics) {
        self.inner.attach_metrics(metrics);
    }

    fn dead_letter_route(&self) -> Option<Arc<dyn DeadLetterRoute>> {
        self.route.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::MemorySource;

    /// A test span: id, parent, string attributes.
    type TestSpan<'a> = (&'a str, Option<&'a str>, &'a [(&'a str, &'a str)]);

    fn request(trace: &str, spans: &[TestSpan<'_>]) -> Vec<u8> {
        let spans: Vec<serde_json::Value> = spans
            .iter()
            .map(|(id, parent, attributes)| {
                serde_json::json!({
                    "traceId": trace, "spanId": id, "parentSpanId": parent.unwrap_or(""),
                    "attributes": attributes.iter().map(|(k, v)|
                        serde_json::json!({"key": k, "value": {"stringValue": v}})).collect::<Vec<_>>()
                })
            })
            .collect();
        serde_json::json!({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
            .to_string()
            .into_bytes()
    }

    #[tokio::test]
    async fn a_message_is_acknowledged_once_its_traces_are_written() {
        let trace = "0b".repeat(16);
        let (root, db) = ("01".repeat(8), "02".repeat(8));
        let payloads = vec![
            // The database span first, then its root in the next message.
            request(
                &trace,
                &[(&db, Some(&root), &[("db.query.text", "SELECT 1")])],
            ),
            request(&trace, &[(&root, None, &[("input.value", "q?")])]),
            b"not an OTLP request".to_vec(),
        ];
        let inner = MemorySource::new("kafka", payloads);
        let acks = inner.acks();
        let mut source = OtlpMessages::new(
            Box::new(inner),
            OtlpEncoding::Json,
            &OtlpConfig::default(),
            &SpanMapping::default(),
        );
        let event = source.next().await.unwrap().unwrap();
        let payload: serde_json::Value = serde_json::from_slice(&event.payload).unwrap();
        assert_eq!(payload["question"], "q?");
        assert_eq!(payload["sql"], "SELECT 1");
        // Not yet written: neither message is acknowledged.
        assert_eq!(acks.acked(), 0);
        // The garbage message comes out as it is (no dead-letter route here).
        let garbage = source.next().await.unwrap().unwrap();
        assert_eq!(garbage.payload, b"not an OTLP request");
        garbage.ack.ack();
        assert_eq!(acks.acked(), 1);
        event.ack.ack();
        assert_eq!(acks.acked(), 3);
        assert!(source.next().await.unwrap().is_none());
        let stats = source.stats_handle()();
        assert_eq!((stats.events, stats.requests_refused), (1, 1));
    }
}
