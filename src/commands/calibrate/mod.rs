//! Calibration of a metric against human labels: Cohen's κ, accuracy, precision/recall and the
//! confusion matrix, and for continuous metrics (STEF, Hybrid-EX) the cut-off that maximises κ.
//!
//! Labels are JSONL objects with `event_id` or `question_id` and a boolean `label`, or the
//! review page's labels (`labels.jsonl`, ClickHouse `labels`: `event_id`, `reviewer`,
//! `verdict` correct | incorrect | unsure, `labelled_at`), read directly: the newest label per
//! (event, reviewer) counts and `unsure` is left out. Rows are a run's JSONL output
//! (read back as [`StoredRow`]s). κ carries a 95% bootstrap interval (1,000 resamples of the labelled
//! pairs, fixed seed), is also given per reviewer, and [`reviewer_agreement`] gives Cohen's κ
//! between every two reviewers over the events both labelled. A `question_id` label matches the row whose
//! `event_id` equals it or ends with `-<question_id>`. Rows that could not be scored (judge
//! error, gold error/unavailable/parse error) are excluded and counted; a failed prediction
//! (exec error, timeout) counts as a negative, as the metrics score it.

pub mod fit;

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::evaluation::Metric;
use crate::review::HumanLabel;
use crate::stores::StoredRow;

/// Why calibration inputs could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    /// A file could not be read.
    #[error("{path}: {message}")]
    Io {
        /// File.
        path: String,
        /// OS error.
        message: String,
    },
    /// A line is not a valid label or row.
    #[error("{path}:{line}: {message}")]
    Line {
        /// File.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// One human label.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Label {
    /// Event id the label refers to.
    #[serde(default)]
    pub event_id: Option<String>,
    /// Benchmark question id the label refers to (string or number).
    #[serde(default, deserialize_with = "id_string")]
    pub question_id: Option<String>,
    /// true = the prediction is correct.
    pub label: bool,
    /// Who labelled (review-page labels; `None` in a plain labels file).
    #[serde(default)]
    pub reviewer: Option<String>,
}

impl Label {
    /// The label of a review-page label (`None` for `unsure`).
    pub fn from_review(label: &HumanLabel) -> Option<Label> {
        Some(Label {
            event_id: Some(label.event_id.clone()),
            question_id: None,
            label: label.verdict.as_bool()?,
            reviewer: Some(label.reviewer.clone()),
        })
    }
}

/// Turn plain labels into review labels (what the review store keeps), for `sqlgrade
/// import-labels` and `report --labels`: an `event_id` label names its event; a `question_id`
/// label the event among `event_ids` that equals it or ends with `-<question_id>` (a
/// benchmark run's events). The reviewer is the label's own, else `reviewer`; the time
/// `labelled_at`. Returns the labels and how many named no known event.
pub fn resolve_labels(
    labels: &[Label],
    event_ids: &[&str],
    reviewer: &str,
    labelled_at: &str,
) -> (Vec<HumanLabel>, usize) {
    let known: std::collections::HashSet<&str> = event_ids.iter().copied().collect();
    let mut out = Vec::with_capacity(labels.len());
    let mut unresolved = 0;
    for label in labels {
        let event = match (&label.event_id, &label.question_id) {
            (Some(id), _) => Some(id.clone()),
            (None, Some(qid)) => {
                let suffix = format!("-{qid}");
                event_ids
                    .iter()
                    .find(|id| **id == qid || id.ends_with(&suffix))
                    .map(|id| id.to_string())
            }
            (None, None) => None,
        };
        let Some(event_id) = event.filter(|id| known.is_empty() || known.contains(id.as_str()))
        else {
            unresolved += 1;
            continue;
        };
        out.push(HumanLabel {
            event_id,
            reviewer: label
                .reviewer
                .clone()
                .unwrap_or_else(|| reviewer.to_string()),
            verdict: if label.label {
                crate::review::LabelVerdict::Correct
            } else {
                crate::review::LabelVerdict::Incorrect
            },
            category: None,
            note: None,
            labelled_at: labelled_at.to_string(),
        });
    }
    (out, unresolved)
}

