//! The source stage (reading payloads under back-pressure, handing what a source received
//! together to the scorer pool under one reservation of the channel's room) and the
//! [`Decoder`] — the one place a payload becomes an event or a dead letter, run by the scoring
//! tasks.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::types::{Completed, EventTransform, SourceOutcome, Work};
use crate::evaluation::DeadLetter;
use crate::event::{DecodeError, Event};
use crate::score::now_rfc3339;
use crate::sources::{Source, SourceMessage, SourceTime};

/// Most messages the source stage hands to the scorer pool at once: what the source has
/// already received ([`Source::next_ready`]) goes over with the message that was awaited, one
/// reservation of the channel's room for all of them.
pub(super) const HAND_OVER: usize = 64;

pub(super) async fn source_stage(
    mut source: Box<dyn Source>,
    raw_tx: mpsc::Sender<SourceMessage>,
    mut shutdown: watch::Receiver<bool>,
    metrics: Option<crate::telemetry::PipelineMetrics>,
) -> SourceOutcome {
    let mut last_error = Ok(());
    // Whether anyone can still ask for shutdown (the sender may be dropped).
    let mut watching = true;
    // Never more than the channel holds: reserving more room than that would wait forever.
    let most = raw_tx.max_capacity().clamp(1, HAND_OVER);
    let mut batch = Vec::with_capacity(most);
    loop {
        if watching && *shutdown.borrow() {
            tracing::info!("shutdown requested; stopping the source and draining");
            source.stop();
            break;
        }
        // What the source has already received first (no future boxed, nothing polled), then the
        // source: while it has messages ready, neither the shutdown signal nor the
        // channel's closing is polled (polling either registers a waiter: a lock taken and
        // released, per message). Shutdown is still seen at the top of every turn, a closed
        // channel at the send below; while the source waits, both wake it.
        let next = if let Some(message) = source.next_ready() {
            Ok(Some(message))
        } else {
            tokio::select! {
                biased;
                next = source.next() => next,
                changed = shutdown.changed(), if watching => {
                    watching = changed.is_ok();
                    continue;
                }
                () = raw_tx.closed() => {
                    // Downstream stopped (sink failure); it reports its own error. Checked here too
                    // so a source idling at EOF (follow, Kafka) does not keep the run alive.
                    tracing::debug!("downstream stopped; stopping the source");
                    source.stop();
                    break;
                }
            }
        };
        match next {
            Ok(Some(message)) => {
                // With it, whatever else the source has already received.
                batch.push(message);
                while batch.len() < most {
                    match source.next_ready() {
                        Some(message) => batch.push(message),
                        None => break,
                    }
                }
                stamp_receive_time(&mut batch);
                if let Some(metrics) = &metrics {
                    metrics.consumed(batch.len());
                }
                if !send_messages(&raw_tx, &mut batch).await {
                    // Downstream stopped (sink failure); it reports its own error.
                    source.stop();
                    break;
                }
            }
            Ok(None) => break,
            Err(error) => {
                tracing::error!(%error, "source failed; draining what was read");
                source.stop();
                last_error = Err(error);
                break;
            }
        }
    }
    SourceOutcome { source, last_error }
}

/// The event time of an event without `ts` and without a source time is when the pipeline
/// received it (not when a scoring task got to it): one clock read for messages received
/// together.
fn stamp_receive_time(batch: &mut [SourceMessage]) {
    let mut now = None;
    for message in batch.iter_mut().filter(|m| m.source_time.is_none()) {
        message.source_time = Some(*now.get_or_insert_with(SourceTime::now));
    }
}

/// Hand `batch` (at most the channel's capacity) to the scorer pool, in order, emptying it:
/// the channel's room is reserved once for all of its messages (waiting while back-pressure
/// leaves less), where a send per message took a permit each. False when the pool has stopped
/// (a sink failure); the messages are then dropped unacknowledged, so a source that tracks
/// offsets redelivers them.
#[doc(hidden)]
pub async fn send_messages(
    raw_tx: &mpsc::Sender<SourceMessage>,
    batch: &mut Vec<SourceMessage>,
) -> bool {
    match raw_tx.reserve_many(batch.len()).await {
        Ok(permits) => {
            for (permit, message) in permits.zip(batch.drain(..)) {
                permit.send(message);
            }
            true
        }
        Err(_closed) => {
            batch.clear();
            false
        }
    }
}

