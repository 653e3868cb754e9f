//! Trace assembly: the spans of one trace arrive in several requests or messages, out of order
//! (each exporter batch holds whatever ended; a Collector's Kafka exporter spreads one trace's
//! spans over partitions), and a span's event needs its trace's root (the question) and its LLM
//! span (the model). [`TraceBuffer`] holds spans per trace until the root span arrives (a root
//! ends last, so a trace is then usually complete) or the assembly window passes, within a
//! bound on pending traces and bytes. A completed trace's spans are remembered for one more
//! window, so a span that arrives after its root (another partition, another batch) still
//! finds the question; its trace then goes out again with the spans already seen marked
//! ([`ReadyTrace::seen`]), whose events are not made twice — which also drops an exporter's
//! retry of spans already taken.
//!
//! A trace made ready by an arrival carries that arrival's waiter (`W`: an HTTP request, a
//! Kafka message), told once the trace's events are written. With `hold` a waiter also waits
//! for the traces it left pending (Kafka: the offset waits); without, it does not (HTTP:
//! exporters send one batch at a time, so the batch with the root never comes while this one
//! waits).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::spans::Span;

/// A trace ready for its events.
#[derive(Debug)]
pub struct ReadyTrace<W> {
    /// Trace id (hex).
    pub trace_id: String,
    /// Its spans (those seen before included, for the question and model).
    pub spans: Vec<Span>,
    /// Ids of the spans that went out before (their events are made already).
    pub seen: HashSet<String>,
    /// The waiters to tell once its events are written.
    pub waiters: Vec<W>,
    /// Whether it is out because the window passed (no root span arrived).
    pub expired: bool,
}

struct PendingTrace<W> {
    spans: Vec<Span>,
    bytes: usize,
    first_seen: Instant,
    waiters: Vec<W>,
}

struct CompletedTrace {
    spans: Vec<Span>,
    bytes: usize,
    done_at: Instant,
}

/// Spans per trace, held until the trace is complete or its window passes; completed traces
/// remembered for one more window.
pub struct TraceBuffer<W> {
    pending: HashMap<String, PendingTrace<W>>,
    completed: HashMap<String, CompletedTrace>,
    bytes: usize,
    completed_bytes: usize,
    window: Duration,
    max_traces: usize,
    max_bytes: usize,
}

/// Roughly what a span holds in memory: its texts, a part per attribute and a fixed part
/// (the struct, its ids, the trace's map entry), sized so that the estimate of a pending trace
/// is near its measured cost (`benches/otlp.rs`: ~2.7 KB of resident memory per pending
/// one-span trace with the corpus' SQL).
pub fn span_bytes(span: &Span) -> usize {
    1024 + span.name.len()
        + span
            .attributes
            .iter()
            .map(|(k, v)| k.len() + v.as_text().len() + 96)
            .sum::<usize>()
        + span
            .events
            .iter()
            .flat_map(|e| e.attributes.iter())
            .map(|(k, v)| k.len() + v.as_text().len() + 96)
            .sum::<usize>()
}

impl<W: Clone> TraceBuffer<W> {
    /// A buffer that holds a trace at most `window`, and at most `max_traces` traces and
    /// `max_bytes` bytes of spans pending (and as many remembered).
    pub fn new(window: Duration, max_traces: usize, max_bytes: usize) -> TraceBuffer<W> {
        TraceBuffer {
            pending: HashMap::new(),
            completed: HashMap::new(),
            bytes: 0,
            completed_bytes: 0,
            window,
            max_traces: max_traces.max(1),
            max_bytes: max_bytes.max(1),
        }
    }

