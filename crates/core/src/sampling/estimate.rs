//! Calibrated estimates of what the LLM judge would say about all traffic, by prediction-powered
//! inference (PPI; Angelopoulos, Bates, Fannjiang, Jordan, Zrnic, Science 2023).
//!
//! For a series and a window, with `f` the line-rate value of an event (Φ, or 1 when its verdict
//! counts as correct) and `Y` the LLM judge's value for the same event:
//!
//! ```text
//! θ̂   = mean_N f  +  mean_n (Y − f)
//! se  = sqrt( var_N f / N  +  var_n (Y − f) / n )
//! 95% interval: θ̂ ± 1.96 · se
//! ```
//!
//! where the first mean runs over all N events and the second over the n events of the uniform
//! slice the LLM judged (a random sample, so the correction is unbiased whatever the line-rate
//! path gets wrong). Priority picks are not a random sample and never enter the correction. The
//! interval is wide when n is small, or when the line-rate path and the LLM disagree a lot
//! (large `var(Y − f)`); more uniform judging narrows it as `1/sqrt(n)`.

use std::collections::BTreeMap;

use serde::Serialize;

/// z of a two-sided 95% normal interval.
pub const Z_95: f64 = 1.959_963_984_540_054;

/// The Wilson score interval (95%) of a proportion: `successes` of `n`; `None` when `n = 0`.
/// Unlike the normal interval it stays inside [0, 1] and is honest for small `n` and for
/// proportions near 0 or 1.
pub fn wilson_interval(successes: u64, n: u64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let n_f = n as f64;
    let p = successes.min(n) as f64 / n_f;
    let z2 = Z_95 * Z_95;
    let centre = (p + z2 / (2.0 * n_f)) / (1.0 + z2 / n_f);
    let half = Z_95 * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt() / (1.0 + z2 / n_f);
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// Count, sum and sum of squares of a stream of values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Moments {
    /// Values seen.
    pub n: u64,
    /// Their sum.
    pub sum: f64,
    /// The sum of their squares.
    pub sum_sq: f64,
}

impl Moments {
    /// Add one value (non-finite values are ignored).
    pub fn add(&mut self, x: f64) {
        if x.is_finite() {
            self.n += 1;
            self.sum += x;
            self.sum_sq += x * x;
        }
    }

    /// Mean (`None` when empty).
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }

    /// Sample variance (n − 1 in the denominator; `None` below two values).
    pub fn variance(&self) -> Option<f64> {
        if self.n < 2 {
            return None;
        }
        let n = self.n as f64;
        let mean = self.sum / n;
        Some(((self.sum_sq - n * mean * mean) / (n - 1.0)).max(0.0))
    }

    /// Merge another stream's moments.
    pub fn merge(&mut self, other: &Moments) {
        self.n += other.n;
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
    }
}

/// A PPI estimate with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// θ̂: the estimated mean of the LLM judge over all events.
    pub mean: f64,
    /// Lower end of the 95% interval (`None` below two judged events).
    pub lower: Option<f64>,
    /// Upper end of the 95% interval.
    pub upper: Option<f64>,
    /// Events the line-rate mean runs over (N).
    pub events: u64,
    /// Uniform-slice events the LLM judged (n).
    pub judged: u64,
    /// The line-rate mean over all events.
    pub line_rate_mean: f64,
    /// The mean correction (LLM − line rate) on the uniform slice.
    pub correction: f64,
}

impl Estimate {
    /// PPI from the line-rate values of all events and the corrections on the uniform slice;
    /// `None` without events or without a judged event.
    pub fn ppi(all: &Moments, corrections: &Moments) -> Option<Estimate> {
        let line_rate_mean = all.mean()?;
        let correction = corrections.mean()?;
        let mean = line_rate_mean + correction;
        let se = match (all.variance().or(Some(0.0)), corrections.variance()) {
            (Some(var_f), Some(var_d)) => {
                Some((var_f / all.n as f64 + var_d / corrections.n as f64).sqrt())
            }
            _ => None,
        };
        Some(Estimate {
            mean,
            lower: se.map(|s| mean - Z_95 * s),
            upper: se.map(|s| mean + Z_95 * s),
            events: all.n,
            judged: corrections.n,
            line_rate_mean,
            correction,
        })
    }