/// The one place a payload becomes an event or a dead letter, run by the scoring tasks (so
/// decoding is spread over the workers, not a stage every event crosses one at a time): the
/// dead letter goes to the source's own route when it has one (the Kafka dead-letter topic),
/// else to the sink.
pub(super) struct Decoder {
    pub(super) max_event_bytes: usize,
    pub(super) transform: Option<EventTransform>,
    pub(super) dead_letter_route: Option<Arc<dyn crate::sources::DeadLetterRoute>>,
}

/// What one message decodes to (returned and matched at once: boxing the event would cost an
/// allocation per event for nothing).
#[allow(clippy::large_enum_variant)]
pub(super) enum Decoded {
    /// An event to score.
    Work(Work),
    /// A dead letter for the sink.
    DeadLetter(Completed),
    /// Handed to the source's dead-letter route: nothing more to do here.
    Routed,
}

impl Decoder {
    pub(super) fn decode(&self, message: SourceMessage) -> Decoded {
        let SourceMessage {
            payload,
            origin,
            ack,
            source_time,
            quarantine,
        } = message;
        let decoded = match quarantine {
            Some(reason) => Err(Rejection::Quarantined(reason)),
            None => decode_payload(&payload, self.max_event_bytes).map_err(Rejection::Decode),
        };
        match decoded {
            Ok(mut event) => {
                if let Some(transform) = &self.transform {
                    transform(&mut event);
                }
                // The event time of an event without `ts`: the source's own time of the message
                // (stable across redelivery), else the receive time (stamped by the source
                // stage). Written only for such an event: the others' rows carry their own.
                let fallback_ts = if event.ts.is_some() {
                    String::new()
                } else {
                    source_time.map_or_else(now_rfc3339, SourceTime::rfc3339)
                };
                Decoded::Work(Work {
                    event,
                    fallback_ts,
                    origin,
                    payload,
                    ack,
                })
            }
            Err(rejection) => {
                tracing::debug!(%origin, reason = %rejection, "dead letter");
                let reason = rejection.to_string();
                ack.scored();
                if let Some(route) = &self.dead_letter_route {
                    route.send(payload, origin, reason, ack);
                    return Decoded::Routed;
                }
                let dead_letter = DeadLetter::new(origin, reason, &payload);
                Decoded::DeadLetter(Completed::DeadLetter { dead_letter, ack })
            }
        }
    }
}

