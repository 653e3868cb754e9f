//! Where the review page reads rows, inputs and alerts and writes labels: a JSONL output
//! directory ([`JsonlStore`]) or ClickHouse ([`ClickHouseStore`]), behind [`ReviewStore`].
//!
//! Both give the same views: [`StoredRow`] (an evaluation row, whichever store encoded it),
//! [`EventInputs`], [`AlertView`] and [`HumanLabel`]. The JSONL store re-reads a file only when
//! its length or modification time changed; the ClickHouse store reads deduplicated rows
//! (`FINAL`) and the most recent `max_rows` evaluation rows for the overview and the queue
//! (without `details`, reused for [`RECENT_ROWS_TTL`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::alert::delivery::ALERTS_FILE;
use crate::clickhouse::rows::{ReadError, RowReader, bind_all, fetch_json, placeholders};
use crate::clickhouse::{EVENT_INPUTS_TABLE, LABELS_TABLE};
use crate::review::{EventInputs, HumanLabel, LabelVerdict};
use crate::sink::config::SinkConfig;
use crate::sink::jsonl::{EVALUATIONS_FILE, INPUTS_FILE};
use crate::stored::{StoredRow, blank_is_none, json_or_text, parse_time, rfc3339_time};

/// File name of labels inside a JSONL directory.
pub const LABELS_FILE: &str = "labels.jsonl";

/// Why the review store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// ClickHouse failed.
    #[error("clickhouse: {what}: {source}")]
    ClickHouse {
        /// What was being done.
        what: &'static str,
        /// Client error.
        #[source]
        source: clickhouse::error::Error,
    },
    /// A value could not be encoded.
    #[error("cannot encode {what}: {source}")]
    Encode {
        /// What.
        what: &'static str,
        /// Encoder error.
        #[source]
        source: serde_json::Error,
    },
}

fn time_value<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Number(n) => n.as_i64().unwrap_or(0),
        Value::String(s) => parse_time(&s)
            .or_else(|| s.parse::<i64>().ok())
            .unwrap_or(0),
        _ => 0,
    })
}

/// An `alerts` row (JSONL `alerts.jsonl` or ClickHouse), as the review page shows it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AlertView {
    /// Alert id (firing and resolved notifications share it).
    pub alert_id: String,
    /// When it fired (seconds since the epoch).
    #[serde(alias = "fired_epoch", deserialize_with = "time_value")]
    pub fired_at: i64,
    /// Series labels ('' when absent).
    #[serde(default)]
    pub app_id: String,
    /// Agent.
    #[serde(default)]
    pub agent_id: String,
    /// Agent version.
    #[serde(default)]
    pub agent_version: String,
    /// Model.
    #[serde(default)]
    pub model: String,
    /// Metric.
    #[serde(default)]
    pub metric: String,
    /// Rule.
    #[serde(default)]
    pub rule: String,
    /// Severity.
    #[serde(default)]
    pub severity: String,
    /// Baseline value.
    #[serde(default)]
    pub baseline: f64,
    /// Observed value.
    #[serde(default)]
    pub observed: f64,
    /// Recent samples the alert was computed on.
    #[serde(default, deserialize_with = "count_value")]
    pub events: u64,
    /// Human summary.
    #[serde(default)]
    pub message: String,
    /// Details (state, labels, …).
    #[serde(default, deserialize_with = "json_or_text")]
    pub details: Value,
}

fn count_value<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Number(n) => n.as_u64().unwrap_or(0),
        Value::String(s) => s.parse().unwrap_or(0),
        _ => 0,
    })
}

impl AlertView {
    /// Whether the alert is firing (its latest notification is not the resolution).
    pub fn is_firing(&self) -> bool {
        self.details.get("state").and_then(Value::as_str) == Some("firing")
    }

    /// Whether `row` belongs to the alert's series: every series label the alert carries
    /// (non-empty) equals the row's.
    pub fn covers(&self, row: &StoredRow) -> bool {
        let same =
            |want: &str, have: &Option<String>| want.is_empty() || have.as_deref() == Some(want);
        same(&self.app_id, &row.app_id)
            && same(&self.agent_id, &row.agent_id)
            && same(&self.agent_version, &row.agent_version)
            && same(&self.model, &row.model)
    }
}

/// A label as stored (ClickHouse: empty strings for no category/note).
#[derive(Debug, Clone, Deserialize)]
struct StoredLabel {
    event_id: String,
    reviewer: String,
    verdict: String,
    #[serde(default, deserialize_with = "blank_is_none")]
    category: Option<String>,
    #[serde(default, deserialize_with = "blank_is_none")]
    note: Option<String>,
    #[serde(alias = "labelled_at_utc", deserialize_with = "rfc3339_time")]
    labelled_at: String,
}

