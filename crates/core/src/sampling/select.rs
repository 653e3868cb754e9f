//! Selection of the events the LLM judge sees.
//!
//! - **Uniform slice**: an event is in it when [`uniform_draw`]`(salt, event_id) < uniform_rate`.
//!   The draw is a hash, not a random number, so a redelivered or replayed event and every
//!   replica make the same decision; its inclusion probability is exactly `uniform_rate`.
//! - **Priority slices**, for the rest of the budget, each switchable: the line-rate verdict is
//!   a flag (`p_correct` below the threshold); its confidence tier is `low`; its quality tier is `poor`; the event is among
//!   the first N of a new (app, agent, agent_version, model); an alert fires on its series.
//!
//! A selected event carries every reason that applies, ordered by [`SelectionReason::rank`]
//! (the most important first); its [`Selection::priority`] is the best rank, so that when offered
//! work exceeds the budget the least important work is shed first. The uniform slice ranks first:
//! it is what the calibrated estimate rests on.

use std::collections::HashMap;

use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::evaluation::{ConfidenceTier, EvaluationRow, QualityTier};

/// Why an event was selected for the LLM judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SelectionReason {
    /// Every event is judged (a benchmark backfill's census, `backfill --judge all`).
    Census,
    /// The uniform slice.
    Uniform,
    /// An alert currently fires on the event's series.
    Alerting,
    /// The line-rate verdict (`p_correct` below the correctness model's threshold) flags the
    /// query.
    NotCorrect,
    /// The line-rate quality tier is `poor`.
    PoorTier,
    /// The line-rate confidence tier is `low`.
    LowConfidence,
    /// One of the first events of a new (app, agent, agent_version, model).
    NewSeries,
}

impl SelectionReason {
    /// Every reason, in declaration order (`ALL[r as usize] == r`).
    pub const ALL: [SelectionReason; 7] = [
        SelectionReason::Census,
        SelectionReason::Uniform,
        SelectionReason::Alerting,
        SelectionReason::NotCorrect,
        SelectionReason::PoorTier,
        SelectionReason::LowConfidence,
        SelectionReason::NewSeries,
    ];

    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            SelectionReason::Census => "census",
            SelectionReason::Uniform => "uniform",
            SelectionReason::Alerting => "alerting",
            SelectionReason::NotCorrect => "not_correct",
            SelectionReason::PoorTier => "poor_tier",
            SelectionReason::LowConfidence => "low_confidence",
            SelectionReason::NewSeries => "new_series",
        }
    }

    /// Importance when work must be shed: lower is more important.
    pub fn rank(self) -> u8 {
        match self {
            SelectionReason::Census | SelectionReason::Uniform => 0,
            SelectionReason::Alerting => 1,
            SelectionReason::NotCorrect => 2,
            SelectionReason::PoorTier => 3,
            SelectionReason::LowConfidence => 4,
            SelectionReason::NewSeries => 5,
        }
    }
}

/// Why and how an event was selected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// Every reason that applies, most important first.
    pub reasons: Vec<SelectionReason>,
    /// In the uniform slice (or a census): the judged row enters the calibrated estimate.
    pub uniform: bool,
    /// Probability that the event was selected for the uniform slice (1 for a census). `None`
    /// for priority-only picks, which are chosen deterministically by their reasons and never
    /// enter the estimate.
    pub inclusion_probability: Option<f64>,
}

impl Selection {
    /// The most important reason's rank (lower is more important).
    pub fn priority(&self) -> u8 {
        self.reasons
            .iter()
            .map(|r| r.rank())
            .min()
            .unwrap_or(u8::MAX)
    }

    /// Every reason, comma-separated (`uniform,not_correct`).
    pub fn reasons_text(&self) -> String {
        self.reasons
            .iter()
            .map(|r| r.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A census selection (every event judged).
    pub fn census() -> Selection {
        Selection {
            reasons: vec![SelectionReason::Census],
            uniform: true,
            inclusion_probability: Some(1.0),
        }
    }
}

/// What the line-rate (deterministic) STEF row said about an event; the judged row revises it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineRate {
    /// Φ of the line-rate row.
    pub phi: f64,
    /// Its semantic verdict (`correct`, `likely_correct`, …).
    pub verdict: CompactString,
    /// Its quality tier.
    pub quality_tier: QualityTier,
    /// Its confidence tier.
    pub confidence_tier: ConfidenceTier,
    /// Its row status (`ok`, `parse_error`, …).
    pub status: CompactString,
    /// Its boolean verdict (`p_correct ≥` the correctness model's threshold); absent in work
    /// items written before it existed (then the four-point verdict decides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correct: Option<bool>,
    /// Its `p_correct`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_correct: Option<f64>,
}

impl LineRate {
    /// The line-rate view of a `stef` row (`None` for rows of other metrics).
    pub fn of(row: &EvaluationRow) -> Option<LineRate> {
        let stef = row.stef.as_ref()?;
        Some(LineRate {
            phi: row.value,
            verdict: stef.semantic_verdict.clone(),
            quality_tier: stef.quality_tier,
            confidence_tier: stef.confidence_tier,
            status: CompactString::const_new(row.status.as_str()),
            correct: row.verdict,
            p_correct: stef.p_correct,
        })
    }

