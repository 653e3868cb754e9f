//! Fitting the correctness model (`stef::correctness`) on people's labels, and measuring a model
//! on labels it was not fitted on.
//!
//! - [`fit`]: L2-penalised logistic regression by Newton's method (iteratively reweighted least
//!   squares): `Σ wᵢ·loss(yᵢ, σ(b + x·β)) + λ/2·|β|²`, the intercept not penalised, with a
//!   weight per item (an item scored in two settings counts half in each). The problem is
//!   small (≈ 100 features, thousands of labels) and convex, so Newton converges in a few
//!   steps and the result is the same on every machine: a refit reproduces the shipped file.
//! - [`fit_toward`]: the same with the penalty pulling toward a known model's weights
//!   (`λ/2·|β − β₀|²`, the fit starting from β₀) instead of toward zero: a refit on a few
//!   hundred of a deployment's labels then moves what those labels show and keeps what the
//!   known model learned on thousands (a Gaussian prior centred on it, in Bayesian terms).
//! - [`cross_validate`]: held-out predictions, each item predicted by a model fitted without
//!   its fold (the caller assigns folds: by database for the shipped model, so no question of
//!   a database is seen in fitting; by event for a deployment's labels).
//! - [`threshold_for`]: the threshold that flags at most a target share of the correct items,
//!   in every group the caller names (label source × schema setting), so that a style of
//!   labels where correct queries look worse is not flagged more than the target.
//! - [`held_out_figures`]: κ at the best cut that flags at most the target share of correct
//!   items (how well `p` ranks), the flag rate and κ of the model's own threshold, expected
//!   calibration error over 10 bins, Brier score, and the mean `p` beside the share correct.

use crate::stef::correctness::{FEATURE_COUNT, Features, HeldOutFigures};

use super::agreement::Confusion;

/// The L2 penalty λ of the shipped fit and of `calibrate --fit` unless told otherwise (chosen on
/// the label sources' held-out figures: CHANGELOG.md, "The live verdict, learned").
pub const DEFAULT_L2: f64 = 10.0;

/// One labelled item's features.
#[derive(Debug, Clone)]
pub struct TrainingItem {
    /// Its features.
    pub features: Features,
    /// People called it correct.
    pub correct: bool,
    /// Its weight in the fit (1, or ½ for each of two settings of one item).
    pub weight: f64,
}

/// A fitted logistic regression.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    /// The intercept.
    pub intercept: f64,
    /// The weights, in feature order.
    pub weights: Features,
    /// Newton steps taken.
    pub iterations: usize,
}

impl Fitted {
    /// `p` of a feature vector.
    pub fn p(&self, features: &Features) -> f64 {
        let z = self.intercept
            + self
                .weights
                .iter()
                .zip(features)
                .map(|(w, x)| w * x)
                .sum::<f64>();
        sigmoid(z)
    }
}

fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// Why a model could not be fitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FitError {
    /// Nothing to fit on, or one class only.
    #[error("fitting needs labelled items of both kinds (correct: {correct}, wrong: {wrong})")]
    OneClass {
        /// Correct items.
        correct: usize,
        /// Wrong items.
        wrong: usize,
    },
    /// The Newton system could not be solved (it cannot happen with λ > 0).
    #[error("the fit did not converge")]
    NoConvergence,
}

const D: usize = FEATURE_COUNT + 1;

/// Fit `items` with penalty `l2` (λ > 0).
pub fn fit(items: &[&TrainingItem], l2: f64) -> Result<Fitted, FitError> {
    fit_toward(items, l2, None)
}

