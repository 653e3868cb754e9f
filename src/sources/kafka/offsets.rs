//! Per-partition offset tracking for at-least-once consumption.
//!
//! Scoring finishes out of order, but a Kafka commit says "everything before this offset is
//! done". [`OffsetTracker`] records every offset handed to the pipeline and every offset the
//! sink acknowledged, and reports per partition the *committable* offset: the lowest offset still
//! in flight, or one past the highest handed-out offset when nothing is in flight. Offsets need not
//! be contiguous integers (compaction and transaction markers leave gaps): only offsets that were
//! actually handed out are waited for.
//!
//! Partitions are assigned and revoked as the consumer group rebalances. Acknowledgements for a
//! partition this process no longer owns are ignored (its new owner re-reads from the last commit),
//! so nothing is ever committed on another member's behalf.
//!
//! Every message crosses the tracker twice: registered by the source task, acknowledged after
//! the sink stored its batch. Registration looks its partition up by the topic's `&str` (no
//! allocation per message); acknowledgements arrive a batch at a time
//! ([`Acknowledge::ack_all`]), so the lock, the in-flight count and the wake-up of a source
//! waiting for room are taken once per batch, not once per message.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

use crate::sources::{Acknowledge, Position};

/// Keys are the topics and partitions the broker assigned (not event data), so the fast,
/// non-keyed Fx hash is safe here; a message's lookup hashes a short name and an integer.
type Partitions = FxHashMap<String, FxHashMap<i32, PartitionState>>;

/// A commit to make: `offset` is the next offset to read (Kafka commit semantics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitPosition {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Next offset to consume; everything below it is durably written.
    pub offset: i64,
}

#[derive(Debug, Default)]
struct PartitionState {
    /// Handed out, not yet acknowledged.
    in_flight: BTreeSet<i64>,
    /// Highest offset ever handed out in this assignment.
    highest_registered: Option<i64>,
    /// Offset last reported as committed.
    committed: Option<i64>,
}

impl PartitionState {
    fn committable(&self) -> Option<i64> {
        match self.in_flight.first() {
            // Nothing below the lowest pending offset is outstanding.
            Some(&lowest) => Some(lowest),
            None => self.highest_registered.map(|h| h.saturating_add(1)),
        }
    }
}

/// Tracks in-flight and completed offsets per partition; the Kafka source's [`Acknowledge`]
/// target. Thread-safe; acknowledgements arrive from the sink task.
#[derive(Debug, Default)]
pub struct OffsetTracker {
    /// Topic → partition → state (nested, so a lookup borrows the topic's name).
    partitions: Mutex<Partitions>,
    in_flight: AtomicUsize,
    acked: Notify,
    /// The poison-event guard told when a message is scored or stored (set once, by the
    /// source that owns both).
    poison: std::sync::OnceLock<std::sync::Arc<super::poison::PoisonGuard>>,
}

impl OffsetTracker {
    /// An empty tracker (no partitions assigned).
    pub fn new() -> OffsetTracker {
        OffsetTracker::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Partitions> {
        // A panic while holding the lock cannot leave the map half-updated in a way that matters
        // more than losing the process; keep going with the data as it is.
        self.partitions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The consumer group assigned these partitions to this process: start tracking them afresh.
    pub fn assign<'a>(&self, partitions: impl IntoIterator<Item = (&'a str, i32)>) {
        let mut map = self.lock();
        for (topic, partition) in partitions {
            map.entry(topic.to_string())
                .or_default()
                .insert(partition, PartitionState::default());
        }
    }

    /// The consumer group took these partitions away: stop tracking them and return what can
    /// still be committed for them (commit it before the revocation completes). Later
    /// acknowledgements for these partitions are ignored.
    pub fn revoke<'a>(
        &self,
        partitions: impl IntoIterator<Item = (&'a str, i32)>,
    ) -> Vec<CommitPosition> {
        let mut map = self.lock();
        let mut out = Vec::new();
        for (topic, partition) in partitions {
            let Some(assigned) = map.get_mut(topic) else {
                continue;
            };
            let state = assigned.remove(&partition);
            if assigned.is_empty() {
                map.remove(topic);
            }
            if let Some(state) = state
                && let Some(offset) = state.committable()
                && state.committed != Some(offset)
            {
                out.push(CommitPosition {
                    topic: topic.to_string(),
                    partition,
                    offset,
                });
            }
        }
        out
    }

