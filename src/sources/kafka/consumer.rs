//! The Kafka source: a consumer-group member that hands raw payloads to the pipeline and commits an
//! offset only once everything before it has been written by the sink.
//!
//! - **At-least-once.** Auto-commit and the automatic offset store are off. Every message handed
//!   out is registered with an [`OffsetTracker`]; its [`AckToken`] reports back when the sink has
//!   stored the message's output. A commit task commits each partition's highest contiguous
//!   completed offset on an interval; revocation (rebalance) and shutdown commit what is done
//!   synchronously. A crash therefore re-delivers at most the uncommitted tail, which the
//!   ReplacingMergeTree `evaluations` table collapses.
//! - **Rebalances.** Acknowledgements for a partition that was revoked are ignored, so this
//!   process never commits on behalf of a partition's new owner.
//! - **Static membership.** With `group_instance_id` the member has a stable identity
//!   (KIP-345): restarted under the same id it takes its own partitions back without a
//!   rebalance. A fatal client error — a static member fenced by another process with the same
//!   id is one — stops the source: no more messages, nothing more committed, and the error (with
//!   the id) ends the run, so the process exits non-zero instead of consuming on.
//! - **Bounded finish.** Every step of [`Source::finish`] has a limit (dead letters 5 s, the final
//!   commit 10 s, leaving the group 3 s) and the consumer is closed on its own thread, because
//!   librdkafka's synchronous commit and close wait for a broker as long as it is gone.
//! - **Batched receive.** One receive takes what librdkafka has already fetched, up to 64
//!   messages and the room back-pressure leaves, under one message stream, registers them with
//!   the tracker under one lock and hands them out one by one: the stream's waker slot and the
//!   tracker's lock are taken once per batch, and every position shares its topic's one name.
//!   A message waiting in that batch is registered already, so no commit passes it; after a
//!   stop it is not handed out and is redelivered on the next start. A rebalance while messages
//!   wait changes nothing from handing each out at once: a message of a partition revoked
//!   before its batch was registered is dropped, one registered earlier is acknowledged into
//!   nothing (as an in-flight message is).
//! - **Back-pressure.** At most `max_in_flight` messages are registered (handed out, or waiting
//!   in a received batch) and unacknowledged; beyond that the source stops polling, so a slow
//!   judge or sink slows consumption instead of growing memory. librdkafka's own prefetch is
//!   bounded by `queued.max.messages.kbytes`.
//! - **Dead letters.** With `dead_letter_topic` set, the source offers the pipeline a
//!   dead-letter route ([`Source::dead_letter_route`]): payloads that fail [`Event::decode`] in
//!   the pipeline's decode stage — the one place events are decoded — are produced to that
//!   topic by [`super::dead_letter`] and acknowledged only once the broker confirmed the
//!   produce. Without it they go to the sink's dead letters like any source's.
//! - **Pass-through.** Every `[source.kafka_properties]` entry is handed to librdkafka verbatim
//!   (SASL, TLS, timeouts), for the consumer and the dead-letter producer alike.
//! - **Consumer lag.** librdkafka's statistics (every `statistics.interval.ms`, default 5 s here)
//!   give each assigned partition's high watermark and committed offset; the lag
//!   (high watermark − committed offset: messages not yet durably processed by the group) is
//!   kept for [`KafkaSource::consumer_lag`] and recorded into the `sqlgrade.consumer.lag` gauge
//!   once the pipeline attaches its metrics. Statistics are served while the source polls, so
//!   the values pause while back-pressure holds the source.
//!
//! [`Event::decode`]: crate::event::Event::decode

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::{FutureExt as _, StreamExt as _};
use rdkafka::ClientContext;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::producer::FutureProducer;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tokio::sync::Notify;

use super::client::{ClientConfigs as _, normalized};
use super::dead_letter::DeadLetterProducer;
use super::lag::{LagTable, PartitionLag};
use super::lock;
use super::offsets::{CommitPosition, OffsetTracker};
use super::poison::PoisonGuard;
use crate::sources::kafka::config::KafkaSourceConfig;
use crate::sources::{
    AckToken, Acknowledge, DeadLetterRoute, Position, Source, SourceError, SourceMessage,
};
use crate::telemetry::PipelineMetrics;
use crate::telemetry::health::{ComponentHealth, Health};

