//! `[source]`: where events come from (a file, stdin, or Kafka topics through a consumer
//! group) — its keys, defaults and redaction.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize};

use crate::settings::{REDACTED, is_secret_key, string_or_list};

/// Source kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// A JSONL file (optionally tailed).
    #[default]
    File,
    /// Kafka topics through a consumer group.
    Kafka,
    /// JSONL on standard input.
    Stdin,
}

/// `[source]`. Its `Debug` redacts secret-looking `kafka_properties` (SASL passwords).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourceConfig {
    /// `file` | `kafka` | `stdin`.
    pub kind: SourceKind,
    /// JSONL file for `kind = "file"`.
    pub path: PathBuf,
    /// Keep tailing the file after EOF (like `tail -f`).
    pub follow: bool,
    /// Kafka bootstrap servers (`host:port,host:port`).
    pub brokers: Option<String>,
    /// Kafka topics to consume (a list, or a comma-separated string from the environment).
    #[serde(deserialize_with = "string_or_list")]
    pub topics: Vec<String>,
    /// Kafka consumer group.
    pub group_id: String,
    /// Kafka static group membership (librdkafka `group.instance.id`, KIP-345): a stable name
    /// for this member (in Kubernetes, the StatefulSet pod's name). A member that restarts
    /// with the same id within the session timeout takes its own partitions back without a
    /// rebalance of the others. Unique per process: a second process with the same id fences
    /// the first (a fatal error; that process stops consuming and exits non-zero).
    pub group_instance_id: Option<String>,
    /// Kafka topic for dead letters (when unset, dead letters go to the sink).
    pub dead_letter_topic: Option<String>,
    /// Extra librdkafka properties passed through verbatim (`"security.protocol" = "SSL"`).
    /// Underscores in keys are read as dots, so they can be set from the environment too.
    #[serde(deserialize_with = "kafka_properties")]
    pub kafka_properties: BTreeMap<String, String>,
    /// Kafka: messages handed out and not yet written by the sink, at most (back-pressure).
    pub max_in_flight: usize,
    /// Kafka: how often completed offsets are committed.
    pub commit_interval_ms: u64,
}

impl fmt::Debug for SourceConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let properties: BTreeMap<&str, &str> = self
            .kafka_properties
            .iter()
            .map(|(k, v)| {
                let shown = if is_secret_key(k) {
                    REDACTED
                } else {
                    v.as_str()
                };
                (k.as_str(), shown)
            })
            .collect();
        f.debug_struct("SourceConfig")
            .field("kind", &self.kind)
            .field("path", &self.path)
            .field("follow", &self.follow)
            .field("brokers", &self.brokers)
            .field("topics", &self.topics)
            .field("group_id", &self.group_id)
            .field("group_instance_id", &self.group_instance_id)
            .field("dead_letter_topic", &self.dead_letter_topic)
            .field("kafka_properties", &properties)
            .field("max_in_flight", &self.max_in_flight)
            .field("commit_interval_ms", &self.commit_interval_ms)
            .finish()
    }
}

impl Default for SourceConfig {
    fn default() -> Self {
        SourceConfig {
            kind: SourceKind::File,
            path: PathBuf::from("examples/events.jsonl"),
            follow: false,
            brokers: None,
            topics: Vec::new(),
            group_id: "sqlgrade".into(),
            group_instance_id: None,
            dead_letter_topic: None,
            kafka_properties: BTreeMap::new(),
            max_in_flight: 20_000,
            commit_interval_ms: 1_000,
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