/// Fit `items` with penalty `l2` (λ > 0) on the distance from `prior`'s weights (from zero
/// without one); Newton starts from `prior` (its intercept included, which is not penalised).
pub fn fit_toward(
    items: &[&TrainingItem],
    l2: f64,
    prior: Option<&Fitted>,
) -> Result<Fitted, FitError> {
    let correct = items.iter().filter(|i| i.correct).count();
    if correct == 0 || correct == items.len() {
        return Err(FitError::OneClass {
            correct,
            wrong: items.len() - correct,
        });
    }
    // β[0] is the intercept; β[1..] the weights. Each item's non-zero coordinates (the
    // intercept's 1 first), so that a step costs the items' non-zeros squared, not D².
    let sparse: Vec<Vec<(usize, f64)>> = items
        .iter()
        .map(|item| {
            std::iter::once((0, 1.0))
                .chain(
                    item.features
                        .iter()
                        .enumerate()
                        .filter(|(_, v)| **v != 0.0)
                        .map(|(i, v)| (i + 1, *v)),
                )
                .collect()
        })
        .collect();
    let center: Vec<f64> = match prior {
        Some(p) => std::iter::once(p.intercept)
            .chain(p.weights.iter().copied())
            .collect(),
        None => vec![0.0; D],
    };
    let mut beta = center.clone();
    for iteration in 1..=100 {
        let mut gradient = vec![0.0; D];
        let mut hessian = vec![0.0; D * D];
        for (item, x) in items.iter().zip(&sparse) {
            let z: f64 = x.iter().map(|(i, v)| beta[*i] * v).sum();
            let p = sigmoid(z);
            let y = if item.correct { 1.0 } else { 0.0 };
            let g = item.weight * (p - y);
            let h = item.weight * p * (1.0 - p);
            for (a, &(i, xi)) in x.iter().enumerate() {
                gradient[i] += g * xi;
                let hx = h * xi;
                // Indices ascend, so (i, j) with j ≤ i fills the lower triangle.
                for &(j, xj) in &x[..=a] {
                    hessian[i * D + j] += hx * xj;
                }
            }
        }
        for i in 0..D {
            for j in 0..i {
                hessian[j * D + i] = hessian[i * D + j];
            }
        }
        // The penalty (not on the intercept, which gets a negligible ridge for stability).
        hessian[0] += 1e-9;
        for i in 1..D {
            gradient[i] += l2 * (beta[i] - center[i]);
            hessian[i * D + i] += l2;
        }
        let step = solve_cholesky(&mut hessian, &gradient).ok_or(FitError::NoConvergence)?;
        let mut largest: f64 = 0.0;
        for (b, s) in beta.iter_mut().zip(&step) {
            *b -= s;
            largest = largest.max(s.abs());
        }
        if largest < 1e-10 {
            let mut weights = [0.0; FEATURE_COUNT];
            weights.copy_from_slice(&beta[1..]);
            return Ok(Fitted {
                intercept: beta[0],
                weights,
                iterations: iteration,
            });
        }
    }
    Err(FitError::NoConvergence)
}

/// Solve `A s = b` for a symmetric positive definite `A` (row-major, overwritten by its
/// Cholesky factor); `None` when `A` is not positive definite.
fn solve_cholesky(a: &mut [f64], b: &[f64]) -> Option<Vec<f64>> {
    let n = b.len();
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= a[j * n + k] * a[j * n + k];
        }
        if d <= 0.0 || !d.is_finite() {
            return None;
        }
        let d = d.sqrt();
        a[j * n + j] = d;
        for i in j + 1..n {
            let mut v = a[i * n + j];
            for k in 0..j {
                v -= a[i * n + k] * a[j * n + k];
            }
            a[i * n + j] = v / d;
        }
    }
    // L y = b, then Lᵀ s = y.
    let mut y = vec![0.0; n];
    for i in 0..n {
        let mut v = b[i];
        for k in 0..i {
            v -= a[i * n + k] * y[k];
        }
        y[i] = v / a[i * n + i];
    }
    let mut s = vec![0.0; n];
    for i in (0..n).rev() {
        let mut v = y[i];
        for k in i + 1..n {
            v -= a[k * n + i] * s[k];
        }
        s[i] = v / a[i * n + i];
    }
    Some(s)
}

/// Held-out predictions: item `i` predicted by a model fitted on the items of every other fold
/// (`folds[i]` is its fold). A fold whose complement has one class only leaves its items at
/// `None`.
pub fn cross_validate(items: &[TrainingItem], folds: &[usize], l2: f64) -> Vec<Option<f64>> {
    cross_validate_toward(items, folds, l2, None)
}

/// [`cross_validate`] with each fold's fit pulled toward `prior` ([`fit_toward`]).
pub fn cross_validate_toward(
    items: &[TrainingItem],
    folds: &[usize],
    l2: f64,
    prior: Option<&Fitted>,
) -> Vec<Option<f64>> {
    let mut predictions = vec![None; items.len()];
    let mut fold_ids: Vec<usize> = folds.to_vec();
    fold_ids.sort_unstable();
    fold_ids.dedup();
    for fold in fold_ids {
        let training: Vec<&TrainingItem> = items
            .iter()
            .zip(folds)
            .filter(|(_, f)| **f != fold)
            .map(|(item, _)| item)
            .collect();
        let Ok(fitted) = fit_toward(&training, l2, prior) else {
            continue;
        };
        for (i, item) in items.iter().enumerate() {
            if folds[i] == fold {
                predictions[i] = Some(fitted.p(&item.features));
            }
        }
    }
    predictions
}

