//! The walker's state and entry point ([`spec_of_query`]); its methods live in the sibling
//! files, one job each (the module documentation of [`super`]).

use sqlparser::ast::Query;

use super::super::{Clause, SqlSpec};
use super::ast::dedup_in_place;

/// Maximum total nesting of the walk (query levels, boolean structure, expression depth).
/// Deeper input yields an error rather than unbounded recursion.
pub(super) const MAX_NESTING: u32 = 1000;

/// Stack head-room below which a recursive step moves to a fresh heap-allocated stack segment.
pub(super) const STACK_RED_ZONE: usize = 64 * 1024;
/// Size of each extra stack segment.
pub(super) const STACK_SEGMENT: usize = 1024 * 1024;

/// Placeholder written when rendering stops at the nesting limit.
pub(super) const ELLIPSIS: &str = "…";

/// An aliased projection of one SELECT, for alias resolution in HAVING / WHERE.
pub(super) struct AliasEntry {
    pub(super) alias: String,
    pub(super) expr: String,
    /// The aliased expression aggregates: only HAVING can mean it (in WHERE the name must be a
    /// column).
    pub(super) aggregate: bool,
}

/// How a query level participates in the outermost spec.
#[derive(Clone, Copy)]
pub(super) struct Role {
    /// This level's (left-most) SELECT defines the spec's projections / GROUP BY / DISTINCT.
    pub(super) projections: bool,
    /// This query's ORDER BY / LIMIT are the spec's.
    pub(super) order_limit: bool,
}

impl Role {
    pub(super) const TOP: Role = Role {
        projections: true,
        order_limit: true,
    };
    pub(super) const NESTED: Role = Role {
        projections: false,
        order_limit: false,
    };
}

/// Context of a boolean walk.
#[derive(Clone, Copy)]
pub(super) struct BoolCtx<'a> {
    pub(super) clause: Clause,
    pub(super) depth: u32,
    /// Inside `JOIN … ON`: only predicates with a literal side are filters.
    pub(super) join: bool,
    /// Under an OR (or a UNION branch).
    pub(super) disj: bool,
    /// Under an odd number of NOTs.
    pub(super) negated: bool,
    pub(super) aliases: &'a [AliasEntry],
}

/// Left-hand side of a filter after normalization.
pub(super) struct Lhs {
    pub(super) text: String,
    /// The lhs is a year idiom (`year(d)`), so four-digit values become numbers.
    pub(super) year: bool,
}

/// The walker state; produces one [`SqlSpec`].
pub(super) struct Walker {
    pub(super) spec: SqlSpec,
    /// AND-group id of each filter in `spec.filters` (year ranges merge within a group).
    pub(super) groups: Vec<u32>,
    pub(super) next_group: u32,
    pub(super) nesting: u32,
    pub(super) too_deep: bool,
    /// Set while walking UNION branches and the subqueries of a predicate under OR: filters
    /// found meanwhile are alternatives.
    pub(super) in_alternative: bool,
    /// Treat a double-quoted single identifier used as a value as a string literal (SQLite,
    /// MySQL and generic SQL written for them use `"x"` for strings).
    pub(super) dquote_strings: bool,
}

/// A query nested deeper than the walk follows ([`MAX_NESTING`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("query nesting exceeds {MAX_NESTING} levels (expressions, subqueries, boolean structure)")]
pub(crate) struct NestingTooDeep;

/// Walk `query` into a spec; `Err` when the input nests too deeply.
pub(crate) fn spec_of_query(
    query: &Query,
    dquote_strings: bool,
) -> Result<SqlSpec, NestingTooDeep> {
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
        return Err(NestingTooDeep);
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
