//! The poison-event guard: a message that kills the process every time it is scored (a bug, a
//! limit missed, the kernel's OOM killer) must not stop the stream for good. Its offset is never
//! committed, so without this guard every restart would read it again and die again.
//!
//! How it finds the message, without a write per message in normal running:
//!
//! - **A marker per partition**, a small file under `[source.poison] dir` (one folder per
//!   consumer group), rewritten in place (one `pwrite`, no `fsync`: it must survive the
//!   process, not the machine) whenever a received batch is registered: the partition's lowest
//!   offset in flight and the highest handed out, and "not clean". A graceful stop or a
//!   revocation writes it clean. (Kafka's commit metadata would be the natural place, but
//!   brokers differ in keeping it — tansu drops it — so the marker lives beside the process;
//!   in Kubernetes on an `emptyDir`, which survives container restarts.)
//! - **A death** is a start that finds its partition's marker not clean. Every message of the
//!   window the marker names may have been the one that killed it: each is charged that death,
//!   and the partition is **recovering** until it is past the window.
//! - **Recovering, first one message at a time**: each handed out alone (below), so the next
//!   death names the message — two deaths in all. A serial pass costs the pipeline's latency per
//!   message (about 0.2 ms on a 2-vCPU VM, `benches/README.md`), so a large window or slow
//!   scoring could take minutes: past `[source.poison] serial_budget_ms` (default 30 s, about
//!   what a death costs) the rest of the window runs at full concurrency instead.
//! - **While any partition recovers**, the guard keeps a durable **scoring record**
//!   (`scoring.record` beside the markers): the messages being scored right now, rewritten as
//!   each starts and ends (two small writes per message, only while recovering). A death at full
//!   concurrency names its suspects: the few messages being scored when it came (at most
//!   `pipeline.workers`), not the whole window.
//! - **A suspect** is scored **alone**: once every message handed out before it is stored, and
//!   with nothing handed out after it until it is scored (its offset in the marker first). A
//!   death while a message is alone — or while it was the only message being scored — is
//!   charged to it for certain. A message charged `after_deaths` deaths (default 2), the last of
//!   them for certain, is not scored again: it is handed to the pipeline as a dead letter with
//!   the reason, and acknowledged like any other.
//!
//! So a poison event costs two deaths when the serial pass reaches it within its budget, or when
//! nothing else was being scored beside it at the second death; three otherwise (the third with
//! it alone): the rest of the window is scored at full concurrency, the few other suspects
//! alone. Where the record
//! names nothing (it could not be written, or overflowed), the guard falls back to scoring the
//! whole window one message at a time, which always finds the message. A message that happens to
//! be scored alone when something else kills the process (a node drained without SIGTERM) is
//! charged one death; it is dead-lettered only if that happens again.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use super::lock;
pub use crate::sources::kafka::config::PoisonConfig;

/// The markers' folder for consumer group `group`.
pub fn group_dir(config: &PoisonConfig, group: &str) -> PathBuf {
    let base = config
        .dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("sqlgrade-poison"));
    base.join(file_name(group))
}

/// A name safe as one path component: letters, digits, `-`, `_` and `.` kept, the rest `_`,
/// with a hash of the original when anything was replaced (so two names never share a file).
fn file_name(name: &str) -> String {
    let kept: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if kept == name && !name.starts_with('.') && !name.is_empty() {
        kept
    } else {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        name.hash(&mut hasher);
        format!("{kept}-{:016x}", hasher.finish())
    }
}

/// What a partition's marker file holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// Written by a graceful stop or a revocation: nothing was in flight when the process let
    /// the partition go.
    pub clean: bool,
    /// Lowest offset in flight when the marker was written (the window's start while
    /// recovering).
    pub from: i64,
    /// Highest offset handed out when the marker was written (the window's end while
    /// recovering).
    pub upto: i64,
    /// Deaths charged to every message of `from..=upto` (the window a death found in flight).
    pub window_deaths: u32,
    /// Recovering from a death: the window `from..=upto` is not passed yet.
    pub recovering: bool,
    /// Deaths charged to single messages: (offset, deaths), each named by a scoring record or
    /// scored alone when the process died.
    pub charged: Vec<(i64, u32)>,
    /// Offsets to be scored alone (a death's suspects).
    pub suspects: Vec<i64>,
    /// Every message of the window is scored alone (the scoring record named nothing).
    pub serial: bool,
    /// The offset being scored alone.
    pub alone: Option<i64>,
}

