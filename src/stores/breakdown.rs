//! Where the agent goes wrong: line-rate events counted per schema element — the tables,
//! columns and join edges the SQL reads (`details.reads`) — and per question type
//! (`details.question_type`), per hour and series ([`BreakdownCell`]), with the findings that
//! name each element ([`BreakdownFinding`]); and the one computation over them that the review
//! page and `sqlgrade breakdown` both show ([`breakdown`]): per element, events, flagged, the
//! share flagged with its 95 % interval, mean `p_correct`, the top findings, and the change
//! against the previous window and against another version, with an interval of the difference.
//!
//! A store hands the cells over ready-made, like the monitor's: the JSONL store folds its rows
//! with [`breakdown_from_rows`]; ClickHouse reads its `stef_breakdown_hourly` and
//! `stef_breakdown_findings_hourly` rollups (migration 018), so a page never scans the rows.
//! An event that reads three tables counts once under each; "not scored" rows count as events,
//! never as flagged or in a mean.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::evaluation::Metric;
use crate::sampling::estimate::wilson_interval;
use crate::stef::elements::question_type_label;
use crate::stores::StoredRow;
use crate::stores::monitor::HOUR;

/// What the events are counted by.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    /// A table the SQL reads.
    Table,
    /// A column the SQL reads (`table.column`).
    Column,
    /// A join edge (`a.x = b.y`).
    Join,
    /// The question's type (`intent:subjects`), read from the question alone.
    QuestionType,
}

impl Dimension {
    /// Every dimension.
    pub const ALL: [Dimension; 4] = [
        Dimension::Table,
        Dimension::Column,
        Dimension::Join,
        Dimension::QuestionType,
    ];

    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::Table => "table",
            Dimension::Column => "column",
            Dimension::Join => "join",
            Dimension::QuestionType => "question_type",
        }
    }

    /// The dimension a stored name names.
    pub fn parse(name: &str) -> Option<Dimension> {
        Dimension::ALL.into_iter().find(|d| d.as_str() == name)
    }

    /// The `details.reads` key of a schema dimension.
    fn reads_key(self) -> Option<&'static str> {
        match self {
            Dimension::Table => Some("tables"),
            Dimension::Column => Some("columns"),
            Dimension::Join => Some("joins"),
            Dimension::QuestionType => None,
        }
    }
}

/// One hour of one series for one element of one dimension.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BreakdownCell {
    /// Start of the hour (seconds since the epoch, UTC).
    pub hour: i64,
    /// App ('' when absent).
    pub app: String,
    /// Agent.
    pub agent: String,
    /// Agent version.
    pub version: String,
    /// The dimension's stored name.
    pub dimension: String,
    /// The element (`superhero`, `superhero.id`, `count:superhero`).
    pub element: String,
    /// Events with a line-rate row reading the element.
    pub events: u64,
    /// Of those, scored.
    pub scored: u64,
    /// Of the scored, flagged by the line-rate verdict.
    pub flagged: u64,
    /// Sum of `p_correct` (the verdict as 0/1 where a row has none) over the scored.
    pub p_sum: f64,
}

/// Events of one series in one hour whose finding of `code` names the element — whether or not
/// the query reads it (`superhero.superhero_name` for a name never returned) — or, for a
/// question type, every finding of its events.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakdownFinding {
    /// Start of the hour.
    pub hour: i64,
    /// App.
    pub app: String,
    /// Agent.
    pub agent: String,
    /// Agent version.
    pub version: String,
    /// The dimension's stored name.
    pub dimension: String,
    /// The element.
    pub element: String,
    /// The finding's code.
    pub code: String,
    /// Events.
    pub events: u64,
}

/// What a store hands the breakdowns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BreakdownData {
    /// Hourly cells, any order.
    pub cells: Vec<BreakdownCell>,
    /// Hourly finding counts per element, any order.
    pub findings: Vec<BreakdownFinding>,
}

