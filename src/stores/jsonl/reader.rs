//! The JSONL directory store: reads `evaluations.jsonl`, `inputs.jsonl`, `alerts.jsonl` and
//! `labels.jsonl` of the directory the JSONL sink writes, and appends labels (synced) to
//! `labels.jsonl`.
//!
//! The evaluation rows and inputs are read **incrementally**: the sink only appends, so each
//! read parses only the lines added since the last one (from the byte offset it stopped at, up
//! to the last complete line), and starts over only when the file was replaced or truncated.
//! The reading runs on tokio's blocking pool, never on an async worker: with a 300 MB file a
//! full re-read took 2.5–3.5 s per page load and held the other requests meanwhile. While
//! reading, rows beyond `max_rows` are dropped from the front as it goes, so memory follows
//! `max_rows`, not the file.

use std::collections::HashMap;
use std::io::{BufRead as _, Seek as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::review::{EventInputs, HumanLabel};
use crate::stores::StoredRow;
use crate::stores::jsonl::writer::{EVALUATIONS_FILE, INPUTS_FILE};
use crate::stores::read::{
    ALERTS_FILE, AlertView, LABELS_FILE, ReviewStore, StoreError, labels_from_jsonl, latest_alerts,
    read_jsonl,
};

/// The values parsed from one file so far, and where the reading stopped.
struct Cached<T> {
    /// The file's identity (device, inode) when it was read: another file at the path (rotated,
    /// replaced) is read from the start.
    identity: Option<(u64, u64)>,
    /// Bytes consumed: the end of the last complete line read.
    offset: u64,
    /// The last `max_rows` values, in file order.
    value: Arc<Vec<T>>,
}

impl<T> Default for Cached<T> {
    fn default() -> Self {
        Cached {
            identity: None,
            offset: 0,
            value: Arc::new(Vec::new()),
        }
    }
}

/// Bring `cache` up to date with the file at `path`, keeping the last `max_rows` values.
fn refresh<T: serde::de::DeserializeOwned + Clone>(
    cache: &Mutex<Cached<T>>,
    path: &Path,
    max_rows: usize,
) -> Result<Arc<Vec<T>>, StoreError> {
    use std::os::unix::fs::MetadataExt as _;
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            *cache = Cached::default();
            return Ok(Arc::clone(&cache.value));
        }
        Err(source) => return Err(io(source)),
    };
    let meta = file.metadata().map_err(io)?;
    let identity = Some((meta.dev(), meta.ino()));
    if cache.identity != identity || meta.len() < cache.offset {
        *cache = Cached {
            identity,
            ..Cached::default()
        };
    }
    if meta.len() == cache.offset {
        return Ok(Arc::clone(&cache.value));
    }
    file.seek(std::io::SeekFrom::Start(cache.offset))
        .map_err(io)?;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let values = Arc::make_mut(&mut cache.value);
    let (mut consumed, mut skipped) = (0u64, 0usize);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line).map_err(io)?;
        if read == 0 || line.last() != Some(&b'\n') {
            // The end, or a line still being written: read it next time.
            break;
        }
        consumed += read as u64;
        if line.trim_ascii().is_empty() {
            continue;
        }
        match serde_json::from_slice::<T>(&line) {
            Ok(value) => values.push(value),
            Err(_) => skipped += 1,
        }
        // Dropped from the front in steps of a quarter: at most 1.25 × max_rows held.
        if values.len() >= max_rows.saturating_add(max_rows / 4).max(1024) {
            let excess = values.len() - max_rows;
            values.drain(..excess);
        }
    }
    if values.len() > max_rows {
        let excess = values.len() - max_rows;
        values.drain(..excess);
    }
    cache.offset += consumed;
    if skipped > 0 {
        tracing::warn!(skipped, path = %path.display(), "lines that are not readable were skipped");
    }
    Ok(Arc::clone(&cache.value))
}

