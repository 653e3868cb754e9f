//! The overview as a monitor: per series (app, agent, version) over time — mean Φ, the share the
//! line-rate verdict flags, the estimated share correct with its interval where there is one —
//! with alert firings as markers, and an app's agent versions side by side with the differences
//! and the finding codes whose rates changed most.
//!
//! Everything is computed from **hourly cells** ([`MonitorCell`]: counts and mergeable moments
//! per series and hour) and **finding counts** per series ([`FindingCount`]) — the read model in
//! `stores::monitor` — which a store hands over ready-made: the JSONL store folds its rows into them ([`monitor_from_rows`]); ClickHouse
//! reads them from the `stef_monitor_hourly` rollup and one aggregate query, never the rows
//! themselves. The same cells give the same charts on both stores. No I/O and no HTML here; the
//! coordinates for the server-drawn SVG are computed here and the template prints them (the page
//! allows no inline script and loads nothing from elsewhere).
//!
//! The estimated share correct is prediction-powered inference over the LLM judge's uniform
//! slice where a bucket has judged events (95% interval), else the correctness model's mean
//! `p_correct` with the interval of a mean over the bucket's events (which says nothing of the
//! model's own bias; people's labels on the overview's table rectify that, per series). Human
//! labels do not enter the charts: the hourly cells are aggregates a database can keep.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::sampling::estimate::{Estimate, Moments, SeriesEstimate, Z_95};
use crate::stores::AlertView;
pub use crate::stores::monitor::{
    FindingCount, MonitorCell, MonitorData, SeriesKey, monitor_from_rows,
};

use crate::stores::monitor::HOUR;
/// Seconds in a day.
const DAY: i64 = 86_400;
/// Up to this span between the first and last hour the charts use hours; beyond it, days.
pub const HOURLY_SPAN: i64 = 2 * DAY;
/// Buckets drawn at most (the most recent ones).
pub const MAX_BUCKETS: usize = 400;
/// Finding codes listed per version comparison at most.
const TOP_FINDINGS: usize = 5;

/// The page's filters (empty: all).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MonitorFilter {
    /// App.
    pub app: String,
    /// Agent.
    pub agent: String,
    /// Agent version.
    pub version: String,
}

/// The alerts drawn on the charts: those of the shown series, fired within the buckets (one
/// just after the newest is drawn at the right edge).
fn alert_markers(
    alerts: &[AlertView],
    filter: &MonitorFilter,
    series: &BTreeMap<SeriesKey, BTreeMap<i64, MonitorCell>>,
    (oldest, newest, width): (i64, i64, i64),
    x_of: &impl Fn(i64) -> f64,
) -> Vec<MarkerView> {
    alerts
        .iter()
        .filter(|a| {
            filter.admits_alert(a)
                && a.fired_at >= oldest
                // Alerts fire at processing time, just after the events they concern: one in
                // the bucket after the newest is drawn at the right edge.
                && a.fired_at < newest + 2 * width
                && series.keys().any(|k| alert_matches(a, k))
        })
        .map(|a| MarkerView {
            x: x_of((a.fired_at.div_euclid(width) * width).min(newest)),
            title: format!(
                "{} {} on {}: {}",
                a.rule,
                if a.is_firing() { "firing" } else { "fired" },
                alert_series(a),
                a.message
            ),
        })
        .collect()
}

/// One series' line on a chart: its path (a gap where a bucket has no value) and its points.
fn series_line(
    key: &SeriesKey,
    buckets: &BTreeMap<i64, MonitorCell>,
    pick: Pick,
    width: i64,
    x_of: &impl Fn(i64) -> f64,
    y_of: &impl Fn(f64) -> f64,
    color: &'static str,
) -> LineView {
    let mut path = String::new();
    let mut points = Vec::new();
    let mut previous: Option<i64> = None;
    for (bucket, cell) in buckets {
        let Some((value, interval, text)) = pick(cell) else {
            previous = None;
            continue;
        };
        let (x, y) = (round(x_of(*bucket)), round(y_of(value)));
        // A line joins neighbouring buckets only: an empty bucket is a gap.
        let joined = previous.is_some_and(|p| p + width == *bucket);
        path.push_str(&format!("{}{x} {y} ", if joined { "L" } else { "M" }));
        previous = Some(*bucket);
        points.push(PointView {
            x,
            y,
            interval: interval.map(|(lo, hi)| (round(y_of(lo)), round(y_of(hi)))),
            title: format!("{} · {}: {text}", label(key), bucket_label(*bucket, width)),
        });
    }
    LineView {
        series: label(key),
        color,
        path: path.trim_end().to_string(),
        points,
    }
}