/// Held-out predictions ([`cross_validate`]) and, for each item, the threshold chosen without
/// its fold: an inner cross-validation over the other folds gives held-out predictions of the
/// training items, and [`threshold_for`] picks the threshold from them (per group of `groups`).
/// A flag rate then measured on a fold was tuned on other folds only.
pub fn nested_cross_validate(
    items: &[TrainingItem],
    folds: &[usize],
    groups: &[&str],
    l2: f64,
    target: f64,
) -> (Vec<Option<f64>>, Vec<f64>) {
    nested_cross_validate_toward(items, folds, groups, l2, target, None)
}

/// [`nested_cross_validate`] with every fit pulled toward `prior` ([`fit_toward`]).
pub fn nested_cross_validate_toward(
    items: &[TrainingItem],
    folds: &[usize],
    groups: &[&str],
    l2: f64,
    target: f64,
    prior: Option<&Fitted>,
) -> (Vec<Option<f64>>, Vec<f64>) {
    let predictions = cross_validate_toward(items, folds, l2, prior);
    let mut fold_ids: Vec<usize> = folds.to_vec();
    fold_ids.sort_unstable();
    fold_ids.dedup();
    let mut thresholds = vec![0.0; items.len()];
    for fold in fold_ids {
        let inner: Vec<usize> = (0..items.len()).filter(|i| folds[*i] != fold).collect();
        let inner_items: Vec<TrainingItem> = inner.iter().map(|i| items[*i].clone()).collect();
        let inner_folds: Vec<usize> = inner.iter().map(|i| folds[*i]).collect();
        let inner_p = cross_validate_toward(&inner_items, &inner_folds, l2, prior);
        let correct: Vec<bool> = inner_items.iter().map(|i| i.correct).collect();
        let inner_groups: Vec<&str> = inner.iter().map(|i| groups[*i]).collect();
        let t = threshold_for(&inner_p, &correct, &inner_groups, target);
        for (i, f) in folds.iter().enumerate() {
            if *f == fold {
                thresholds[i] = t;
            }
        }
    }
    (predictions, thresholds)
}

/// [`held_out_figures`] with a threshold per item (each fold's own, from
/// [`nested_cross_validate`]).
pub fn held_out_figures_per_item(
    predictions: &[Option<f64>],
    correct: &[bool],
    thresholds: &[f64],
    target: f64,
) -> HeldOutFigures {
    let mut figures = held_out_figures(predictions, correct, 0.5, target);
    let mut verdict = Confusion::default();
    for ((p, t), c) in predictions.iter().zip(thresholds).zip(correct) {
        if let Some(p) = p {
            verdict.add(*p >= *t, *c);
        }
    }
    let n_correct = verdict.tp + verdict.fn_;
    figures.flag_rate = (n_correct > 0).then(|| verdict.fn_ as f64 / n_correct as f64);
    figures.kappa = verdict.kappa();
    figures
}

/// The largest threshold that flags (`p <` threshold) at most `target` of the correct items
/// of every group (`groups[i]` names item `i`'s; one group for all is fine). Items without a
/// prediction are left out. 0 when there is nothing to go by.
pub fn threshold_for(
    predictions: &[Option<f64>],
    correct: &[bool],
    groups: &[&str],
    target: f64,
) -> f64 {
    let mut names: Vec<&str> = groups.to_vec();
    names.sort_unstable();
    names.dedup();
    let mut threshold = f64::INFINITY;
    for name in names {
        let mut p: Vec<f64> = predictions
            .iter()
            .zip(correct)
            .zip(groups)
            .filter(|((_, c), g)| **c && **g == name)
            .filter_map(|((p, _), _)| *p)
            .collect();
        if p.is_empty() {
            continue;
        }
        p.sort_by(f64::total_cmp);
        // Flagging the k lowest correct items is allowed; the threshold is the next one's p.
        let k = (target * p.len() as f64).floor() as usize;
        threshold = threshold.min(p[k.min(p.len() - 1)]);
    }
    if threshold.is_finite() {
        threshold
    } else {
        0.0
    }
}

