//! The source stage (reading payloads under back-pressure) and the [`Decoder`] — the one place
//! a payload becomes an event or a dead letter, run by the scoring tasks.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::types::*;
use crate::evaluation::DeadLetter;
use crate::event::Event;
use crate::score::now_rfc3339;
use crate::source::{Source, SourceMessage};

pub(super) async fn source_stage(
    mut source: Box<dyn Source>,
    raw_tx: mpsc::Sender<SourceMessage>,
    mut shutdown: watch::Receiver<bool>,
    metrics: Option<crate::telemetry::PipelineMetrics>,
) -> SourceOutcome {
    let mut last_error = Ok(());
    let mut clock = ReceiveClock::default();
    // Whether anyone can still ask for shutdown (the sender may be dropped).
    let mut watching = true;
    loop {
        if watching && *shutdown.borrow() {
            tracing::info!("shutdown requested; stopping the source and draining");
            source.stop();
            break;
        }
        let next = tokio::select! {
            biased;
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
            next = source.next() => next,
        };
        match next {
            Ok(Some(mut message)) => {
                // The event time of an event without `ts` and without a source time: when the
                // pipeline received it (not when a scoring task got to it).
                if message.source_time.is_none() {
                    message.source_time = Some(clock.now());
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

/// The receive time as rows carry it (RFC 3339, milliseconds), formatted once per millisecond:
/// the source stage stamps every message without a source time, so it must stay cheap.
#[derive(Default)]
struct ReceiveClock {
    millis: i64,
    text: String,
}

impl ReceiveClock {
    fn now(&mut self) -> String {
        let now = chrono::Utc::now();
        let millis = now.timestamp_millis();
        if millis != self.millis || self.text.is_empty() {
            self.millis = millis;
            self.text = now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        }
        self.text.clone()
    }
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
                // (stable across redelivery), else the receive time (stamped by the source stage).
                let fallback_ts = source_time.unwrap_or_else(now_rfc3339);
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

    #[test]
    fn the_receive_clock_writes_what_rows_carry() {
        let mut clock = ReceiveClock::default();
        let stamp = clock.now();
        assert!(
            chrono::DateTime::parse_from_rfc3339(&stamp).is_ok() && stamp.ends_with('Z'),
            "{stamp}"
        );
        assert_eq!(
            stamp.len(),
            now_rfc3339().len(),
            "milliseconds, like now_rfc3339"
        );
        assert!(clock.now() >= stamp, "never goes back");
    }
}
