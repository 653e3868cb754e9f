//! Two-sample statistics for the alert detectors: the Mann–Whitney U test (normal approximation
//! with tie correction and continuity correction) and the standard normal CDF.
//!
//! Mann–Whitney is used rather than a t-test because STEF Φ is bounded, discrete and far from
//! normal (a few spikes at the tier values), and gold metrics and rule indicators are 0/1, where
//! the tie-corrected U test is equivalent to the two-proportion χ² test.
//!
//! The ranks come from [`RankCounts`]: per distinct value, how many observations of each window
//! hold it, kept in value order and updated as observations enter and leave the windows — a
//! detector never sorts its windows (Φ and the metrics take few distinct values, the shares
//! two). The test walks the distinct values once, with the same arithmetic in the same order as
//! a sort of the pooled sample would give, so its p-values are the same to the bit.

use std::collections::BTreeMap;

/// Which way a shift has to go to count as a regression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The recent window is worse when its values are lower (scores).
    Decrease,
    /// The recent window is worse when its values are higher (shares of bad rows).
    Increase,
}

/// Result of comparing a recent window with a baseline window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    /// Mean of the baseline window.
    pub baseline_mean: f64,
    /// Mean of the recent window.
    pub recent_mean: f64,
    /// The shift in the regression direction (positive = worse): `baseline − recent` for
    /// [`Direction::Decrease`], `recent − baseline` for [`Direction::Increase`].
    pub effect: f64,
    /// One-sided p-value of the Mann–Whitney U test in the regression direction.
    pub p_value: f64,
}

/// Mean of a sample (0 for an empty sample).
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// Compare `recent` with `baseline`: effect in the regression direction and the one-sided
/// Mann–Whitney p-value. With an empty sample or no variance at all, the p-value is 1.
pub fn compare(baseline: &[f64], recent: &[f64], direction: Direction) -> Comparison {
    let baseline_mean = mean(baseline);
    let recent_mean = mean(recent);
    let effect = match direction {
        Direction::Decrease => baseline_mean - recent_mean,
        Direction::Increase => recent_mean - baseline_mean,
    };
    Comparison {
        baseline_mean,
        recent_mean,
        effect,
        p_value: mann_whitney_p(baseline, recent, direction),
    }
}

/// One-sided p-value that `recent` is stochastically smaller ([`Direction::Decrease`]) or larger
/// ([`Direction::Increase`]) than `baseline`.
pub fn mann_whitney_p(baseline: &[f64], recent: &[f64], direction: Direction) -> f64 {
    let mut counts = RankCounts::default();
    for &v in recent {
        counts.add(v, true);
    }
    for &v in baseline {
        counts.add(v, false);
    }
    counts.mann_whitney_p(direction)
}

/// Two windows' observations counted per distinct value, in value order (module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankCounts {
    /// The value's order key ([`order_key`]) → (in the recent window, in the baseline).
    groups: BTreeMap<u64, (u32, u32)>,
    recent: u64,
    baseline: u64,
}

