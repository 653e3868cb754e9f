//! What the review pages show, computed from the store's rows, alerts and labels: the
//! overview per (app, agent, agent version), the review queue, and an event's page. No I/O and
//! no HTML here (the templates in `pages` render these values), so the JSONL and ClickHouse
//! stores give the same pages.
//!
//! **Calibrated estimates with human labels.** Each series shows the line-rate share of events
//! whose STEF verdict is correct, and the estimated share a careful judge would call correct:
//! prediction-powered inference over the uniform slice (`stef_judged` rows with an inclusion
//! probability), where each uniform-slice event's truth is the **human label when there is one**
//! (correct / incorrect; the newest per reviewer, majority over reviewers, ties and `unsure`
//! left to the judge) and the LLM judge's verdict otherwise. A human label is the strongest
//! evidence there is, so it overrides the judge on exactly the events where both exist; labels
//! on events outside the uniform slice are shown and counted (they feed `calibrate`) but do not
//! enter the estimate, since those events were not drawn at random.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::evaluation::{Metric, RowStatus, StoredMetric};
use crate::review::{EventSignals, HumanLabel, QueueReason, queue_priority, semantic_correct};
use crate::sampling::agreement::{
    AgreementKey, AgreementPair, AgreementSummary, Confusion, calibration_sample, utc_week,
    week_start,
};
use crate::sampling::estimate::{Estimate, SeriesEstimate, wilson_interval};
use crate::stores::AlertView;
use crate::stores::StoredRow;
use crate::stores::monitor::SeriesKey;

/// Whether a stored status is scored ([`RowStatus::is_scored`]): rows that are not stay out of
/// means, as in the summary and `report`.
pub fn scored(status: &str) -> bool {
    RowStatus::name_is_scored(status)
}

/// One series on the overview.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SeriesView {
    /// App ('' when absent).
    pub app: String,
    /// Agent.
    pub agent: String,
    /// Agent version.
    pub version: String,
    /// Events with a line-rate STEF row.
    pub events: usize,
    /// Of those, scored.
    pub scored: usize,
    /// Mean Φ over scored line-rate rows.
    pub phi_mean: Option<f64>,
    /// Φ histogram in 10-point bins (counts).
    pub phi_histogram: [usize; 10],
    /// Largest bin (for the bar widths).
    pub phi_histogram_max: usize,
    /// Share of each tier, in display order (tier, share).
    pub tiers: Vec<(String, f64)>,
    /// Line-rate share correct: the share of scored rows whose verdict (`p_correct ≥` the
    /// model's threshold) calls the query correct.
    pub line_correct_share: Option<f64>,
    /// The share correct from the line rate and people's labels, without an LLM: mean
    /// `p_correct`, rectified by the labels of the calibration slice ([`line_rate_estimates`]).
    pub people: LineRateEstimate,
    /// Estimated share correct (PPI over the uniform slice, human labels over the judge).
    pub estimate: Option<Estimate>,
    /// Uniform-slice events in the estimate, and how many of them carry a human label.
    pub uniform_events: usize,
    /// Uniform-slice events whose truth came from a human label.
    pub uniform_labelled: usize,
    /// Events with at least one (correct/incorrect/unsure) label.
    pub labelled: usize,
    /// Alerts firing on this series.
    pub firing_alerts: usize,
}

/// The share correct of one series from the line rate alone, rectified by people's labels:
/// prediction-powered inference with the correctness model's `p_correct` as the predictor —
/// the mean `p_correct` over every scored line-rate row, plus the mean (label − `p_correct`)
/// over the labelled events of a uniform sample. The uniform sample is the calibration slice
/// (per line-rate judge identity and UTC week, `calibration_per_week` events by a hash: uniform
/// within each week, so the estimate assumes steady weekly volume), or every event when people
/// labelled every scored event of the series (a benchmark run judged in full). Labels on other
/// events — the queue ranks them by how informative they are — are not a random sample and do
/// not enter. Needs no LLM.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LineRateEstimate {
    /// Scored line-rate rows with a `p_correct`.
    pub events: u64,
    /// Their mean `p_correct` (the model's own estimate of the share correct).
    pub mean_p: Option<f64>,
    /// Uniform-sample events with a label (majority of reviewers; ties and `unsure` left out).
    pub labelled: u64,
    /// Whether every scored event is labelled (a census: the estimate is the labels' share).
    pub census: bool,
    /// The rectified estimate with its 95% interval (`None` without a labelled uniform event).
    pub estimate: Option<Estimate>,
}

/// [`LineRateEstimate`] per series (app, agent, agent version).
pub fn line_rate_estimates(
    rows: &[StoredRow],
    labels: &[HumanLabel],
    sample: &CalibrationSample,
) -> BTreeMap<SeriesKey, LineRateEstimate> {
    use crate::sampling::estimate::Moments;
    let truth = human_truth(labels);
    let line_rows: Vec<&StoredRow> = rows
        .iter()
        .filter(|r| r.metric == Metric::Stef && scored(&r.status) && r.p_correct.is_some())
        .collect();
    let uniform = sample_events(line_rows.iter().copied(), sample);
    type Acc<'r> = (Moments, Vec<(&'r str, f64)>);
    let mut by_series: BTreeMap<SeriesKey, Acc<'_>> = BTreeMap::new();
    for row in &line_rows {
        let p = row.p_correct.unwrap_or_default();
        let (all, events) = by_series.entry(SeriesKey::of(row)).or_default();
        all.add(p);
        events.push((row.event_id.as_str(), p));
    }
    by_series
        .into_iter()
        .map(|(key, (all, events))| {
            let census = !events.is_empty() && events.iter().all(|(id, _)| truth.contains_key(id));
            let mut corrections = Moments::default();
            for (id, p) in &events {
                if let Some(correct) = truth.get(id)
                    && (census || uniform.contains(id))
                {
                    corrections.add(f64::from(u8::from(*correct)) - p);
                }
            }
            let estimate = Estimate::ppi(&all, &corrections).map(|e| e.clamped(0.0, 1.0));
            (
                key,
                LineRateEstimate {
                    events: all.n,
                    mean_p: all.mean(),
                    labelled: corrections.n,
                    census,
                    estimate,
                },
            )
        })
        .collect()
}

