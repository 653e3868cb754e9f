//! The planner: decides, right after an event's line-rate row is scored, whether the LLM judge
//! should see it (the core's [`SelectionPolicy`]), with the state the policy needs — how many
//! events of each series were seen (new-series slice) and which series an alert fires on.
//!
//! Only events whose line-rate STEF row was scored normally (status `ok` or `judge_fallback`)
//! are offered: SQL that does not parse gets Φ = 0 whoever judges it, so asking an LLM would
//! spend budget to learn nothing.
//!
//! Priority work is admitted at most at `priority_offer_factor` × the judge's request rate (a
//! non-blocking GCRA check, one second of burst): at line rate the priority slices can select a
//! third of all traffic, far beyond any LLM quota, and queueing (or producing to the work topic)
//! work that can only be shed later costs CPU and broker bandwidth for nothing. What is over the
//! rate is shed here, counted (`priority_over_rate`). The uniform slice is never limited by the
//! planner: the calibrated estimates rest on it.
//!
//! The planner runs on every scored event, from every scoring thread, so its bookkeeping is kept
//! cheap: the series text is written into a per-thread buffer instead of a new string, the
//! selection and shed counters are atomics, and the new-series count — one lock for all
//! threads — is asked only about series this thread has not yet seen past their first events
//! (a series that is past them stays so: counts only grow, and a full tracker takes no new
//! series), which each thread remembers ([`OLD_SERIES_PER_THREAD`] at most).

use std::cell::RefCell;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use crate::alerts::FiringSeries;
use crate::alerts::config::SeriesLabel;
use crate::evaluation::{EvaluationRow, Metric, RowStatus};
use crate::event::Event;
use crate::llm::config::JudgeBudgetConfig;
use crate::sampling::{LineRate, Selection, SelectionPolicy, SeriesFirstSeen, ShedReason};

use super::work::JudgeWork;
use crate::score::thread_copies::{self, Stamp};
use crate::telemetry::stats::judge_pass::JudgeStats;

/// Series tracked at most by the new-series slice.
const MAX_TRACKED_SERIES: usize = 100_000;

/// Series past their first events each thread remembers (beyond them, it asks the tracker).
const OLD_SERIES_PER_THREAD: usize = 4_096;

/// A thread's series known to be past their first events (module docs).
type OldSeries = RefCell<rustc_hash::FxHashSet<String>>;

/// The value of label `label` on `row`.
pub fn label_value<'r>(row: &'r EvaluationRow, label: &str) -> Option<&'r str> {
    match label {
        "app_id" => row.app_id.as_deref(),
        "agent_id" => row.agent_id.as_deref(),
        "agent_version" => row.agent_version.as_deref(),
        "model" => row.model.as_deref(),
        "run_id" => row.run_id.as_deref(),
        _ => None,
    }
}

/// Write the series of a row under `series_key` into `out` (cleared first), as text
/// (`app_id=a agent_id=b …`; missing labels are left out). Used by the new-series slice and the
/// calibrated estimates, per event, so callers reuse one buffer instead of allocating.
pub fn write_series(row: &EvaluationRow, series_key: &[SeriesLabel], out: &mut String) {
    out.clear();
    for label in series_key {
        if let Some(value) = label_value(row, label.as_str()) {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(label.as_str());
            out.push('=');
            out.push_str(value);
        }
    }
}

thread_local! {
    /// The series text of the event being planned on this thread (see [`write_series`]).
    static SERIES: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// What the planner does with every event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanMode {
    /// The live policy: uniform slice plus priority slices, within the budget.
    Sample,
    /// Every scorable event is judged (a benchmark backfill by default).
    Census,
}

/// Decides which events go to the LLM judge.
pub struct Planner {
    mode: PlanMode,
    policy: SelectionPolicy,
    series_key: Vec<SeriesLabel>,
    seen: Mutex<SeriesFirstSeen>,
    /// Names this planner's set of old series in each thread ([`thread_copies`]).
    old_series: Stamp,
    firing: Arc<FiringSeries>,
    stats: Arc<JudgeStats>,
    /// Admission of priority work (module documentation); `None` = unlimited.
    priority_admission: Option<DefaultDirectRateLimiter>,
}

/// The GCRA limiter admitting priority work at `factor × requests_per_second` per second with one
/// second of burst; `None` when either is 0 (no limit).
fn priority_admission(factor: f64, requests_per_second: f64) -> Option<DefaultDirectRateLimiter> {
    let rate = factor * requests_per_second;
    if !(rate.is_finite() && rate > 0.0) {
        return None;
    }
    let period = Duration::try_from_secs_f64(1.0 / rate).ok()?;
    // One second of offers may come at once (a burst of selections after a quiet spell).
    let burst = NonZeroU32::new(rate.ceil().min(f64::from(u32::MAX)) as u32)?;
    Some(RateLimiter::direct(
        Quota::with_period(period)?.allow_burst(burst),
    ))
}

