//! Gold metrics: EX, ESM, ESM+ (this module), Hybrid-EX, FLEX, ROSE (elsewhere).
//!
//! Everything here is pure and synchronous: execution goes through the
//! [`crate::exec::Executor`] trait and schemas are loaded at the edge.

pub mod esm;
pub mod ex;
pub mod gold;
