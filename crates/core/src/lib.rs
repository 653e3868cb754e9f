//! sqlgrade-core: the pure scoring core of sqlgrade.
//!
//! Everything here is deterministic computation over values: no runtime, no network, no files,
//! no databases (Cargo enforces it — this crate depends on none of tokio, reqwest, rusqlite,
//! rdkafka or clickhouse). The daemon crate (`sqlgrade`) owns every edge and hands the core what
//! it needs through small traits: a [`judge::Judge`] or [`judge::StructuredJudge`] for verdicts,
//! an [`exec::Executor`] for SQL results, an [`metrics::offload::Offload`] for CPU-heavy steps.
//!
//! Its modules sit in layers (a module imports only from lower layers): the input and output
//! contracts, SQL analysis and schema catalogues, STEF, the judge seams, execution, the gold
//! metrics, sampling. The one list of them is the table under "### `crates/core/src`" in
//! `ARCHITECTURE.md`, which `crates/architecture/tests/architecture.rs` reads and checks against
//! the code.

pub mod catalogue;
pub mod errors;
pub mod evaluation;
pub mod event;
pub mod exec;
pub mod json_text;
pub mod judge;
pub mod metrics;
pub mod review;
pub mod sampling;
#[cfg(test)]
mod shared_data;
pub mod spans;
pub mod sqlspec;
pub mod stef;
pub mod words;