impl StoredLabel {
    fn into_label(self) -> Option<HumanLabel> {
        Some(HumanLabel {
            verdict: LabelVerdict::parse(&self.verdict)?,
            event_id: self.event_id,
            reviewer: self.reviewer,
            category: self.category,
            note: self.note,
            labelled_at: self.labelled_at,
        })
    }
}

/// What the review page reads and writes.
#[async_trait]
pub trait ReviewStore: Send + Sync {
    /// The evaluation rows the overview and the queue are computed over (a JSONL directory:
    /// all of them; ClickHouse: the most recent `max_rows`).
    async fn rows(&self) -> Result<Arc<Vec<StoredRow>>, StoreError>;
    /// Every row of one event and its inputs (`None` when not stored).
    async fn event(
        &self,
        event_id: &str,
    ) -> Result<(Vec<StoredRow>, Option<EventInputs>), StoreError>;
    /// Inputs of several events (for the queue's question column); missing ones are left out.
    async fn inputs_of(&self, ids: &[String]) -> Result<HashMap<String, EventInputs>, StoreError>;
    /// Alerts, newest first (the latest notification per alert).
    async fn alerts(&self) -> Result<Vec<AlertView>, StoreError>;
    /// Every row of the events `ids` (what the agreement monitor and `calibrate` pair with
    /// labels).
    async fn rows_of(&self, ids: &[String]) -> Result<Vec<StoredRow>, StoreError>;
    /// Labels, one per (event, reviewer): the newest.
    async fn labels(&self) -> Result<Vec<HumanLabel>, StoreError>;
    /// Store a (validated) label.
    async fn add_label(&self, label: &HumanLabel) -> Result<(), StoreError>;
    /// Where the data comes from, for the page footer (no credentials).
    fn describe(&self) -> String;
}

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

/// Parse a JSONL file, skipping lines that are not `T` (counted in a warning); a missing file
/// is empty (a directory before its first write).
pub fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>, StoreError> {
    match crate::stored::jsonl::read(path) {
        Ok(lines) => Ok(lines.skipping_unreadable(path, "readable")),
        Err(e) if e.is_not_found() => Ok(Vec::new()),
        Err(e) => Err(StoreError::Io {
            path: e.path,
            source: e.source,
        }),
    }
}

/// Labels from a JSONL file (the newest per event and reviewer).
pub fn labels_from_jsonl(path: &Path) -> Result<Vec<HumanLabel>, StoreError> {
    let stored: Vec<StoredLabel> = read_jsonl(path)?;
    Ok(crate::review::latest_labels(
        stored.into_iter().filter_map(StoredLabel::into_label),
    ))
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
            .map(|i| (i.event_id.clone(), i.clone()))
            .collect())
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

/// The latest notification per alert id (a resolution replaces its firing), newest first.
fn latest_alerts(all: Vec<AlertView>) -> Vec<AlertView> {
    let mut by_id: HashMap<String, AlertView> = HashMap::new();
    for alert in all {
        by_id.insert(alert.alert_id.clone(), alert);
    }
    let mut out: Vec<AlertView> = by_id.into_values().collect();
    out.sort_by(|a, b| {
        b.fired_at
            .cmp(&a.fired_at)
            .then(a.alert_id.cmp(&b.alert_id))
    });
    out
}

/// The review store over ClickHouse (`evaluations`, `event_inputs`, `alerts`, `labels`).
pub struct ClickHouseStore {
    reader: RowReader,
    settings: SinkConfig,
    max_rows: usize,
    /// The recent rows and when they were read (reused for [`RECENT_ROWS_TTL`]).
    recent: Mutex<Option<(std::time::Instant, Arc<Vec<StoredRow>>)>>,
}

/// How long the overview's and queue's rows are reused before ClickHouse is read again (a
/// reviewer moving through the queue does not re-read `max_rows` rows per click).
pub const RECENT_ROWS_TTL: std::time::Duration = std::time::Duration::from_secs(5);

impl ClickHouseStore {
    /// A store on the `[sink]` server; the overview and queue read the `max_rows` most recent
    /// evaluation rows.
    pub fn new(settings: &SinkConfig, max_rows: usize) -> ClickHouseStore {
        ClickHouseStore {
            reader: RowReader::new(settings),
            settings: settings.clone(),
            max_rows: max_rows.max(1),
            recent: Mutex::new(None),
        }
    }
}

impl From<ReadError> for StoreError {
    fn from(error: ReadError) -> StoreError {
        StoreError::ClickHouse {
            what: error.what,
            source: error.source,
        }
    }
}

/// A `labels` row as written.
#[derive(Debug, clickhouse::Row, Serialize)]
struct LabelRecord<'a> {
    event_id: &'a str,
    reviewer: &'a str,
    verdict: &'a str,
    category: &'a str,
    note: &'a str,
    labelled_at: u32,
}

