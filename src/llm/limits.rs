//! Request admission: a concurrency cap (semaphore), requests per second and estimated tokens
//! per minute (governor GCRA limiters). Callers wait for a permit; nothing is ever dropped.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::sync::{Mutex, Semaphore, SemaphorePermit};

use crate::llm::config::LlmJudgeConfig;

/// Estimated tokens of a prompt: one token per four characters, rounded up (OpenAI's rule of
/// thumb for English; good enough for budgeting).
pub fn estimate_tokens(prompt_chars: usize) -> u32 {
    u32::try_from(prompt_chars.div_ceil(4)).unwrap_or(u32::MAX)
}

/// Share of `max_requests_per_second` the limiter paces at, at least (see [`Pacing`]).
pub const RATE_HEADROOM: f64 = 0.955;

/// Requests per second of headroom kept below the limit, at most (see [`Pacing`]).
pub const RATE_HEADROOM_REQUESTS: f64 = 2.5;

/// Limiter cells per request (see [`Pacing`]): the early-permit tolerance is a whole number of
/// cells, in steps of 1/20 of the spacing.
pub const CELLS_PER_REQUEST: u32 = 20;

/// Largest early-permit tolerance, in cells (0.45 of the spacing).
const MAX_TOLERANCE_CELLS: u32 = 9;

/// How the request limiter paces `max_requests_per_second = r`.
///
/// Permits follow a fixed schedule `T = 1 / paced` apart. A permit granted late (timer
/// resolution, a busy runtime) must not push every later permit back — with a plain GCRA of
/// burst 1 that lateness is lost for good (2–5 % of the rate at 50 requests/s). So the limiter
/// counts in cells of `T / CELLS_PER_REQUEST`, takes `CELLS_PER_REQUEST` cells per request and
/// allows `tolerance_cells` extra cells of burst: a permit may come that many cells early,
/// which lets the schedule catch up after a late one.
///
/// The guarantee (the server's view): any one-second window of send times holds at most
/// `floor(paced + tolerance_cells / CELLS_PER_REQUEST) + burst` requests
/// ([`Pacing::max_per_second`]). With burst 1 that bound is `floor(r) − 2` from 50 requests/s,
/// `floor(r) − 1` from 30/s and `floor(r)` below: the rest of every window is left for delivery
/// jitter between the client's send and the server's clock (our own rate-limit test, a
/// one-thread debug runtime, sees up to two requests of it at 50/s). The paced rate is
/// `max(RATE_HEADROOM × r, r − RATE_HEADROOM_REQUESTS)` (50 → 47.75/s, 100 → 97.5/s,
/// 20 → 19.1/s, 5 → 4.775/s), lowered if needed to fit the bound, and the tolerance is the room
/// left (at most 0.45 `T`; 0.2 `T` = 4.2 ms at 50/s, enough for the timer's lateness — the
/// unit test below keeps ≥ 99.5 % of the schedule with up to 2 ms late wake-ups). A configured
/// burst `b > 1` adds `b − 1` requests to the window at the same pacing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pacing {
    /// Requests per second on the schedule.
    pub paced: f64,
    /// Requests that may go at once after a quiet spell.
    pub burst: NonZeroU32,
    /// How early a permit may come, in cells of `1 / (paced × CELLS_PER_REQUEST)` seconds.
    pub tolerance_cells: u32,
}

impl Pacing {
    /// The pacing for `rate` requests per second and a configured burst (0 = 1).
    pub fn new(rate: f64, configured_burst: u32) -> Pacing {
        let burst = NonZeroU32::new(configured_burst).unwrap_or(NonZeroU32::MIN);
        // The most requests a window may hold with burst 1.
        // (Below one request per second the window holds at most one.)
        let jitter_room = if rate >= 50.0 {
            2.0
        } else if rate >= 30.0 {
            1.0
        } else {
            0.0
        };
        let bound = (rate.floor() - jitter_room).max(1.0);
        let step = 1.0 / f64::from(CELLS_PER_REQUEST);
        let paced = if rate > 0.0 {
            (rate * RATE_HEADROOM)
                .max(rate - RATE_HEADROOM_REQUESTS)
                .min(bound - step)
        } else {
            0.0
        };
        // Largest whole number of cells with paced + cells·step < bound.
        let room = ((bound - paced) / step - 1e-9).ceil() - 1.0;
        let tolerance_cells = room.clamp(0.0, f64::from(MAX_TOLERANCE_CELLS)) as u32;
        Pacing {
            paced,
            burst,
            tolerance_cells,
        }
    }

    /// The most requests any one-second window of send times can hold.
    pub fn max_per_second(&self) -> u64 {
        let tolerance = f64::from(self.tolerance_cells) / f64::from(CELLS_PER_REQUEST);
        (self.paced + tolerance).floor() as u64 + u64::from(self.burst.get())
    }

