//! The judge's circuit breaker: an unreachable judge is a paused judge, not failed work.
//!
//! A judgment that fails because the judge could not be reached — a transport error, a
//! timeout, 408/425/429/5xx after the client's own retries ([`is_outage`]) — is put back in the
//! queue instead of becoming a `judge_error` row. After [`OPEN_AFTER`] such failures in a row
//! the circuit opens: the judge stage takes no work for a pause (1 s, doubling to
//! [`MAX_PAUSE`]), then lets one judgment through as a probe while the others wait; its success
//! closes the circuit, another outage opens it again for twice as long. Any answer from the
//! server — a verdict, or a reply that is wrong — counts as the judge being there. The probe is
//! a [`ProbeClaim`]: a probe that ends without asking the judge (its verdict was cached, its
//! work was shed, the stage went on without it) hands the probe on as it is dropped, so the
//! circuit never waits for an outcome that will not come. Queued work
//! keeps its age while it waits, so `max_wait_ms` and the queue's capacity still shed it with
//! their reasons; `judge_error` rows stay for failures of the judgment itself (a reply that
//! stays invalid after its repair, a request the server rejects).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::judge::JudgeError;
use crate::telemetry::health::{ComponentHealth, Health};

/// Outage failures in a row that open the circuit.
pub const OPEN_AFTER: u32 = 3;

/// The first pause.
pub const FIRST_PAUSE: Duration = Duration::from_secs(1);

/// The longest pause between two probes.
pub const MAX_PAUSE: Duration = Duration::from_secs(30);

