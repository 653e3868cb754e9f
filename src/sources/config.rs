//! `[source]`: where events come from (a file, stdin, Kafka topics through a consumer group, or
//! an OTLP/HTTP receiver) — its keys, defaults and redaction.
//!
//! Each kind's keys are a derived struct beside the source that uses them, with its defaults and
//! `problems()` ([`FileSourceConfig`] in `sources::file`, [`KafkaSourceConfig`] in
//! `sources::kafka::config`); the keys every kind shares (`format`, `[source.otlp]`,
//! `[source.otlp_mapping]`) are here. The section is read by
//! [`WrittenSection`](crate::settings::WrittenSection), which drops another kind's keys
//! with a warning and refuses unknown ones, and written back by the derive.

use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize};

use crate::settings::{ReadSection, SectionError, WrittenSection};
pub use crate::sources::file::FileSourceConfig;
pub use crate::sources::kafka::config::{KafkaSourceConfig, PoisonConfig};

/// Where events come from, with what only that kind needs.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SourceKind {
    /// A JSONL file (optionally tailed).
    File(FileSourceConfig),
    /// Kafka topics through a consumer group.
    Kafka(KafkaSourceConfig),
    /// JSONL on standard input.
    Stdin,
    /// An OTLP/HTTP receiver: the agents' OpenTelemetry traces (`[source.otlp]`), one event
    /// per database client span (`[source.otlp_mapping]`).
    Otlp,
}

impl Default for SourceKind {
    fn default() -> Self {
        SourceKind::File(FileSourceConfig::default())
    }
}

impl SourceKind {
    /// A file source reading `path` once (not tailed).
    pub fn file(path: impl Into<PathBuf>) -> SourceKind {
        SourceKind::File(FileSourceConfig {
            path: path.into(),
            follow: false,
        })
    }
}

crate::kinded_settings!(SourceKind {
    File(FileSourceConfig) = "file",
    Kafka(KafkaSourceConfig) = "kafka",
    Stdin = "stdin",
    Otlp = "otlp",
});

/// What each message (Kafka) or line (file, stdin) of a source holds.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
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

/// `[source]`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
// Every key has a default (what the schema says; reading is `ReadSection`'s).
#[serde(default)]
pub struct SourceConfig {
    /// `file` | `kafka` | `stdin` | `otlp`, with that kind's keys.
    #[serde(flatten)]
    pub kind: SourceKind,
    /// What the messages or lines hold: `event` | `otlp_proto` | `otlp_json` (traces,
    /// assembled and mapped as for `kind = "otlp"`, with `[source.otlp]`'s window and bounds).
    pub format: SourceFormat,
    /// `[source.otlp]`: the OTLP/HTTP receiver of `kind = "otlp"`, and the trace assembly's
    /// window and bounds of every OTLP format.
    pub otlp: OtlpConfig,
    /// `[source.otlp_mapping]`: which span attributes hold each event field.
    pub otlp_mapping: crate::spans::SpanMapping,
}

impl SourceConfig {
    /// The Kafka settings, when the source is Kafka.
    pub fn kafka(&self) -> Option<&KafkaSourceConfig> {
        match &self.kind {
            SourceKind::Kafka(kafka) => Some(kafka),
            _ => None,
        }
    }

    /// The file settings, when the source is a file.
    pub fn file(&self) -> Option<&FileSourceConfig> {
        match &self.kind {
            SourceKind::File(file) => Some(file),
            _ => None,
        }
    }
}

/// `[source.otlp]`: the OTLP/HTTP trace receiver (`POST /v1/traces`, protobuf or JSON,
/// optionally gzip). A request is answered once every event its spans made is written or
/// dead-lettered (so nothing acknowledged is lost); spans of one trace are held until its root
/// span arrives or `assembly_window_ms` passes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// Requests being handled at once, at most; more are answered 429 with `Retry-After`. Each
    /// holds up to `max_body_bytes` of body.
    pub max_concurrent_requests: usize,
    /// Spans in one request, at most (counted before decoding; 413 beyond).
    pub max_spans_per_request: usize,
    /// Attributes in one request (resources', scopes', spans', events', links'), at most
    /// (counted before decoding; 413 beyond).
    pub max_attributes_per_request: usize,
    /// How long a request waits for its events to be written before it is answered 503 (the
    /// exporter retries; a re-sent span is the same event).
    pub request_timeout_ms: u64,
    /// The longest a batch of rows waits for more before it is written, when shorter than
    /// `[sink] flush_interval_ms`: a request is answered once its rows are written, and an
    /// exporter sends its next request only then.
    pub batch_linger_ms: u64,
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
            max_concurrent_requests: 16,
            max_spans_per_request: 20_000,
            max_attributes_per_request: 400_000,
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
            ("max_spans_per_request", self.max_spans_per_request as u64),
            (
                "max_attributes_per_request",
                self.max_attributes_per_request as u64,
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

impl SourceConfig {
    /// What is wrong with this section alone (each a sentence naming the key).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = match &self.kind {
            SourceKind::File(file) => file.problems(),
            SourceKind::Kafka(kafka) => kafka.problems(),
            _ => Vec::new(),
        };
        if self.kind == SourceKind::Otlp || self.format != SourceFormat::Event {
            problems.extend(self.otlp.problems());
        }
        match (&self.kind, self.format) {
            (SourceKind::Otlp, SourceFormat::Event) | (SourceKind::Kafka(_), _) => {}
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
            kind: SourceKind::default(),
            format: SourceFormat::Event,
            otlp: OtlpConfig::default(),
            otlp_mapping: crate::spans::SpanMapping::default(),
        }
    }
}

