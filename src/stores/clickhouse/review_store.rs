//! The ClickHouse store: reads deduplicated rows (`FINAL`) of `evaluations`, `event_inputs`,
//! `alerts` and `labels` on the `[clickhouse]` server (or cluster), the overview's and queue's
//! `max_rows` most recent evaluation rows (without `details`, reused for [`RECENT_ROWS_TTL`]),
//! and inserts labels.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::Serialize;

use crate::review::{EventInputs, HumanLabel};
use crate::stores::clickhouse::config::ClickHouseConfig;
use crate::stores::clickhouse::rows::{ReadError, RowReader, bind_all, fetch_json, placeholders};
use crate::stores::clickhouse::{EVENT_INPUTS_TABLE, LABELS_TABLE};
use crate::stores::read::{AlertView, ReviewStore, StoreError, StoredLabel, latest_alerts};
use crate::stores::{StoredRow, parse_time};

/// The review store over ClickHouse (`evaluations`, `event_inputs`, `alerts`, `labels`).
pub struct ClickHouseStore {
    reader: RowReader,
    settings: ClickHouseConfig,
    max_rows: usize,
    /// The recent rows and when they were read (reused for [`RECENT_ROWS_TTL`]).
    recent: Mutex<Option<(std::time::Instant, Arc<Vec<StoredRow>>)>>,
}

/// How long the overview's and queue's rows are reused before ClickHouse is read again (a
/// reviewer moving through the queue does not re-read `max_rows` rows per click).
pub const RECENT_ROWS_TTL: std::time::Duration = std::time::Duration::from_secs(5);

