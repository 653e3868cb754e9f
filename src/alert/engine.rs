//! The alert engine: per-series detectors over rolling windows, with firing/resolved state.
//!
//! Every (rule, metric, series) has a [`Detector`] holding a *recent* window and the *baseline*
//! window of observations just before it. Every `evaluate_every` observations it runs a
//! one-sided Mann–Whitney test (see [`super::stats`]); an evaluation *breaches* when
//! `p < alpha` **and** the effect is at least the rule's minimum effect. `fire_after`
//! consecutive breaches fire the alert; while firing the baseline is frozen, and `resolve_after`
//! consecutive evaluations with an effect below `resolve_ratio × min effect` resolve it. A
//! notification is produced only on these state changes.
//!
//! Rules: `score_drop` (mean of a metric's value falls; STEF Φ and gold metrics), `poor_share`
//! (share of `poor`-tier STEF rows rises), `judge_fallback` (share of STEF rows with status
//! `judge_fallback` rises), `judge_disagreement` (share of LLM-judged events whose verdict
//! differs from the line-rate verdict rises) and `dead_letters` (share of dead-lettered messages
//! rises; one global series, since a dead letter has no labels).
//!
//! Two more kinds of rule watch **estimates that carry their own uncertainty** rather than raw
//! values, and fire on their intervals:
//!
//! - `estimate_low` / `estimate_drop` ([`EstimateDetector`]): per series, the calibrated share
//!   correct (prediction-powered inference: the line-rate share over every event plus the mean
//!   LLM-minus-line-rate correction on the uniform slice, `crate::sampling::estimate`) is kept
//!   in blocks of `estimate_block` line-rate rows — a block's moments are a handful of sums, so
//!   nothing is rescanned. When a block closes, the recent window (the last
//!   `estimate_recent_blocks`) is estimated with its 95% interval: `estimate_low` breaches when
//!   the interval's upper end is below `estimate_floor`; `estimate_drop` when it lies wholly
//!   below the baseline window's interval (the `estimate_baseline_blocks` before it, frozen
//!   while the alert fires). Each window needs `estimate_min_judged` judged uniform events.
//! - `judge_agreement`: human labels beside judge rows ([`AlertInput::Agreement`], from the
//!   agreement monitor) feed an [`AgreementTracker`] per judge metric and identity (pooled over
//!   series); after each new label it breaches when Cohen's κ over the identity's last
//!   `agreement_window` labels is below `agreement_kappa_min` with at least
//!   `agreement_min_labels` of them. A new judge identity starts with no labels: its agreement
//!   is measured afresh, never averaged with its predecessor's.
//!
//! Both use the same hysteresis as the others (`fire_after` breaches to fire, `resolve_after`
//! calm evaluations to resolve), and their notifications carry the intervals.

use std::collections::{BTreeMap, HashMap, VecDeque};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::config::{AlertsConfig, RuleSet, SeriesLabel};
use super::stats::{Comparison, Direction, compare, normal_cdf};
use crate::evaluation::{EvaluationRow, Metric, RowStatus};
use crate::sampling::agreement::{AgreementKey, AgreementPair, AgreementTracker, PairChange};
use crate::sampling::estimate::{Estimate, SeriesEstimate, Z_95};
use crate::sampling::select::verdict_is_correct;

/// What the engine is fed: one scored event's rows, or one dead letter.
#[derive(Debug, Clone)]
pub enum AlertInput {
    /// The rows one event produced.
    Rows(Vec<EvaluationRow>),
    /// A message that was dead-lettered.
    DeadLetter,
    /// Human labels beside the judge rows of their events (the agreement monitor).
    Agreement(Vec<AgreementPair>),
}

/// Which rule a detector implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    /// The mean value of a metric dropped.
    ScoreDrop,
    /// The share of `poor`-tier STEF rows rose.
    PoorShare,
    /// The share of `judge_fallback` STEF rows rose.
    JudgeFallback,
    /// The share of dead-lettered messages rose.
    DeadLetters,
    /// The share of LLM-judged events whose verdict differs from the line-rate verdict rose.
    JudgeDisagreement,
    /// The calibrated share correct is below the floor (its whole interval).
    EstimateLow,
    /// The calibrated share correct dropped: its interval lies below the baseline's.
    EstimateDrop,
    /// A judge identity's κ against human labels fell below the minimum.
    JudgeAgreement,
}

impl RuleKind {
    /// The rule's name (the `rule` column and `alertname` label).
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::ScoreDrop => "score_drop",
            RuleKind::PoorShare => "poor_share",
            RuleKind::JudgeFallback => "judge_fallback",
            RuleKind::DeadLetters => "dead_letters",
            RuleKind::JudgeDisagreement => "judge_disagreement",
            RuleKind::EstimateLow => "estimate_low",
            RuleKind::EstimateDrop => "estimate_drop",
            RuleKind::JudgeAgreement => "judge_agreement",
        }
    }
}

/// Firing or resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertState {
    /// The condition holds.
    Firing,
    /// The condition held and no longer does.
    Resolved,
}

impl AlertState {
    /// `firing` | `resolved` (also Alertmanager's `status`).
    pub fn as_str(self) -> &'static str {
        match self {
            AlertState::Firing => "firing",
            AlertState::Resolved => "resolved",
        }
    }
}