    /// Whether `spans` fit beside what is pending (new traces and bytes within the bounds).
    pub fn has_room(&self, spans: &[Span]) -> bool {
        let mut new_traces: Vec<&str> = spans
            .iter()
            .map(|s| s.trace_id.as_str())
            .filter(|t| !self.pending.contains_key(*t) && !self.completed.contains_key(*t))
            .collect();
        new_traces.sort_unstable();
        new_traces.dedup();
        let bytes: usize = spans.iter().map(span_bytes).sum();
        self.pending.len() + new_traces.len() <= self.max_traces
            && self.bytes + bytes <= self.max_bytes
    }

    /// Add the spans of one arrival (`waiter`); returns the traces it made ready: completed
    /// (their root is among the spans now), or late spans of a trace completed before.
    pub fn add(
        &mut self,
        spans: Vec<Span>,
        waiter: W,
        hold: bool,
        now: Instant,
    ) -> Vec<ReadyTrace<W>> {
        let mut by_trace: HashMap<String, Vec<Span>> = HashMap::new();
        for span in spans {
            by_trace
                .entry(span.trace_id.clone())
                .or_default()
                .push(span);
        }
        let mut ready = Vec::new();
        for (trace_id, spans) in by_trace {
            let bytes: usize = spans.iter().map(span_bytes).sum();
            if let Some(done) = self.completed.get_mut(&trace_id) {
                // Late spans of a trace that went out: out again at once, the old ones seen.
                let seen: HashSet<String> = done.spans.iter().map(|s| s.span_id.clone()).collect();
                let fresh: Vec<Span> = spans
                    .into_iter()
                    .filter(|s| !seen.contains(&s.span_id))
                    .collect();
                let fresh_bytes: usize = fresh.iter().map(span_bytes).sum();
                done.spans.extend(fresh);
                done.bytes += fresh_bytes;
                self.completed_bytes += fresh_bytes;
                ready.push(ReadyTrace {
                    trace_id,
                    spans: done.spans.clone(),
                    seen,
                    waiters: vec![waiter.clone()],
                    expired: false,
                });
                continue;
            }
            let entry = self
                .pending
                .entry(trace_id.clone())
                .or_insert_with(|| PendingTrace {
                    spans: Vec::new(),
                    bytes: 0,
                    first_seen: now,
                    waiters: Vec::new(),
                });
            entry.spans.extend(spans);
            entry.bytes += bytes;
            self.bytes += bytes;
            let complete = entry.spans.iter().any(Span::is_root);
            if hold || complete {
                entry.waiters.push(waiter.clone());
            }
            if complete && let Some(trace) = self.take(&trace_id, false, now) {
                ready.push(trace);
            }
        }
        ready
    }

    fn take(&mut self, trace_id: &str, expired: bool, now: Instant) -> Option<ReadyTrace<W>> {
        let trace = self.pending.remove(trace_id)?;
        self.bytes -= trace.bytes;
        if self.completed.len() < self.max_traces
            && self.completed_bytes + trace.bytes <= self.max_bytes
        {
            self.completed_bytes += trace.bytes;
            self.completed.insert(
                trace_id.to_string(),
                CompletedTrace {
                    spans: trace.spans.clone(),
                    bytes: trace.bytes,
                    done_at: now,
                },
            );
        }
        Some(ReadyTrace {
            trace_id: trace_id.to_string(),
            spans: trace.spans,
            seen: HashSet::new(),
            waiters: trace.waiters,
            expired,
        })
    }