impl ClickHouseStore {
    /// A store on the `[clickhouse]` server; the overview and queue read the `max_rows` most recent
    /// evaluation rows.
    pub fn new(settings: &ClickHouseConfig, max_rows: usize) -> ClickHouseStore {
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

/// Days of the monitor rollup the page reads (back from its newest hour).
const MONITOR_DAYS: i64 = 90;
/// Cells and finding counts read at most (a bound on what the page holds).
const MONITOR_CELLS: usize = 200_000;

/// One hour of one series from `stef_monitor_hourly`, merged.
#[derive(Debug, serde::Deserialize)]
struct MonitorCellRecord {
    hour: i64,
    app_id: String,
    agent_id: String,
    agent_version: String,
    events: u64,
    scored: u64,
    flagged: u64,
    line_n: u64,
    phi_sum: f64,
    phi_sq: f64,
    p_sum: f64,
    p_sq: f64,
    judged_n: u64,
    phi_corr_sum: f64,
    phi_corr_sq: f64,
    p_corr_sum: f64,
    p_corr_sq: f64,
}

impl MonitorCellRecord {
    fn into_cell(self) -> crate::stores::monitor::MonitorCell {
        use crate::sampling::estimate::{Moments, SeriesEstimate};
        let moments = |n, sum, sum_sq| Moments { n, sum, sum_sq };
        crate::stores::monitor::MonitorCell {
            hour: self.hour,
            app: self.app_id,
            agent: self.agent_id,
            version: self.agent_version,
            events: self.events,
            scored: self.scored,
            flagged: self.flagged,
            estimate: SeriesEstimate {
                phi: moments(self.line_n, self.phi_sum, self.phi_sq),
                correct: moments(self.line_n, self.p_sum, self.p_sq),
                phi_correction: moments(self.judged_n, self.phi_corr_sum, self.phi_corr_sq),
                correct_correction: moments(self.judged_n, self.p_corr_sum, self.p_corr_sq),
            },
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
        Ok(found
            .into_iter()
            .map(|i| (i.event_id.to_string(), i))
            .collect())
    }

    async fn monitor(&self) -> Result<crate::stores::monitor::MonitorData, StoreError> {
        // The newest MONITOR_DAYS of the rollup (the charts draw at most 400 buckets).
        let cells: Vec<MonitorCellRecord> = fetch_json(
            "read the monitor rollup",
            self.reader.client().query(&format!(
                "SELECT toUInt32(hour) AS hour, app_id, agent_id, agent_version, \
                 toUInt32(uniqIfMerge(events)) AS events, toUInt32(uniqIfMerge(scored)) AS scored, \
                 toUInt32(uniqIfMerge(flagged)) AS flagged, toUInt32(countIfMerge(line_n)) AS line_n, \
                 sumIfMerge(phi_sum) AS phi_sum, sumIfMerge(phi_sq) AS phi_sq, \
                 sumIfMerge(p_sum) AS p_sum, sumIfMerge(p_sq) AS p_sq, \
                 toUInt32(countIfMerge(judged_n)) AS judged_n, \
                 sumIfMerge(phi_corr_sum) AS phi_corr_sum, sumIfMerge(phi_corr_sq) AS phi_corr_sq, \
                 sumIfMerge(p_corr_sum) AS p_corr_sum, sumIfMerge(p_corr_sq) AS p_corr_sq \
                 FROM stef_monitor_hourly \
                 WHERE hour >= (SELECT max(hour) FROM stef_monitor_hourly) - {MONITOR_DAYS} * 86400 \
                 GROUP BY hour, app_id, agent_id, agent_version \
                 ORDER BY hour LIMIT {MONITOR_CELLS}"
            )),
        )
        .await?;
        let findings: Vec<crate::stores::monitor::FindingCount> = fetch_json(
            "read finding counts",
            self.reader.client().query(&format!(
                "SELECT ifNull(app_id, '') AS app, ifNull(agent_id, '') AS agent, \
                 ifNull(agent_version, '') AS version, code, toUInt32(uniq(event_id)) AS events \
                 FROM evaluations ARRAY JOIN finding_codes AS code \
                 WHERE metric = 'stef' AND ts >= (SELECT max(hour) FROM stef_monitor_hourly) - {MONITOR_DAYS} * 86400 \
                 GROUP BY app, agent, version, code LIMIT {MONITOR_CELLS}"
            )),
        )
        .await?;
        Ok(crate::stores::monitor::MonitorData {
            cells: cells
                .into_iter()
                .map(MonitorCellRecord::into_cell)
                .collect(),
            findings,
        })
    }

    async fn breakdown(&self) -> Result<crate::stores::breakdown::BreakdownData, StoreError> {
        // The newest MONITOR_DAYS of the rollups, merged per hour, series and element.
        let cells = fetch_json(
            "read the breakdown rollup",
            self.reader.client().query(&format!(
                "SELECT toUInt32(hour) AS hour, app_id AS app, agent_id AS agent, \
                 agent_version AS version, dimension, element, \
                 toUInt32(uniqMerge(events)) AS events, toUInt32(uniqIfMerge(scored)) AS scored, \
                 toUInt32(uniqIfMerge(flagged)) AS flagged, sumIfMerge(p_sum) AS p_sum \
                 FROM stef_breakdown_hourly \
                 WHERE hour >= (SELECT max(hour) FROM stef_breakdown_hourly) - {MONITOR_DAYS} * 86400 \
                 GROUP BY hour, app_id, agent_id, agent_version, dimension, element \
                 LIMIT {MONITOR_CELLS}"
            )),
        )
        .await?;
        let findings = fetch_json(
            "read the breakdown findings rollup",
            self.reader.client().query(&format!(
                "SELECT toUInt32(hour) AS hour, app_id AS app, agent_id AS agent, \
                 agent_version AS version, dimension, element, code, \
                 toUInt32(uniqMerge(events)) AS events \
                 FROM stef_breakdown_findings_hourly \
                 WHERE hour >= (SELECT max(hour) FROM stef_breakdown_findings_hourly) - {MONITOR_DAYS} * 86400 \
                 GROUP BY hour, app_id, agent_id, agent_version, dimension, element, code \
                 LIMIT {MONITOR_CELLS}"
            )),
        )
        .await?;
        Ok(crate::stores::breakdown::BreakdownData { cells, findings })
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

    async fn rows_of_run(&self, run_id: &str) -> Result<Vec<StoredRow>, StoreError> {
        Ok(self.reader.of_run(run_id).await?)
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
            crate::settings::redact_url(crate::stores::clickhouse::url(&self.settings)),
            self.settings.database,
            self.max_rows
        )
    }
}