/// librdkafka callbacks: rebalances update the tracker and commit revoked partitions' progress;
/// statistics update the consumer lag.
struct TrackingContext {
    tracker: Arc<OffsetTracker>,
    health: Option<Arc<Health>>,
    lag: Arc<LagTable>,
    /// Stops the source when the client hits a fatal error.
    stop: Arc<StopSignal>,
    /// The first fatal error, if any: the source reports it instead of consuming on (read per
    /// message: one atomic load while unset).
    fatal: std::sync::OnceLock<String>,
    /// Set once the source finishes: a revocation then commits nothing (the final commit
    /// already did, or could not — and a synchronous commit to a broker that is gone would
    /// block the close for good).
    closing: AtomicBool,
    /// Set while the health registry says no broker is reachable.
    unreachable: AtomicBool,
    /// Completed offsets whose commit failed (or could not be tried) when their partitions were
    /// revoked, since the last assignment: a shutdown then reports them as not committed.
    lost_commits: std::sync::atomic::AtomicU64,
    /// The poison-event guard: revoked partitions' markers are written clean.
    poison: Option<Arc<PoisonGuard>>,
}

impl TrackingContext {
    /// Record a fatal client error: the client is finished (e.g. fenced by another member with
    /// the same `group.instance.id`), so the source stops handing out messages and the run ends
    /// with this error; liveness fails meanwhile.
    fn record_fatal(&self, detail: String) {
        if self.fatal.set(detail.clone()).is_err() {
            return;
        }
        tracing::error!(error = %detail, "fatal kafka client error; the source stops consuming");
        if let Some(h) = &self.health {
            h.set("kafka", ComponentHealth::Failed(detail));
        }
        self.stop.stop();
    }
}

impl ClientContext for TrackingContext {
    fn stats_raw(&self, statistics: &[u8]) {
        self.lag.update(statistics);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        // librdkafka recovers from connection errors by itself (a restarted broker, a
        // rebalance); only a fatal error means this client is finished.
        let code = error.rdkafka_error_code();
        if code == Some(RDKafkaErrorCode::Fatal) {
            self.record_fatal(format!("{error}: {reason}"));
        } else if code == Some(RDKafkaErrorCode::AllBrokersDown) {
            // Not ready (and named in a shutdown that cannot commit) until a message arrives.
            tracing::warn!(%error, reason, "no Kafka broker reachable");
            self.unreachable.store(true, Ordering::Release);
            if let Some(h) = &self.health {
                h.set(
                    "kafka",
                    ComponentHealth::Degraded(format!("no broker reachable: {reason}")),
                );
            }
        } else {
            tracing::warn!(%error, reason, "kafka client error");
        }
    }
}

fn partitions_of(tpl: &TopicPartitionList) -> Vec<(String, i32)> {
    tpl.elements()
        .iter()
        .map(|e| (e.topic().to_string(), e.partition()))
        .collect()
}

fn commit_list(commits: &[CommitPosition]) -> Result<TopicPartitionList, KafkaError> {
    let mut tpl = TopicPartitionList::new();
    for c in commits {
        tpl.add_partition_offset(&c.topic, c.partition, Offset::Offset(c.offset))?;
    }
    Ok(tpl)
}

