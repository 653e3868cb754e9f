//! From ready traces to the pipeline's messages, for both OTLP routes (HTTP and Kafka): one
//! message per event of a trace (`spans::events_of_trace`), each with an acknowledgement that
//! counts the trace's events down ([`AckBoard`]); once all of a trace's events are written,
//! every [`Waiter`] of the trace (an HTTP request, a Kafka message) is told. Counters of what
//! went through ([`OtlpStats`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::traces::ReadyTrace;
use crate::sources::{AckToken, Acknowledge, Position, SourceMessage};
use crate::spans::{SpanMapping, events_of_trace};

/// Something that waits for traces to be written: told once per trace it waits for.
pub trait Waiter: Send + Sync {
    /// One of its traces is written (or made no event).
    fn done_one(&self);
}

/// What an OTLP source has seen (a snapshot of its counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OtlpStats {
    /// Requests answered 200 (HTTP), or messages read (Kafka).
    pub requests_ok: u64,
    /// Requests refused (4xx) or asked to retry (429/503); messages that are not OTLP (Kafka,
    /// dead letters).
    pub requests_refused: u64,
    /// Spans received in well-formed requests.
    pub spans: u64,
    /// Spans rejected (malformed ids; named in the partial success).
    pub spans_rejected: u64,
    /// Spans that made no event (not a database span with SQL), dropped.
    pub spans_dropped: u64,
    /// Traces out of the buffer.
    pub traces: u64,
    /// Traces out because their window passed (no root span).
    pub traces_expired: u64,
    /// Events made (one per database span).
    pub events: u64,
    /// Events without a question (dead letters at decode, naming why).
    pub events_without_question: u64,
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) requests_ok: AtomicU64,
    pub(super) requests_refused: AtomicU64,
    pub(super) spans: AtomicU64,
    pub(super) spans_rejected: AtomicU64,
    pub(super) spans_dropped: AtomicU64,
    pub(super) traces: AtomicU64,
    pub(super) traces_expired: AtomicU64,
    pub(super) events: AtomicU64,
    pub(super) events_without_question: AtomicU64,
}

impl Counters {
    pub(super) fn snapshot(&self) -> OtlpStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        OtlpStats {
            requests_ok: get(&self.requests_ok),
            requests_refused: get(&self.requests_refused),
            spans: get(&self.spans),
            spans_rejected: get(&self.spans_rejected),
            spans_dropped: get(&self.spans_dropped),
            traces: get(&self.traces),
            traces_expired: get(&self.traces_expired),
            events: get(&self.events),
            events_without_question: get(&self.events_without_question),
        }
    }
}

/// The events of one trace not yet acknowledged, and the requests waiting for them.
struct Emission {
    outstanding: usize,
    waiters: Vec<Arc<dyn Waiter>>,
}

/// Counts acknowledgements down per trace (`Position::offset` is the trace's emission).
#[derive(Default)]
pub struct AckBoard {
    emissions: Mutex<HashMap<i64, Emission>>,
}

impl Acknowledge for AckBoard {
    fn ack(&self, position: &Position) {
        self.ack_all(&[position]);
    }

    /// One lock per stored batch; the requests whose traces it completed are told after.
    fn ack_all(&self, positions: &[&Position]) {
        let mut finished = Vec::new();
        {
            let mut emissions = self.emissions.lock().unwrap_or_else(|p| p.into_inner());
            for position in positions {
                match emissions.get_mut(&position.offset) {
                    Some(e) if e.outstanding > 1 => e.outstanding -= 1,
                    Some(_) => finished.extend(emissions.remove(&position.offset)),
                    None => {}
                }
            }
        }
        for waiter in finished.into_iter().flat_map(|e| e.waiters) {
            waiter.done_one();
        }
    }
}

impl OtlpStats {
    /// The run summary's lines (`Source::report`); `requests` names what a request is (HTTP
    /// requests, Kafka messages, lines).
    pub fn report(&self, requests: &str) -> Vec<(String, String)> {
        vec![
            (
                "OTLP requests".to_string(),
                format!(
                    "{} {requests} taken, {} refused or not OTLP",
                    self.requests_ok, self.requests_refused
                ),
            ),
            (
                "OTLP spans".to_string(),
                format!(
                    "{} received: {} made events, {} not SQL (dropped), {} rejected (malformed ids)",
                    self.spans, self.events, self.spans_dropped, self.spans_rejected
                ),
            ),
            (
                "OTLP traces".to_string(),
                format!(
                    "{} out ({} past the assembly window without a root); {} events without a question (dead letters)",
                    self.traces, self.traces_expired, self.events_without_question
                ),
            ),
        ]
    }
}

/// Makes the messages of ready traces and keeps their acknowledgements.
pub struct Emitter {
    mapping: SpanMapping,
    acks: Arc<AckBoard>,
    next_emission: AtomicI64,
    pub(super) counters: Counters,
}

impl Emitter {
    /// An emitter mapping spans with `mapping`.
    pub fn new(mapping: SpanMapping) -> Emitter {
        Emitter {
            mapping,
            acks: Arc::new(AckBoard::default()),
            next_emission: AtomicI64::new(0),
            counters: Counters::default(),
        }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> OtlpStats {
        self.counters.snapshot()
    }

    /// The messages of one ready trace (none when it holds no database span: its waiters are
    /// told at once).
    pub fn messages(&self, trace: ReadyTrace<Arc<dyn Waiter>>) -> Vec<SourceMessage> {
        self.counters.traces.fetch_add(1, Ordering::Relaxed);
        if trace.expired {
            self.counters.traces_expired.fetch_add(1, Ordering::Relaxed);
        }
        let fresh_spans = trace
            .spans
            .iter()
            .filter(|s| !trace.seen.contains(&s.span_id))
            .count();
        // Events of spans that went out before are made already (late spans, retries).
        let events: Vec<_> = events_of_trace(&trace.spans, &self.mapping)
            .into_iter()
            .filter(|e| !trace.seen.contains(&e.span_id))
            .collect();
        self.counters.spans_dropped.fetch_add(
            fresh_spans.saturating_sub(events.len()) as u64,
            Ordering::Relaxed,
        );
        if events.is_empty() {
            for waiter in trace.waiters {
                waiter.done_one();
            }
            return Vec::new();
        }
        let emission = self.next_emission.fetch_add(1, Ordering::Relaxed);
        self.acks
            .emissions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                emission,
                Emission {
                    outstanding: events.len(),
                    waiters: trace.waiters,
                },
            );
        events
            .into_iter()
            .enumerate()
            .map(|(index, event)| {
                self.counters.events.fetch_add(1, Ordering::Relaxed);
                let mut payload = event.payload;
                if let Some(why) = event.missing_question {
                    self.counters
                        .events_without_question
                        .fetch_add(1, Ordering::Relaxed);
                    // The decode stage refuses it (no `question`); the dead letter keeps why.
                    if let Some(object) = payload.as_object_mut() {
                        object.insert("question_missing".into(), serde_json::Value::String(why));
                    }
                }
                let acks: Arc<dyn Acknowledge> = self.acks.clone();
                SourceMessage {
                    payload: serde_json::to_vec(&payload).unwrap_or_default(),
                    origin: format!("otlp:trace/{}/span/{}", event.trace_id, event.span_id),
                    ack: AckToken::new(
                        Position {
                            stream: "otlp".into(),
                            partition: i32::try_from(index).unwrap_or(i32::MAX),
                            offset: emission,
                        },
                        acks,
                    ),
                    source_time: None,
                    quarantine: None,
                }
            })
            .collect()
    }
}
