//! The composite score Φ, exactly as STEF §4 defines it.

use serde::{Deserialize, Serialize};

pub use crate::evaluation::{ConfidenceTier, QualityTier};

use super::{FilterStatus, Verdict};

/// σ_filters for a filter status: 5 / 4 / 3 / 0.
pub fn sigma_filters(status: FilterStatus) -> u8 {
    match status {
        FilterStatus::FullyApplied => 5,
        FilterStatus::FullyAppliedWithExtras => 4,
        FilterStatus::PartiallyApplied => 3,
        FilterStatus::NotApplied => 0,
    }
}

/// σ_verdict for a verdict: 5 / 3 / 2 / 0.
pub fn sigma_verdict(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Correct => 5,
        Verdict::LikelyCorrect => 3,
        Verdict::PotentiallyIncorrect => 2,
        Verdict::Incorrect => 0,
    }
}

impl ConfidenceTier {
    /// The multiplier Γ of the band.
    pub fn multiplier(self) -> f64 {
        match self {
            ConfidenceTier::High => 1.0,
            ConfidenceTier::Moderate => 0.8,
            ConfidenceTier::Low => 0.5,
        }
    }
}

/// Configurable tier thresholds (per app profile); defaults are the paper's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TierThresholds {
    /// Lower bound of `excellent`.
    pub excellent: f64,
    /// Lower bound of `good`.
    pub good: f64,
    /// Lower bound of `marginal`.
    pub marginal: f64,
    /// γ at or above which confidence is `high`.
    pub confidence_high: f64,
    /// γ at or above which confidence is `moderate`.
    pub confidence_moderate: f64,
}

impl Default for TierThresholds {
    fn default() -> Self {
        TierThresholds {
            excellent: 90.0,
            good: 75.0,
            marginal: 50.0,
            confidence_high: 0.85,
            confidence_moderate: 0.65,
        }
    }
}

impl TierThresholds {
    /// The quality tier of a score.
    pub fn quality_tier(&self, phi: f64) -> QualityTier {
        if phi >= self.excellent {
            QualityTier::Excellent
        } else if phi >= self.good {
            QualityTier::Good
        } else if phi >= self.marginal {
            QualityTier::Marginal
        } else {
            QualityTier::Poor
        }
    }

    /// The confidence tier of γ (NaN counts as low).
    pub fn confidence_tier(&self, gamma: f64) -> ConfidenceTier {
        if gamma >= self.confidence_high {
            ConfidenceTier::High
        } else if gamma >= self.confidence_moderate {
            ConfidenceTier::Moderate
        } else {
            ConfidenceTier::Low
        }
    }
}

/// Every component of the composite score, for the row and for drill-down.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Score {
    /// Φ ∈ [0, 100], rounded to 2 decimals.
    pub phi: f64,
    /// Base score B = σ_filters + σ_verdict + δ_lenient.
    pub base: u8,
    /// σ_filters.
    pub sigma_filters: u8,
    /// σ_verdict.
    pub sigma_verdict: u8,
    /// δ_lenient.
    pub leniency: u8,
    /// γ as used (clamped to [0, 1]).
    pub confidence: f64,
    /// Γ(γ).
    pub multiplier: f64,
    /// Confidence band.
    pub confidence_tier: ConfidenceTier,
    /// Quality tier of Φ.
    pub quality_tier: QualityTier,
}

