//! Which events the LLM judge sees, what that may cost, and what its sampled verdicts say about
//! all traffic.
//!
//! Every event gets a line-rate STEF row from the deterministic path. The LLM judge sees a
//! subset, chosen here, pure and deterministic:
//!
//! - [`select`]: the uniform slice (a hash of `event_id` and a salt, so redelivery, replay and
//!   every replica decide alike) and the priority slices (line-rate verdict not `correct`, low
//!   confidence, poor tier, the first events of a new series, series an alert fires on);
//! - [`budget`]: the daily caps on requests, tokens and cost, with prices per 1k tokens;
//! - [`estimate`]: prediction-powered inference (Angelopoulos et al., Science 2023) — the mean the
//!   LLM judge would give *all* traffic, from the line-rate mean over every event plus the mean
//!   LLM-minus-line-rate correction on the uniform slice, with a 95% interval. Priority picks
//!   never enter it, so prioritising cannot bias it;
//! - [`agreement`]: how well each judge identity agrees with people (κ and accuracy with 95%
//!   intervals, over every label and over a recent window), kept incrementally, and the
//!   calibration sample (a small uniform sample per judge identity and week for reviewers).

pub mod agreement;
pub mod budget;
pub mod estimate;
pub mod select;
pub mod verdict_fit;

pub use agreement::{
    AgreementKey, AgreementPair, AgreementRow, AgreementSummary, AgreementTracker, Confusion,
    calibration_sample, utc_week, week_start,
};
pub use budget::{BudgetLedger, DailyCaps, Prices, ShedReason, Spend};
pub use estimate::{Estimate, EstimateTracker, Moments, SeriesEstimate};
pub use select::{
    LineRate, Selection, SelectionPolicy, SelectionReason, SeriesFirstSeen, uniform_draw,
};
