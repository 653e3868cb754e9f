//! sqlgrade-core: the pure scoring core of sqlgrade.
//!
//! Everything here is deterministic computation over values: no runtime, no network, no files,
//! no databases (Cargo enforces it — this crate depends on none of tokio, reqwest, rusqlite,
//! rdkafka or clickhouse). The daemon crate (`sqlgrade`) owns every edge and hands the core what
//! it needs through small traits: a [`judge::Judge`] or [`judge::StructuredJudge`] for verdicts,
//! an [`exec::Executor`] for SQL results, an [`metrics::offload::Offload`] for CPU-heavy steps.
//!
//! Layers (a module imports only modules above it in this list; see `ARCHITECTURE.md`):
//!
//! 1. [`event`], [`evaluation`], [`review`] — the input and output contracts (and the human
//!    labels and review-queue order the review page uses).
//! 2. [`sqlspec`] — SQL-side spec extraction with sqlparser.
//! 3. [`stef`] — the schema-free score (question spec, alignment, rules, Φ, rows).
//! 4. [`judge`] — the judge seams and the deterministic judge.
//! 5. [`exec`] — result sets and the executor seam.
//! 6. [`metrics`] — EX, ESM, ESM+, FLEX, ROSE, Hybrid-EX.

pub mod catalogue;
pub mod evaluation;
pub mod event;
pub mod exec;
pub mod judge;
pub mod metrics;
pub mod review;
pub mod sampling;
pub mod sqlspec;
pub mod stef;
