//! librdkafka configuration from `[source]`, shared by the consumer and every producer: the
//! defaults, the `[source.kafka_properties]` pass-through (producers get only the properties a
//! producer takes) and the forced at-least-once properties.

use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::producer::FutureProducer;

use crate::sources::SourceError;
use crate::sources::kafka::config::KafkaSourceConfig;

/// Properties sqlgrade sets itself and never lets configuration override (they carry the
/// at-least-once guarantee).
const FORCED_PROPERTIES: &[(&str, &str)] = &[
    ("enable.auto.commit", "false"),
    ("enable.auto.offset.store", "false"),
];

/// How often librdkafka reports statistics (consumer lag) unless configured otherwise.
const DEFAULT_STATISTICS_INTERVAL_MS: &str = "5000";

/// The `[source]` Kafka keys as the Kafka source uses them: topics trimmed (empty names
/// dropped), an empty dead-letter topic read as none.
pub(super) fn normalized(source: &KafkaSourceConfig) -> KafkaSourceConfig {
    KafkaSourceConfig {
        topics: source
            .topics
            .iter()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect(),
        dead_letter_topic: source
            .dead_letter_topic
            .clone()
            .filter(|t| !t.trim().is_empty()),
        ..source.clone()
    }
}

/// The librdkafka consumer configuration the Kafka source builds for `[source]` (public for the
/// source benchmark, which compares a bare consumer with the same properties).
#[doc(hidden)]
pub fn consumer_config(source: &KafkaSourceConfig) -> ClientConfig {
    normalized(source).consumer_config()
}

/// A producer with the connection and security properties of `[source]` (for the judge-work
/// topic), acknowledged by all in-sync replicas.
pub fn producer(
    source: &KafkaSourceConfig,
    client_id: &str,
) -> Result<FutureProducer, SourceError> {
    let mut cfg = source.producer_config();
    cfg.set("client.id", client_id);
    cfg.create::<FutureProducer>()
        .map_err(|source| SourceError::KafkaClient {
            what: format!("cannot create producer {client_id}"),
            source,
        })
}

/// librdkafka settings built from `[source]`.
pub(super) trait ClientConfigs {
    fn consumer_config(&self) -> ClientConfig;
    fn producer_config(&self) -> ClientConfig;
}

impl ClientConfigs for KafkaSourceConfig {
    /// librdkafka configuration for the consumer: our defaults, then the pass-through
    /// properties, then the forced at-least-once properties.
    fn consumer_config(&self) -> ClientConfig {
        let mut cfg = ClientConfig::new();
        let brokers = self.brokers.as_deref().unwrap_or_default();
        cfg.set("bootstrap.servers", brokers)
            .set("group.id", &self.group_id)
            .set("auto.offset.reset", "earliest")
            // Bound librdkafka's prefetch (the default is 64 MiB per consumer).
            .set("queued.max.messages.kbytes", "16384")
            // Statistics feed the consumer-lag gauge (0 in the properties disables them).
            .set("statistics.interval.ms", DEFAULT_STATISTICS_INTERVAL_MS)
            .set("client.id", "sqlgrade");
        for (k, v) in &self.kafka_properties {
            cfg.set(k, v);
        }
        if let Some(id) = self.group_instance_id.as_deref().map(str::trim) {
            cfg.set("group.instance.id", id);
        }
        for (k, v) in FORCED_PROPERTIES {
            if self
                .kafka_properties
                .get(*k)
                .is_some_and(|given| given != v)
            {
                tracing::warn!(
                    property = k,
                    "ignoring configured value: sqlgrade manages offsets itself"
                );
            }
            cfg.set(*k, *v);
        }
        cfg.set_log_level(RDKafkaLogLevel::Warning);
        cfg
    }

    /// librdkafka configuration for the dead-letter producer (shares connection/security
    /// properties with the consumer).
    fn producer_config(&self) -> ClientConfig {
        let mut cfg = ClientConfig::new();
        let brokers = self.brokers.as_deref().unwrap_or_default();
        cfg.set("bootstrap.servers", brokers)
            .set("client.id", "sqlgrade-dead-letters")
            .set("acks", "all")
            .set("message.timeout.ms", "30000");
        for (k, v) in &self.kafka_properties {
            if is_producer_property(k) {
                cfg.set(k, v);
            }
        }
        cfg.set_log_level(RDKafkaLogLevel::Warning);
        cfg
    }
}

/// Whether a pass-through property also applies to the producer (connection, security and
/// client-wide settings; consumer-group settings are left out so librdkafka does not warn).
fn is_producer_property(name: &str) -> bool {
    const CONSUMER_ONLY: &[&str] = &[
        "group.",
        "auto.offset.reset",
        "enable.auto.",
        "auto.commit.",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "partition.assignment.strategy",
        "queued.",
        "fetch.",
        "isolation.level",
        "check.crcs",
        "enable.partition.eof",
        "consume.callback.max.messages",
        "coordinator.query.interval.ms",
        "allow.auto.create.topics",
    ];
    !CONSUMER_ONLY.iter().any(|p| name.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forced_properties_win_and_secrets_are_redacted() {
        let mut s = KafkaSourceConfig {
            brokers: Some("127.0.0.1:9092".into()),
            ..KafkaSourceConfig::default()
        };
        s.kafka_properties
            .insert("enable.auto.commit".into(), "true".into());
        s.kafka_properties
            .insert("sasl.password".into(), "hunter2".into());
        s.kafka_properties
            .insert("security.protocol".into(), "SASL_SSL".into());
        s.kafka_properties
            .insert("session.timeout.ms".into(), "10000".into());
        let c = s.consumer_config();
        assert_eq!(
            c.get("group.instance.id"),
            None,
            "dynamic membership by default"
        );
        assert_eq!(c.get("enable.auto.commit"), Some("false"));
        assert_eq!(c.get("enable.auto.offset.store"), Some("false"));
        assert_eq!(c.get("security.protocol"), Some("SASL_SSL"));
        let p = s.producer_config();
        assert_eq!(p.get("sasl.password"), Some("hunter2"));
        assert_eq!(p.get("session.timeout.ms"), None);
        s.group_instance_id = Some(" sqlgrade-0 ".into());
        assert_eq!(
            s.consumer_config().get("group.instance.id"),
            Some("sqlgrade-0")
        );
        assert_eq!(s.producer_config().get("group.instance.id"), None);
        let shown = format!("{s:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("SASL_SSL"));
    }
}
