//! Lock-free counters behind [`crate::judge::JudgeTotals`].

use std::sync::atomic::{AtomicU64, Ordering};

use crate::judge::{JudgeTotals, TokenUsage};

/// Counters shared by every call of one client.
#[derive(Debug, Default)]
pub struct CallStats {
    assessments: AtomicU64,
    cache_hits: AtomicU64,
    durable_hits: AtomicU64,
    llm_calls: AtomicU64,
    http_requests: AtomicU64,
    retries: AtomicU64,
    repairs: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    reasoning_tokens: AtomicU64,
    cut_off: AtomicU64,
    failures: AtomicU64,
}

/// Which counter to bump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// A structured call was requested.
    Assessment,
    /// Answered from a cache.
    CacheHit,
    /// Answered by the durable cache.
    DurableHit,
    /// An HTTP request was sent.
    HttpRequest,
    /// A transient failure is being retried.
    Retry,
    /// A repair retry is being made.
    Repair,
    /// A structured call failed.
    Failure,
}

impl CallStats {
    /// Add one to a counter.
    pub fn bump(&self, counter: Counter) {
        let c = match counter {
            Counter::Assessment => &self.assessments,
            Counter::CacheHit => &self.cache_hits,
            Counter::DurableHit => &self.durable_hits,
            Counter::HttpRequest => &self.http_requests,
            Counter::Retry => &self.retries,
            Counter::Repair => &self.repairs,
            Counter::Failure => &self.failures,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Record one completed LLM call: its tokens, the reasoning tokens among them (where the
    /// server reports them), and whether it was cut off at the token cap.
    pub fn completed(&self, usage: TokenUsage, reasoning_tokens: u64, cut_off: bool) {
        self.llm_calls.fetch_add(1, Ordering::Relaxed);
        self.reasoning_tokens
            .fetch_add(reasoning_tokens, Ordering::Relaxed);
        if cut_off {
            self.cut_off.fetch_add(1, Ordering::Relaxed);
        }
        self.prompt_tokens
            .fetch_add(usage.prompt_tokens, Ordering::Relaxed);
        self.completion_tokens
            .fetch_add(usage.completion_tokens, Ordering::Relaxed);
    }

    /// A consistent-enough snapshot (each counter read once).
    pub fn snapshot(&self) -> JudgeTotals {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        JudgeTotals {
            assessments: r(&self.assessments),
            cache_hits: r(&self.cache_hits),
            durable_hits: r(&self.durable_hits),
            llm_calls: r(&self.llm_calls),
            http_requests: r(&self.http_requests),
            retries: r(&self.retries),
            repairs: r(&self.repairs),
            prompt_tokens: r(&self.prompt_tokens),
            completion_tokens: r(&self.completion_tokens),
            reasoning_tokens: r(&self.reasoning_tokens),
            cut_off: r(&self.cut_off),
            failures: r(&self.failures),
        }
    }
}