impl ConsumerContext for TrackingContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(tpl) => {
                let parts = partitions_of(tpl);
                self.lag.revoke(&parts);
                let commits = self
                    .tracker
                    .revoke(parts.iter().map(|(t, p)| (t.as_str(), *p)));
                // Let go gracefully: a later start of whoever owns them charges them no death.
                if let Some(guard) = &self.poison {
                    guard.release(parts.iter().map(|(t, p)| (t.as_str(), *p)));
                }
                if self.closing.load(Ordering::Acquire) {
                    tracing::info!(partitions = ?parts, uncommitted = ?commits, "partitions released at shutdown");
                    return;
                }
                if commits.is_empty() {
                    tracing::info!(partitions = ?parts, "partitions revoked");
                } else if self.unreachable.load(Ordering::Acquire) {
                    // A synchronous commit would wait for a broker that is gone.
                    tracing::warn!(partitions = ?parts, uncommitted = ?commits, "partitions revoked with no broker reachable; their completed offsets stay uncommitted (redelivered)");
                    self.lost_commits
                        .fetch_add(commits.len() as u64, Ordering::AcqRel);
                } else {
                    tracing::info!(partitions = ?parts, commits = ?commits, "partitions revoked; committing completed offsets");
                    // This callback runs inside a poll on an async worker: let the runtime move
                    // the worker's other tasks elsewhere while the commit waits.
                    let committed = off_the_runtime(|| {
                        commit_list(&commits).and_then(|l| consumer.commit(&l, CommitMode::Sync))
                    });
                    if let Err(e) = committed {
                        tracing::warn!(error = %e, "commit on revocation failed; the new owner re-reads from the previous commit");
                        self.lost_commits
                            .fetch_add(commits.len() as u64, Ordering::AcqRel);
                    }
                }
            }
            Rebalance::Assign(tpl) => {
                let parts = partitions_of(tpl);
                tracing::info!(partitions = ?parts, "partitions assigned");
                // Whoever owns the partitions now re-reads from their last commit.
                self.lost_commits.store(0, Ordering::Release);
                self.lag.assign(&parts);
                self.tracker
                    .assign(parts.iter().map(|(t, p)| (t.as_str(), *p)));
            }
            Rebalance::Error(e) => tracing::warn!(error = %e, "rebalance error"),
        }
    }
}

type Consumer_ = StreamConsumer<TrackingContext>;

/// Run a blocking librdkafka call from a callback that librdkafka invokes inside a poll on an
/// async worker: on a multi-threaded runtime the worker's other tasks move to other threads
/// meanwhile (`block_in_place`); elsewhere it simply runs.
fn off_the_runtime<T>(call: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) if runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(call)
        }
        _ => call(),
    }
}

/// Commit `commits` synchronously (on a blocking thread) and record them in the tracker.
async fn commit_now(
    consumer: &Arc<Consumer_>,
    tracker: &Arc<OffsetTracker>,
    commits: Vec<CommitPosition>,
) -> Result<(), KafkaError> {
    if commits.is_empty() {
        return Ok(());
    }
    let list = commit_list(&commits)?;
    let c = consumer.clone();
    let result = match tokio::task::spawn_blocking(move || c.commit(&list, CommitMode::Sync)).await
    {
        Ok(result) => result,
        Err(e) => {
            tracing::error!(error = %e, "commit task failed");
            Err(KafkaError::Canceled)
        }
    };
    if result.is_ok() {
        tracker.mark_committed(&commits);
        tracing::debug!(?commits, "committed");
    }
    result
}

/// How often the commit task asks the client whether it hit a fatal error.
const FATAL_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// How long [`Source::finish`] waits for dead letters still being produced.
const FINISH_DEAD_LETTER_WAIT: Duration = Duration::from_secs(5);
/// How long the final commit may take (librdkafka's synchronous commit has no timeout of its
/// own and waits for a coordinator that may be gone).
const FINISH_COMMIT_WAIT: Duration = Duration::from_secs(10);
/// How long leaving the group may take.
const FINISH_LEAVE_WAIT: Duration = Duration::from_secs(3);

/// The consumer, closed off the async workers when dropped: librdkafka's close leaves the
/// group and can wait for a broker that is gone for as long as it stays gone. On its own thread
/// the close finishes when it can, or ends with the process.
struct OwnedConsumer(Option<Arc<Consumer_>>);

impl std::ops::Deref for OwnedConsumer {
    type Target = Arc<Consumer_>;

    fn deref(&self) -> &Arc<Consumer_> {
        // Only `drop` takes the consumer out.
        self.0
            .as_ref()
            .unwrap_or_else(|| unreachable!("consumer taken before drop"))
    }
}

impl Drop for OwnedConsumer {
    fn drop(&mut self) {
        if let Some(consumer) = self.0.take() {
            let closing = std::thread::Builder::new()
                .name("kafka-close".into())
                .spawn(move || drop(consumer));
            if let Err(error) = closing {
                tracing::warn!(%error, "cannot close the Kafka consumer on its own thread");
            }
        }
    }
}

