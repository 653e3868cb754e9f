//! What the engine says: the rule kinds, alert states and inputs, a notification and its
//! rendering, and the parts every notification is built from (series text, intervals,
//! fingerprints, the summary line).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::stats::Comparison;
use crate::evaluation::EvaluationRow;
use crate::sampling::agreement::AgreementPair;

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
    /// The share flagged by the line-rate verdict rose among the events of one element (a
    /// table, column or join edge the SQL reads, or a question type).
    ElementFlagged,
    /// The mix of question types moved: a new type took a share of the recent window, or the
    /// whole mix diverged from the baseline's.
    QuestionMix,
    /// The mix of the tables questions ground to moved (a new one, or the whole mix).
    QuestionTablesMix,
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
            RuleKind::ElementFlagged => "element_flagged",
            RuleKind::QuestionMix => "question_mix",
            RuleKind::QuestionTablesMix => "question_tables_mix",
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

/// The parts of a notification that differ between rules.
pub(super) struct NoteParts {
    pub(super) rule: RuleKind,
    pub(super) metric: String,
    pub(super) labels: BTreeMap<String, String>,
    pub(super) fingerprint: String,
    pub(super) comparison: Comparison,
    pub(super) recent_samples: usize,
    pub(super) baseline_samples: usize,
    pub(super) observations: u64,
    pub(super) observed_interval: Option<(f64, f64)>,
    pub(super) baseline_interval: Option<(f64, f64)>,
    pub(super) summary: String,
}

/// A series' labels as a notification's label map.
pub(super) fn label_map(
    labels: &[(super::config::SeriesLabel, String)],
) -> BTreeMap<String, String> {
    labels
        .iter()
        .map(|(l, v)| (l.as_str().to_string(), v.clone()))
        .collect()
}

/// `key=value …` of a series (`all traffic` without labels).
pub(super) fn series_text(labels: &BTreeMap<String, String>) -> String {
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

pub(super) fn interval_text(interval: Option<(f64, f64)>) -> String {
    interval.map_or_else(String::new, |(lo, hi)| format!(" [{lo:.3}, {hi:.3}]"))
}

/// Stable 16-hex-digit id of (rule, metric, labels by name).
pub(super) fn fingerprint_parts(
    rule: RuleKind,
    metric: &str,
    labels: &BTreeMap<String, String>,
) -> String {
    fingerprint_of(
        rule,
        metric,
        labels.iter().map(|(l, v)| (l.as_str(), v.as_str())),
    )
}

/// The first 8 bytes of SHA-256 over the rule, the metric and each (label, value), as hex.
pub(super) fn fingerprint_of<'a>(
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
