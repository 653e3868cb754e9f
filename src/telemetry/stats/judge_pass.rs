//! Counters of the second pass, shared by the planner, the work queue and the judge stage, and
//! read by the summary and telemetry: selected (by reason), judged, cache hits, failures, shed
//! (by reason), the queue's depth and oldest wait, and the budget ledger.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::evaluation::{EvaluationRow, Metric, RowStatus};
use crate::sampling::select::verdict_is_correct;
use crate::sampling::{
    BudgetLedger, EstimateTracker, Selection, SelectionReason, ShedReason, Spend,
};

/// Live counters (cheap to update from any task: the per-reason counts are atomics indexed by
/// the reason, so the planner's per-event bookkeeping takes no lock).
#[derive(Default)]
pub struct JudgeStats {
    selected: [AtomicU64; SelectionReason::ALL.len()],
    selected_events: AtomicU64,
    selected_uniform: AtomicU64,
    judged: AtomicU64,
    cache_hits: AtomicU64,
    failures: AtomicU64,
    put_back: AtomicU64,
    paused: AtomicU64,
    shed: [AtomicU64; ShedReason::ALL.len()],
    left_in_topic: AtomicU64,
    queue_depth: AtomicI64,
    oldest_wait_probe: Mutex<Option<OldestWaitProbe>>,
    ledger: Mutex<Option<BudgetLedger>>,
    estimates: Mutex<EstimateTracker>,
}

/// The counts of `keys` (indexed alike) that are not zero, as a map.
fn nonzero_counts<K: Copy + Ord>(keys: &[K], counts: &[AtomicU64]) -> BTreeMap<K, u64> {
    keys.iter()
        .zip(counts)
        .map(|(key, count)| (*key, count.load(Ordering::Relaxed)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Reads the oldest wait of the judge stage's queue (registered by the queue).
type OldestWaitProbe = Box<dyn Fn() -> i64 + Send + Sync>;

impl std::fmt::Debug for JudgeStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JudgeStats")
            .field("snapshot", &self.snapshot())
            .finish()
    }
}

/// A snapshot of [`JudgeStats`] (plain data, for the summary).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JudgeStatsSnapshot {
    /// Events selected for the LLM judge.
    pub selected: u64,
    /// Of those, in the uniform slice (or a census).
    pub selected_uniform: u64,
    /// Selections per reason (an event with several reasons counts under each).
    pub reasons: BTreeMap<SelectionReason, u64>,
    /// Judged rows written by the judge stage (cache hits included).
    pub judged: u64,
    /// Of those, answered from a cache (no LLM call, no budget).
    pub cache_hits: u64,
    /// Judgments that failed (rows with status `judge_error`).
    pub failures: u64,
    /// Judgments put back in the queue because the judge was unreachable (transport errors,
    /// timeouts, 429/5xx after the client's retries): waiting for it, not failed.
    pub put_back: u64,
    /// Times the judge was paused (its circuit opened after repeated outage errors).
    pub paused: u64,
    /// Selected events not judged, by reason.
    pub shed: BTreeMap<ShedReason, u64>,
    /// Kafka: work not judged when the run stopped, left in the work topic for the next start.
    pub left_in_topic: u64,
    /// Work waiting in the queue now.
    pub queue_depth: i64,
    /// How long the oldest waiting work has waited, in milliseconds.
    pub oldest_wait_ms: i64,
    /// Spent since the stage started.
    pub spent: Spend,
    /// Spent today (UTC).
    pub spent_today: Spend,
    /// Left today under each daily cap (requests, tokens, cost); `None` where no cap is set.
    pub left_today: (Option<u64>, Option<u64>, Option<f64>),
}

impl JudgeStatsSnapshot {
    /// Shed work in all.
    pub fn shed_total(&self) -> u64 {
        self.shed.values().sum()
    }
}