/// The reliability of the line-rate `p_correct` on labelled events: per 10 equal-width bins of
/// `p_correct`, (events, mean `p_correct`, share people called correct); and the expected
/// calibration error over them. Every labelled event counts (not only the calibration slice):
/// the plot asks whether p means what it says where people looked.
pub fn reliability(rows: &[StoredRow], labels: &[HumanLabel]) -> Reliability {
    let truth = human_truth(labels);
    let (p, y): (Vec<f64>, Vec<bool>) = rows
        .iter()
        .filter(|r| r.metric == Metric::Stef && scored(&r.status))
        .filter_map(|r| Some((r.p_correct?, *truth.get(r.event_id.as_str())?)))
        .unzip();
    Reliability {
        events: p.len(),
        bins: crate::sampling::verdict_fit::reliability(&p, &y),
        calibration_error: crate::sampling::verdict_fit::calibration_error(&p, &y),
        brier: crate::sampling::verdict_fit::brier(&p, &y),
    }
}

/// The features that move a line-rate row's `p_correct` most under `model` (the event page's
/// "why"), and a note when the row was scored by another model version (its judge identity
/// names the version) or its features cannot be read.
pub fn contributions(
    row: &StoredRow,
    model: &crate::stef::correctness::VerdictModel,
    limit: usize,
) -> (Vec<crate::stef::correctness::Contribution>, Option<String>) {
    use crate::stef::correctness::StoredFeatureInput;
    if !scored(&row.status) || row.p_correct.is_none() {
        return (Vec::new(), None);
    }
    let input = StoredFeatureInput::from_stored(
        row.filter_status.as_deref().unwrap_or_default(),
        row.semantic_verdict.as_deref().unwrap_or_default(),
        row.confidence.unwrap_or_default(),
        &row.details,
    );
    let input = match input {
        Ok(input) => input,
        Err(e) => {
            return (
                Vec::new(),
                Some(format!("its features cannot be read: {e}")),
            );
        }
    };
    let scored_by = row
        .judge_identity
        .split_whitespace()
        .find_map(|part| part.strip_prefix("verdict="));
    let note = match scored_by {
        Some(version) if version != model.version() => Some(format!(
            "the row was scored by {version}: these are the current model's reasons"
        )),
        None => Some("the row names no model version".to_string()),
        Some(_) => None,
    };
    (model.contributions(&input.input().features(), limit), note)
}

/// [`reliability`]'s result.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Reliability {
    /// Labelled events with a `p_correct`.
    pub events: usize,
    /// Per bin of `p_correct` (0–0.1, …, 0.9–1): events, mean `p_correct`, share correct.
    pub bins: [(u64, f64, f64); 10],
    /// Expected calibration error over the bins.
    pub calibration_error: Option<f64>,
    /// Brier score.
    pub brier: Option<f64>,
}

