//! Paired significance tests for two variants scored on the same items (a benchmark backfill of
//! two systems, an A/B of agent versions over the same events): how sure a difference is.
//!
//! - **Verdicts** (EX, ESM, FLEX, …): McNemar's exact test. Only discordant pairs carry
//!   information: `b` items right for A only, `c` for B only; under "no difference" each
//!   discordant item is a fair coin, so the two-sided p-value is
//!   `min(1, 2 · P(Binomial(b + c, ½) ≤ min(b, c)))`.
//! - **Continuous values** (STEF Φ, Hybrid-EX): the Wilcoxon signed-rank test on the paired
//!   differences — zero differences dropped, tied magnitudes given their average rank — with the
//!   normal approximation (tie-corrected variance, continuity correction), two-sided.
//!
//! Both are pure functions of the pairs; the report feeds them the scored rows of each variant
//! joined by `event_id`.

use serde::Serialize;

use crate::alerts::stats::normal_cdf;

/// The outcome of a paired test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PairedTest {
    /// `mcnemar_exact` or `wilcoxon_signed_rank`.
    pub test: &'static str,
    /// Pairs compared (items scored in both variants).
    pub pairs: usize,
    /// McNemar: items right for A only; Wilcoxon: pairs with A > B.
    pub a_better: usize,
    /// McNemar: items right for B only; Wilcoxon: pairs with B > A.
    pub b_better: usize,
    /// Two-sided p-value.
    pub p_value: f64,
}

/// McNemar's exact test over paired verdicts `(a, b)`.
pub fn mcnemar(pairs: &[(bool, bool)]) -> PairedTest {
    let a_only = pairs.iter().filter(|(a, b)| *a && !*b).count();
    let b_only = pairs.iter().filter(|(a, b)| !*a && *b).count();
    let n = a_only + b_only;
    let k = a_only.min(b_only);
    // P(X ≤ k) for X ~ Binomial(n, ½), summed in log space (n can be thousands).
    let ln_half_n = n as f64 * std::f64::consts::LN_2;
    let mut ln_choose = 0.0_f64; // ln C(n, 0)
    let mut tail = 0.0_f64;
    for i in 0..=k {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        tail += (ln_choose - ln_half_n).exp();
    }
    PairedTest {
        test: "mcnemar_exact",
        pairs: pairs.len(),
        a_better: a_only,
        b_better: b_only,
        p_value: (2.0 * tail).min(1.0),
    }
}

/// The Wilcoxon signed-rank test over paired values `(a, b)`.
pub fn wilcoxon(pairs: &[(f64, f64)]) -> PairedTest {
    let mut diffs: Vec<f64> = pairs
        .iter()
        .map(|(a, b)| a - b)
        .filter(|d| d.is_finite() && *d != 0.0)
        .collect();
    diffs.sort_by(|x, y| x.abs().total_cmp(&y.abs()));
    let n = diffs.len();
    // Average ranks over ties of |d|; the tie correction Σ (t³ − t) / 48.
    let mut w_plus = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && diffs[j + 1].abs() == diffs[i].abs() {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        tie_term += (t * t * t - t) / 48.0;
        for d in &diffs[i..=j] {
            if *d > 0.0 {
                w_plus += rank;
            }
        }
        i = j + 1;
    }
    let nf = n as f64;
    let mean = nf * (nf + 1.0) / 4.0;
    let var = nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0 - tie_term;
    let p_value = if n == 0 || var <= 0.0 {
        1.0
    } else {
        let z = ((w_plus - mean).abs() - 0.5).max(0.0) / var.sqrt();
        (2.0 * (1.0 - normal_cdf(z))).min(1.0)
    };
    PairedTest {
        test: "wilcoxon_signed_rank",
        pairs: pairs.len(),
        a_better: diffs.iter().filter(|d| **d > 0.0).count(),
        b_better: diffs.iter().filter(|d| **d < 0.0).count(),
        p_value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcnemar_exact_matches_the_binomial_tail() {
        // b = 10, c = 2: p = 2 · (C(12,0) + C(12,1) + C(12,2)) / 2^12 = 2 · 79 / 4096.
        let mut pairs = vec![(true, false); 10];
        pairs.extend(vec![(false, true); 2]);
        pairs.extend(vec![(true, true); 30]);
        pairs.extend(vec![(false, false); 8]);
        let t = mcnemar(&pairs);
        assert_eq!((t.pairs, t.a_better, t.b_better), (50, 10, 2));
        assert!(
            (t.p_value - 2.0 * 79.0 / 4096.0).abs() < 1e-12,
            "{}",
            t.p_value
        );
        // No discordant pair: no evidence of a difference.
        assert_eq!(mcnemar(&[(true, true), (false, false)]).p_value, 1.0);
        // Large n stays finite: 1,000 vs 900 discordant items.
        let mut big = vec![(true, false); 1000];
        big.extend(vec![(false, true); 900]);
        let p = mcnemar(&big).p_value;
        assert!(p > 0.01 && p < 0.05, "{p}");
    }

    #[test]
    fn wilcoxon_matches_a_worked_example() {
        // Differences 1..=10 all positive: W+ = 55, mean 27.5, var 96.25; z = 27/9.811 = 2.752,
        // two-sided p = 0.00592.
        let pairs: Vec<(f64, f64)> = (1..=10).map(|d| (f64::from(d) + 5.0, 5.0)).collect();
        let t = wilcoxon(&pairs);
        assert_eq!((t.a_better, t.b_better), (10, 0));
        assert!((t.p_value - 0.00592).abs() < 2e-4, "{}", t.p_value);
        // Symmetric differences: no evidence. Zeros are dropped.
        let sym = [(1.0, 2.0), (2.0, 1.0), (3.0, 3.0), (5.0, 7.0), (7.0, 5.0)];
        assert!((wilcoxon(&sym).p_value - 1.0).abs() < 1e-6);
        assert_eq!(wilcoxon(&[]).p_value, 1.0);
    }
}
