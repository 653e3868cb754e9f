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

#[cfg(test)]
mod tests;

use sqlparser::ast::Query;

use super::{Clause, SqlSpec};
use ast::dedup_in_place;
pub(crate) use references::references_of_query;

/// Maximum total nesting of the walk (query levels, boolean structure, expression depth).
/// Deeper input yields an error rather than unbounded recursion.
pub(crate) const MAX_NESTING: u32 = 1000;

/// Stack head-room below which a recursive step moves to a fresh heap-allocated stack segment.
const STACK_RED_ZONE: usize = 64 * 1024;
/// Size of each extra stack segment.
const STACK_SEGMENT: usize = 1024 * 1024;

/// Placeholder written when rendering stops at the nesting limit.
const ELLIPSIS: &str = "…";

/// An aliased projection of one SELECT, for alias resolution in HAVING / WHERE.
struct AliasEntry {
    alias: String,
    expr: String,
    /// The aliased expression aggregates: only HAVING can mean it (in WHERE the name must be a
    /// column).
    aggregate: bool,
}

/// How a query level participates in the outermost spec.
#[derive(Clone, Copy)]
struct Role {
    /// This level's (left-most) SELECT defines the spec's projections / GROUP BY / DISTINCT.
    projections: bool,
    /// This query's ORDER BY / LIMIT are the spec's.
    order_limit: bool,
}

impl Role {
    const TOP: Role = Role {
        projections: true,
        order_limit: true,
    };
    const NESTED: Role = Role {
        projections: false,
        order_limit: false,
    };
}

/// Context of a boolean walk.
#[derive(Clone, Copy)]
struct BoolCtx<'a> {
    clause: Clause,
    depth: u32,
    /// Inside `JOIN … ON`: only predicates with a literal side are filters.
    join: bool,
    /// Under an OR (or a UNION branch).
    disj: bool,
    /// Under an odd number of NOTs.
    negated: bool,
    aliases: &'a [AliasEntry],
}

/// Left-hand side of a filter after normalization.
struct Lhs {
    text: String,
    /// The lhs is a year idiom (`year(d)`), so four-digit values become numbers.
    year: bool,
}

/// The walker state; produces one [`SqlSpec`].
pub(crate) struct Walker {
    spec: SqlSpec,
    /// AND-group id of each filter in `spec.filters` (year ranges merge within a group).
    groups: Vec<u32>,
    next_group: u32,
    nesting: u32,
    too_deep: bool,
    /// Set while walking UNION branches and the subqueries of a predicate under OR: filters
    /// found meanwhile are alternatives.
    in_alternative: bool,
    /// Treat a double-quoted single identifier used as a value as a string literal (SQLite,
    /// MySQL and generic SQL written for them use `"x"` for strings).
    dquote_strings: bool,
}

/// Walk `query` into a spec. `Err` carries the message when the input nests too deeply.
pub(crate) fn spec_of_query(query: &Query, dquote_strings: bool) -> Result<SqlSpec, String> {
    let mut walker = Walker {
        spec: SqlSpec::default(),
        groups: Vec::new(),
        next_group: 0,
        nesting: 0,
        too_deep: false,
        in_alternative: false,
        dquote_strings,
    };
    walker.walk_query(query, 0, Role::TOP);
    if walker.too_deep {
        return Err(format!(
            "query nesting exceeds {MAX_NESTING} levels (expressions, subqueries, boolean structure)"
        ));
    }
    let mut spec = walker.spec;
    dedup_in_place(&mut spec.aggregations);
    Ok(spec)
}

impl Walker {
    // ---------------------------------------------------------------- nesting guard

    /// Enter one recursion level; `false` (and the error flag) past [`MAX_NESTING`].
    pub(super) fn enter(&mut self) -> bool {
        if self.nesting >= MAX_NESTING {
            self.too_deep = true;
            return false;
        }
        self.nesting += 1;
        true
    }

    pub(super) fn leave(&mut self) {
        self.nesting = self.nesting.saturating_sub(1);
    }
}