/// The Kafka [`Source`].
pub struct KafkaSource {
    consumer: OwnedConsumer,
    tracker: Arc<OffsetTracker>,
    dead_letters: Option<Arc<DeadLetterProducer>>,
    settings: KafkaSourceConfig,
    stop: Arc<StopSignal>,
    committer: Option<tokio::task::JoinHandle<()>>,
    health: Option<Arc<Health>>,
    lag: Arc<LagTable>,
    /// Received and registered, not yet handed out, in the order received (at most
    /// [`RECEIVE_BATCH`]).
    ready: VecDeque<SourceMessage>,
    /// The batch being received (kept for its room).
    taken: Vec<SourceMessage>,
    /// One shared name per topic seen, so a message's position does not copy its topic.
    topic_names: Vec<Arc<str>>,
    /// The poison-event guard (`None` when `[source.poison] after_deaths = 0`).
    poison: Option<Arc<PoisonGuard>>,
    /// Messages were handed out that the guard does not track (before a partition was found
    /// recovering): the next message scored alone waits until they are stored.
    untracked: bool,
}

impl std::fmt::Debug for KafkaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSource")
            .field("settings", &self.settings)
            .field("in_flight", &self.tracker.in_flight())
            .finish()
    }
}

/// Tells a running source to stop handing out messages (from a signal handler, another task).
#[derive(Debug, Default)]
pub struct StopSignal {
    stopped: AtomicBool,
    notify: Notify,
}

impl StopSignal {
    /// Request the stop.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Whether a stop was requested.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_stopped() {
                return;
            }
            notified.await;
        }
    }
}

/// The commit task: commits what the sink has every `interval`, and watches the client for a
/// fatal error (which reaches the source as a consumption error only while it polls).
fn spawn_committer(
    consumer: Arc<Consumer_>,
    tracker: Arc<OffsetTracker>,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // A fatal error reaches the source as a consumption error only while it polls;
        // the client's own state tells it even while back-pressure holds the source.
        let mut check = tokio::time::interval(FATAL_CHECK_INTERVAL);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let pending = tracker.pending_commits();
                    if let Err(e) = commit_now(&consumer, &tracker, pending).await {
                        tracing::warn!(error = %e, "periodic commit failed; retrying next interval");
                    }
                }
                _ = check.tick() => {
                    if let Some((code, reason)) = consumer.client().fatal_error() {
                        consumer.context().record_fatal(format!("{code}: {reason}"));
                        return;
                    }
                }
            }
        }
    })
}

impl KafkaSource {
    /// Connect, subscribe and start the commit task for `[source]` (payloads larger than
    /// `pipeline.max_event_bytes` are dead-lettered unread by the pipeline's decode stage).
    /// Must be called inside a tokio runtime.
    pub fn new(
        source: &KafkaSourceConfig,
        health: Option<Arc<Health>>,
    ) -> Result<KafkaSource, SourceError> {
        let settings = normalized(source);
        if settings.topics.is_empty() {
            return Err(SourceError::Kafka("no topics configured".into()));
        }
        let tracker = Arc::new(OffsetTracker::new());
        let poison = PoisonGuard::new(&settings.poison, &settings.group_id).map(Arc::new);
        if let Some(guard) = &poison {
            tracker.watch_for_poison(Arc::clone(guard));
            tracing::info!(dir = %guard.dir().display(), after_deaths = settings.poison.after_deaths, "poison-event guard on");
        }
        let lag = Arc::new(LagTable::default());
        let stop = Arc::new(StopSignal::default());
        let context = TrackingContext {
            tracker: tracker.clone(),
            health: health.clone(),
            lag: lag.clone(),
            stop: Arc::clone(&stop),
            fatal: std::sync::OnceLock::new(),
            closing: AtomicBool::new(false),
            unreachable: AtomicBool::new(false),
            lost_commits: std::sync::atomic::AtomicU64::new(0),
            poison: poison.clone(),
        };
        let consumer: Consumer_ = settings
            .consumer_config()
            .create_with_context(context)
            .map_err(|source| SourceError::KafkaClient {
                what: "cannot create consumer".into(),
                source,
            })?;
        let topics: Vec<&str> = settings.topics.iter().map(String::as_str).collect();
        consumer
            .subscribe(&topics)
            .map_err(|source| SourceError::KafkaClient {
                what: format!("cannot subscribe to {topics:?}"),
                source,
            })?;
        let dead_letters = match &settings.dead_letter_topic {
            Some(topic) => Some(Arc::new(DeadLetterProducer::new(
                settings
                    .producer_config()
                    .create::<FutureProducer>()
                    .map_err(|source| SourceError::KafkaClient {
                        what: "cannot create dead-letter producer".into(),
                        source,
                    })?,
                topic.clone(),
            ))),
            None => None,
        };
        let consumer = Arc::new(consumer);
        let committer = spawn_committer(
            Arc::clone(&consumer),
            Arc::clone(&tracker),
            Duration::from_millis(settings.commit_interval_ms.max(10)),
        );
        if let Some(h) = &health {
            h.set("kafka", ComponentHealth::Ok);
        }
        tracing::info!(settings = ?settings, "kafka source started");
        Ok(KafkaSource {
            consumer: OwnedConsumer(Some(consumer)),
            tracker,
            dead_letters,
            settings,
            stop,
            committer: Some(committer),
            health,
            lag,
            ready: VecDeque::with_capacity(RECEIVE_BATCH),
            taken: Vec::with_capacity(RECEIVE_BATCH),
            topic_names: Vec::new(),
            poison,
            untracked: false,
        })
    }