    /// Whether the line-rate verdict calls the query correct: the row's boolean verdict, else
    /// (older work items) the four-point verdict being `correct` or `likely_correct`.
    pub fn correct(&self) -> bool {
        self.correct
            .unwrap_or_else(|| verdict_is_correct(&self.verdict))
    }
}

/// Whether a stored semantic verdict counts as correct (`correct` or `likely_correct`).
pub fn verdict_is_correct(verdict: &str) -> bool {
    crate::evaluation::four_point_counts_as_correct(verdict)
}

/// The selection policy (`[judge.budget]`).
#[derive(Debug, Clone, PartialEq)]
pub struct SelectionPolicy {
    /// Share of events in the uniform slice, in [0, 1].
    pub uniform_rate: f64,
    /// Salt of the uniform hash (change it to draw another slice).
    pub salt: String,
    /// Priority slice: the line-rate verdict flags the query (`p_correct` below the
    /// threshold).
    pub not_correct: bool,
    /// Priority slice: line-rate confidence tier `low`.
    pub low_confidence: bool,
    /// Priority slice: line-rate quality tier `poor`.
    pub poor_tier: bool,
    /// Priority slice: the first this-many events of a new series (0 = off).
    pub new_series: u64,
    /// Priority slice: events of a series an alert fires on.
    pub alerting: bool,
}

impl SelectionPolicy {
    /// Whether any priority slice is on.
    pub fn has_priority_slices(&self) -> bool {
        self.not_correct
            || self.low_confidence
            || self.poor_tier
            || self.new_series > 0
            || self.alerting
    }

    /// The selection of one event: `new_series` says whether it is among the first events of its
    /// series ([`SeriesFirstSeen`]), `alerting` whether an alert fires on its series. `None`: the
    /// LLM judge does not see the event.
    pub fn select(
        &self,
        event_id: &str,
        line: &LineRate,
        new_series: bool,
        alerting: bool,
    ) -> Option<Selection> {
        let uniform =
            self.uniform_rate > 0.0 && uniform_draw(&self.salt, event_id) < self.uniform_rate;
        let mut reasons = Vec::new();
        if uniform {
            reasons.push(SelectionReason::Uniform);
        }
        if self.alerting && alerting {
            reasons.push(SelectionReason::Alerting);
        }
        if self.not_correct && !line.correct() {
            reasons.push(SelectionReason::NotCorrect);
        }
        if self.poor_tier && line.quality_tier == QualityTier::Poor {
            reasons.push(SelectionReason::PoorTier);
        }
        if self.low_confidence && line.confidence_tier == ConfidenceTier::Low {
            reasons.push(SelectionReason::LowConfidence);
        }
        if self.new_series > 0 && new_series {
            reasons.push(SelectionReason::NewSeries);
        }
        (!reasons.is_empty()).then(|| Selection {
            reasons,
            uniform,
            inclusion_probability: uniform.then_some(self.uniform_rate),
        })
    }
}

/// The uniform draw of an event: the first 8 bytes of SHA-256(salt ‖ 0 ‖ event_id) as a fraction
/// in [0, 1). Deterministic across processes, releases and machines.
pub fn uniform_draw(salt: &str, event_id: &str) -> f64 {
    let mut hasher = Sha256::new();
    hasher.update(salt.as_bytes());
    hasher.update([0u8]);
    hasher.update(event_id.as_bytes());
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    // 53 bits: exactly representable, uniform in [0, 1).
    (u64::from_be_bytes(first) >> 11) as f64 / (1u64 << 53) as f64
}

/// Counts events per series to tell "one of the first N of a new series". Memory is bounded:
/// beyond `max_series` series, unseen series are no longer counted as new (and
/// [`SeriesFirstSeen::saturated`] says so).
#[derive(Debug, Clone, Default)]
pub struct SeriesFirstSeen {
    counts: HashMap<String, u64>,
    max_series: usize,
    saturated: u64,
}

impl SeriesFirstSeen {
    /// A tracker for at most `max_series` series.
    pub fn new(max_series: usize) -> SeriesFirstSeen {
        SeriesFirstSeen {
            counts: HashMap::new(),
            max_series,
            saturated: 0,
        }
    }