impl MonitorFilter {
    /// Whether the series (app, agent, version) passes the filters.
    pub fn admits(&self, app: &str, agent: &str, version: &str) -> bool {
        let ok = |want: &str, have: &str| want.trim().is_empty() || want.trim() == have;
        ok(&self.app, app) && ok(&self.agent, agent) && ok(&self.version, version)
    }

    /// Whether any filter is set.
    pub fn is_set(&self) -> bool {
        !(self.app.trim().is_empty()
            && self.agent.trim().is_empty()
            && self.version.trim().is_empty())
    }
}

/// The monitor section of the overview.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MonitorView {
    /// `hour` or `day`.
    pub bucket: &'static str,
    /// Buckets drawn.
    pub buckets: usize,
    /// The charts: mean Φ, share flagged, estimated share correct.
    pub charts: Vec<ChartView>,
    /// The series drawn, with their colours (the legend).
    pub legend: Vec<LegendEntry>,
    /// Per (app, agent) with more than one version: the versions side by side.
    pub comparisons: Vec<Comparison>,
    /// The values the filters can take.
    pub apps: Vec<String>,
    /// Agents.
    pub agents: Vec<String>,
    /// Versions.
    pub versions: Vec<String>,
}

/// One series in the legend.
#[derive(Debug, Clone, Serialize)]
pub struct LegendEntry {
    /// `app / agent / version`.
    pub label: String,
    /// Its colour.
    pub color: &'static str,
}

/// One chart, its coordinates ready for the template (the plot area is [`PLOT`]).
#[derive(Debug, Clone, Serialize)]
pub struct ChartView {
    /// Element id.
    pub id: &'static str,
    /// Title.
    pub title: &'static str,
    /// Y-axis ticks (pixel y, label).
    pub y_ticks: Vec<(f64, String)>,
    /// X-axis ticks (pixel x, label).
    pub x_ticks: Vec<(f64, String)>,
    /// One line per series.
    pub lines: Vec<LineView>,
    /// Alert firings.
    pub markers: Vec<MarkerView>,
}

/// One series' line.
#[derive(Debug, Clone, Serialize)]
pub struct LineView {
    /// `app / agent / version`.
    pub series: String,
    /// Its colour.
    pub color: &'static str,
    /// The SVG path (`M x y L x y …`; a gap where a bucket has no value).
    pub path: String,
    /// Its points.
    pub points: Vec<PointView>,
}

/// One bucket's value on a line.
#[derive(Debug, Clone, Serialize)]
pub struct PointView {
    /// Pixel x.
    pub x: f64,
    /// Pixel y.
    pub y: f64,
    /// The interval's ends in pixels, where there is one.
    pub interval: Option<(f64, f64)>,
    /// What the point says (tooltip).
    pub title: String,
}

/// An alert firing on a chart.
#[derive(Debug, Clone, Serialize)]
pub struct MarkerView {
    /// Pixel x.
    pub x: f64,
    /// What fired (tooltip).
    pub title: String,
}

/// The plot area inside each chart's SVG: left, top, width, height (pixels).
pub const PLOT: (f64, f64, f64, f64) = (48.0, 12.0, 760.0, 170.0);

/// A palette of distinguishable colours (series beyond it reuse them in order).
const PALETTE: [&str; 12] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#ad494a",
];

/// A value to chart from one bucket of one series.
type Pick = fn(&MonitorCell) -> Option<(f64, Option<(f64, f64)>, String)>;

/// A chart: its element id, title, the top of its y axis, whether its values are shares (shown
/// as percentages), and what it draws from each bucket.
type ChartSpec = (&'static str, &'static str, f64, bool, Pick);

