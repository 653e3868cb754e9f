//! Scoring, in one room: the [`Scorer`] (one validated [`Event`] in, its evaluation rows out),
//! the gold wiring ([`gold`]: EX/ESM/ESM+ and the LLM-judged metrics over SQLite) and the rule
//! profiles it reads ([`profiles`]).
//!
//! STEF runs as [`stef::prepare_with`] (with the event's catalogue schema, [`catalogues`]) →
//! [`Judge::assess`] → [`stef::finish`] → row — the
//! same core entry points tests and benches use. The scorer never loses an event: SQL that
//! cannot be scored becomes a Φ = 0 row with an explicit status ([`stef::non_scorable_row`]),
//! and a failing judge is replaced by the deterministic judge, the row then carrying status
//! `judge_fallback` and the judge's error in `details.judge_error`. Gold metrics plug in
//! through the optional [`GoldMetrics`] hook.

pub mod catalogues;
pub mod config;
pub mod gold;
pub mod probe;
pub mod profiles;
pub mod sqlite;
pub(crate) mod thread_copies;
pub use catalogues::{CatalogueStore, CatalogueWatcher, SelectedSchema};
pub use profiles::{ProfileLookup, SingleProfile, WatchedRules};
mod scorer;

pub use scorer::{GoldMetrics, Scorer, ScorerOptions, now_rfc3339};
