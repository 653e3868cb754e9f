//! Judge-call avoidance: where deterministic evidence already decides an LLM-judged metric, the
//! LLM is not called and the row records why. Avoided and made calls are counted per metric for
//! the run summary.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::Serialize;

use crate::evaluation::Metric;

/// Why a judge call was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Avoidance {
    /// The prediction is ESM+-equivalent to the gold: FLEX/ROSE "correct".
    EsmPlusEquivalent,
    /// ETM matches the prediction to the gold (rewritten trees equal): FLEX/ROSE "correct".
    EtmEquivalent,
    /// The prediction failed to execute: "incorrect" (score 0).
    PredictionFailed,
    /// Identical result tables with identical column names: Hybrid-EX 1.0.
    IdenticalResults,
}

impl Avoidance {
    /// The reason as stored in `details.avoided`.
    pub fn as_str(self) -> &'static str {
        match self {
            Avoidance::EsmPlusEquivalent => "esm_plus_equivalent",
            Avoidance::EtmEquivalent => "etm_equivalent",
            Avoidance::PredictionFailed => "prediction_failed",
            Avoidance::IdenticalResults => "identical_results",
        }
    }
}

/// Per-metric counts of LLM calls made, answered from cache, and avoided (by reason).
#[derive(Debug, Default)]
pub struct CallCounter {
    inner: Mutex<BTreeMap<Metric, MetricCalls>>,
}

/// Counts for one metric.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MetricCalls {
    /// Events scored.
    pub events: u64,
    /// LLM calls requested through the structured-call layer (cache hits included).
    pub llm_calls: u64,
    /// Of those, answered from a cache.
    pub cache_hits: u64,
    /// Calls avoided, by reason.
    pub avoided: BTreeMap<Avoidance, u64>,
}

impl MetricCalls {
    /// What was added since `before`, a snapshot of the same counter taken earlier.
    pub fn since(&self, before: &MetricCalls) -> MetricCalls {
        MetricCalls {
            events: self.events.saturating_sub(before.events),
            llm_calls: self.llm_calls.saturating_sub(before.llm_calls),
            cache_hits: self.cache_hits.saturating_sub(before.cache_hits),
            avoided: self
                .avoided
                .iter()
                .map(|(why, n)| {
                    (
                        *why,
                        n.saturating_sub(before.avoided.get(why).copied().unwrap_or(0)),
                    )
                })
                .filter(|(_, n)| *n > 0)
                .collect(),
        }
    }
}

impl CallCounter {
    fn with(&self, metric: Metric, f: impl FnOnce(&mut MetricCalls)) {
        if let Ok(mut map) = self.inner.lock() {
            f(map.entry(metric).or_default());
        }
    }

    /// One event scored for `metric`.
    pub fn event(&self, metric: Metric) {
        self.with(metric, |m| m.events += 1);
    }

    /// One LLM call made for `metric` (`cached`: answered from a cache).
    pub fn call(&self, metric: Metric, cached: bool) {
        self.with(metric, |m| {
            m.llm_calls += 1;
            if cached {
                m.cache_hits += 1;
            }
        });
    }

    /// One call avoided for `metric`.
    pub fn avoided(&self, metric: Metric, why: Avoidance) {
        self.with(metric, |m| *m.avoided.entry(why).or_insert(0) += 1);
    }

    /// A snapshot of all counts (for the run summary).
    pub fn snapshot(&self) -> BTreeMap<Metric, MetricCalls> {
        self.inner.lock().map(|m| m.clone()).unwrap_or_default()
    }
}
