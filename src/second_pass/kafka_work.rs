//! The judge-work topic: [`KafkaWorkSink`] produces selected events' work (keyed by
//! `event_id`) and returns once the broker has it (a broker that is away pauses it, never ends
//! the run); [`spawn_kafka_feeder`] reads it back into the
//! judge stage's queue, committing each message once its work is judged or shed.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::sync::Notify;

use crate::second_pass::work::{JudgeWork, WorkError, WorkQueue, WorkSink};
use crate::sources::Source;
use crate::telemetry::health::{ComponentHealth, Health};

/// The durable hand-over: work is produced to the Kafka work topic (keyed by `event_id`, so one
/// event's work stays in one partition), and `submit` returns once the broker has it.
///
/// A broker that is away is a pause, not an error: a record the broker did not take is produced
/// again after a jittered backoff (100 ms doubling to [`MAX_RETRY_DELAY`]) until it is, while
/// health says `judge_work: degraded` with the cause. The writer waits meanwhile, so offsets stay
/// unacknowledged and the pipeline back-pressures; a shutdown abandons the wait (the daemon's
/// deadline) and the events are redelivered. Only faults that waiting cannot cure end the run
/// ([`is_fatal`]: authentication, authorization, a topic the cluster does not have, a record
/// too large, a fatal producer state).
pub struct KafkaWorkSink {
    producer: FutureProducer,
    topic: String,
    stop_feeder: Arc<Notify>,
    health: Option<Arc<Health>>,
}

/// Longest pause between two attempts to produce a work record.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(5);

/// The health component of the work hand-over.
pub const HEALTH_COMPONENT: &str = "judge_work";

impl KafkaWorkSink {
    /// A producer to `topic`; closing the hand-over stops the feeder (`stop_feeder`); `health`
    /// hears about outages.
    pub fn new(
        producer: FutureProducer,
        topic: &str,
        stop_feeder: Arc<Notify>,
        health: Option<Arc<Health>>,
    ) -> KafkaWorkSink {
        KafkaWorkSink {
            producer,
            topic: topic.to_string(),
            stop_feeder,
            health,
        }
    }

    fn error(&self, error: &KafkaError) -> WorkError {
        WorkError::Produce {
            topic: self.topic.clone(),
            message: error.to_string(),
        }
    }

    /// Produce one record until the broker has it (or a fatal error).
    async fn produce(&self, key: &str, payload: &[u8]) -> Result<(), WorkError> {
        let mut delay = Duration::from_millis(100);
        let mut failures = 0u64;
        loop {
            let record = FutureRecord::to(&self.topic).key(key).payload(payload);
            let error = match self.producer.send_result(record) {
                Ok(delivery) => match delivery.await {
                    Ok(Ok(_)) => {
                        if failures > 0 {
                            tracing::info!(topic = %self.topic, failures, "judge work: the broker takes work again");
                            if let Some(health) = &self.health {
                                health.set(HEALTH_COMPONENT, ComponentHealth::Ok);
                            }
                        }
                        return Ok(());
                    }
                    Ok(Err((error, _))) => error,
                    // The producer was dropped under the delivery: the run is ending.
                    Err(_) => {
                        return Err(WorkError::Produce {
                            topic: self.topic.clone(),
                            message: "the producer was dropped".into(),
                        });
                    }
                },
                Err((error, _)) => error,
            };
            if is_fatal(&error) {
                return Err(self.error(&error));
            }
            failures += 1;
            tracing::warn!(topic = %self.topic, %error, failures, retry_in_ms = delay.as_millis() as u64,
                "judge work: the broker did not take the work; holding the offsets and retrying");
            if let Some(health) = &self.health {
                health.set(
                    HEALTH_COMPONENT,
                    ComponentHealth::Degraded(format!("cannot produce to {}: {error}", self.topic)),
                );
            }
            // Jitter: between half and all of the delay, so producers that failed together do
            // not retry together.
            let jittered = delay.mul_f64(0.5 + rand::random::<f64>() * 0.5);
            tokio::time::sleep(jittered).await;
            delay = (delay * 2).min(MAX_RETRY_DELAY);
        }
    }
}

/// Whether a produce error is one waiting cannot cure: it ends the run with its message.
pub fn is_fatal(error: &KafkaError) -> bool {
    let code = match error {
        KafkaError::MessageProduction(code) => *code,
        KafkaError::ClientCreation(_) | KafkaError::ClientConfig(..) => return true,
        other => match other.rdkafka_error_code() {
            Some(code) => code,
            None => return false,
        },
    };
    matches!(
        code,
        RDKafkaErrorCode::Fatal
            | RDKafkaErrorCode::Authentication
            | RDKafkaErrorCode::SaslAuthenticationFailed
            | RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed
            | RDKafkaErrorCode::UnknownTopic
            | RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::InvalidConfig
    )
}

#[async_trait]
impl WorkSink for KafkaWorkSink {
    async fn submit(&self, work: Vec<JudgeWork>) -> Result<(), WorkError> {
        let mut encoded = Vec::with_capacity(work.len());
        for w in &work {
            encoded.push(serde_json::to_vec(w).map_err(WorkError::Encode)?);
        }
        // All records in flight at once; each retried on its own until the broker has it.
        let deliveries = work
            .iter()
            .zip(&encoded)
            .map(|(w, payload)| self.produce(&w.event.event_id, payload));
        for outcome in futures::future::join_all(deliveries).await {
            outcome?;
        }
        Ok(())
    }

    fn close(&self) {
        // The line-rate pass is done (the daemon stops): stop reading work; what is not judged
        // stays in the topic for the next start.
        self.stop_feeder.notify_one();
    }
}

/// Read the Kafka work topic into `queue` until `stop` is notified (or the source ends). Each
/// message's offset is committed once its work is judged or shed; undecodable messages are
/// acknowledged and logged (they were produced by sqlgrade; a newer release's format must not
/// wedge the consumer).
pub fn spawn_kafka_feeder(
    mut source: Box<dyn Source>,
    queue: Arc<WorkQueue>,
    stop: Arc<Notify>,
) -> tokio::task::JoinHandle<Box<dyn Source>> {
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                biased;
                () = stop.notified() => break,
                next = source.next() => next,
            };
            match next {
                Ok(Some(message)) => match serde_json::from_slice::<JudgeWork>(&message.payload) {
                    Ok(work) => queue.push(work, message.ack).await,
                    Err(error) => {
                        tracing::error!(origin = %message.origin, %error, "undecodable judge work; skipping it");
                        message.ack.ack();
                    }
                },
                Ok(None) => break,
                Err(error) => {
                    tracing::error!(%error, "judge work consumer failed; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
        source.stop();
        queue.close();
        source
    })
}