/// The strings of `value[key]`, when it is an array.
fn strings(value: Option<&Value>) -> impl Iterator<Item = &str> {
    value
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// The elements of one dimension a line-rate row reads.
fn row_elements(row: &StoredRow, dimension: Dimension) -> Vec<&str> {
    match dimension.reads_key() {
        Some(key) => strings(row.details.get("reads").and_then(|r| r.get(key))).collect(),
        None => row
            .details
            .get("question_type")
            .and_then(Value::as_str)
            .filter(|k| !k.is_empty())
            .into_iter()
            .collect(),
    }
}

/// An element's readable label: a question type's ([`question_type_label`]), else the element.
pub fn label_of(dimension: Dimension, element: &str) -> String {
    match dimension {
        Dimension::QuestionType => question_type_label(element),
        _ => element.to_string(),
    }
}

/// Whether a line-rate row reads `spec`, `<dimension>:<element>` (`table:superhero`,
/// `question_type:count:molecule`): what the review queue's `element` filter keeps.
pub fn row_has_element(row: &StoredRow, spec: &str) -> bool {
    let Some((dimension, element)) = spec.split_once(':') else {
        return false;
    };
    Dimension::parse(dimension).is_some_and(|d| row_elements(row, d).contains(&element))
}

/// The line-rate rows folded into hourly cells and finding counts (the JSONL store; ClickHouse
/// computes the same in the database).
pub fn breakdown_from_rows(rows: &[StoredRow]) -> BreakdownData {
    type Key = (i64, String, String, String, &'static str, String);
    let mut cells: BTreeMap<Key, BreakdownCell> = BTreeMap::new();
    let mut findings: BTreeMap<(Key, String), BTreeSet<&str>> = BTreeMap::new();
    for row in rows.iter().filter(|r| r.metric == Metric::Stef) {
        let hour = row.epoch().div_euclid(HOUR) * HOUR;
        let series = (
            row.app_id.clone().unwrap_or_default(),
            row.agent_id.clone().unwrap_or_default(),
            row.agent_version.clone().unwrap_or_default(),
        );
        let row_findings: Vec<&Value> = row
            .details
            .get("findings")
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let key = |dimension: Dimension, element: &str| -> Key {
            (
                hour,
                series.0.clone(),
                series.1.clone(),
                series.2.clone(),
                dimension.as_str(),
                element.to_string(),
            )
        };
        for dimension in Dimension::ALL {
            let read = row_elements(row, dimension);
            for element in &read {
                let cell = cells.entry(key(dimension, element)).or_default();
                cell.events += 1;
                if row.is_scored() {
                    cell.scored += 1;
                    cell.flagged += u64::from(!row.verdict_correct());
                    cell.p_sum += row.line_rate_p();
                }
            }
            // What each finding names (a column the query should have read, too); for a
            // question type, every finding of the event.
            for finding in &row_findings {
                let Some(code) = finding.get("code").and_then(Value::as_str) else {
                    continue;
                };
                let named: Vec<&str> = match dimension.reads_key() {
                    Some(k) => strings(finding.get("elements").and_then(|e| e.get(k))).collect(),
                    None => read.clone(),
                };
                for element in named {
                    findings
                        .entry((key(dimension, element), code.to_string()))
                        .or_default()
                        .insert(row.event_id.as_str());
                }
            }
        }
    }
    BreakdownData {
        cells: cells
            .into_iter()
            .map(
                |((hour, app, agent, version, dimension, element), cell)| BreakdownCell {
                    hour,
                    app,
                    agent,
                    version,
                    dimension: dimension.to_string(),
                    element,
                    ..cell
                },
            )
            .collect(),
        findings: findings
            .into_iter()
            .map(
                |(((hour, app, agent, version, dimension, element), code), events)| {
                    BreakdownFinding {
                        hour,
                        app,
                        agent,
                        version,
                        dimension: dimension.to_string(),
                        element,
                        code,
                        events: events.len() as u64,
                    }
                },
            )
            .collect(),
    }
}

/// Which events a breakdown counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakdownQuery {
    /// The dimension.
    pub by: Dimension,
    /// Only this app.
    pub app: Option<String>,
    /// Only this agent.
    pub agent: Option<String>,
    /// Only this agent version.
    pub version: Option<String>,
    /// Compare with this version over the same window (and app, agent).
    pub against_version: Option<String>,
    /// Window start (seconds since the epoch, inclusive); without it, everything up to `until`
    /// and no previous window.
    pub since: Option<i64>,
    /// Window end (exclusive); default: the end of the newest hour.
    pub until: Option<i64>,
}

/// One side of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakdownSide {
    /// Events reading the element.
    pub events: u64,
    /// Scored.
    pub scored: u64,
    /// Flagged.
    pub flagged: u64,
    /// Flagged / scored (absent when none was scored).
    pub share_flagged: Option<f64>,
    /// Mean `p_correct` over the scored.
    pub mean_p_correct: Option<f64>,
}