/// The majority human verdict per event (`None` on a tie or only `unsure`).
pub fn human_truth(labels: &[HumanLabel]) -> HashMap<&str, bool> {
    let mut votes: HashMap<&str, (u32, u32)> = HashMap::new();
    for l in labels {
        if let Some(v) = l.verdict.as_bool() {
            let e = votes.entry(l.event_id.as_str()).or_default();
            if v {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
        }
    }
    votes
        .into_iter()
        .filter(|(_, (yes, no))| yes != no)
        .map(|(id, (yes, no))| (id, yes > no))
        .collect()
}

const TIER_ORDER: [&str; 4] = crate::stef::QualityTier::NAMES;

/// The overview: one [`SeriesView`] per (app, agent, version), ordered by name.
pub fn overview(
    rows: &[StoredRow],
    alerts: &[AlertView],
    labels: &[HumanLabel],
    sample: &CalibrationSample,
) -> Vec<SeriesView> {
    let truth = human_truth(labels);
    let mut people = line_rate_estimates(rows, labels, sample);
    let labelled: HashSet<&str> = labels.iter().map(|l| l.event_id.as_str()).collect();
    let mut series: BTreeMap<SeriesKey, (SeriesView, SeriesEstimate)> = BTreeMap::new();
    let mut tiers: BTreeMap<SeriesKey, BTreeMap<String, usize>> = BTreeMap::new();
    let mut correct_counts: BTreeMap<SeriesKey, (usize, usize)> = BTreeMap::new();
    let mut seen_labelled: HashSet<&str> = HashSet::new();
    for row in rows {
        let key = SeriesKey::of(row);
        let (view, estimate) = series.entry(key.clone()).or_default();
        match row.metric.known() {
            Some(Metric::Stef) => {
                view.events += 1;
                if labelled.contains(row.event_id.as_str())
                    && seen_labelled.insert(row.event_id.as_str())
                {
                    view.labelled += 1;
                }
                if !scored(&row.status) {
                    continue;
                }
                view.scored += 1;
                let bin = ((row.value / 10.0).floor().max(0.0) as usize).min(9);
                view.phi_histogram[bin] += 1;
                let correct = row.verdict_correct();
                estimate.observe_line(row.value, row.line_rate_p());
                let c = correct_counts.entry(key.clone()).or_default();
                c.0 += usize::from(correct);
                c.1 += 1;
                if let Some(tier) = &row.quality_tier {
                    *tiers
                        .entry(key)
                        .or_default()
                        .entry(tier.clone())
                        .or_default() += 1;
                }
            }
            Some(Metric::StefJudged)
                if row.inclusion_probability.is_some() && scored(&row.status) =>
            {
                let line_phi = row.revised_value.unwrap_or(row.value);
                let line_p = row.revised_line_p();
                let judged = row
                    .semantic_verdict
                    .as_deref()
                    .is_some_and(semantic_correct);
                let human = truth.get(row.event_id.as_str()).copied();
                view.uniform_events += 1;
                view.uniform_labelled += usize::from(human.is_some());
                estimate.observe_judged(row.value, human.unwrap_or(judged), line_phi, line_p);
            }
            _ => {}
        }
    }
    series
        .into_iter()
        .map(|(key, (mut view, estimate))| {
            view.app = key.app.clone();
            view.agent = key.agent.clone();
            view.version = key.version.clone();
            let phi = &estimate.phi;
            view.phi_mean = phi.mean();
            view.phi_histogram_max = view.phi_histogram.iter().copied().max().unwrap_or(0);
            if let Some(counts) = tiers.get(&key) {
                let total: usize = counts.values().sum();
                view.tiers = TIER_ORDER
                    .iter()
                    .map(|t| {
                        let n = counts.get(*t).copied().unwrap_or(0);
                        (t.to_string(), n as f64 / total.max(1) as f64)
                    })
                    .collect();
            }
            if let Some((yes, n)) = correct_counts.get(&key) {
                view.line_correct_share = (*n > 0).then(|| *yes as f64 / *n as f64);
            }
            view.estimate = estimate_of(&estimate);
            view.people = people.remove(&key).unwrap_or_default();
            view.firing_alerts = alerts
                .iter()
                .filter(|a| a.is_firing() && super::monitor::alert_matches(a, &key))
                .count();
            view
        })
        .collect()
}

fn estimate_of(estimate: &SeriesEstimate) -> Option<Estimate> {
    if estimate.correct_correction.n == 0 {
        return None;
    }
    estimate.correct_share()
}

/// The judge identity of a judge row (`stef`, `stef_judged`): its `judge_identity`, or for rows
/// written before identities were stored, its `judge` kind (`deterministic`, `llm:<model>`).
pub fn judge_identity_of(row: &StoredRow) -> String {
    if row.judge_identity.is_empty() {
        row.judge.clone().unwrap_or_else(|| "unknown".to_string())
    } else {
        row.judge_identity.clone()
    }
}

/// Whether a row is one of STEF's: `stef` (line rate) or `stef_judged` (the LLM's second pass).
fn is_stef_metric(row: &StoredRow) -> bool {
    matches!(row.metric.known(), Some(Metric::Stef | Metric::StefJudged))
}

/// Whether a row is a judge's verdict that can be compared with a label: a scored `stef` or
/// `stef_judged` row with a semantic verdict.
fn is_judge_row(row: &StoredRow) -> bool {
    is_stef_metric(row) && scored(&row.status) && row.semantic_verdict.is_some()
}

/// The series text of a row for agreement (`app/agent/version`).
pub fn series_text(row: &StoredRow) -> String {
    let SeriesKey {
        app,
        agent,
        version,
    } = SeriesKey::of(row);
    format!("{app}/{agent}/{version}")
}

/// Every label (correct / incorrect; `unsure` never) beside every judge row of its event, with
/// the event's time in seconds; and the labelled events that have no judge row yet.
pub fn agreement_pairs<'l>(
    rows: &[StoredRow],
    labels: impl IntoIterator<Item = &'l HumanLabel>,
) -> (Vec<(i64, AgreementPair)>, Vec<String>) {
    let mut by_event: HashMap<&str, Vec<&StoredRow>> = HashMap::new();
    for row in rows.iter().filter(|r| is_judge_row(r)) {
        by_event.entry(row.event_id.as_str()).or_default().push(row);
    }
    let mut pairs = Vec::new();
    let mut missing = Vec::new();
    for label in labels {
        let Some(human) = label.verdict.as_bool() else {
            continue;
        };
        let Some(judge_rows) = by_event.get(label.event_id.as_str()) else {
            missing.push(label.event_id.clone());
            continue;
        };
        for row in judge_rows {
            pairs.push((
                row.epoch(),
                AgreementPair {
                    event_id: label.event_id.clone(),
                    reviewer: label.reviewer.clone(),
                    key: AgreementKey {
                        metric: row.metric.clone(),
                        identity: judge_identity_of(row),
                        series: series_text(row),
                    },
                    judge: row.verdict_correct(),
                    human,
                },
            ));
        }
    }
    pairs.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| a.1.event_id.cmp(&b.1.event_id))
            .then_with(|| a.1.reviewer.cmp(&b.1.reviewer))
            .then_with(|| a.1.key.metric.cmp(&b.1.key.metric))
    });
    (pairs, missing)
}

