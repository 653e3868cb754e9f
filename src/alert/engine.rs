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
//! `judge_fallback` rises) and `dead_letters` (share of dead-lettered messages rises; one global
//! series, since a dead letter has no labels).

use std::collections::{BTreeMap, HashMap, VecDeque};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::rules::{AlertsConfig, RuleSet, SeriesLabel};
use super::stats::{Comparison, Direction, compare};
use crate::evaluation::{EvaluationRow, Metric, RowStatus};

/// What the engine is fed: one scored event's rows, or one dead letter.
#[derive(Debug, Clone)]
pub enum AlertInput {
    /// The rows one event produced.
    Rows(Vec<EvaluationRow>),
    /// A message that was dead-lettered.
    DeadLetter,
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
}

impl RuleKind {
    /// The rule's name (the `rule` column and `alertname` label).
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::ScoreDrop => "score_drop",
            RuleKind::PoorShare => "poor_share",
            RuleKind::JudgeFallback => "judge_fallback",
            RuleKind::DeadLetters => "dead_letters",
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
    /// Observations of this series so far (position in the stream).
    pub observations: u64,
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

/// Score-drop detection over all series (pure, synchronous; see the module docs).
#[derive(Debug)]
pub struct AlertEngine {
    config: AlertsConfig,
    detectors: HashMap<DetectorKey, Detector>,
    stats: EngineStats,
}

impl AlertEngine {
    /// An engine with the `[alerts]` configuration.
    pub fn new(config: AlertsConfig) -> AlertEngine {
        AlertEngine {
            config,
            detectors: HashMap::new(),
            stats: EngineStats::default(),
        }
    }

    /// The engine's counters.
    pub fn stats(&self) -> EngineStats {
        EngineStats {
            detectors: self.detectors.len(),
            firing: self
                .detectors
                .values()
                .filter(|d| d.firing.is_some())
                .count(),
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
        if row.metric != Metric::Stef {
            return;
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
            summary,
        });
    }
}

/// Stable 16-hex-digit id of a detector key.
fn fingerprint(key: &DetectorKey) -> String {
    let mut hasher = Sha256::new();
    hasher.update(key.rule.as_str());
    hasher.update([0]);
    hasher.update(&key.metric);
    for (label, value) in &key.labels {
        hasher.update([0]);
        hasher.update(label.as_str());
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
    let series = if labels.is_empty() {
        "all traffic".to_string()
    } else {
        labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let what = match key.rule {
        RuleKind::ScoreDrop => format!("mean {} dropped", key.metric),
        RuleKind::PoorShare => "share of poor-tier rows rose".to_string(),
        RuleKind::JudgeFallback => "share of judge_fallback rows rose".to_string(),
        RuleKind::DeadLetters => "share of dead-lettered messages rose".to_string(),
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