/// A difference of shares flagged (this side − the other), with its 95 % interval
/// (Newcombe's hybrid score interval from the two Wilson intervals).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShareDifference {
    /// Flagged events, this side − the other.
    pub flagged: i64,
    /// Share flagged, this side − the other.
    pub share_flagged: f64,
    /// Lower end.
    pub lower: f64,
    /// Upper end.
    pub upper: f64,
}

/// Events that a finding of `code` names the element in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopFinding {
    /// The code.
    pub code: String,
    /// Events.
    pub events: u64,
}

/// One element's numbers (`sqlgrade breakdown --json` prints one per line).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakdownLine {
    /// The dimension.
    pub by: Dimension,
    /// The element.
    pub element: String,
    /// Its readable label.
    pub label: String,
    /// Events reading it in the window.
    pub events: u64,
    /// Of those, scored.
    pub scored: u64,
    /// Of the scored, flagged.
    pub flagged: u64,
    /// Flagged / scored.
    pub share_flagged: Option<f64>,
    /// The share's 95 % Wilson interval.
    pub share_flagged_interval: Option<(f64, f64)>,
    /// Mean `p_correct` over the scored.
    pub mean_p_correct: Option<f64>,
    /// The findings naming it most often (at most [`TOP_FINDINGS`]).
    pub top_findings: Vec<TopFinding>,
    /// The window before, as long as this one (with `since`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous: Option<BreakdownSide>,
    /// Against the window before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<ShareDifference>,
    /// No event read it in the window before (with `since`).
    pub new_this_period: bool,
    /// The version compared with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub against_version: Option<String>,
    /// That version's numbers, same window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub against: Option<BreakdownSide>,
    /// Against that version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difference: Option<ShareDifference>,
}

/// Findings listed per element at most.
pub const TOP_FINDINGS: usize = 3;

#[derive(Default)]
struct Tally {
    events: u64,
    scored: u64,
    flagged: u64,
    p_sum: f64,
}

impl Tally {
    fn add(&mut self, cell: &BreakdownCell) {
        self.events += cell.events;
        self.scored += cell.scored;
        self.flagged += cell.flagged;
        self.p_sum += cell.p_sum;
    }

    fn share(&self) -> Option<f64> {
        (self.scored > 0).then(|| self.flagged as f64 / self.scored as f64)
    }

    fn side(&self) -> BreakdownSide {
        BreakdownSide {
            events: self.events,
            scored: self.scored,
            flagged: self.flagged,
            share_flagged: self.share(),
            mean_p_correct: (self.scored > 0).then(|| self.p_sum / self.scored as f64),
        }
    }

    /// `self − other` in share flagged, with Newcombe's interval; `None` when either side has
    /// nothing scored.
    fn minus(&self, other: &Tally) -> Option<ShareDifference> {
        let (p1, p2) = (self.share()?, other.share()?);
        let (l1, u1) = wilson_interval(self.flagged, self.scored)?;
        let (l2, u2) = wilson_interval(other.flagged, other.scored)?;
        let d = p1 - p2;
        Some(ShareDifference {
            flagged: self.flagged as i64 - other.flagged as i64,
            share_flagged: d,
            lower: d - ((p1 - l1).powi(2) + (u2 - p2).powi(2)).sqrt(),
            upper: d + ((u1 - p1).powi(2) + (p2 - l2).powi(2)).sqrt(),
        })
    }
}