impl JudgeStats {
    /// One event selected.
    pub fn selected(&self, selection: &Selection) {
        self.selected_events.fetch_add(1, Ordering::Relaxed);
        if selection.uniform {
            self.selected_uniform.fetch_add(1, Ordering::Relaxed);
        }
        for reason in &selection.reasons {
            self.selected[*reason as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One judged row written (answered from a cache or not).
    pub fn judged(&self, cached: bool) {
        self.judged.fetch_add(1, Ordering::Relaxed);
        if cached {
            self.cache_hits.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One judgment failed (its row says `judge_error`).
    pub fn failed(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    /// One judgment put back in the queue: the judge was unreachable.
    pub fn put_back(&self) {
        self.put_back.fetch_add(1, Ordering::Relaxed);
    }

    /// The judge was paused (its circuit opened).
    pub fn paused(&self) {
        self.paused.fetch_add(1, Ordering::Relaxed);
    }

    /// `n` selected events shed for `reason`.
    pub fn shed(&self, reason: ShedReason, n: u64) {
        self.shed[reason as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// `n` pieces of work left unjudged in the Kafka work topic at shutdown.
    pub fn left_in_topic(&self, n: u64) {
        self.left_in_topic.fetch_add(n, Ordering::Relaxed);
    }

    /// The queue's current depth.
    pub fn queue_depth(&self, depth: usize) {
        self.queue_depth
            .store(i64::try_from(depth).unwrap_or(i64::MAX), Ordering::Relaxed);
    }

    /// Register how to read the queue's oldest wait (a scan, done only for reports).
    pub fn set_oldest_wait_probe(&self, probe: OldestWaitProbe) {
        *self
            .oldest_wait_probe
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(probe);
    }

    /// Publish the ledger's state.
    pub fn ledger(&self, ledger: &BudgetLedger) {
        *self.ledger.lock().unwrap_or_else(|p| p.into_inner()) = Some(ledger.clone());
    }

    /// Feed the calibrated estimates: a line-rate `stef` row (every scored event) or a
    /// `stef_judged` row of the uniform slice, for `series`. Other rows, priority-only picks and
    /// failed judgments are ignored.
    pub fn observe_estimate(&self, row: &EvaluationRow, series: &str) {
        let scored = matches!(row.status, RowStatus::Ok | RowStatus::JudgeFallback);
        match row.metric {
            Metric::Stef if scored => {
                self.estimates
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .observe_line(series, row.value, row.line_rate_p());
            }
            Metric::StefJudged if row.status == RowStatus::Ok => {
                let (Some(judged), Some(stef)) = (&row.judged, &row.stef) else {
                    return;
                };
                if !judged.uniform() {
                    return;
                }
                self.estimates
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .observe_judged(
                        series,
                        row.value,
                        verdict_is_correct(&stef.semantic_verdict),
                        judged.revised_value,
                        judged.line_p(),
                    );
            }
            _ => {}
        }
    }

    /// The calibrated estimates so far.
    pub fn estimates(&self) -> EstimateTracker {
        self.estimates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Everything, now.
    pub fn snapshot(&self) -> JudgeStatsSnapshot {
        let ledger = self
            .ledger
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_default();
        JudgeStatsSnapshot {
            selected: self.selected_events.load(Ordering::Relaxed),
            selected_uniform: self.selected_uniform.load(Ordering::Relaxed),
            reasons: nonzero_counts(&SelectionReason::ALL, &self.selected),
            judged: self.judged.load(Ordering::Relaxed),
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            put_back: self.put_back.load(Ordering::Relaxed),
            paused: self.paused.load(Ordering::Relaxed),
            shed: nonzero_counts(&ShedReason::ALL, &self.shed),
            left_in_topic: self.left_in_topic.load(Ordering::Relaxed),
            queue_depth: self.queue_depth.load(Ordering::Relaxed),
            oldest_wait_ms: self
                .oldest_wait_probe
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .map_or(0, |probe| probe()),
            spent: ledger.total(),
            spent_today: ledger.today(),
            left_today: ledger.left_today(),
        }
    }
}
