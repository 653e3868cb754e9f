//! `calibrate --fit`: the correctness model refit on a deployment's own labels — the review
//! page's, `import-labels`', or a labels file joined with a run's rows — and compared, on the
//! same held-out folds, with the model in use.
//!
//! - Each labelled event counts once: the majority of its labels (`unsure` and ties left
//!   out), beside its line-rate `stef` row scored normally (`ok`, `judge_fallback`); its
//!   features are read back from the stored row (`stef::correctness::StoredFeatureInput`),
//!   exactly those it was scored with.
//! - The refit is **anchored on the model in use**: its penalty pulls the weights toward that
//!   model's, not toward zero (`verdict_fit::fit_toward`), and every fold's fit too. A few
//!   hundred labels cannot rebuild a hundred weights from nothing; anchored, they move the
//!   intercept (the deployment's share correct: calibration) and the weights of what their
//!   events show, and keep the rest. `--from-zero` fits from nothing instead.
//! - Folds are drawn by a hash of the event id (`folds`, default 5): the same on every run.
//!   The new model's figures are cross-validated (each fold predicted by a fit on the others,
//!   its threshold chosen by an inner cross-validation on the others: nothing is measured on
//!   what it was fitted or tuned on); the current model is applied as it is, with its own
//!   threshold, to the same items — held out for it unless it was itself fitted on these
//!   labels (its `sources` say).
//! - A model is written only when asked (`--write`), with at least `min_per_class` labels of
//!   each kind (default 100), and only when it beats the current one on the held-out folds:
//!   better in κ at the target flag rate or in Brier score, and worse in neither.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::Label;
use crate::evaluation::Metric;
use crate::sampling::verdict_fit::{
    DEFAULT_L2, Fitted, TrainingItem, fit_toward, held_out_figures, held_out_figures_per_item,
    nested_cross_validate_toward, threshold_for,
};
use crate::stef::correctness::{
    Features, HeldOutFigures, LabelSource, MODEL_FORMAT, ModelFile, StoredFeatureInput,
    VerdictModel, feature_names,
};
use crate::stores::StoredRow;

/// How `calibrate --fit` fits and decides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FitOptions {
    /// The share of correct queries the threshold may flag, at most (`--flag-rate`).
    pub target_flag_rate: f64,
    /// The L2 penalty (`--l2`).
    pub l2: f64,
    /// Cross-validation folds (`--folds`).
    pub folds: usize,
    /// Labels of each kind (correct, wrong) needed to write a model (`--min-per-class`).
    pub min_per_class: usize,
    /// The penalty pulls toward the current model's weights (not `--from-zero`).
    pub anchored: bool,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            target_flag_rate: 0.10,
            l2: DEFAULT_L2,
            folds: 5,
            min_per_class: 100,
            anchored: true,
        }
    }
}

/// One labelled event's features.
#[derive(Debug, Clone)]
pub struct LabelledFeatures {
    /// The event.
    pub event_id: String,
    /// Its features, read back from its line-rate row.
    pub features: Features,
    /// The majority of people's labels.
    pub correct: bool,
}

/// Why labels did not enter the fit, with counts.
pub type Skipped = BTreeMap<&'static str, usize>;

/// The labelled events with their line-rate features (one per event: the majority of its
/// labels), and what was left out and why.
pub fn labelled_features(labels: &[Label], rows: &[StoredRow]) -> (Vec<LabelledFeatures>, Skipped) {
    let mut skipped = Skipped::new();
    let line_rows: HashMap<&str, &StoredRow> = rows
        .iter()
        .filter(|r| r.metric == Metric::Stef)
        .map(|r| (r.event_id.as_str(), r))
        .collect();
    // Votes per event: (correct, wrong).
    let mut votes: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    for label in labels {
        let row = match (&label.event_id, &label.question_id) {
            (Some(id), _) => line_rows.get(id.as_str()).copied(),
            (None, Some(qid)) => line_rows.get(qid.as_str()).copied().or_else(|| {
                let suffix = format!("-{qid}");
                line_rows
                    .iter()
                    .find(|(id, _)| id.ends_with(&suffix))
                    .map(|(_, r)| *r)
            }),
            (None, None) => None,
        };
        let Some(row) = row else {
            *skipped.entry("no line-rate row").or_default() += 1;
            continue;
        };
        let v = votes.entry(row.event_id.as_str()).or_default();
        if label.label {
            v.0 += 1;
        } else {
            v.1 += 1;
        }
    }
    let mut out = Vec::with_capacity(votes.len());
    for (event_id, (yes, no)) in votes {
        if yes == no {
            *skipped.entry("labels tie").or_default() += 1;
            continue;
        }
        let Some(row) = line_rows.get(event_id) else {
            continue;
        };
        if !matches!(row.status.as_str(), "ok" | "judge_fallback") {
            *skipped
                .entry("not scored normally (parse_error, …: p_correct 0 by contract)")
                .or_default() += 1;
            continue;
        }
        let input = StoredFeatureInput::from_stored(
            row.filter_status.as_deref().unwrap_or_default(),
            row.semantic_verdict.as_deref().unwrap_or_default(),
            row.confidence.unwrap_or_default(),
            &row.details,
        );
        match input {
            Ok(input) => out.push(LabelledFeatures {
                event_id: event_id.to_string(),
                features: input.input().features(),
                correct: yes > no,
            }),
            Err(_) => *skipped.entry("features unreadable").or_default() += 1,
        }
    }
    (out, skipped)
}