/// A state change of one alert, handed to the delivery channels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertNotification {
    /// One incident: the fingerprint plus the time it started firing.
    pub alert_id: String,
    /// Stable id of (rule, metric, series).
    pub fingerprint: String,
    /// New state.
    pub state: AlertState,
    /// Rule name.
    pub rule: RuleKind,
    /// Watched metric (`stef`, `ex`, …, or `dead_letter_share`, …).
    pub metric: String,
    /// Series labels (those of the configured series key that the rows carry).
    pub labels: BTreeMap<String, String>,
    /// Severity label from the rules.
    pub severity: String,
    /// When the alert started firing.
    pub started_at: DateTime<Utc>,
    /// When it resolved (resolved notifications only).
    pub ended_at: Option<DateTime<Utc>>,
    /// Mean of the baseline window at this evaluation.
    pub baseline: f64,
    /// Mean of the recent window at this evaluation.
    pub observed: f64,
    /// Shift in the regression direction.
    pub effect: f64,
    /// One-sided Mann–Whitney p-value.
    pub p_value: f64,
    /// Observations in the recent window.
    pub recent_samples: usize,
    /// Observations in the baseline window.
    pub baseline_samples: usize,
    /// Observations of this series so far (position in the stream; for `judge_agreement`,
    /// labels of the judge identity so far).
    pub observations: u64,
    /// The 95% interval of `observed` (estimate and agreement rules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_interval: Option<(f64, f64)>,
    /// The 95% interval of `baseline` (`estimate_drop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_interval: Option<(f64, f64)>,
    /// One-line human summary.
    pub summary: String,
}

/// The notifications of a batch run as text, one line each (`alerts: none` when there are none).
pub fn render_notifications(notes: &[AlertNotification]) -> String {
    if notes.is_empty() {
        return "alerts: none\n".to_string();
    }
    let firing = notes
        .iter()
        .filter(|n| n.state == AlertState::Firing)
        .count();
    let mut out = format!(
        "alerts: {firing} fired, {} resolved\n",
        notes.len() - firing
    );
    for n in notes {
        out.push_str(&format!(
            "  {} (at observation {} of the series; alert {})\n",
            n.summary, n.observations, n.alert_id
        ));
    }
    out
}

/// Identity of one detector.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct DetectorKey {
    rule: RuleKind,
    metric: String,
    labels: Vec<(SeriesLabel, String)>,
}

/// An incident in progress.
#[derive(Debug, Clone)]
struct Firing {
    started_at: DateTime<Utc>,
    alert_id: String,
}

/// Rolling windows and hysteresis state of one (rule, metric, series).
#[derive(Debug, Clone)]
struct Detector {
    direction: Direction,
    min_effect: f64,
    rules: RuleSet,
    recent: VecDeque<f64>,
    baseline: VecDeque<f64>,
    observations: u64,
    since_evaluation: usize,
    breaches: usize,
    calms: usize,
    firing: Option<Firing>,
}

/// What one detector evaluation decided.
enum Transition {
    Fired(Comparison),
    Resolved(Comparison, Firing),
}

impl Detector {
    fn new(direction: Direction, min_effect: f64, rules: RuleSet) -> Detector {
        Detector {
            direction,
            min_effect,
            recent: VecDeque::with_capacity(rules.recent_window + 1),
            baseline: VecDeque::with_capacity(rules.baseline_window + 1),
            rules,
            observations: 0,
            since_evaluation: 0,
            breaches: 0,
            calms: 0,
            firing: None,
        }
    }

    fn push(&mut self, value: f64) -> Option<Transition> {
        if !value.is_finite() {
            return None;
        }
        self.recent.push_back(value);
        if self.recent.len() > self.rules.recent_window
            && let Some(old) = self.recent.pop_front()
            && self.firing.is_none()
        {
            // Frozen while firing: the regression must not become the baseline.
            self.baseline.push_back(old);
            if self.baseline.len() > self.rules.baseline_window {
                self.baseline.pop_front();
            }
        }
        self.observations += 1;
        self.since_evaluation += 1;
        if self.since_evaluation < self.rules.evaluate_every {
            return None;
        }
        self.since_evaluation = 0;
        if self.recent.len() < self.rules.min_samples
            || self.baseline.len() < self.rules.min_samples
        {
            return None;
        }
        let (baseline, recent) = (
            self.baseline.make_contiguous().to_vec(),
            self.recent.make_contiguous(),
        );
        let comparison = compare(&baseline, recent, self.direction);
        match &self.firing {
            Some(_) => {
                if comparison.effect < self.rules.resolve_ratio * self.min_effect {
                    self.calms += 1;
                } else {
                    self.calms = 0;
                }
                if self.calms >= self.rules.resolve_after {
                    self.calms = 0;
                    self.breaches = 0;
                    let firing = self.firing.take()?;
                    return Some(Transition::Resolved(comparison, firing));
                }
                None
            }
            None => {
                if comparison.p_value < self.rules.alpha && comparison.effect >= self.min_effect {
                    self.breaches += 1;
                } else {
                    self.breaches = 0;
                }
                if self.breaches >= self.rules.fire_after {
                    self.breaches = 0;
                    self.calms = 0;
                    return Some(Transition::Fired(comparison));
                }
                None
            }
        }
    }
}

/// Counters describing the engine's own health.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EngineStats {
    /// Inputs observed.
    pub inputs: u64,
    /// Detectors (rule × metric × series) alive.
    pub detectors: usize,
    /// Observations ignored because `max_series` was reached.
    pub ignored_over_max_series: u64,
    /// Alerts currently firing.
    pub firing: usize,
}

/// What one evaluation of a hysteresis decided.
enum Step {
    Fire,
    Resolve(Firing),
}