/// `[source]`'s keys every kind shares.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
struct SharedSourceKeys {
    format: SourceFormat,
    otlp: OtlpConfig,
    otlp_mapping: crate::spans::SpanMapping,
}

impl Default for SharedSourceKeys {
    fn default() -> Self {
        let SourceConfig {
            format,
            otlp,
            otlp_mapping,
            ..
        } = SourceConfig::default();
        SharedSourceKeys {
            format,
            otlp,
            otlp_mapping,
        }
    }
}

impl ReadSection for SourceConfig {
    const SECTION: &'static str = "source";

    /// The chosen kind's keys and the shared ones.
    fn read_parts(written: &mut WrittenSection) -> Result<Self, SectionError> {
        let kind = written.kind()?;
        let shared: SharedSourceKeys = written.part()?;
        Ok(SourceConfig {
            kind,
            format: shared.format,
            otlp: shared.otlp,
            otlp_mapping: shared.otlp_mapping,
        })
    }
}

impl<'de> Deserialize<'de> for SourceConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        SourceConfig::deserialize_section(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn read(text: &str) -> SourceConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn each_kind_takes_its_own_keys() {
        assert_eq!(read("").kind, SourceKind::file("examples/events.jsonl"));
        let file = read("path = \"in.jsonl\"\nfollow = true");
        assert_eq!(
            file.file(),
            Some(&FileSourceConfig {
                path: "in.jsonl".into(),
                follow: true
            })
        );
        let kafka = read(
            "kind = \"kafka\"\nbrokers = \"k:9092\"\ntopics = \"a, b\"\n[kafka_properties]\nsasl_mechanism = \"PLAIN\"",
        );
        let settings = kafka.kafka().expect("kafka");
        assert_eq!(settings.topics, ["a", "b"]);
        assert_eq!(settings.group_id, "sqlgrade");
        assert_eq!(
            settings
                .kafka_properties
                .get("sasl.mechanism")
                .map(String::as_str),
            Some("PLAIN")
        );
        assert!(kafka.problems().is_empty(), "{:?}", kafka.problems());
        assert!(toml::from_str::<SourceConfig>("kind = \"file\"\nnope = 1").is_err());
    }

    #[test]
    fn another_kinds_keys_are_dropped() {
        // A file's keys left in place while the kind says Kafka, and the other way round.
        let kafka = read(
            "kind = \"kafka\"\nbrokers = \"k:9092\"\ntopics = [\"t\"]\npath = \"x\"\nfollow = true",
        );
        assert!(kafka.file().is_none() && kafka.kafka().is_some());
        let file = read("kind = \"file\"\npath = \"x\"\nbrokers = \"k:9092\"\ngroup_id = \"g\"");
        assert_eq!(file.kind, SourceKind::file("x"));
        for kind in ["stdin", "otlp"] {
            let source = read(&format!(
                "kind = \"{kind}\"\npath = \"x\"\ntopics = [\"t\"]"
            ));
            assert_eq!(source.kind.kind_name(), kind);
        }
    }

    #[test]
    fn written_and_read_back_unchanged() {
        let kafka = KafkaSourceConfig {
            brokers: Some("k:9092".into()),
            topics: vec!["t".into()],
            group_instance_id: Some("pod-0".into()),
            kafka_properties: BTreeMap::from([("security.protocol".into(), "SSL".into())]),
            ..KafkaSourceConfig::default()
        };
        for kind in [
            SourceKind::Kafka(kafka),
            SourceKind::file("a/b.jsonl"),
            SourceKind::Stdin,
            SourceKind::Otlp,
        ] {
            let source = SourceConfig {
                kind,
                format: SourceFormat::OtlpJson,
                ..SourceConfig::default()
            };
            let text = toml::to_string(&source).unwrap();
            assert_eq!(read(&text), source, "{text}");
        }
    }

    #[test]
    fn kafka_problems_name_the_key() {
        let source = SourceConfig {
            kind: SourceKind::Kafka(KafkaSourceConfig {
                group_instance_id: Some(" ".into()),
                ..KafkaSourceConfig::default()
            }),
            ..SourceConfig::default()
        };
        let problems = source.problems().join("\n");
        for key in [
            "source.brokers",
            "source.topics",
            "source.group_instance_id",
        ] {
            assert!(problems.contains(key), "{key}: {problems}");
        }
        // 0 in flight is no setting at all: refused as it is read, naming the key.
        let zero = toml::from_str::<SourceConfig>(
            "kind = \"kafka\"\nbrokers = \"b:9092\"\ntopics = [\"t\"]\nmax_in_flight = 0",
        )
        .unwrap_err()
        .to_string();
        assert!(
            zero.contains("max_in_flight") && zero.contains("nonzero"),
            "{zero}"
        );
        let otlp_proto_file = SourceConfig {
            format: SourceFormat::OtlpProto,
            ..SourceConfig::default()
        };
        assert!(otlp_proto_file.problems()[0].contains("otlp_proto"));
    }
}