/// Run a read of the file at `path` on the blocking pool.
async fn blocking<T: Send + 'static>(
    path: PathBuf,
    read: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(read).await.unwrap_or_else(|e| {
        Err(StoreError::Io {
            path,
            source: std::io::Error::other(e),
        })
    })
}

/// The review store over a JSONL output directory (`evaluations.jsonl`, `inputs.jsonl`,
/// `alerts.jsonl`; labels go to `labels.jsonl`).
pub struct JsonlStore {
    dir: PathBuf,
    max_rows: usize,
    rows: Arc<Mutex<Cached<StoredRow>>>,
    inputs: Arc<Mutex<Cached<EventInputs>>>,
    /// Serialises label appends.
    write: tokio::sync::Mutex<()>,
}

impl JsonlStore {
    /// A store over `dir` (files that do not exist yet read as empty).
    pub fn new(dir: impl Into<PathBuf>) -> JsonlStore {
        JsonlStore {
            dir: dir.into(),
            max_rows: usize::MAX,
            rows: Arc::default(),
            inputs: Arc::default(),
            write: tokio::sync::Mutex::new(()),
        }
    }

    /// Keep only the `max_rows` most recently written evaluation rows (the end of the file).
    pub fn with_max_rows(mut self, max_rows: usize) -> JsonlStore {
        self.max_rows = max_rows.max(1);
        self
    }

    /// The values of `file` so far, read on the blocking pool.
    async fn cached<T: serde::de::DeserializeOwned + Clone + Send + Sync + 'static>(
        &self,
        cache: &Arc<Mutex<Cached<T>>>,
        file: &str,
    ) -> Result<Arc<Vec<T>>, StoreError> {
        let (cache, path, max_rows) = (Arc::clone(cache), self.dir.join(file), self.max_rows);
        blocking(path.clone(), move || refresh(&cache, &path, max_rows)).await
    }
}

#[async_trait]
impl ReviewStore for JsonlStore {
    async fn rows(&self) -> Result<Arc<Vec<StoredRow>>, StoreError> {
        self.cached(&self.rows, EVALUATIONS_FILE).await
    }

    async fn event(
        &self,
        event_id: &str,
    ) -> Result<(Vec<StoredRow>, Option<EventInputs>), StoreError> {
        let rows = self.rows().await?;
        let rows: Vec<StoredRow> = rows
            .iter()
            .filter(|r| r.event_id == event_id)
            .cloned()
            .collect();
        let inputs = self.cached(&self.inputs, INPUTS_FILE).await?;
        let inputs = inputs
            .iter()
            .rev()
            .find(|i| i.event_id == event_id)
            .cloned();
        Ok((rows, inputs))
    }

    async fn inputs_of(&self, ids: &[String]) -> Result<HashMap<String, EventInputs>, StoreError> {
        let wanted: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
        let inputs = self.cached(&self.inputs, INPUTS_FILE).await?;
        Ok(inputs
            .iter()
            .filter(|i| wanted.contains(i.event_id.as_str()))
            .map(|i| (i.event_id.to_string(), i.clone()))
            .collect())
    }

    async fn monitor(&self) -> Result<crate::stores::monitor::MonitorData, StoreError> {
        let rows = self.rows().await?;
        Ok(crate::stores::monitor::monitor_from_rows(&rows))
    }

    async fn breakdown(&self) -> Result<crate::stores::breakdown::BreakdownData, StoreError> {
        let rows = self.rows().await?;
        Ok(crate::stores::breakdown::breakdown_from_rows(&rows))
    }

    async fn alerts(&self) -> Result<Vec<AlertView>, StoreError> {
        let path = self.dir.join(ALERTS_FILE);
        blocking(path.clone(), move || {
            read_jsonl::<AlertView>(&path).map(latest_alerts)
        })
        .await
    }

    async fn rows_of(&self, ids: &[String]) -> Result<Vec<StoredRow>, StoreError> {
        let wanted: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
        Ok(self
            .rows()
            .await?
            .iter()
            .filter(|r| wanted.contains(r.event_id.as_str()))
            .cloned()
            .collect())
    }

