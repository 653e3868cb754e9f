//! `ts_ex`, execution on generated databases (the Spider test-suite idea, Zhong et al. 2020):
//! the pieces that need no database — near-miss **mutants** of the gold query, the
//! **literals** the gold query compares with, and the verdict types — and the [`SuiteCheck`]
//! seam the edge implements (generating databases, distilling them against the mutants,
//! executing gold and prediction on them in memory).
//!
//! A mutant changes one thing a wrong prediction typically gets wrong: a comparison (`>` and
//! `>=`, `=` and `!=`), a dropped condition (one side of AND / OR), an aggregate (MAX and MIN,
//! SUM and AVG, COUNT with and without DISTINCT), DISTINCT toggled, an inner join made outer
//! (and back), a sort direction, a LIMIT, IS NULL and IN negated, COUNT(c) as COUNT(*). A generated database that
//! tells the gold query from a mutant is kept in the suite: it exercises exactly the
//! difference the mutant makes.
//!
//! Generated databases keep the database's constraints ([`constraints`]: declared, observed in
//! the real data, or assumed from the schema) for `ts_ex`; `ts_ex_strict` uses none
//! ([`SuiteMode`]).

mod check;
pub mod constraints;
mod sql_text;
pub mod suspect;
mod syntax;

pub use check::{
    Counterexample, Literal, SHOWN_ROWS, ShownResult, SuiteCheck, SuiteMode, TsError, TsOutcome,
    literal_numbers, literals, mutants, tables_read,
};