impl Planner {
    /// A planner for `[judge.budget]` in front of a judge allowed `requests_per_second`; series
    /// are keyed like the alerts (`series_key`).
    pub fn new(
        budget: &JudgeBudgetConfig,
        requests_per_second: f64,
        mode: PlanMode,
        series_key: Vec<SeriesLabel>,
        firing: Arc<FiringSeries>,
        stats: Arc<JudgeStats>,
    ) -> Planner {
        Planner {
            mode,
            policy: SelectionPolicy {
                uniform_rate: budget.uniform_rate,
                salt: budget.salt.clone(),
                not_correct: budget.priority_not_correct,
                low_confidence: budget.priority_low_confidence,
                poor_tier: budget.priority_poor_tier,
                new_series: budget.priority_new_series,
                alerting: budget.priority_alerting,
            },
            series_key,
            seen: Mutex::new(SeriesFirstSeen::new(MAX_TRACKED_SERIES)),
            old_series: Stamp::new(),
            firing,
            stats,
            priority_admission: match mode {
                PlanMode::Sample => {
                    priority_admission(budget.priority_offer_factor, requests_per_second)
                }
                PlanMode::Census => None,
            },
        }
    }

    /// Whether an event of `series` is among the series' first `new_series` events (counted in
    /// the shared tracker, unless this thread knows the series is past them).
    fn is_new_series(&self, series: &str) -> bool {
        let make = || Some(OldSeries::default());
        let known_old = thread_copies::read(&self.old_series, make, |old: &OldSeries| {
            old.borrow().contains(series)
        });
        if known_old == Some(true) {
            return false;
        }
        let new = self
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .observe(series, self.policy.new_series);
        if !new {
            thread_copies::read(&self.old_series, make, |old: &OldSeries| {
                let mut old = old.borrow_mut();
                if old.len() < OLD_SERIES_PER_THREAD {
                    old.insert(series.to_string());
                }
            });
        }
        new
    }

    /// The series key estimates and the new-series slice use.
    pub fn series_key(&self) -> &[SeriesLabel] {
        &self.series_key
    }

    /// The judge work for `event` given its rows (the line-rate `stef` row among them), or
    /// `None` when the LLM judge does not see it.
    pub fn plan(&self, event: &Event, rows: &[EvaluationRow], ts: &str) -> Option<JudgeWork> {
        let row = rows.iter().find(|r| r.metric == Metric::Stef)?;
        if !matches!(row.status, RowStatus::Ok | RowStatus::JudgeFallback) {
            return None;
        }
        let line = LineRate::of(row)?;
        let selection = match self.mode {
            PlanMode::Census => Selection::census(),
            PlanMode::Sample => {
                let new_series = self.policy.new_series > 0
                    && SERIES.with_borrow_mut(|series| {
                        write_series(row, &self.series_key, series);
                        self.is_new_series(series)
                    });
                let alerting = self.policy.alerting && self.firing.contains(row);
                self.policy
                    .select(&event.event_id, &line, new_series, alerting)?
            }
        };
        self.stats.selected(&selection);
        if !selection.uniform
            && let Some(admission) = &self.priority_admission
            && admission.check().is_err()
        {
            self.stats.shed(ShedReason::PriorityOverRate, 1);
            return None;
        }
        Some(JudgeWork::new(event.clone(), selection, line, ts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planner_with(new_series: u64) -> Planner {
        let budget = JudgeBudgetConfig {
            priority_new_series: new_series,
            ..JudgeBudgetConfig::default()
        };
        Planner::new(
            &budget,
            10.0,
            PlanMode::Sample,
            vec![SeriesLabel::AppId],
            Arc::new(FiringSeries::default()),
            Arc::new(JudgeStats::default()),
        )
    }

    #[test]
    fn a_series_first_events_are_new_once_across_threads() {
        let planner = planner_with(20);
        // Two threads, 500 events each of series `a` and of series `b`, interleaved.
        let counts: Vec<(usize, usize)> = std::thread::scope(|s| {
            let run = || {
                let (mut a, mut b) = (0, 0);
                for _ in 0..500 {
                    a += usize::from(planner.is_new_series("app_id=a"));
                    b += usize::from(planner.is_new_series("app_id=b"));
                }
                (a, b)
            };
            let handles = [s.spawn(run), s.spawn(run)];
            handles.map(|h| h.join().unwrap()).into()
        });
        let (a, b) = counts.iter().fold((0, 0), |(x, y), (a, b)| (x + a, y + b));
        assert_eq!((a, b), (20, 20), "{counts:?}");
        // Past its first events a series stays so, here and on a new thread; a new one is new.
        assert!(!planner.is_new_series("app_id=a"));
        let elsewhere = std::thread::scope(|s| {
            s.spawn(|| planner.is_new_series("app_id=b"))
                .join()
                .unwrap()
        });
        assert!(!elsewhere);
        assert!(planner.is_new_series("app_id=c"));
        // A second planner counts on its own.
        assert!(planner_with(1).is_new_series("app_id=a"));
    }

    #[test]
    fn without_the_new_series_slice_nothing_is_new() {
        let planner = planner_with(0);
        assert!(!planner.is_new_series("app_id=a"));
        assert!(!planner.is_new_series("app_id=a"));
    }
}