/// Bytes of a marker on disk: the JSON, padded with spaces, always this long, so one `pwrite`
/// replaces it whole. Room for a few hundred suspects; a marker that would not fit drops its
/// suspects for the serial fallback (which always finds the message).
const MARKER_BYTES: usize = 8192;

impl Marker {
    /// The marker as `MARKER_BYTES` of padded JSON; one with too many suspects to fit drops
    /// them for the serial fallback.
    fn encode(&self) -> Vec<u8> {
        padded_json(self, MARKER_BYTES).unwrap_or_else(|| {
            let fallback = Marker {
                charged: Vec::new(),
                suspects: Vec::new(),
                serial: true,
                ..self.clone()
            };
            padded_json(&fallback, MARKER_BYTES).unwrap_or_else(|| vec![b' '; MARKER_BYTES])
        })
    }

    fn decode(bytes: &[u8]) -> Option<Marker> {
        decode_padded(bytes)
    }

    /// Deaths charged to `offset`: its window's, and its own.
    fn deaths_of(&self, offset: i64) -> u32 {
        let window = if (self.from..=self.upto).contains(&offset) {
            self.window_deaths
        } else {
            0
        };
        let own = self
            .charged
            .iter()
            .find(|(charged, _)| *charged == offset)
            .map_or(0, |(_, deaths)| *deaths);
        window + own
    }

    /// Charge `offset` one more death; its deaths now.
    fn charge(&mut self, offset: i64) -> u32 {
        match self
            .charged
            .iter_mut()
            .find(|(charged, _)| *charged == offset)
        {
            Some((_, deaths)) => *deaths += 1,
            None => self.charged.push((offset, 1)),
        }
        self.deaths_of(offset)
    }

    /// Whether the message at `offset` is to be scored alone.
    fn alone_for(&self, offset: i64) -> bool {
        self.recovering
            && ((self.serial && (self.from..=self.upto).contains(&offset))
                || self.suspects.contains(&offset))
    }

    /// Whether anything of this partition is still to be scored alone.
    fn has_alone_work(&self) -> bool {
        self.recovering && (self.serial || !self.suspects.is_empty())
    }
}

/// A message in the scoring record: topic, partition, offset.
type RecordedPosition = (String, i32, i64);

/// The scoring record on disk: while any partition recovers, the messages being scored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct ScoringRecord {
    /// Written while recording: a start that finds it active follows a death while recording.
    active: bool,
    /// More messages were being scored than the record holds: it names nothing.
    overflow: bool,
    /// The messages being scored.
    scoring: Vec<RecordedPosition>,
}

/// Bytes of the scoring record on disk (rewritten whole, as a marker): room for a few hundred
/// messages being scored at once, far more than `pipeline.workers`.
const RECORD_BYTES: usize = 16384;

impl ScoringRecord {
    /// The record as `RECORD_BYTES` of padded JSON; one too long to fit says it overflowed.
    fn encode(&self) -> Vec<u8> {
        padded_json(self, RECORD_BYTES).unwrap_or_else(|| {
            let overflow = ScoringRecord {
                active: self.active,
                overflow: true,
                scoring: Vec::new(),
            };
            padded_json(&overflow, RECORD_BYTES).unwrap_or_else(|| vec![b' '; RECORD_BYTES])
        })
    }

    fn decode(bytes: &[u8]) -> Option<ScoringRecord> {
        decode_padded(bytes)
    }
}

/// `value` as JSON padded with spaces to exactly `len` bytes (the last a newline), so one
/// `pwrite` replaces the file's whole content; `None` when the JSON does not fit.
fn padded_json<T: Serialize>(value: &T, len: usize) -> Option<Vec<u8>> {
    let json = serde_json::to_vec(value).ok()?;
    if json.len() >= len {
        return None;
    }
    let mut out = vec![b' '; len];
    out[..json.len()].copy_from_slice(&json);
    out[len - 1] = b'\n';
    Some(out)
}

/// What [`padded_json`] wrote, or `None` for an empty or unreadable file.
fn decode_padded<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    serde_json::from_slice(bytes.trim_ascii()).ok()
}

/// What the previous process's scoring record says of its death.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LastScoring {
    /// It was not recording (or stopped gracefully): the markers say everything.
    NotRecording,
    /// It died while recording, with these messages being scored.
    Named(Vec<RecordedPosition>),
    /// It died while recording, but the record names nothing usable (overflow, unreadable).
    Unknown,
}