/// Firing state with hysteresis, for the estimate and agreement detectors: `fire_after`
/// consecutive breaches fire, `resolve_after` consecutive calm evaluations resolve.
#[derive(Debug, Clone, Default)]
struct Hysteresis {
    breaches: usize,
    calms: usize,
    firing: Option<Firing>,
}

impl Hysteresis {
    fn step(&mut self, breach: bool, calm: bool, rules: &RuleSet) -> Option<Step> {
        if self.firing.is_some() {
            self.calms = if calm { self.calms + 1 } else { 0 };
            if self.calms >= rules.resolve_after {
                self.calms = 0;
                self.breaches = 0;
                return self.firing.take().map(Step::Resolve);
            }
            return None;
        }
        self.breaches = if breach { self.breaches + 1 } else { 0 };
        if self.breaches >= rules.fire_after {
            self.breaches = 0;
            self.calms = 0;
            return Some(Step::Fire);
        }
        None
    }
}

/// One block of an [`EstimateDetector`]: the moments of its line-rate rows and of the
/// corrections of its judged uniform-slice events, and the event times its line-rate rows span.
#[derive(Debug, Clone, Default)]
struct Block {
    seq: u64,
    estimate: SeriesEstimate,
    first_ts: i64,
    last_ts: i64,
}

/// Judged rows landing in blocks already evaluated, between two evaluations they trigger.
const LATE_JUDGED_PER_EVALUATION: usize = 10;

/// Closed blocks kept beyond the two windows, for a judge that lags behind the line rate.
const LAG_BLOCKS: usize = 100;

/// The calibrated share correct of one series, kept in blocks of line-rate rows (module docs).
///
/// The second pass writes a judged row after its event's line-rate row, possibly much later
/// (the judge's queue). So a judged row's correction goes to the block whose line-rate rows
/// span its event time, and the windows **trail the judge**: the recent window ends at the
/// *frontier*, the newest closed block that has received a correction, and the baseline window
/// is the blocks before it. Blocks past the frontier wait for their judgments. An evaluation
/// runs when the frontier moves and after every [`LATE_JUDGED_PER_EVALUATION`] corrections
/// that land behind it. While `estimate_drop` fires, its baseline is frozen.
#[derive(Debug, Clone)]
struct EstimateDetector {
    rules: RuleSet,
    /// The block being filled, and its line-rate rows so far.
    block: Block,
    block_rows: usize,
    /// Closed blocks, oldest first.
    blocks: VecDeque<Block>,
    next_seq: u64,
    frontier: Option<u64>,
    late_judged: usize,
    /// The baseline `estimate_drop` fired against, while it fires.
    frozen_baseline: Option<SeriesEstimate>,
    observations: u64,
    low: Hysteresis,
    drop: Hysteresis,
}

/// One evaluation of an [`EstimateDetector`]: the recent and (when full enough) baseline
/// estimates of the share correct, and the baseline's moments (frozen when `estimate_drop`
/// fires).
struct EstimateEvaluation {
    recent: Estimate,
    baseline: Option<Estimate>,
    baseline_moments: Option<SeriesEstimate>,
}

fn merged<'b>(blocks: impl IntoIterator<Item = &'b Block>) -> SeriesEstimate {
    let mut total = SeriesEstimate::default();
    for b in blocks {
        total.correct.merge(&b.estimate.correct);
        total
            .correct_correction
            .merge(&b.estimate.correct_correction);
    }
    total
}

impl EstimateDetector {
    fn new(rules: RuleSet) -> EstimateDetector {
        EstimateDetector {
            rules,
            block: Block::default(),
            block_rows: 0,
            blocks: VecDeque::new(),
            next_seq: 0,
            frontier: None,
            late_judged: 0,
            frozen_baseline: None,
            observations: 0,
            low: Hysteresis::default(),
            drop: Hysteresis::default(),
        }
    }

    /// A judged uniform-slice row of an event at `ts`: its correction joins the block its event
    /// time falls in (the newest block that starts at or before it); an evaluation when the
    /// frontier moves, or when enough corrections landed behind it.
    fn judged(
        &mut self,
        judged_correct: bool,
        line_correct: bool,
        ts: i64,
    ) -> Option<EstimateEvaluation> {
        if self.block_rows > 0 && ts >= self.block.first_ts {
            self.block
                .estimate
                .observe_judged(0.0, judged_correct, 0.0, line_correct);
            return None;
        }
        // Older than every block kept, or before any line-rate row: nothing to revise.
        let block = self.blocks.iter_mut().rev().find(|b| b.first_ts <= ts)?;
        block
            .estimate
            .observe_judged(0.0, judged_correct, 0.0, line_correct);
        let seq = block.seq;
        if self.frontier.is_none_or(|f| seq > f) {
            self.frontier = Some(seq);
            self.late_judged = 0;
            return self.evaluate();
        }
        self.late_judged += 1;
        if self.late_judged < LATE_JUDGED_PER_EVALUATION {
            return None;
        }
        self.late_judged = 0;
        self.evaluate()
    }

