//! sqlgrade: continuous quality scoring for text-to-SQL agents — the daemon crate.
//!
//! The scoring core (SQL analysis, STEF, the deterministic judge, the gold-metric algorithms and
//! the row contract) is the pure crate `sqlgrade-core`, re-exported here under its own module
//! names. This crate owns every edge and the topology that joins them (`ARCHITECTURE.md`):
//!
//! ```text
//! source → decode → score → batch → write → ack
//! ```
//!
//! Layers, lowest first (a module imports only from lower layers):
//!
//! 1. the core re-exports ([`event`], [`evaluation`], [`review`], [`sqlspec`], [`stef`],
//!    [`judge`], [`exec`], [`metrics`]) and [`config`] (every setting, declared once);
//! 2. edges, each behind a small trait or type: [`source`], [`sink`], [`clickhouse`], [`llm`],
//!    [`sqlite`], [`health`], [`telemetry`], [`alert`], [`stats`];
//! 3. [`score`] — the scorer (STEF through a judge, gold metrics through executors);
//!    [`judging`] — the LLM second pass; [`serve`] — the review page;
//! 4. [`pipeline`] — the topology;
//! 5. [`build`] — wiring a run from a [`config::Config`]; [`backfill`], [`report`],
//!    [`calibrate`], [`summary`] — the commands' library halves.

pub use sqlgrade_core::{
    catalogue, evaluation, event, exec, judge, metrics, review, sampling, sqlspec, stef,
};

pub mod alert;
pub mod audit;
pub mod backfill;
pub mod build;
pub mod calibrate;
pub mod clickhouse;
pub mod config;
pub mod health;
pub mod judging;
pub mod llm;
pub mod pipeline;
pub mod report;
pub mod score;
pub mod serve;
pub mod sink;
pub mod source;
pub mod sqlite;
pub mod stats;
pub mod summary;
pub mod telemetry;
