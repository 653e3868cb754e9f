//! The OpenTelemetry source: an OTLP/HTTP trace receiver (`[source] kind = "otlp"`) that
//! turns each database client span of an agent's trace into an event (`crate::spans`). `decode`
//! reads the wire formats, `traces` assembles the spans of a trace, `receiver` serves
//! `POST /v1/traces` as a [`crate::source::Source`].

pub mod decode;
pub mod receiver;
pub mod traces;

pub use receiver::{OtlpSource, OtlpStats};
