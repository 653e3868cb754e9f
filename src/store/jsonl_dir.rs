//! The JSONL directory store: reads `evaluations.jsonl`, `inputs.jsonl`, `alerts.jsonl` and
//! `labels.jsonl` of the directory the JSONL sink writes, re-reading a file only when its length
//! or modification time changed, and appends labels (synced) to `labels.jsonl`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::read::{
    ALERTS_FILE, AlertView, LABELS_FILE, ReviewStore, StoreError, labels_from_jsonl, latest_alerts,
    read_jsonl,
};
use crate::review::{EventInputs, HumanLabel};
use crate::sink::jsonl::{EVALUATIONS_FILE, INPUTS_FILE};
use crate::stored::StoredRow;

/// A parsed file and the (length, modification time) it was parsed at.
struct Cached<T> {
    stamp: Option<(u64, std::time::SystemTime)>,
    value: Arc<Vec<T>>,
}

impl<T> Default for Cached<T> {
    fn default() -> Self {
        Cached {
            stamp: None,
            value: Arc::new(Vec::new()),
        }
    }
}

/// The review store over a JSONL output directory (`evaluations.jsonl`, `inputs.jsonl`,
/// `alerts.jsonl`; labels go to `labels.jsonl`).
pub struct JsonlStore {
    dir: PathBuf,
    max_rows: usize,
    rows: Mutex<Cached<StoredRow>>,
    inputs: Mutex<Cached<EventInputs>>,
    /// Serialises label appends.
    write: tokio::sync::Mutex<()>,
}

impl JsonlStore {
    /// A store over `dir` (files that do not exist yet read as empty).
    pub fn new(dir: impl Into<PathBuf>) -> JsonlStore {
        JsonlStore {
            dir: dir.into(),
            max_rows: usize::MAX,
            rows: Mutex::new(Cached::default()),
            inputs: Mutex::new(Cached::default()),
            write: tokio::sync::Mutex::new(()),
        }
    }

    /// Keep only the `max_rows` most recently written evaluation rows (the end of the file).
    pub fn with_max_rows(mut self, max_rows: usize) -> JsonlStore {
        self.max_rows = max_rows.max(1);
        self
    }

    fn cached<T: serde::de::DeserializeOwned + Send + Sync>(
        &self,
        cache: &Mutex<Cached<T>>,
        file: &str,
    ) -> Result<Arc<Vec<T>>, StoreError> {
        let path = self.dir.join(file);
        let stamp = match std::fs::metadata(&path) {
            Ok(m) => Some((m.len(), m.modified().unwrap_or(std::time::UNIX_EPOCH))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.stamp != stamp || stamp.is_none() {
            let mut values: Vec<T> = read_jsonl(&path)?;
            if values.len() > self.max_rows {
                values.drain(..values.len() - self.max_rows);
            }
            cache.value = Arc::new(values);
            cache.stamp = stamp;
        }
        Ok(Arc::clone(&cache.value))
    }
}

#[async_trait]
impl ReviewStore for JsonlStore {
    async fn rows(&self) -> Result<Arc<Vec<StoredRow>>, StoreError> {
        self.cached(&self.rows, EVALUATIONS_FILE)
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
        let inputs = self.cached(&self.inputs, INPUTS_FILE)?;
        let inputs = inputs
            .iter()
            .rev()
            .find(|i| i.event_id == event_id)
            .cloned();
        Ok((rows, inputs))
    }

    async fn inputs_of(&self, ids: &[String]) -> Result<HashMap<String, EventInputs>, StoreError> {
        let wanted: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
        let inputs = self.cached(&self.inputs, INPUTS_FILE)?;
        Ok(inputs
            .iter()
            .filter(|i| wanted.contains(i.event_id.as_str()))
            .map(|i| (i.event_id.to_string(), i.clone()))
            .collect())
    }

    async fn monitor(&self) -> Result<crate::stored::monitor::MonitorData, StoreError> {
        let rows = self.rows().await?;
        Ok(crate::stored::monitor::monitor_from_rows(&rows))
    }

    async fn alerts(&self) -> Result<Vec<AlertView>, StoreError> {
        let all: Vec<AlertView> = read_jsonl(&self.dir.join(ALERTS_FILE))?;
        Ok(latest_alerts(all))
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
        match crate::stored::jsonl::rows_of_run(&path, run_id) {
            Ok(rows) => Ok(rows),
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            Err(e) => Err(StoreError::Io {
                path: e.path,
                source: e.source,
            }),
        }
    }

    async fn labels(&self) -> Result<Vec<HumanLabel>, StoreError> {
        labels_from_jsonl(&self.dir.join(LABELS_FILE))
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
}