    /// The governor quota: cells of `T / CELLS_PER_REQUEST`,
    /// `burst × CELLS_PER_REQUEST + tolerance_cells` of them at once. `None` when nothing can be
    /// paced (a rate that is not positive).
    pub fn quota(&self) -> Option<Quota> {
        if !(self.paced.is_finite() && self.paced > 0.0) {
            return None;
        }
        let cell =
            Duration::try_from_secs_f64(1.0 / (self.paced * f64::from(CELLS_PER_REQUEST))).ok()?;
        let cells = self
            .burst
            .get()
            .checked_mul(CELLS_PER_REQUEST)?
            .checked_add(self.tolerance_cells)?;
        Some(Quota::with_period(cell)?.allow_burst(NonZeroU32::new(cells)?))
    }
}

/// [`CELLS_PER_REQUEST`] as the limiter's argument.
const REQUEST_CELLS: NonZeroU32 = match NonZeroU32::new(CELLS_PER_REQUEST) {
    Some(n) => n,
    None => NonZeroU32::MIN,
};

/// The limits in front of one endpoint.
#[derive(Debug)]
pub struct Limits {
    concurrency: Semaphore,
    /// One caller at a time waits on the rate limiters; the others queue here (FIFO, no
    /// polling). Without it every admitted request woke all `max_concurrency` waiters, which
    /// computed the same next permit time and went back to sleep but one: at 75 waiters and
    /// 50 requests/s that herd cost more CPU than the requests themselves.
    pacing_turn: Mutex<()>,
    requests: Option<DefaultDirectRateLimiter>,
    tokens: Option<(DefaultDirectRateLimiter, NonZeroU32)>,
}

/// Held while one HTTP request is in flight.
#[derive(Debug)]
pub struct Admission<'a> {
    _slot: Option<SemaphorePermit<'a>>,
}

impl Limits {
    /// Limits from the config (`max_concurrency`, `max_requests_per_second` paced as
    /// [`Pacing`] says with `rate_burst`, `max_tokens_per_minute`).
    pub fn new(config: &LlmJudgeConfig) -> Limits {
        let requests = Pacing::new(config.max_requests_per_second, config.rate_burst)
            .quota()
            .map(RateLimiter::direct);
        let tokens = NonZeroU32::new(config.max_tokens_per_minute).map(|per_minute| {
            (
                RateLimiter::direct(Quota::per_minute(per_minute)),
                per_minute,
            )
        });
        Limits {
            concurrency: Semaphore::new(config.max_concurrency.max(1)),
            pacing_turn: Mutex::new(()),
            requests,
            tokens,
        }
    }

