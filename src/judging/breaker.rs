//! The judge's circuit breaker: an unreachable judge is a paused judge, not failed work.
//!
//! A judgment that fails because the judge could not be reached — a transport error, a
//! timeout, 408/425/429/5xx after the client's own retries ([`is_outage`]) — is put back in the
//! queue instead of becoming a `judge_error` row. After [`OPEN_AFTER`] such failures in a row
//! the circuit opens: the judge stage takes no work for a pause (1 s, doubling to
//! [`MAX_PAUSE`]), then lets one judgment through as a probe while the others wait; its success
//! closes the circuit, another outage opens it again for twice as long. Any answer from the
//! server — a verdict, or a reply that is wrong — counts as the judge being there. Queued work
//! keeps its age while it waits, so `max_wait_ms` and the queue's capacity still shed it with
//! their reasons; `judge_error` rows stay for failures of the judgment itself (a reply that
//! stays invalid after its repair, a request the server rejects).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::health::{ComponentHealth, Health};
use crate::judge::JudgeError;

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
    /// One judgment is out as the probe; the others wait for its outcome.
    Probing { pause: Duration },
}

/// The circuit breaker (module documentation).
pub struct Breaker {
    state: Mutex<State>,
    changed: Notify,
    health: Option<Arc<Health>>,
}

/// The health component the breaker reports to: degraded while the circuit is not closed.
pub const HEALTH_COMPONENT: &str = "judge";

impl Default for Breaker {
    fn default() -> Self {
        Breaker {
            state: Mutex::new(State::Closed { failures: 0 }),
            changed: Notify::new(),
            health: None,
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

    /// Wait until a judgment may start: at once while closed; while open, until the pause
    /// ends, when the first caller goes as the probe and the others wait for its outcome.
    pub async fn admit(&self) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the state is read, so a change in between is not missed.
            changed.as_mut().enable();
            let wait = {
                let mut state = self.lock();
                match *state {
                    State::Closed { .. } => return,
                    State::Open { until, pause } if Instant::now() >= until => {
                        *state = State::Probing { pause };
                        return;
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
            State::Probing { pause } => (pause * 2).min(MAX_PAUSE),
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
        let breaker = Breaker::default();
        breaker.admit().await;
        assert!(!breaker.unreachable(&down()));
        breaker.answered();
        // The count restarts after an answer.
        assert!(!breaker.unreachable(&down()));
        assert!(!breaker.unreachable(&down()));
        assert!(breaker.unreachable(&down()));
        // Open: nobody is admitted for the first pause.
        let started = Instant::now();
        breaker.admit().await;
        assert_eq!(started.elapsed(), FIRST_PAUSE);
        // The probe is out: a second caller waits for its outcome.
        let second = breaker.admit();
        tokio::pin!(second);
        assert!(
            tokio::time::timeout(Duration::from_secs(60), &mut second)
                .await
                .is_err()
        );
        // The probe fails: open again, for twice as long.
        assert!(breaker.unreachable(&down()));
        let started = Instant::now();
        second.await;
        assert_eq!(started.elapsed(), FIRST_PAUSE * 2);
        // The probe succeeds: closed, everyone goes.
        breaker.answered();
        breaker.admit().await;
        breaker.admit().await;
        assert!(!breaker.unreachable(&down()));
    }

    #[tokio::test(start_paused = true)]
    async fn the_pause_is_capped() {
        let breaker = Breaker::default();
        for _ in 0..OPEN_AFTER {
            breaker.unreachable(&down());
        }
        for _ in 0..10 {
            breaker.admit().await;
            breaker.unreachable(&down());
        }
        let started = Instant::now();
        breaker.admit().await;
        assert_eq!(started.elapsed(), MAX_PAUSE);
    }
}