/// Φ = round(B / 10 × 100 × Γ(γ), 2) with B = σ_filters + σ_verdict + δ_lenient (STEF eq. 11–14).
///
/// `extras_all_benign` is whether every extra filter matched `benign_filters`; δ_lenient is 1 only
/// when the status is `fully_applied_with_extras` and that holds.
pub fn compose(
    status: FilterStatus,
    verdict: Verdict,
    confidence: f64,
    extras_all_benign: bool,
    thresholds: &TierThresholds,
) -> Score {
    let gamma = if confidence.is_nan() {
        0.0
    } else {
        confidence.clamp(0.0, 1.0)
    };
    let sf = sigma_filters(status);
    let sv = sigma_verdict(verdict);
    let leniency = u8::from(status == FilterStatus::FullyAppliedWithExtras && extras_all_benign);
    let base = sf + sv + leniency;
    let tier = thresholds.confidence_tier(gamma);
    let multiplier = tier.multiplier();
    let phi = round2(f64::from(base) / 10.0 * 100.0 * multiplier);
    Score {
        phi,
        base,
        sigma_filters: sf,
        sigma_verdict: sv,
        leniency,
        confidence: gamma,
        multiplier,
        confidence_tier: tier,
        quality_tier: thresholds.quality_tier(phi),
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_tier_names_are_the_tiers_stored_names() {
        assert_eq!(
            super::QualityTier::ALL.map(super::QualityTier::as_str),
            super::QualityTier::NAMES
        );
    }
    use super::*;

    const STATUSES: [FilterStatus; 4] = [
        FilterStatus::FullyApplied,
        FilterStatus::FullyAppliedWithExtras,
        FilterStatus::PartiallyApplied,
        FilterStatus::NotApplied,
    ];
    const VERDICTS: [Verdict; 4] = [
        Verdict::Correct,
        Verdict::LikelyCorrect,
        Verdict::PotentiallyIncorrect,
        Verdict::Incorrect,
    ];

    #[test]
    fn worked_checks_from_stef_md() {
        let t = TierThresholds::default();
        let s = compose(FilterStatus::FullyApplied, Verdict::Correct, 0.9, false, &t);
        assert_eq!((s.base, s.phi), (10, 100.0));
        let s = compose(
            FilterStatus::FullyAppliedWithExtras,
            Verdict::Correct,
            0.9,
            true,
            &t,
        );
        assert_eq!((s.base, s.leniency, s.phi), (10, 1, 100.0));
        let s = compose(
            FilterStatus::NotApplied,
            Verdict::PotentiallyIncorrect,
            0.5,
            false,
            &t,
        );
        assert_eq!(s.phi, 10.0);
        let s = compose(
            FilterStatus::PartiallyApplied,
            Verdict::LikelyCorrect,
            0.7,
            false,
            &t,
        );
        assert_eq!(s.phi, 48.0);
    }

    /// Every σ/δ/Γ combination against the formula written out independently.
    #[test]
    fn every_combination() {
        let t = TierThresholds::default();
        let sf = [5.0, 4.0, 3.0, 0.0];
        let sv = [5.0, 3.0, 2.0, 0.0];
        for (i, status) in STATUSES.iter().enumerate() {
            for (j, verdict) in VERDICTS.iter().enumerate() {
                for benign in [false, true] {
                    for (gamma, mult) in [
                        (1.0, 1.0),
                        (0.85, 1.0),
                        (0.84, 0.8),
                        (0.65, 0.8),
                        (0.64, 0.5),
                        (0.0, 0.5),
                    ] {
                        let s = compose(*status, *verdict, gamma, benign, &t);
                        let delta = if benign && *status == FilterStatus::FullyAppliedWithExtras {
                            1.0
                        } else {
                            0.0
                        };
                        let want = ((sf[i] + sv[j] + delta) / 10.0 * 100.0 * mult * 100.0_f64)
                            .round()
                            / 100.0;
                        assert_eq!(
                            s.phi, want,
                            "{status:?} {verdict:?} benign={benign} γ={gamma}"
                        );
                        assert!(s.phi <= 100.0 && s.phi >= 0.0);
                        assert_eq!(s.multiplier, mult);
                    }
                }
            }
        }
    }

    #[test]
    fn tiers_and_bounds() {
        let t = TierThresholds::default();
        assert_eq!(t.quality_tier(100.0), QualityTier::Excellent);
        assert_eq!(t.quality_tier(90.0), QualityTier::Excellent);
        assert_eq!(t.quality_tier(89.99), QualityTier::Good);
        assert_eq!(t.quality_tier(75.0), QualityTier::Good);
        assert_eq!(t.quality_tier(74.99), QualityTier::Marginal);
        assert_eq!(t.quality_tier(50.0), QualityTier::Marginal);
        assert_eq!(t.quality_tier(49.99), QualityTier::Poor);
        // Out-of-range and NaN confidences are clamped, never produce Φ outside [0, 100].
        let s = compose(FilterStatus::FullyApplied, Verdict::Correct, 7.0, false, &t);
        assert_eq!(s.phi, 100.0);
        let s = compose(
            FilterStatus::FullyApplied,
            Verdict::Correct,
            f64::NAN,
            false,
            &t,
        );
        assert_eq!((s.confidence_tier, s.phi), (ConfidenceTier::Low, 50.0));
    }
}
