//! Pipeline topology: sources → decode/validate → scorer pool → batcher → sinks (DESIGN.md).
//!
//! Back-pressure is structural (bounded channels). A message is acknowledged to its source
//! ([`AckToken::ack`]) only after the sink has durably written everything it produced (its rows or
//! its dead letter), so a Kafka offset is never committed ahead of the data.

pub mod ack;
pub mod offsets;

pub use ack::{AckToken, Acknowledge, Position};
