//! Estimate detectors: per series, the calibrated share correct from per-block moments — a
//! recent window against a frozen baseline, trailing the judge — and their notifications.

use std::collections::{BTreeMap, VecDeque};

use chrono::{DateTime, Utc};

use super::config::{RuleSet, SeriesLabel};
use super::stats::{Comparison, normal_cdf};
use crate::sampling::estimate::{Estimate, SeriesEstimate, Z_95};

use super::detector::{Hysteresis, Step, finish_note};
use super::notification::{
    AlertNotification, NoteParts, RuleKind, fingerprint_parts, interval_text, label_map,
    series_text,
};

/// Where the estimate alerts (`estimate_drop`, `estimate_low`) take the share correct from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EstimateSource {
    /// The line rate corrected by the LLM judge's uniform slice (prediction-powered
    /// inference): a run with an LLM-judged second pass. The windows trail the judge.
    #[default]
    Judge,
    /// The line rate alone: the mean `p_correct` of each window, with the interval of that mean
    /// (`var / N`). A run without an LLM judge. Both windows share the model's bias, so a drop
    /// between them is the traffic's; the floor of `estimate_low` is compared with the model's
    /// own estimate (people's labels rectify it on the review page and in `report`).
    LineRate,
}

/// One block of an [`EstimateDetector`]: the moments of its line-rate rows and of the
/// corrections of its judged uniform-slice events, and the event times its line-rate rows span.
#[derive(Debug, Clone, Default)]
pub(super) struct Block {
    pub(super) seq: u64,
    pub(super) estimate: SeriesEstimate,
    pub(super) first_ts: i64,
    pub(super) last_ts: i64,
}

/// Judged rows landing in blocks already evaluated, between two evaluations they trigger.
pub(super) const LATE_JUDGED_PER_EVALUATION: usize = 10;

/// Closed blocks kept beyond the two windows, for a judge that lags behind the line rate.
pub(super) const LAG_BLOCKS: usize = 100;

/// The calibrated share correct of one series, kept in blocks of line-rate rows (module docs).
///
/// The second pass writes a judged row after its event's line-rate row, possibly much later
/// (the judge's queue). So a judged row's correction goes to the block whose line-rate rows
/// span its event time, and the windows **trail the judge**: the recent window ends at the
/// *frontier*, the newest closed block that has received a correction, and the baseline window
/// is the blocks before it. Blocks past the frontier wait for their judgments. An evaluation
/// runs when the frontier moves and after every [`LATE_JUDGED_PER_EVALUATION`] corrections
/// that land behind it. While `estimate_drop` fires, its baseline is frozen.
#[derive(Debug, Clone)]
pub(super) struct EstimateDetector {
    pub(super) rules: RuleSet,
    /// The block being filled, and its line-rate rows so far.
    pub(super) block: Block,
    pub(super) block_rows: usize,
    /// Closed blocks, oldest first.
    pub(super) blocks: VecDeque<Block>,
    pub(super) next_seq: u64,
    pub(super) frontier: Option<u64>,
    pub(super) late_judged: usize,
    /// The baseline `estimate_drop` fired against, while it fires.
    pub(super) frozen_baseline: Option<SeriesEstimate>,
    pub(super) observations: u64,
    pub(super) low: Hysteresis,
    pub(super) drop: Hysteresis,
    /// Where the share correct comes from.
    pub(super) source: EstimateSource,
}

/// One evaluation of an [`EstimateDetector`]: the recent and (when full enough) baseline
/// estimates of the share correct, and the baseline's moments (frozen when `estimate_drop`
/// fires).
pub(super) struct EstimateEvaluation {
    pub(super) recent: Estimate,
    pub(super) baseline: Option<Estimate>,
    pub(super) baseline_moments: Option<SeriesEstimate>,
}

pub(super) fn merged<'b>(blocks: impl IntoIterator<Item = &'b Block>) -> SeriesEstimate {
    let mut total = SeriesEstimate::default();
    for b in blocks {
        total.correct.merge(&b.estimate.correct);
        total
            .correct_correction
            .merge(&b.estimate.correct_correction);
    }
    total
}

impl EstimateDetector {
    pub(super) fn new(rules: RuleSet, source: EstimateSource) -> EstimateDetector {
        EstimateDetector {
            rules,
            block: Block::default(),
            block_rows: 0,
            blocks: VecDeque::new(),
            next_seq: 0,
            frontier: None,
            late_judged: 0,
            frozen_baseline: None,
            observations: 0,
            low: Hysteresis::default(),
            drop: Hysteresis::default(),
            source,
        }
    }

