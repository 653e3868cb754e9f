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
//! differs from the line-rate verdict rises), `element_flagged` (per table, column and join edge
//! the SQL reads, `details.reads`, and per question type: the share of those events the
//! line-rate verdict flags rises; off unless `element_flagged_min_increase` is set),
//! `question_mix` and `question_tables_mix` (a new question type, or table questions ground to,
//! takes a share of the recent window, or the whole mix diverges from the baseline's,
//! [`super::mix`]; off unless `new_question_type_min_share` or `question_mix_divergence` is set) and
//! `dead_letters` (share of dead-lettered messages rises; one global series, since a dead letter
//! has no labels).
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

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use hashbrown::hash_map::EntryRef;
use rustc_hash::{FxBuildHasher, FxHashMap};
use serde::Serialize;

use super::config::{AlertsConfig, RuleSet, SeriesLabel};
use super::mix::{MixKind, MixTracker};
use super::stats::{Comparison, Direction, normal_cdf};
use crate::evaluation::{EvaluationRow, Metric, RowStatus};
use crate::sampling::agreement::{AgreementKey, AgreementPair, AgreementTracker, PairChange};
use crate::sampling::estimate::Z_95;
use crate::sampling::select::verdict_is_correct;
use crate::stef::Elements;
use crate::stores::breakdown::Dimension;

use super::detector::{
    Detector, DetectorKey, DetectorKeyRef, Firing, Hysteresis, SeriesLabelsRef, Transition,
    fingerprint, finish_note, owned_labels, summary_line,
};
use super::estimate::{EstimateDetector, EstimateSource, estimate_notes};
pub use super::notification::{
    AlertInput, AlertNotification, AlertState, RuleKind, render_notifications,
};
use super::notification::{NoteParts, fingerprint_parts, interval_text, label_map, series_text};

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

/// What a line-rate row is about — the tables, columns and join edges its SQL reads
/// (`details.reads`) and its question type —, read once from its rendered details without
/// parsing the rest.
struct RowElements {
    reads: Elements,
    question_type: Option<String>,
}

impl RowElements {
    fn of(row: &EvaluationRow) -> RowElements {
        let text = row.details.json_text();
        // `reads` is written after the findings, whose `elements` have no `reads` key.
        let reads = text
            .rfind("\"reads\":")
            .and_then(|at| {
                serde_json::Deserializer::from_str(&text[at + "\"reads\":".len()..])
                    .into_iter::<Elements>()
                    .next()
            })
            .and_then(Result::ok)
            .unwrap_or_default();
        RowElements {
            reads,
            question_type: super::mix::question_type(&row.details),
        }
    }

    /// The elements of one dimension (at most 16).
    fn of_dimension(&self, dimension: Dimension) -> &[String] {
        const MAX: usize = 16;
        let all: &[String] = match dimension {
            Dimension::Table => &self.reads.tables,
            Dimension::Column => &self.reads.columns,
            Dimension::Join => &self.reads.joins,
            Dimension::QuestionType => self.question_type.as_slice(),
        };
        &all[..all.len().min(MAX)]
    }
}

/// Score-drop detection over all series (pure, synchronous; see the module docs).
#[derive(Debug)]
pub struct AlertEngine {
    /// Shared so that a row's rules are borrowed, not cloned, while the detectors change.
    config: std::sync::Arc<AlertsConfig>,
    /// Keyed with the Fx hash: a row updates several detectors, and SipHash over each key's
    /// labels was most of the engine's cost per row once the ranks stopped being sorted. Looked
    /// up with a [`DetectorKeyRef`] borrowed from the row: no key is built per observation.
    detectors: hashbrown::HashMap<DetectorKey, Detector, FxBuildHasher>,
    estimates: hashbrown::HashMap<Vec<(SeriesLabel, String)>, EstimateDetector, FxBuildHasher>,
    agreement: AgreementTracker,
    agreement_states: HashMap<AgreementKey, Hysteresis>,
    mixes: FxHashMap<(MixKind, Vec<(SeriesLabel, String)>), MixTracker>,
    stats: EngineStats,
    estimate_source: EstimateSource,
    /// The last line-rate row's event time, parsed once for the rows that share it.
    last_event_time: LastEventTime,
}

