//! Everything Kafka, in one place (as Vector keeps its one Kafka module): the librdkafka
//! configuration built from `[source]` ([`client`]), the consumer-group source
//! ([`consumer`], committing only what the sink has, [`offsets`]), consumer lag ([`lag`]), the
//! dead-letter producer ([`dead_letter`]), the poison-event guard that stops a crash loop on one
//! message ([`poison`]) and the judge-work topic ([`work`]).

pub mod client;
pub mod config;
pub mod consumer;
pub mod dead_letter;
pub mod lag;
pub mod offsets;
pub mod poison;

pub use client::producer;
pub use consumer::{KafkaSource, StopSignal};
pub use dead_letter::{DeadLetterProducer, HEADER_REASON, HEADER_RECEIVED_AT, HEADER_SOURCE};
pub use lag::PartitionLag;

/// Lock a mutex, recovering the data of a poisoned one (plain maps, always consistent).
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