fn id_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) => Some(s),
        Some(other) => Some(other.to_string()),
    })
}

/// Every line of `path` as a `T` (the one JSONL reader, `stores::jsonl`); calibration refuses a
/// file with a line it cannot read rather than measure on part of it.
fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>, CalibrateError> {
    let lines = crate::stores::jsonl::rows::read(path).map_err(|e| CalibrateError::Io {
        path: path.display().to_string(),
        message: e.source.to_string(),
    })?;
    if let Some(bad) = lines.unreadable.first() {
        return Err(CalibrateError::Line {
            path: path.display().to_string(),
            line: bad.line,
            message: bad.error.to_string(),
        });
    }
    Ok(lines.items)
}

/// Read a labels file: plain labels, or the review page's (`verdict`; the newest per event and
/// reviewer; `unsure` left out).
pub fn read_labels(path: &Path) -> Result<Vec<Label>, CalibrateError> {
    let values: Vec<serde_json::Value> = read_jsonl(path)?;
    if values.iter().any(|v| v.get("verdict").is_some()) {
        let review = crate::stores::labels_from_jsonl(path).map_err(|e| CalibrateError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        return Ok(review.iter().filter_map(Label::from_review).collect());
    }
    let mut labels = Vec::with_capacity(values.len());
    for (i, v) in values.into_iter().enumerate() {
        labels.push(
            serde_json::from_value::<Label>(v).map_err(|e| CalibrateError::Line {
                path: path.display().to_string(),
                line: i + 1,
                message: e.to_string(),
            })?,
        );
    }
    for (i, l) in labels.iter().enumerate() {
        if l.event_id.is_none() && l.question_id.is_none() {
            return Err(CalibrateError::Line {
                path: path.display().to_string(),
                line: i + 1,
                message: "a label needs event_id or question_id".into(),
            });
        }
    }
    Ok(labels)
}

/// Read a run's rows file (the JSONL sink's `evaluations.jsonl`).
pub fn read_rows(path: &Path) -> Result<Vec<StoredRow>, CalibrateError> {
    read_jsonl(path)
}

pub use crate::sampling::agreement::Confusion;

/// Whether a metric's value is continuous (a cut-off turns it into a verdict).
pub fn is_continuous(metric: Metric) -> bool {
    matches!(metric, Metric::Stef | Metric::HybridEx)
}

/// The calibration of one metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibrationReport {
    /// Metric.
    pub metric: Metric,
    /// Labels read.
    pub labels: usize,
    /// Labels with a scored row.
    pub matched: usize,
    /// Labels without any row of this metric.
    pub unmatched: usize,
    /// Labels whose row could not be scored (judge/gold errors), excluded.
    pub unscored: usize,
    /// Cut-off applied to continuous values (None: the rows' verdicts were used).
    pub cutoff: Option<f64>,
    /// Confusion matrix.
    pub confusion: Confusion,
    /// Cohen's κ.
    pub kappa: Option<f64>,
    /// Accuracy.
    pub accuracy: Option<f64>,
    /// 95% Wilson score interval of the accuracy.
    pub accuracy_interval: Option<(f64, f64)>,
    /// Precision.
    pub precision: Option<f64>,
    /// Recall.
    pub recall: Option<f64>,
    /// For continuous metrics: the cut-off (among the observed values) that maximises κ, and κ.
    pub best_cutoff: Option<BestCutoff>,
    /// 95% bootstrap interval of κ (percentiles of 1,000 resamples of the labelled pairs).
    pub kappa_interval: Option<(f64, f64)>,
    /// κ against each reviewer's labels alone (review-page labels).
    pub per_reviewer: Vec<ReviewerKappa>,
    /// What the judge spent on this metric's rows (all rows given, labelled or not).
    pub spend: Spend,
}

/// Token prices of a judge model (`judge.budget.price_input_per_1k`, `price_output_per_1k`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prices {
    /// Price per 1,000 prompt tokens.
    pub input_per_1k: f64,
    /// Price per 1,000 completion tokens.
    pub output_per_1k: f64,
}