/// The monitor's three charts: mean Φ, the share flagged, the estimated share correct.
fn chart_specs() -> [ChartSpec; 3] {
    [
        ("chart-phi", "Mean Φ (line rate)", 100.0, false, |c| {
            let mean = c.estimate.phi.mean()?;
            Some((
                mean,
                None,
                format!("mean Φ {mean:.1} over {} scored", c.scored),
            ))
        }),
        (
            "chart-flagged",
            "Share the line-rate verdict flags",
            1.0,
            true,
            |c| {
                (c.scored > 0).then(|| {
                    let share = c.flagged as f64 / c.scored as f64;
                    (
                        share,
                        None,
                        format!(
                            "{:.1}% flagged ({} of {})",
                            share * 100.0,
                            c.flagged,
                            c.scored
                        ),
                    )
                })
            },
        ),
        (
            "chart-correct",
            "Estimated share correct [95%]",
            1.0,
            true,
            |c| {
                let (estimate, how) = share_correct(&c.estimate)?;
                let interval = estimate.lower.zip(estimate.upper);
                let text = match interval {
                    Some((lo, hi)) => format!(
                        "{:.1}% [{:.1}, {:.1}] {how}",
                        estimate.mean * 100.0,
                        lo * 100.0,
                        hi * 100.0
                    ),
                    None => format!("{:.1}% {how}", estimate.mean * 100.0),
                };
                Some((estimate.mean, interval, text))
            },
        ),
    ]
}

/// The monitor for the page: charts over the buckets the data's span calls for, the legend and
/// the version comparisons, all under `filter`.
pub fn monitor(data: &MonitorData, alerts: &[AlertView], filter: &MonitorFilter) -> MonitorView {
    let mut view = MonitorView {
        apps: distinct(data.cells.iter().map(|c| c.app.as_str())),
        agents: distinct(data.cells.iter().map(|c| c.agent.as_str())),
        versions: distinct(data.cells.iter().map(|c| c.version.as_str())),
        ..MonitorView::default()
    };
    let cells: Vec<&MonitorCell> = data
        .cells
        .iter()
        .filter(|c| filter.admits(&c.app, &c.agent, &c.version))
        .collect();
    let (Some(first), Some(last)) = (
        cells.iter().map(|c| c.hour).min(),
        cells.iter().map(|c| c.hour).max(),
    ) else {
        view.bucket = "hour";
        return view;
    };
    let width = if last - first <= HOURLY_SPAN {
        HOUR
    } else {
        DAY
    };
    view.bucket = if width == HOUR { "hour" } else { "day" };
    // Buckets per series, the most recent MAX_BUCKETS.
    let newest = last.div_euclid(width) * width;
    let oldest = (first.div_euclid(width) * width).max(newest - width * (MAX_BUCKETS as i64 - 1));
    view.buckets = ((newest - oldest) / width + 1) as usize;
    let mut series: BTreeMap<SeriesKey, BTreeMap<i64, MonitorCell>> = BTreeMap::new();
    for cell in &cells {
        let bucket = cell.hour.div_euclid(width) * width;
        if bucket < oldest {
            continue;
        }
        series
            .entry(SeriesKey {
                app: cell.app.clone(),
                agent: cell.agent.clone(),
                version: cell.version.clone(),
            })
            .or_default()
            .entry(bucket)
            .or_default()
            .merge(cell);
    }
    let colors: BTreeMap<&SeriesKey, &'static str> = series
        .keys()
        .enumerate()
        .map(|(i, k)| (k, PALETTE[i % PALETTE.len()]))
        .collect();
    view.legend = series
        .keys()
        .map(|k| LegendEntry {
            label: label(k),
            color: colors[k],
        })
        .collect();
    let x_of = |bucket: i64| {
        let span = (newest - oldest).max(1) as f64;
        if newest == oldest {
            PLOT.0 + PLOT.2 / 2.0
        } else {
            PLOT.0 + (bucket - oldest) as f64 / span * PLOT.2
        }
    };
    let x_ticks = x_ticks(oldest, newest, width, &x_of);
    let markers = alert_markers(alerts, filter, &series, (oldest, newest, width), &x_of);
    let charts = chart_specs();
    view.charts = charts
        .into_iter()
        .map(|(id, title, y_max, percent, pick)| {
            let y_of = |v: f64| PLOT.1 + PLOT.3 - (v / y_max).clamp(0.0, 1.0) * PLOT.3;
            let lines = series
                .iter()
                .map(|(key, buckets)| {
                    series_line(key, buckets, pick, width, &x_of, &y_of, colors[key])
                })
                .collect();
            let y_ticks = (0..=4)
                .map(|i| {
                    let v = y_max * f64::from(i) / 4.0;
                    let text = if percent {
                        format!("{:.0}%", v * 100.0)
                    } else {
                        format!("{v:.0}")
                    };
                    (round(y_of(v)), text)
                })
                .collect();
            ChartView {
                id,
                title,
                y_ticks,
                x_ticks: x_ticks.clone(),
                lines,
                markers: markers.clone(),
            }
        })
        .collect();
    view.comparisons = comparisons(data, filter);
    view
}

