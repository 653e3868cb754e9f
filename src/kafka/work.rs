//! The judge-work topic: [`KafkaWorkSink`] produces selected events' work (keyed by
//! `event_id`) and returns once the broker has it; [`spawn_kafka_feeder`] reads it back into the
//! judge stage's queue, committing each message once its work is judged or shed.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::sync::Notify;

use crate::judging::work::{JudgeWork, WorkError, WorkQueue, WorkSink};
use crate::source::Source;

/// The durable hand-over: work is produced to the Kafka work topic (keyed by `event_id`, so one
/// event's work stays in one partition), and `submit` returns once the broker has it.
pub struct KafkaWorkSink {
    producer: FutureProducer,
    topic: String,
    stop_feeder: Arc<Notify>,
}

impl KafkaWorkSink {
    /// A producer to `topic`; closing the hand-over stops the feeder (`stop_feeder`).
    pub fn new(producer: FutureProducer, topic: &str, stop_feeder: Arc<Notify>) -> KafkaWorkSink {
        KafkaWorkSink {
            producer,
            topic: topic.to_string(),
            stop_feeder,
        }
    }
}

#[async_trait]
impl WorkSink for KafkaWorkSink {
    async fn submit(&self, work: Vec<JudgeWork>) -> Result<(), WorkError> {
        let mut deliveries = Vec::with_capacity(work.len());
        for w in &work {
            let payload = serde_json::to_vec(w).map_err(WorkError::Encode)?;
            let record = FutureRecord::to(&self.topic)
                .key(&w.event.event_id)
                .payload(&payload);
            let delivery =
                self.producer
                    .send_result(record)
                    .map_err(|(e, _)| WorkError::Produce {
                        topic: self.topic.clone(),
                        message: e.to_string(),
                    })?;
            deliveries.push(delivery);
        }
        for delivery in deliveries {
            match delivery.await {
                Ok(Ok(_)) => {}
                Ok(Err((e, _))) => {
                    return Err(WorkError::Produce {
                        topic: self.topic.clone(),
                        message: e.to_string(),
                    });
                }
                Err(_) => {
                    return Err(WorkError::Produce {
                        topic: self.topic.clone(),
                        message: "the producer was dropped".into(),
                    });
                }
            }
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
