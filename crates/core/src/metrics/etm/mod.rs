//! ETM (enhanced tree matching, the successor of ESM+ by the same authors): both queries are
//! parsed, rewritten by the ETM rules to a canonical tree, and match when the trees are equal.
//! A faithful port of the released script (`treeMatch.py`, all rules 100–108 and 1–26): see
//! [`rules`] for the rules and [`tree`] for why the trees are modelled as they are.
//!
//! What the script does around the rules, kept here:
//! - **Preprocessing** ([`preprocess`]): backticks become double quotes; a double-quoted word
//!   that names no table or column is a string literal; `datetime()` is `datetime('now')`.
//! - **Validity**: both queries must plan (`EXPLAIN QUERY PLAN`) on a database with the
//!   schema; the check runs at the edge through [`PlanCheck`] — ETM never executes a query.
//! - A prediction that cannot be parsed, or whose rewriting fails where the script raises, does
//!   not match.
//!
//! Pure: the schema comes in as a [`DbSchema`], the planning check through a trait.

mod build;
mod engine;
mod rules;
mod tree;

pub use engine::{EtmGoldError, EtmMiss, EtmOutcome, PlanCheck, PlanError, etm, preprocess};
pub use rules::{EtmSchema, EtmTable};

#[cfg(test)]
mod tests;