/// The review queue's calibration slice: per judge identity and UTC week, `per_week` events
/// drawn uniformly (by a hash of the event id and `salt`) — labels on them measure the judge's
/// agreement on unbiased data, unlike labels on events the queue ranks as informative.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalibrationSample {
    /// Events per judge identity and week (the labelling target); 0 = no calibration slice.
    pub per_week: usize,
    /// Salt of the hash draw.
    pub salt: String,
}

impl CalibrationSample {
    /// The sample `[server] calibration_per_week` and `calibration_salt` describe.
    pub fn from_settings(
        settings: &crate::review_page::config::ServerSettings,
    ) -> CalibrationSample {
        CalibrationSample {
            per_week: settings.calibration_per_week,
            salt: settings.calibration_salt.clone(),
        }
    }
}

impl Default for CalibrationSample {
    fn default() -> Self {
        CalibrationSample::from_settings(&crate::review_page::config::ServerSettings::default())
    }
}

/// The events of the calibration sample among `rows` (every judge row's identity).
pub fn calibration_events<'r>(
    rows: &'r [StoredRow],
    sample: &CalibrationSample,
) -> HashSet<&'r str> {
    sample_events(rows.iter().filter(|r| is_stef_metric(r)), sample)
}

/// The calibration sample among the events of `rows` (each row's judge identity and time).
fn sample_events<'r>(
    rows: impl Iterator<Item = &'r StoredRow>,
    sample: &CalibrationSample,
) -> HashSet<&'r str> {
    if sample.per_week == 0 {
        return HashSet::new();
    }
    let identities: Vec<(&str, String, i64)> = rows
        .map(|r| (r.event_id.as_str(), judge_identity_of(r), r.epoch()))
        .collect();
    calibration_sample(
        identities
            .iter()
            .map(|(id, identity, t)| (*id, identity.as_str(), *t)),
        &sample.salt,
        sample.per_week,
    )
}

/// One judge identity of one series on the overview: when it judged, and how well it agrees
/// with people.
#[derive(Debug, Clone, Serialize)]
pub struct JudgeView {
    /// `stef` (line rate) or `stef_judged` (LLM).
    pub metric: StoredMetric,
    /// The judge identity.
    pub identity: String,
    /// Series (`app/agent/version`).
    pub series: String,
    /// First and last event time it judged (RFC 3339).
    pub first_seen: String,
    /// Last event time it judged.
    pub last_seen: String,
    /// Rows it wrote.
    pub rows: usize,
    /// Whether another identity judged this series and metric before it (a judge change).
    pub replaced_another: bool,
    /// Agreement over every label on its events.
    pub agreement: AgreementSummary,
    /// Agreement over the labels on calibration-sample events only (unbiased).
    pub calibration: AgreementSummary,
    /// Agreement per UTC week of the events (Monday's date), oldest first.
    pub weeks: Vec<(String, AgreementSummary)>,
}

/// How often the LLM judge and the line-rate verdict disagree on one series.
#[derive(Debug, Clone, Serialize)]
pub struct DisagreementView {
    /// Series (`app/agent/version`).
    pub series: String,
    /// LLM-judged events (status ok).
    pub judged: u64,
    /// Of those, the verdict differs from the line-rate verdict.
    pub disagree: u64,
    /// The share, with its 95% Wilson interval.
    pub share: Option<f64>,
    /// The interval.
    pub interval: Option<(f64, f64)>,
    /// Per UTC week (Monday's date): (judged, share).
    pub weeks: Vec<(String, u64, f64)>,
}

