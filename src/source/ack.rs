//! Acknowledgements from the sink side back to the source (offset tracking).

use std::sync::Arc;

/// Where a message sits in its source (Kafka partition/offset, file line).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Position {
    /// Kafka topic or file path.
    pub stream: String,
    /// Kafka partition (0 for files).
    pub partition: i32,
    /// Kafka offset or line number.
    pub offset: i64,
}

/// Receives acknowledgements for completed positions (e.g. a per-partition offset tracker).
pub trait Acknowledge: Send + Sync {
    /// Mark `position` as fully written by the sink.
    fn ack(&self, position: &Position);
}

/// Travels with a message through the pipeline; acknowledged once the sink has its output.
pub struct AckToken {
    position: Position,
    target: Option<Arc<dyn Acknowledge>>,
}

impl std::fmt::Debug for AckToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AckToken")
            .field("position", &self.position)
            .field("tracked", &self.target.is_some())
            .finish()
    }
}

impl AckToken {
    /// A token that reports to `target` when acknowledged.
    pub fn new(position: Position, target: Arc<dyn Acknowledge>) -> AckToken {
        AckToken {
            position,
            target: Some(target),
        }
    }

    /// A token nobody waits for (stdin, `score`, tests).
    pub fn untracked(position: Position) -> AckToken {
        AckToken {
            position,
            target: None,
        }
    }

    /// The message's position.
    pub fn position(&self) -> &Position {
        &self.position
    }

    /// Acknowledge: the sink has durably written everything this message produced.
    pub fn ack(self) {
        if let Some(t) = &self.target {
            t.ack(&self.position);
        }
    }
}