    /// The estimate and its interval clipped to the range the quantity lives in (Φ in
    /// [0, 100], a share in [0, 1]); the normal interval can reach past it when n is small.
    pub fn clamped(self, lo: f64, hi: f64) -> Estimate {
        Estimate {
            mean: self.mean.clamp(lo, hi),
            lower: self.lower.map(|v| v.clamp(lo, hi)),
            upper: self.upper.map(|v| v.clamp(lo, hi)),
            ..self
        }
    }

    /// Half the interval's width.
    pub fn half_width(&self) -> Option<f64> {
        Some((self.upper? - self.lower?) / 2.0)
    }
}

/// The moments one series accumulates: line-rate Φ and the line-rate predictor of correctness
/// over every event, and the LLM-minus-line-rate corrections of both over the uniform slice.
///
/// The predictor of correctness is the line-rate row's `p_correct` (the correctness model's
/// probability that people call the query correct), or its verdict as 0/1 on rows without
/// one; PPI holds with any predictor, and a calibrated probability leaves less to correct than
/// a 0/1 verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SeriesEstimate {
    /// Line-rate Φ of every scored event.
    pub phi: Moments,
    /// Line-rate predictor of correctness (`p_correct`, else the verdict as 0/1) of every
    /// scored event.
    pub correct: Moments,
    /// Y − f for Φ on the judged uniform slice.
    pub phi_correction: Moments,
    /// Y − f for correctness on the judged uniform slice (Y: the judge's verdict as 0/1).
    pub correct_correction: Moments,
}

impl SeriesEstimate {
    /// One line-rate row: Φ and its predictor of correctness (`p_correct`, or the verdict as
    /// 0/1).
    pub fn observe_line(&mut self, phi: f64, line_p: f64) {
        self.phi.add(phi);
        self.correct.add(line_p);
    }

    /// One LLM-judged (or labelled) uniform-slice event: the judge's Φ and correctness, and the
    /// line-rate values they revise.
    pub fn observe_judged(&mut self, phi: f64, correct: bool, line_phi: f64, line_p: f64) {
        self.phi_correction.add(phi - line_phi);
        self.correct_correction
            .add(f64::from(u8::from(correct)) - line_p);
    }

    /// The share correct from the line rate alone: the mean predictor over every scored event
    /// (with the correctness model, its mean `p_correct`), no correction. Its interval is that
    /// of a mean over the events as a sample of the traffic (`var / N`): it narrows with
    /// volume and says nothing of the model's own bias, which people's labels or the LLM's
    /// uniform slice correct ([`SeriesEstimate::correct_share`]). What the estimate alerts
    /// compare when there is no LLM judge: a bias the windows share cancels in a drop.
    pub fn line_share(&self) -> Option<Estimate> {
        let mean = self.correct.mean()?;
        let se = self
            .correct
            .variance()
            .map(|v| (v / self.correct.n as f64).sqrt());
        Some(
            Estimate {
                mean,
                lower: se.map(|s| mean - Z_95 * s),
                upper: se.map(|s| mean + Z_95 * s),
                events: self.correct.n,
                judged: 0,
                line_rate_mean: mean,
                correction: 0.0,
            }
            .clamped(0.0, 1.0),
        )
    }

    /// The estimated mean Φ the LLM judge would give all events (clipped to [0, 100]).
    pub fn phi(&self) -> Option<Estimate> {
        Estimate::ppi(&self.phi, &self.phi_correction).map(|e| e.clamped(0.0, 100.0))
    }

    /// The estimated share of events the judge of the uniform slice (the LLM's verdict, or a
    /// person's label where one exists) would call correct, clipped to [0, 1].
    ///
    /// With 0/1 predictors both terms are means of 0/1 (or −1/0/1) values, and a sample in which every value is
    /// the same (every line-rate verdict correct, no disagreement among the judged) has
    /// variance 0: the normal interval would claim certainty it does not have (a near-perfect
    /// baseline would make any later disagreement look significant). So a zero variance is
    /// replaced by that of a proportion `1/(n + 2)` (Laplace's rule of succession: one unseen
    /// event of the other kind), which shrinks like `1/n`.
    pub fn correct_share(&self) -> Option<Estimate> {
        let floored = |m: &Moments| -> Moments {
            if m.n < 2 || m.variance().is_some_and(|v| v > 0.0) {
                return *m;
            }
            let q = 1.0 / (m.n as f64 + 2.0);
            let floor = q * (1.0 - q);
            // Moments whose mean is unchanged and whose sample variance is `floor`.
            let n = m.n as f64;
            Moments {
                sum_sq: m.sum_sq + floor * (n - 1.0),
                ..*m
            }
        };
        Estimate::ppi(&floored(&self.correct), &floored(&self.correct_correction))
            .map(|e| e.clamped(0.0, 1.0))
    }
}