fn date_of(epoch: i64) -> String {
    chrono::DateTime::from_timestamp(epoch, 0)
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

/// Judged and disagreeing events of a series, in all and per week.
type DisagreementCounts = (u64, u64, BTreeMap<i64, (u64, u64)>);

/// The judge disagreement per series, with its interval and weeks.
fn disagreement_views(disagreement: BTreeMap<String, DisagreementCounts>) -> Vec<DisagreementView> {
    disagreement
        .into_iter()
        .map(|(series, (judged, disagree, weeks))| DisagreementView {
            series,
            judged,
            disagree,
            share: (judged > 0).then(|| disagree as f64 / judged as f64),
            interval: wilson_interval(disagree, judged),
            weeks: weeks
                .into_iter()
                .map(|(w, (n, d))| (date_of(week_start(w)), n, d as f64 / n.max(1) as f64))
                .collect(),
        })
        .collect()
}

/// Every judge identity per series with its agreement, and the judge disagreement per series.
pub fn judges(
    rows: &[StoredRow],
    labels: &[HumanLabel],
    sample: &CalibrationSample,
) -> (Vec<JudgeView>, Vec<DisagreementView>) {
    struct Seen {
        first: (i64, String),
        last: (i64, String),
        rows: usize,
        all: Confusion,
        calibration: Confusion,
        weeks: BTreeMap<i64, Confusion>,
    }
    let calibration = calibration_events(rows, sample);
    let mut seen: BTreeMap<AgreementKey, Seen> = BTreeMap::new();
    let mut disagreement: BTreeMap<String, DisagreementCounts> = BTreeMap::new();
    for row in rows {
        if !is_stef_metric(row) {
            continue;
        }
        let key = AgreementKey {
            metric: row.metric.clone(),
            identity: judge_identity_of(row),
            series: series_text(row),
        };
        let t = row.epoch();
        let entry = seen.entry(key.clone()).or_insert_with(|| Seen {
            first: (t, row.ts.clone()),
            last: (t, row.ts.clone()),
            rows: 0,
            all: Confusion::default(),
            calibration: Confusion::default(),
            weeks: BTreeMap::new(),
        });
        entry.rows += 1;
        if t < entry.first.0 {
            entry.first = (t, row.ts.clone());
        }
        if t > entry.last.0 {
            entry.last = (t, row.ts.clone());
        }
        if row.metric == Metric::StefJudged && row.status == "ok" {
            let d = disagreement.entry(key.series).or_default();
            let differs = row.verdict_correct() != row.revised_line_correct();
            d.0 += 1;
            d.1 += u64::from(differs);
            let w = d.2.entry(utc_week(t)).or_default();
            w.0 += 1;
            w.1 += u64::from(differs);
        }
    }
    let (pairs, _) = agreement_pairs(rows, labels);
    for (t, pair) in pairs {
        let Some(entry) = seen.get_mut(&pair.key) else {
            continue;
        };
        entry.all.add(pair.judge, pair.human);
        if calibration.contains(pair.event_id.as_str()) {
            entry.calibration.add(pair.judge, pair.human);
        }
        entry
            .weeks
            .entry(utc_week(t))
            .or_default()
            .add(pair.judge, pair.human);
    }
    let mut first_by_stream: HashMap<(StoredMetric, String), i64> = HashMap::new();
    for (key, s) in &seen {
        let first = first_by_stream
            .entry((key.metric.clone(), key.series.clone()))
            .or_insert(s.first.0);
        *first = (*first).min(s.first.0);
    }
    let judges = seen
        .into_iter()
        .map(|(key, s)| JudgeView {
            replaced_another: first_by_stream
                .get(&(key.metric.clone(), key.series.clone()))
                .is_some_and(|first| *first < s.first.0),
            metric: key.metric,
            identity: key.identity,
            series: key.series,
            first_seen: s.first.1,
            last_seen: s.last.1,
            rows: s.rows,
            agreement: s.all.summary(),
            calibration: s.calibration.summary(),
            weeks: s
                .weeks
                .into_iter()
                .map(|(w, c)| (date_of(week_start(w)), c.summary()))
                .collect(),
        })
        .collect();
    (judges, disagreement_views(disagreement))
}

/// The judges and the disagreement as a terminal table (`report --labels`,
/// `import-labels`).
pub fn judges_text(judges: &[JudgeView], disagreement: &[DisagreementView]) -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "judges (agreement with human labels: kappa and accuracy with 95% intervals)\n",
    );
    if judges.is_empty() {
        out.push_str("  no judge rows\n");
    }
    for j in judges {
        let _ = writeln!(
            out,
            "  {} {} {}{}\n    rows {} from {} to {}; {}{}",
            j.series,
            j.metric,
            j.identity,
            if j.replaced_another {
                "  [replaced another judge]"
            } else {
                ""
            },
            j.rows,
            j.first_seen,
            j.last_seen,
            j.agreement.describe(),
            if j.calibration.labelled > 0 {
                format!("; calibration sample: {}", j.calibration.describe())
            } else {
                String::new()
            },
        );
        if j.weeks.len() > 1 {
            let weeks: Vec<String> = j
                .weeks
                .iter()
                .map(|(week, a)| match a.kappa {
                    Some(k) => format!("{week} κ {k:.2} ({})", a.labelled),
                    None => format!("{week} κ — ({})", a.labelled),
                })
                .collect();
            let _ = writeln!(out, "    per week: {}", weeks.join("; "));
        }
    }
    for d in disagreement {
        let _ = writeln!(
            out,
            "  judge disagreement {}: {} of {} LLM-judged events{}",
            d.series,
            d.disagree,
            d.judged,
            match (d.share, d.interval) {
                (Some(share), Some((lo, hi))) => format!(
                    " = {:.1}% [{:.1}, {:.1}]",
                    share * 100.0,
                    lo * 100.0,
                    hi * 100.0
                ),
                _ => String::new(),
            }
        );
    }
    out
}

/// The line-rate estimates of the share correct ([`line_rate_estimates`]) as a terminal table
/// (`report --labels`).
pub fn line_rate_text(estimates: &BTreeMap<SeriesKey, LineRateEstimate>) -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "share correct from the line rate and people's labels (mean p_correct + the mean \
         label − p_correct on the labelled calibration slice, or on every event when all are \
         labelled; 95% interval)\n",
    );
    for (
        SeriesKey {
            app,
            agent,
            version,
        },
        e,
    ) in estimates
    {
        let series = format!("{app}/{agent}/{version}");
        let mean_p = e
            .mean_p
            .map_or("-".to_string(), |p| format!("{:.1}%", 100.0 * p));
        let estimate = match &e.estimate {
            Some(est) => match (est.lower, est.upper) {
                (Some(lo), Some(hi)) => format!(
                    "{:.1}% [{:.1}, {:.1}]",
                    100.0 * est.mean,
                    100.0 * lo,
                    100.0 * hi
                ),
                _ => format!("{:.1}% [n<2]", 100.0 * est.mean),
            },
            None => "- (no labelled calibration events)".to_string(),
        };
        let _ = writeln!(
            out,
            "  {series}: {} events, mean p_correct {mean_p}; with {} labels{}: {estimate}",
            e.events,
            e.labelled,
            if e.census { " (every event)" } else { "" },
        );
    }
    out
}

