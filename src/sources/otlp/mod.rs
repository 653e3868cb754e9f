//! The OpenTelemetry sources: an OTLP/HTTP trace receiver (`[source] kind = "otlp"`) and OTLP
//! requests carried by another source (`[source] format = "otlp_proto" | "otlp_json"`: the
//! Collector's Kafka or file exporter), each turning every database client span of an agent's
//! trace into an event (`crate::spans`). `decode` reads the wire formats, `traces` assembles
//! the spans of a trace, `emit` makes the events' messages and counts their acknowledgements,
//! `receiver` serves `POST /v1/traces` and `messages` wraps another source.

pub mod bounds;
pub mod decode;
pub mod emit;
pub mod messages;
pub mod receiver;
pub mod traces;

pub use emit::OtlpStats;
pub use messages::{OtlpEncoding, OtlpMessages};
pub use receiver::OtlpSource;
