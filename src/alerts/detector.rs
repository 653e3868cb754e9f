//! Score-drop detectors: one per (rule, metric, series), a recent window against the baseline
//! window before it, and the hysteresis (fire after, resolve after) every detector shares.

use std::collections::{BTreeMap, VecDeque};

use chrono::{DateTime, Utc};

use super::config::{RuleSet, SeriesLabel};
use super::stats::{Comparison, Direction, RankCounts};

use super::notification::{
    AlertNotification, AlertState, NoteParts, RuleKind, fingerprint_of, series_text,
};

/// Identity of one detector.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct DetectorKey {
    pub(super) rule: RuleKind,
    pub(super) metric: String,
    pub(super) labels: Vec<(SeriesLabel, String)>,
}

/// A [`DetectorKey`] borrowed from the observation at hand: the detectors are looked up with
/// it, and an owned key is made only for a new series. Its hash is the owned key's (the same
/// fields in the same order: a `&str` hashes as a `String`, a slice as a `Vec`).
#[derive(Debug, Clone, Copy, Hash)]
pub(super) struct DetectorKeyRef<'a> {
    pub(super) rule: RuleKind,
    pub(super) metric: &'a str,
    pub(super) labels: &'a [(SeriesLabel, &'a str)],
}

impl hashbrown::Equivalent<DetectorKey> for DetectorKeyRef<'_> {
    fn equivalent(&self, key: &DetectorKey) -> bool {
        self.rule == key.rule
            && self.metric == key.metric
            && SeriesLabelsRef(self.labels).equivalent(&key.labels)
    }
}

impl From<&DetectorKeyRef<'_>> for DetectorKey {
    fn from(key: &DetectorKeyRef<'_>) -> DetectorKey {
        DetectorKey {
            rule: key.rule,
            metric: key.metric.to_string(),
            labels: owned_labels(key.labels),
        }
    }
}

/// A series' labels borrowed from the row at hand (no `String` copied per observation), to look
/// up what is stored under the owned labels: it hashes as they do (a slice of `(label, &str)`
/// as a `Vec` of `(label, String)`) and is equal to them exactly when every pair is.
#[derive(Debug, Clone, Copy, Hash)]
pub(super) struct SeriesLabelsRef<'a>(pub(super) &'a [(SeriesLabel, &'a str)]);

impl hashbrown::Equivalent<Vec<(SeriesLabel, String)>> for SeriesLabelsRef<'_> {
    fn equivalent(&self, labels: &Vec<(SeriesLabel, String)>) -> bool {
        self.0.len() == labels.len()
            && self
                .0
                .iter()
                .zip(labels)
                .all(|((label, value), (other, text))| label == other && *value == text.as_str())
    }
}

impl From<&SeriesLabelsRef<'_>> for Vec<(SeriesLabel, String)> {
    fn from(labels: &SeriesLabelsRef<'_>) -> Self {
        owned_labels(labels.0)
    }
}

/// Borrowed labels as stored.
pub(super) fn owned_labels(labels: &[(SeriesLabel, &str)]) -> Vec<(SeriesLabel, String)> {
    labels
        .iter()
        .map(|&(label, value)| (label, value.to_string()))
        .collect()
}

/// An incident in progress.
#[derive(Debug, Clone)]
pub(super) struct Firing {
    pub(super) started_at: DateTime<Utc>,
    pub(super) alert_id: String,
}

/// Rolling windows and hysteresis state of one (rule, metric, series).
#[derive(Debug, Clone)]
pub(super) struct Detector {
    pub(super) direction: Direction,
    pub(super) min_effect: f64,
    pub(super) rules: RuleSet,
    pub(super) recent: VecDeque<f64>,
    pub(super) baseline: VecDeque<f64>,
    /// Both windows counted per distinct value (the ranks the test needs, never re-sorted).
    ranks: RankCounts,
    pub(super) observations: u64,
    pub(super) since_evaluation: usize,
    pub(super) breaches: usize,
    pub(super) calms: usize,
    pub(super) firing: Option<Firing>,
}

/// What one detector evaluation decided.
pub(super) enum Transition {
    Fired(Comparison),
    Resolved(Comparison, Firing),
}

impl Detector {
    pub(super) fn new(direction: Direction, min_effect: f64, rules: RuleSet) -> Detector {
        Detector {
            direction,
            min_effect,
            recent: VecDeque::with_capacity(rules.recent_window + 1),
            baseline: VecDeque::with_capacity(rules.baseline_window + 1),
            rules,
            ranks: RankCounts::default(),
            observations: 0,
            since_evaluation: 0,
            breaches: 0,
            calms: 0,
            firing: None,
        }
    }

    pub(super) fn push(&mut self, value: f64) -> Option<Transition> {
        if !value.is_finite() {
            return None;
        }
        self.recent.push_back(value);
        self.ranks.add(value, true);
        if self.recent.len() > self.rules.recent_window
            && let Some(old) = self.recent.pop_front()
        {
            self.ranks.remove(old, true);
            // Frozen while firing: the regression must not become the baseline.
            if self.firing.is_none() {
                self.baseline.push_back(old);
                self.ranks.add(old, false);
                if self.baseline.len() > self.rules.baseline_window
                    && let Some(gone) = self.baseline.pop_front()
                {
                    self.ranks.remove(gone, false);
                }
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
        let mean = |window: &VecDeque<f64>| {
            if window.is_empty() {
                0.0
            } else {
                window.iter().sum::<f64>() / window.len() as f64
            }
        };
        let (baseline_mean, recent_mean) = (mean(&self.baseline), mean(&self.recent));
        let comparison = Comparison {
            baseline_mean,
            recent_mean,
            effect: match self.direction {
                Direction::Decrease => baseline_mean - recent_mean,
                Direction::Increase => recent_mean - baseline_mean,
            },
            p_value: self.ranks.mann_whitney_p(self.direction),
        };
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

/// What one evaluation of a hysteresis decided.
pub(super) enum Step {
    Fire,
    Resolve(Firing),
}

/// Firing state with hysteresis, for the estimate and agreement detectors: `fire_after`
/// consecutive breaches fire, `resolve_after` consecutive calm evaluations resolve.
#[derive(Debug, Clone, Default)]
pub(super) struct Hysteresis {
    pub(super) breaches: usize,
    pub(super) calms: usize,
    pub(super) firing: Option<Firing>,
}

impl Hysteresis {
    pub(super) fn step(&mut self, breach: bool, calm: bool, rules: &RuleSet) -> Option<Step> {
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

/// The notification of a state change of an estimate or agreement detector.
pub(super) fn finish_note(
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

/// Stable 16-hex-digit id of a detector key.
pub(super) fn fingerprint(key: &DetectorKey) -> String {
    fingerprint_of(
        key.rule,
        &key.metric,
        key.labels.iter().map(|(l, v)| (l.as_str(), v.as_str())),
    )
}

pub(super) fn summary_line(
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
        RuleKind::ElementFlagged => {
            let element = key
                .metric
                .strip_prefix("flagged_share:")
                .unwrap_or(&key.metric);
            let (dimension, element) = element.split_once(':').unwrap_or(("table", element));
            let events = match dimension {
                "question_type" => "questions of type",
                "join" => "events whose SQL joins",
                _ => "events whose SQL reads",
            };
            format!(
                "share flagged by the line-rate verdict rose among the {events} {element} \
                 (sqlgrade breakdown --by {dimension})"
            )
        }
        RuleKind::EstimateLow
        | RuleKind::EstimateDrop
        | RuleKind::JudgeAgreement
        | RuleKind::QuestionMix
        | RuleKind::QuestionTablesMix => {
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
