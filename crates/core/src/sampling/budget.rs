//! The daily spend of the LLM judge: caps on requests, tokens and cost, and the cost of what was
//! spent, from configured prices per 1k input and output tokens.
//!
//! A judgment reserves one request before it is sent ([`BudgetLedger::try_reserve`]) and settles
//! its real token usage when it returns ([`BudgetLedger::settle`]); an answer from a cache releases
//! the reservation ([`BudgetLedger::release`]) and costs nothing. No new request is reserved once
//! today's spend (reservations included) reaches a cap, so the request cap is never exceeded;
//! token and cost caps are checked against what was spent so far (a call in flight may finish
//! above them by at most its own tokens). Days are UTC calendar days, numbered by the caller.

use serde::Serialize;

use crate::judge::TokenUsage;

/// Why a selected event was not judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShedReason {
    /// Today's request cap is reached.
    DailyRequests,
    /// Today's token cap is reached.
    DailyTokens,
    /// Today's cost cap is reached.
    DailyCost,
    /// Priority work offered faster than the judge can take it (`priority_offer_factor` times
    /// its request rate): shed when selected, before it is queued or produced.
    PriorityOverRate,
    /// The work queue was full and this was the least important work in it.
    QueueFull,
    /// The work waited longer than the judge stage's `max_wait`.
    Stale,
    /// The run ended before the work was judged (the drain grace period ran out).
    Shutdown,
}

impl ShedReason {
    /// Every reason, in declaration order (`ALL[r as usize] == r`).
    pub const ALL: [ShedReason; 7] = [
        ShedReason::DailyRequests,
        ShedReason::DailyTokens,
        ShedReason::DailyCost,
        ShedReason::PriorityOverRate,
        ShedReason::QueueFull,
        ShedReason::Stale,
        ShedReason::Shutdown,
    ];

    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ShedReason::DailyRequests => "daily_requests",
            ShedReason::DailyTokens => "daily_tokens",
            ShedReason::DailyCost => "daily_cost",
            ShedReason::PriorityOverRate => "priority_over_rate",
            ShedReason::QueueFull => "queue_full",
            ShedReason::Stale => "stale",
            ShedReason::Shutdown => "shutdown",
        }
    }
}

/// Daily caps (0 = none).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DailyCaps {
    /// Judgments sent to the LLM per day.
    pub requests: u64,
    /// Prompt plus completion tokens per day.
    pub tokens: u64,
    /// Cost per day, in the currency of the prices.
    pub cost: f64,
}

/// Prices per 1,000 tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Prices {
    /// Per 1,000 prompt (input) tokens.
    pub input_per_1k: f64,
    /// Per 1,000 completion (output) tokens.
    pub output_per_1k: f64,
}

impl Prices {
    /// The cost of `usage`.
    pub fn cost(&self, usage: &TokenUsage) -> f64 {
        usage.prompt_tokens as f64 / 1000.0 * self.input_per_1k
            + usage.completion_tokens as f64 / 1000.0 * self.output_per_1k
    }
}

/// What was spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spend {
    /// Judgments sent to the LLM (cache hits excluded).
    pub requests: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Cost at the configured prices.
    pub cost: f64,
}

impl Spend {
    /// Prompt plus completion tokens.
    pub fn tokens(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// Today's and the run's spend against the daily caps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BudgetLedger {
    caps: DailyCaps,
    prices: Prices,
    day: i64,
    today: Spend,
    reserved: u64,
    total: Spend,
}

impl BudgetLedger {
    /// A ledger with `caps` and `prices`.
    pub fn new(caps: DailyCaps, prices: Prices) -> BudgetLedger {
        BudgetLedger {
            caps,
            prices,
            day: i64::MIN,
            ..BudgetLedger::default()
        }
    }

    fn roll(&mut self, day: i64) {
        if day != self.day {
            self.day = day;
            self.today = Spend::default();
        }
    }

    /// Reserve one request on `day`, or say which cap stops it.
    pub fn try_reserve(&mut self, day: i64) -> Result<(), ShedReason> {
        self.roll(day);
        let caps = self.caps;
        if caps.requests > 0 && self.today.requests + self.reserved >= caps.requests {
            return Err(ShedReason::DailyRequests);
        }
        if caps.tokens > 0 && self.today.tokens() >= caps.tokens {
            return Err(ShedReason::DailyTokens);
        }
        if caps.cost > 0.0 && self.today.cost >= caps.cost {
            return Err(ShedReason::DailyCost);
        }
        self.reserved += 1;
        Ok(())
    }