/// One partition's marker and what this process decided from it.
struct PartitionGuard {
    file: Option<File>,
    marker: Marker,
    /// The offset to dead-letter, with its deaths.
    poison: Option<(i64, u32)>,
}

impl PartitionGuard {
    fn write(&mut self) {
        let Some(file) = &self.file else {
            return;
        };
        if let Err(error) = file.write_all_at(&self.marker.encode(), 0) {
            tracing::warn!(%error, "cannot write the poison-event marker; a crash loop on this partition would not be noticed");
            self.file = None;
        }
    }
}

/// The scoring record kept while recovering: the file and what it holds.
struct Recorder {
    file: Option<File>,
    record: ScoringRecord,
}

impl Recorder {
    fn write(&mut self, active: bool) {
        let Some(file) = &self.file else {
            return;
        };
        self.record.active = active;
        if let Err(error) = file.write_all_at(&self.record.encode(), 0) {
            tracing::warn!(%error, "cannot write the poison-event scoring record; a death while recovering falls back to one message at a time");
            self.file = None;
        }
    }
}

/// The markers of one consumer group's partitions in this process.
pub struct PoisonGuard {
    dir: PathBuf,
    after_deaths: u32,
    /// How long this process scores a window one message at a time before the rest of it runs
    /// at full concurrency.
    serial_budget: std::time::Duration,
    /// When this process handed out its first message alone.
    serial_started: std::sync::OnceLock<std::time::Instant>,
    /// What the previous process's scoring record named.
    last_scoring: LastScoring,
    partitions: Mutex<HashMap<(String, i32), PartitionGuard>>,
    /// Whether any partition recovers (read for every message scored: the scoring record is kept
    /// only then).
    recording: AtomicBool,
    /// Whether any partition has a message to score alone (read for every message handed out).
    serial: AtomicBool,
    /// The scoring record (its file, and the messages being scored while recording).
    recorder: Mutex<Recorder>,
    /// While a message is scored alone: which (topic, partition, offset).
    slot: Mutex<Option<RecordedPosition>>,
    /// Whether `slot` holds a message (read for every message scored and every batch stored).
    slot_taken: AtomicBool,
    /// Woken when the slot is freed.
    slot_free: tokio::sync::Notify,
    /// Messages handed out beside the serial pass (not to be scored alone) and not yet settled:
    /// the next message scored alone waits for them.
    handed_out: Mutex<Vec<RecordedPosition>>,
    /// Whether `handed_out` holds any (read for every message settled).
    handed_out_any: AtomicBool,
    /// Woken when `handed_out` empties.
    handed_out_settled: tokio::sync::Notify,
}

impl std::fmt::Debug for PoisonGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoisonGuard")
            .field("dir", &self.dir)
            .field("after_deaths", &self.after_deaths)
            .finish_non_exhaustive()
    }
}

/// The scoring record's file in the markers' folder.
const RECORD_FILE: &str = "scoring.record";

impl PoisonGuard {
    /// The guard for consumer group `group`; `None` when `after_deaths` is 0 (off). A folder
    /// that cannot be created turns the guard off with a warning: the stream goes on without it.
    pub fn new(config: &PoisonConfig, group: &str) -> Option<PoisonGuard> {
        if config.after_deaths == 0 {
            return None;
        }
        let dir = group_dir(config, group);
        if let Err(error) = std::fs::create_dir_all(&dir) {
            tracing::warn!(dir = %dir.display(), %error, "cannot create the poison-event markers' folder; a crash loop on one message would not be noticed");
            return None;
        }
        let (file, last_scoring) = open_record(&dir.join(RECORD_FILE));
        let mut recorder = Recorder {
            file,
            record: ScoringRecord::default(),
        };
        // What the last process recorded is read once; this one starts its own.
        recorder.write(false);
        Some(PoisonGuard {
            dir,
            after_deaths: config.after_deaths,
            serial_budget: std::time::Duration::from_millis(config.serial_budget_ms),
            serial_started: std::sync::OnceLock::new(),
            last_scoring,
            partitions: Mutex::new(HashMap::new()),
            recording: AtomicBool::new(false),
            serial: AtomicBool::new(false),
            recorder: Mutex::new(recorder),
            slot: Mutex::new(None),
            slot_taken: AtomicBool::new(false),
            slot_free: tokio::sync::Notify::new(),
            handed_out: Mutex::new(Vec::new()),
            handed_out_any: AtomicBool::new(false),
            handed_out_settled: tokio::sync::Notify::new(),
        })
    }