    /// A judged uniform-slice row of an event at `ts`: its correction joins the block its event
    /// time falls in (the newest block that starts at or before it); an evaluation when the
    /// frontier moves, or when enough corrections landed behind it.
    pub(super) fn judged(
        &mut self,
        judged_correct: bool,
        line_p: f64,
        ts: i64,
    ) -> Option<EstimateEvaluation> {
        if self.block_rows > 0 && ts >= self.block.first_ts {
            self.block
                .estimate
                .observe_judged(0.0, judged_correct, 0.0, line_p);
            return None;
        }
        // Older than every block kept, or before any line-rate row: nothing to revise.
        let block = self.blocks.iter_mut().rev().find(|b| b.first_ts <= ts)?;
        block
            .estimate
            .observe_judged(0.0, judged_correct, 0.0, line_p);
        let seq = block.seq;
        if self.frontier.is_none_or(|f| seq > f) {
            self.frontier = Some(seq);
            self.late_judged = 0;
            return self.evaluate();
        }
        self.late_judged += 1;
        if self.late_judged < LATE_JUDGED_PER_EVALUATION {
            return None;
        }
        self.late_judged = 0;
        self.evaluate()
    }

    /// A line-rate row of an event at `ts`; when it closes a block that already has its
    /// judgments (a judge keeping up), an evaluation.
    pub(super) fn line(&mut self, line_p: f64, ts: i64) -> Option<EstimateEvaluation> {
        if self.block_rows == 0 {
            self.block.first_ts = ts;
            self.block.last_ts = ts;
        }
        self.block.first_ts = self.block.first_ts.min(ts);
        self.block.last_ts = self.block.last_ts.max(ts);
        self.block.estimate.observe_line(0.0, line_p);
        self.block_rows += 1;
        self.observations += 1;
        if self.block_rows < self.rules.estimate_block {
            return None;
        }
        let mut closed = std::mem::take(&mut self.block);
        closed.seq = self.next_seq;
        self.next_seq += 1;
        self.block_rows = 0;
        // From the line rate alone every closed block is complete; with a judge, a block is
        // evaluated once it has judgments (the windows trail the judge).
        let judged =
            self.source == EstimateSource::LineRate || closed.estimate.correct_correction.n > 0;
        let seq = closed.seq;
        self.blocks.push_back(closed);
        let keep =
            self.rules.estimate_recent_blocks + self.rules.estimate_baseline_blocks + LAG_BLOCKS;
        while self.blocks.len() > keep {
            self.blocks.pop_front();
        }
        if judged {
            self.frontier = Some(seq);
            self.late_judged = 0;
            return self.evaluate();
        }
        None
    }

    /// The recent window (ending at the frontier) and the baseline before it, each with at
    /// least `estimate_min_judged` judged events (from the judge), or at least two line-rate
    /// rows (from the line rate).
    pub(super) fn evaluate(&self) -> Option<EstimateEvaluation> {
        let frontier = self.frontier?;
        let first = self.blocks.front()?.seq;
        let end = usize::try_from(frontier.checked_sub(first)?).ok()? + 1;
        let recent_blocks = self.rules.estimate_recent_blocks;
        let start = end.checked_sub(recent_blocks)?;
        let min = self.rules.estimate_min_judged.max(2);
        let source = self.source;
        let estimate = |m: &SeriesEstimate| {
            match source {
                EstimateSource::Judge => (m.correct_correction.n >= min)
                    .then(|| m.correct_share())
                    .flatten(),
                EstimateSource::LineRate => m.line_share(),
            }
            .filter(|e| e.lower.is_some())
        };
        let recent = estimate(&merged(self.blocks.range(start..end)))?;
        let baseline_moments = match &self.frozen_baseline {
            Some(frozen) => Some(*frozen),
            None => start
                .checked_sub(self.rules.estimate_baseline_blocks)
                .map(|from| merged(self.blocks.range(from..start))),
        };
        let baseline = baseline_moments.as_ref().and_then(estimate);
        Some(EstimateEvaluation {
            recent,
            baseline,
            baseline_moments,
        })
    }
}

/// What an estimate rests on, for the alert's text.
fn basis_text(source: EstimateSource, e: &Estimate) -> String {
    match source {
        EstimateSource::Judge => format!("{} events, {} judged uniform", e.events, e.judged),
        EstimateSource::LineRate => {
            format!("line rate: mean p_correct over {} events", e.events)
        }
    }
}

/// Standard error of an estimate, from its 95% interval.
pub(super) fn standard_error(e: &Estimate) -> f64 {
    e.half_width().unwrap_or(0.0) / Z_95
}

/// The state changes of an estimate detector's evaluation (`estimate_low`, `estimate_drop`).
pub(super) fn estimate_notes(
    detector: &mut EstimateDetector,
    labels: &[(SeriesLabel, String)],
    eval: EstimateEvaluation,
    now: DateTime<Utc>,
    out: &mut Vec<AlertNotification>,
) {
    let rules = detector.rules.clone();
    let observations = detector.observations;
    let label_map = label_map(labels);
    let series = series_text(&label_map);
    let recent = eval.recent;
    let (lower, upper) = (
        recent.lower.unwrap_or(recent.mean),
        recent.upper.unwrap_or(recent.mean),
    );
    let se = standard_error(&recent);
    let source = detector.source;
    let samples = |e: &Estimate| {
        let n = match source {
            EstimateSource::Judge => e.judged,
            EstimateSource::LineRate => e.events,
        };
        usize::try_from(n).unwrap_or(usize::MAX)
    };
    let recent_samples = samples(&recent);
    let reading = Reading {
        label_map,
        series,
        recent,
        bounds: (lower, upper),
        se,
        recent_samples,
        observations,
        now,
    };
    if rules.estimate_floor > 0.0 {
        floor_note(detector, &rules, &reading, out);
    }
    if rules.estimate_drop {
        drop_note(detector, &rules, reading, eval, samples, out);
    }
}