impl MonitorFilter {
    fn admits_alert(&self, alert: &AlertView) -> bool {
        // An alert on a wider series (no agent, say) belongs to every series under it.
        let ok = |want: &str, have: &str| {
            have.is_empty() || want.trim().is_empty() || want.trim() == have
        };
        ok(&self.app, &alert.app_id)
            && ok(&self.agent, &alert.agent_id)
            && ok(&self.version, &alert.agent_version)
    }
}

/// Whether an alert concerns the series `key` (an alert on a wider series — no agent, say —
/// concerns every series under it).
pub fn alert_matches(alert: &AlertView, key: &SeriesKey) -> bool {
    (alert.app_id.is_empty() || alert.app_id == key.app)
        && (alert.agent_id.is_empty() || alert.agent_id == key.agent)
        && (alert.agent_version.is_empty() || alert.agent_version == key.version)
}

/// An alert's series as people read it (`app / agent / version / model`, absent parts left out).
pub fn alert_series(alert: &AlertView) -> String {
    [
        &alert.app_id,
        &alert.agent_id,
        &alert.agent_version,
        &alert.model,
    ]
    .iter()
    .filter(|s| !s.is_empty())
    .map(|s| s.as_str())
    .collect::<Vec<_>>()
    .join(" / ")
}

/// The estimated share correct of some events, and how it was made: PPI over the judged uniform
/// slice, else the mean `p_correct`.
pub fn share_correct(estimate: &SeriesEstimate) -> Option<(Estimate, &'static str)> {
    if estimate.correct_correction.n > 0 {
        estimate
            .correct_share()
            .map(|e| (e, "(line rate + LLM uniform slice)"))
    } else {
        estimate
            .line_share()
            .map(|e| (e, "(model's mean p_correct)"))
    }
}

fn round(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

fn label(key: &SeriesKey) -> String {
    [&key.app, &key.agent, &key.version]
        .iter()
        .map(|s| if s.is_empty() { "—" } else { s.as_str() })
        .collect::<Vec<_>>()
        .join(" / ")
}

fn distinct<'a>(values: impl Iterator<Item = &'a str>) -> Vec<String> {
    values
        .filter(|v| !v.is_empty())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(str::to_string)
        .collect()
}

fn bucket_label(bucket: i64, width: i64) -> String {
    let Some(time) = chrono::DateTime::from_timestamp(bucket, 0) else {
        return bucket.to_string();
    };
    if width == HOUR {
        time.format("%Y-%m-%d %H:00").to_string()
    } else {
        time.format("%Y-%m-%d").to_string()
    }
}

/// At most six ticks, on bucket boundaries.
fn x_ticks(oldest: i64, newest: i64, width: i64, x_of: &dyn Fn(i64) -> f64) -> Vec<(f64, String)> {
    let buckets = (newest - oldest) / width + 1;
    let step = (buckets as f64 / 6.0).ceil().max(1.0) as i64;
    (0..buckets)
        .step_by(step as usize)
        .map(|i| {
            let bucket = oldest + i * width;
            let text = chrono::DateTime::from_timestamp(bucket, 0)
                .map(|t| {
                    if width == HOUR {
                        t.format("%m-%d %H:00").to_string()
                    } else {
                        t.format("%m-%d").to_string()
                    }
                })
                .unwrap_or_default();
            (round(x_of(bucket)), text)
        })
        .collect()
}

/// One app's agent's versions side by side.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// App.
    pub app: String,
    /// Agent.
    pub agent: String,
    /// Its versions in the order they first appeared.
    pub versions: Vec<VersionColumn>,
}

