//! The source stage (reading payloads under back-pressure) and the [`Decoder`] — the one place
//! a payload becomes an event or a dead letter, run by the scoring tasks.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::types::*;
use crate::evaluation::DeadLetter;
use crate::event::Event;
use crate::score::now_rfc3339;
use crate::source::{Source, SourceMessage, SourceTime};

pub(super) async fn source_stage(
    mut source: Box<dyn Source>,
    raw_tx: mpsc::Sender<SourceMessage>,
    mut shutdown: watch::Receiver<bool>,
    metrics: Option<crate::telemetry::PipelineMetrics>,
) -> SourceOutcome {
    let mut last_error = Ok(());
    // Whether anyone can still ask for shutdown (the sender may be dropped).
    let mut watching = true;
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
            Ok(Some(mut message)) => {
                // The event time of an event without `ts` and without a source time: when the
                // pipeline received it (not when a scoring task got to it).
                if message.source_time.is_none() {
                    message.source_time = Some(SourceTime::now());
                }
                if let Some(metrics) = &metrics {
                    metrics.consumed();
                }
                if raw_tx.send(message).await.is_err() {
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

/// The one place a payload becomes an event or a dead letter, run by the scoring tasks (so
/// decoding is spread over the workers, not a stage every event crosses one at a time): the
/// dead letter goes to the source's own route when it has one (the Kafka dead-letter topic),
/// else to the sink.
pub(super) struct Decoder {
    pub(super) max_event_bytes: usize,
    pub(super) transform: Option<EventTransform>,
    pub(super) dead_letter_route: Option<Arc<dyn crate::source::DeadLetterRoute>>,
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
        } = message;
        match Event::decode_with_limit(&payload, self.max_event_bytes) {
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
            Err(error) => {
                tracing::debug!(%origin, %error, "dead letter");
                if let Some(route) = &self.dead_letter_route {
                    route.send(payload, origin, error.to_string(), ack);
                    return Decoded::Routed;
                }
                let dead_letter = DeadLetter::new(origin, error.to_string(), &payload);
                Decoded::DeadLetter(Completed::DeadLetter { dead_letter, ack })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{AckToken, Position};

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
        }
    }

    fn fallback_of(decoded: Decoded) -> (Option<String>, String) {
        match decoded {
            Decoded::Work(work) => (work.event.ts, work.fallback_ts),
            _ => panic!("expected an event"),
        }
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
