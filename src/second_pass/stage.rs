//! The judge stage: takes work from the [`WorkQueue`] (most important first) and writes one
//! `stef_judged` row per judged event, `judge.max_concurrency` judgments in flight.
//!
//! For each piece of work, in order:
//!
//! 1. work older than `max_wait_ms` is shed (`stale`): a verdict that arrives too late to matter
//!    is not worth its budget;
//! 2. a verdict already in the judge's caches (in-memory or durable) is used at once — it costs
//!    no budget and is never shed;
//! 3. otherwise one request is reserved against the daily caps (a cap reached sheds the work:
//!    `daily_requests`, `daily_tokens`, `daily_cost`), the LLM is asked (paced by the client's
//!    rate and token limits), and the real token usage is settled;
//! 4. the row goes to the batcher with the work's acknowledgement, so a Kafka work offset is
//!    committed only after the judged row is written.
//!
//! Live, a judge that cannot be reached pauses the stage instead of failing the work
//! ([`super::breaker`]): the judgment goes back in the queue (its age kept, so `max_wait_ms`
//! still applies) and the circuit opens after a few such failures; `judge_error` rows are left
//! for failures of the judgment itself. A census (a backfill judging every event) keeps failing
//! fast: its rows say `judge_error` and the batch ends, rather than waiting out `max_wait_ms`
//! for a judge that may be misconfigured.
//!
//! Work is taken from the queue up to [`BATCH`] pieces at a time, as permits allow: the batch is
//! prepared (parsed and checked as on the line-rate pass) and the judge is asked to prefetch it
//! ([`Judge::prefetch`]: the LLM judge looks every key up in the durable cache in one query
//! instead of one query per judgment), then its judgments start one per free permit, most
//! important first. At ~50 judgments/s a batch waits at most about half a second for permits.
//! The judgments wait for the prefetch at most `PREFETCH_WAIT` (100 ms); past it, each looks its
//! verdict up on its own, so a slow durable cache costs the stage at most that pause per batch.
//!
//! Shutdown: when the queue is closed (the line-rate pass is done, or the daemon stops), the
//! stage keeps judging for at most `drain_grace` (`None`: until the queue is empty — a census);
//! then what still waits is shed (`shutdown`) — or, for the Kafka work topic, left uncommitted
//! for the next start — and counted.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::JoinSet;

use crate::evaluation::{EvaluationRow, JudgedColumns};
use crate::judge::{Judge, JudgeError, JudgeRequest};
use crate::sampling::{BudgetLedger, ShedReason};
use crate::score::Scorer;
use crate::sources::AckToken;
use crate::sqlspec::SpecError;
use crate::stef::{Prepared, RuleProfile};

use super::breaker::{Breaker, ProbeClaim, is_outage};
use super::work::{Queued, WorkQueue};
use crate::telemetry::stats::judge_pass::JudgeStats;

/// Work taken from the queue at most this many pieces at a time (module documentation).
pub const BATCH: usize = 32;

/// How long a batch's judgments wait for its prefetch at most (module documentation). A healthy
/// ClickHouse answers a 32-key lookup in a few milliseconds.
const PREFETCH_WAIT: Duration = Duration::from_millis(100);

/// Work taken from the queue and prepared, waiting for a permit.
struct Ready {
    queued: Queued,
    profile: Arc<RuleProfile>,
    prepared: Result<Prepared, SpecError>,
}

/// What the stage hands the batcher: the judged row and the work's acknowledgement.
pub struct JudgedOutput {
    /// The `stef_judged` row.
    pub rows: Vec<EvaluationRow>,
    /// Acknowledged once the sink has the row.
    pub ack: AckToken,
    /// The span the event's SQL ran in (its evaluation event is parented to it).
    pub trace: Option<crate::event::TraceContext>,
}

/// Where unjudged work goes at shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leftover {
    /// In-process work is lost with the process: acknowledge and count it as shed.
    Shed,
    /// Kafka work stays in the topic (not acknowledged) and is counted as left for next time.
    Keep,
}

/// The judge stage (see the module documentation).
pub struct JudgeStage {
    queue: Arc<WorkQueue>,
    closed: watch::Receiver<bool>,
    scorer: Arc<Scorer>,
    judge: Arc<dyn Judge>,
    ledger: Arc<Mutex<BudgetLedger>>,
    stats: Arc<JudgeStats>,
    concurrency: usize,
    max_wait_ms: i64,
    drain_grace: Option<Duration>,
    leftover: Leftover,
    /// Live: an unreachable judge pauses the stage (`None` in a census: fail fast).
    breaker: Option<Arc<Breaker>>,
}