/// κ at the best cut-off that flags (`score <` cut) at most `target` of the correct items,
/// and the cut; `None` without both classes.
pub fn kappa_at_target(scores: &[f64], correct: &[bool], target: f64) -> Option<(f64, f64)> {
    let n_correct = correct.iter().filter(|c| **c).count();
    if n_correct == 0 || n_correct == correct.len() {
        return None;
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|a, b| scores[*a].total_cmp(&scores[*b]));
    // Sweep cuts upward: everything below the cut is flagged.
    let mut confusion = Confusion::default();
    for c in correct {
        confusion.add(true, *c);
    }
    let mut best = confusion.kappa().map(|k| (k, f64::NEG_INFINITY));
    let mut i = 0;
    while i < order.len() {
        let cut_value = scores[order[i]];
        // Flag every item with this score.
        while i < order.len() && scores[order[i]] == cut_value {
            let c = correct[order[i]];
            confusion.remove(true, c);
            confusion.add(false, c);
            i += 1;
        }
        if confusion.fn_ as f64 > target * n_correct as f64 {
            break;
        }
        let next = order.get(i).map_or(f64::INFINITY, |j| scores[*j]);
        if let Some(k) = confusion.kappa()
            && best.is_none_or(|(b, _)| k > b)
        {
            best = Some((k, next));
        }
    }
    best
}

/// Expected calibration error over 10 equal-width bins of `p`.
pub fn calibration_error(p: &[f64], correct: &[bool]) -> Option<f64> {
    if p.is_empty() {
        return None;
    }
    let mut bins = [(0.0, 0.0, 0usize); 10];
    for (p, c) in p.iter().zip(correct) {
        let b = ((p * 10.0) as usize).min(9);
        bins[b].0 += p;
        bins[b].1 += if *c { 1.0 } else { 0.0 };
        bins[b].2 += 1;
    }
    let n = p.len() as f64;
    Some(
        bins.iter()
            .filter(|b| b.2 > 0)
            .map(|(sp, sy, k)| (*k as f64 / n) * (sp / *k as f64 - sy / *k as f64).abs())
            .sum(),
    )
}

/// The reliability table: per 10 equal-width bins of `p`, (items, mean `p`, share correct).
pub fn reliability(p: &[f64], correct: &[bool]) -> [(u64, f64, f64); 10] {
    let mut bins = [(0u64, 0.0, 0.0); 10];
    for (p, c) in p.iter().zip(correct) {
        let b = ((p * 10.0) as usize).min(9);
        bins[b].0 += 1;
        bins[b].1 += p;
        bins[b].2 += if *c { 1.0 } else { 0.0 };
    }
    for b in &mut bins {
        if b.0 > 0 {
            b.1 /= b.0 as f64;
            b.2 /= b.0 as f64;
        }
    }
    bins
}

/// Brier score.
pub fn brier(p: &[f64], correct: &[bool]) -> Option<f64> {
    (!p.is_empty()).then(|| {
        p.iter()
            .zip(correct)
            .map(|(p, c)| (p - if *c { 1.0 } else { 0.0 }).powi(2))
            .sum::<f64>()
            / p.len() as f64
    })
}