/// One version's numbers, and its differences from the version before it.
#[derive(Debug, Clone, Serialize)]
pub struct VersionColumn {
    /// The version ('—' when absent).
    pub version: String,
    /// First and last hour seen (RFC 3339 dates).
    pub first_seen: String,
    /// Last hour seen.
    pub last_seen: String,
    /// Events with a line-rate row.
    pub events: u64,
    /// Of those, scored.
    pub scored: u64,
    /// Mean Φ with its 95% interval.
    pub phi: Option<Interval>,
    /// Share flagged with its 95% Wilson interval.
    pub flagged: Option<Interval>,
    /// Estimated share correct with its 95% interval, and how it was made.
    pub correct: Option<Interval>,
    /// How the share correct was estimated.
    pub correct_source: &'static str,
    /// Differences from the version before (absent for the first).
    pub diff: Option<VersionDiff>,
    /// The finding codes whose rates changed most from the version before (first version: its
    /// most frequent codes).
    pub findings: Vec<FindingChange>,
}

/// A value with its 95% interval.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Interval {
    /// The value.
    pub value: f64,
    /// Lower end (absent below two values).
    pub lower: Option<f64>,
    /// Upper end.
    pub upper: Option<f64>,
    /// The standard error behind the interval (for differences; the ends may be clipped to the
    /// quantity's range).
    #[serde(skip)]
    se: Option<f64>,
}

/// Differences (this version − the one before) with 95% intervals.
#[derive(Debug, Clone, Serialize)]
pub struct VersionDiff {
    /// The version compared with.
    pub against: String,
    /// Mean Φ.
    pub phi: Option<Interval>,
    /// Share flagged.
    pub flagged: Option<Interval>,
    /// Estimated share correct.
    pub correct: Option<Interval>,
}

/// A finding code's rate (events with it per scored… per event with a line-rate row) before and
/// now.
#[derive(Debug, Clone, Serialize)]
pub struct FindingChange {
    /// The code.
    pub code: String,
    /// Its rate in the version before (absent for the first version).
    pub before: Option<f64>,
    /// Its rate in this version.
    pub now: f64,
}

impl Interval {
    fn of(value: f64, se: Option<f64>) -> Interval {
        Interval {
            value,
            lower: se.map(|s| value - Z_95 * s),
            upper: se.map(|s| value + Z_95 * s),
            se,
        }
    }

    /// An estimate's interval; its standard error from the (unclipped) half width.
    fn of_estimate(e: &Estimate) -> Interval {
        Interval {
            value: e.mean,
            lower: e.lower,
            upper: e.upper,
            se: e
                .lower
                .zip(e.upper)
                .map(|(lo, hi)| (hi - lo) / (2.0 * Z_95)),
        }
    }

    /// The ends clipped to `[lo, hi]` (a share's normal interval can pass 0 or 1).
    fn clipped(self, lo: f64, hi: f64) -> Interval {
        Interval {
            lower: self.lower.map(|v| v.clamp(lo, hi)),
            upper: self.upper.map(|v| v.clamp(lo, hi)),
            ..self
        }
    }

    /// `self − other`, with the interval of a difference of independent estimates.
    fn minus(&self, other: &Interval) -> Interval {
        let se = self.se.zip(other.se).map(|(a, b)| (a * a + b * b).sqrt());
        Interval::of(self.value - other.value, se)
    }
}

fn phi_interval(m: &Moments) -> Option<Interval> {
    let mean = m.mean()?;
    Some(Interval::of(
        mean,
        m.variance().map(|v| (v / m.n as f64).sqrt()),
    ))
}

/// A proportion with its normal-approximation standard error (for differences) — the interval
/// shown is the normal one too, so that a difference's interval follows from its two sides.
fn share_interval(yes: u64, n: u64) -> Option<Interval> {
    if n == 0 {
        return None;
    }
    let p = yes as f64 / n as f64;
    // A share of 0 or 1 still has uncertainty: the rule of succession's variance.
    let q = if yes == 0 || yes == n {
        1.0 / (n as f64 + 2.0)
    } else {
        p
    };
    Some(Interval::of(p, Some((q * (1.0 - q) / n as f64).sqrt())).clipped(0.0, 1.0))
}

/// One version's first hour, last hour and merged cells.
type VersionTotal = (i64, i64, MonitorCell);