    /// Record that the message at `offset` is being handed to the pipeline (one [`AckToken`]
    /// will acknowledge it). Returns `false`, tracking nothing, when the partition is not
    /// assigned to this process (a message fetched before a revocation): drop such a message,
    /// its partition's new owner reads it again.
    ///
    /// [`AckToken`]: super::ack::AckToken
    pub fn register(&self, topic: &str, partition: i32, offset: i64) -> bool {
        let registered = note_handed_out(&mut self.lock(), topic, partition, offset);
        if registered {
            // One token per registration, so one acknowledgement per increment.
            self.in_flight.fetch_add(1, Ordering::AcqRel);
        }
        registered
    }

    /// [`register`](OffsetTracker::register) a batch of received messages under one lock:
    /// keeps, in order, those whose partition is assigned to this process (each registered, so
    /// each owes one acknowledgement) and drops the others (fetched before a revocation; their
    /// partition's new owner reads them again).
    pub fn register_retain<T>(&self, messages: &mut Vec<T>, position: impl Fn(&T) -> &Position) {
        if messages.is_empty() {
            return;
        }
        let mut map = self.lock();
        messages.retain(|message| {
            let at = position(message);
            let registered = note_handed_out(&mut map, &at.stream, at.partition, at.offset);
            if !registered {
                tracing::debug!(topic = %at.stream, partition = at.partition, offset = at.offset,
                    "dropping a message of a partition no longer assigned");
            }
            registered
        });
        drop(map);
        self.in_flight.fetch_add(messages.len(), Ordering::AcqRel);
    }

    /// Tell `guard` when a message is scored or stored (the Kafka source does, once).
    pub fn watch_for_poison(&self, guard: std::sync::Arc<super::poison::PoisonGuard>) {
        let _already = self.poison.set(guard);
    }

    /// A partition's window in flight: (its lowest offset in flight, or one past the highest
    /// when none; the highest offset registered). `None` when not assigned or nothing was
    /// registered yet.
    pub fn window(&self, topic: &str, partition: i32) -> Option<(i64, i64)> {
        let map = self.lock();
        let state = map.get(topic)?.get(&partition)?;
        Some((state.committable()?, state.highest_registered?))
    }

    /// Messages handed out and not yet acknowledged, over all partitions.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Wait until fewer than `limit` messages are in flight.
    pub async fn wait_below(&self, limit: usize) {
        loop {
            let notified = self.acked.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.in_flight() < limit {
                return;
            }
            notified.await;
        }
    }

