//! Judge work and how it travels: [`JudgeWork`] (the event, why it was selected, the line-rate
//! row it revises), the [`WorkQueue`] the judge stage takes it from (most important first), and
//! the [`WorkSink`]s the pipeline hands it to once the line-rate rows are written — the queue
//! itself in-process, or a Kafka topic (`second_pass::kafka_work`) that a consumer of the judge group reads
//! back into the queue.
//!
//! Live (`QueueMode::Shed`): a full queue sheds its least important work (`queue_full`). A census
//! (`QueueMode::Block`, a backfill that judges every event): a full queue makes the writer wait,
//! so the backfill goes at the judge's pace instead of dropping anything.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, watch};

use crate::event::Event;
use crate::sampling::{LineRate, Selection, ShedReason};
use crate::sources::{AckToken, Position};

use crate::telemetry::stats::judge_pass::JudgeStats;

/// One event for the LLM judge (also the payload of the Kafka work topic, as JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeWork {
    /// The event.
    pub event: Event,
    /// Why it was selected.
    pub selection: Selection,
    /// The line-rate row it revises.
    pub line: LineRate,
    /// The row time of the line-rate row (the judged row gets the same).
    pub ts: String,
    /// When it was selected (milliseconds since the epoch), for the staleness limit.
    pub selected_at_ms: i64,
}

impl JudgeWork {
    /// Work selected now.
    pub fn new(event: Event, selection: Selection, line: LineRate, ts: &str) -> JudgeWork {
        JudgeWork {
            event,
            selection,
            line,
            ts: ts.to_string(),
            selected_at_ms: chrono::Utc::now().timestamp_millis(),
        }
    }

    /// How long ago it was selected, in milliseconds.
    pub fn age_ms(&self) -> i64 {
        (chrono::Utc::now().timestamp_millis() - self.selected_at_ms).max(0)
    }
}

/// Why judge work could not be handed over.
#[derive(Debug, thiserror::Error)]
pub enum WorkError {
    /// The Kafka producer failed (after librdkafka's own retries).
    #[error("judge work: cannot produce to {topic}: {message}")]
    Produce {
        /// Topic.
        topic: String,
        /// librdkafka's message.
        message: String,
    },
    /// The work could not be encoded.
    #[error("judge work: cannot encode: {0}")]
    Encode(#[source] serde_json::Error),
}

/// Where the pipeline hands selected work once the line-rate rows are written.
#[async_trait]
pub trait WorkSink: Send + Sync {
    /// Hand over `work`; returns once it is durable (Kafka) or queued (in-process).
    async fn submit(&self, work: Vec<JudgeWork>) -> Result<(), WorkError>;

    /// No more work will come (the line-rate pass is done).
    fn close(&self);
}

/// What the queue does when it is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueMode {
    /// Shed the least important work (live runs).
    Shed,
    /// Wait for room (a census: nothing may be dropped).
    Block,
}

/// Work waiting for the judge.
pub struct Queued {
    /// The work.
    pub work: JudgeWork,
    /// Acknowledged once its judged row is written, or when it is shed.
    pub ack: AckToken,
}

struct QueueState {
    /// Keyed by (priority, arrival): the first entry is the next to judge, the last the first
    /// to shed.
    items: BTreeMap<(u8, u64), Queued>,
    next_seq: u64,
    closed: bool,
}

/// The judge stage's queue: most important first, first come first within a priority.
pub struct WorkQueue {
    closed: watch::Sender<bool>,
    state: Mutex<QueueState>,
    items_added: Notify,
    room_made: Notify,
    capacity: usize,
    mode: QueueMode,
    stats: Arc<JudgeStats>,
}

impl WorkQueue {
    /// A queue of at most `capacity` items.
    pub fn new(capacity: usize, mode: QueueMode, stats: Arc<JudgeStats>) -> Arc<WorkQueue> {
        let queue = Arc::new(WorkQueue {
            closed: watch::channel(false).0,
            state: Mutex::new(QueueState {
                items: BTreeMap::new(),
                next_seq: 0,
                closed: false,
            }),
            items_added: Notify::new(),
            room_made: Notify::new(),
            capacity: capacity.max(1),
            mode,
            stats: Arc::clone(&stats),
        });
        let weak = Arc::downgrade(&queue);
        stats.set_oldest_wait_probe(Box::new(move || {
            weak.upgrade().map_or(0, |q| q.oldest_wait_ms())
        }));
        queue
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&self, state: &QueueState) {
        self.stats.queue_depth(state.items.len());
    }

    /// How long the oldest waiting work has waited, in milliseconds (a scan: call it when a
    /// report is due, not per item).
    pub fn oldest_wait_ms(&self) -> i64 {
        self.lock()
            .items
            .values()
            .map(|q| q.work.age_ms())
            .max()
            .unwrap_or(0)
    }

