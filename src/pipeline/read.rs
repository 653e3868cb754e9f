//! The source stage (reading payloads under back-pressure) and the decode stage — the one place
//! a payload becomes an event or a dead letter.

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
            Ok(Some(message)) => {
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

/// The one place a payload becomes an event or a dead letter: the dead letter goes to the
/// source's own route when it has one (the Kafka dead-letter topic), else to the sink.
pub(super) async fn decode_stage(
    mut raw_rx: mpsc::Receiver<SourceMessage>,
    work_tx: mpsc::Sender<Work>,
    done_tx: mpsc::Sender<Completed>,
    max_event_bytes: usize,
    transform: Option<EventTransform>,
    dead_letter_route: Option<Arc<dyn crate::source::DeadLetterRoute>>,
) {
    loop {
        let message = tokio::select! {
            biased;
            () = work_tx.closed() => return,
            () = done_tx.closed() => return,
            message = raw_rx.recv() => match message {
                Some(message) => message,
                None => return,
            },
        };
        let SourceMessage {
            payload,
            origin,
            ack,
            source_time,
        } = message;
        // The event time of an event without `ts`: the source's own time of the message (stable
        // across redelivery), else the receive time.
        let fallback_ts = source_time.unwrap_or_else(now_rfc3339);
        match Event::decode_with_limit(&payload, max_event_bytes) {
            Ok(mut event) => {
                if let Some(transform) = &transform {
                    transform(&mut event);
                }
                let work = Work {
                    event,
                    fallback_ts,
                    origin,
                    payload,
                    ack,
                };
                if work_tx.send(work).await.is_err() {
                    return;
                }
            }
            Err(error) => {
                tracing::debug!(%origin, %error, "dead letter");
                if let Some(route) = &dead_letter_route {
                    route.send(payload, origin, error.to_string(), ack);
                    continue;
                }
                let dead_letter = DeadLetter::new(origin, error.to_string(), &payload);
                if done_tx
                    .send(Completed::DeadLetter { dead_letter, ack })
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}