/// Whether the refit should replace the current model.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum FitDecision {
    /// It beats the current model on the held-out folds and has enough labels.
    Better,
    /// Too few labels of a kind to trust a fit.
    TooFewLabels {
        /// Correct labels.
        correct: usize,
        /// Wrong labels.
        wrong: usize,
        /// Needed of each.
        needed: usize,
    },
    /// It does not beat the current model on the held-out folds.
    NotBetter {
        /// How it compares.
        reason: String,
    },
    /// Nothing could be fitted (one kind of label only).
    CannotFit {
        /// Why.
        reason: String,
    },
}

/// What `calibrate --fit` found.
#[derive(Debug, Clone, Serialize)]
pub struct FitReport {
    /// Labelled events used.
    pub used: usize,
    /// Of which people called correct.
    pub correct: usize,
    /// Labels left out, by reason.
    pub skipped: Skipped,
    /// Cross-validation folds.
    pub folds: usize,
    /// The refit's cross-validated figures (`None` when nothing could be fitted).
    pub new: Option<HeldOutFigures>,
    /// The current model's figures on the same items.
    pub current: HeldOutFigures,
    /// The current model's version.
    pub current_version: String,
    /// Whether the current model names these labels among its sources (then its figures
    /// are not held out).
    pub current_fitted_on_these: bool,
    /// The refit on every labelled event (what `--write` writes when the decision is
    /// [`FitDecision::Better`]).
    pub model: Option<ModelFile>,
    /// The decision.
    pub decision: FitDecision,
}

/// The fold of an event: a hash of its id, so the folds are the same on every run.
fn fold_of(event_id: &str, folds: usize) -> usize {
    let draw = crate::sampling::uniform_draw("calibrate-fit-folds", event_id);
    ((draw * folds as f64) as usize).min(folds.saturating_sub(1))
}

/// Refit on `items` and compare with `current` on the same held-out folds. `source` says what
/// the labels are (recorded in the model file).
pub fn fit_and_compare(
    items: &[LabelledFeatures],
    skipped: Skipped,
    current: &VerdictModel,
    options: &FitOptions,
    source: LabelSource,
) -> FitReport {
    let target = options.target_flag_rate;
    let correct: Vec<bool> = items.iter().map(|i| i.correct).collect();
    let n_correct = correct.iter().filter(|c| **c).count();
    let n_wrong = items.len() - n_correct;
    let current_p: Vec<Option<f64>> = items
        .iter()
        .map(|i| Some(current.p_correct(&i.features)))
        .collect();
    let current_figures = held_out_figures(&current_p, &correct, current.threshold(), target);
    let current_fitted_on_these = !source.sha256.is_empty()
        && current
            .file()
            .sources
            .iter()
            .any(|s| s.sha256 == source.sha256);
    let training: Vec<TrainingItem> = items
        .iter()
        .map(|i| TrainingItem {
            features: i.features,
            correct: i.correct,
            weight: 1.0,
        })
        .collect();
    let folds = options.folds.max(2);
    let fold_ids: Vec<usize> = items.iter().map(|i| fold_of(&i.event_id, folds)).collect();
    let groups = vec!["labels"; items.len()];
    let refs: Vec<&TrainingItem> = training.iter().collect();
    let prior = options.anchored.then(|| Fitted {
        intercept: current.file().intercept,
        weights: *current.weights(),
        iterations: 0,
    });
    let prior = prior.as_ref();
    let fitted = match fit_toward(&refs, options.l2, prior) {
        Ok(fitted) => fitted,
        Err(e) => {
            return FitReport {
                used: items.len(),
                correct: n_correct,
                skipped,
                folds,
                new: None,
                current: current_figures,
                current_version: current.version().to_string(),
                current_fitted_on_these,
                model: None,
                decision: FitDecision::CannotFit {
                    reason: e.to_string(),
                },
            };
        }
    };
    let (predictions, thresholds) =
        nested_cross_validate_toward(&training, &fold_ids, &groups, options.l2, target, prior);
    let new_figures = held_out_figures_per_item(&predictions, &correct, &thresholds, target);
    let threshold = threshold_for(&predictions, &correct, &groups, target);
    let mut held_out = BTreeMap::new();
    held_out.insert(format!("cross_validated_{folds}_folds"), new_figures);
    held_out.insert(
        format!("previous_model_{}_same_items", current.version()),
        current_figures,
    );
    let model = refit_model_file(
        &fitted,
        &source,
        items.len(),
        n_correct,
        threshold,
        held_out,
        options,
    );
    let decision = decide(&new_figures, &current_figures, n_correct, n_wrong, options);
    FitReport {
        used: items.len(),
        correct: n_correct,
        skipped,
        folds,
        new: Some(new_figures),
        current: current_figures,
        current_version: current.version().to_string(),
        current_fitted_on_these,
        model: Some(model),
        decision,
    }
}