/// Tokens the rows of one metric record, and what they come to per 1,000 events. Rows record
/// the tokens of their own fresh LLM calls (a cache hit records 0), so this is the cost of a
/// run that starts with an empty cache; rows without a judge call count as events that cost 0.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Spend {
    /// Rows of the metric (events).
    pub events: usize,
    /// Of them, rows that record tokens (a fresh LLM call).
    pub events_with_calls: usize,
    /// Prompt tokens over all rows.
    pub prompt_tokens: u64,
    /// Completion tokens over all rows.
    pub completion_tokens: u64,
    /// (prompt + completion) tokens per 1,000 events.
    pub tokens_per_1k_events: Option<f64>,
    /// Cost per 1,000 events at the given prices (`None` without prices).
    pub cost_per_1k_events: Option<f64>,
}

/// The prices `metric`'s judge is charged at: `[judge.budget]`'s, for the STEF judge and for
/// gold metrics judged by `[judge]` itself (no `[gold.judge]`); `None` when no price is set or
/// the metric has its own judge (`[gold.judge]` has no prices).
pub fn prices_for(config: &crate::config::Config, metric: Metric) -> Option<Prices> {
    let budget = &config.judge.llm()?.budget;
    let own_judge = match metric {
        Metric::Stef | Metric::StefJudged => true,
        _ => config.gold.judge.is_none(),
    };
    (own_judge && (budget.price_input_per_1k > 0.0 || budget.price_output_per_1k > 0.0)).then_some(
        Prices {
            input_per_1k: budget.price_input_per_1k,
            output_per_1k: budget.price_output_per_1k,
        },
    )
}

/// What the judge spent on `metric`'s rows.
pub fn spend(rows: &[StoredRow], metric: Metric, prices: Option<Prices>) -> Spend {
    let mut out = Spend::default();
    for row in rows.iter().filter(|r| r.metric == metric) {
        let (prompt, completion) = row.tokens();
        out.events += 1;
        out.events_with_calls += usize::from(prompt + completion > 0);
        out.prompt_tokens += prompt;
        out.completion_tokens += completion;
    }
    if out.events > 0 {
        let per_1k = 1000.0 / out.events as f64;
        out.tokens_per_1k_events =
            Some((out.prompt_tokens + out.completion_tokens) as f64 * per_1k);
        out.cost_per_1k_events = prices.map(|p| {
            (out.prompt_tokens as f64 / 1000.0 * p.input_per_1k
                + out.completion_tokens as f64 / 1000.0 * p.output_per_1k)
                * per_1k
        });
    }
    out
}

pub use crate::sampling::estimate::wilson_interval;

/// κ of the metric against one reviewer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReviewerKappa {
    /// Reviewer.
    pub reviewer: String,
    /// Labelled pairs with a scored row.
    pub matched: usize,
    /// Cohen's κ.
    pub kappa: Option<f64>,
    /// Accuracy.
    pub accuracy: Option<f64>,
}

/// Agreement between two reviewers over the events both labelled (correct/incorrect).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReviewerAgreement {
    /// First reviewer (alphabetical).
    pub a: String,
    /// Second reviewer.
    pub b: String,
    /// Events both labelled.
    pub shared: usize,
    /// Share of those on which they agree.
    pub agreement: Option<f64>,
    /// Cohen's κ between them.
    pub kappa: Option<f64>,
}

/// Cohen's κ between every two reviewers over the events both labelled.
pub fn reviewer_agreement(labels: &[Label]) -> Vec<ReviewerAgreement> {
    let mut by_reviewer: std::collections::BTreeMap<&str, HashMap<&str, bool>> =
        std::collections::BTreeMap::new();
    for l in labels {
        if let (Some(r), Some(e)) = (&l.reviewer, &l.event_id) {
            by_reviewer.entry(r).or_default().insert(e, l.label);
        }
    }
    let reviewers: Vec<&&str> = by_reviewer.keys().collect();
    let mut out = Vec::new();
    for (i, a) in reviewers.iter().enumerate() {
        for b in &reviewers[i + 1..] {
            let mut m = Confusion::default();
            for (event, va) in &by_reviewer[**a] {
                if let Some(vb) = by_reviewer[**b].get(event) {
                    m.add(*va, *vb);
                }
            }
            if m.n() > 0 {
                out.push(ReviewerAgreement {
                    a: a.to_string(),
                    b: b.to_string(),
                    shared: m.n() as usize,
                    agreement: m.accuracy(),
                    kappa: m.kappa(),
                });
            }
        }
    }
    out
}