    async fn rows_of_run(&self, run_id: &str) -> Result<Vec<StoredRow>, StoreError> {
        let path = self.dir.join(EVALUATIONS_FILE);
        let run_id = run_id.to_string();
        blocking(
            path.clone(),
            move || match crate::stores::jsonl::rows::rows_of_run(&path, &run_id) {
                Ok(rows) => Ok(rows),
                Err(e) if e.is_not_found() => Ok(Vec::new()),
                Err(e) => Err(StoreError::Io {
                    path: e.path,
                    source: e.source,
                }),
            },
        )
        .await
    }

    async fn labels(&self) -> Result<Vec<HumanLabel>, StoreError> {
        let path = self.dir.join(LABELS_FILE);
        blocking(path.clone(), move || labels_from_jsonl(&path)).await
    }

    async fn add_label(&self, label: &HumanLabel) -> Result<(), StoreError> {
        use tokio::io::AsyncWriteExt as _;
        let path = self.dir.join(LABELS_FILE);
        let mut line = serde_json::to_vec(label).map_err(|source| StoreError::Encode {
            what: "label",
            source,
        })?;
        line.push(b'\n');
        let _guard = self.write.lock().await;
        let io = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        let mut file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .await
            .map_err(io)?;
        file.write_all(&line).await.map_err(io)?;
        file.sync_data().await.map_err(io)
    }

    fn describe(&self) -> String {
        format!("JSONL directory {}", self.dir.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::LabelVerdict;

    #[tokio::test]
    async fn jsonl_labels_append_and_the_newest_per_reviewer_wins() {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::new(dir.path());
        let label = |v: &str, t: &str| {
            HumanLabel::validated("e1", "ana", v, "", "", t.to_string()).unwrap()
        };
        store
            .add_label(&label("correct", "2026-01-01T00:00:00Z"))
            .await
            .unwrap();
        store
            .add_label(&label("incorrect", "2026-01-01T00:00:05Z"))
            .await
            .unwrap();
        let labels = store.labels().await.unwrap();
        assert_eq!(labels.len(), 1);
        assert_eq!(labels[0].verdict, LabelVerdict::Incorrect);
        assert!(store.rows().await.unwrap().is_empty());
    }

    fn row(id: usize) -> String {
        format!(
            "{{\"event_id\":\"e{id}\",\"metric\":\"ex\",\"value\":1.0,\"verdict\":true,\"status\":\"ok\"}}\n"
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rows_are_read_incrementally_and_again_when_the_file_is_replaced() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(EVALUATIONS_FILE);
        let store = JsonlStore::new(dir.path()).with_max_rows(4);
        let ids = |rows: &[StoredRow]| {
            rows.iter()
                .map(|r| r.event_id.to_string())
                .collect::<Vec<_>>()
        };
        assert!(store.rows().await.unwrap().is_empty());
        std::fs::write(&path, (0..3).map(row).collect::<String>()).unwrap();
        assert_eq!(ids(&store.rows().await.unwrap()), ["e0", "e1", "e2"]);
        // Appended: two whole lines and half of a third (still being written).
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        let third = row(5);
        write!(file, "{}{}not json\n{}", row(3), row(4), &third[..10]).unwrap();
        let held = store.rows().await.unwrap();
        assert_eq!(
            ids(&held),
            ["e1", "e2", "e3", "e4"],
            "the last 4, the half line not yet"
        );
        write!(file, "{}", &third[10..]).unwrap();
        assert_eq!(ids(&store.rows().await.unwrap()), ["e2", "e3", "e4", "e5"]);
        // What a reader held is unchanged by later reads.
        assert_eq!(ids(&held), ["e1", "e2", "e3", "e4"]);
        // Replaced by a shorter file: read from the start.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, row(9)).unwrap();
        assert_eq!(ids(&store.rows().await.unwrap()), ["e9"]);
        // Truncated in place: read from the start.
        std::fs::write(&path, "").unwrap();
        assert!(store.rows().await.unwrap().is_empty());
    }
}
