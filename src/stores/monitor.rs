//! The monitor's read model: one series' numbers per hour ([`MonitorCell`]: counts and mergeable
//! moments) and the finding counts per series ([`FindingCount`]), what the review page's charts
//! and version comparison are drawn from (`review_page::monitor`). A store hands them over ready-made:
//! the JSONL store folds its rows with [`monitor_from_rows`]; ClickHouse reads the same numbers
//! from its `stef_monitor_hourly` rollup, so the page never reads every row of a database.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::evaluation::Metric;
use crate::sampling::estimate::SeriesEstimate;
use crate::stores::StoredRow;

/// Seconds in an hour (the cells' width).
pub const HOUR: i64 = 3_600;

/// One series' line-rate (`stef`) and uniform-slice (`stef_judged`) numbers in one hour.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MonitorCell {
    /// Start of the hour (seconds since the epoch, UTC).
    pub hour: i64,
    /// App ('' when absent).
    pub app: String,
    /// Agent.
    pub agent: String,
    /// Agent version.
    pub version: String,
    /// Events with a line-rate STEF row.
    pub events: u64,
    /// Of those, scored.
    pub scored: u64,
    /// Of the scored, those the line-rate verdict flags (not correct).
    pub flagged: u64,
    /// Φ and `p_correct` (the verdict as 0/1 where a row has none) of the scored, and the
    /// LLM-minus-line-rate corrections of the judged uniform slice.
    pub estimate: SeriesEstimate,
}

impl MonitorCell {
    /// Add another cell's numbers (same series; any hour).
    pub fn merge(&mut self, other: &MonitorCell) {
        self.events += other.events;
        self.scored += other.scored;
        self.flagged += other.flagged;
        let (a, b) = (&mut self.estimate, &other.estimate);
        a.phi.merge(&b.phi);
        a.correct.merge(&b.correct);
        a.phi_correction.merge(&b.phi_correction);
        a.correct_correction.merge(&b.correct_correction);
    }
}

/// Events of one series whose line-rate row carries a finding code.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingCount {
    /// App.
    pub app: String,
    /// Agent.
    pub agent: String,
    /// Agent version.
    pub version: String,
    /// The finding's code.
    pub code: String,
    /// Events with it.
    pub events: u64,
}

/// What a store hands the monitor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MonitorData {
    /// Hourly cells, any order.
    pub cells: Vec<MonitorCell>,
    /// Finding counts per series.
    pub findings: Vec<FindingCount>,
}

/// A series: the app, the agent and its version a row carries ('' for an absent label); ordered
/// by app, then agent, then version.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeriesKey {
    /// `app_id`.
    pub app: String,
    /// `agent_id`.
    pub agent: String,
    /// `agent_version`.
    pub version: String,
}

impl SeriesKey {
    /// The series of a stored row.
    pub fn of(row: &StoredRow) -> SeriesKey {
        SeriesKey {
            app: row.app_id.clone().unwrap_or_default(),
            agent: row.agent_id.clone().unwrap_or_default(),
            version: row.agent_version.clone().unwrap_or_default(),
        }
    }
}

/// The line-rate and uniform-slice rows folded into hourly cells and finding counts (the JSONL
/// store; ClickHouse computes the same in the database).
pub fn monitor_from_rows(rows: &[StoredRow]) -> MonitorData {
    let mut cells: BTreeMap<(i64, SeriesKey), MonitorCell> = BTreeMap::new();
    let mut findings: BTreeMap<(SeriesKey, String), BTreeSet<&str>> = BTreeMap::new();
    for row in rows {
        let is_line = row.metric == Metric::Stef;
        let is_uniform = row.metric == Metric::StefJudged
            && row.inclusion_probability.is_some()
            && row.is_scored();
        if !is_line && !is_uniform {
            continue;
        }
        let hour = row.epoch().div_euclid(HOUR) * HOUR;
        let key = SeriesKey::of(row);
        let cell = cells.entry((hour, key.clone())).or_default();
        if is_line {
            cell.events += 1;
            for code in finding_codes(row) {
                findings
                    .entry((key.clone(), code.to_string()))
                    .or_default()
                    .insert(row.event_id.as_str());
            }
            if !row.is_scored() {
                continue;
            }
            cell.scored += 1;
            cell.flagged += u64::from(!row.verdict_correct());
            cell.estimate.observe_line(row.value, row.line_rate_p());
        } else {
            let judged = row
                .semantic_verdict
                .as_deref()
                .is_some_and(crate::review::semantic_correct);
            cell.estimate.observe_judged(
                row.value,
                judged,
                row.revised_value.unwrap_or(row.value),
                row.revised_line_p(),
            );
        }
    }
    MonitorData {
        cells: cells
            .into_iter()
            .map(
                |(
                    (
                        hour,
                        SeriesKey {
                            app,
                            agent,
                            version,
                        },
                    ),
                    mut cell,
                )| {
                    cell.hour = hour;
                    cell.app = app;
                    cell.agent = agent;
                    cell.version = version;
                    cell
                },
            )
            .collect(),
        findings: findings
            .into_iter()
            .map(
                |(
                    (
                        SeriesKey {
                            app,
                            agent,
                            version,
                        },
                        code,
                    ),
                    events,
                )| FindingCount {
                    app,
                    agent,
                    version,
                    code,
                    events: events.len() as u64,
                },
            )
            .collect(),
    }
}

/// The finding codes of a line-rate row (`details.findings[].code`).
fn finding_codes(row: &StoredRow) -> impl Iterator<Item = &str> {
    row.details
        .get("findings")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|f| f.get("code")?.as_str())
}