/// Whether `error` says the judge could not be reached (rather than that it answered badly).
pub fn is_outage(error: &JudgeError) -> bool {
    match error {
        JudgeError::Transport(_) | JudgeError::Timeout(_) => true,
        JudgeError::Http { status, .. } => matches!(status, 408 | 425 | 429 | 500..=599),
        JudgeError::InvalidReply(_) | JudgeError::Prompt(_) => false,
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Judgments go; `failures` outage failures in a row so far.
    Closed { failures: u32 },
    /// No judgment until `until`; the pause was `pause`.
    Open { until: Instant, pause: Duration },
    /// One judgment is out as the probe (`probe`: its claim's number); the others wait for
    /// its outcome.
    Probing { pause: Duration, probe: u64 },
}

/// The circuit breaker (module documentation).
pub struct Breaker {
    state: Mutex<State>,
    changed: Notify,
    health: Option<Arc<Health>>,
    /// Numbers the probe claims.
    probes: AtomicU64,
}

/// The right to be the probe of an open circuit, held by the judgment admitted as the probe
/// until it ends. Its outcome reaches the breaker through [`Breaker::answered`] or
/// [`Breaker::unreachable`]; dropped without either (the verdict came from the cache, the work
/// was shed or put aside, the stage stopped), it reopens the circuit at once so that the next
/// judgment probes instead — without this the other judgments would wait for an outcome that
/// never comes.
pub struct ProbeClaim {
    breaker: Arc<Breaker>,
    probe: u64,
}

impl Drop for ProbeClaim {
    fn drop(&mut self) {
        self.breaker.probe_ended(self.probe);
    }
}

/// The health component the breaker reports to: degraded while the circuit is not closed.
pub const HEALTH_COMPONENT: &str = "judge";

impl Default for Breaker {
    fn default() -> Self {
        Breaker {
            state: Mutex::new(State::Closed { failures: 0 }),
            changed: Notify::new(),
            health: None,
            probes: AtomicU64::new(0),
        }
    }
}

impl Breaker {
    /// A breaker that reports to `health` (`judge`: degraded while open or probing, so
    /// `/readyz` and the run's outages show a paused judge).
    pub fn with_health(health: Arc<Health>) -> Breaker {
        Breaker {
            health: Some(health),
            ..Breaker::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait until a judgment may start: at once while closed (`None`); while open, until the
    /// pause ends, when the first caller goes as the probe (`Some` claim, kept until its
    /// judgment ends) and the others wait for its outcome.
    pub async fn admit(self: &Arc<Self>) -> Option<ProbeClaim> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the state is read, so a change in between is not missed.
            changed.as_mut().enable();
            let wait = {
                let mut state = self.lock();
                match *state {
                    State::Closed { .. } => return None,
                    State::Open { until, pause } if Instant::now() >= until => {
                        let probe = self.probes.fetch_add(1, Ordering::Relaxed);
                        *state = State::Probing { pause, probe };
                        return Some(ProbeClaim {
                            breaker: Arc::clone(self),
                            probe,
                        });
                    }
                    State::Open { until, .. } => Some(until),
                    State::Probing { .. } => None,
                }
            };
            match wait {
                Some(until) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(until) => {}
                        () = &mut changed => {}
                    }
                }
                None => changed.await,
            }
        }
    }

    /// The judge answered: close the circuit.
    pub fn answered(&self) {
        let mut state = self.lock();
        if *state != (State::Closed { failures: 0 }) {
            if !matches!(*state, State::Closed { .. }) {
                tracing::info!("the LLM judge answers again; judging resumes");
                if let Some(health) = &self.health {
                    health.set(HEALTH_COMPONENT, ComponentHealth::Ok);
                }
            }
            *state = State::Closed { failures: 0 };
            drop(state);
            self.changed.notify_waiters();
        }
    }

    /// The judge could not be reached; returns `true` when this opened the circuit.
    pub fn unreachable(&self, error: &JudgeError) -> bool {
        let mut state = self.lock();
        let pause = match *state {
            State::Closed { failures } if failures + 1 < OPEN_AFTER => {
                *state = State::Closed {
                    failures: failures + 1,
                };
                return false;
            }
            State::Closed { .. } => FIRST_PAUSE,
            State::Probing { pause, .. } => (pause * 2).min(MAX_PAUSE),
            // Judgments that were already out when it opened: nothing new.
            State::Open { .. } => return false,
        };
        *state = State::Open {
            until: Instant::now() + pause,
            pause,
        };
        drop(state);
        tracing::warn!(%error, pause_ms = pause.as_millis() as u64,
            "the LLM judge is unreachable; pausing the judge stage (queued work waits)");
        if let Some(health) = &self.health {
            health.set(
                HEALTH_COMPONENT,
                ComponentHealth::Degraded(format!("unreachable, paused: {error}")),
            );
        }
        self.changed.notify_waiters();
        true
    }

    /// Probe `probe`'s judgment ended: if it told nothing (the circuit still waits for it),
    /// the circuit is open again with its pause over, so the next judgment probes.
    fn probe_ended(&self, probe: u64) {
        let mut state = self.lock();
        if let State::Probing { pause, probe: out } = *state
            && out == probe
        {
            *state = State::Open {
                until: Instant::now(),
                pause,
            };
            drop(state);
            self.changed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn down() -> JudgeError {
        JudgeError::Transport("connection refused".into())
    }

    #[test]
    fn outages_are_told_from_bad_answers() {
        assert!(is_outage(&down()));
        assert!(is_outage(&JudgeError::Timeout(300)));
        assert!(is_outage(&JudgeError::Http {
            status: 503,
            body: String::new()
        }));
        assert!(is_outage(&JudgeError::Http {
            status: 429,
            body: String::new()
        }));
        assert!(!is_outage(&JudgeError::Http {
            status: 400,
            body: String::new()
        }));
        assert!(!is_outage(&JudgeError::InvalidReply("not JSON".into())));
    }

    #[tokio::test(start_paused = true)]
    async fn it_opens_after_failures_in_a_row_probes_and_closes() {
        let breaker = Arc::new(Breaker::default());
        assert!(breaker.admit().await.is_none(), "closed: no probe");
        assert!(!breaker.unreachable(&down()));
        breaker.answered();
        // The count restarts after an answer.
        assert!(!breaker.unreachable(&down()));
        assert!(!breaker.unreachable(&down()));
        assert!(breaker.unreachable(&down()));
        // Open: nobody is admitted for the first pause.
        let started = Instant::now();
        let probe = breaker.admit().await;
        assert!(probe.is_some());
        assert_eq!(started.elapsed(), FIRST_PAUSE);
        // The probe is out: a second caller waits for its outcome.
        let second = breaker.admit();
        tokio::pin!(second);
        assert!(
            tokio::time::timeout(Duration::from_secs(60), &mut second)
                .await
                .is_err()
        );
        // The probe fails: open again, for twice as long (its claim, dropped after telling,
        // changes nothing).
        assert!(breaker.unreachable(&down()));
        drop(probe);
        let started = Instant::now();
        let second = second.await;
        assert!(second.is_some());
        assert_eq!(started.elapsed(), FIRST_PAUSE * 2);
        // The probe succeeds: closed, everyone goes.
        breaker.answered();
        drop(second);
        assert!(breaker.admit().await.is_none());
        assert!(breaker.admit().await.is_none());
        assert!(!breaker.unreachable(&down()));
    }

    #[tokio::test(start_paused = true)]
    async fn the_pause_is_capped() {
        let breaker = Arc::new(Breaker::default());
        for _ in 0..OPEN_AFTER {
            breaker.unreachable(&down());
        }
        for _ in 0..10 {
            let _probe = breaker.admit().await;
            breaker.unreachable(&down());
        }
        let started = Instant::now();
        breaker.admit().await;
        assert_eq!(started.elapsed(), MAX_PAUSE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_that_never_asks_the_judge_hands_the_probe_on() {
        let breaker = Arc::new(Breaker::default());
        for _ in 0..OPEN_AFTER {
            breaker.unreachable(&down());
        }
        let probe = breaker.admit().await;
        assert!(probe.is_some());
        let waiting = breaker.admit();
        tokio::pin!(waiting);
        assert!(
            tokio::time::timeout(Duration::from_secs(60), &mut waiting)
                .await
                .is_err(),
            "the others wait for the probe's outcome"
        );
        // Its verdict was in the cache: no call, no outcome. Dropping the claim lets the next
        // judgment probe at once, without another pause.
        let started = Instant::now();
        drop(probe);
        let next = waiting.await;
        assert!(next.is_some(), "the next judgment is the probe");
        assert_eq!(started.elapsed(), Duration::ZERO);
        breaker.answered();
        drop(next);
        assert!(breaker.admit().await.is_none(), "closed");
    }
}
