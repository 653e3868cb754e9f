//! The dead-letter topic: payloads that are not events, produced with their original bytes,
//! key = origin and headers saying why, where from and when; each message's offset is
//! acknowledged only once the broker confirmed the produce (retried with backoff until then).

use std::sync::Mutex;
use std::time::Duration;

use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::task::JoinSet;

use super::lock;
use crate::sources::{AckToken, DeadLetterRoute};

/// Header names on dead-letter records.
pub const HEADER_REASON: &str = "sqlgrade-reason";
/// Header with the message's origin (`kafka:<topic>/<partition>@<offset>`).
pub const HEADER_SOURCE: &str = "sqlgrade-source";
/// Header with the time the message was received (RFC 3339).
pub const HEADER_RECEIVED_AT: &str = "sqlgrade-received-at";

/// Produces dead letters to a topic (the route of the Kafka source's undecodable payloads).
pub struct DeadLetterProducer {
    producer: FutureProducer,
    topic: String,
    deliveries: Mutex<JoinSet<()>>,
}

impl DeadLetterProducer {
    /// A route to `topic` through `producer`.
    pub fn new(producer: FutureProducer, topic: String) -> DeadLetterProducer {
        DeadLetterProducer {
            producer,
            topic,
            deliveries: Mutex::new(JoinSet::new()),
        }
    }

    /// Wait up to `limit` for the deliveries still pending; `false` (and the rest abandoned,
    /// their offsets uncommitted) if they did not all finish.
    pub async fn drain(&self, limit: Duration) -> bool {
        let mut pending = std::mem::take(&mut *lock(&self.deliveries));
        let all = tokio::time::timeout(limit, async {
            while pending.join_next().await.is_some() {}
        })
        .await;
        if all.is_err() {
            pending.abort_all();
            return false;
        }
        true
    }
}

impl DeadLetterRoute for DeadLetterProducer {
    fn send(&self, payload: Vec<u8>, origin: String, reason: String, token: AckToken) {
        let (producer, topic) = (self.producer.clone(), self.topic.clone());
        let mut deliveries = lock(&self.deliveries);
        // Reap finished deliveries so the set does not grow.
        while deliveries.try_join_next().is_some() {}
        deliveries.spawn(async move {
            let received_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            let mut delay = Duration::from_millis(100);
            loop {
                let headers = OwnedHeaders::new()
                    .insert(Header { key: HEADER_REASON, value: Some(reason.as_str()) })
                    .insert(Header { key: HEADER_SOURCE, value: Some(origin.as_str()) })
                    .insert(Header { key: HEADER_RECEIVED_AT, value: Some(received_at.as_str()) });
                let record = FutureRecord::to(&topic).payload(&payload).key(&origin).headers(headers);
                match producer.send(record, Duration::from_secs(30)).await {
                    Ok(_) => {
                        tracing::debug!(%origin, %reason, "dead-lettered");
                        token.ack();
                        return;
                    }
                    Err((e, _)) => {
                        tracing::warn!(error = %e, %origin, retry_in_ms = delay.as_millis() as u64, "dead-letter produce failed; holding the offset and retrying");
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(Duration::from_secs(5));
                    }
                }
            }
        });
    }
}