    /// A reserved judgment was answered without an LLM request (cache hit, or it failed before
    /// sending): free its reservation.
    pub fn release(&mut self) {
        self.reserved = self.reserved.saturating_sub(1);
    }

    /// A reserved judgment was sent on `day` and spent `usage`.
    pub fn settle(&mut self, day: i64, usage: &TokenUsage) {
        self.reserved = self.reserved.saturating_sub(1);
        self.roll(day);
        let cost = self.prices.cost(usage);
        for spend in [&mut self.today, &mut self.total] {
            spend.requests += 1;
            spend.prompt_tokens += usage.prompt_tokens;
            spend.completion_tokens += usage.completion_tokens;
            spend.cost += cost;
        }
    }

    /// Spent today.
    pub fn today(&self) -> Spend {
        self.today
    }

    /// Spent since the ledger was made.
    pub fn total(&self) -> Spend {
        self.total
    }

    /// The caps.
    pub fn caps(&self) -> DailyCaps {
        self.caps
    }

    /// The prices.
    pub fn prices(&self) -> Prices {
        self.prices
    }

    /// What is left today under each cap (`None` for caps that are off).
    pub fn left_today(&self) -> (Option<u64>, Option<u64>, Option<f64>) {
        let c = self.caps;
        (
            (c.requests > 0).then(|| c.requests.saturating_sub(self.today.requests)),
            (c.tokens > 0).then(|| c.tokens.saturating_sub(self.today.tokens())),
            (c.cost > 0.0).then(|| (c.cost - self.today.cost).max(0.0)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_reason_at_its_index() {
        // An exhaustive match: a new reason does not compile until it is listed here and in ALL.
        let index = |r: ShedReason| match r {
            ShedReason::DailyRequests => 0,
            ShedReason::DailyTokens => 1,
            ShedReason::DailyCost => 2,
            ShedReason::PriorityOverRate => 3,
            ShedReason::QueueFull => 4,
            ShedReason::Stale => 5,
            ShedReason::Shutdown => 6,
        };
        for (i, r) in ShedReason::ALL.into_iter().enumerate() {
            assert_eq!((index(r), r as usize), (i, i), "{r:?}");
        }
    }

    fn usage(p: u64, c: u64) -> TokenUsage {
        TokenUsage {
            prompt_tokens: p,
            completion_tokens: c,
        }
    }

    #[test]
    fn the_request_cap_counts_reservations_and_resets_daily() {
        let mut ledger = BudgetLedger::new(
            DailyCaps {
                requests: 2,
                ..DailyCaps::default()
            },
            Prices::default(),
        );
        ledger.try_reserve(1).unwrap();
        ledger.try_reserve(1).unwrap();
        assert_eq!(ledger.try_reserve(1), Err(ShedReason::DailyRequests));
        ledger.release();
        ledger.try_reserve(1).unwrap();
        ledger.settle(1, &usage(10, 1));
        ledger.settle(1, &usage(10, 1));
        assert_eq!(ledger.try_reserve(1), Err(ShedReason::DailyRequests));
        assert_eq!(ledger.left_today().0, Some(0));
        // A new UTC day.
        ledger.try_reserve(2).unwrap();
        assert_eq!(ledger.total().requests, 2);
    }

    #[test]
    fn cost_follows_the_prices_and_stops_at_the_cap() {
        let prices = Prices {
            input_per_1k: 0.5,
            output_per_1k: 1.5,
        };
        assert!((prices.cost(&usage(2000, 1000)) - 2.5).abs() < 1e-12);
        let mut ledger = BudgetLedger::new(
            DailyCaps {
                cost: 3.0,
                ..DailyCaps::default()
            },
            prices,
        );
        ledger.try_reserve(7).unwrap();
        ledger.settle(7, &usage(2000, 1000));
        ledger.try_reserve(7).unwrap();
        ledger.settle(7, &usage(2000, 1000));
        assert_eq!(ledger.try_reserve(7), Err(ShedReason::DailyCost));
        assert!((ledger.today().cost - 5.0).abs() < 1e-12);
        assert_eq!(ledger.today().tokens(), 6000);
    }
}
