//! The walks over ESM+'s query tree every step shares: child queries, a query's own
//! expressions and predicates, columns, conjuncts.

use crate::metrics::esm::ir::{Expr, FromItem, Pred, Query};

pub(super) fn for_each_child_query(q: &mut Query, f: &mut dyn FnMut(&mut Query)) {
    for item in &mut q.from {
        if let FromItem::Sub(s) = item {
            f(s);
        }
    }
    for e in &mut q.select {
        expr_queries(e, f);
    }
    for p in &mut q.on {
        pred_queries(p, f);
    }
    if let Some(w) = &mut q.where_ {
        pred_queries(w, f);
    }
    for e in &mut q.group_by {
        expr_queries(e, f);
    }
    if let Some(h) = &mut q.having {
        pred_queries(h, f);
    }
    for k in &mut q.order_by {
        expr_queries(&mut k.expr, f);
    }
    if let Some((_, r)) = &mut q.set_op {
        f(r);
    }
}

pub(super) fn expr_queries(e: &mut Expr, f: &mut dyn FnMut(&mut Query)) {
    match e {
        Expr::Sub(q) => f(q),
        Expr::Agg { arg, .. } => expr_queries(arg, f),
        Expr::Func { args, .. } => args.iter_mut().for_each(|a| expr_queries(a, f)),
        Expr::Bin { l, r, .. } => {
            expr_queries(l, f);
            expr_queries(r, f);
        }
        Expr::Neg(x) => expr_queries(x, f),
        Expr::Pred(p) => pred_queries(p, f),
        _ => {}
    }
}

pub(super) fn pred_queries(p: &mut Pred, f: &mut dyn FnMut(&mut Query)) {
    match p {
        Pred::And(v) | Pred::Or(v) => v.iter_mut().for_each(|c| pred_queries(c, f)),
        Pred::Not(x) => pred_queries(x, f),
        Pred::Cmp { l, r, .. } => {
            expr_queries(l, f);
            expr_queries(r, f);
        }
        Pred::Between { e, lo, hi, .. } => {
            for x in [e, lo, hi] {
                expr_queries(x, f);
            }
        }
        Pred::InList { e, list, .. } => {
            expr_queries(e, f);
            list.iter_mut().for_each(|x| expr_queries(x, f));
        }
        Pred::InSub { e, q, .. } => {
            expr_queries(e, f);
            f(q);
        }
        Pred::Like { e, pat, .. } => {
            expr_queries(e, f);
            expr_queries(pat, f);
        }
        Pred::IsNull { e, .. } => expr_queries(e, f),
        Pred::Exists { q, .. } => f(q),
        Pred::Expr(e) => expr_queries(e, f),
    }
}

/// Visit every expression of this query's own clauses (not subqueries); `on` included when
/// `with_on`.
pub(super) fn own_exprs_mut(q: &mut Query, with_on: bool, f: &mut dyn FnMut(&mut Expr)) {
    for e in &mut q.select {
        expr_visit(e, f);
    }
    if with_on {
        for p in &mut q.on {
            pred_visit(p, f);
        }
    }
    if let Some(w) = &mut q.where_ {
        pred_visit(w, f);
    }
    for e in &mut q.group_by {
        expr_visit(e, f);
    }
    if let Some(h) = &mut q.having {
        pred_visit(h, f);
    }
    for k in &mut q.order_by {
        expr_visit(&mut k.expr, f);
    }
}

pub(super) fn expr_visit(e: &mut Expr, f: &mut dyn FnMut(&mut Expr)) {
    match e {
        Expr::Agg { arg, .. } => expr_visit(arg, f),
        Expr::Func { args, .. } => args.iter_mut().for_each(|a| expr_visit(a, f)),
        Expr::Bin { l, r, .. } => {
            expr_visit(l, f);
            expr_visit(r, f);
        }
        Expr::Neg(x) => expr_visit(x, f),
        Expr::Pred(p) => pred_visit(p, f),
        _ => {}
    }
    f(e);
}

pub(super) fn pred_visit(p: &mut Pred, f: &mut dyn FnMut(&mut Expr)) {
    match p {
        Pred::And(v) | Pred::Or(v) => v.iter_mut().for_each(|c| pred_visit(c, f)),
        Pred::Not(x) => pred_visit(x, f),
        Pred::Cmp { l, r, .. } => {
            expr_visit(l, f);
            expr_visit(r, f);
        }
        Pred::Between { e, lo, hi, .. } => {
            for x in [e, lo, hi] {
                expr_visit(x, f);
            }
        }
        Pred::InList { e, list, .. } => {
            expr_visit(e, f);
            list.iter_mut().for_each(|x| expr_visit(x, f));
        }
        Pred::InSub { e, .. } => expr_visit(e, f),
        Pred::Like { e, pat, .. } => {
            expr_visit(e, f);
            expr_visit(pat, f);
        }
        Pred::IsNull { e, .. } => expr_visit(e, f),
        Pred::Exists { .. } => {}
        Pred::Expr(e) => expr_visit(e, f),
    }
}

/// Every column (and `t.*`) mentioned anywhere in the query, subqueries included.
pub(super) fn all_columns(q: &mut Query) -> Vec<String> {
    let mut out = Vec::new();
    collect_cols(q, &mut out);
    out
}

pub(super) fn collect_cols(q: &mut Query, out: &mut Vec<String>) {
    // Columns only; a bare `*` (COUNT(*)) names no column. `SELECT *` and `t.*` in the
    // select list are reported as `*` / `t.*`.
    for e in &q.select {
        match e {
            Expr::Star(Some(t)) => out.push(format!("{t}.*")),
            Expr::Star(None) => out.push("*".into()),
            _ => {}
        }
    }
    own_exprs_mut(q, true, &mut |e| {
        if let Expr::Col(c) = e {
            out.push(c.clone());
        }
    });
    for_each_child_query(q, &mut |c| collect_cols(c, out));
}

pub(super) fn table_of(col: &str) -> &str {
    col.split_once('.').map_or("", |(t, _)| t)
}

pub(super) fn conjuncts(p: Option<Pred>) -> Vec<Pred> {
    match p {
        None => Vec::new(),
        Some(Pred::And(v)) => v,
        Some(other) => vec![other],
    }
}

pub(super) fn from_conjuncts(mut v: Vec<Pred>) -> Option<Pred> {
    match v.len() {
        0 => None,
        1 => v.pop(),
        _ => Some(Pred::And(v)),
    }
}

pub(super) fn has_agg(e: &Expr) -> bool {
    match e {
        Expr::Agg { .. } => true,
        Expr::Func { args, .. } => args.iter().any(has_agg),
        Expr::Bin { l, r, .. } => has_agg(l) || has_agg(r),
        Expr::Neg(x) => has_agg(x),
        _ => false,
    }
}

pub(super) fn is_simple(q: &Query) -> bool {
    q.group_by.is_empty()
        && q.having.is_none()
        && q.order_by.is_empty()
        && q.limit.is_none()
        && q.offset.is_none()
        && q.set_op.is_none()
}

// ------------------------------------------------------------------------------------------
// Rules.