/// A finite value's key in `f64::total_cmp` order, with −0 and +0 one value (as `==` has them).
fn order_key(value: f64) -> u64 {
    let value = if value == 0.0 { 0.0 } else { value };
    let bits = value.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

impl RankCounts {
    /// One observation enters the recent window (`recent`) or the baseline. NaN never reaches
    /// here (callers filter non-finite values).
    pub fn add(&mut self, value: f64, recent: bool) {
        let group = self.groups.entry(order_key(value)).or_default();
        if recent {
            group.0 += 1;
            self.recent += 1;
        } else {
            group.1 += 1;
            self.baseline += 1;
        }
    }

    /// One observation leaves the recent window (`recent`) or the baseline.
    pub fn remove(&mut self, value: f64, recent: bool) {
        let key = order_key(value);
        let Some(group) = self.groups.get_mut(&key) else {
            return;
        };
        let count = if recent { &mut group.0 } else { &mut group.1 };
        if *count == 0 {
            return;
        }
        *count -= 1;
        if recent {
            self.recent -= 1;
        } else {
            self.baseline -= 1;
        }
        if *group == (0, 0) {
            self.groups.remove(&key);
        }
    }

    /// The one-sided Mann–Whitney p-value of the recent window against the baseline (tie and
    /// continuity corrected; 1 for an empty window or no variance at all).
    pub fn mann_whitney_p(&self, direction: Direction) -> f64 {
        let (n1, n2) = (self.recent as usize, self.baseline as usize);
        if n1 == 0 || n2 == 0 {
            return 1.0;
        }
        let mut rank_sum_recent = 0.0;
        let mut tie_term = 0.0;
        let mut start = 0usize;
        for &(in_recent, in_baseline) in self.groups.values() {
            let end = start + in_recent as usize + in_baseline as usize;
            // Ranks start+1 ..= end share their mid-rank.
            let mid_rank = (start + 1 + end) as f64 / 2.0;
            let tied = (end - start) as f64;
            rank_sum_recent += mid_rank * in_recent as f64;
            tie_term += tied * tied * tied - tied;
            start = end;
        }
        p_from_ranks(rank_sum_recent, tie_term, n1, n2, direction)
    }
}

/// The one-sided p-value from the recent window's rank sum and the tie term (normal
/// approximation, tie and continuity corrected; 1 without variance).
fn p_from_ranks(
    rank_sum_recent: f64,
    tie_term: f64,
    n1: usize,
    n2: usize,
    direction: Direction,
) -> f64 {
    let (n1f, n2f, nf) = (n1 as f64, n2 as f64, (n1 + n2) as f64);
    let u = rank_sum_recent - n1f * (n1f + 1.0) / 2.0;
    let mean_u = n1f * n2f / 2.0;
    let variance = n1f * n2f / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
    if variance <= 0.0 || !variance.is_finite() {
        return 1.0;
    }
    let sd = variance.sqrt();
    match direction {
        Direction::Decrease => normal_cdf((u - mean_u + 0.5) / sd),
        Direction::Increase => 1.0 - normal_cdf((u - mean_u - 0.5) / sd),
    }
}

/// Standard normal cumulative distribution function.
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// Complementary error function (Numerical Recipes' Chebyshev fit, relative error < 1.2e-7
/// everywhere, so small tail probabilities stay accurate).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_cdf_matches_tables() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_cdf(1.96) - 0.975_002).abs() < 1e-5);
        assert!((normal_cdf(-3.090_232) - 0.001).abs() < 1e-6);
        // Relative accuracy deep in the tail.
        let p = normal_cdf(-6.0);
        assert!((p / 9.865_876e-10 - 1.0).abs() < 1e-5, "{p}");
    }

    #[test]
    fn mann_whitney_matches_scipy() {
        // By hand (as scipy's mannwhitneyu, alternative="less", asymptotic, continuity): the
        // recent ranks are 1, 2, 3, 4.5, 6 → U = 1.5; E[U] = 12.5; tie-corrected
        // Var = 25/12 · (11 − 6/90) = 22.78; z = (1.5 − 12.5 + 0.5)/4.773 = −2.200 → p = 0.0139.
        let recent = [1.0, 2.0, 3.0, 4.0, 5.0];
        let baseline = [4.0, 6.0, 7.0, 8.0, 9.0];
        let p = mann_whitney_p(&baseline, &recent, Direction::Decrease);
        assert!((p - 0.013_9).abs() < 2e-4, "{p}");
        let p_up = mann_whitney_p(&baseline, &recent, Direction::Increase);
        assert!(p_up > 0.95, "{p_up}");
    }

    /// The sort of the pooled sample the counts replace, kept as the reference.
    fn sorted_p(baseline: &[f64], recent: &[f64], direction: Direction) -> f64 {
        let (n1, n2) = (recent.len(), baseline.len());
        if n1 == 0 || n2 == 0 {
            return 1.0;
        }
        let mut all: Vec<(f64, bool)> = recent
            .iter()
            .map(|&v| (v, true))
            .chain(baseline.iter().map(|&v| (v, false)))
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        let total = all.len();
        let (mut rank_sum_recent, mut tie_term, mut start) = (0.0, 0.0, 0);
        while start < total {
            let value = all[start].0;
            let mut end = start;
            while end < total && all[end].0 == value {
                end += 1;
            }
            let mid_rank = (start + 1 + end) as f64 / 2.0;
            let tied = (end - start) as f64;
            let recent_in_group = all[start..end].iter().filter(|p| p.1).count();
            rank_sum_recent += mid_rank * recent_in_group as f64;
            tie_term += tied * tied * tied - tied;
            start = end;
        }
        p_from_ranks(rank_sum_recent, tie_term, n1, n2, direction)
    }

    /// Counts kept across sliding windows give the sort's p-value to the bit: Φ-like values
    /// (a grid with ties, negative and signed zeros), shares, and continuous values.
    #[test]
    fn rolling_counts_equal_the_sort_to_the_bit() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for kind in 0..3 {
            let draw = |rng: &mut rand::rngs::StdRng| -> f64 {
                match kind {
                    0 => [0.0, -0.0, 25.0, 50.0, 62.5, 87.5, 100.0, -3.0][rng.random_range(0..8)],
                    1 => f64::from(rng.random_bool(0.3)),
                    _ => rng.random_range(-1.0..1.0),
                }
            };
            let (recent_size, baseline_size) = (40, 120);
            let mut recent: std::collections::VecDeque<f64> = Default::default();
            let mut baseline: std::collections::VecDeque<f64> = Default::default();
            let mut counts = RankCounts::default();
            for step in 0..2000 {
                let v = draw(&mut rng);
                recent.push_back(v);
                counts.add(v, true);
                if recent.len() > recent_size
                    && let Some(old) = recent.pop_front()
                {
                    counts.remove(old, true);
                    baseline.push_back(old);
                    counts.add(old, false);
                    if baseline.len() > baseline_size
                        && let Some(gone) = baseline.pop_front()
                    {
                        counts.remove(gone, false);
                    }
                }
                if step % 7 == 0 {
                    let (b, r) = (
                        baseline.iter().copied().collect::<Vec<_>>(),
                        recent.iter().copied().collect::<Vec<_>>(),
                    );
                    for direction in [Direction::Decrease, Direction::Increase] {
                        assert_eq!(
                            counts.mann_whitney_p(direction).to_bits(),
                            sorted_p(&b, &r, direction).to_bits(),
                            "kind {kind}, step {step}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn identical_constant_samples_are_not_significant() {
        let zeros = [0.0; 50];
        assert_eq!(mann_whitney_p(&zeros, &zeros, Direction::Increase), 1.0);
        let c = compare(&zeros, &[], Direction::Decrease);
        assert_eq!(c.p_value, 1.0);
    }

    #[test]
    fn binary_shift_is_detected() {
        let baseline: Vec<f64> = (0..200).map(|i| f64::from(i % 10 == 0)).collect();
        let recent: Vec<f64> = (0..200).map(|i| f64::from(i % 2 == 0)).collect();
        let c = compare(&baseline, &recent, Direction::Increase);
        assert!((c.effect - 0.4).abs() < 1e-9);
        assert!(c.p_value < 1e-10, "{}", c.p_value);
    }
}