    /// Count one event of `series`; whether it is among its first `first` events.
    pub fn observe(&mut self, series: &str, first: u64) -> bool {
        if let Some(n) = self.counts.get_mut(series) {
            *n += 1;
            return *n <= first;
        }
        if self.counts.len() >= self.max_series {
            self.saturated += 1;
            return false;
        }
        self.counts.insert(series.to_string(), 1);
        first >= 1
    }

    /// Events of series the tracker could not count (memory bound reached).
    pub fn saturated(&self) -> u64 {
        self.saturated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_reason_at_its_index() {
        // An exhaustive match: a new reason does not compile until it is listed here and in ALL.
        let index = |r: SelectionReason| match r {
            SelectionReason::Census => 0,
            SelectionReason::Uniform => 1,
            SelectionReason::Alerting => 2,
            SelectionReason::NotCorrect => 3,
            SelectionReason::PoorTier => 4,
            SelectionReason::LowConfidence => 5,
            SelectionReason::NewSeries => 6,
        };
        for (i, r) in SelectionReason::ALL.into_iter().enumerate() {
            assert_eq!((index(r), r as usize), (i, i), "{r:?}");
        }
    }

    fn line(verdict: &str, tier: &str, confidence: &str) -> LineRate {
        LineRate {
            phi: 50.0,
            verdict: verdict.into(),
            quality_tier: tier.parse().expect("a tier's name"),
            confidence_tier: confidence.parse().expect("a confidence tier's name"),
            status: "ok".into(),
            correct: None,
            p_correct: None,
        }
    }

    #[test]
    fn the_uniform_draw_is_deterministic_and_uniform() {
        assert_eq!(uniform_draw("s", "e1"), uniform_draw("s", "e1"));
        assert_ne!(uniform_draw("s", "e1"), uniform_draw("t", "e1"));
        let n = 100_000;
        let hits = (0..n)
            .filter(|i| uniform_draw("salt", &format!("event-{i}")) < 0.1)
            .count();
        // 10% ± 5 standard deviations of a binomial(100k, 0.1) (σ ≈ 95).
        assert!((9_525..=10_475).contains(&hits), "{hits}");
        let draws: Vec<f64> = (0..1000)
            .map(|i| uniform_draw("", &i.to_string()))
            .collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
    }

    #[test]
    fn reasons_are_ordered_and_the_uniform_slice_carries_its_probability() {
        let policy = SelectionPolicy {
            uniform_rate: 1.0,
            salt: String::new(),
            not_correct: true,
            low_confidence: true,
            poor_tier: true,
            new_series: 10,
            alerting: true,
        };
        let s = policy
            .select("e", &line("incorrect", "poor", "low"), true, true)
            .unwrap();
        assert_eq!(
            s.reasons_text(),
            "uniform,alerting,not_correct,poor_tier,low_confidence,new_series"
        );
        assert_eq!(
            (s.uniform, s.inclusion_probability, s.priority()),
            (true, Some(1.0), 0)
        );
        let none = SelectionPolicy {
            uniform_rate: 0.0,
            ..policy.clone()
        };
        // The line-rate verdict decides the `not_correct` slice: a `likely_correct` event its
        // p_correct flags is taken, a `potentially_incorrect` one it passes is not; a work item
        // without the verdict (written before it) falls back to the four-point verdict.
        let flagged = LineRate {
            correct: Some(false),
            p_correct: Some(0.2),
            ..line("likely_correct", "good", "high")
        };
        let s = none.select("e", &flagged, false, false).unwrap();
        assert_eq!(
            (s.reasons_text(), s.uniform, s.inclusion_probability),
            ("not_correct".to_string(), false, None)
        );
        assert_eq!(s.priority(), 2);
        let passed = LineRate {
            correct: Some(true),
            p_correct: Some(0.7),
            ..line("potentially_incorrect", "good", "high")
        };
        assert!(none.select("e", &passed, false, false).is_none());
        assert!(
            none.select("e", &line("correct", "good", "high"), false, false)
                .is_none()
        );
        assert!(
            none.select("e", &line("incorrect", "good", "high"), false, false)
                .is_some()
        );
    }

    #[test]
    fn new_series_counts_the_first_events_within_a_memory_bound() {
        let mut seen = SeriesFirstSeen::new(2);
        assert!(seen.observe("a", 2));
        assert!(seen.observe("a", 2));
        assert!(!seen.observe("a", 2));
        assert!(seen.observe("b", 2));
        assert!(!seen.observe("c", 2), "beyond the bound nothing is new");
        assert_eq!(seen.saturated(), 1);
    }
}