    /// The markers' folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn open(&self, topic: &str, partition: i32) -> PartitionGuard {
        let path = self
            .dir
            .join(format!("{}-{partition}.marker", file_name(topic)));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path);
        let file = match file {
            Ok(file) => file,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot open the poison-event marker");
                return PartitionGuard {
                    file: None,
                    marker: Marker::default(),
                    poison: None,
                };
            }
        };
        let mut bytes = vec![0u8; MARKER_BYTES];
        let read = file.read_at(&mut bytes, 0).unwrap_or(0);
        let before = Marker::decode(&bytes[..read]);
        let mut guard = PartitionGuard {
            file: Some(file),
            marker: Marker::default(),
            poison: None,
        };
        if let Some(before) = before
            && !before.clean
        {
            guard.marker = self.after_death(topic, partition, before, &mut guard.poison);
            guard.write();
        }
        guard
    }

    /// The marker after a death found `before` (not clean), and the poison event it names.
    fn after_death(
        &self,
        topic: &str,
        partition: i32,
        before: Marker,
        poison: &mut Option<(i64, u32)>,
    ) -> Marker {
        let mut marker = before.clone();
        if let Some(offset) = before.alone {
            // Died with `offset` scored alone: charged to it, for certain.
            let deaths = marker.charge(offset);
            tracing::warn!(
                topic,
                partition,
                offset,
                deaths,
                "the process died while this message was being scored alone"
            );
            if deaths >= self.after_deaths {
                *poison = Some((offset, deaths));
            }
            return marker;
        }
        if !before.recovering {
            // Died with a window in flight: charged to every message of it, scored one at a
            // time first.
            marker.window_deaths = 1;
            marker.recovering = true;
            marker.serial = !self.serial_budget.is_zero();
            tracing::warn!(
                topic,
                partition,
                from = before.from,
                upto = before.upto,
                "the process died with messages of this partition in flight; scoring them one at a time"
            );
            return marker;
        }
        // Died while recovering: the scoring record names the suspects.
        match &self.last_scoring {
            LastScoring::Named(scoring) if !scoring.is_empty() => {
                let mine: Vec<i64> = scoring
                    .iter()
                    .filter(|(t, p, _)| t == topic && *p == partition)
                    .map(|(_, _, offset)| *offset)
                    .collect();
                let certain = scoring.len() == 1;
                for offset in mine {
                    let deaths = marker.charge(offset);
                    tracing::warn!(
                        topic,
                        partition,
                        offset,
                        deaths,
                        suspects = scoring.len(),
                        "the process died while this message was being scored"
                    );
                    if certain && deaths >= self.after_deaths {
                        *poison = Some((offset, deaths));
                    }
                    if !marker.suspects.contains(&offset) {
                        marker.suspects.push(offset);
                    }
                }
            }
            // Not recording yet when it died (before this partition's first batch): nothing of
            // the window was being scored.
            LastScoring::NotRecording => {}
            // Nothing named (a death outside scoring, a record that could not be kept): the
            // whole window one message at a time, which always finds the message.
            LastScoring::Named(_) | LastScoring::Unknown => {
                marker.serial = true;
                tracing::warn!(
                    topic,
                    partition,
                    from = before.from,
                    upto = before.upto,
                    "the process died again while recovering and no message was named; scoring the window one at a time"
                );
            }
        }
        marker
    }

    /// Run `f` on the partition's guard, opened (and its marker read) on first use.
    fn with<T>(&self, topic: &str, partition: i32, f: impl FnOnce(&mut PartitionGuard) -> T) -> T {
        let mut partitions = lock(&self.partitions);
        let key = (topic.to_string(), partition);
        let guard = match partitions.get_mut(&key) {
            Some(guard) => guard,
            None => {
                let opened = self.open(topic, partition);
                let recovering = opened.marker.recovering;
                let serial = opened.marker.has_alone_work();
                let guard = partitions.entry(key).or_insert(opened);
                if recovering {
                    self.start_recording();
                }
                if serial {
                    self.serial.store(true, Ordering::Release);
                }
                guard
            }
        };
        f(guard)
    }

    fn start_recording(&self) {
        if !self.recording.swap(true, Ordering::AcqRel) {
            lock(&self.recorder).write(true);
        }
    }

    /// A received batch of `partition` was registered: `from` is its lowest offset in flight,
    /// `upto` the highest handed out so far. Writes the marker; a recovering partition keeps its
    /// window until `from` is past it (every message of it stored).
    pub fn registered(&self, topic: &str, partition: i32, from: i64, upto: i64) {
        let left_recovery = self.with(topic, partition, |guard| {
            let was_recovering = guard.marker.recovering;
            // A suspect scored after the window (recorded while recovering) keeps it open too.
            let end = guard
                .marker
                .suspects
                .iter()
                .copied()
                .fold(guard.marker.upto, i64::max);
            if was_recovering && from <= end {
                return false;
            }
            guard.marker = Marker {
                clean: false,
                from,
                upto,
                ..Marker::default()
            };
            guard.poison = None;
            guard.write();
            was_recovering
        });
        if left_recovery {
            self.update_modes();
        }
    }

    /// Whether any partition has a message to score alone (one atomic load; the source asks for
    /// every message).
    pub fn is_serial(&self) -> bool {
        self.serial.load(Ordering::Acquire)
    }

    /// Whether the message at `offset` is to be scored alone (a suspect, or the serial pass's
    /// window). A serial pass past its budget ends here: the rest of the window runs at full
    /// concurrency, recorded.
    pub fn alone_for(&self, topic: &str, partition: i32, offset: i64) -> bool {
        let over_budget = self
            .serial_started
            .get()
            .is_some_and(|started| started.elapsed() >= self.serial_budget);
        let (alone, ended) = self.with(topic, partition, |guard| {
            let marker = &mut guard.marker;
            if over_budget && marker.serial && !marker.suspects.contains(&offset) {
                marker.serial = false;
                tracing::warn!(
                    topic,
                    partition,
                    from = offset,
                    upto = marker.upto,
                    "one message at a time is over [source.poison] serial_budget_ms; the rest of the window at full concurrency, recording which messages are being scored"
                );
                guard.write();
                return (false, true);
            }
            (marker.alone_for(offset), false)
        });
        if ended {
            self.update_modes();
        }
        alone
    }

    /// Why the message at `offset` is to be dead-lettered instead of scored, if it is.
    fn quarantine_reason(&self, topic: &str, partition: i32, offset: i64) -> Option<String> {
        self.with(topic, partition, |guard| {
            if let Some((poison, deaths)) = guard.poison
                && poison == offset
            {
                return Some(format!(
                    "poison event: the process died {deaths} times while this message was in \
                     flight ([source.poison] after_deaths = {}); not scored again",
                    self.after_deaths
                ));
            }
            None
        })
    }

    /// A message not to be scored alone was handed out while a serial pass or suspects wait:
    /// the next one scored alone waits until it is settled.
    pub fn handed_out(&self, topic: &str, partition: i32, offset: i64) {
        lock(&self.handed_out).push((topic.to_string(), partition, offset));
        self.handed_out_any.store(true, Ordering::Release);
    }

    /// Wait until every message [`Self::handed_out`] is settled (scored, dead-lettered or stored).
    pub async fn wait_handed_out_settled(&self) {
        wait_until_clear(&self.handed_out_settled, &self.handed_out_any).await;
    }

    /// Wait until no message is being scored alone.
    pub async fn wait_slot(&self) {
        wait_until_clear(&self.slot_free, &self.slot_taken).await;
    }

    /// The message at `offset` is handed out alone (the slot is free, nothing else in the
    /// pipeline): its offset goes into the marker first. Returns the reason to dead-letter it
    /// instead of scoring it, if it was charged `after_deaths` deaths.
    pub fn hand_out_alone(&self, topic: &str, partition: i32, offset: i64) -> Option<String> {
        let reason = self.quarantine_reason(topic, partition, offset);
        self.serial_started.get_or_init(std::time::Instant::now);
        self.with(topic, partition, |guard| {
            guard.marker.alone = Some(offset);
            guard.marker.clean = false;
            guard.write();
        });
        *lock(&self.slot) = Some((topic.to_string(), partition, offset));
        self.slot_taken.store(true, Ordering::Release);
        reason
    }

    /// The message at this position starts being scored: while recording, it goes into the
    /// scoring record first. One atomic load otherwise.
    pub fn scoring(&self, topic: &str, partition: i32, offset: i64) {
        if !self.recording.load(Ordering::Acquire) {
            return;
        }
        let mut recorder = lock(&self.recorder);
        recorder
            .record
            .scoring
            .push((topic.to_string(), partition, offset));
        recorder.write(true);
    }

    /// The message at this position was scored, dead-lettered or stored: it leaves the scoring
    /// record; if it was the one scored alone, the slot is freed. Two atomic loads when not
    /// recovering.
    pub fn settled(&self, topic: &str, partition: i32, offset: i64) {
        if self.recording.load(Ordering::Acquire) {
            let mut recorder = lock(&self.recorder);
            let at = recorder
                .record
                .scoring
                .iter()
                .position(|(t, p, o)| t == topic && *p == partition && *o == offset);
            if let Some(at) = at {
                recorder.record.scoring.swap_remove(at);
                recorder.write(true);
            }
        }
        if self.handed_out_any.load(Ordering::Acquire) {
            let mut handed_out = lock(&self.handed_out);
            if let Some(at) = handed_out
                .iter()
                .position(|(t, p, o)| t == topic && *p == partition && *o == offset)
            {
                handed_out.swap_remove(at);
                if handed_out.is_empty() {
                    self.handed_out_any.store(false, Ordering::Release);
                    self.handed_out_settled.notify_waiters();
                }
            }
        }
        if !self.slot_taken.load(Ordering::Acquire) {
            return;
        }
        let mut slot = lock(&self.slot);
        let mine = slot
            .as_ref()
            .is_some_and(|(t, p, o)| t == topic && *p == partition && *o == offset);
        if !mine {
            return;
        }
        *slot = None;
        drop(slot);
        self.scored_alone(topic, partition, offset);
        self.slot_taken.store(false, Ordering::Release);
        self.slot_free.notify_waiters();
    }

    /// The message at `offset` was scored alone without a death: it is cleared.
    fn scored_alone(&self, topic: &str, partition: i32, offset: i64) {
        self.with(topic, partition, |guard| {
            if guard.poison.is_some_and(|(p, _)| p == offset) {
                guard.poison = None;
            }
            let marker = &mut guard.marker;
            marker.alone = None;
            marker.suspects.retain(|o| *o != offset);
            marker.charged.retain(|(o, _)| *o != offset);
            if marker.serial && offset >= marker.upto {
                marker.serial = false;
            }
            guard.write();
        });
        self.update_modes();
    }

    /// Whether the message at `offset` falls in its partition's recovering window.
    pub fn recovering_for(&self, topic: &str, partition: i32, offset: i64) -> bool {
        self.with(topic, partition, |guard| {
            guard.marker.recovering && (guard.marker.from..=guard.marker.upto).contains(&offset)
        })
    }

    fn update_modes(&self) {
        let partitions = lock(&self.partitions);
        let serial = partitions.values().any(|g| g.marker.has_alone_work());
        let recording = partitions.values().any(|g| g.marker.recovering);
        drop(partitions);
        self.serial.store(serial, Ordering::Release);
        if !recording && self.recording.swap(false, Ordering::AcqRel) {
            let mut recorder = lock(&self.recorder);
            recorder.record.scoring.clear();
            recorder.write(false);
        }
    }

    /// The partitions were let go gracefully (revoked, or the source stopped after its final
    /// commit): their markers are written clean and forgotten.
    pub fn release<'a>(&self, partitions: impl IntoIterator<Item = (&'a str, i32)>) {
        let mut map = lock(&self.partitions);
        for (topic, partition) in partitions {
            if let Some(mut guard) = map.remove(&(topic.to_string(), partition)) {
                guard.marker = Marker {
                    clean: true,
                    ..guard.marker
                };
                guard.write();
            }
        }
        drop(map);
        self.update_modes();
    }

    /// Every partition let go gracefully (the source's finish).
    pub fn release_all(&self) {
        let keys: Vec<(String, i32)> = lock(&self.partitions).keys().cloned().collect();
        self.release(keys.iter().map(|(t, p)| (t.as_str(), *p)));
        let mut recorder = lock(&self.recorder);
        recorder.record.scoring.clear();
        recorder.write(false);
    }
}

