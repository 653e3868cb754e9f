//! The poison-event guard: a message that kills the process every time it is scored (a bug, a
//! limit missed, the kernel's OOM killer) must not stop the stream for good. Its offset is never
//! committed, so without this guard every restart would read it again and die again.
//!
//! How it knows, without a write per message in normal running:
//!
//! - **A marker per partition**, a small file under `[source.poison] dir` (one folder per
//!   consumer group), rewritten in place (one `pwrite`, no `fsync`: it must survive the
//!   process, not the machine) whenever a received batch is registered: the partition's lowest
//!   offset in flight and the highest handed out, and "not clean". A graceful stop or a
//!   revocation writes it clean. (Kafka's commit metadata would be the natural place, but
//!   brokers differ in keeping it — tansu drops it — so the marker lives beside the process;
//!   in Kubernetes on an `emptyDir`, which survives container restarts.)
//! - **A death** is a start that finds its partition's marker not clean. Every message of the
//!   window the marker names ([`Marker::from`]..=[`Marker::upto`]) may have been the one in
//!   flight: each is charged that death, and the source goes **serial** — one message at a
//!   time, the next one handed out only once the previous one was scored, its offset written
//!   to the marker first ([`Marker::alone`]) — until it is past every such window.
//! - **A death while serial** is charged to the one message that was being scored. A message
//!   whose charged deaths reach `after_deaths` (default 2) is not scored again: it is handed to
//!   the pipeline as a dead letter with the reason, and acknowledged like any other.
//!
//! So the first death with a poison event in flight costs one death and a serial pass over the
//! window, the second is charged to the poison event alone, and the third start dead-letters
//! it: two deaths, as `after_deaths = 2` says. A message that happens to be scored alone when
//! something else kills the process (a node drained without SIGTERM) is charged one death; it
//! is dead-lettered only if that happens again.

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
    /// Lowest offset in flight when the marker was written.
    pub from: i64,
    /// Highest offset handed out when the marker was written.
    pub upto: i64,
    /// Deaths charged to every message of `from..=upto` (deaths while not serial).
    pub window_deaths: u32,
    /// While serial: the offset being scored alone.
    pub alone: Option<i64>,
    /// Deaths charged to `alone` while it was scored alone.
    pub alone_deaths: u32,
    /// While serial: the source stays serial for this partition up to this offset.
    pub serial_upto: Option<i64>,
}

/// Bytes of a marker on disk: the JSON, padded with spaces, always this long, so one `pwrite`
/// replaces it whole.
const MARKER_BYTES: usize = 256;

impl Marker {
    fn encode(&self) -> [u8; MARKER_BYTES] {
        let mut out = [b' '; MARKER_BYTES];
        // Seven integers and two flags: far below the record's length.
        if let Ok(json) = serde_json::to_vec(self)
            && json.len() < MARKER_BYTES
        {
            out[..json.len()].copy_from_slice(&json);
            out[MARKER_BYTES - 1] = b'\n';
        }
        out
    }

    fn decode(bytes: &[u8]) -> Option<Marker> {
        serde_json::from_slice(bytes.trim_ascii()).ok()
    }

    /// Deaths charged to `offset`.
    fn deaths_of(&self, offset: i64) -> u32 {
        let window = if (self.from..=self.upto).contains(&offset) {
            self.window_deaths
        } else {
            0
        };
        let alone = if self.alone == Some(offset) {
            self.alone_deaths
        } else {
            0
        };
        window + alone
    }
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

    fn serial_for(&self, offset: i64) -> bool {
        self.marker.serial_upto.is_some_and(|upto| offset <= upto)
    }
}

/// The markers of one consumer group's partitions in this process.
pub struct PoisonGuard {
    dir: PathBuf,
    after_deaths: u32,
    partitions: Mutex<HashMap<(String, i32), PartitionGuard>>,
    /// Whether any partition is serial (read for every message handed out).
    serial: AtomicBool,
    /// While serial: the message being scored alone (topic, partition, offset).
    slot: Mutex<Option<(String, i32, i64)>>,
    /// Whether `slot` holds a message (read for every message scored and every batch stored).
    slot_taken: AtomicBool,
    /// Woken when the slot is freed.
    slot_free: tokio::sync::Notify,
}