/// Percentile 95% interval of κ over `resamples` bootstrap resamples of `pairs`
/// (prediction, label), with a fixed seed so that a report is reproducible.
pub fn kappa_bootstrap(pairs: &[(bool, bool)], resamples: usize) -> Option<(f64, f64)> {
    use rand::{Rng as _, SeedableRng as _};
    if pairs.len() < 2 {
        return None;
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_ca1b);
    let mut kappas = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let mut m = Confusion::default();
        for _ in 0..pairs.len() {
            let (p, l) = pairs[rng.random_range(0..pairs.len())];
            m.add(p, l);
        }
        if let Some(k) = m.kappa() {
            kappas.push(k);
        }
    }
    if kappas.len() < resamples / 2 {
        return None;
    }
    kappas.sort_by(f64::total_cmp);
    let at =
        |q: f64| kappas[((q * (kappas.len() - 1) as f64).round() as usize).min(kappas.len() - 1)];
    Some((at(0.025), at(0.975)))
}

/// The κ-maximising cut-off.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BestCutoff {
    /// Positive iff value ≥ cutoff.
    pub cutoff: f64,
    /// κ at that cut-off.
    pub kappa: f64,
    /// Accuracy at that cut-off.
    pub accuracy: f64,
}

/// The cut-off of a continuous metric that agrees best with the labels (highest κ).
fn best_cutoff(pairs: &[(f64, Option<bool>, bool, Option<&str>)]) -> Option<BestCutoff> {
    let mut values: Vec<f64> = pairs
        .iter()
        .map(|p| p.0)
        .filter(|v| v.is_finite())
        .collect();
    values.sort_by(f64::total_cmp);
    values.dedup();
    let mut best: Option<BestCutoff> = None;
    for c in values {
        let mut m = Confusion::default();
        for &(value, _, label, _) in pairs {
            m.add(value >= c, label);
        }
        if let (Some(k), Some(a)) = (m.kappa(), m.accuracy())
            && best.is_none_or(|b| k > b.kappa)
        {
            best = Some(BestCutoff {
                cutoff: c,
                kappa: k,
                accuracy: a,
            });
        }
    }
    best
}