    /// Consumer lag of each assigned partition, as of librdkafka's latest statistics (empty
    /// until the first statistics after an assignment).
    pub fn consumer_lag(&self) -> Vec<PartitionLag> {
        self.lag.snapshot()
    }

    /// A handle that stops this source from anywhere (e.g. a signal handler).
    pub fn stop_signal(&self) -> Arc<StopSignal> {
        self.stop.clone()
    }

    /// The offset tracker (for metrics and tests).
    pub fn tracker(&self) -> Arc<OffsetTracker> {
        self.tracker.clone()
    }
}

/// Most messages one receive takes from librdkafka's queue without waiting (those already
/// fetched): the message stream, its waker registration and the offset tracker's lock are taken
/// once per batch instead of once per message.
const RECEIVE_BATCH: usize = 64;

impl KafkaSource {
    /// Wait for a message, take up to `room` in all of those already fetched, register them
    /// with the offset tracker and queue them in `ready` (none when the stop signal came first
    /// or a receive failed). Every step after the first message is received is synchronous.
    async fn receive_batch(&mut self, room: usize) {
        let mut stream = self.consumer.stream();
        // The stream first: while messages are waiting, the stop signal is not polled (polling
        // it registers a waiter, a lock taken and released); a stop is still seen at the top of
        // `next`, and wakes a receive that is waiting.
        let first = tokio::select! {
            biased;
            m = stream.next() => m,
            _ = self.stop.wait() => return,
        };
        let mut failed = match first {
            Some(Ok(message)) => {
                self.taken
                    .push(take_message(&mut self.topic_names, &self.tracker, &message));
                None
            }
            Some(Err(error)) => Some(error),
            None => None,
        };
        while failed.is_none() && self.taken.len() < room {
            match stream.next().now_or_never() {
                Some(Some(Ok(message))) => {
                    self.taken
                        .push(take_message(&mut self.topic_names, &self.tracker, &message))
                }
                Some(Some(Err(error))) => failed = Some(error),
                Some(None) | None => break,
            }
        }
        drop(stream);
        if !self.taken.is_empty() {
            let context = self.consumer.context();
            if context.unreachable.load(Ordering::Relaxed)
                && context.unreachable.swap(false, Ordering::AcqRel)
                && let Some(h) = &self.health
            {
                h.set("kafka", ComponentHealth::Ok);
            }
            self.tracker
                .register_retain(&mut self.taken, |m| m.ack.position());
            if let Some(guard) = &self.poison {
                mark_windows(guard, &self.tracker, &self.taken);
            }
            self.ready.extend(self.taken.drain(..));
        }
        match failed {
            None => {}
            Some(KafkaError::MessageConsumptionFatal(code)) => {
                let reason = self
                    .consumer
                    .client()
                    .fatal_error()
                    .map_or_else(|| code.to_string(), |(c, r)| format!("{c}: {r}"));
                self.consumer.context().record_fatal(reason);
            }
            Some(error) => {
                tracing::warn!(%error, "kafka receive error");
                if self.ready.is_empty() {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

/// Write the poison-event markers of the partitions in a registered batch: each one's window
/// in flight (one small write per partition of the batch).
fn mark_windows(guard: &PoisonGuard, tracker: &OffsetTracker, batch: &[SourceMessage]) {
    let mut seen: Vec<(&str, i32)> = Vec::new();
    for message in batch {
        let at = message.ack.position();
        let key = (&*at.stream, at.partition);
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        if let Some((from, upto)) = tracker.window(key.0, key.1) {
            guard.registered(key.0, key.1, from, upto);
        }
    }
}

/// A received message as the pipeline takes it: its payload copied out of librdkafka's buffer,
/// the origin dead letters name, and an acknowledgement token for the offset tracker (not yet
/// registered). The topic's name is shared, one `Arc<str>` per topic for the source's life.
fn take_message(
    topic_names: &mut Vec<Arc<str>>,
    tracker: &Arc<OffsetTracker>,
    message: &BorrowedMessage<'_>,
) -> SourceMessage {
    let name = message.topic();
    let topic = match topic_names.iter().find(|known| ***known == *name) {
        Some(known) => Arc::clone(known),
        None => {
            let new: Arc<str> = name.into();
            topic_names.push(Arc::clone(&new));
            new
        }
    };
    kafka_message(
        topic,
        message.partition(),
        message.offset(),
        message.payload().unwrap_or_default(),
        message.timestamp().to_millis(),
        tracker,
    )
}

/// The [`SourceMessage`] for a Kafka message (what [`KafkaSource`] hands out; public for the
/// stage benchmark): the payload copied, the origin, and a token for `tracker` — not yet
/// registered ([`OffsetTracker::register_retain`] does that for a batch).
#[doc(hidden)]
pub fn kafka_message(
    topic: Arc<str>,
    partition: i32,
    offset: i64,
    payload: &[u8],
    timestamp_millis: Option<i64>,
    tracker: &Arc<OffsetTracker>,
) -> SourceMessage {
    SourceMessage {
        payload: payload.to_vec(),
        origin: kafka_origin(&topic, partition, offset),
        // CreateTime or LogAppendTime: the same on every redelivery of this offset.
        source_time: timestamp_millis.and_then(crate::sources::SourceTime::from_millis),
        ack: AckToken::new(
            Position {
                stream: topic,
                partition,
                offset,
            },
            Arc::clone(tracker) as Arc<dyn Acknowledge>,
        ),
        quarantine: None,
    }
}

/// `kafka:{topic}/{partition}@{offset}`, the origin dead letters name, written without the
/// formatting machinery (the source stage builds one per message).
pub fn kafka_origin(topic: &str, partition: i32, offset: i64) -> String {
    let mut partition_digits = itoa::Buffer::new();
    let mut offset_digits = itoa::Buffer::new();
    let partition = partition_digits.format(partition);
    let offset = offset_digits.format(offset);
    let mut origin = String::with_capacity(8 + topic.len() + partition.len() + offset.len());
    origin.push_str("kafka:");
    origin.push_str(topic);
    origin.push('/');
    origin.push_str(partition);
    origin.push('@');
    origin.push_str(offset);
    origin
}

#[async_trait]
impl Source for KafkaSource {
    async fn next(&mut self) -> Result<Option<SourceMessage>, SourceError> {
        // Cancel-safe: between receiving a batch and queueing it in `ready` there is no await
        // point, so a cancelled call loses nothing (a queued message is returned by a later call,
        // or, after a stop, never — it stays registered, so nothing is committed past it).
        loop {
            if let Some(fatal) = self.fatal_error() {
                return Err(fatal);
            }
            if self.stop.is_stopped() {
                return Ok(None);
            }
            if let Some(guard) = self.poison.clone()
                && guard.is_serial()
                && !self.ready.is_empty()
            {
                // After a death: a suspect is handed out alone — once every message handed out
                // before it is stored, and nothing after it until it is scored; the others as
                // usual, but none while one is alone.
                tokio::select! {
                    _ = guard.wait_slot() => {}
                    _ = self.stop.wait() => continue,
                }
                let Some(front) = self.ready.front() else {
                    continue;
                };
                let at = front.ack.position();
                if !guard.alone_for(&at.stream, at.partition, at.offset) {
                    guard.handed_out(&at.stream, at.partition, at.offset);
                    return Ok(self.ready.pop_front());
                }
                if self.untracked {
                    // Registered messages are those handed out and those still waiting here:
                    // wait until every one handed out untracked is stored.
                    let waiting = self.ready.len();
                    if self.tracker.in_flight() > waiting {
                        tokio::select! {
                            _ = self.tracker.wait_below(waiting + 1) => {}
                            _ = self.stop.wait() => {}
                        }
                        continue;
                    }
                    self.untracked = false;
                }
                // Every message handed out since is scored (or stored) before this one goes.
                tokio::select! {
                    _ = guard.wait_handed_out_settled() => {}
                    _ = self.stop.wait() => continue,
                }
                if let Some(mut message) = self.ready.pop_front() {
                    let at = message.ack.position();
                    message.quarantine = guard.hand_out_alone(&at.stream, at.partition, at.offset);
                    if let Some(reason) = &message.quarantine {
                        tracing::error!(origin = %message.origin, %reason, "poison event: dead-lettered unread");
                    }
                    return Ok(Some(message));
                }
                continue;
            }
            if let Some(message) = self.ready.pop_front() {
                self.untracked = self.poison.is_some();
                return Ok(Some(message));
            }
            let limit = self.settings.max_in_flight.get();
            let in_flight = self.tracker.in_flight();
            if in_flight >= limit {
                tokio::select! {
                    _ = self.tracker.wait_below(limit) => {}
                    _ = self.stop.wait() => continue,
                }
                continue;
            }
            self.receive_batch((limit - in_flight).min(RECEIVE_BATCH))
                .await;
        }
    }

    fn next_ready(&mut self) -> Option<SourceMessage> {
        // Checked as `next` checks them: a stopped or failed source hands out nothing more.
        if self.ready.is_empty()
            || self.stop.is_stopped()
            || self.consumer.context().fatal.get().is_some()
            || self.poison.as_ref().is_some_and(|guard| guard.is_serial())
        {
            return None;
        }
        self.untracked = self.poison.is_some();
        self.ready.pop_front()
    }

    fn stop(&mut self) {
        self.stop.stop();
    }

    fn dead_letter_route(&self) -> Option<Arc<dyn DeadLetterRoute>> {
        self.dead_letters
            .clone()
            .map(|route| route as Arc<dyn DeadLetterRoute>)
    }

    fn attach_metrics(&mut self, metrics: PipelineMetrics) {
        *lock(&self.lag.metrics) = Some(metrics);
    }

    async fn finish(&mut self) -> Result<(), SourceError> {
        self.stop.stop();
        // Every step is bounded: a broker that is gone must not hold the process (the daemon's
        // shutdown deadline bounds the whole; these make the error say which step it was).
        // Dead letters still being produced get a moment to be confirmed (their offsets are
        // committed only if they are).
        if let Some(dead_letters) = &self.dead_letters
            && !dead_letters.drain(FINISH_DEAD_LETTER_WAIT).await
        {
            tracing::warn!(
                "dead-letter deliveries still pending at shutdown; their offsets stay uncommitted"
            );
        }
        if let Some(task) = self.committer.take() {
            task.abort();
            let _ = task.await;
        }
        let commits = self.tracker.all_commits();
        tracing::info!(
            ?commits,
            in_flight = self.tracker.in_flight(),
            "final commit"
        );
        // The client's own fatal state, in case no poll or check has seen it yet.
        if let Some((code, reason)) = self.consumer.client().fatal_error() {
            self.consumer
                .context()
                .record_fatal(format!("{code}: {reason}"));
        }
        let fatal = self.fatal_error();
        let lost = self.consumer.context().lost_commits.load(Ordering::Acquire);
        let result = if fatal.is_some() {
            // A fenced or otherwise finished client must not commit for the group.
            Ok(())
        } else {
            match tokio::time::timeout(
                FINISH_COMMIT_WAIT,
                commit_now(&self.consumer, &self.tracker, commits),
            )
            .await
            {
                Ok(Ok(())) => Ok(()),
                Ok(Err(source)) => Err(SourceError::KafkaClient {
                    what: "final commit failed; the uncommitted tail is redelivered on the next \
                           start"
                        .into(),
                    source,
                }),
                Err(_) => Err(SourceError::Kafka(format!(
                    "final commit did not complete within {FINISH_COMMIT_WAIT:?} (is the broker \
                     reachable?); the uncommitted tail is redelivered on the next start"
                ))),
            }
        };
        let result = match result {
            Ok(()) if lost > 0 => Err(SourceError::Kafka(format!(
                "the completed offsets of {lost} partition(s) could not be committed when they \
                 were revoked (no broker reachable); they are redelivered on the next start"
            ))),
            other => other,
        };
        // A graceful stop: the next start charges no death to what was in flight.
        if let Some(guard) = &self.poison {
            guard.release_all();
        }
        // From here on a revocation commits nothing (see `TrackingContext::closing`).
        self.consumer
            .context()
            .closing
            .store(true, Ordering::Release);
        if result.is_ok() && fatal.is_none() {
            // Leave the group now so partitions move to other members without waiting for the
            // session timeout (a static member keeps its partitions until it times out: that is
            // what lets it restart without a rebalance).
            let consumer = Arc::clone(&self.consumer);
            let leave = tokio::task::spawn_blocking(move || consumer.unsubscribe());
            if tokio::time::timeout(FINISH_LEAVE_WAIT, leave)
                .await
                .is_err()
            {
                tracing::warn!(
                    "leaving the consumer group did not finish; the broker times the member out"
                );
            }
        }
        if let Some(h) = &self.health
            && fatal.is_none()
        {
            h.set("kafka", ComponentHealth::Ok);
        }
        match fatal {
            Some(fatal) => Err(fatal),
            None => result,
        }
    }
}

impl KafkaSource {
    /// Raise a fatal error in the client exactly as the broker fencing this static member would
    /// (`FENCED_INSTANCE_ID`), through librdkafka's own test hook (`rd_kafka_test_fatal_error`):
    /// no broker we can run in tests fences (tansu 0.6 does not), so this is how the source's
    /// reaction to fencing is tested. Only in builds with the `test-hooks` feature.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn simulate_fencing(&self) {
        let reason = c"simulated: static consumer fenced by another consumer with the same group.instance.id";
        // SAFETY: the client pointer is valid while `self.consumer` lives, and the reason is a
        // NUL-terminated string that librdkafka copies.
        unsafe {
            rdkafka::bindings::rd_kafka_test_fatal_error(
                self.consumer.client().native_ptr(),
                rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID,
                reason.as_ptr(),
            );
        }
    }

    /// The client's fatal error, if it had one (the source stops on it).
    fn fatal_error(&self) -> Option<SourceError> {
        let fatal = self.consumer.context().fatal.get()?;
        let hint = match &self.settings.group_instance_id {
            Some(id) => {
                format!(" (with group_instance_id = {id:?}: is another process using the same id?)")
            }
            None => String::new(),
        };
        Some(SourceError::Kafka(format!(
            "fatal Kafka client error: {fatal}{hint}"
        )))
    }
}

impl Drop for KafkaSource {
    fn drop(&mut self) {
        if let Some(task) = self.committer.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_origin_names_topic_partition_and_offset() {
        assert_eq!(kafka_origin("agents", 2, 991), "kafka:agents/2@991");
        for (partition, offset) in [
            (0, 0),
            (-1, -1001),
            (i32::MAX, i64::MAX),
            (i32::MIN, i64::MIN),
        ] {
            assert_eq!(
                kafka_origin("agent-events.v2", partition, offset),
                format!("kafka:agent-events.v2/{partition}@{offset}")
            );
        }
    }
}