/// Open the scoring record at `path`, and what the previous process left in it.
fn open_record(path: &Path) -> (Option<File>, LastScoring) {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path);
    let file = match file {
        Ok(file) => file,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "cannot open the poison-event scoring record; a death while recovering falls back to one message at a time");
            return (None, LastScoring::Unknown);
        }
    };
    let mut bytes = vec![0u8; RECORD_BYTES];
    let read = file.read_at(&mut bytes, 0).unwrap_or(0);
    let last = match ScoringRecord::decode(&bytes[..read]) {
        None if read == 0 => LastScoring::NotRecording,
        None => LastScoring::Unknown,
        Some(record) if !record.active => LastScoring::NotRecording,
        Some(record) if record.overflow => LastScoring::Unknown,
        Some(record) => LastScoring::Named(record.scoring),
    };
    (Some(file), last)
}

/// Wait until `flag` is false; whoever clears it calls `cleared.notify_waiters()`. The waiter
/// registers before it reads the flag, so a clearing between the read and the wait is not
/// missed.
async fn wait_until_clear(cleared: &tokio::sync::Notify, flag: &AtomicBool) {
    loop {
        let notified = cleared.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if !flag.load(Ordering::Acquire) {
            return;
        }
        notified.await;
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    /// A guard whose serial pass ends at once: recovery at full concurrency, recorded.
    fn guard(dir: &Path) -> PoisonGuard {
        guard_with_budget(dir, 0)
    }

    fn guard_with_budget(dir: &Path, serial_budget_ms: u64) -> PoisonGuard {
        PoisonGuard::new(
            &PoisonConfig {
                after_deaths: 2,
                serial_budget_ms,
                dir: Some(dir.to_path_buf()),
            },
            "group/with:odd chars",
        )
        .unwrap()
    }

    /// Within its budget the window is scored one message at a time: the second death is the
    /// poison event's alone, and it is quarantined at the third start.
    #[test]
    fn within_the_budget_the_window_goes_one_at_a_time_and_two_deaths_find_the_poison() {
        let dir = tempfile::tempdir().unwrap();
        let g = guard_with_budget(dir.path(), 60_000);
        g.registered("t", 0, 10, 20);
        drop(g);
        let g = guard_with_budget(dir.path(), 60_000);
        assert!(g.alone_for("t", 0, 10));
        assert!(g.is_serial());
        assert_eq!(g.hand_out_alone("t", 0, 10), None);
        g.scoring("t", 0, 10);
        g.settled("t", 0, 10);
        assert!(g.alone_for("t", 0, 11));
        assert_eq!(g.hand_out_alone("t", 0, 11), None);
        g.scoring("t", 0, 11);
        drop(g); // dies scoring offset 11 alone
        let g = guard_with_budget(dir.path(), 60_000);
        let reason = g.hand_out_alone("t", 0, 11).expect("quarantined");
        assert!(reason.contains("died 2 times"), "{reason}");
        g.settled("t", 0, 11);
        for offset in 12..=20 {
            assert!(g.alone_for("t", 0, offset));
            assert_eq!(g.hand_out_alone("t", 0, offset), None);
            g.settled("t", 0, offset);
        }
        assert!(!g.is_serial());
    }

    #[test]
    fn a_clean_stop_charges_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let g = guard(dir.path());
        g.registered("t", 0, 10, 20);
        g.release_all();
        drop(g);
        let g = guard(dir.path());
        g.registered("t", 0, 21, 30);
        assert!(!g.is_serial());
        assert!(!g.recovering_for("t", 0, 21));
    }

    /// The process dies with a window in flight, then again while the poison event was the only
    /// message being scored: two deaths, the rest of the window at full concurrency.
    #[test]
    fn a_message_scored_by_itself_at_the_second_death_is_quarantined() {
        let dir = tempfile::tempdir().unwrap();
        let g = guard(dir.path());
        g.registered("t", 0, 10, 20);
        g.registered("t", 1, 5, 5);
        drop(g);
        // Second life: recovering, nothing alone; what is scored is recorded.
        let g = guard(dir.path());
        assert!(g.recovering_for("t", 0, 10));
        assert!(!g.alone_for("t", 0, 10));
        assert!(!g.is_serial());
        for offset in [10, 12] {
            g.scoring("t", 0, offset);
            g.settled("t", 0, offset);
        }
        g.scoring("t", 0, 11);
        drop(g); // dies scoring offset 11
        // Third life: 11 was the one message being scored.
        let g = guard(dir.path());
        assert!(g.alone_for("t", 0, 11));
        assert!(!g.alone_for("t", 0, 12));
        assert!(g.is_serial());
        let reason = g.hand_out_alone("t", 0, 11).expect("quarantined");
        assert!(reason.contains("died 2 times"), "{reason}");
        g.scoring("t", 0, 11);
        g.settled("t", 0, 11);
        assert!(!g.is_serial());
        // Partition 1 was in flight at the first death but not being scored at the second.
        assert!(g.recovering_for("t", 1, 5));
        assert!(!g.alone_for("t", 1, 5));
        // Past the window once every message of it is stored: recording stops.
        g.registered("t", 0, 21, 30);
        assert!(!g.recovering_for("t", 0, 21));
        g.registered("t", 1, 6, 9);
        assert!(!g.recording.load(Ordering::Acquire));
    }

    /// Two messages were being scored at the second death: each is scored alone; the innocent
    /// one is cleared, the poison event dies alone and is quarantined at the third start.
    #[test]
    fn suspects_scored_beside_each_other_are_scored_alone_and_only_the_poison_is_quarantined() {
        let dir = tempfile::tempdir().unwrap();
        let g = guard(dir.path());
        g.registered("t", 0, 10, 20);
        drop(g);
        let g = guard(dir.path());
        g.registered("t", 0, 10, 20);
        g.scoring("t", 0, 11);
        g.scoring("t", 0, 12);
        drop(g);
        let g = guard(dir.path());
        assert!(g.alone_for("t", 0, 11) && g.alone_for("t", 0, 12));
        assert!(!g.alone_for("t", 0, 13));
        assert_eq!(g.hand_out_alone("t", 0, 11), None);
        g.scoring("t", 0, 11);
        g.settled("t", 0, 11);
        assert!(!g.alone_for("t", 0, 11));
        assert_eq!(g.hand_out_alone("t", 0, 12), None);
        g.scoring("t", 0, 12);
        drop(g); // dies with 12 alone
        let g = guard(dir.path());
        assert_eq!(g.quarantine_reason("t", 0, 11), None);
        let reason = g.hand_out_alone("t", 0, 12).expect("quarantined");
        assert!(reason.contains("died 3 times"), "{reason}");
        g.settled("t", 0, 12);
        assert!(!g.is_serial());
    }

    /// A serial pass over its budget hands the rest of the window out at full concurrency; a
    /// death there that names nothing (between messages) goes back to one at a time, which
    /// always finds the message.
    #[test]
    fn past_the_budget_full_concurrency_and_a_death_that_names_nothing_goes_serial_again() {
        let dir = tempfile::tempdir().unwrap();
        let g = guard_with_budget(dir.path(), 1);
        g.registered("t", 0, 0, 5);
        drop(g);
        let g = guard_with_budget(dir.path(), 1);
        assert!(g.alone_for("t", 0, 0));
        g.hand_out_alone("t", 0, 0);
        g.scoring("t", 0, 0);
        g.settled("t", 0, 0);
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(!g.alone_for("t", 0, 1));
        assert!(!g.is_serial());
        g.scoring("t", 0, 1);
        g.settled("t", 0, 1);
        drop(g); // dies between messages
        let g = guard_with_budget(dir.path(), 1);
        assert_eq!(g.quarantine_reason("t", 0, 2), None);
        assert!(g.is_serial());
        assert!(g.alone_for("t", 0, 2));
    }

    #[test]
    fn markers_are_fixed_length_and_names_are_safe() {
        let m = Marker {
            clean: false,
            from: i64::MIN,
            upto: i64::MAX,
            window_deaths: u32::MAX,
            recovering: true,
            charged: vec![(i64::MIN, u32::MAX)],
            suspects: vec![i64::MAX],
            serial: false,
            alone: Some(i64::MIN),
        };
        let bytes = m.encode();
        assert_eq!(bytes.len(), MARKER_BYTES);
        assert_eq!(Marker::decode(&bytes), Some(m.clone()));
        // Too many suspects to keep: the serial fallback instead.
        let crowded = Marker {
            suspects: (0..2_000).collect(),
            ..m
        };
        let kept = Marker::decode(&crowded.encode()).unwrap();
        assert!(kept.serial && kept.suspects.is_empty());
        assert_eq!(Marker::decode(b""), None);
        let record = ScoringRecord {
            active: true,
            overflow: false,
            scoring: (0..5_000).map(|o| ("topic".to_string(), 0, o)).collect(),
        };
        let kept = ScoringRecord::decode(&record.encode()).unwrap();
        assert!(kept.overflow && kept.scoring.is_empty());
        assert_eq!(file_name("agents"), "agents");
        assert_ne!(file_name("a/b"), file_name("a_b"));
        assert!(!file_name("..").contains('/'));
        assert!(!file_name("../x").contains('/'));
    }
}