impl JudgeStage {
    /// A stage over `queue`; `closed` turns `true` when no more work will be queued. Without a
    /// drain grace (a census: every event judged) judge outages fail the work; with one (live)
    /// they pause the stage.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        queue: Arc<WorkQueue>,
        closed: watch::Receiver<bool>,
        scorer: Arc<Scorer>,
        judge: Arc<dyn Judge>,
        ledger: BudgetLedger,
        stats: Arc<JudgeStats>,
        concurrency: usize,
        max_wait: Duration,
        drain_grace: Option<Duration>,
        leftover: Leftover,
    ) -> JudgeStage {
        stats.ledger(&ledger);
        JudgeStage {
            queue,
            closed,
            scorer,
            judge,
            ledger: Arc::new(Mutex::new(ledger)),
            stats,
            concurrency: concurrency.max(1),
            max_wait_ms: i64::try_from(max_wait.as_millis()).unwrap_or(i64::MAX),
            drain_grace,
            leftover,
            breaker: drain_grace.map(|_| Arc::new(Breaker::default())),
        }
    }

    /// Report the judge's pauses to `health` (live runs: the stage has a breaker).
    pub fn with_health(
        mut self,
        health: Option<Arc<crate::telemetry::health::Health>>,
    ) -> JudgeStage {
        if let (Some(health), Some(_)) = (health, &self.breaker) {
            self.breaker = Some(Arc::new(Breaker::with_health(health)));
        }
        self
    }

    /// Judge until the queue is closed and empty, or the drain grace ends; judged rows go to
    /// `out`.
    pub async fn run(mut self, out: mpsc::Sender<JudgedOutput>) {
        let permits = Arc::new(Semaphore::new(self.concurrency));
        let mut tasks: JoinSet<()> = JoinSet::new();
        let mut deadline: Option<tokio::time::Instant> = None;
        let mut watching = true;
        let mut ready: VecDeque<Ready> = VecDeque::new();
        let timed_out = loop {
            if deadline.is_none() && *self.closed.borrow() {
                deadline = self
                    .drain_grace
                    .map(|grace| tokio::time::Instant::now() + grace);
            }
            // Reap finished judgments so the set does not grow.
            while tasks.try_join_next().is_some() {}
            let permit = tokio::select! {
                biased;
                () = sleep_until_some(deadline) => break true,
                changed = self.closed.changed(), if watching => {
                    watching = changed.is_ok();
                    continue;
                }
                permit = Arc::clone(&permits).acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break false,
                },
            };
            // A paused judge (its circuit open): no judgment starts until it may. The probe's
            // claim goes with the judgment it admits; dropped unused (the loop goes on without
            // a judgment), it hands the probe on.
            let mut probe = None;
            if let Some(breaker) = &self.breaker {
                tokio::select! {
                    biased;
                    () = sleep_until_some(deadline) => break true,
                    changed = self.closed.changed(), if watching => {
                        watching = changed.is_ok();
                        continue;
                    }
                    claim = breaker.admit() => probe = claim,
                }
            }
            if ready.is_empty() {
                let first = tokio::select! {
                    biased;
                    () = sleep_until_some(deadline) => break true,
                    changed = self.closed.changed(), if watching => {
                        watching = changed.is_ok();
                        continue;
                    }
                    queued = self.queue.pop() => match queued {
                        Some(queued) => queued,
                        // Closed and empty; but a judgment still out may put its work back.
                        None if tasks.is_empty() => break false,
                        None => {
                            tasks.join_next().await;
                            continue;
                        }
                    },
                };
                let mut batch = vec![first];
                batch.extend(self.queue.try_pop_many(BATCH - 1));
                ready = self.prepare(batch).await;
            }
            let Some(next) = ready.pop_front() else {
                continue;
            };
            self.spawn_judgment(&mut tasks, next, probe, permit, &out);
        };
        if timed_out {
            self.drain_after_grace(ready, &mut tasks).await;
        } else {
            while tasks.join_next().await.is_some() {}
        }
        let ledger = self
            .ledger
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        self.stats.ledger(&ledger);
    }

    /// Starts judging `next` on `tasks`: its row goes to `out` (acknowledged as scored first), or
    /// its work back to the queue; the permit and the breaker's probe claim are held until the
    /// judgment ends.
    fn spawn_judgment(
        &self,
        tasks: &mut JoinSet<()>,
        next: Ready,
        probe: Option<ProbeClaim>,
        permit: OwnedSemaphorePermit,
        out: &mpsc::Sender<JudgedOutput>,
    ) {
        let job = Judgment {
            scorer: Arc::clone(&self.scorer),
            judge: Arc::clone(&self.judge),
            ledger: Arc::clone(&self.ledger),
            stats: Arc::clone(&self.stats),
            max_wait_ms: self.max_wait_ms,
            breaker: self.breaker.clone(),
        };
        let out = out.clone();
        let queue = Arc::clone(&self.queue);
        tasks.spawn(async move {
            // Held until the judgment ends (see `ProbeClaim`).
            let _probe = probe;
            match job.run(next).await {
                // A closed channel means the batcher failed; it reports the error. The
                // permit is held until the batcher takes the row (back-pressure).
                Outcome::Row(output) => {
                    // Judged: the source may hand out the next message now (a source
                    // scoring one message at a time after a crash waits for this, not
                    // for the batch to be stored).
                    output.ack.scored();
                    let _ = out.send(output).await;
                }
                Outcome::PutBack(queued) => queue.put_back(*queued),
                Outcome::Done => {}
            }
            drop(permit);
        });
    }

    /// The drain grace period ended with work waiting: what was prepared and queued is left
    /// (shed or kept in the topic), the judgments in flight get the grace period once more and
    /// are aborted after it, and what they put back is left too.
    async fn drain_after_grace(&self, ready: VecDeque<Ready>, tasks: &mut JoinSet<()>) {
        let mut left: Vec<Queued> = ready.into_iter().map(|r| r.queued).collect();
        left.extend(self.queue.drain());
        let n = left.len() as u64;
        self.leave(left);
        // Judgments still in flight get until their own timeouts, but no longer than the
        // grace period again.
        let grace = self.drain_grace.unwrap_or_default();
        let finish = async { while tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(grace, finish).await.is_err() {
            let aborted = tasks.len() as u64;
            tasks.abort_all();
            match self.leftover {
                Leftover::Shed => self.stats.shed(ShedReason::Shutdown, aborted),
                Leftover::Keep => self.stats.left_in_topic(aborted),
            }
        }
        // Work the last judgments put back (the judge unreachable to the end).
        let put_back = self.queue.drain();
        let n = n + put_back.len() as u64;
        self.leave(put_back);
        tracing::warn!(
            left = n,
            "judge stage: the drain grace period ended with work still waiting"
        );
    }

    /// Work not judged when the drain grace ended: shed (in-process) or left in the topic.
    fn leave(&self, left: Vec<Queued>) {
        let n = left.len() as u64;
        match self.leftover {
            Leftover::Shed => {
                self.stats.shed(ShedReason::Shutdown, n);
                for queued in left {
                    queued.ack.ack();
                }
            }
            Leftover::Keep => self.stats.left_in_topic(n),
        }
    }

    /// Prepare a batch of work and let the judge prefetch it (module documentation).
    async fn prepare(&self, batch: Vec<Queued>) -> VecDeque<Ready> {
        let mut ready = VecDeque::with_capacity(batch.len());
        for queued in batch {
            let (profile, prepared) = self.scorer.prepare_judged(&queued.work.event).await;
            ready.push_back(Ready {
                queued,
                profile,
                prepared,
            });
        }
        let requests: Vec<JudgeRequest<'_>> = ready
            .iter()
            .filter_map(|r| {
                Some(JudgeRequest {
                    event: &r.queued.work.event,
                    prepared: r.prepared.as_ref().ok()?,
                    profile: &r.profile,
                })
            })
            .collect();
        // A slow store must not hold the judgments back: past the wait, each judgment looks its
        // verdict up on its own, in its own task, as without a prefetch.
        let _ = tokio::time::timeout(PREFETCH_WAIT, self.judge.prefetch(&requests)).await;
        ready
    }
}