/// Why a message becomes a dead letter instead of an event; its text is the dead letter's
/// reason (the typed error is kept until the dead letter is written).
#[derive(Debug, thiserror::Error)]
enum Rejection {
    /// The poison-event guard set it aside, with its reason.
    #[error("{0}")]
    Quarantined(String),
    /// The payload is no event.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// One payload to an event, or why it is none: what [`Decoder`] does with every message of a
/// run, and `sqlgrade score` with its one payload, so the two cannot disagree.
#[inline]
pub fn decode_payload(payload: &[u8], max_event_bytes: usize) -> Result<Event, DecodeError> {
    abort_if_marked(payload);
    Event::decode_with_limit(payload, max_event_bytes)
}

/// Environment variable of the crash hook ([`abort_if_marked`]).
pub const ABORT_ON_ENV: &str = "SQLGRADE_TEST_ABORT_ON";

/// A test hook for the poison-event guard (`sources::kafka::poison`): with `SQLGRADE_TEST_ABORT_ON` set
/// to a non-empty text, a payload containing it aborts the process as it is decoded — a
/// stand-in for whatever might one day kill the daemon on one event (a bug, a limit missed).
/// Only in builds with the `test-hooks` feature (the test script's); the build users install
/// has no hook at all.
#[cfg(feature = "test-hooks")]
fn abort_if_marked(payload: &[u8]) {
    static MARK: std::sync::OnceLock<Option<memchr::memmem::Finder<'static>>> =
        std::sync::OnceLock::new();
    let mark = MARK.get_or_init(|| {
        std::env::var(ABORT_ON_ENV)
            .ok()
            .filter(|mark| !mark.is_empty())
            .map(|mark| memchr::memmem::Finder::new(mark.as_bytes()).into_owned())
    });
    if let Some(finder) = mark
        && finder.find(payload).is_some()
    {
        tracing::error!("{ABORT_ON_ENV}: aborting on a marked payload (test hook)");
        std::process::abort();
    }
}

/// Without the `test-hooks` feature: nothing.
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
fn abort_if_marked(_: &[u8]) {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::{AckToken, Position};

    fn message(payload: &str, source_time: Option<SourceTime>) -> SourceMessage {
        SourceMessage {
            payload: payload.as_bytes().to_vec(),
            origin: "test:1".into(),
            ack: AckToken::untracked(Position {
                stream: "test".into(),
                partition: 0,
                offset: 1,
            }),
            source_time,
            quarantine: None,
        }
    }

    fn fallback_of(decoded: Decoded) -> (Option<String>, String) {
        match decoded {
            Decoded::Work(work) => (work.event.ts, work.fallback_ts),
            _ => panic!("expected an event"),
        }
    }

    fn payloads(messages: &[SourceMessage]) -> Vec<&str> {
        messages
            .iter()
            .map(|m| std::str::from_utf8(&m.payload).unwrap_or("?"))
            .collect()
    }

    #[tokio::test]
    async fn messages_cross_to_the_pool_in_order_a_batch_at_a_time() {
        let (tx, mut rx) = mpsc::channel(8);
        let mut batch: Vec<_> = (1..=8).map(|i| message(&i.to_string(), None)).collect();
        assert!(send_messages(&tx, &mut batch).await);
        assert!(batch.is_empty());
        assert_eq!(rx.len(), 8);
        // A run: the first and a fair share of the queue (7 queued, 2 workers: 3 more).
        let first = rx.recv().await.expect("a message");
        let run = super::super::scoring::take_run(&mut rx, first, 2);
        assert_eq!(payloads(&run), ["1", "2", "3", "4"]);
        // The room given back lets a whole batch in again, after the rest.
        let mut batch: Vec<_> = (9..=12).map(|i| message(&i.to_string(), None)).collect();
        assert!(send_messages(&tx, &mut batch).await);
        let first = rx.recv().await.expect("a message");
        let run = super::super::scoring::take_run(&mut rx, first, 1);
        assert_eq!(payloads(&run), ["5", "6", "7", "8", "9", "10", "11", "12"]);
        // Nothing queued: a run of one, at once.
        let mut batch = vec![message("13", None)];
        assert!(send_messages(&tx, &mut batch).await);
        let first = rx.recv().await.expect("a message");
        assert_eq!(
            payloads(&super::super::scoring::take_run(&mut rx, first, 4)),
            ["13"]
        );
        // The pool stopped: the batch is dropped (unacknowledged), and the source is told.
        drop(rx);
        let mut batch = vec![message("14", None)];
        assert!(!send_messages(&tx, &mut batch).await);
        assert!(batch.is_empty());
    }

    #[test]
    fn messages_received_together_get_one_receive_time() {
        let own = SourceTime::from_millis(1_767_323_045_678);
        let mut batch = vec![message("a", None), message("b", own), message("c", None)];
        stamp_receive_time(&mut batch);
        assert_eq!(batch[1].source_time, own, "a source's own time is kept");
        assert!(batch[0].source_time.is_some());
        assert_eq!(batch[0].source_time, batch[2].source_time);
    }

    #[test]
    fn only_an_event_without_ts_gets_a_written_fallback_time() {
        let decoder = Decoder {
            max_event_bytes: 1 << 20,
            transform: None,
            dead_letter_route: None,
        };
        let source_time = SourceTime::from_millis(1_767_323_045_678);
        let without = r#"{"event_id":"a","question":"q","sql":"SELECT 1"}"#;
        let with =
            r#"{"event_id":"b","question":"q","sql":"SELECT 1","ts":"2026-03-04T05:06:07Z"}"#;

        // The source's own time, written as rows carry it.
        let (ts, fallback) = fallback_of(decoder.decode(message(without, source_time)));
        assert_eq!((ts, fallback.as_str()), (None, "2026-01-02T03:04:05.678Z"));
        // No source time (a stage that stamps none): the time of decoding, same format.
        let (_, fallback) = fallback_of(decoder.decode(message(without, None)));
        assert!(
            chrono::DateTime::parse_from_rfc3339(&fallback).is_ok()
                && fallback.len() == "2026-01-02T03:04:05.678Z".len(),
            "{fallback}"
        );
        // An event with its own time needs none, whatever the source says.
        let (ts, fallback) = fallback_of(decoder.decode(message(with, source_time)));
        assert_eq!(ts.as_deref(), Some("2026-03-04T05:06:07Z"));
        assert!(fallback.is_empty());
    }
}