impl AlertEngine {
    /// An engine with the `[alerts]` configuration.
    pub fn new(config: AlertsConfig) -> AlertEngine {
        let window = config.defaults.agreement_window;
        AlertEngine {
            config: std::sync::Arc::new(config),
            detectors: hashbrown::HashMap::default(),
            estimates: hashbrown::HashMap::default(),
            agreement: AgreementTracker::new(window),
            agreement_states: HashMap::new(),
            mixes: FxHashMap::default(),
            stats: EngineStats::default(),
            estimate_source: EstimateSource::Judge,
            last_event_time: LastEventTime::default(),
        }
    }

    /// Take the estimate alerts' share correct from `source` (default: the LLM judge's uniform
    /// slice; [`EstimateSource::LineRate`] for a run without one).
    pub fn with_estimate_source(mut self, source: EstimateSource) -> AlertEngine {
        self.estimate_source = source;
        self
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
                .mixes
                .values()
                .filter(|m| m.hysteresis.firing.is_some())
                .count()
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
        let config = std::sync::Arc::clone(&self.config);
        let defaults = &config.defaults;
        if defaults.dead_letter_min_increase > 0.0 {
            self.feed(
                DetectorKeyRef {
                    rule: RuleKind::DeadLetters,
                    metric: "dead_letter_share",
                    labels: &[],
                },
                Direction::Increase,
                defaults.dead_letter_min_increase,
                defaults,
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
        let config = std::sync::Arc::clone(&self.config);
        let rules = config.rules_for(row.app_id.as_deref());
        // Borrowed from the row: the detectors are looked up without copying a label.
        let labels: Vec<(SeriesLabel, &str)> = self
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
                Some((*label, value.as_str()))
            })
            .collect();
        let metric = row.metric.as_str();
        // Rows whose metric could not be computed say nothing about quality.
        let scored = matches!(row.status, RowStatus::Ok | RowStatus::JudgeFallback)
            || (row.metric != Metric::Stef && row.status == RowStatus::ExecError);
        if scored && rules.metrics.iter().any(|m| m == metric) {
            self.feed(
                DetectorKeyRef {
                    rule: RuleKind::ScoreDrop,
                    metric,
                    labels: &labels,
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
            self.observe_judged(row, &rules, &labels, now, out);
            return;
        }
        if row.metric != Metric::Stef {
            return;
        }
        if scored && (rules.estimate_floor > 0.0 || rules.estimate_drop) {
            let line_p = row.line_rate_p();
            let time = self.last_event_time.of(row);
            self.observe_estimate_line(&labels, &rules, line_p, time, now, out);
        }
        if rules.poor_share_min_increase > 0.0 {
            let poor = row
                .stef
                .as_ref()
                .is_some_and(|s| s.quality_tier == crate::stef::QualityTier::Poor);
            self.feed(
                DetectorKeyRef {
                    rule: RuleKind::PoorShare,
                    metric: "poor_share",
                    labels: &labels,
                },
                Direction::Increase,
                rules.poor_share_min_increase,
                &rules,
                f64::from(u8::from(poor)),
                now,
                out,
            );
        }
        if rules.new_question_type_min_share > 0.0 || rules.question_mix_divergence > 0.0 {
            self.observe_mix(row, &owned_labels(&labels), &rules, now, out);
        }
        if rules.element_flagged_min_increase > 0.0 && scored {
            let flagged = f64::from(u8::from(row.verdict != Some(true)));
            let elements = RowElements::of(row);
            for &dimension in &rules.element_flagged_by {
                for element in elements.of_dimension(dimension) {
                    self.feed(
                        DetectorKeyRef {
                            rule: RuleKind::ElementFlagged,
                            metric: &format!("flagged_share:{}:{element}", dimension.as_str()),
                            labels: &labels,
                        },
                        Direction::Increase,
                        rules.element_flagged_min_increase,
                        &rules,
                        flagged,
                        now,
                        out,
                    );
                }
            }
        }
        if rules.judge_fallback_min_increase > 0.0 {
            let fallback = row.status == RowStatus::JudgeFallback;
            self.feed(
                DetectorKeyRef {
                    rule: RuleKind::JudgeFallback,
                    metric: "judge_fallback_share",
                    labels: &labels,
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

    /// A line-rate row's question type into its series' mixes (`question_mix`,
    /// `question_tables_mix`).
    fn observe_mix(
        &mut self,
        row: &EvaluationRow,
        labels: &[(SeriesLabel, String)],
        rules: &RuleSet,
        now: DateTime<Utc>,
        out: &mut Vec<AlertNotification>,
    ) {
        let Some(question_type) = super::mix::question_type(&row.details) else {
            return;
        };
        for kind in MixKind::ALL {
            let key = (kind, labels.to_vec());
            if !self.mixes.contains_key(&key) && self.mixes.len() >= self.config.max_series {
                self.stats.ignored_over_max_series += 1;
                continue;
            }
            let tracker = self
                .mixes
                .entry(key)
                .or_insert_with(|| MixTracker::new(kind));
            let Some((step, found)) = tracker.observe(&question_type, rules) else {
                continue;
            };
            let label_map = label_map(labels);
            let series = series_text(&label_map);
            let resolved = matches!(step, super::detector::Step::Resolve(_));
            let noun = kind.item_noun();
            let (metric, summary) = match found.divergence {
                None => (
                    format!("{}:{}", kind.share_metric(), found.item),
                    format!(
                        "{noun} {} takes {:.1} % of the last {} questions of {series} ({:.1} % of the {} before): {} ({})",
                        found.item,
                        found.comparison.recent_mean * 100.0,
                        found.recent_samples,
                        found.comparison.baseline_mean * 100.0,
                        found.baseline_samples,
                        if resolved {
                            "no longer new to the baseline"
                        } else {
                            "what users ask changed"
                        },
                        kind.breakdown(),
                    ),
                ),
                Some(divergence) => (
                    kind.divergence_metric().to_string(),
                    format!(
                        "the mix of {noun}s of {series} {}: Jensen–Shannon divergence {divergence:.3} bits between the last {} questions and the {} before (most moved: {} {:.1} % → {:.1} %) ({})",
                        if resolved { "settled" } else { "moved" },
                        found.recent_samples,
                        found.baseline_samples,
                        found.item,
                        found.comparison.baseline_mean * 100.0,
                        found.comparison.recent_mean * 100.0,
                        kind.breakdown(),
                    ),
                ),
            };
            let parts = NoteParts {
                rule: kind.rule(),
                fingerprint: fingerprint_parts(kind.rule(), kind.share_metric(), &label_map),
                metric,
                labels: label_map,
                comparison: found.comparison,
                recent_samples: found.recent_samples,
                baseline_samples: found.baseline_samples,
                observations: tracker.observations,
                observed_interval: None,
                baseline_interval: None,
                summary,
            };
            out.push(finish_note(
                &mut tracker.hysteresis,
                step,
                parts,
                &rules.severity,
                now,
            ));
        }
    }

    /// A `stef_judged` row: the judge-disagreement share, and (uniform slice) the estimate's
    /// correction.
    fn observe_judged(
        &mut self,
        row: &EvaluationRow,
        rules: &RuleSet,
        labels: &[(SeriesLabel, &str)],
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
        let line_correct = judged.line_correct();
        if judged.uniform()
            && (rules.estimate_floor > 0.0 || rules.estimate_drop)
            && let Some(detector) = self.estimate_detector(labels, rules)
            && let Some(eval) = detector.judged(llm_correct, judged.line_p(), event_time(row))
        {
            estimate_notes(detector, &owned_labels(labels), eval, now, out);
        }
        if rules.judge_disagreement_min_increase > 0.0 {
            self.feed(
                DetectorKeyRef {
                    rule: RuleKind::JudgeDisagreement,
                    metric: "judge_disagreement_share",
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
        labels: &[(SeriesLabel, &str)],
        rules: &RuleSet,
    ) -> Option<&mut EstimateDetector> {
        // One lookup by the borrowed labels; the owned ones are made for a new series only.
        let series = self.detectors.len() + self.estimates.len();
        match self.estimates.entry_ref(&SeriesLabelsRef(labels)) {
            EntryRef::Occupied(entry) => Some(entry.into_mut()),
            EntryRef::Vacant(entry) => {
                if series >= self.config.max_series {
                    self.stats.ignored_over_max_series += 1;
                    return None;
                }
                Some(entry.insert(EstimateDetector::new(rules.clone(), self.estimate_source)))
            }
        }
    }

    fn observe_estimate_line(
        &mut self,
        labels: &[(SeriesLabel, &str)],
        rules: &RuleSet,
        line_p: f64,
        ts: i64,
        now: DateTime<Utc>,
        out: &mut Vec<AlertNotification>,
    ) {
        let Some(detector) = self.estimate_detector(labels, rules) else {
            return;
        };
        if let Some(eval) = detector.line(line_p, ts) {
            estimate_notes(detector, &owned_labels(labels), eval, now, out);
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
        if rules.agreement_kappa_min <= 0.0
            || !rules
                .agreement_judges
                .iter()
                .any(|j| j.as_str() == pair.key.metric.as_str())
        {
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
            ("judge".to_string(), key.metric.to_string()),
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
        key: DetectorKeyRef<'_>,
        direction: Direction,
        min_effect: f64,
        rules: &RuleSet,
        value: f64,
        now: DateTime<Utc>,
        out: &mut Vec<AlertNotification>,
    ) {
        let series = self.detectors.len();
        let detector = match self.detectors.entry_ref(&key) {
            EntryRef::Occupied(entry) => entry.into_mut(),
            EntryRef::Vacant(entry) => {
                if series >= self.config.max_series {
                    self.stats.ignored_over_max_series += 1;
                    return;
                }
                entry.insert(Detector::new(direction, min_effect, rules.clone()))
            }
        };
        let Some(transition) = detector.push(value) else {
            return;
        };
        let key = DetectorKey::from(&key);
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
        let labels = label_map(&key.labels);
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

/// The event time of a row in seconds (0 when unreadable: such rows fall in the oldest block).
fn event_time(row: &EvaluationRow) -> i64 {
    DateTime::parse_from_rfc3339(&row.ts).map_or(0, |t| t.timestamp())
}

/// [`event_time`] of the last row seen, with its `ts`: the rows of one burst of messages share
/// their time (the source's, to the millisecond), and parsing RFC 3339 text was ~400
/// instructions per row on the line rate; comparing it with the last one is a tenth of that.
#[derive(Debug, Default)]
struct LastEventTime {
    ts: String,
    seconds: i64,
}

impl LastEventTime {
    /// `row`'s [`event_time`].
    fn of(&mut self, row: &EvaluationRow) -> i64 {
        if self.ts != row.ts.as_str() {
            self.seconds = event_time(row);
            self.ts.clear();
            self.ts.push_str(&row.ts);
        }
        self.seconds
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;

    /// A borrowed key finds the detector its owned key was stored under: the same hash, and
    /// equal exactly when every part is.
    #[test]
    fn borrowed_detector_keys_find_their_owned_keys() {
        use std::hash::BuildHasher;
        let labels = [
            (SeriesLabel::AppId, "app"),
            (SeriesLabel::AgentVersion, "v2"),
        ];
        let keys = [
            (RuleKind::ScoreDrop, "stef", &labels[..]),
            (RuleKind::ScoreDrop, "stef", &labels[..1]),
            (RuleKind::ScoreDrop, "ex", &labels[..]),
            (RuleKind::PoorShare, "stef", &labels[..]),
            (RuleKind::DeadLetters, "dead_letter_share", &[][..]),
            (RuleKind::ScoreDrop, "", &[][..]),
        ];
        let mut map: hashbrown::HashMap<DetectorKey, usize, FxBuildHasher> =
            hashbrown::HashMap::default();
        for (i, &(rule, metric, labels)) in keys.iter().enumerate() {
            let borrowed = DetectorKeyRef {
                rule,
                metric,
                labels,
            };
            let owned = DetectorKey::from(&borrowed);
            assert_eq!(
                FxBuildHasher.hash_one(borrowed),
                FxBuildHasher.hash_one(&owned)
            );
            // The series' labels alone (the estimate detectors' key) likewise.
            assert_eq!(
                FxBuildHasher.hash_one(SeriesLabelsRef(labels)),
                FxBuildHasher.hash_one(&owned.labels)
            );
            assert!(hashbrown::Equivalent::equivalent(
                &SeriesLabelsRef(labels),
                &owned.labels
            ));
            map.insert(owned, i);
        }
        assert_eq!(map.len(), keys.len());
        for (i, &(rule, metric, labels)) in keys.iter().enumerate() {
            let borrowed = DetectorKeyRef {
                rule,
                metric,
                labels,
            };
            assert_eq!(map.get(&borrowed), Some(&i));
        }
        let other = [(SeriesLabel::AppId, "other")];
        assert_eq!(
            map.get(&DetectorKeyRef {
                rule: RuleKind::ScoreDrop,
                metric: "stef",
                labels: &other,
            }),
            None
        );
    }

    #[test]
    fn the_last_event_time_is_each_rows_own() {
        // Repeated, changed, empty and unreadable times, and back: always the row's own parse.
        let mut last = LastEventTime::default();
        for ts in [
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:01.500Z",
            "",
            "not a time",
            "",
            "2026-01-01T00:00:00Z",
            "2025-12-31T23:00:00+01:00",
        ] {
            let mut row = stef_row("v1", 50.0);
            row.ts = ts.into();
            assert_eq!(last.of(&row), event_time(&row), "{ts:?}");
        }
    }

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

    /// Without an LLM judge the estimate alerts compare windows of the line rate's mean
    /// `p_correct`: a series whose queries turn doubtful fires `estimate_drop` (and a floor
    /// `estimate_low`) with intervals, and nothing fires while it is steady; the same rows with
    /// the judge as the source wait for judgments that never come.
    #[test]
    fn without_a_judge_the_estimate_alerts_follow_p_correct() {
        let mut config = small_rules();
        config.defaults.stef_min_drop = 1000.0;
        config.defaults.estimate_drop = true;
        config.defaults.estimate_floor = 0.5;
        config.defaults.estimate_block = 20;
        config.defaults.estimate_recent_blocks = 3;
        config.defaults.estimate_baseline_blocks = 10;
        let row = |i: usize, p: f64| {
            let mut row = stef_row("v1", 80.0);
            row.ts = format!("2026-01-01T00:{:02}:{:02}Z", (i / 60) % 60, i % 60).into();
            let columns = crate::evaluation::StefColumns {
                quality_tier: crate::stef::QualityTier::Good,
                filter_status: "fully_applied".into(),
                semantic_verdict: "correct".into(),
                confidence: 0.8,
                confidence_tier: crate::stef::ConfidenceTier::Moderate,
                sigma_filters: 5,
                sigma_verdict: 5,
                leniency: 0,
                rules_fired: vec![],
                enrichment_status: "absent".into(),
                judge: "deterministic".into(),
                judge_cached: false,
                prompt_version: None,
                judge_identity: "deterministic".into(),
                rules_version: "r".into(),
                prompt_tokens: 0,
                completion_tokens: 0,
                latency_us: 0,
                p_correct: Some(p),
            };
            row.verdict = Some(p >= 0.3);
            row.stef = Some(columns);
            row
        };
        let now = Utc::now();
        let run = |source: EstimateSource, drop_at: usize| {
            let mut engine = AlertEngine::new(config.clone()).with_estimate_source(source);
            let mut notes = Vec::new();
            for i in 0..400 {
                // p_correct 0.7–0.9, then 0.2–0.4 from `drop_at` on.
                let base = if i >= drop_at { 0.3 } else { 0.8 };
                let p = base + 0.1 * ((i % 3) as f64 - 1.0);
                notes.extend(engine.observe(&AlertInput::Rows(vec![row(i, p)]), now));
            }
            notes
        };
        let notes = run(EstimateSource::LineRate, 300);
        let fired: Vec<&AlertNotification> = notes
            .iter()
            .filter(|n| n.state == AlertState::Firing)
            .collect();
        let drop = fired
            .iter()
            .find(|n| n.rule == RuleKind::EstimateDrop)
            .expect("estimate_drop fires");
        assert!(drop.summary.contains("mean p_correct"), "{}", drop.summary);
        assert!(drop.observed < 0.45 && drop.baseline > 0.7, "{drop:#?}");
        assert!(fired.iter().any(|n| n.rule == RuleKind::EstimateLow));
        assert!(run(EstimateSource::LineRate, 10_000).is_empty());
        assert!(run(EstimateSource::Judge, 300).is_empty());
    }

    /// `element_flagged`: per table, column and join edge the SQL reads (`details.reads`) and
    /// per question type, the share the line-rate verdict flags among its events. The hero
    /// events turning bad fire it for the hero table, its column, its join and its question
    /// type, each named, while the other events stay quiet; `element_flagged_by` narrows it to
    /// the dimensions asked; a replay without the change fires nothing, and the rule is off by
    /// default.
    #[test]
    fn an_elements_share_flagged_rising_fires_for_that_element() {
        let mut config = small_rules();
        config.defaults.stef_min_drop = 1000.0;
        config.defaults.element_flagged_min_increase = 0.3;
        let row = |table: &str, flagged: bool| {
            let mut row = stef_row("v1", 80.0);
            row.verdict = Some(!flagged);
            row.details = crate::evaluation::Details::rendered(&serde_json::json!({
                "sql": {},
                "findings": [{"code": "x", "elements": {"tables": ["decoy"]}}],
                "reads": {
                    "tables": [table],
                    "columns": [format!("{table}.id")],
                    "joins": [format!("{table}.team_id = team.id")],
                },
                "question_type": format!("list:{table}"),
            }));
            row
        };
        let now = Utc::now();
        let run = |config: &AlertsConfig, change_at: usize| {
            let mut engine = AlertEngine::new(config.clone());
            let mut notes = Vec::new();
            for i in 0..400 {
                // Every tenth event flagged; from `change_at` on, hero's events flagged.
                let bad = i >= change_at;
                let r = if i % 2 == 0 {
                    row("hero", bad || i % 10 == 0)
                } else {
                    row("power", i % 10 == 1)
                };
                notes.extend(engine.observe(&AlertInput::Rows(vec![r]), now));
            }
            notes
        };
        let notes = run(&config, 250);
        let mut fired: Vec<&str> = notes
            .iter()
            .filter(|n| n.state == AlertState::Firing)
            .inspect(|n| assert_eq!(n.rule, RuleKind::ElementFlagged))
            .map(|n| n.metric.as_str())
            .collect();
        fired.sort_unstable();
        assert_eq!(
            fired,
            [
                "flagged_share:column:hero.id",
                "flagged_share:join:hero.team_id = team.id",
                "flagged_share:question_type:list:hero",
                "flagged_share:table:hero",
            ],
            "{notes:#?}"
        );
        let column = notes
            .iter()
            .find(|n| n.metric == "flagged_share:column:hero.id")
            .map(|n| n.summary.as_str())
            .unwrap_or_default();
        assert!(
            column.contains("events whose SQL reads hero.id (sqlgrade breakdown --by column)"),
            "{column}"
        );
        let mut columns_only = config.clone();
        columns_only.defaults.element_flagged_by = vec![Dimension::Column];
        let only: Vec<_> = run(&columns_only, 250)
            .into_iter()
            .filter(|n| n.state == AlertState::Firing)
            .map(|n| n.metric)
            .collect();
        assert_eq!(only, ["flagged_share:column:hero.id"]);
        assert!(
            run(&config, 10_000).is_empty(),
            "a replay without the change"
        );
        assert!(
            run(&small_rules(), 250)
                .iter()
                .all(|n| n.rule != RuleKind::ElementFlagged)
        );
    }

    /// `question_mix`: a question type nobody asked before taking a tenth of the recent window
    /// fires, named; a replay without it stays quiet, and the rule is off by default.
    #[test]
    fn a_new_question_type_taking_a_tenth_of_the_window_fires() {
        let mut config = small_rules();
        config.defaults.stef_min_drop = 1000.0;
        config.defaults.new_question_type_min_share = 0.10;
        let row = |question_type: &str| {
            let mut row = stef_row("v1", 80.0);
            row.details = crate::evaluation::Details::rendered(&serde_json::json!({
                "sql": {}, "question_type": question_type,
            }));
            row
        };
        let now = Utc::now();
        let run = |config: &AlertsConfig, new_from: usize| {
            let mut engine = AlertEngine::new(config.clone());
            let mut notes = Vec::new();
            for i in 0..400 {
                // Three steady types; from `new_from` on, one event in five is a new type.
                let t = if i >= new_from && i % 5 == 0 {
                    "ratio:budget"
                } else {
                    ["count:member", "list:event", "lookup:member"][i % 3]
                };
                notes.extend(engine.observe(&AlertInput::Rows(vec![row(t)]), now));
            }
            (notes, engine.stats().firing)
        };
        let (notes, _) = run(&config, 250);
        // The new type's table is new too: `question_tables_mix` names it.
        let tables: Vec<_> = notes
            .iter()
            .filter(|n| n.rule == RuleKind::QuestionTablesMix && n.state == AlertState::Firing)
            .map(|n| {
                (
                    n.metric.as_str(),
                    n.summary.contains("table questions ground to budget"),
                )
            })
            .collect();
        assert_eq!(
            tables,
            [("question_table_share:budget", true)],
            "{notes:#?}"
        );
        let notes: Vec<_> = notes
            .into_iter()
            .filter(|n| n.rule == RuleKind::QuestionMix)
            .collect();
        let n = &notes[0];
        assert_eq!(
            (n.rule, n.state),
            (RuleKind::QuestionMix, AlertState::Firing)
        );
        assert_eq!(n.metric, "question_type_share:ratio:budget");
        assert!(n.observed >= 0.10 && n.baseline == 0.0, "{n:#?}");
        assert!(
            n.summary.contains("question type ratio:budget"),
            "{}",
            n.summary
        );
        // Once the baseline holds it, it is no longer new: the same alert resolves.
        assert_eq!(notes.len(), 2, "{notes:#?}");
        assert_eq!(notes[1].state, AlertState::Resolved);
        assert_eq!(notes[1].alert_id, n.alert_id);
        assert!(
            notes[1].summary.contains("no longer new"),
            "{}",
            notes[1].summary
        );
        let (notes, firing) = run(&config, 345);
        assert_eq!(notes.len(), 2, "{notes:#?}");
        assert_eq!(firing, 2, "both mixes still firing at the end of the run");
        assert!(
            run(&config, 10_000).0.is_empty(),
            "a replay without a new type"
        );
        assert!(run(&small_rules(), 250).0.is_empty(), "off by default");
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
