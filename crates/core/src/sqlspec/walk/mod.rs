//! The AST walk: one pass over a parsed query that fills a [`SqlSpec`]. Like sqlparser's own
//! `impl Parser`, the walker's methods are spread over files with one job each; this file holds
//! the walker's state and entry point.
//!
//! Structure:
//! - `walk_query` / `walk_set_expr` / `walk_select` follow the query tree (CTEs and subqueries at
//!   `depth + 1`); the outermost SELECT (left-most for set operations) defines projections,
//!   GROUP BY, DISTINCT, and the outermost query ORDER BY / LIMIT.
//! - `walk_bool` splits WHERE / HAVING / ON into conjunctions and disjunctions (iteratively, so
//!   long `AND`/`OR` chains cost no stack), and `atomic` turns each predicate into filters.
//! - `scan_expr` finds aggregates, window functions, columns and subqueries in any expression.
//! - `render` writes normalized expression text (names unqualified and lowercased, literals
//!   normalized, year idioms as `year(d)`).
//!
//! Every recursive entry point goes through [`Walker::enter`], which bounds the total nesting
//! (a clean error instead of unbounded work) and grows the stack on demand.

mod ast;
mod filters;
mod query;
mod references;
mod render;
mod scan;
mod walker;

#[cfg(test)]
mod tests;

pub(crate) use references::references_of_query;
pub(crate) use walker::spec_of_query;