/// Per (app, agent) with versions: the versions side by side (module documentation).
fn comparisons(data: &MonitorData, filter: &MonitorFilter) -> Vec<Comparison> {
    // The version filter does not apply: a comparison is of versions.
    let by_agent = MonitorFilter {
        version: String::new(),
        ..filter.clone()
    };
    let mut totals: BTreeMap<(String, String), BTreeMap<String, VersionTotal>> = BTreeMap::new();
    for cell in data
        .cells
        .iter()
        .filter(|c| by_agent.admits(&c.app, &c.agent, &c.version))
    {
        let entry = totals
            .entry((cell.app.clone(), cell.agent.clone()))
            .or_default()
            .entry(cell.version.clone())
            .or_insert((cell.hour, cell.hour, MonitorCell::default()));
        entry.0 = entry.0.min(cell.hour);
        entry.1 = entry.1.max(cell.hour);
        entry.2.merge(cell);
    }
    let mut codes: BTreeMap<SeriesKey, BTreeMap<&str, u64>> = BTreeMap::new();
    for f in &data.findings {
        *codes
            .entry(SeriesKey {
                app: f.app.clone(),
                agent: f.agent.clone(),
                version: f.version.clone(),
            })
            .or_default()
            .entry(f.code.as_str())
            .or_default() += f.events;
    }
    let mut out = Vec::new();
    for ((app, agent), versions) in totals {
        let mut ordered: Vec<(String, VersionTotal)> = versions.into_iter().collect();
        ordered.sort_by(|a, b| (a.1.0, &a.0).cmp(&(b.1.0, &b.0)));
        let mut columns: Vec<VersionColumn> = Vec::new();
        // The version before: its finding counts and its events.
        let mut previous: Option<(BTreeMap<&str, u64>, u64)> = None;
        for (version, (first, last, cell)) in ordered {
            let phi = phi_interval(&cell.estimate.phi);
            let flagged = share_interval(cell.flagged, cell.scored);
            let (correct, correct_source) = match share_correct(&cell.estimate) {
                Some((e, how)) => (Some(Interval::of_estimate(&e)), how),
                None => (None, ""),
            };
            let diff = columns.last().map(|before| VersionDiff {
                against: before.version.clone(),
                phi: phi.zip(before.phi).map(|(a, b)| a.minus(&b)),
                flagged: flagged.zip(before.flagged).map(|(a, b)| a.minus(&b)),
                correct: correct.zip(before.correct).map(|(a, b)| a.minus(&b)),
            });
            let key = SeriesKey {
                app: app.clone(),
                agent: agent.clone(),
                version: version.clone(),
            };
            let these = codes.get(&key).cloned().unwrap_or_default();
            let findings = finding_changes(&these, cell.events, previous.take());
            previous = Some((these, cell.events));
            columns.push(VersionColumn {
                version: if version.is_empty() {
                    "—".into()
                } else {
                    version
                },
                first_seen: bucket_label(first, DAY),
                last_seen: bucket_label(last, DAY),
                events: cell.events,
                scored: cell.scored,
                phi,
                flagged,
                correct,
                correct_source,
                diff,
                findings,
            });
        }
        if columns.len() > 1 {
            out.push(Comparison {
                app,
                agent,
                versions: columns,
            });
        }
    }
    out
}

