//! The SQL side `ts_ex` shares between its parts: parsing a query, and sqlparser's derived
//! visitor over every expression and every SELECT (nothing skipped because a hand-written match
//! did not list it).

use std::ops::ControlFlow;

use sqlparser::ast::{Expr, Query, SetExpr, Statement, VisitMut, VisitorMut};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;

pub(super) fn parse_query(sql: &str) -> Option<Query> {
    match Parser::parse_sql(&SQLiteDialect {}, sql).ok()?.pop()? {
        Statement::Query(q) => Some(*q),
        _ => None,
    }
}

/// Every expression of a query, pre-order, mutably: sqlparser's derived visitor, so every
/// expression kind the parser produces is entered (CTEs, subqueries anywhere, function
/// arguments, CASE, window specifications, ORDER BY, LIMIT, …) — nothing is skipped because a
/// hand-written match did not list it. An expression `f` replaces is walked as replaced.
pub(super) fn each_expr(q: &mut Query, f: &mut dyn FnMut(&mut Expr)) {
    struct Exprs<'a>(&'a mut dyn FnMut(&mut Expr));
    impl VisitorMut for Exprs<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            (self.0)(expr);
            ControlFlow::Continue(())
        }
    }
    let _ = q.visit(&mut Exprs(f));
}

/// Every SELECT of a query, mutably: those of every query the visitor meets (the outer one,
/// CTEs, derived tables in FROM and in joins, subqueries in any expression), each query's
/// set-operation tree walked to its SELECTs.
pub(super) fn each_select(q: &mut Query, f: &mut dyn FnMut(&mut sqlparser::ast::Select)) {
    fn selects(body: &mut SetExpr, f: &mut dyn FnMut(&mut sqlparser::ast::Select)) {
        match body {
            SetExpr::Select(s) => f(s),
            SetExpr::SetOperation { left, right, .. } => {
                selects(left, f);
                selects(right, f);
            }
            // A parenthesised query is a query of its own: the visitor brings it.
            SetExpr::Query(_)
            | SetExpr::Values(_)
            | SetExpr::Insert(_)
            | SetExpr::Update(_)
            | SetExpr::Delete(_)
            | SetExpr::Merge(_)
            | SetExpr::Table(_) => {}
        }
    }
    struct Selects<'a>(&'a mut dyn FnMut(&mut sqlparser::ast::Select));
    impl VisitorMut for Selects<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
            selects(&mut query.body, self.0);
            ControlFlow::Continue(())
        }
    }
    let _ = q.visit(&mut Selects(f));
}
