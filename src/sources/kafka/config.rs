//! `[source] kind = "kafka"`'s own keys ([`KafkaSourceConfig`], with `[source.poison]`): the
//! consumer group, the pass-through librdkafka properties (redacted in `Debug`), back-pressure
//! and commits — declared beside the Kafka source that uses them, read by `[source]`'s reader
//! (`sources::config`), checked by [`KafkaSourceConfig::problems`].

use std::collections::BTreeMap;
use std::fmt;
use std::num::NonZeroUsize;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize};

use crate::settings::{REDACTED, is_shown_kafka_property, string_or_list};

/// `[source] kind = "kafka"`: its own keys. Its `Debug` redacts secret-looking
/// `kafka_properties` (SASL passwords).
#[derive(Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct KafkaSourceConfig {
    /// Bootstrap servers (`host:port,host:port`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub brokers: Option<String>,
    /// Topics to consume (a list, or a comma-separated string from the environment).
    #[serde(deserialize_with = "string_or_list")]
    pub topics: Vec<String>,
    /// Consumer group.
    pub group_id: String,
    /// Static group membership (librdkafka `group.instance.id`, KIP-345): a stable name for
    /// this member (in Kubernetes, the StatefulSet pod's name). A member that restarts with
    /// the same id within the session timeout takes its own partitions back without a
    /// rebalance of the others. Unique per process: a second process with the same id fences
    /// the first (a fatal error; that process stops consuming and exits non-zero).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_instance_id: Option<String>,
    /// Topic for dead letters (when unset, dead letters go to the sink).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter_topic: Option<String>,
    /// Extra librdkafka properties passed through verbatim (`"security.protocol" = "SSL"`).
    /// Underscores in keys are read as dots, so they can be set from the environment too.
    #[serde(deserialize_with = "kafka_properties")]
    pub kafka_properties: BTreeMap<String, String>,
    /// Messages handed out and not yet written by the sink, at most (back-pressure).
    pub max_in_flight: NonZeroUsize,
    /// How often completed offsets are committed.
    pub commit_interval_ms: u64,
    /// `[source.poison]`: a message in flight at this many deaths of the process is
    /// dead-lettered instead of scored again (`sources::kafka::poison`).
    pub poison: PoisonConfig,
}

impl Default for KafkaSourceConfig {
    fn default() -> Self {
        KafkaSourceConfig {
            brokers: None,
            topics: Vec::new(),
            group_id: "sqlgrade".into(),
            group_instance_id: None,
            dead_letter_topic: None,
            kafka_properties: BTreeMap::new(),
            // Twice the ClickHouse sink's default `sink.batch_rows`, so a batch fills while the
            // one before it is written (with as many as `sink.batch_rows` in flight, the consumer
            // stopped while a 64 MiB batch was inserted, and the larger batches gained nothing:
            // CHANGELOG.md, "Batches of 64 MiB").
            max_in_flight: NonZeroUsize::new(100_000).unwrap_or(NonZeroUsize::MIN),
            commit_interval_ms: 1_000,
            poison: PoisonConfig::default(),
        }
    }
}

impl fmt::Debug for KafkaSourceConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let properties: BTreeMap<&str, &str> = self
            .kafka_properties
            .iter()
            .map(|(k, v)| {
                let shown = if is_shown_kafka_property(k) {
                    v.as_str()
                } else {
                    REDACTED
                };
                (k.as_str(), shown)
            })
            .collect();
        f.debug_struct("KafkaSourceConfig")
            .field("brokers", &self.brokers)
            .field("topics", &self.topics)
            .field("group_id", &self.group_id)
            .field("group_instance_id", &self.group_instance_id)
            .field("dead_letter_topic", &self.dead_letter_topic)
            .field("kafka_properties", &properties)
            .field("max_in_flight", &self.max_in_flight)
            .field("commit_interval_ms", &self.commit_interval_ms)
            .field("poison", &self.poison)
            .finish()
    }
}

impl KafkaSourceConfig {
    /// What is wrong with these keys (each a sentence naming the key).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.brokers.as_deref().is_none_or(|b| b.trim().is_empty()) {
            problems.push("source.brokers is required for source.kind = \"kafka\"".to_string());
        }
        if self.topics.iter().all(|t| t.trim().is_empty()) {
            problems.push(
                "source.topics must name at least one topic for source.kind = \"kafka\""
                    .to_string(),
            );
        }
        if self.group_id.trim().is_empty() {
            problems.push("source.group_id must not be empty".to_string());
        }
        if let Some(id) = &self.group_instance_id {
            if id.trim().is_empty() {
                problems.push(
                    "source.group_instance_id must not be empty when set (unset it for dynamic \
                     membership)"
                        .to_string(),
                );
            }
            if self
                .kafka_properties
                .get("group.instance.id")
                .is_some_and(|given| given != id)
            {
                problems.push(
                    "source.group_instance_id and [source.kafka_properties] \
                     \"group.instance.id\" disagree: set only one"
                        .to_string(),
                );
            }
        }
        if self.commit_interval_ms == 0 {
            problems.push("source.commit_interval_ms must be at least 1".to_string());
        }
        problems
    }
}

/// `[source.poison]`: when a message is dead-lettered for killing the process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct PoisonConfig {
    /// Deaths charged to a message after which it is dead-lettered instead of scored again (the
    /// first is the window's it was in flight in, the last one certain: it was being scored by
    /// itself); 0 turns the guard off (a poison event then stops the stream).
    pub after_deaths: u32,
    /// After a death, the window in flight is first scored one message at a time (so the next
    /// death names the message: two deaths in all); past this many milliseconds of that, the
    /// rest of the window runs at full concurrency while the guard records which messages are
    /// being scored (the next death names those few; at most one death more). About what a
    /// death costs: a restart, and the group's rebalance without static membership.
    pub serial_budget_ms: u64,
    /// Folder of the markers (one folder per consumer group inside). Unset: `sqlgrade-poison`
    /// in the system's temporary folder. In Kubernetes, a volume that outlives the container
    /// (`emptyDir`): the deployment's manifests mount one.
    pub dir: Option<PathBuf>,
}

impl Default for PoisonConfig {
    fn default() -> Self {
        PoisonConfig {
            after_deaths: 2,
            serial_budget_ms: 30_000,
            dir: None,
        }
    }
}

fn kafka_properties<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    let raw = BTreeMap::<String, String>::deserialize(d)?;
    Ok(raw
        .into_iter()
        .map(|(k, v)| (k.replace('_', "."), v))
        .collect())
}
