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
//! Its modules sit in layers (a module imports only from lower layers); the one list of them
//! is the table under "### `src`" in `ARCHITECTURE.md`, which
//! `crates/architecture/tests/architecture.rs` reads and checks against the code. The command line is the binary `src/bin/sqlgrade/`, one module
//! per command.

pub use sqlgrade_core::{
    catalogue, errors, evaluation, event, exec, json_text, judge, metrics, review, sampling, spans,
    sqlspec, stef,
};

pub mod alerts;
pub mod assembly;
pub mod commands;
pub mod config;
pub mod llm;
pub mod pipeline;
pub mod review_page;
pub mod score;
pub mod second_pass;
pub mod settings;
pub mod sources;
pub mod stores;
pub mod telemetry;
