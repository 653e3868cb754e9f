//! What every store reads back, whatever its kind: the [`ReviewStore`] seam (rows, a run's rows,
//! an event's rows and inputs, alerts, labels; and adding a label), the views it returns —
//! [`StoredRow`] (an evaluation row, whichever store encoded it), [`EventInputs`],
//! [`AlertView`] and [`HumanLabel`] — and [`StoreError`]. The two kinds implement it in
//! `jsonl_dir` and `clickhouse_db`; `open` picks one from `[sink]`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::review::{EventInputs, HumanLabel, LabelVerdict};
use crate::stores::{StoredRow, blank_is_none, json_or_text, parse_time, rfc3339_time};

/// File name of labels inside a JSONL directory.
pub const LABELS_FILE: &str = "labels.jsonl";

/// File name of alert rows inside a JSONL directory (one `alerts` row per line).
pub const ALERTS_FILE: &str = "alerts.jsonl";

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
pub(super) struct StoredLabel {
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
    pub(super) fn into_label(self) -> Option<HumanLabel> {
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
    /// Every row of one run (`report`, `audit`).
    async fn rows_of_run(&self, run_id: &str) -> Result<Vec<StoredRow>, StoreError>;
    /// Labels, one per (event, reviewer): the newest.
    async fn labels(&self) -> Result<Vec<HumanLabel>, StoreError>;
    /// Store a (validated) label.
    async fn add_label(&self, label: &HumanLabel) -> Result<(), StoreError>;
    /// The monitor's hourly cells and finding counts (`review_page::monitor`): a JSONL directory folds
    /// its rows; ClickHouse reads its `stef_monitor_hourly` rollup and one aggregate query.
    async fn monitor(&self) -> Result<crate::stores::monitor::MonitorData, StoreError>;
    /// The breakdowns' hourly cells per element and question type (`stores::breakdown`): a
    /// JSONL directory folds its rows; ClickHouse reads its `stef_breakdown_hourly` and
    /// `stef_breakdown_findings_hourly` rollups.
    async fn breakdown(&self) -> Result<crate::stores::breakdown::BreakdownData, StoreError>;
    /// Where the data comes from, for the page footer (no credentials).
    fn describe(&self) -> String;
}

/// Parse a JSONL file, skipping lines that are not `T` (counted in a warning); a missing file
/// is empty (a directory before its first write).
pub fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>, StoreError> {
    match crate::stores::jsonl::rows::read(path) {
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

/// The latest notification per alert id (a resolution replaces its firing), newest first.
pub(super) fn latest_alerts(all: Vec<AlertView>) -> Vec<AlertView> {
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
}