#[async_trait]
impl ReviewStore for ClickHouseStore {
    async fn rows(&self) -> Result<Arc<Vec<StoredRow>>, StoreError> {
        {
            let cached = self.recent.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((at, rows)) = cached.as_ref()
                && at.elapsed() < RECENT_ROWS_TTL
            {
                return Ok(Arc::clone(rows));
            }
        }
        // The overview and the queue need `details` only for `ts_ex` counterexamples; the
        // event page reads an event's full rows.
        let rows = Arc::new(self.reader.recent(self.max_rows).await?);
        *self.recent.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((std::time::Instant::now(), Arc::clone(&rows)));
        Ok(rows)
    }

    async fn event(
        &self,
        event_id: &str,
    ) -> Result<(Vec<StoredRow>, Option<EventInputs>), StoreError> {
        let rows = self.reader.of_event(event_id).await?;
        let inputs = self.inputs_of(&[event_id.to_string()]).await?;
        Ok((rows, inputs.into_values().next()))
    }

    async fn inputs_of(&self, ids: &[String]) -> Result<HashMap<String, EventInputs>, StoreError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let sql = format!(
            "SELECT event_id, toString(ts, 'UTC') AS ts_utc, app_id, \
             agent_id, agent_version, model, run_id, question, enriched_question, sql, gold_sql, \
             result FROM {EVENT_INPUTS_TABLE} FINAL WHERE event_id IN ({})",
            placeholders(ids.len())
        );
        let found: Vec<EventInputs> = fetch_json(
            "read event inputs",
            bind_all(self.reader.client().query(&sql), ids),
        )
        .await?;
        Ok(found.into_iter().map(|i| (i.event_id.clone(), i)).collect())
    }

    async fn alerts(&self) -> Result<Vec<AlertView>, StoreError> {
        let all = fetch_json(
            "read alerts",
            self.reader.client().query(
                "SELECT alert_id, toUInt32(fired_at) AS fired_epoch, app_id, agent_id, \
                     agent_version, model, metric, rule, severity, baseline, observed, events, \
                     message, details FROM alerts FINAL ORDER BY fired_at DESC LIMIT 200",
            ),
        )
        .await?;
        Ok(latest_alerts(all))
    }

    async fn rows_of(&self, ids: &[String]) -> Result<Vec<StoredRow>, StoreError> {
        Ok(self.reader.of_events(ids).await?)
    }

    async fn labels(&self) -> Result<Vec<HumanLabel>, StoreError> {
        let sql = format!(
            "SELECT event_id, reviewer, verdict, category, note, toString(labelled_at, 'UTC') \
             AS labelled_at_utc FROM {LABELS_TABLE} FINAL"
        );
        let stored: Vec<StoredLabel> =
            fetch_json("read labels", self.reader.client().query(&sql)).await?;
        Ok(crate::review::latest_labels(
            stored.into_iter().filter_map(StoredLabel::into_label),
        ))
    }

    async fn add_label(&self, label: &HumanLabel) -> Result<(), StoreError> {
        let what = "write a label";
        let labelled_at = parse_time(&label.labelled_at)
            .unwrap_or_else(|| chrono::Utc::now().timestamp())
            .clamp(0, i64::from(u32::MAX)) as u32;
        let record = LabelRecord {
            event_id: &label.event_id,
            reviewer: &label.reviewer,
            verdict: label.verdict.as_str(),
            category: label.category.as_deref().unwrap_or(""),
            note: label.note.as_deref().unwrap_or(""),
            labelled_at,
        };
        let mut insert = self
            .reader
            .client()
            .insert::<LabelRecord<'_>>(LABELS_TABLE)
            .await
            .map_err(|source| StoreError::ClickHouse { what, source })?;
        insert
            .write(&record)
            .await
            .map_err(|source| StoreError::ClickHouse { what, source })?;
        insert
            .end()
            .await
            .map_err(|source| StoreError::ClickHouse { what, source })
    }

    fn describe(&self) -> String {
        format!(
            "ClickHouse {} / {} (the {} most recent rows)",
            crate::settings::redact_url(crate::clickhouse::url(&self.settings)),
            self.settings.database,
            self.max_rows
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_alert_notification_wins_and_says_whether_it_fires() {
        let firing =
            r#"{"alert_id":"x","fired_at":100,"app_id":"a","details":"{\"state\":\"firing\"}"}"#;
        let resolved = r#"{"alert_id":"x","fired_at":"1970-01-01 00:01:40","app_id":"a","details":{"state":"resolved"}}"#;
        let alerts = latest_alerts(vec![
            serde_json::from_str(firing).unwrap(),
            serde_json::from_str(resolved).unwrap(),
        ]);
        assert_eq!(alerts.len(), 1);
        assert_eq!(alerts[0].fired_at, 100);
        assert!(!alerts[0].is_firing());
    }

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
