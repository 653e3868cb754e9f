//! Exact set matching: the original Spider ESM ([`spider`], a faithful port of the official
//! evaluator) and ESM+ ([`plus`], the fixes and equivalence rules of the ESM+ paper).

pub mod ir;
mod original;
pub mod plus;
pub mod spider;

pub use crate::catalogue::{DbSchema, SchemaCatalog};
pub use original::{EsmOutcome, esm};
pub use spider::{SpiderEvalOptions, SpiderSchema};