/// Calibrate `metric`'s rows against `labels`. `cutoff` overrides the rows' verdicts for
/// continuous metrics (positive iff value ≥ cutoff).
pub fn calibrate(
    labels: &[Label],
    rows: &[StoredRow],
    metric: Metric,
    cutoff: Option<f64>,
    prices: Option<Prices>,
) -> CalibrationReport {
    let mut by_event: HashMap<&str, &StoredRow> = HashMap::new();
    for r in rows.iter().filter(|r| r.metric == metric) {
        by_event.insert(r.event_id.as_str(), r);
    }
    let find = |l: &Label| -> Option<&StoredRow> {
        if let Some(id) = &l.event_id {
            return by_event.get(id.as_str()).copied();
        }
        let qid = l.question_id.as_deref()?;
        by_event.get(qid).copied().or_else(|| {
            let suffix = format!("-{qid}");
            rows.iter()
                .find(|r| r.metric == metric && r.event_id.ends_with(&suffix))
        })
    };
    let mut pairs: Vec<(f64, Option<bool>, bool, Option<&str>)> = Vec::new();
    let (mut unmatched, mut unscored_n) = (0, 0);
    for l in labels {
        match find(l) {
            None => unmatched += 1,
            Some(r) if !r.is_scored() => unscored_n += 1,
            Some(r) => pairs.push((r.value, r.verdict, l.label, l.reviewer.as_deref())),
        }
    }
    let continuous = is_continuous(metric);
    let mut confusion = Confusion::default();
    let mut used_cutoff = None;
    let mut decided: Vec<(bool, bool)> = Vec::with_capacity(pairs.len());
    let mut by_reviewer: std::collections::BTreeMap<&str, Confusion> =
        std::collections::BTreeMap::new();
    for &(value, verdict, label, reviewer) in &pairs {
        let predicted = match (cutoff.filter(|_| continuous), verdict) {
            (Some(c), _) => {
                used_cutoff = Some(c);
                value >= c
            }
            (None, Some(v)) => v,
            (None, None) => value >= 0.5,
        };
        confusion.add(predicted, label);
        decided.push((predicted, label));
        if let Some(r) = reviewer {
            by_reviewer.entry(r).or_default().add(predicted, label);
        }
    }
    let per_reviewer = by_reviewer
        .into_iter()
        .map(|(reviewer, m)| ReviewerKappa {
            reviewer: reviewer.to_string(),
            matched: m.n() as usize,
            kappa: m.kappa(),
            accuracy: m.accuracy(),
        })
        .collect();
    let best_cutoff = continuous.then(|| best_cutoff(&pairs)).flatten();
    CalibrationReport {
        metric,
        labels: labels.len(),
        matched: pairs.len(),
        unmatched,
        unscored: unscored_n,
        cutoff: used_cutoff,
        confusion,
        kappa: confusion.kappa(),
        accuracy: confusion.accuracy(),
        accuracy_interval: wilson_interval(confusion.tp + confusion.tn, confusion.n()),
        precision: confusion.precision(),
        recall: confusion.recall(),
        best_cutoff,
        kappa_interval: kappa_bootstrap(&decided, 1000),
        per_reviewer,
        spend: spend(rows, metric, prices),
    }
}