    /// The traces whose window has passed at `now` (and forget completed traces remembered
    /// for a window).
    pub fn expired(&mut self, now: Instant) -> Vec<ReadyTrace<W>> {
        let window = self.window;
        let mut forgotten = 0;
        self.completed.retain(|_, t| {
            let keep = now.duration_since(t.done_at) < window;
            if !keep {
                forgotten += t.bytes;
            }
            keep
        });
        self.completed_bytes -= forgotten;
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, t)| now.duration_since(t.first_seen) >= window)
            .map(|(id, _)| id.clone())
            .collect();
        due.iter()
            .filter_map(|id| self.take(id, true, now))
            .collect()
    }

    /// Every pending trace (shutdown).
    pub fn drain(&mut self) -> Vec<ReadyTrace<W>> {
        let now = Instant::now();
        let all: Vec<String> = self.pending.keys().cloned().collect();
        all.iter()
            .filter_map(|id| self.take(id, true, now))
            .collect()
    }

    /// Traces pending.
    pub fn pending_traces(&self) -> usize {
        self.pending.len()
    }

    /// Bytes pending (remembered completed traces not counted).
    pub fn pending_bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(trace: &str, id: &str, parent: Option<&str>) -> Span {
        Span {
            trace_id: trace.into(),
            span_id: id.into(),
            parent_span_id: parent.map(str::to_string),
            ..Span::default()
        }
    }

    #[test]
    fn a_trace_is_ready_when_its_root_arrives_whichever_request_brings_it() {
        let mut buffer = TraceBuffer::new(Duration::from_secs(5), 10, 1 << 20);
        let t0 = Instant::now();
        let ready = buffer.add(vec![span("t1", "db", Some("root"))], 1, false, t0);
        assert!(ready.is_empty());
        assert_eq!(buffer.pending_traces(), 1);
        let ready = buffer.add(
            vec![span("t1", "root", None), span("t2", "x", Some("y"))],
            2,
            false,
            t0,
        );
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].trace_id, "t1");
        assert_eq!(ready[0].spans.len(), 2);
        // The request that completed it waits for its events; the first was answered already.
        assert_eq!(ready[0].waiters, vec![2]);
        assert!(!ready[0].expired && ready[0].seen.is_empty());
        // t2 has no root: it goes out when the window passes.
        assert!(buffer.expired(t0 + Duration::from_secs(4)).is_empty());
        let late = buffer.expired(t0 + Duration::from_secs(5));
        assert_eq!(late.len(), 1);
        assert!(late[0].expired);
        assert_eq!((buffer.pending_traces(), buffer.pending_bytes()), (0, 0));
    }

    #[test]
    fn a_span_after_its_root_joins_the_remembered_trace_and_retries_are_seen() {
        let mut buffer = TraceBuffer::new(Duration::from_secs(5), 10, 1 << 20);
        let t0 = Instant::now();
        // The root arrives first (another partition held the database span).
        let ready = buffer.add(vec![span("t", "root", None)], 1, true, t0);
        assert_eq!(ready.len(), 1);
        let late = buffer.add(vec![span("t", "db", Some("root"))], 2, true, t0);
        assert_eq!(late.len(), 1);
        assert_eq!(late[0].spans.len(), 2);
        assert!(late[0].seen.contains("root") && !late[0].seen.contains("db"));
        assert_eq!(late[0].waiters, vec![2]);
        // A retry of the same span: out again, but marked seen.
        let again = buffer.add(vec![span("t", "db", Some("root"))], 3, true, t0);
        assert!(again[0].seen.contains("db"));
        // After a window the trace is forgotten: a later span is a new pending trace.
        buffer.expired(t0 + Duration::from_secs(5));
        assert!(
            buffer
                .add(
                    vec![span("t", "db2", Some("root"))],
                    4,
                    true,
                    t0 + Duration::from_secs(6)
                )
                .is_empty()
        );
    }

    #[test]
    fn room_is_bounded_by_traces_and_bytes() {
        let mut buffer = TraceBuffer::new(Duration::from_secs(5), 2, 1 << 20);
        let now = Instant::now();
        buffer.add(
            vec![span("a", "1", Some("0")), span("b", "1", Some("0"))],
            (),
            true,
            now,
        );
        assert!(buffer.has_room(&[span("a", "2", Some("0"))]));
        assert!(!buffer.has_room(&[span("c", "1", Some("0"))]));
        let small = TraceBuffer::<()>::new(Duration::from_secs(5), 10, 100);
        assert!(!small.has_room(&[span("a", "1", None)]));
        assert_eq!(buffer.drain().len(), 2);
    }
}
