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
    /// An OTLP/HTTP receiver: the agents' OpenTelemetry traces (`[source.otlp]`), one event
    /// per database client span (`[source.otlp_mapping]`).
    Otlp,
}

/// What each message (Kafka) or line (file, stdin) of a source holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceFormat {
    /// One sqlgrade event (JSON).
    #[default]
    Event,
    /// One OTLP `ExportTraceServiceRequest`, protobuf (the Collector's Kafka exporter with
    /// `encoding: otlp_proto`, its default): Kafka only.
    OtlpProto,
    /// One OTLP `ExportTraceServiceRequest`, JSON (the Collector's Kafka exporter with
    /// `encoding: otlp_json`, or its file exporter, one request per line).
    OtlpJson,
}

/// `[source]`. Its `Debug` redacts secret-looking `kafka_properties` (SASL passwords).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourceConfig {
    /// `file` | `kafka` | `stdin` | `otlp`.
    pub kind: SourceKind,
    /// What the messages or lines hold: `event` | `otlp_proto` | `otlp_json` (traces,
    /// assembled and mapped as for `kind = "otlp"`, with `[source.otlp]`'s window and bounds).
    pub format: SourceFormat,
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
    /// `[source.otlp]`: the OTLP/HTTP receiver of `kind = "otlp"`.
    pub otlp: OtlpConfig,
    /// `[source.otlp_mapping]`: which span attributes hold each event field.
    pub otlp_mapping: crate::spans::SpanMapping,
}

/// `[source.otlp]`: the OTLP/HTTP trace receiver (`POST /v1/traces`, protobuf or JSON,
/// optionally gzip). A request is answered once every event its spans made is written or
/// dead-lettered (so nothing acknowledged is lost); spans of one trace are held until its root
/// span arrives or `assembly_window_ms` passes.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OtlpConfig {
    /// Address to listen on (the OTLP/HTTP port; localhost unless told otherwise).
    pub listen: String,
    /// Environment variable holding a bearer token that requests must carry
    /// (`Authorization: Bearer …`); unset = no authentication.
    pub token_env: Option<String>,
    /// Largest request body, compressed and decompressed (413 beyond).
    pub max_body_bytes: usize,
    /// How long the spans of a trace without its root span are held before its events are
    /// made from what arrived.
    pub assembly_window_ms: u64,
    /// Traces being assembled at once, at most; more are answered 503 with `Retry-After`.
    pub max_pending_traces: usize,
    /// Bytes of spans being assembled, at most (the same answer beyond).
    pub max_pending_bytes: usize,
    /// Requests being handled at once, at most; more are answered 429 with `Retry-After`.
    pub max_concurrent_requests: usize,
    /// How long a request waits for its events to be written before it is answered 503 (the
    /// exporter retries; a re-sent span is the same event).
    pub request_timeout_ms: u64,
    /// The longest a batch of rows waits for more before it is written, when shorter than
    /// `[sink] flush_interval_ms`: a request is answered once its rows are written, and an
    /// exporter sends its next request only then.
    pub batch_linger_ms: u64,
}

impl fmt::Debug for OtlpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtlpConfig")
            .field("listen", &self.listen)
            .field("token_env", &self.token_env)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("assembly_window_ms", &self.assembly_window_ms)
            .field("max_pending_traces", &self.max_pending_traces)
            .field("max_pending_bytes", &self.max_pending_bytes)
            .field("max_concurrent_requests", &self.max_concurrent_requests)
            .field("request_timeout_ms", &self.request_timeout_ms)
            .field("batch_linger_ms", &self.batch_linger_ms)
            .finish()
    }
}

impl Default for OtlpConfig {
    fn default() -> Self {
        OtlpConfig {
            listen: "127.0.0.1:4318".into(),
            token_env: None,
            max_body_bytes: 8 * 1024 * 1024,
            assembly_window_ms: 5_000,
            max_pending_traces: 10_000,
            max_pending_bytes: 64 * 1024 * 1024,
            max_concurrent_requests: 64,
            request_timeout_ms: 8_000,
            batch_linger_ms: 20,
        }
    }
}

impl OtlpConfig {
    /// What is wrong with this section alone.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.listen.parse::<std::net::SocketAddr>().is_err() {
            problems.push(format!(
                "source.otlp.listen {:?} is not an address (host:port)",
                self.listen
            ));
        }
        for (key, value) in [
            ("max_body_bytes", self.max_body_bytes as u64),
            ("assembly_window_ms", self.assembly_window_ms),
            ("max_pending_traces", self.max_pending_traces as u64),
            ("max_pending_bytes", self.max_pending_bytes as u64),
            (
                "max_concurrent_requests",
                self.max_concurrent_requests as u64,
            ),
            ("request_timeout_ms", self.request_timeout_ms),
            ("batch_linger_ms", self.batch_linger_ms),
        ] {
            if value == 0 {
                problems.push(format!("source.otlp.{key} must be at least 1"));
            }
        }
        if self
            .token_env
            .as_deref()
            .is_some_and(|e| e.trim().is_empty())
        {
            problems.push("source.otlp.token_env must not be empty when set".to_string());
        }
        problems
    }
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
            .field("format", &self.format)
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
            .field("otlp", &self.otlp)
            .field("otlp_mapping", &self.otlp_mapping)
            .finish()
    }
}

impl SourceConfig {
    /// What is wrong with this section alone (each a sentence naming the key).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        match self.kind {
            SourceKind::File if self.path.as_os_str().is_empty() => {
                problems.push("source.path is required for source.kind = \"file\"".to_string());
            }
            SourceKind::Kafka => {
                if self.brokers.as_deref().is_none_or(|b| b.trim().is_empty()) {
                    problems
                        .push("source.brokers is required for source.kind = \"kafka\"".to_string());
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
                            "source.group_instance_id must not be empty when set (unset it for \
                             dynamic membership)"
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
                if self.max_in_flight == 0 {
                    problems.push("source.max_in_flight must be at least 1".to_string());
                }
                if self.commit_interval_ms == 0 {
                    problems.push("source.commit_interval_ms must be at least 1".to_string());
                }
            }
            _ => {}
        }
        if self.kind == SourceKind::Otlp || self.format != SourceFormat::Event {
            problems.extend(self.otlp.problems());
        }
        match (self.kind, self.format) {
            (SourceKind::Otlp, SourceFormat::Event) | (SourceKind::Kafka, _) => {}
            (SourceKind::Otlp, _) => problems.push(
                "source.format applies to kafka, file and stdin sources; kind = \"otlp\" reads \
                 OTLP requests already"
                    .to_string(),
            ),
            (_, SourceFormat::OtlpProto) => problems.push(
                "source.format = \"otlp_proto\" needs source.kind = \"kafka\" (binary \
                 messages); lines of a file or stdin can be \"otlp_json\""
                    .to_string(),
            ),
            _ => {}
        }
        problems
    }
}

impl Default for SourceConfig {
    fn default() -> Self {
        SourceConfig {
            kind: SourceKind::File,
            format: SourceFormat::Event,
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
            otlp: OtlpConfig::default(),
            otlp_mapping: crate::spans::SpanMapping::default(),
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