    /// A line-rate row of an event at `ts`; when it closes a block that already has its
    /// judgments (a judge keeping up), an evaluation.
    fn line(&mut self, correct: bool, ts: i64) -> Option<EstimateEvaluation> {
        if self.block_rows == 0 {
            self.block.first_ts = ts;
            self.block.last_ts = ts;
        }
        self.block.first_ts = self.block.first_ts.min(ts);
        self.block.last_ts = self.block.last_ts.max(ts);
        self.block.estimate.observe_line(0.0, correct);
        self.block_rows += 1;
        self.observations += 1;
        if self.block_rows < self.rules.estimate_block {
            return None;
        }
        let mut closed = std::mem::take(&mut self.block);
        closed.seq = self.next_seq;
        self.next_seq += 1;
        self.block_rows = 0;
        let judged = closed.estimate.correct_correction.n > 0;
        let seq = closed.seq;
        self.blocks.push_back(closed);
        let keep =
            self.rules.estimate_recent_blocks + self.rules.estimate_baseline_blocks + LAG_BLOCKS;
        while self.blocks.len() > keep {
            self.blocks.pop_front();
        }
        if judged {
            self.frontier = Some(seq);
            self.late_judged = 0;
            return self.evaluate();
        }
        None
    }

    /// The recent window (ending at the frontier) and the baseline before it, each with at
    /// least `estimate_min_judged` judged events.
    fn evaluate(&self) -> Option<EstimateEvaluation> {
        let frontier = self.frontier?;
        let first = self.blocks.front()?.seq;
        let end = usize::try_from(frontier.checked_sub(first)?).ok()? + 1;
        let recent_blocks = self.rules.estimate_recent_blocks;
        let start = end.checked_sub(recent_blocks)?;
        let min = self.rules.estimate_min_judged.max(2);
        let estimate = |m: &SeriesEstimate| {
            (m.correct_correction.n >= min)
                .then(|| m.correct_share())
                .flatten()
                .filter(|e| e.lower.is_some())
        };
        let recent = estimate(&merged(self.blocks.range(start..end)))?;
        let baseline_moments = match &self.frozen_baseline {
            Some(frozen) => Some(*frozen),
            None => start
                .checked_sub(self.rules.estimate_baseline_blocks)
                .map(|from| merged(self.blocks.range(from..start))),
        };
        let baseline = baseline_moments.as_ref().and_then(estimate);
        Some(EstimateEvaluation {
            recent,
            baseline,
            baseline_moments,
        })
    }
}

/// Standard error of an estimate, from its 95% interval.
fn standard_error(e: &Estimate) -> f64 {
    e.half_width().unwrap_or(0.0) / Z_95
}

/// Score-drop detection over all series (pure, synchronous; see the module docs).
#[derive(Debug)]
pub struct AlertEngine {
    config: AlertsConfig,
    detectors: HashMap<DetectorKey, Detector>,
    estimates: HashMap<Vec<(SeriesLabel, String)>, EstimateDetector>,
    agreement: AgreementTracker,
    agreement_states: HashMap<AgreementKey, Hysteresis>,
    stats: EngineStats,
}

/// The parts of a notification that differ between rules.
struct NoteParts {
    rule: RuleKind,
    metric: String,
    labels: BTreeMap<String, String>,
    fingerprint: String,
    comparison: Comparison,
    recent_samples: usize,
    baseline_samples: usize,
    observations: u64,
    observed_interval: Option<(f64, f64)>,
    baseline_interval: Option<(f64, f64)>,
    summary: String,
}