/// The model file a refit writes: its weights, the threshold for the target flag rate, the
/// labels it was fitted on and its held-out figures.
fn refit_model_file(
    fitted: &Fitted,
    source: &LabelSource,
    used: usize,
    correct: usize,
    threshold: f64,
    held_out: BTreeMap<String, HeldOutFigures>,
    options: &FitOptions,
) -> ModelFile {
    ModelFile {
        format: MODEL_FORMAT,
        description: format!(
            "refit by `sqlgrade calibrate --fit` on {} labelled events ({} correct) of {}{}",
            used,
            correct,
            source.name,
            if options.anchored {
                ", anchored on the model in use"
            } else {
                ", from zero"
            }
        ),
        fitted: chrono::Utc::now().format("%Y-%m-%d").to_string(),
        sqlgrade: crate::stef::assessment::SQLGRADE_VERSION.to_string(),
        target_flag_rate: options.target_flag_rate,
        threshold,
        l2: options.l2,
        intercept: fitted.intercept,
        weights: feature_names()
            .iter()
            .zip(&fitted.weights)
            .filter(|(_, w)| **w != 0.0)
            .map(|(n, w)| (n.clone(), *w))
            .collect(),
        sources: vec![LabelSource {
            items: used as u64,
            correct: correct as u64,
            ..source.clone()
        }],
        held_out,
    }
}

/// Whether the refit replaces the current model: enough labels of each class, then, on the same
/// held-out folds, better in κ at the target flag rate or in Brier score (calibration and
/// ranking together) and worse in neither.
fn decide(
    new: &HeldOutFigures,
    current: &HeldOutFigures,
    n_correct: usize,
    n_wrong: usize,
    options: &FitOptions,
) -> FitDecision {
    if n_correct < options.min_per_class || n_wrong < options.min_per_class {
        FitDecision::TooFewLabels {
            correct: n_correct,
            wrong: n_wrong,
            needed: options.min_per_class,
        }
    } else {
        let kappa = |f: &HeldOutFigures| f.kappa_at_target.unwrap_or(f64::NEG_INFINITY);
        let brier = |f: &HeldOutFigures| f.brier.unwrap_or(f64::INFINITY);
        let (k_new, k_old, b_new, b_old) = (kappa(new), kappa(current), brier(new), brier(current));
        if k_new >= k_old && b_new <= b_old && (k_new > k_old || b_new < b_old) {
            FitDecision::Better
        } else {
            FitDecision::NotBetter {
                reason: format!(
                    "κ at ≤ {:.0} % of correct flagged {:.3} against the current model's {:.3}, \
                     Brier {:.3} against {:.3} (it must be better in one and worse in neither)",
                    100.0 * options.target_flag_rate,
                    kappa(new),
                    kappa(current),
                    brier(new),
                    brier(current)
                ),
            }
        }
    }
}

