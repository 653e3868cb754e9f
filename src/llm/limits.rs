//! Request admission: a concurrency cap (semaphore), requests per second and estimated tokens
//! per minute (governor GCRA limiters). Callers wait for a permit; nothing is ever dropped.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::config::JudgeConfig;

/// Estimated tokens of a prompt: one token per four characters, rounded up (OpenAI's rule of
/// thumb for English; good enough for budgeting).
pub fn estimate_tokens(prompt_chars: usize) -> u32 {
    u32::try_from(prompt_chars.div_ceil(4)).unwrap_or(u32::MAX)
}

/// Share of `max_requests_per_second` the limiter actually paces at. Requests leave evenly
/// spaced, but they reach the server with varying delays (scheduling, network), so a limiter
/// pacing at exactly the limit lets a receiver's one-second window occasionally count one
/// request too many; 5% headroom absorbs 50 ms of jitter per second.
pub const RATE_HEADROOM: f64 = 0.95;

/// The request limiter's burst: `configured`, or for 0 the automatic choice — 2 when the
/// headroom (`rate × (1 − RATE_HEADROOM)`) is at least 3 requests per second, else 1.
///
/// With burst 1 a permit granted late (timer or scheduling delay) pushes every later permit
/// back, so throughput drops below the paced rate by the average lateness. With burst 2,
/// permits follow a fixed schedule spaced `T = 1 / (rate × RATE_HEADROOM)` apart and a late one
/// does not delay the next; any one-second window then holds at most `1 s / T + 2` permits.
/// Two requests of headroom pay for that, the third is left for delivery jitter between the
/// client and the server's clock.
pub fn request_burst(rate: f64, configured: u32) -> NonZeroU32 {
    if let Some(burst) = NonZeroU32::new(configured) {
        return burst;
    }
    let headroom = rate * (1.0 - RATE_HEADROOM);
    if headroom >= 3.0 {
        NonZeroU32::new(2).unwrap_or(NonZeroU32::MIN)
    } else {
        NonZeroU32::MIN
    }
}

/// The limits in front of one endpoint.
#[derive(Debug)]
pub struct Limits {
    concurrency: Semaphore,
    requests: Option<DefaultDirectRateLimiter>,
    tokens: Option<(DefaultDirectRateLimiter, NonZeroU32)>,
}

/// Held while one HTTP request is in flight.
#[derive(Debug)]
pub struct Admission<'a> {
    _slot: Option<SemaphorePermit<'a>>,
}

impl Limits {
    /// Limits from the config (`max_concurrency`, `max_requests_per_second` paced at
    /// [`RATE_HEADROOM`] with `rate_burst`, `max_tokens_per_minute`).
    pub fn new(config: &JudgeConfig) -> Limits {
        let rate = config.max_requests_per_second;
        let requests = (rate > 0.0)
            .then(|| Duration::from_secs_f64(1.0 / (rate * RATE_HEADROOM)))
            .and_then(Quota::with_period)
            .map(|q| q.allow_burst(request_burst(rate, config.rate_burst)))
            .map(RateLimiter::direct);
        let tokens = NonZeroU32::new(config.max_tokens_per_minute).map(|per_minute| {
            (
                RateLimiter::direct(Quota::per_minute(per_minute)),
                per_minute,
            )
        });
        Limits {
            concurrency: Semaphore::new(config.max_concurrency.max(1)),
            requests,
            tokens,
        }
    }

    /// Wait for a concurrency slot, then for `estimated_tokens` of token budget, then for a
    /// request slot. The slot is held until the returned admission is dropped.
    pub async fn admit(&self, estimated_tokens: u32) -> Admission<'_> {
        // Taking the concurrency slot first keeps the number of tasks polling the rate
        // limiters small (at most `max_concurrency`). The semaphore is never closed, so
        // `acquire` cannot fail; if it ever did, the request proceeds rather than being lost.
        let slot = self.concurrency.acquire().await.ok();
        if let Some((limiter, capacity)) = &self.tokens {
            // A prompt larger than the whole per-minute budget waits for the full budget.
            let n =
                NonZeroU32::new(estimated_tokens.min(capacity.get())).unwrap_or(NonZeroU32::MIN);
            if limiter.until_n_ready(n).await.is_err() {
                limiter.until_ready().await;
            }
        }
        if let Some(limiter) = &self.requests {
            limiter.until_ready().await;
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
    fn automatic_burst() {
        assert_eq!(request_burst(10.0, 0).get(), 1);
        assert_eq!(request_burst(50.0, 0).get(), 1);
        assert_eq!(request_burst(59.0, 0).get(), 1);
        assert_eq!(request_burst(60.0, 0).get(), 2);
        assert_eq!(request_burst(100.0, 0).get(), 2);
        assert_eq!(request_burst(100.0, 7).get(), 7);
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
        let cfg = JudgeConfig {
            max_concurrency: 2,
            max_requests_per_second: 0.0,
            ..JudgeConfig::default()
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
        let cfg = JudgeConfig {
            max_concurrency: 4,
            max_requests_per_second: 100.0,
            rate_burst: 1,
            ..JudgeConfig::default()
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
        let cfg = JudgeConfig {
            max_concurrency: 4,
            max_requests_per_second: 0.0,
            // 1,000 tokens per second.
            max_tokens_per_minute: 60_000,
            ..JudgeConfig::default()
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