/// The breakdown's numbers per element under `query` (module docs), ranked: by the rise in
/// flagged events against `against_version` when given, else against the previous window when
/// there is one, else by flagged events; then by events, then by name.
pub fn breakdown(data: &BreakdownData, query: &BreakdownQuery) -> Vec<BreakdownLine> {
    let by = query.by.as_str();
    let until = query
        .until
        .unwrap_or_else(|| data.cells.iter().map(|c| c.hour + HOUR).max().unwrap_or(0));
    let previous = query.since.map(|since| (since - (until - since), since));
    let series = |app: &str, agent: &str| {
        query.app.as_deref().is_none_or(|a| a == app)
            && query.agent.as_deref().is_none_or(|a| a == agent)
    };
    let in_window = |hour: i64| query.since.is_none_or(|s| hour >= s) && hour < until;
    let in_previous = |hour: i64| previous.is_some_and(|(from, to)| hour >= from && hour < to);
    let this_version = |v: &str| query.version.as_deref().is_none_or(|want| want == v);
    let other_version = |v: &str| query.against_version.as_deref() == Some(v);

    let mut now: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut before: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut against: BTreeMap<&str, Tally> = BTreeMap::new();
    for cell in data
        .cells
        .iter()
        .filter(|c| c.dimension == by && series(&c.app, &c.agent))
    {
        if this_version(&cell.version) {
            if in_window(cell.hour) {
                now.entry(&cell.element).or_default().add(cell);
            } else if in_previous(cell.hour) {
                before.entry(&cell.element).or_default().add(cell);
            }
        }
        if other_version(&cell.version) && in_window(cell.hour) {
            against.entry(&cell.element).or_default().add(cell);
        }
    }
    let mut codes: BTreeMap<&str, BTreeMap<&str, u64>> = BTreeMap::new();
    for f in data.findings.iter().filter(|f| {
        f.dimension == by
            && series(&f.app, &f.agent)
            && this_version(&f.version)
            && in_window(f.hour)
    }) {
        *codes
            .entry(&f.element)
            .or_default()
            .entry(&f.code)
            .or_default() += f.events;
    }

    let empty = Tally::default();
    let mut lines: Vec<BreakdownLine> = now
        .iter()
        .map(|(element, tally)| {
            let mut top: Vec<TopFinding> = codes
                .get(element)
                .into_iter()
                .flatten()
                .map(|(code, events)| TopFinding {
                    code: code.to_string(),
                    events: *events,
                })
                .collect();
            top.sort_by(|a, b| b.events.cmp(&a.events).then_with(|| a.code.cmp(&b.code)));
            top.truncate(TOP_FINDINGS);
            let prior = before.get(element).unwrap_or(&empty);
            let other = against.get(element).unwrap_or(&empty);
            BreakdownLine {
                by: query.by,
                element: element.to_string(),
                label: label_of(query.by, element),
                events: tally.events,
                scored: tally.scored,
                flagged: tally.flagged,
                share_flagged: tally.share(),
                share_flagged_interval: wilson_interval(tally.flagged, tally.scored),
                mean_p_correct: tally.side().mean_p_correct,
                top_findings: top,
                previous: previous.map(|_| prior.side()),
                change: previous.and_then(|_| tally.minus(prior)),
                new_this_period: previous.is_some() && prior.events == 0,
                against_version: query.against_version.clone(),
                against: query.against_version.as_ref().map(|_| other.side()),
                difference: query
                    .against_version
                    .as_ref()
                    .and_then(|_| tally.minus(other)),
            }
        })
        .collect();
    let rise = |l: &BreakdownLine| -> i64 {
        let base = l
            .against
            .as_ref()
            .or(l.previous.as_ref())
            .map_or(0, |s| s.flagged as i64);
        l.flagged as i64 - base
    };
    lines.sort_by(|a, b| {
        rise(b)
            .cmp(&rise(a))
            .then_with(|| b.flagged.cmp(&a.flagged))
            .then_with(|| b.events.cmp(&a.events))
            .then_with(|| a.element.cmp(&b.element))
    });
    lines
}

#[cfg(test)]
mod tests;