/// Which events a queue page lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueFilter {
    /// Only this app.
    pub app: Option<String>,
    /// Only this agent.
    pub agent: Option<String>,
    /// Only this agent version.
    pub version: Option<String>,
    /// Only events with a row of this metric.
    pub metric: Option<String>,
    /// Only events in this alert's window.
    pub alert: Option<String>,
    /// Leave out events this reviewer already labelled.
    pub reviewer: Option<String>,
    /// Only the calibration sample's events nobody labelled yet (then `calibration` says
    /// which sample).
    pub calibration: Option<CalibrationSample>,
    /// Only events whose line-rate row reads this element, `<dimension>:<element>`
    /// (`table:superhero`, `question_type:count:molecule`; `stores::breakdown`).
    pub element: Option<String>,
}

/// One entry of the review queue.
#[derive(Debug, Clone, Serialize)]
pub struct QueueItem {
    /// Event id.
    pub event_id: String,
    /// Event time.
    pub ts: String,
    /// Series.
    pub app: String,
    /// Agent.
    pub agent: String,
    /// Agent version.
    pub version: String,
    /// Line-rate Φ, when scored.
    pub phi: Option<f64>,
    /// Line-rate tier.
    pub tier: Option<String>,
    /// Priority (sum of the reasons' weights).
    pub priority: u32,
    /// Why a label here is informative.
    pub reasons: Vec<&'static str>,
    /// Labels the event already has (all reviewers).
    pub labels: usize,
}

/// Event ids in the window of each firing alert: the alert's `events` most recent events of
/// its series up to its firing time, and every event of the series since.
pub fn alert_windows(rows: &[StoredRow], alerts: &[AlertView]) -> HashMap<String, HashSet<String>> {
    let mut out = HashMap::new();
    for alert in alerts {
        let mut series: Vec<(i64, &str)> = rows
            .iter()
            .filter(|r| r.metric == Metric::Stef && alert.covers(r))
            .map(|r| (r.epoch(), r.event_id.as_str()))
            .collect();
        series.sort();
        let split = series.partition_point(|(t, _)| *t <= alert.fired_at);
        let start = split.saturating_sub(alert.events.max(1) as usize);
        let ids: HashSet<String> = series[start..]
            .iter()
            .map(|(_, id)| id.to_string())
            .collect();
        out.insert(alert.alert_id.clone(), ids);
    }
    out
}

/// The review queue: events ordered by how informative a label would be (then newest first),
/// at most `limit`.
pub fn queue(
    rows: &[StoredRow],
    alerts: &[AlertView],
    labels: &[HumanLabel],
    filter: &QueueFilter,
    limit: usize,
) -> Vec<QueueItem> {
    // Windows of the firing alerts and of the alert the queue is filtered on (not of every
    // resolved alert on record: each window is a pass over the rows).
    let relevant: Vec<AlertView> = alerts
        .iter()
        .filter(|a| a.is_firing() || filter.alert.as_deref() == Some(a.alert_id.as_str()))
        .cloned()
        .collect();
    let windows = alert_windows(rows, &relevant);
    let firing: HashSet<&str> = relevant
        .iter()
        .filter(|a| a.is_firing())
        .flat_map(|a| windows.get(&a.alert_id).into_iter().flatten())
        .map(String::as_str)
        .collect();
    let only: Option<&HashSet<String>> = filter.alert.as_ref().map(|id| {
        static EMPTY: std::sync::OnceLock<HashSet<String>> = std::sync::OnceLock::new();
        windows
            .get(id)
            .unwrap_or_else(|| EMPTY.get_or_init(HashSet::new))
    });
    let mut label_counts: HashMap<&str, usize> = HashMap::new();
    let mut mine: HashSet<&str> = HashSet::new();
    for l in labels {
        *label_counts.entry(l.event_id.as_str()).or_default() += 1;
        if filter.reviewer.as_deref() == Some(l.reviewer.as_str()) {
            mine.insert(l.event_id.as_str());
        }
    }
    let mut by_event: BTreeMap<&str, Vec<&StoredRow>> = BTreeMap::new();
    for row in rows {
        by_event.entry(row.event_id.as_str()).or_default().push(row);
    }
    let calibration: Option<HashSet<&str>> = filter
        .calibration
        .as_ref()
        .map(|sample| calibration_events(rows, sample));
    let want = |have: &Option<String>, want: &Option<String>| {
        want.as_deref()
            .is_none_or(|w| have.as_deref().unwrap_or("") == w)
    };
    let mut items: Vec<(i64, QueueItem)> = Vec::new();
    for (id, rows) in by_event {
        let Some(first) = rows.first() else { continue };
        if !want(&first.app_id, &filter.app)
            || !want(&first.agent_id, &filter.agent)
            || !want(&first.agent_version, &filter.version)
            || filter
                .metric
                .as_deref()
                .is_some_and(|m| !rows.iter().any(|r| r.metric.as_str() == m))
            || only.is_some_and(|ids| !ids.contains(id))
            || filter.element.as_deref().is_some_and(|e| {
                !rows.iter().any(|r| {
                    r.metric == Metric::Stef && crate::stores::breakdown::row_has_element(r, e)
                })
            })
            || mine.contains(id)
            || calibration
                .as_ref()
                .is_some_and(|ids| !ids.contains(id) || label_counts.contains_key(id))
        {
            continue;
        }
        let signals = signals_of(&rows, firing.contains(id));
        let (priority, reasons) = queue_priority(&signals);
        let line = rows.iter().find(|r| r.metric == Metric::Stef);
        let SeriesKey {
            app,
            agent,
            version,
        } = SeriesKey::of(first);
        items.push((
            first.epoch(),
            QueueItem {
                event_id: id.to_string(),
                ts: first.ts.clone(),
                app,
                agent,
                version,
                phi: line.filter(|r| scored(&r.status)).map(|r| r.value),
                tier: line.and_then(|r| r.quality_tier.clone()),
                priority,
                reasons: reasons.into_iter().map(QueueReason::as_str).collect(),
                labels: label_counts.get(id).copied().unwrap_or(0),
            },
        ));
    }
    items.sort_by(|(ta, a), (tb, b)| {
        b.priority
            .cmp(&a.priority)
            .then(tb.cmp(ta))
            .then(a.event_id.cmp(&b.event_id))
    });
    items
        .into_iter()
        .take(limit)
        .map(|(_, item)| item)
        .collect()
}