/// `key=value …` of a series (`all traffic` without labels).
fn series_text(labels: &BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        "all traffic".to_string()
    } else {
        labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn interval_text(interval: Option<(f64, f64)>) -> String {
    interval.map_or_else(String::new, |(lo, hi)| format!(" [{lo:.3}, {hi:.3}]"))
}

impl AlertEngine {
    /// An engine with the `[alerts]` configuration.
    pub fn new(config: AlertsConfig) -> AlertEngine {
        let window = config.defaults.agreement_window;
        AlertEngine {
            config,
            detectors: HashMap::new(),
            estimates: HashMap::new(),
            agreement: AgreementTracker::new(window),
            agreement_states: HashMap::new(),
            stats: EngineStats::default(),
        }
    }

    /// The engine's counters.
    pub fn stats(&self) -> EngineStats {
        let firing = self
            .detectors
            .values()
            .filter(|d| d.firing.is_some())
            .count()
            + self
                .estimates
                .values()
                .map(|e| usize::from(e.low.firing.is_some()) + usize::from(e.drop.firing.is_some()))
                .sum::<usize>()
            + self
                .agreement_states
                .values()
                .filter(|h| h.firing.is_some())
                .count();
        EngineStats {
            detectors: self.detectors.len()
                + 2 * self.estimates.len()
                + self.agreement_states.len(),
            firing,
            ..self.stats
        }
    }

    /// Feed one input observed at `now`; returns the state changes it caused.
    pub fn observe(&mut self, input: &AlertInput, now: DateTime<Utc>) -> Vec<AlertNotification> {
        self.stats.inputs += 1;
        let mut out = Vec::new();
        let dead_letter_value = match input {
            AlertInput::DeadLetter => 1.0,
            AlertInput::Rows(_) => 0.0,
            AlertInput::Agreement(pairs) => {
                for pair in pairs {
                    self.observe_pair(pair, now, &mut out);
                }
                return out;
            }
        };
        let defaults = self.config.defaults.clone();
        if defaults.dead_letter_min_increase > 0.0 {
            self.feed(
                DetectorKey {
                    rule: RuleKind::DeadLetters,
                    metric: "dead_letter_share".into(),
                    labels: Vec::new(),
                },
                Direction::Increase,
                defaults.dead_letter_min_increase,
                &defaults,
                dead_letter_value,
                now,
                &mut out,
            );
        }
        if let AlertInput::Rows(rows) = input {
            for row in rows {
                self.observe_row(row, now, &mut out);
            }
        }
        out
    }

    fn observe_row(
        &mut self,
        row: &EvaluationRow,
        now: DateTime<Utc>,
        out: &mut Vec<AlertNotification>,
    ) {
        let rules = self.config.rules_for(row.app_id.as_deref());
        let labels: Vec<(SeriesLabel, String)> = self
            .config
            .series_key
            .iter()
            .filter_map(|label| {
                let value = match label {
                    SeriesLabel::AppId => row.app_id.as_ref(),
                    SeriesLabel::AgentId => row.agent_id.as_ref(),
                    SeriesLabel::AgentVersion => row.agent_version.as_ref(),
                    SeriesLabel::Model => row.model.as_ref(),
                    SeriesLabel::RunId => row.run_id.as_ref(),
                }?;
                Some((*label, value.clone()))
            })
            .collect();
        let metric = row.metric.as_str();
        // Rows whose metric could not be computed say nothing about quality.
        let scored = matches!(row.status, RowStatus::Ok | RowStatus::JudgeFallback)
            || (row.metric != Metric::Stef && row.status == RowStatus::ExecError);
        if scored && rules.metrics.iter().any(|m| m == metric) {
            self.feed(
                DetectorKey {
                    rule: RuleKind::ScoreDrop,
                    metric: metric.to_string(),
                    labels: labels.clone(),
                },
                Direction::Decrease,
                rules.min_drop(metric),
                &rules,
                row.value,
                now,
                out,
            );
        }
        if row.metric == Metric::StefJudged {
            self.observe_judged(row, &rules, labels, now, out);
            return;
        }
        if row.metric != Metric::Stef {
            return;
        }
        if scored && (rules.estimate_floor > 0.0 || rules.estimate_drop) {
            let correct = row
                .stef
                .as_ref()
                .is_some_and(|s| verdict_is_correct(&s.semantic_verdict));
            self.observe_estimate_line(&labels, &rules, correct, event_time(row), now, out);
        }
        if rules.poor_share_min_increase > 0.0 {
            let poor = row.stef.as_ref().is_some_and(|s| s.quality_tier == "poor");
            self.feed(
                DetectorKey {
                    rule: RuleKind::PoorShare,
                    metric: "poor_share".into(),
                    labels: labels.clone(),
                },
                Direction::Increase,
                rules.poor_share_min_increase,
                &rules,
                f64::from(u8::from(poor)),
                now,
                out,
            );
        }
        if rules.judge_fallback_min_increase > 0.0 {
            let fallback = row.status == RowStatus::JudgeFallback;
            self.feed(
                DetectorKey {
                    rule: RuleKind::JudgeFallback,
                    metric: "judge_fallback_share".into(),
                    labels,
                },
                Direction::Increase,
                rules.judge_fallback_min_increase,
                &rules,
                f64::from(u8::from(fallback)),
                now,
                out,
            );
        }
    }

    /// A `stef_judged` row: the judge-disagreement share, and (uniform slice) the estimate's
    /// correction.
    fn observe_judged(
        &mut self,
        row: &EvaluationRow,
        rules: &RuleSet,
        labels: Vec<(SeriesLabel, String)>,
        now: DateTime<Utc>,
        out: &mut Vec<AlertNotification>,
    ) {
        let (Some(judged), Some(stef)) = (&row.judged, &row.stef) else {
            return;
        };
        if row.status != RowStatus::Ok {
            return;
        }
        let llm_correct = verdict_is_correct(&stef.semantic_verdict);
        let line_correct = verdict_is_correct(&judged.revised_verdict);
        if judged.uniform()
            && (rules.estimate_floor > 0.0 || rules.estimate_drop)
            && let Some(detector) = self.estimate_detector(&labels, rules)
            && let Some(eval) = detector.judged(llm_correct, line_correct, event_time(row))
        {
            estimate_notes(detector, &labels, eval, now, out);
        }
        if rules.judge_disagreement_min_increase > 0.0 {
            self.feed(
                DetectorKey {
                    rule: RuleKind::JudgeDisagreement,
                    metric: "judge_disagreement_share".into(),
                    labels,
                },
                Direction::Increase,
                rules.judge_disagreement_min_increase,
                rules,
                f64::from(u8::from(llm_correct != line_correct)),
                now,
                out,
            );
        }
    }

    fn estimate_detector(
        &mut self,
        labels: &[(SeriesLabel, String)],
        rules: &RuleSet,
    ) -> Option<&mut EstimateDetector> {
        if !self.estimates.contains_key(labels) {
            if self.detectors.len() + self.estimates.len() >= self.config.max_series {
                self.stats.ignored_over_max_series += 1;
                return None;
            }
            self.estimates
                .insert(labels.to_vec(), EstimateDetector::new(rules.clone()));
        }
        self.estimates.get_mut(labels)
    }

    fn observe_estimate_line(
        &mut self,
        labels: &[(SeriesLabel, String)],
        rules: &RuleSet,
        correct: bool,
        ts: i64,
        now: DateTime<Utc>,
        out: &mut Vec<AlertNotification>,
    ) {
        let Some(detector) = self.estimate_detector(labels, rules) else {
            return;
        };
        if let Some(eval) = detector.line(correct, ts) {
            estimate_notes(detector, labels, eval, now, out);
        }
    }

    /// One label beside a judge row: the identity's agreement (pooled over series).
    fn observe_pair(
        &mut self,
        pair: &AgreementPair,
        now: DateTime<Utc>,
        out: &mut Vec<AlertNotification>,
    ) {
        let rules = self.config.defaults.clone();
        if rules.agreement_kappa_min <= 0.0 || !rules.agreement_judges.contains(&pair.key.metric) {
            return;
        }
        let key = AgreementKey {
            series: String::new(),
            ..pair.key.clone()
        };
        let pooled = AgreementPair {
            key: key.clone(),
            ..pair.clone()
        };
        if self.agreement.add(pooled) == PairChange::Unchanged {
            return;
        }
        let Some(recent) = self.agreement.recent(&key) else {
            return;
        };
        let labelled = self.agreement.all(&key).map_or(0, |a| a.labelled);
        if recent.labelled < rules.agreement_min_labels as u64 {
            return;
        }
        let Some(kappa) = recent.kappa else {
            return;
        };
        let kmin = rules.agreement_kappa_min;
        let state = self.agreement_states.entry(key.clone()).or_default();
        let Some(step) = state.step(kappa < kmin, kappa >= kmin, &rules) else {
            return;
        };
        let label_map = BTreeMap::from([
            ("judge".to_string(), key.metric.clone()),
            ("judge_identity".to_string(), key.identity.clone()),
        ]);
        let se = recent
            .kappa_interval
            .map_or(0.0, |(lo, hi)| (hi - lo) / (2.0 * Z_95));
        let p_value = if se > 0.0 {
            1.0 - normal_cdf((kmin - kappa) / se)
        } else {
            f64::from(u8::from(kappa >= kmin))
        };
        let summary = format!(
            "agreement of judge {} ({}) with people: κ {kappa:.3}{} over its last {} labels (minimum {kmin:.2}); accuracy {:.3}{}",
            key.identity,
            key.metric,
            interval_text(recent.kappa_interval),
            recent.labelled,
            recent.accuracy.unwrap_or(0.0),
            interval_text(recent.accuracy_interval),
        );
        let parts = NoteParts {
            rule: RuleKind::JudgeAgreement,
            metric: "kappa".into(),
            fingerprint: fingerprint_parts(RuleKind::JudgeAgreement, "kappa", &label_map),
            labels: label_map,
            comparison: Comparison {
                baseline_mean: kmin,
                recent_mean: kappa,
                effect: kmin - kappa,
                p_value,
            },
            recent_samples: usize::try_from(recent.labelled).unwrap_or(usize::MAX),
            baseline_samples: 0,
            observations: labelled,
            observed_interval: recent.kappa_interval,
            baseline_interval: None,
            summary,
        };
        out.push(finish_note(state, step, parts, &rules.severity, now));
    }

    /// Agreement of every judge identity with the labels the engine has seen (pooled over
    /// series), over all labels and the recent window.
    pub fn agreement(&self) -> Vec<crate::sampling::agreement::AgreementRow> {
        self.agreement.snapshot()
    }

    #[allow(clippy::too_many_arguments)]
    fn feed(
        &mut self,
        key: DetectorKey,
        direction: Direction,
        min_effect: f64,
        rules: &RuleSet,
        value: f64,
        now: DateTime<Utc>,
        out: &mut Vec<AlertNotification>,
    ) {
        if !self.detectors.contains_key(&key) {
            if self.detectors.len() >= self.config.max_series {
                self.stats.ignored_over_max_series += 1;
                return;
            }
            self.detectors.insert(
                key.clone(),
                Detector::new(direction, min_effect, rules.clone()),
            );
        }
        let Some(detector) = self.detectors.get_mut(&key) else {
            return;
        };
        let Some(transition) = detector.push(value) else {
            return;
        };
        let fingerprint = fingerprint(&key);
        let observations = detector.observations;
        let (recent_samples, baseline_samples) = (detector.recent.len(), detector.baseline.len());
        let severity = detector.rules.severity.clone();
        let (state, comparison, firing, ended_at) = match transition {
            Transition::Fired(comparison) => {
                let firing = Firing {
                    started_at: now,
                    alert_id: format!("{fingerprint}-{}", now.timestamp_millis()),
                };
                detector.firing = Some(firing.clone());
                (AlertState::Firing, comparison, firing, None)
            }
            Transition::Resolved(comparison, firing) => {
                (AlertState::Resolved, comparison, firing, Some(now))
            }
        };
        let labels: BTreeMap<String, String> = key
            .labels
            .iter()
            .map(|(l, v)| (l.as_str().to_string(), v.clone()))
            .collect();
        let summary = summary_line(state, &key, &labels, &comparison);
        out.push(AlertNotification {
            alert_id: firing.alert_id,
            fingerprint,
            state,
            rule: key.rule,
            metric: key.metric,
            labels,
            severity,
            started_at: firing.started_at,
            ended_at,
            baseline: comparison.baseline_mean,
            observed: comparison.recent_mean,
            effect: comparison.effect,
            p_value: comparison.p_value,
            recent_samples,
            baseline_samples,
            observations,
            observed_interval: None,
            baseline_interval: None,
            summary,
        });
    }
}

/// The state changes of an estimate detector's evaluation (`estimate_low`, `estimate_drop`).
fn estimate_notes(
    detector: &mut EstimateDetector,
    labels: &[(SeriesLabel, String)],
    eval: EstimateEvaluation,
    now: DateTime<Utc>,
    out: &mut Vec<AlertNotification>,
) {
    let rules = detector.rules.clone();
    let observations = detector.observations;
    let label_map: BTreeMap<String, String> = labels
        .iter()
        .map(|(l, v)| (l.as_str().to_string(), v.clone()))
        .collect();
    let series = series_text(&label_map);
    let recent = eval.recent;
    let (lower, upper) = (
        recent.lower.unwrap_or(recent.mean),
        recent.upper.unwrap_or(recent.mean),
    );
    let se = standard_error(&recent);
    let recent_samples = usize::try_from(recent.judged).unwrap_or(usize::MAX);
    if rules.estimate_floor > 0.0 {
        let floor = rules.estimate_floor;
        let breach = upper < floor;
        let calm = recent.mean >= floor;
        if let Some(step) = detector.low.step(breach, calm, &rules) {
            let p_value = if se > 0.0 {
                1.0 - normal_cdf((floor - recent.mean) / se)
            } else {
                f64::from(u8::from(recent.mean >= floor))
            };
            let fingerprint =
                fingerprint_parts(RuleKind::EstimateLow, "estimated_correct_share", &label_map);
            let summary = format!(
                "estimated share correct for {series}: {:.3}{} (floor {floor:.3}; {} events, {} judged uniform)",
                recent.mean,
                interval_text(Some((lower, upper))),
                recent.events,
                recent.judged
            );
            let parts = NoteParts {
                rule: RuleKind::EstimateLow,
                metric: "estimated_correct_share".into(),
                labels: label_map.clone(),
                fingerprint,
                comparison: Comparison {
                    baseline_mean: floor,
                    recent_mean: recent.mean,
                    effect: floor - recent.mean,
                    p_value,
                },
                recent_samples,
                baseline_samples: 0,
                observations,
                observed_interval: Some((lower, upper)),
                baseline_interval: None,
                summary,
            };
            out.push(finish_note(
                &mut detector.low,
                step,
                parts,
                &rules.severity,
                now,
            ));
        }
    }
    if rules.estimate_drop {
        let (breach, calm, comparison, baseline_interval, baseline_samples) = match &eval.baseline {
            Some(base) => {
                let (b_lo, b_hi) = (
                    base.lower.unwrap_or(base.mean),
                    base.upper.unwrap_or(base.mean),
                );
                let se_both = (se.powi(2) + standard_error(base).powi(2)).sqrt();
                let p_value = if se_both > 0.0 {
                    1.0 - normal_cdf((base.mean - recent.mean) / se_both)
                } else {
                    1.0
                };
                (
                    upper < b_lo,
                    recent.mean >= b_lo,
                    Comparison {
                        baseline_mean: base.mean,
                        recent_mean: recent.mean,
                        effect: base.mean - recent.mean,
                        p_value,
                    },
                    Some((b_lo, b_hi)),
                    usize::try_from(base.judged).unwrap_or(usize::MAX),
                )
            }
            None => return,
        };
        if let Some(step) = detector.drop.step(breach, calm, &rules) {
            detector.frozen_baseline = match step {
                Step::Fire => eval.baseline_moments,
                Step::Resolve(_) => None,
            };
            let fingerprint = fingerprint_parts(
                RuleKind::EstimateDrop,
                "estimated_correct_share",
                &label_map,
            );
            let summary = format!(
                "estimated share correct dropped for {series}: baseline {:.3}{} → recent {:.3}{} ({} judged uniform recently, {baseline_samples} before)",
                comparison.baseline_mean,
                interval_text(baseline_interval),
                recent.mean,
                interval_text(Some((lower, upper))),
                recent.judged
            );
            let parts = NoteParts {
                rule: RuleKind::EstimateDrop,
                metric: "estimated_correct_share".into(),
                labels: label_map,
                fingerprint,
                comparison,
                recent_samples,
                baseline_samples,
                observations,
                observed_interval: Some((lower, upper)),
                baseline_interval,
                summary,
            };
            out.push(finish_note(
                &mut detector.drop,
                step,
                parts,
                &rules.severity,
                now,
            ));
        }
    }
}

/// The event time of a row in seconds (0 when unreadable: such rows fall in the oldest block).
fn event_time(row: &EvaluationRow) -> i64 {
    DateTime::parse_from_rfc3339(&row.ts).map_or(0, |t| t.timestamp())
}

/// The notification of a state change of an estimate or agreement detector.
fn finish_note(
    hysteresis: &mut Hysteresis,
    step: Step,
    parts: NoteParts,
    severity: &str,
    now: DateTime<Utc>,
) -> AlertNotification {
    let (state, firing, ended_at) = match step {
        Step::Fire => {
            let firing = Firing {
                started_at: now,
                alert_id: format!("{}-{}", parts.fingerprint, now.timestamp_millis()),
            };
            hysteresis.firing = Some(firing.clone());
            (AlertState::Firing, firing, None)
        }
        Step::Resolve(firing) => (AlertState::Resolved, firing, Some(now)),
    };
    let tag = match state {
        AlertState::Firing => "FIRING",
        AlertState::Resolved => "RESOLVED",
    };
    AlertNotification {
        alert_id: firing.alert_id,
        fingerprint: parts.fingerprint,
        state,
        rule: parts.rule,
        metric: parts.metric,
        labels: parts.labels,
        severity: severity.to_string(),
        started_at: firing.started_at,
        ended_at,
        baseline: parts.comparison.baseline_mean,
        observed: parts.comparison.recent_mean,
        effect: parts.comparison.effect,
        p_value: parts.comparison.p_value,
        recent_samples: parts.recent_samples,
        baseline_samples: parts.baseline_samples,
        observations: parts.observations,
        observed_interval: parts.observed_interval,
        baseline_interval: parts.baseline_interval,
        summary: format!(
            "[{tag}] sqlgrade {}: {}",
            parts.rule.as_str(),
            parts.summary
        ),
    }
}

/// Stable 16-hex-digit id of (rule, metric, labels by name).
fn fingerprint_parts(rule: RuleKind, metric: &str, labels: &BTreeMap<String, String>) -> String {
    fingerprint_of(
        rule,
        metric,
        labels.iter().map(|(l, v)| (l.as_str(), v.as_str())),
    )
}

/// Stable 16-hex-digit id of a detector key.
fn fingerprint(key: &DetectorKey) -> String {
    fingerprint_of(
        key.rule,
        &key.metric,
        key.labels.iter().map(|(l, v)| (l.as_str(), v.as_str())),
    )
}

/// The first 8 bytes of SHA-256 over the rule, the metric and each (label, value), as hex.
fn fingerprint_of<'a>(
    rule: RuleKind,
    metric: &str,
    labels: impl Iterator<Item = (&'a str, &'a str)>,
) -> String {
    let mut hasher = Sha256::new();
    hasher.update(rule.as_str());
    hasher.update([0]);
    hasher.update(metric);
    for (label, value) in labels {
        hasher.update([0]);
        hasher.update(label);
        hasher.update([1]);
        hasher.update(value);
    }
    hex::encode(hasher.finalize().get(..8).unwrap_or_default())
}

