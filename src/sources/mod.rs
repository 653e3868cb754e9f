//! The source seam ([`Source`]: raw event payloads, file/stdin and memory sources here, Kafka
//! in `crate::sources::kafka`), and the acknowledgements that travel back from the sink ([`ack`]).
//!
//! A source hands each payload out with an [`AckToken`]; the pipeline acknowledges it once the
//! sink has durably written everything the payload produced, and a source that tracks offsets
//! (Kafka, through `sources::kafka::offsets`) commits only acknowledged positions. Sources never decode:
//! the pipeline's decode stage is the one place a payload becomes an event or a dead letter,
//! which goes to the source's own [`DeadLetterRoute`] when it offers one (the Kafka source's
//! dead-letter topic), else to the sink.

pub mod ack;
pub mod config;
pub mod kafka;
pub mod otlp;

use std::sync::Arc;

use async_trait::async_trait;

pub use ack::{AckToken, Acknowledge, Position, ack_all};

/// One raw payload read from a source, not yet decoded.
#[derive(Debug)]
pub struct SourceMessage {
    /// The original bytes.
    pub payload: Vec<u8>,
    /// Human-readable origin for dead letters (`file:events.jsonl:17`, `kafka:agents/2@991`).
    pub origin: String,
    /// Acknowledge once the sink has this message's output.
    pub ack: AckToken,
    /// The source's own time of the message, the event time of an event without `ts`, so
    /// that a redelivered message gets the same `ts` — and lands in the same partition and
    /// hour, where its duplicate rows collapse: the Kafka message timestamp; a file's
    /// modification time when it was first opened. `None` (stdin, memory): the time the
    /// message was received.
    pub source_time: Option<SourceTime>,
    /// Set by a source that will not have the payload scored (the Kafka source's poison-event
    /// guard, for a message in flight at too many deaths of the process): the reason, and the
    /// decode stage dead-letters the payload unread.
    pub quarantine: Option<String>,
}

/// A source's time of a message, in milliseconds since the Unix epoch. Kept as a number and
/// written as RFC 3339 text ([`SourceTime::rfc3339`]) only for an event without `ts`, by the
/// scoring task that decodes it: the source stage every message crosses formats nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SourceTime(i64);

impl SourceTime {
    /// `millis` since the Unix epoch; `None` when out of the range RFC 3339 text can carry.
    pub fn from_millis(millis: i64) -> Option<SourceTime> {
        chrono::DateTime::<chrono::Utc>::from_timestamp_millis(millis).map(|_| SourceTime(millis))
    }

    /// The current time.
    pub fn now() -> SourceTime {
        SourceTime(chrono::Utc::now().timestamp_millis())
    }

    /// Milliseconds since the Unix epoch.
    pub fn millis(self) -> i64 {
        self.0
    }

    /// The RFC 3339 text rows carry (UTC, milliseconds: `2026-01-02T03:04:05.678Z`).
    ///
    /// Messages received together share their millisecond, so each thread keeps the last text
    /// it wrote and hands out a copy for the same millisecond (formatting one was ~700
    /// instructions per event on the line rate; a copy is a tenth of that).
    pub fn rfc3339(self) -> String {
        thread_local! {
            static LAST: std::cell::RefCell<Option<(i64, String)>> =
                const { std::cell::RefCell::new(None) };
        }
        LAST.with(|last| {
            let Ok(mut last) = last.try_borrow_mut() else {
                return rfc3339_from_millis(self.0).unwrap_or_default();
            };
            match &*last {
                Some((millis, text)) if *millis == self.0 => text.clone(),
                _ => {
                    let text = rfc3339_from_millis(self.0).unwrap_or_default();
                    *last = Some((self.0, text.clone()));
                    text
                }
            }
        })
    }
}

