//! Canonical forms: literals stripped (as ESM does), comparisons turned one way, predicates
//! and lists ordered.

use super::options::EsmPlusOptions;
use super::walk::for_each_child_query;
use crate::metrics::esm::ir::{CmpOp, Expr, Pred, Query};

pub(super) fn canon_query(q: &mut Query, opts: EsmPlusOptions) {
    for_each_child_query(q, &mut |c| canon_query(c, opts));
    if !opts.distinct_check {
        q.distinct = false;
    }
    for e in &mut q.select {
        canon_expr(e, opts);
    }
    q.select.sort();
    if q.all_inner() {
        q.from.sort();
    }
    for p in &mut q.on {
        canon_pred(p, opts);
    }
    let mut on: Vec<Pred> = Vec::new();
    for p in q.on.drain(..) {
        match p {
            Pred::And(parts) => on.extend(parts),
            other => on.push(other),
        }
    }
    on.sort();
    q.on = on;
    if let Some(w) = &mut q.where_ {
        canon_pred(w, opts);
    }
    if matches!(&q.where_, Some(Pred::And(v)) if v.is_empty()) {
        q.where_ = None;
    }
    for e in &mut q.group_by {
        canon_expr(e, opts);
    }
    if !opts.paper_compat {
        q.group_by.sort();
        q.group_by.dedup();
    }
    if let Some(h) = &mut q.having {
        canon_pred(h, opts);
    }
    for k in &mut q.order_by {
        canon_expr(&mut k.expr, opts);
    }
    if opts.paper_compat {
        // One direction for the whole clause: the last explicit one, default ASC.
        let dir = q
            .order_by
            .iter()
            .rev()
            .find(|k| k.explicit)
            .is_some_and(|k| k.desc);
        for k in &mut q.order_by {
            k.desc = dir;
            k.explicit = true;
        }
    } else {
        for k in &mut q.order_by {
            k.explicit = true;
        }
    }
}

pub(super) fn is_literal(e: &Expr) -> bool {
    matches!(e, Expr::Num(_) | Expr::Str(_) | Expr::Null | Expr::Value)
}

pub(super) fn canon_expr(e: &mut Expr, opts: EsmPlusOptions) {
    match e {
        Expr::Agg { distinct, arg, .. } => {
            if !opts.distinct_check {
                *distinct = false;
            }
            canon_expr(arg, opts);
        }
        Expr::Func { args, .. } => args.iter_mut().for_each(|a| canon_expr(a, opts)),
        Expr::Bin { op, l, r } => {
            canon_expr(l, opts);
            canon_expr(r, opts);
            if (op == "+" || op == "*") && r < l {
                std::mem::swap(l, r);
            }
        }
        Expr::Neg(x) => canon_expr(x, opts),
        Expr::Sub(q) => canon_query(q, opts),
        Expr::Pred(p) => canon_pred(p, opts),
        _ => {}
    }
}

pub(super) fn strip_value(e: &mut Expr, opts: EsmPlusOptions) {
    if !opts.value_check && matches!(e, Expr::Num(_) | Expr::Str(_)) {
        *e = Expr::Value;
    }
}

pub(super) fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Ge => CmpOp::Le,
        other => other,
    }
}

pub(super) fn canon_pred(p: &mut Pred, opts: EsmPlusOptions) {
    match p {
        Pred::And(_) | Pred::Or(_) => {
            let is_and = matches!(p, Pred::And(_));
            let children = match p {
                Pred::And(c) | Pred::Or(c) => c,
                _ => return,
            };
            let mut flat = Vec::new();
            for mut c in children.drain(..) {
                canon_pred(&mut c, opts);
                match c {
                    Pred::And(v) if is_and => flat.extend(v),
                    Pred::Or(v) if !is_and => flat.extend(v),
                    other => flat.push(other),
                }
            }
            flat.sort();
            flat.dedup();
            if flat.len() == 1 {
                if let Some(only) = flat.pop() {
                    *p = only;
                }
            } else if is_and {
                *p = Pred::And(flat);
            } else {
                *p = Pred::Or(flat);
            }
        }
        Pred::Not(inner) => canon_pred(inner, opts),
        Pred::Cmp { op, l, r } => {
            canon_expr(l, opts);
            canon_expr(r, opts);
            strip_value(l, opts);
            strip_value(r, opts);
            let swap = (is_literal(l) && !is_literal(r))
                || (matches!(op, CmpOp::Eq | CmpOp::Ne)
                    && matches!((&*l, &*r), (Expr::Col(_), Expr::Col(_)))
                    && r < l);
            if swap {
                std::mem::swap(l, r);
                *op = flip(*op);
            }
        }
        Pred::Between { e, lo, hi, .. } => {
            for x in [e, lo, hi] {
                canon_expr(x, opts);
                strip_value(x, opts);
            }
        }
        Pred::InList { e, list, .. } => {
            canon_expr(e, opts);
            for x in list.iter_mut() {
                canon_expr(x, opts);
                strip_value(x, opts);
            }
            list.sort();
        }
        Pred::InSub { e, q, .. } => {
            canon_expr(e, opts);
            canon_query(q, opts);
        }
        Pred::Like { e, pat, .. } => {
            canon_expr(e, opts);
            canon_expr(pat, opts);
            strip_value(pat, opts);
        }
        Pred::IsNull { e, .. } => canon_expr(e, opts),
        Pred::Exists { q, .. } => canon_query(q, opts),
        Pred::Expr(e) => canon_expr(e, opts),
    }
}

// ------------------------------------------------------------------------------------------
// Traversal helpers.