impl std::fmt::Display for FitReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let num = |x: Option<f64>| x.map_or("—".to_string(), |x| format!("{x:.3}"));
        let pct = |x: Option<f64>| x.map_or("—".to_string(), |x| format!("{:.1} %", 100.0 * x));
        writeln!(
            f,
            "correctness model refit: {} labelled events ({} correct, {} wrong), {} folds by a \
             hash of the event id",
            self.used,
            self.correct,
            self.used - self.correct,
            self.folds
        )?;
        for (why, n) in &self.skipped {
            writeln!(f, "  left out: {n} ({why})")?;
        }
        writeln!(
            f,
            "  {:<32}{:>10}{:>12}{:>10}{:>12}{:>10}{:>10}",
            "", "κ @ target", "flagged", "κ", "calib. err", "Brier", "mean p"
        )?;
        let mut line = |name: &str, fig: &HeldOutFigures| {
            writeln!(
                f,
                "  {:<32}{:>10}{:>12}{:>10}{:>12}{:>10}{:>10}",
                name,
                num(fig.kappa_at_target),
                pct(fig.flag_rate),
                num(fig.kappa),
                num(fig.calibration_error),
                num(fig.brier),
                pct(fig.mean_p),
            )
        };
        if let Some(new) = &self.new {
            line("refit (cross-validated)", new)?;
        }
        line(
            &format!(
                "current {}{}",
                self.current_version,
                if self.current_fitted_on_these {
                    " (fitted on these)"
                } else {
                    ""
                }
            ),
            &self.current,
        )?;
        writeln!(
            f,
            "  (κ @ target: at the best cut flagging at most the target share of correct \
             queries; flagged: the share of correct queries the model's own threshold flags; \
             share correct among them {})",
            pct(Some(self.correct as f64 / self.used.max(1) as f64))
        )?;
        match &self.decision {
            FitDecision::Better => writeln!(f, "decision: the refit beats the current model"),
            FitDecision::TooFewLabels {
                correct,
                wrong,
                needed,
            } => writeln!(
                f,
                "decision: not enough labels to write a model ({correct} correct, {wrong} \
                 wrong; {needed} of each needed)"
            ),
            FitDecision::NotBetter { reason } => {
                writeln!(f, "decision: keep the current model: {reason}")
            }
            FitDecision::CannotFit { reason } => writeln!(f, "decision: nothing to fit: {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: usize, signal: bool, correct: bool) -> LabelledFeatures {
        let mut features = [0.0; crate::stef::correctness::FEATURE_COUNT];
        let i = crate::stef::correctness::feature_index("finding:empty_result").unwrap();
        features[i] = if signal { 1.0 } else { 0.0 };
        LabelledFeatures {
            event_id: format!("e{id}"),
            features,
            correct,
        }
    }

    /// On labels where a feature the shipped model barely weighs decides correctness, the refit
    /// learns it, beats the shipped model on held-out folds and is written; with too few labels
    /// of a kind it is not.
    #[test]
    fn a_refit_that_learns_the_deployments_signal_beats_the_shipped_model() {
        let items: Vec<LabelledFeatures> = (0..400)
            .map(|i| {
                let signal = i % 3 == 0;
                // 90 % of the signalled events are wrong, 90 % of the others correct.
                let correct = if signal { i % 10 == 0 } else { i % 10 != 1 };
                item(i, signal, correct)
            })
            .collect();
        let source = LabelSource {
            name: "store".into(),
            sha256: String::new(),
            bytes: 0,
            items: 0,
            correct: 0,
        };
        let shipped = VerdictModel::shipped();
        let report = fit_and_compare(
            &items,
            Skipped::new(),
            shipped,
            &FitOptions::default(),
            source.clone(),
        );
        assert_eq!(report.decision, FitDecision::Better, "{report}");
        let new = report.new.unwrap();
        assert!(new.kappa_at_target.unwrap() > 0.5, "{report}");
        let model = VerdictModel::from_file(report.model.clone().unwrap()).expect("a valid model");
        let signalled = model.p_correct(&items[0].features);
        let clean = model.p_correct(&items[1].features);
        assert!(signalled < 0.3 && clean > 0.7, "{signalled} {clean}");
        assert!(!model.verdict(signalled) && model.verdict(clean));
        // The printed report names both models.
        let text = report.to_string();
        assert!(text.contains("refit (cross-validated)") && text.contains(shipped.version()));

        let few = fit_and_compare(
            &items[..150],
            Skipped::new(),
            shipped,
            &FitOptions::default(),
            source,
        );
        assert!(
            matches!(few.decision, FitDecision::TooFewLabels { needed: 100, .. }),
            "{few}"
        );
    }

    #[test]
    fn folds_are_stable_and_spread() {
        let folds: Vec<usize> = (0..1000).map(|i| fold_of(&format!("ev-{i}"), 5)).collect();
        assert_eq!(
            folds,
            (0..1000)
                .map(|i| fold_of(&format!("ev-{i}"), 5))
                .collect::<Vec<_>>()
        );
        for f in 0..5 {
            let n = folds.iter().filter(|x| **x == f).count();
            assert!((150..250).contains(&n), "fold {f}: {n}");
        }
    }
}
