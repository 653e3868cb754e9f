//! Sources of raw event payloads (file/stdin, Kafka).

pub mod kafka;

use async_trait::async_trait;

use crate::pipeline::AckToken;

/// One raw payload read from a source, not yet decoded.
#[derive(Debug)]
pub struct SourceMessage {
    /// The original bytes.
    pub payload: Vec<u8>,
    /// Human-readable origin for dead letters (`file:events.jsonl:17`, `kafka:agents/2@991`).
    pub origin: String,
    /// Acknowledge once the sink has this message's output.
    pub ack: AckToken,
}

/// Why a source failed (fatal for the run; transient errors are retried inside the source).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// I/O on a file or stdin.
    #[error("source I/O error on {what}: {source}")]
    Io {
        /// What was being read.
        what: String,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Kafka client error.
    #[error("kafka error: {0}")]
    Kafka(String),
}

/// A stream of raw payloads. `Ok(None)` means the source is exhausted (EOF without `follow`)
/// or was asked to stop.
#[async_trait]
pub trait Source: Send {
    /// Next payload.
    async fn next(&mut self) -> Result<Option<SourceMessage>, SourceError>;

    /// Stop handing out messages (graceful shutdown); already-read messages still flow.
    fn stop(&mut self) {}

    /// Called after the pipeline drained: commit whatever is acknowledged.
    async fn finish(&mut self) -> Result<(), SourceError> {
        Ok(())
    }
}