/// Sleep until `deadline`, or forever without one.
async fn sleep_until_some(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// One judgment (module documentation, steps 1–4).
struct Judgment {
    scorer: Arc<Scorer>,
    judge: Arc<dyn Judge>,
    ledger: Arc<Mutex<BudgetLedger>>,
    stats: Arc<JudgeStats>,
    max_wait_ms: i64,
    breaker: Option<Arc<Breaker>>,
}

/// How a judgment ended.
enum Outcome {
    /// A judged row (a verdict or a `judge_error`).
    Row(JudgedOutput),
    /// The judge could not be reached: the work goes back in the queue.
    PutBack(Box<Queued>),
    /// Shed (counted and acknowledged).
    Done,
}

/// The current UTC day number (days since the epoch).
fn utc_day() -> i64 {
    chrono::Utc::now().timestamp().div_euclid(86_400)
}

impl Judgment {
    fn ledger(&self) -> std::sync::MutexGuard<'_, BudgetLedger> {
        self.ledger.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Settle the reservation of a judgment with what it cost (a cached answer cost nothing).
    fn settle(&self, result: &Result<crate::judge::JudgeAssessment, JudgeError>) {
        let mut ledger = self.ledger();
        match result {
            Ok(a) if a.cached => ledger.release(),
            Ok(a) => ledger.settle(utc_day(), &a.usage),
            // The request went out (and may have been retried): it counts, without
            // tokens (a failed call reports none).
            Err(_) => ledger.settle(utc_day(), &Default::default()),
        }
        self.stats.ledger(&ledger);
    }

    async fn run(self, ready: Ready) -> Outcome {
        let Ready {
            queued: Queued { work, ack },
            profile,
            prepared,
        } = ready;
        if work.age_ms() > self.max_wait_ms {
            self.stats.shed(ShedReason::Stale, 1);
            ack.ack();
            return Outcome::Done;
        }
        let started = Instant::now();
        let event = &work.event;
        let columns = JudgedColumns {
            selection: work.selection.reasons_text().into(),
            inclusion_probability: work.selection.inclusion_probability,
            revised_value: work.line.phi,
            revised_verdict: work.line.verdict.clone(),
            revised_p_correct: work.line.p_correct,
            revised_correct: Some(work.line.correct()),
        };
        let prepared = match prepared {
            Ok(prepared) => prepared,
            // The line-rate row parsed this SQL, so only a changed size limit or a changed
            // profile dialect gets here: say so on the row instead of guessing.
            Err(error) => {
                self.stats.failed();
                let mut row = EvaluationRow::for_event(
                    event,
                    &work.ts,
                    crate::evaluation::Metric::StefJudged,
                );
                row.status = crate::evaluation::RowStatus::JudgeError;
                row.details = serde_json::json!({"judge_error": format!("cannot prepare the event: {error}")}).into();
                row.judged = Some(columns);
                return Outcome::Row(JudgedOutput {
                    rows: vec![row],
                    ack,
                    trace: event.trace,
                });
            }
        };
        let request = JudgeRequest {
            event,
            prepared: &prepared,
            profile: &profile,
        };
        let assessment = match self.judge.assess_cached(request).await {
            Some(assessment) => Ok(assessment),
            None => {
                let reserved = self.ledger().try_reserve(utc_day());
                if let Err(reason) = reserved {
                    self.stats.shed(reason, 1);
                    ack.ack();
                    return Outcome::Done;
                }
                let result = self.judge.assess(request).await;
                self.settle(&result);
                if let Some(breaker) = &self.breaker {
                    match &result {
                        Err(error) if is_outage(error) => {
                            if breaker.unreachable(error) {
                                self.stats.paused();
                            }
                            self.stats.put_back();
                            return Outcome::PutBack(Box::new(Queued { work, ack }));
                        }
                        // An answer, right or wrong: the judge is there.
                        _ => breaker.answered(),
                    }
                }
                result
            }
        };
        match &assessment {
            Ok(a) => self.stats.judged(a.cached),
            Err(error) => {
                self.stats.failed();
                log_failure(&work.event.event_id, error);
            }
        }
        let latency = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let row = self.scorer.judged_row(
            event, &work.ts, columns, &profile, &prepared, assessment, latency,
        );
        Outcome::Row(JudgedOutput {
            rows: vec![row],
            ack,
            trace: event.trace,
        })
    }
}

fn log_failure(event_id: &str, error: &JudgeError) {
    tracing::warn!(%event_id, %error, "LLM judgment failed; the stef_judged row records the error");
}