    /// Partitions whose committable offset advanced since the last [`mark_committed`]; does not
    /// change state (call `mark_committed` once the commit succeeded).
    ///
    /// [`mark_committed`]: OffsetTracker::mark_committed
    pub fn pending_commits(&self) -> Vec<CommitPosition> {
        let map = self.lock();
        let mut out: Vec<CommitPosition> = states(&map)
            .filter_map(|(topic, partition, state)| {
                let offset = state.committable()?;
                (state.committed != Some(offset)).then(|| CommitPosition {
                    topic: topic.clone(),
                    partition,
                    offset,
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        out
    }

    /// Every assigned partition's committable offset, advanced or not (for a final commit).
    pub fn all_commits(&self) -> Vec<CommitPosition> {
        let map = self.lock();
        let mut out: Vec<CommitPosition> = states(&map)
            .filter_map(|(topic, partition, state)| {
                Some(CommitPosition {
                    topic: topic.clone(),
                    partition,
                    offset: state.committable()?,
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        out
    }

    /// Record that these positions were committed (so they are not committed again).
    pub fn mark_committed(&self, commits: &[CommitPosition]) {
        let mut map = self.lock();
        for c in commits {
            if let Some(state) = map.get_mut(&c.topic).and_then(|p| p.get_mut(&c.partition)) {
                state.committed = Some(c.offset);
            }
        }
    }
}

/// Track `offset` as handed out; false when its partition is not assigned here.
fn note_handed_out(map: &mut Partitions, topic: &str, partition: i32, offset: i64) -> bool {
    let Some(state) = map.get_mut(topic).and_then(|p| p.get_mut(&partition)) else {
        return false;
    };
    state.in_flight.insert(offset);
    state.highest_registered = Some(state.highest_registered.map_or(offset, |h| h.max(offset)));
    true
}

/// Every tracked partition's state with its topic and number.
fn states(map: &Partitions) -> impl Iterator<Item = (&String, i32, &PartitionState)> {
    map.iter().flat_map(|(topic, partitions)| {
        partitions
            .iter()
            .map(move |(partition, state)| (topic, *partition, state))
    })
}

impl Acknowledge for OffsetTracker {
    fn ack(&self, position: &Position) {
        self.ack_all(&[position]);
    }

    fn scoring(&self, position: &Position) {
        if let Some(guard) = self.poison.get() {
            guard.scoring(&position.stream, position.partition, position.offset);
        }
    }

    fn scored(&self, position: &Position) {
        if let Some(guard) = self.poison.get() {
            guard.settled(&position.stream, position.partition, position.offset);
        }
    }

    fn ack_all(&self, positions: &[&Position]) {
        if positions.is_empty() {
            return;
        }
        if let Some(guard) = self.poison.get() {
            for position in positions {
                guard.settled(&position.stream, position.partition, position.offset);
            }
        }
        {
            let mut map = self.lock();
            for position in positions {
                if let Some(state) = map
                    .get_mut(&*position.stream)
                    .and_then(|p| p.get_mut(&position.partition))
                {
                    state.in_flight.remove(&position.offset);
                }
            }
        }
        // Every handed-out token is acknowledged once, revoked partition or not: the in-flight
        // count is what back-pressure is measured in.
        let done = positions.len();
        let _ = self
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_sub(done))
            });
        self.acked.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(p: i32, o: i64) -> Position {
        Position {
            stream: "t".into(),
            partition: p,
            offset: o,
        }
    }

    fn commit(p: i32, o: i64) -> CommitPosition {
        CommitPosition {
            topic: "t".into(),
            partition: p,
            offset: o,
        }
    }

    #[test]
    fn commits_only_the_contiguous_completed_prefix() {
        let t = OffsetTracker::new();
        t.assign([("t", 0)]);
        for o in 10..15 {
            t.register("t", 0, o);
        }
        // Out-of-order completion: 11, 12 and 14 done, 10 and 13 pending.
        t.ack(&pos(0, 11));
        t.ack(&pos(0, 12));
        t.ack(&pos(0, 14));
        assert_eq!(t.pending_commits(), vec![commit(0, 10)]);
        t.ack(&pos(0, 10));
        assert_eq!(t.pending_commits(), vec![commit(0, 13)]);
        t.ack(&pos(0, 13));
        assert_eq!(t.pending_commits(), vec![commit(0, 15)]);
        assert_eq!(t.in_flight(), 0);
    }

    #[test]
    fn a_received_batch_registers_its_assigned_messages_in_order_and_drops_the_rest() {
        let t = OffsetTracker::new();
        t.assign([("t", 0), ("t", 1)]);
        // Partition 2 was revoked before the batch was registered.
        let mut batch = vec![pos(0, 7), pos(2, 40), pos(1, 3), pos(0, 8), pos(2, 41)];
        t.register_retain(&mut batch, |p| p);
        assert_eq!(batch, vec![pos(0, 7), pos(1, 3), pos(0, 8)]);
        assert_eq!(t.in_flight(), 3);
        // Registered exactly as one by one: nothing is committed past a message still waiting.
        t.ack(&pos(0, 8));
        t.ack(&pos(1, 3));
        assert_eq!(t.pending_commits(), vec![commit(0, 7), commit(1, 4)]);
        t.ack(&pos(0, 7));
        assert_eq!(t.pending_commits(), vec![commit(0, 9), commit(1, 4)]);
        assert_eq!(t.in_flight(), 0);
        // An empty batch registers nothing.
        let mut empty: Vec<Position> = Vec::new();
        t.register_retain(&mut empty, |p| p);
        assert_eq!(t.in_flight(), 0);
    }

    #[test]
    fn gaps_in_offsets_do_not_block_commits() {
        let t = OffsetTracker::new();
        t.assign([("t", 0)]);
        // Compacted topic: offsets 3 and 4 do not exist.
        for o in [1, 2, 5, 6] {
            t.register("t", 0, o);
        }
        for o in [6, 5, 2, 1] {
            t.ack(&pos(0, o));
        }
        assert_eq!(t.pending_commits(), vec![commit(0, 7)]);
    }

    #[test]
    fn partitions_are_independent_and_commits_are_not_repeated() {
        let t = OffsetTracker::new();
        t.assign([("t", 0), ("t", 1)]);
        t.register("t", 0, 0);
        t.register("t", 1, 100);
        t.register("t", 1, 101);
        t.ack(&pos(1, 100));
        let pending = t.pending_commits();
        assert_eq!(pending, vec![commit(0, 0), commit(1, 101)]);
        t.mark_committed(&pending);
        assert!(t.pending_commits().is_empty());
        t.ack(&pos(1, 101));
        assert_eq!(t.pending_commits(), vec![commit(1, 102)]);
        assert_eq!(t.all_commits(), vec![commit(0, 0), commit(1, 102)]);
    }

    #[test]
    fn unassigned_partitions_are_not_tracked() {
        let t = OffsetTracker::new();
        assert!(!t.register("t", 0, 5));
        assert_eq!(t.in_flight(), 0);
        assert!(t.pending_commits().is_empty());
    }

    #[test]
    fn revoked_partitions_return_their_final_commit_and_ignore_late_acks() {
        let t = OffsetTracker::new();
        t.assign([("t", 0), ("t", 1)]);
        for o in 0..4 {
            t.register("t", 0, o);
        }
        t.ack(&pos(0, 0));
        t.ack(&pos(0, 1));
        assert_eq!(t.revoke([("t", 0)]), vec![commit(0, 2)]);
        // The late ack of a revoked partition changes nothing we would commit...
        t.ack(&pos(0, 2));
        assert!(t.pending_commits().is_empty());
        // ...but still releases back-pressure.
        assert_eq!(t.in_flight(), 1);
        // Re-assignment starts from scratch (the group restarts us at the last commit).
        t.assign([("t", 0)]);
        assert!(t.pending_commits().is_empty());
        assert!(t.register("t", 0, 2));
        t.ack(&pos(0, 2));
        assert_eq!(t.pending_commits(), vec![commit(0, 3)]);
    }

    #[test]
    fn a_batch_acknowledged_at_once_commits_as_one_by_one() {
        let t = OffsetTracker::new();
        t.assign([("t", 0), ("t", 1), ("u", 0)]);
        for o in 0..6 {
            t.register("t", 0, o);
            t.register("t", 1, 100 + o);
        }
        t.register("u", 0, 7);
        // A batch across partitions and topics, out of order, with offset 3 of t/0 still
        // pending and a position of a partition never assigned.
        let mut batch = vec![pos(0, 5), pos(0, 1), pos(0, 0), pos(0, 2), pos(0, 4)];
        batch.extend((0..6).map(|o| pos(1, 100 + o)));
        let other = Position {
            stream: "u".into(),
            partition: 0,
            offset: 7,
        };
        let unknown = Position {
            stream: "v".into(),
            partition: 0,
            offset: 1,
        };
        let mut refs: Vec<&Position> = batch.iter().collect();
        refs.push(&other);
        refs.push(&unknown);
        t.ack_all(&refs);
        let other_topic = CommitPosition {
            topic: "u".into(),
            partition: 0,
            offset: 8,
        };
        assert_eq!(
            t.pending_commits(),
            vec![commit(0, 3), commit(1, 106), other_topic]
        );
        // 13 registered, 13 tokens acknowledged (the unknown one is a late ack of a revoked
        // partition: it releases back-pressure, and the count never goes below zero).
        assert_eq!(t.in_flight(), 0);
        t.ack_all(&[]);
        assert_eq!(t.in_flight(), 0);
    }

    #[tokio::test]
    async fn wait_below_wakes_on_ack() {
        let t = std::sync::Arc::new(OffsetTracker::new());
        t.assign([("t", 0)]);
        t.register("t", 0, 0);
        t.register("t", 0, 1);
        let waiter = {
            let t = t.clone();
            tokio::spawn(async move { t.wait_below(2).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        t.ack(&pos(0, 0));
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
    }
}
