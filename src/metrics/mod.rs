//! Gold metrics: EX, ESM, ESM+ (this module), Hybrid-EX, FLEX, ROSE (elsewhere).
//!
//! Everything here is pure and synchronous: execution goes through the
//! [`crate::exec::Executor`] trait and schemas are loaded at the edge.

pub mod avoid;
pub mod esm;
pub mod ex;
pub mod flex;
pub mod gold;
pub mod hybrid_ex;
pub mod judged;
pub mod rose;