/// The codes whose rates changed most (by absolute difference) from the version before; for the
/// first version, its most frequent codes.
fn finding_changes(
    now: &BTreeMap<&str, u64>,
    events: u64,
    before: Option<(BTreeMap<&str, u64>, u64)>,
) -> Vec<FindingChange> {
    let rate = |n: u64, of: u64| if of == 0 { 0.0 } else { n as f64 / of as f64 };
    let mut changes: Vec<FindingChange> = match &before {
        Some((then, then_events)) => now
            .keys()
            .chain(then.keys())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|code| FindingChange {
                code: code.to_string(),
                before: Some(rate(then.get(code).copied().unwrap_or(0), *then_events)),
                now: rate(now.get(code).copied().unwrap_or(0), events),
            })
            .collect(),
        None => now
            .iter()
            .map(|(code, n)| FindingChange {
                code: code.to_string(),
                before: None,
                now: rate(*n, events),
            })
            .collect(),
    };
    changes.sort_by(|a, b| {
        let size = |c: &FindingChange| (c.now - c.before.unwrap_or(0.0)).abs();
        size(b)
            .total_cmp(&size(a))
            .then_with(|| a.code.cmp(&b.code))
    });
    changes.truncate(TOP_FINDINGS);
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::StoredRow;

    fn row(
        id: &str,
        ts: &str,
        version: &str,
        value: f64,
        correct: bool,
        codes: &[&str],
    ) -> StoredRow {
        let findings: Vec<serde_json::Value> = codes
            .iter()
            .map(|c| serde_json::json!({"code": c, "severity": "warning"}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "event_id": id, "ts": ts, "app_id": "shop", "agent_id": "bot",
            "agent_version": version, "metric": "stef", "value": value, "verdict": correct,
            "status": "ok", "details": {"findings": findings}, "p_correct": if correct { 0.8 } else { 0.1 },
        }))
        .unwrap()
    }

    fn data() -> MonitorData {
        let mut rows = Vec::new();
        for i in 0..40 {
            let day = 17 + i / 10;
            let ts = format!("2026-11-{day}T{:02}:00:00Z", i % 10);
            if i < 20 {
                rows.push(row(&format!("a{i}"), &ts, "1.0", 80.0, i % 10 != 0, &[]));
            } else {
                let bad = i % 2 == 0;
                let codes: &[&str] = if bad { &["empty_result"] } else { &[] };
                rows.push(row(
                    &format!("b{i}"),
                    &ts,
                    "2.0",
                    if bad { 20.0 } else { 70.0 },
                    !bad,
                    codes,
                ));
            }
        }
        monitor_from_rows(&rows)
    }

    #[test]
    fn cells_fold_rows_per_hour_and_series_and_charts_pick_days_for_a_long_span() {
        let data = data();
        assert_eq!(data.cells.len(), 40);
        assert_eq!(data.cells.iter().map(|c| c.events).sum::<u64>(), 40);
        let view = monitor(&data, &[], &MonitorFilter::default());
        assert_eq!(view.bucket, "day");
        assert_eq!(view.buckets, 4);
        assert_eq!(view.charts.len(), 3);
        for chart in &view.charts {
            assert_eq!(chart.lines.len(), 2, "{}", chart.id);
            assert!(chart.lines.iter().all(|l| l.path.starts_with('M')));
        }
        // Version 1.0: days 17 and 18; 2.0: days 19 and 20, one unbroken line each.
        let phi = &view.charts[0];
        assert_eq!(phi.lines[0].points.len(), 2);
        assert_eq!(phi.lines[0].path.matches('M').count(), 1);
        let filtered = monitor(
            &data,
            &[],
            &MonitorFilter {
                version: "2.0".into(),
                ..MonitorFilter::default()
            },
        );
        assert_eq!(filtered.charts[0].lines.len(), 1);
        assert_eq!(filtered.bucket, "hour", "two days of data: hours");
    }

    #[test]
    fn versions_are_compared_with_differences_and_finding_rate_changes() {
        let view = monitor(&data(), &[], &MonitorFilter::default());
        assert_eq!(view.comparisons.len(), 1);
        let versions = &view.comparisons[0].versions;
        assert_eq!(versions[0].version, "1.0");
        assert_eq!(versions[1].version, "2.0");
        let flagged = versions[1].diff.as_ref().unwrap().flagged.unwrap();
        // 10% flagged → 50% flagged.
        assert!((flagged.value - 0.4).abs() < 1e-9, "{flagged:?}");
        assert!(flagged.lower.unwrap() > 0.0, "a clear rise: {flagged:?}");
        let phi = versions[1].diff.as_ref().unwrap().phi.unwrap();
        assert!((phi.value - (45.0 - 80.0)).abs() < 1e-9);
        assert_eq!(versions[1].findings[0].code, "empty_result");
        assert_eq!(versions[1].findings[0].before, Some(0.0));
        assert!((versions[1].findings[0].now - 0.5).abs() < 1e-9);
    }

    #[test]
    fn alert_firings_are_markers_on_the_series_they_concern() {
        let alert: AlertView = serde_json::from_value(serde_json::json!({
            "alert_id": "x", "fired_epoch": 1_795_057_200, "app_id": "shop", "agent_id": "",
            "agent_version": "2.0", "model": "", "metric": "stef", "rule": "score_drop",
            "severity": "warning", "baseline": 1.0, "observed": 0.5, "events": 10,
            "message": "Φ dropped"
        }))
        .unwrap();
        let view = monitor(
            &data(),
            std::slice::from_ref(&alert),
            &MonitorFilter::default(),
        );
        assert!(view.charts.iter().all(|c| c.markers.len() == 1));
        assert!(view.charts[0].markers[0].title.contains("score_drop"));
        let other = monitor(
            &data(),
            &[alert],
            &MonitorFilter {
                version: "1.0".into(),
                ..MonitorFilter::default()
            },
        );
        assert!(other.charts.iter().all(|c| c.markers.is_empty()));
    }
}