    /// Wait for a concurrency slot, then for the turn to wait on the rate limiters, then for
    /// `estimated_tokens` of token budget, then for a request slot. The slot is held until the
    /// returned admission is dropped.
    pub async fn admit(&self, estimated_tokens: u32) -> Admission<'_> {
        // Taking the concurrency slot first keeps the number of tasks polling the rate
        // limiters small (at most `max_concurrency`). The semaphore is never closed, so
        // `acquire` cannot fail; if it ever did, the request proceeds rather than being lost.
        let slot = self.concurrency.acquire().await.ok();
        // Taking turns keeps one task polling the limiters at a time, in arrival order.
        let _turn = self.pacing_turn.lock().await;
        if let Some((limiter, capacity)) = &self.tokens {
            // A prompt larger than the whole per-minute budget waits for the full budget.
            let n =
                NonZeroU32::new(estimated_tokens.min(capacity.get())).unwrap_or(NonZeroU32::MIN);
            if limiter.until_n_ready(n).await.is_err() {
                limiter.until_ready().await;
            }
        }
        if let Some(limiter) = &self.requests {
            // The quota holds more than CELLS_PER_REQUEST cells, so this cannot fail; if it
            // ever did, one cell still paces the request rather than losing it.
            if limiter.until_n_ready(REQUEST_CELLS).await.is_err() {
                limiter.until_ready().await;
            }
        }
        Admission { _slot: slot }
    }

    /// Free concurrency slots (for tests and metrics).
    pub fn available_slots(&self) -> usize {
        self.concurrency.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacing_rates_and_window_bounds() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let p = Pacing::new(50.0, 0);
        assert!(close(p.paced, 47.75), "{p:?}");
        assert_eq!((p.burst.get(), p.tolerance_cells), (1, 4));
        assert_eq!(p.max_per_second(), 48);
        let p = Pacing::new(20.0, 0);
        assert!(close(p.paced, 19.1) && p.tolerance_cells == 9, "{p:?}");
        assert_eq!(p.max_per_second(), 20);
        let p = Pacing::new(5.0, 0);
        assert!(close(p.paced, 4.775) && p.tolerance_cells == 4, "{p:?}");
        assert_eq!(p.max_per_second(), 5);
        assert_eq!(Pacing::new(100.0, 0).max_per_second(), 98);
        assert_eq!(Pacing::new(30.0, 0).max_per_second(), 29);
        assert_eq!(Pacing::new(5.5, 0).max_per_second(), 5);
        assert_eq!(Pacing::new(1.0, 0).max_per_second(), 1);
        let p = Pacing::new(100.0, 7);
        assert_eq!((p.paced, p.max_per_second()), (97.5, 104));
        assert!(Pacing::new(0.0, 0).quota().is_none());
        assert!(Pacing::new(0.5, 0).quota().is_some());
        // Every rate from 1 to 500 in steps of 0.25 keeps its bound.
        for quarter in 4..2000 {
            let rate = f64::from(quarter) / 4.0;
            let p = Pacing::new(rate, 0);
            let bound = rate.floor() as u64 - u64::from(rate >= 30.0) - u64::from(rate >= 50.0);
            assert!(p.max_per_second() <= bound, "{rate}: {p:?}");
            // Little is given up: 5 % (or 2.5 requests/s) of the whole requests per second.
            let whole = rate.floor();
            assert!(
                p.paced >= (0.95 * whole).max(whole - 2.5) - 0.051,
                "{rate}: {p:?}"
            );
        }
    }

    /// A limiter whose permits are taken late by up to 2 ms (the timer firing late on a busy
    /// runtime), on a fake clock over a simulated minute: it keeps its schedule (≥ 99.5 % of the
    /// paced rate) and no one-second window of grants holds more than `max_per_second`.
    #[test]
    fn late_permits_do_not_slow_the_schedule_nor_break_the_window() {
        use governor::clock::{Clock, FakeRelativeClock};
        use rand::{Rng, SeedableRng};
        for (rate, burst) in [(50.0, 0), (20.0, 0), (5.0, 0), (200.0, 0), (50.0, 3)] {
            let pacing = Pacing::new(rate, burst);
            let clock = FakeRelativeClock::default();
            let limiter = RateLimiter::direct_with_clock(pacing.quota().unwrap(), clock.clone());
            let mut rng = rand::rngs::StdRng::seed_from_u64(7);
            let mut grants: Vec<u128> = Vec::new();
            let mut now: u128 = 0;
            let horizon: u128 = 60_000_000_000;
            while now < horizon {
                match limiter.check_n(REQUEST_CELLS).unwrap() {
                    // Callers are waiting: the next one asks at once.
                    Ok(()) => grants.push(now),
                    Err(not_until) => {
                        let wait = not_until.wait_time_from(clock.now());
                        let late = Duration::from_nanos(rng.random_range(0..2_000_000u64));
                        clock.advance(wait + late);
                        now += (wait + late).as_nanos();
                    }
                }
            }
            let per_second = grants.len() as f64 / 60.0;
            assert!(
                per_second >= 0.995 * pacing.paced,
                "rate {rate}: {per_second:.2}/s, paced {}",
                pacing.paced
            );
            let mut lo = 0;
            let mut busiest = 0;
            for hi in 0..grants.len() {
                while grants[hi] - grants[lo] >= 1_000_000_000 {
                    lo += 1;
                }
                busiest = busiest.max(hi - lo + 1);
            }
            assert!(
                busiest as u64 <= pacing.max_per_second(),
                "rate {rate}: {busiest} in one second, bound {}",
                pacing.max_per_second()
            );
        }
    }

    #[test]
    fn token_estimate() {
        assert_eq!(estimate_tokens(0), 0);
        assert_eq!(estimate_tokens(1), 1);
        assert_eq!(estimate_tokens(8), 2);
        assert_eq!(estimate_tokens(9), 3);
    }

    #[tokio::test]
    async fn concurrency_slots_are_returned() {
        let cfg = LlmJudgeConfig {
            max_concurrency: 2,
            max_requests_per_second: 0.0,
            ..LlmJudgeConfig::default()
        };
        let limits = Limits::new(&cfg);
        let a = limits.admit(10).await;
        let b = limits.admit(10).await;
        assert_eq!(limits.available_slots(), 0);
        drop(a);
        assert_eq!(limits.available_slots(), 1);
        drop(b);
        assert_eq!(limits.available_slots(), 2);
    }

    #[tokio::test]
    async fn request_rate_spaces_permits() {
        let cfg = LlmJudgeConfig {
            max_concurrency: 4,
            max_requests_per_second: 100.0,
            rate_burst: 1,
            ..LlmJudgeConfig::default()
        };
        let limits = Limits::new(&cfg);
        let start = std::time::Instant::now();
        for _ in 0..11 {
            drop(limits.admit(1).await);
        }
        // 11 permits at ≥ 10 ms spacing take at least 100 ms.
        assert!(
            start.elapsed() >= Duration::from_millis(95),
            "{:?}",
            start.elapsed()
        );
    }

    #[tokio::test]
    async fn token_budget_waits_for_replenishment() {
        let cfg = LlmJudgeConfig {
            max_concurrency: 4,
            max_requests_per_second: 0.0,
            // 1,000 tokens per second.
            max_tokens_per_minute: 60_000,
            ..LlmJudgeConfig::default()
        };
        let limits = Limits::new(&cfg);
        let start = std::time::Instant::now();
        // A prompt larger than the whole budget takes the whole budget (it is not refused).
        drop(limits.admit(100_000).await);
        assert!(start.elapsed() < Duration::from_millis(100));
        // The next 500 tokens are available only after about half a second.
        drop(limits.admit(500).await);
        assert!(
            start.elapsed() >= Duration::from_millis(450),
            "{:?}",
            start.elapsed()
        );
    }
}
