//! sqlgrade: continuous quality scoring for text-to-SQL agents.
//!
//! The crate is a pipeline of *sources → scorer → sinks* (see `DESIGN.md`). Domain code
//! ([`sqlspec`], [`stef`], [`metrics`]) is pure and synchronous; everything that performs I/O
//! (sources, sinks, judge clients, executors) lives at the edges behind small traits.

pub mod alert;
pub mod backfill;
pub mod calibrate;
pub mod config;
pub mod evaluation;
pub mod event;
pub mod exec;
pub mod health;
pub mod judge;
pub mod metrics;
pub mod migrate;
pub mod pipeline;
pub mod report;
pub mod scorer;
pub mod sink;
pub mod source;
pub mod sqlspec;
pub mod stef;
pub mod summary;
pub mod telemetry;
pub mod testdata;