fn summary_line(
    state: AlertState,
    key: &DetectorKey,
    labels: &BTreeMap<String, String>,
    c: &Comparison,
) -> String {
    let series = series_text(labels);
    let what = match key.rule {
        RuleKind::ScoreDrop => format!("mean {} dropped", key.metric),
        RuleKind::PoorShare => "share of poor-tier rows rose".to_string(),
        RuleKind::JudgeFallback => "share of judge_fallback rows rose".to_string(),
        RuleKind::DeadLetters => "share of dead-lettered messages rose".to_string(),
        RuleKind::JudgeDisagreement => {
            "share of events where the LLM judge and the line-rate verdict disagree rose"
                .to_string()
        }
        RuleKind::EstimateLow | RuleKind::EstimateDrop | RuleKind::JudgeAgreement => {
            format!("{} changed", key.metric)
        }
    };
    let state = match state {
        AlertState::Firing => "FIRING",
        AlertState::Resolved => "RESOLVED",
    };
    format!(
        "[{state}] sqlgrade {}: {what} for {series}: baseline {:.3} → recent {:.3} (p = {:.2e})",
        key.rule.as_str(),
        c.baseline_mean,
        c.recent_mean,
        c.p_value
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;

    fn stef_row(version: &str, value: f64) -> EvaluationRow {
        let e = Event::decode(br#"{"question":"q","sql":"SELECT 1","app_id":"a"}"#).unwrap();
        let mut row = EvaluationRow::for_event(&e, "2026-01-01T00:00:00Z", Metric::Stef);
        row.agent_version = Some(version.into());
        row.value = value;
        row
    }

    fn small_rules() -> AlertsConfig {
        let mut config = AlertsConfig::default();
        config.defaults.recent_window = 50;
        config.defaults.baseline_window = 100;
        config.defaults.min_samples = 30;
        config.defaults.evaluate_every = 5;
        config.defaults.poor_share_min_increase = 0.0;
        config.defaults.judge_fallback_min_increase = 0.0;
        config.defaults.dead_letter_min_increase = 0.0;
        config
    }

    #[test]
    fn fires_once_on_a_drop_and_resolves_on_recovery() {
        let mut engine = AlertEngine::new(small_rules());
        let now = Utc::now();
        let mut notes = Vec::new();
        // Alternating 80/90 (mean 85), then 40/50, then back.
        for phase in [85.0, 45.0, 85.0] {
            for i in 0..300 {
                let v = phase + if i % 2 == 0 { 5.0 } else { -5.0 };
                notes.extend(engine.observe(&AlertInput::Rows(vec![stef_row("v1", v)]), now));
            }
        }
        let states: Vec<_> = notes.iter().map(|n| n.state).collect();
        assert_eq!(states, vec![AlertState::Firing, AlertState::Resolved]);
        assert_eq!(notes[0].alert_id, notes[1].alert_id);
        assert!(notes[0].observations > 300 && notes[0].observations <= 350);
        assert!(
            notes[1].observations > 600 && notes[1].observations <= 665,
            "{notes:#?}"
        );
        assert_eq!(notes[0].labels["agent_version"], "v1");
    }

    #[test]
    fn other_series_are_independent() {
        let mut engine = AlertEngine::new(small_rules());
        let now = Utc::now();
        let mut notes = Vec::new();
        for i in 0..600 {
            let bad = if i >= 300 { 40.0 } else { 85.0 };
            notes.extend(engine.observe(
                &AlertInput::Rows(vec![stef_row("v1", bad + (i % 3) as f64)]),
                now,
            ));
            notes.extend(engine.observe(
                &AlertInput::Rows(vec![stef_row("v2", 85.0 + (i % 3) as f64)]),
                now,
            ));
        }
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].labels["agent_version"], "v1");
    }

    #[test]
    fn dead_letter_spike_fires() {
        let mut config = small_rules();
        config.defaults.dead_letter_min_increase = 0.05;
        let mut engine = AlertEngine::new(config);
        let now = Utc::now();
        let mut notes = Vec::new();
        for i in 0..400 {
            let input = if i >= 250 && i % 3 == 0 {
                AlertInput::DeadLetter
            } else {
                AlertInput::Rows(vec![stef_row("v1", 85.0)])
            };
            notes.extend(engine.observe(&input, now));
        }
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].rule, RuleKind::DeadLetters);
        assert_eq!(notes[0].state, AlertState::Firing);
    }
}