/// What both estimate rules read of one evaluation.
struct Reading {
    label_map: BTreeMap<String, String>,
    series: String,
    recent: Estimate,
    /// The recent estimate's 95% interval (its mean where it has none).
    bounds: (f64, f64),
    /// Its standard error.
    se: f64,
    recent_samples: usize,
    observations: u64,
    now: DateTime<Utc>,
}

impl Reading {
    /// A note of `rule` on this reading: its comparison, the baseline's samples and interval
    /// (none for a floor), and the summary.
    fn note_parts(
        &self,
        rule: RuleKind,
        comparison: Comparison,
        (baseline_samples, baseline_interval): (usize, Option<(f64, f64)>),
        summary: String,
    ) -> NoteParts {
        NoteParts {
            rule,
            metric: "estimated_correct_share".into(),
            labels: self.label_map.clone(),
            fingerprint: fingerprint_parts(rule, "estimated_correct_share", &self.label_map),
            comparison,
            recent_samples: self.recent_samples,
            baseline_samples,
            observations: self.observations,
            observed_interval: Some(self.bounds),
            baseline_interval,
            summary,
        }
    }
}

/// `estimate_low`: the recent estimate's interval lies under the floor.
fn floor_note(
    detector: &mut EstimateDetector,
    rules: &RuleSet,
    reading: &Reading,
    out: &mut Vec<AlertNotification>,
) {
    let (recent, (_, upper), se) = (&reading.recent, reading.bounds, reading.se);
    let floor = rules.estimate_floor;
    let breach = upper < floor;
    let calm = recent.mean >= floor;
    if let Some(step) = detector.low.step(breach, calm, rules) {
        let p_value = if se > 0.0 {
            1.0 - normal_cdf((floor - recent.mean) / se)
        } else {
            f64::from(u8::from(recent.mean >= floor))
        };
        let summary = format!(
            "estimated share correct for {}: {:.3}{} (floor {floor:.3}; {})",
            reading.series,
            recent.mean,
            interval_text(Some(reading.bounds)),
            basis_text(detector.source, recent),
        );
        let comparison = Comparison {
            baseline_mean: floor,
            recent_mean: recent.mean,
            effect: floor - recent.mean,
            p_value,
        };
        let parts = reading.note_parts(RuleKind::EstimateLow, comparison, (0, None), summary);
        out.push(finish_note(
            &mut detector.low,
            step,
            parts,
            &rules.severity,
            reading.now,
        ));
    }
}

/// `estimate_drop`: the recent estimate's interval lies under the baseline's.
fn drop_note(
    detector: &mut EstimateDetector,
    rules: &RuleSet,
    reading: Reading,
    eval: EstimateEvaluation,
    samples: impl Fn(&Estimate) -> usize,
    out: &mut Vec<AlertNotification>,
) {
    let (recent, (_, upper), se) = (&reading.recent, reading.bounds, reading.se);
    let Some(base) = &eval.baseline else {
        return;
    };
    let (b_lo, b_hi) = (
        base.lower.unwrap_or(base.mean),
        base.upper.unwrap_or(base.mean),
    );
    let se_both = (se.powi(2) + standard_error(base).powi(2)).sqrt();
    let p_value = if se_both > 0.0 {
        1.0 - normal_cdf((base.mean - recent.mean) / se_both)
    } else {
        1.0
    };
    let comparison = Comparison {
        baseline_mean: base.mean,
        recent_mean: recent.mean,
        effect: base.mean - recent.mean,
        p_value,
    };
    let (baseline_interval, baseline_samples) = (Some((b_lo, b_hi)), samples(base));
    let (breach, calm) = (upper < b_lo, recent.mean >= b_lo);
    if let Some(step) = detector.drop.step(breach, calm, rules) {
        detector.frozen_baseline = match step {
            Step::Fire => eval.baseline_moments,
            Step::Resolve(_) => None,
        };
        let basis = match detector.source {
            EstimateSource::Judge => format!("{} judged uniform recently", recent.judged),
            EstimateSource::LineRate => format!(
                "line rate: mean p_correct over {} events recently",
                recent.events
            ),
        };
        let summary = format!(
            "estimated share correct dropped for {}: baseline {:.3}{} → recent {:.3}{} ({basis}, {baseline_samples} before)",
            reading.series,
            comparison.baseline_mean,
            interval_text(baseline_interval),
            recent.mean,
            interval_text(Some(reading.bounds)),
        );
        let parts = reading.note_parts(
            RuleKind::EstimateDrop,
            comparison,
            (baseline_samples, baseline_interval),
            summary,
        );
        out.push(finish_note(
            &mut detector.drop,
            step,
            parts,
            &rules.severity,
            reading.now,
        ));
    }
}