/// The queue's view of one event's rows.
pub fn signals_of(rows: &[&StoredRow], in_firing_alert: bool) -> EventSignals {
    let mut signals = EventSignals {
        in_firing_alert,
        ..EventSignals::default()
    };
    let mut ex_equal = false;
    let mut counterexample = false;
    for row in rows {
        match row.metric.known() {
            Some(Metric::Stef) if scored(&row.status) => {
                signals.line_rate_correct = Some(row.verdict_correct());
                signals.line_rate_confidence = row.confidence_tier.clone();
                signals.quality_tier = row.quality_tier.clone();
            }
            Some(Metric::StefJudged) if scored(&row.status) => {
                signals.judged_correct = row.semantic_verdict.as_deref().map(semantic_correct);
            }
            Some(Metric::Stef | Metric::StefJudged) => {}
            _ => {
                let metric = &row.metric;
                // `ts_ex` carries the counterexample: a generated database on which the
                // predicted and gold queries return different results.
                counterexample |= *metric == Metric::TsEx && has_counterexample(&row.details);
                if scored(&row.status)
                    && let Some(v) = row.verdict
                {
                    signals.gold_verdicts.push((metric.to_string(), v));
                    ex_equal |= *metric == Metric::Ex && v;
                }
            }
        }
    }
    signals.ex_counterexample = ex_equal && counterexample;
    signals
}