    /// Add work (shedding or waiting when full, by mode).
    pub async fn push(&self, work: JudgeWork, ack: AckToken) {
        let mut item = Some(Queued { work, ack });
        loop {
            let room = self.room_made.notified();
            tokio::pin!(room);
            // Registered before the state is read, so a notification in between is not lost.
            room.as_mut().enable();
            {
                let mut state = self.lock();
                let Some(queued) = item.take() else { return };
                if state.items.len() < self.capacity {
                    self.insert(state, queued);
                    return;
                }
                match self.mode {
                    QueueMode::Shed => {
                        let priority = queued.work.selection.priority();
                        let worst = state.items.keys().next_back().copied();
                        let shed = match worst {
                            Some(key) if key.0 > priority => {
                                let evicted = state.items.remove(&key);
                                let key = (priority, state.next_seq);
                                state.next_seq += 1;
                                state.items.insert(key, queued);
                                evicted
                            }
                            _ => Some(queued),
                        };
                        if let Some(shed) = shed {
                            self.stats.shed(ShedReason::QueueFull, 1);
                            shed.ack.ack();
                        }
                        self.publish(&state);
                        drop(state);
                        self.items_added.notify_one();
                        return;
                    }
                    QueueMode::Block => {
                        if state.closed {
                            // Nobody will take it: a closed queue drops what still arrives.
                            self.stats.shed(ShedReason::Shutdown, 1);
                            return;
                        }
                        item = Some(queued);
                    }
                }
            }
            room.await;
        }
    }

    /// Put back work the judge stage took but could not judge (the judge was unreachable):
    /// queued again at its priority, its age kept, even when the queue is closed (the stage
    /// still drains it) or full (it overshoots by at most the judgments in flight: the work
    /// was counted in the queue before).
    pub fn put_back(&self, queued: Queued) {
        self.insert(self.lock(), queued);
    }

    /// Queue `queued` at its priority, first come first within it (the caller decided it goes
    /// in), and wake a taker.
    fn insert(&self, mut state: std::sync::MutexGuard<'_, QueueState>, queued: Queued) {
        let key = (queued.work.selection.priority(), state.next_seq);
        state.next_seq += 1;
        state.items.insert(key, queued);
        self.publish(&state);
        drop(state);
        self.items_added.notify_one();
    }

    /// The most important waiting work; `None` once the queue is closed and empty.
    pub async fn pop(&self) -> Option<Queued> {
        loop {
            let added = self.items_added.notified();
            tokio::pin!(added);
            added.as_mut().enable();
            {
                let mut state = self.lock();
                if let Some((_, queued)) = state.items.pop_first() {
                    self.publish(&state);
                    drop(state);
                    self.room_made.notify_one();
                    return Some(queued);
                }
                if state.closed {
                    return None;
                }
            }
            added.await;
        }
    }

    /// Up to `n` of the most important waiting pieces of work, without waiting for any.
    pub fn try_pop_many(&self, n: usize) -> Vec<Queued> {
        let mut state = self.lock();
        let mut out = Vec::with_capacity(n.min(state.items.len()));
        while out.len() < n {
            let Some((_, queued)) = state.items.pop_first() else {
                break;
            };
            out.push(queued);
        }
        if !out.is_empty() {
            self.publish(&state);
            drop(state);
            self.room_made.notify_waiters();
        }
        out
    }

    /// No more work will be pushed; `pop` returns `None` once the queue is empty.
    pub fn close(&self) {
        self.lock().closed = true;
        self.closed.send_replace(true);
        self.items_added.notify_waiters();
        self.room_made.notify_waiters();
    }

    /// Turns `true` when the queue is closed.
    pub fn closed_signal(&self) -> watch::Receiver<bool> {
        self.closed.subscribe()
    }

    /// Take everything still waiting (at shutdown).
    pub fn drain(&self) -> Vec<Queued> {
        let mut state = self.lock();
        let items = std::mem::take(&mut state.items);
        self.publish(&state);
        drop(state);
        self.room_made.notify_waiters();
        items.into_values().collect()
    }

    /// Work waiting now.
    pub fn len(&self) -> usize {
        self.lock().items.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The in-process hand-over: work goes straight into the queue.
#[async_trait]
impl WorkSink for WorkQueue {
    async fn submit(&self, work: Vec<JudgeWork>) -> Result<(), WorkError> {
        for w in work {
            let position = Position {
                stream: "judge-work".into(),
                partition: 0,
                offset: 0,
            };
            self.push(w, AckToken::untracked(position)).await;
        }
        Ok(())
    }

    fn close(&self) {
        WorkQueue::close(self);
    }
}
