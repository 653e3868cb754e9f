//! Acknowledgements from the sink side back to the source (offset tracking).

use std::sync::Arc;

/// Where a message sits in its source (Kafka partition/offset, file line).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Position {
    /// Kafka topic or file path: shared by every position of that stream (a source hands out
    /// clones of one name, not a new string per message).
    pub stream: Arc<str>,
    /// Kafka partition (0 for files).
    pub partition: i32,
    /// Kafka offset or line number.
    pub offset: i64,
}

/// Receives acknowledgements for completed positions (e.g. a per-partition offset tracker).
pub trait Acknowledge: Send + Sync {
    /// Mark `position` as fully written by the sink.
    fn ack(&self, position: &Position);

    /// Mark every position of a stored batch, in order: the pipeline calls this once per batch
    /// (per run of tokens with this target), so a target that locks, counts or wakes waiters
    /// does it once per batch rather than once per message. The default acknowledges them one
    /// by one.
    fn ack_all(&self, positions: &[&Position]) {
        for position in positions {
            self.ack(position);
        }
    }

    /// The pipeline starts decoding and scoring `position`. Nothing by default; the Kafka
    /// source's poison-event guard records it while recovering from a death.
    fn scoring(&self, _position: &Position) {}

    /// The pipeline is done working on `position`: scored (its rows on their way to the sink)
    /// or dead-lettered. Nothing by default; the Kafka source's poison-event guard hands out
    /// the next message of a serial pass on it.
    fn scored(&self, _position: &Position) {}
}

/// Acknowledge every token of a stored batch, in order: each run of consecutive tokens with the
/// same target (with one source, the whole batch) goes to that target in one
/// [`Acknowledge::ack_all`] call. Untracked tokens are skipped.
pub fn ack_all(tokens: Vec<AckToken>) {
    let mut run: Vec<&Position> = Vec::new();
    let mut current: Option<&Arc<dyn Acknowledge>> = None;
    for token in &tokens {
        let Some(target) = &token.target else {
            continue;
        };
        if let Some(previous) = current
            && !Arc::ptr_eq(previous, target)
        {
            previous.ack_all(&run);
            run.clear();
        }
        current = Some(target);
        run.push(&token.position);
    }
    if let Some(target) = current {
        target.ack_all(&run);
    }
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

    /// Tell the source the pipeline starts decoding and scoring the message.
    pub fn scoring(&self) {
        if let Some(t) = &self.target {
            t.scoring(&self.position);
        }
    }

    /// Tell the source the pipeline is done working on the message (scored or dead-lettered);
    /// its acknowledgement follows once the sink has it ([`Acknowledge::scored`]).
    pub fn scored(&self) {
        if let Some(t) = &self.target {
            t.scored(&self.position);
        }
    }

    /// Acknowledge: the sink has durably written everything this message produced.
    pub fn ack(self) {
        if let Some(t) = &self.target {
            t.ack(&self.position);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Records each `ack_all` call's offsets.
    #[derive(Default)]
    struct Calls(Mutex<Vec<Vec<i64>>>);

    impl Acknowledge for Calls {
        fn ack(&self, position: &Position) {
            self.ack_all(&[position]);
        }

        fn ack_all(&self, positions: &[&Position]) {
            let offsets = positions.iter().map(|p| p.offset).collect();
            self.0.lock().unwrap().push(offsets);
        }
    }

    fn at(offset: i64) -> Position {
        Position {
            stream: "t".into(),
            partition: 0,
            offset,
        }
    }

    #[test]
    fn a_batch_is_acknowledged_once_per_run_of_one_target_in_order() {
        let a = Arc::new(Calls::default());
        let b = Arc::new(Calls::default());
        let to = |target: &Arc<Calls>, offset| {
            AckToken::new(at(offset), target.clone() as Arc<dyn Acknowledge>)
        };
        ack_all(vec![
            to(&a, 1),
            to(&a, 2),
            AckToken::untracked(at(3)),
            to(&a, 4),
            to(&b, 5),
            to(&b, 6),
            to(&a, 7),
        ]);
        assert_eq!(*a.0.lock().unwrap(), vec![vec![1, 2, 4], vec![7]]);
        assert_eq!(*b.0.lock().unwrap(), vec![vec![5, 6]]);
        // Nothing to acknowledge: no call.
        ack_all(vec![AckToken::untracked(at(8))]);
        ack_all(Vec::new());
        assert_eq!(a.0.lock().unwrap().len(), 2);
    }
}