/// The figures of predictions `p` (items without one are left out) against people's labels,
/// with the model's `threshold` and the `target` share of correct items flagged.
pub fn held_out_figures(
    predictions: &[Option<f64>],
    correct: &[bool],
    threshold: f64,
    target: f64,
) -> HeldOutFigures {
    let (p, y): (Vec<f64>, Vec<bool>) = predictions
        .iter()
        .zip(correct)
        .filter_map(|(p, c)| p.map(|p| (p, *c)))
        .unzip();
    let n_correct = y.iter().filter(|c| **c).count();
    let mut verdict = Confusion::default();
    for (p, c) in p.iter().zip(&y) {
        verdict.add(*p >= threshold, *c);
    }
    HeldOutFigures {
        n: p.len() as u64,
        correct: n_correct as u64,
        kappa_at_target: kappa_at_target(&p, &y, target).map(|(k, _)| k),
        flag_rate: (n_correct > 0).then(|| verdict.fn_ as f64 / n_correct as f64),
        kappa: verdict.kappa(),
        calibration_error: calibration_error(&p, &y),
        brier: brier(&p, &y),
        mean_p: (!p.is_empty()).then(|| p.iter().sum::<f64>() / p.len() as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(x: &[(usize, f64)], correct: bool) -> TrainingItem {
        let mut features = [0.0; FEATURE_COUNT];
        for (i, v) in x {
            features[*i] = *v;
        }
        TrainingItem {
            features,
            correct,
            weight: 1.0,
        }
    }

    /// A feature that marks wrong items gets a negative weight and the fit reproduces the
    /// shares it was shown: 1 in 5 correct where the feature is on, 4 in 5 where it is off.
    #[test]
    fn the_fit_recovers_the_log_odds_of_a_clean_signal() {
        let mut items = Vec::new();
        for i in 0..100 {
            items.push(item(&[(0, 1.0)], i % 5 == 0));
            items.push(item(&[], i % 5 != 0));
        }
        let refs: Vec<&TrainingItem> = items.iter().collect();
        let fitted = fit(&refs, 1e-6).expect("fits");
        let on = fitted.p(&items[0].features);
        let off = fitted.p(&items[1].features);
        assert!((on - 0.2).abs() < 1e-4, "{on}");
        assert!((off - 0.8).abs() < 1e-4, "{off}");
        // A stronger penalty pulls the weight towards 0.
        let shrunk = fit(&refs, 100.0).expect("fits");
        assert!(shrunk.weights[0] < 0.0 && shrunk.weights[0] > fitted.weights[0]);
        // Features that never fire keep weight 0.
        assert!(fitted.weights[1..].iter().all(|w| *w == 0.0));
        assert_eq!(
            fit(&refs[..1], 1.0),
            Err(FitError::OneClass {
                correct: 1,
                wrong: 0
            })
        );
    }

    /// Anchored on a prior, a few labels move the weights they show something about and the
    /// intercept (calibration), and leave the rest where the prior put them; from zero, the
    /// same few labels lose what the prior knew.
    #[test]
    fn a_fit_toward_a_prior_keeps_what_the_labels_do_not_show() {
        let mut prior = Fitted {
            intercept: 0.0,
            weights: [0.0; FEATURE_COUNT],
            iterations: 0,
        };
        prior.weights[0] = -2.0;
        prior.weights[1] = -1.5;
        // 40 labels, 75 % correct where feature 0 is off; feature 1 never fires in them.
        let mut items = Vec::new();
        for i in 0..20 {
            items.push(item(&[(0, 1.0)], i % 5 == 0));
            items.push(item(&[], i % 4 != 0));
        }
        let refs: Vec<&TrainingItem> = items.iter().collect();
        let anchored = fit_toward(&refs, 10.0, Some(&prior)).expect("fits");
        let from_zero = fit(&refs, 10.0).expect("fits");
        // Feature 1 is untouched by the labels: the anchored fit keeps the prior's weight.
        assert!(
            (anchored.weights[1] + 1.5).abs() < 1e-9,
            "{}",
            anchored.weights[1]
        );
        assert_eq!(from_zero.weights[1], 0.0);
        // Feature 0 stays near the prior; the intercept moves to the labels' base rate.
        assert!(anchored.weights[0] < -1.0, "{}", anchored.weights[0]);
        assert!(anchored.weights[0] < from_zero.weights[0]);
        let off = anchored.p(&items[1].features);
        assert!((off - 0.75).abs() < 0.1, "{off}");
        // Without a prior, fit_toward is fit.
        assert_eq!(fit_toward(&refs, 10.0, None), Ok(from_zero));
    }

    #[test]
    fn thresholds_cuts_and_calibration_are_what_they_say() {
        let p = [Some(0.1), Some(0.2), Some(0.3), Some(0.9), Some(0.8), None];
        let y = [false, true, false, true, true, true];
        // One correct item of three may be flagged at 34 %: below 0.8 flags only 0.2's.
        assert_eq!(threshold_for(&p, &y, &["a"; 6], 0.34), 0.8);
        assert_eq!(threshold_for(&p, &y, &["a"; 6], 0.0), 0.2);
        // Per group: the stricter group decides.
        let groups = ["a", "a", "a", "b", "b", "b"];
        assert_eq!(threshold_for(&p, &y, &groups, 0.5), 0.2);
        let scores = [0.1, 0.2, 0.3, 0.9, 0.8];
        let (k, cut) = kappa_at_target(&scores, &y[..5], 0.0).expect("both classes");
        // Flag 0.1 only (0.2 is correct and may not be flagged).
        assert_eq!(cut, 0.2);
        assert!(k > 0.0);
        let (k2, cut2) = kappa_at_target(&scores, &y[..5], 0.34).expect("both classes");
        assert_eq!(cut2, 0.8);
        assert!(k2 > k);
        let e = calibration_error(&[0.05, 0.95], &[false, true]).unwrap();
        assert!((e - 0.05).abs() < 1e-12);
        assert!((brier(&[0.0, 1.0], &[false, true]).unwrap()).abs() < 1e-12);
        let f = held_out_figures(&p, &y, 0.5, 0.1);
        assert_eq!((f.n, f.correct), (5, 3));
        assert_eq!(f.flag_rate, Some(1.0 / 3.0));
    }
}