impl std::fmt::Debug for PoisonGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoisonGuard")
            .field("dir", &self.dir)
            .field("after_deaths", &self.after_deaths)
            .finish_non_exhaustive()
    }
}

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
        Some(PoisonGuard {
            dir,
            after_deaths: config.after_deaths,
            partitions: Mutex::new(HashMap::new()),
            serial: AtomicBool::new(false),
            slot: Mutex::new(None),
            slot_taken: AtomicBool::new(false),
            slot_free: tokio::sync::Notify::new(),
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
        let mut bytes = [0u8; MARKER_BYTES];
        let read = file.read_at(&mut bytes, 0).unwrap_or(0);
        let before = Marker::decode(&bytes[..read]);
        let mut guard = PartitionGuard {
            file: Some(file),
            marker: Marker::default(),
            poison: None,
        };
        match before {
            Some(before) if !before.clean => {
                let mut marker = before.clone();
                if let Some(offset) = before.alone {
                    // Died with `offset` scored alone: charged to it.
                    marker.alone_deaths += 1;
                    let deaths = marker.deaths_of(offset);
                    tracing::warn!(
                        topic,
                        partition,
                        offset,
                        deaths,
                        "the process died while this message was being scored alone"
                    );
                    if deaths >= self.after_deaths {
                        guard.poison = Some((offset, deaths));
                    }
                } else if before.serial_upto.is_none() {
                    // Died with a window in flight: charged to every message of it.
                    marker.window_deaths = 1;
                    marker.serial_upto = Some(before.upto);
                    tracing::warn!(
                        topic,
                        partition,
                        from = before.from,
                        upto = before.upto,
                        "the process died with messages of this partition in flight; scoring them one at a time"
                    );
                }
                guard.marker = marker;
                guard.write();
            }
            _ => {}
        }
        guard
    }

    /// Run `f` on the partition's guard, opened (and its marker read) on first use.
    fn with<T>(&self, topic: &str, partition: i32, f: impl FnOnce(&mut PartitionGuard) -> T) -> T {
        let mut partitions = lock(&self.partitions);
        let key = (topic.to_string(), partition);
        let guard = match partitions.get_mut(&key) {
            Some(guard) => guard,
            None => {
                let opened = self.open(topic, partition);
                if opened.marker.serial_upto.is_some() {
                    self.serial.store(true, Ordering::Release);
                }
                partitions.entry(key).or_insert(opened)
            }
        };
        f(guard)
    }

    /// A received batch of `partition` was registered: `from` is its lowest offset in flight,
    /// `upto` the highest handed out so far. Writes the marker (not while serial: then each
    /// message writes its own).
    pub fn registered(&self, topic: &str, partition: i32, from: i64, upto: i64) {
        self.with(topic, partition, |guard| {
            if guard.marker.serial_upto.is_some() {
                return;
            }
            guard.marker = Marker {
                clean: false,
                from,
                upto,
                ..Marker::default()
            };
            guard.write();
        });
    }

    /// Whether any partition is serial (one atomic load; the source asks for every message).
    pub fn is_serial(&self) -> bool {
        self.serial.load(Ordering::Acquire)
    }

    /// Why the message at `offset` is to be dead-lettered instead of scored (it was in flight
    /// at `after_deaths` deaths), if it is; otherwise it is handed out alone.
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

    /// Wait until no message is being scored alone.
    pub async fn wait_slot(&self) {
        loop {
            let freed = self.slot_free.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if !self.slot_taken.load(Ordering::Acquire) {
                return;
            }
            freed.await;
        }
    }

    /// The message at `offset` is handed out alone (the slot is free): its offset goes into the
    /// marker first. Returns the reason to dead-letter it instead of scoring it, if it was in
    /// flight at `after_deaths` deaths.
    pub fn hand_out_alone(&self, topic: &str, partition: i32, offset: i64) -> Option<String> {
        let reason = self.quarantine_reason(topic, partition, offset);
        self.with(topic, partition, |guard| {
            if guard.marker.alone != Some(offset) {
                guard.marker.alone = Some(offset);
                guard.marker.alone_deaths = 0;
            }
            guard.marker.clean = false;
            guard.write();
        });
        *lock(&self.slot) = Some((topic.to_string(), partition, offset));
        self.slot_taken.store(true, Ordering::Release);
        reason
    }

    /// The message at this position was scored, dead-lettered or stored: if it was the one
    /// scored alone, the slot is freed (and its partition leaves serial mode when it was the
    /// last of its window). One atomic load when no message is alone.
    pub fn settled(&self, topic: &str, partition: i32, offset: i64) {
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

    /// The message at `offset` was scored alone: the partition's window ends after it when it
    /// was the last of it.
    fn scored_alone(&self, topic: &str, partition: i32, offset: i64) {
        self.with(topic, partition, |guard| {
            if guard.poison.is_some_and(|(p, _)| p <= offset) {
                guard.poison = None;
            }
            if !guard.serial_for(offset + 1) {
                // Past the window: back to batches.
                guard.marker = Marker {
                    clean: false,
                    from: offset + 1,
                    upto: offset,
                    ..Marker::default()
                };
            } else {
                guard.marker.alone = None;
                guard.marker.alone_deaths = 0;
            }
            guard.write();
        });
        self.update_serial();
    }

    /// Whether the message at `offset` falls in its partition's serial window.
    pub fn serial_for(&self, topic: &str, partition: i32, offset: i64) -> bool {
        self.with(topic, partition, |guard| guard.serial_for(offset))
    }

    fn update_serial(&self) {
        let any = lock(&self.partitions)
            .values()
            .any(|g| g.marker.serial_upto.is_some());
        self.serial.store(any, Ordering::Release);
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
        self.update_serial();
    }

    /// Every partition let go gracefully (the source's finish).
    pub fn release_all(&self) {
        let keys: Vec<(String, i32)> = lock(&self.partitions).keys().cloned().collect();
        self.release(keys.iter().map(|(t, p)| (t.as_str(), *p)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(dir: &Path) -> PoisonGuard {
        PoisonGuard::new(
            &PoisonConfig {
                after_deaths: 2,
                dir: Some(dir.to_path_buf()),
            },
            "group/with:odd chars",
        )
        .unwrap()
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
    }

    #[test]
    fn two_deaths_with_the_same_message_in_flight_quarantine_it() {
        let dir = tempfile::tempdir().unwrap();
        // First life: batches registered, then the process dies (no release).
        let g = guard(dir.path());
        g.registered("t", 0, 10, 20);
        g.registered("t", 1, 5, 5);
        drop(g);
        // Second life: both partitions are serial over their windows.
        let g = guard(dir.path());
        assert!(g.serial_for("t", 0, 10));
        assert!(g.serial_for("t", 1, 5));
        assert!(g.is_serial());
        assert!(!g.serial_for("t", 0, 21));
        assert_eq!(g.quarantine_reason("t", 0, 10), None);
        g.hand_out_alone("t", 0, 10);
        g.settled("t", 0, 10);
        assert_eq!(g.quarantine_reason("t", 0, 11), None);
        g.hand_out_alone("t", 0, 11);
        // ... and dies scoring offset 11 alone.
        drop(g);
        // Third life: offset 11 was in flight at both deaths.
        let g = guard(dir.path());
        let reason = g.hand_out_alone("t", 0, 11).expect("quarantined");
        assert!(reason.contains("died 2 times"), "{reason}");
        g.settled("t", 0, 11);
        // The others go on one at a time to the end of the window, then in batches.
        assert_eq!(g.quarantine_reason("t", 0, 12), None);
        for offset in 12..=20 {
            g.hand_out_alone("t", 0, offset);
            g.settled("t", 0, offset);
        }
        assert!(!g.serial_for("t", 0, 21));
        // Partition 1 is still serial once seen (its window was never passed).
        assert!(g.serial_for("t", 1, 5));
        assert!(g.is_serial());
        g.hand_out_alone("t", 1, 5);
        g.settled("t", 1, 5);
        assert!(!g.is_serial());
    }

    #[test]
    fn one_death_alone_outside_a_window_is_not_enough() {
        let dir = tempfile::tempdir().unwrap();
        let g = guard(dir.path());
        g.registered("t", 0, 0, 3);
        drop(g);
        let g = guard(dir.path());
        g.hand_out_alone("t", 0, 0);
        g.settled("t", 0, 0);
        drop(g); // dies between messages: nothing alone in flight
        let g = guard(dir.path());
        assert_eq!(g.quarantine_reason("t", 0, 1), None);
        assert!(g.serial_for("t", 0, 3));
    }

    #[test]
    fn markers_are_fixed_length_and_names_are_safe() {
        let m = Marker {
            clean: false,
            from: i64::MIN,
            upto: i64::MAX,
            window_deaths: u32::MAX,
            alone: Some(i64::MIN),
            alone_deaths: u32::MAX,
            serial_upto: Some(i64::MAX),
        };
        let bytes = m.encode();
        assert_eq!(Marker::decode(&bytes), Some(m));
        assert_eq!(Marker::decode(b""), None);
        assert_eq!(file_name("agents"), "agents");
        assert_ne!(file_name("a/b"), file_name("a_b"));
        assert!(!file_name("..").contains('/'));
        assert!(!file_name("../x").contains('/'));
    }
}
