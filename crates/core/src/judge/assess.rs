//! The STEF judge seam: what a judge is asked about one event ([`JudgeRequest`]) and who
//! answers ([`Judge`]: the deterministic judge here, the LLM judge in the daemon).

use std::sync::Arc;

use async_trait::async_trait;

use super::structured::StructuredJudge;
use super::{JudgeAssessment, JudgeError, JudgeTotals};
use crate::event::Event;
use crate::stef::{Prepared, RuleProfile};

/// What a judge is asked about one event.
#[derive(Debug, Clone, Copy)]
pub struct JudgeRequest<'a> {
    /// The event (Qu, Qe, S, labels).
    pub event: &'a Event,
    /// SQL spec and the deterministic comparison record.
    pub prepared: &'a Prepared,
    /// The app's rule profile.
    pub profile: &'a RuleProfile,
}

/// Supplies question spec, enrichment status and semantic verdict for STEF.
#[async_trait]
pub trait Judge: Send + Sync {
    /// `deterministic` or `llm:<model>`.
    fn kind(&self) -> String;

    /// Assess one event.
    async fn assess(&self, request: JudgeRequest<'_>) -> Result<JudgeAssessment, JudgeError>;

    /// The assessment of one event if a cache already holds it (no LLM call, nothing spent);
    /// `None` on a miss, and for judges without caches.
    async fn assess_cached(&self, _request: JudgeRequest<'_>) -> Option<JudgeAssessment> {
        None
    }

    /// Get ready to assess `requests` soon: a judge with a remote cache may look all of them up
    /// in one request now, so that the assessments that follow send none of their own. Purely
    /// an optimisation — it changes no answer. Default: nothing.
    async fn prefetch(&self, _requests: &[JudgeRequest<'_>]) {}

    /// Running totals since the judge was built (all zero for judges without calls or caches).
    fn totals(&self) -> JudgeTotals {
        JudgeTotals::default()
    }

    /// Finish background work (queued durable-cache writes) before the process exits. Never
    /// fails: a judge logs what it could not finish.
    async fn flush(&self) {}

    /// The structured judge behind this judge, if any (the LLM client), so that other LLM
    /// metrics (FLEX, ROSE, Hybrid-EX) can share its cache, rate limits and concurrency.
    fn structured_judge(&self) -> Option<Arc<dyn StructuredJudge>> {
        None
    }

    /// Whether this judge is the deterministic judge itself (not a wrapper around it): its
    /// assessment is then the deterministic rules' on the prepared event, and the scorer finishes
    /// the event with them directly, without the asynchronous call and without copying the
    /// prepared question spec (the deterministic judge's `finish`).
    fn is_deterministic(&self) -> bool {
        false
    }
}