/// Whether a row's details carry a counterexample (a database on which the queries differ).
pub fn has_counterexample(details: &serde_json::Value) -> bool {
    details
        .get("counterexample")
        .is_some_and(|c| !c.is_null() && c != &serde_json::Value::Bool(false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, metric: &str, value: f64, verdict: &str, ts: &str) -> StoredRow {
        serde_json::from_value(serde_json::json!({
            "event_id": id, "ts": ts, "app_id": "shop", "agent_id": "a", "agent_version": "v1",
            "metric": metric, "value": value, "status": "ok", "details": {},
            "semantic_verdict": verdict, "confidence_tier": "high", "quality_tier":
            if value >= 50.0 { "good" } else { "poor" },
        }))
        .unwrap()
    }

    /// The share correct from the line rate: the mean p_correct alone without labels; with
    /// labels on the calibration slice, rectified by them (and labels off the slice ignored);
    /// with every event labelled, the labels' own share.
    #[test]
    fn the_line_rate_estimate_is_mean_p_correct_rectified_by_calibration_labels() {
        let rows: Vec<StoredRow> = (0..60)
            .map(|i| {
                let mut r = row(
                    &format!("e{i}"),
                    "stef",
                    80.0,
                    "correct",
                    &format!("2026-01-0{}T00:00:{:02}Z", 5 + i / 30, i % 30),
                );
                r.p_correct = Some(0.5);
                r.verdict = Some(true);
                r.judge_identity = "deterministic verdict=pc-x".into();
                r
            })
            .collect();
        let sample = CalibrationSample {
            per_week: 10,
            salt: "s".into(),
        };
        let label = |id: &str, verdict: &str| {
            HumanLabel::validated(id, "ana", verdict, "", "", "2026-01-08T00:00:00Z".into())
                .unwrap()
        };
        let key = SeriesKey {
            app: "shop".into(),
            agent: "a".into(),
            version: "v1".into(),
        };
        let alone = line_rate_estimates(&rows, &[], &sample);
        assert_eq!(alone[&key].mean_p, Some(0.5));
        assert_eq!(alone[&key].labelled, 0);
        assert!(alone[&key].estimate.is_none());
        // Every sampled event labelled correct, every other event labelled incorrect: only the
        // sampled ones count, so the estimate is 0.5 + (1 − 0.5) = 1.
        let sampled = calibration_events(&rows, &sample);
        assert_eq!(sampled.len(), 10, "one week, ten events");
        let labels: Vec<HumanLabel> = rows
            .iter()
            .map(|r| {
                let id = r.event_id.as_str();
                label(
                    id,
                    if sampled.contains(id) {
                        "correct"
                    } else {
                        "incorrect"
                    },
                )
            })
            .collect();
        // Every event is labelled: a census, whose estimate is the labels' own share (1/6).
        let census = line_rate_estimates(&rows, &labels, &sample);
        assert!(census[&key].census);
        let share = census[&key].estimate.unwrap().mean;
        assert!((share - 10.0 / 60.0).abs() < 1e-9, "{share}");
        // Without the labels off the slice, only the slice's count.
        let on_slice: Vec<HumanLabel> = labels
            .iter()
            .filter(|l| sampled.contains(l.event_id.as_str()))
            .cloned()
            .collect();
        let rectified = line_rate_estimates(&rows, &on_slice, &sample);
        assert!(!rectified[&key].census);
        assert_eq!(rectified[&key].labelled, 10);
        let e = rectified[&key].estimate.unwrap();
        assert!((e.mean - 1.0).abs() < 1e-9, "{e:?}");
        // Labels off the slice only: nothing to rectify with.
        let off_slice: Vec<HumanLabel> = labels
            .iter()
            .filter(|l| !sampled.contains(l.event_id.as_str()))
            .cloned()
            .collect();
        assert!(
            line_rate_estimates(&rows, &off_slice, &sample)[&key]
                .estimate
                .is_none()
        );
        // The reliability plot reads every labelled event.
        let r = reliability(&rows, &labels);
        assert_eq!(r.events, 60);
        assert_eq!(r.bins[5].0, 60);
        assert!((r.bins[5].2 - 10.0 / 60.0).abs() < 1e-9);
    }

    #[test]
    fn the_overview_counts_scored_rows_and_human_labels_override_the_judge() {
        let mut rows = vec![
            row("e1", "stef", 80.0, "correct", "2026-01-01T00:00:01Z"),
            row("e2", "stef", 20.0, "incorrect", "2026-01-01T00:00:02Z"),
        ];
        let mut judged = row(
            "e1",
            "stef_judged",
            30.0,
            "incorrect",
            "2026-01-01T00:00:01Z",
        );
        judged.inclusion_probability = Some(1.0);
        judged.revised_value = Some(80.0);
        judged.revised_verdict = Some("correct".into());
        rows.push(judged);
        let mut unscored = row("e3", "stef", 0.0, "incorrect", "2026-01-01T00:00:03Z");
        unscored.status = "judge_error".into();
        rows.push(unscored);
        let view = overview(&rows, &[], &[], &CalibrationSample::default());
        assert_eq!(view.len(), 1);
        assert_eq!((view[0].events, view[0].scored), (3, 2));
        assert_eq!(view[0].phi_mean, Some(50.0));
        assert_eq!(view[0].line_correct_share, Some(0.5));
        let judge_only = view[0].estimate.unwrap().mean;
        // A human says the judged event is correct after all: the estimate moves up.
        let label = HumanLabel::validated(
            "e1",
            "ana",
            "correct",
            "",
            "",
            "2026-01-01T00:00:00Z".into(),
        )
        .unwrap();
        let view = overview(
            &rows,
            &[],
            std::slice::from_ref(&label),
            &CalibrationSample::default(),
        );
        assert_eq!(view[0].uniform_labelled, 1);
        assert!(view[0].estimate.unwrap().mean > judge_only);
        assert_eq!(view[0].labelled, 1);
    }

    #[test]
    fn the_queue_puts_disagreement_first_and_skips_what_the_reviewer_labelled() {
        let mut rows = vec![
            row("quiet", "stef", 90.0, "correct", "2026-01-01T00:00:05Z"),
            row("split", "stef", 90.0, "correct", "2026-01-01T00:00:01Z"),
        ];
        rows.push(row(
            "split",
            "stef_judged",
            10.0,
            "incorrect",
            "2026-01-01T00:00:01Z",
        ));
        let q = queue(&rows, &[], &[], &QueueFilter::default(), 10);
        assert_eq!(q[0].event_id, "split");
        assert_eq!(q[0].reasons, vec!["line rate and LLM judge disagree"]);
        let label = HumanLabel::validated("split", "ana", "correct", "", "", "t".into()).unwrap();
        let filter = QueueFilter {
            reviewer: Some("ana".into()),
            ..QueueFilter::default()
        };
        let q = queue(&rows, &[], &[label], &filter, 10);
        assert_eq!(q.len(), 1);
        assert_eq!(q[0].event_id, "quiet");
    }

    #[test]
    fn ex_equal_with_a_ts_ex_counterexample_is_flagged() {
        let mut ex = row("e1", "ex", 1.0, "", "2026-01-01T00:00:01Z");
        ex.verdict = Some(true);
        let mut ts = row("e1", "ts_ex", 0.0, "", "2026-01-01T00:00:01Z");
        ts.verdict = Some(false);
        ts.details = serde_json::json!({"counterexample": {"rows": 3, "script": "CREATE TABLE t"}});
        let signals = signals_of(&[&ex, &ts], false);
        assert!(signals.ex_counterexample);
        ts.details = serde_json::json!({"counterexample": null});
        assert!(!signals_of(&[&ex, &ts], false).ex_counterexample);
    }

    #[test]
    fn an_alert_window_holds_its_recent_events_and_everything_since() {
        let rows: Vec<StoredRow> = (0..6)
            .map(|i| {
                row(
                    &format!("e{i}"),
                    "stef",
                    10.0,
                    "incorrect",
                    &format!("2026-01-01T00:00:0{i}Z"),
                )
            })
            .collect();
        let alert: AlertView = serde_json::from_value(serde_json::json!({
            "alert_id": "al", "fired_at": rows[3].epoch(), "app_id": "shop", "agent_id": "a",
            "agent_version": "v1", "events": 2, "details": {"state": "firing"}
        }))
        .unwrap();
        let windows = alert_windows(&rows, std::slice::from_ref(&alert));
        let mut ids: Vec<&String> = windows["al"].iter().collect();
        ids.sort();
        assert_eq!(ids, ["e2", "e3", "e4", "e5"]);
        let filter = QueueFilter {
            alert: Some("al".into()),
            ..QueueFilter::default()
        };
        let q = queue(&rows, &[alert], &[], &filter, 10);
        assert_eq!(q.len(), 4);
        assert!(
            q.iter()
                .all(|i| i.reasons.contains(&"in a firing alert's window"))
        );
    }
}