/// `millis` since the Unix epoch as the RFC 3339 text rows carry (`None` when out of range).
fn rfc3339_from_millis(millis: i64) -> Option<String> {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(millis)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// Why a source failed (fatal for the run; transient errors are retried inside the source).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// I/O on a file or stdin.
    #[error("source I/O error on {what}: {source}")]
    Io {
        /// What was being read.
        what: String,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The Kafka source is misconfigured or cannot go on (a message that says why).
    #[error("kafka error: {0}")]
    Kafka(String),
    /// A librdkafka call failed: what was being done, and librdkafka's error as the source.
    #[error("kafka: {what}")]
    KafkaClient {
        /// What was being done (`cannot create consumer`, `final commit failed`, …).
        what: String,
        /// librdkafka's error.
        #[source]
        source: rdkafka::error::KafkaError,
    },
}

/// A stream of raw payloads. `Ok(None)` means the source is exhausted (EOF without `follow`)
/// or was asked to stop.
#[async_trait]
pub trait Source: Send {
    /// Next payload.
    async fn next(&mut self) -> Result<Option<SourceMessage>, SourceError>;

    /// A message this source has already received, handed out without waiting or boxing a
    /// future (the source stage takes these before it awaits [`Source::next`]). `None` when it
    /// holds none, and also when it was stopped or failed: `next` then says which. The Kafka
    /// source receives in batches and hands the rest of a batch out here; the file and stdin
    /// sources the lines already complete in their read buffer. The source stage sends what it
    /// takes here to the scorer pool together with the message it awaited.
    fn next_ready(&mut self) -> Option<SourceMessage> {
        None
    }

    /// Stop handing out messages (graceful shutdown); already-read messages still flow.
    fn stop(&mut self) {}

    /// Called after the pipeline drained: commit whatever is acknowledged.
    async fn finish(&mut self) -> Result<(), SourceError> {
        Ok(())
    }

    /// Record source-side telemetry (the Kafka source's consumer lag) into `metrics`.
    fn attach_metrics(&mut self, _metrics: crate::telemetry::PipelineMetrics) {}

    /// What the source saw, for the run summary (label, text): the OTLP sources' requests,
    /// spans, traces and events. Empty by default.
    fn report(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// How long a batch may wait for more rows before it is written, when this source needs it
    /// shorter than `[sink] flush_interval_ms`: its senders wait for their rows to be written
    /// (the OTLP receiver answers a request then, and an exporter sends one request at a
    /// time). `None`: the sink's setting.
    fn batch_linger(&self) -> Option<std::time::Duration> {
        None
    }

    /// Where this source's undecodable payloads go, when it keeps them itself (the Kafka
    /// source's dead-letter topic); `None`: to the sink's dead letters.
    fn dead_letter_route(&self) -> Option<Arc<dyn DeadLetterRoute>> {
        None
    }
}

/// A source's own place for payloads that are not events.
pub trait DeadLetterRoute: Send + Sync {
    /// Hand over an undecodable payload (its origin and why it is not an event); `ack` is
    /// acknowledged once the route holds it durably. Called on the async runtime.
    fn send(&self, payload: Vec<u8>, origin: String, reason: String, ack: AckToken);
}

pub mod file;

pub use file::{FileSource, StdinSource};

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts acknowledgements (line-oriented and in-memory sources have no offsets to commit, but
/// the count shows that every message made it through the sink).
#[derive(Debug, Default)]
pub struct AckCounter {
    acked: AtomicU64,
}

impl AckCounter {
    /// Messages acknowledged so far.
    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::Relaxed)
    }
}

impl Acknowledge for AckCounter {
    fn ack(&self, _position: &Position) {
        self.acked.fetch_add(1, Ordering::Relaxed);
    }

    fn ack_all(&self, positions: &[&Position]) {
        self.acked
            .fetch_add(positions.len() as u64, Ordering::Relaxed);
    }
}

/// A source over payloads already in memory (backfill of benchmark files, tests).
pub struct MemorySource {
    name: Arc<str>,
    payloads: std::vec::IntoIter<Vec<u8>>,
    next_index: i64,
    stopped: bool,
    acks: Arc<AckCounter>,
}

impl MemorySource {
    /// A source that yields `payloads` in order; origins are `<name>:<1-based index>`.
    pub fn new(name: impl Into<String>, payloads: Vec<Vec<u8>>) -> MemorySource {
        MemorySource {
            name: name.into().into(),
            payloads: payloads.into_iter(),
            next_index: 0,
            stopped: false,
            acks: Arc::new(AckCounter::default()),
        }
    }

    /// Shared acknowledgement counter.
    pub fn acks(&self) -> Arc<AckCounter> {
        Arc::clone(&self.acks)
    }
}

#[async_trait]
impl Source for MemorySource {
    async fn next(&mut self) -> Result<Option<SourceMessage>, SourceError> {
        if self.stopped {
            return Ok(None);
        }
        let Some(payload) = self.payloads.next() else {
            return Ok(None);
        };
        self.next_index += 1;
        let position = Position {
            stream: Arc::clone(&self.name),
            partition: 0,
            offset: self.next_index,
        };
        let acks: Arc<dyn Acknowledge> = self.acks.clone();
        Ok(Some(SourceMessage {
            payload,
            origin: format!("{}:{}", self.name, self.next_index),
            ack: AckToken::new(position, acks),
            source_time: None,
            quarantine: None,
        }))
    }

    fn stop(&mut self) {
        self.stopped = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_time_is_written_as_rows_carry_times() {
        let time = SourceTime::from_millis(1_767_323_045_678).expect("in range");
        assert_eq!(time.millis(), 1_767_323_045_678);
        assert_eq!(time.rfc3339(), "2026-01-02T03:04:05.678Z");
        assert_eq!(
            SourceTime::from_millis(0)
                .map(SourceTime::rfc3339)
                .as_deref(),
            Some("1970-01-01T00:00:00.000Z")
        );
        assert_eq!(
            SourceTime::from_millis(-1)
                .map(SourceTime::rfc3339)
                .as_deref(),
            Some("1969-12-31T23:59:59.999Z")
        );
        assert_eq!(SourceTime::from_millis(i64::MAX), None, "out of range");
        let now = SourceTime::now().rfc3339();
        assert!(chrono::DateTime::parse_from_rfc3339(&now).is_ok(), "{now}");
        // The same millisecond again, another one, and back: each its own text (the thread's
        // last text is reused only for its own millisecond).
        for millis in [5, 5, 6, 5, 5, 0, 1_767_323_045_678, 1_767_323_045_678] {
            let time = SourceTime::from_millis(millis).expect("in range");
            assert_eq!(
                Some(time.rfc3339()),
                rfc3339_from_millis(millis),
                "{millis}"
            );
        }
    }
}