impl std::fmt::Display for CalibrationReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let num = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.4}"));
        writeln!(f, "metric: {}", self.metric)?;
        writeln!(
            f,
            "labels: {} (matched {}, no row {}, unscored {})",
            self.labels, self.matched, self.unmatched, self.unscored
        )?;
        if let Some(c) = self.cutoff {
            writeln!(f, "cut-off: value >= {c}")?;
        }
        match self.kappa_interval {
            Some((lo, hi)) => writeln!(
                f,
                "cohen_kappa: {} [95% bootstrap {lo:.4}, {hi:.4}]",
                num(self.kappa)
            )?,
            None => writeln!(f, "cohen_kappa: {}", num(self.kappa))?,
        }
        match self.accuracy_interval {
            Some((lo, hi)) => writeln!(
                f,
                "accuracy: {} [95% Wilson {lo:.4}, {hi:.4}]",
                num(self.accuracy)
            )?,
            None => writeln!(f, "accuracy: {}", num(self.accuracy))?,
        }
        writeln!(f, "precision: {}", num(self.precision))?;
        writeln!(f, "recall: {}", num(self.recall))?;
        writeln!(f, "confusion (rows: metric, columns: label):")?;
        writeln!(f, "                label=1  label=0")?;
        writeln!(
            f,
            "  metric=1  {:>9} {:>8}",
            self.confusion.tp, self.confusion.fp
        )?;
        writeln!(
            f,
            "  metric=0  {:>9} {:>8}",
            self.confusion.fn_, self.confusion.tn
        )?;
        if let Some(b) = self.best_cutoff {
            writeln!(
                f,
                "best cut-off: value >= {} (kappa {:.4}, accuracy {:.4})",
                b.cutoff, b.kappa, b.accuracy
            )?;
        }
        let s = &self.spend;
        if s.prompt_tokens + s.completion_tokens > 0 {
            writeln!(
                f,
                "judge spend: {} of {} rows called the LLM; {} prompt + {} completion tokens; per 1,000 events {:.0} tokens, cost {}",
                s.events_with_calls,
                s.events,
                s.prompt_tokens,
                s.completion_tokens,
                s.tokens_per_1k_events.unwrap_or(0.0),
                s.cost_per_1k_events.map_or_else(
                    || "n/a (set judge.budget.price_input_per_1k / price_output_per_1k)"
                        .to_string(),
                    |c| format!("{c:.4}")
                )
            )?;
        }
        for r in &self.per_reviewer {
            writeln!(
                f,
                "reviewer {}: {} pairs, kappa {}, accuracy {}",
                r.reviewer,
                r.matched,
                num(r.kappa),
                num(r.accuracy)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review_label(event: &str, reviewer: &str, label: bool) -> Label {
        Label {
            event_id: Some(event.into()),
            question_id: None,
            label,
            reviewer: Some(reviewer.into()),
        }
    }

    #[test]
    fn reviewers_are_compared_on_the_events_both_labelled() {
        let labels = vec![
            review_label("e1", "ana", true),
            review_label("e2", "ana", false),
            review_label("e3", "ana", true),
            review_label("e4", "ana", false),
            review_label("e1", "bo", true),
            review_label("e2", "bo", false),
            review_label("e3", "bo", false),
            review_label("e5", "bo", true),
            review_label("e9", "cy", true),
        ];
        let agreement = reviewer_agreement(&labels);
        assert_eq!(agreement.len(), 1, "cy shares no event: {agreement:?}");
        let a = &agreement[0];
        assert_eq!((a.a.as_str(), a.b.as_str(), a.shared), ("ana", "bo", 3));
        assert!((a.agreement.unwrap() - 2.0 / 3.0).abs() < 1e-9);
        // ana: 2 yes / 1 no, bo: 1 yes / 2 no over e1–e3; po = 2/3, pe = 4/9, κ = 0.4.
        assert!((a.kappa.unwrap() - 0.4).abs() < 1e-9, "{a:?}");
    }

    #[test]
    fn the_bootstrap_interval_holds_kappa_and_is_reproducible() {
        let pairs: Vec<(bool, bool)> = (0..200).map(|i| (i % 3 != 0, i % 4 != 0)).collect();
        let mut m = Confusion::default();
        for &(p, l) in &pairs {
            m.add(p, l);
        }
        let kappa = m.kappa().unwrap();
        let (lo, hi) = kappa_bootstrap(&pairs, 1000).unwrap();
        assert!(lo < kappa && kappa < hi, "{lo} {kappa} {hi}");
        assert!(hi - lo < 0.5);
        assert_eq!(kappa_bootstrap(&pairs, 1000), Some((lo, hi)));
        assert_eq!(kappa_bootstrap(&pairs[..1], 1000), None);
    }

    #[test]
    fn review_page_labels_are_read_directly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("labels.jsonl");
        std::fs::write(
            &path,
            concat!(
                r#"{"event_id":"e1","reviewer":"ana","verdict":"correct","labelled_at":"2026-01-01T00:00:00Z"}"#, "\n",
                r#"{"event_id":"e1","reviewer":"ana","verdict":"incorrect","labelled_at":"2026-01-01T00:00:09Z"}"#, "\n",
                r#"{"event_id":"e2","reviewer":"ana","verdict":"unsure","labelled_at":"2026-01-01T00:00:00Z"}"#, "\n",
                r#"{"event_id":"e2","reviewer":"bo","verdict":"correct","labelled_at":"2026-01-01T00:00:00Z"}"#, "\n",
            ),
        )
        .unwrap();
        let labels = read_labels(&path).unwrap();
        assert_eq!(
            labels,
            vec![
                review_label("e1", "ana", false),
                review_label("e2", "bo", true)
            ],
            "the newest per reviewer, unsure left out"
        );
    }

    #[test]
    fn kappa_matches_badger_s1_and_s2() {
        let c = Confusion {
            tp: 75,
            fn_: 17,
            tn: 54,
            fp: 4,
        };
        assert!((c.kappa().unwrap() - 0.7166).abs() < 5e-5);
        let s2 = Confusion {
            tp: 24,
            fn_: 68,
            tn: 58,
            fp: 0,
        };
        assert!((s2.kappa().unwrap() - 0.2144).abs() < 5e-5);
        assert_eq!(Confusion::default().kappa(), None);
    }
}