/// Estimates per series (the alert `series_key` labels, joined as text).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EstimateTracker {
    /// Moments per series.
    pub series: BTreeMap<String, SeriesEstimate>,
}

impl EstimateTracker {
    /// One line-rate row of `series`: Φ and its predictor of correctness.
    pub fn observe_line(&mut self, series: &str, phi: f64, line_p: f64) {
        self.entry(series).observe_line(phi, line_p);
    }

    /// One judged uniform-slice event of `series`.
    pub fn observe_judged(
        &mut self,
        series: &str,
        phi: f64,
        correct: bool,
        line_phi: f64,
        line_p: f64,
    ) {
        self.entry(series)
            .observe_judged(phi, correct, line_phi, line_p);
    }

    fn entry(&mut self, series: &str) -> &mut SeriesEstimate {
        if !self.series.contains_key(series) {
            self.series
                .insert(series.to_string(), SeriesEstimate::default());
        }
        self.series
            .get_mut(series)
            .unwrap_or_else(|| unreachable!())
    }

    /// Every series merged into one.
    pub fn total(&self) -> SeriesEstimate {
        let mut total = SeriesEstimate::default();
        for s in self.series.values() {
            total.phi.merge(&s.phi);
            total.correct.merge(&s.correct);
            total.phi_correction.merge(&s.phi_correction);
            total.correct_correction.merge(&s.correct_correction);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_mean_and_variance() {
        let mut m = Moments::default();
        for x in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
            m.add(x);
        }
        assert_eq!(m.mean(), Some(5.0));
        assert!((m.variance().unwrap() - 32.0 / 7.0).abs() < 1e-12);
        m.add(f64::NAN);
        assert_eq!(m.n, 8);
        assert_eq!(Moments::default().mean(), None);
    }

    #[test]
    fn without_disagreement_the_estimate_is_the_line_rate_mean() {
        let mut s = SeriesEstimate::default();
        let flag = |b: bool| f64::from(u8::from(b));
        for i in 0..100 {
            s.observe_line(f64::from(i), flag(i % 2 == 0));
        }
        for i in 0..10 {
            s.observe_judged(f64::from(i), i % 2 == 0, f64::from(i), flag(i % 2 == 0));
        }
        let e = s.phi().unwrap();
        assert_eq!(e.mean, 49.5);
        assert_eq!(e.correction, 0.0);
        assert!(
            e.half_width().unwrap() > 0.0,
            "the line-rate mean has its own variance"
        );
        assert_eq!(s.correct_share().unwrap().mean, 0.5);
        assert!(SeriesEstimate::default().phi().is_none());
    }

    #[test]
    fn a_sample_without_variance_still_has_an_interval() {
        let mut s = SeriesEstimate::default();
        for _ in 0..100 {
            s.observe_line(80.0, 1.0);
        }
        for _ in 0..50 {
            s.observe_judged(80.0, true, 80.0, 1.0);
        }
        let e = s.correct_share().unwrap();
        assert_eq!(e.mean, 1.0);
        let lower = e.lower.unwrap();
        assert!(lower < 0.99 && lower > 0.95, "{lower}");
    }

    #[test]
    fn wilson_interval_matches_known_values() {
        // 8 of 10: (0.4902, 0.9433) — the textbook value.
        let (lo, hi) = wilson_interval(8, 10).unwrap();
        assert!(
            (lo - 0.4902).abs() < 1e-3 && (hi - 0.9433).abs() < 1e-3,
            "{lo} {hi}"
        );
        let (lo, hi) = wilson_interval(0, 20).unwrap();
        assert_eq!(lo, 0.0);
        assert!((hi - 0.1611).abs() < 1e-3, "{hi}");
        assert_eq!(wilson_interval(0, 0), None);
    }
}
