//! Trace assembly: the spans of one trace arrive in several requests, out of order (each
//! exporter batch holds whatever ended), and a span's event needs its trace's root (the
//! question) and its LLM span (the model). [`TraceBuffer`] holds spans per trace until the root
//! span arrives (a root ends last, so the trace is then complete) or the assembly window
//! passes, within a bound on pending traces and bytes. A trace made ready by a request carries
//! that request (`W`), which is answered once the trace's events are written; a request whose
//! spans only wait for their root is answered at once (exporters send one batch at a time: the
//! root comes in the next batch, which would never come while this one waited).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::spans::Span;

/// A trace ready for its events.
#[derive(Debug)]
pub struct ReadyTrace<W> {
    /// Trace id (hex).
    pub trace_id: String,
    /// Its spans.
    pub spans: Vec<Span>,
    /// The request that completed it (none when its window passed or at shutdown).
    pub waiters: Vec<W>,
    /// Whether it is out because the window passed (no root span arrived).
    pub expired: bool,
}

struct PendingTrace {
    spans: Vec<Span>,
    bytes: usize,
    first_seen: Instant,
}

/// Spans per trace, held until the trace is complete or its window passes.
pub struct TraceBuffer<W> {
    pending: HashMap<String, PendingTrace>,
    _waiter: std::marker::PhantomData<W>,
    bytes: usize,
    window: Duration,
    max_traces: usize,
    max_bytes: usize,
}

/// Roughly what a span holds in memory (its texts plus a fixed part).
pub fn span_bytes(span: &Span) -> usize {
    256 + span.name.len()
        + span
            .attributes
            .iter()
            .map(|(k, v)| k.len() + v.as_text().len() + 32)
            .sum::<usize>()
        + span
            .events
            .iter()
            .flat_map(|e| e.attributes.iter())
            .map(|(k, v)| k.len() + v.as_text().len() + 32)
            .sum::<usize>()
}

impl<W: Clone> TraceBuffer<W> {
    /// A buffer that holds a trace at most `window`, and at most `max_traces` traces and
    /// `max_bytes` bytes of spans.
    pub fn new(window: Duration, max_traces: usize, max_bytes: usize) -> TraceBuffer<W> {
        TraceBuffer {
            pending: HashMap::new(),
            _waiter: std::marker::PhantomData,
            bytes: 0,
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
            .filter(|t| !self.pending.contains_key(*t))
            .collect();
        new_traces.sort_unstable();
        new_traces.dedup();
        let bytes: usize = spans.iter().map(span_bytes).sum();
        self.pending.len() + new_traces.len() <= self.max_traces
            && self.bytes + bytes <= self.max_bytes
    }

    /// Add one request's spans (`waiter` stands for the request); returns the traces it
    /// completed (their root span is among what arrived), each carrying `waiter`.
    pub fn add(&mut self, spans: Vec<Span>, waiter: W, now: Instant) -> Vec<ReadyTrace<W>> {
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
            let entry = self
                .pending
                .entry(trace_id.clone())
                .or_insert_with(|| PendingTrace {
                    spans: Vec::new(),
                    bytes: 0,
                    first_seen: now,
                });
            entry.spans.extend(spans);
            entry.bytes += bytes;
            self.bytes += bytes;
            if entry.spans.iter().any(Span::is_root)
                && let Some(mut trace) = self.take(&trace_id, false)
            {
                trace.waiters.push(waiter.clone());
                ready.push(trace);
            }
        }
        ready
    }

    fn take(&mut self, trace_id: &str, expired: bool) -> Option<ReadyTrace<W>> {
        let trace = self.pending.remove(trace_id)?;
        self.bytes -= trace.bytes;
        Some(ReadyTrace {
            trace_id: trace_id.to_string(),
            spans: trace.spans,
            waiters: Vec::new(),
            expired,
        })
    }

    /// The traces whose window has passed at `now`.
    pub fn expired(&mut self, now: Instant) -> Vec<ReadyTrace<W>> {
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, t)| now.duration_since(t.first_seen) >= self.window)
            .map(|(id, _)| id.clone())
            .collect();
        due.iter().filter_map(|id| self.take(id, true)).collect()
    }

    /// Every pending trace (shutdown).
    pub fn drain(&mut self) -> Vec<ReadyTrace<W>> {
        let all: Vec<String> = self.pending.keys().cloned().collect();
        all.iter().filter_map(|id| self.take(id, true)).collect()
    }

    /// Traces pending.
    pub fn pending_traces(&self) -> usize {
        self.pending.len()
    }

    /// Bytes pending.
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
        let ready = buffer.add(vec![span("t1", "db", Some("root"))], 1, t0);
        assert!(ready.is_empty());
        assert_eq!(buffer.pending_traces(), 1);
        let ready = buffer.add(
            vec![span("t1", "root", None), span("t2", "x", Some("y"))],
            2,
            t0,
        );
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].trace_id, "t1");
        assert_eq!(ready[0].spans.len(), 2);
        // The request that completed it waits for its events; the first was answered already.
        assert_eq!(ready[0].waiters, vec![2]);
        assert!(!ready[0].expired);
        // t2 has no root: it goes out when the window passes.
        assert!(buffer.expired(t0 + Duration::from_secs(4)).is_empty());
        let late = buffer.expired(t0 + Duration::from_secs(5));
        assert_eq!(late.len(), 1);
        assert!(late[0].expired);
        assert_eq!((buffer.pending_traces(), buffer.pending_bytes()), (0, 0));
    }

    #[test]
    fn room_is_bounded_by_traces_and_bytes() {
        let mut buffer = TraceBuffer::new(Duration::from_secs(5), 2, 1 << 20);
        let now = Instant::now();
        buffer.add(
            vec![span("a", "1", Some("0")), span("b", "1", Some("0"))],
            (),
            now,
        );
        assert!(buffer.has_room(&[span("a", "2", Some("0"))]));
        assert!(!buffer.has_room(&[span("c", "1", Some("0"))]));
        let small = TraceBuffer::<()>::new(Duration::from_secs(5), 10, 100);
        assert!(!small.has_room(&[span("a", "1", None)]));
        assert_eq!(buffer.drain().len(), 2);
    }
}
