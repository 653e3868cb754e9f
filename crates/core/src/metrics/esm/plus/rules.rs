//! ESM+'s equivalence rules (esm_plus.md §2), each a rewrite applied bottom-up to a fixpoint
//! when its schema preconditions hold (skipped and recorded otherwise).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::canon::canon_query;
use super::options::{EsmPlusOptions, SkippedRule};
use super::walk::{
    all_columns, conjuncts, for_each_child_query, from_conjuncts, has_agg, is_simple,
    own_exprs_mut, table_of,
};
use crate::metrics::esm::ir::{
    CmpOp, Expr, FromItem, JoinKind, OrderKey, PlusSchema, Pred, Query, SetOp,
};

pub(super) struct RuleCx<'a> {
    pub(super) schema: &'a PlusSchema,
    pub(super) opts: EsmPlusOptions,
    pub(super) fired: BTreeSet<u8>,
    pub(super) skipped: &'a mut BTreeSet<SkippedRule>,
}

impl RuleCx<'_> {
    /// Evaluate a schema fact; unknown facts are recorded as a skipped rule.
    pub(super) fn fact(&mut self, rule: u8, fact: Option<bool>, what: &str, col: &str) -> bool {
        match fact {
            Some(b) => b,
            None => {
                self.skipped.insert(SkippedRule {
                    rule,
                    reason: format!(
                        "{what} unknown for {col} (no constraint facts for this database)"
                    ),
                });
                false
            }
        }
    }

    pub(super) fn unique_nn(&mut self, rule: u8, col: &str) -> bool {
        let u = self.schema.unique(col);
        self.fact(rule, u, "UNIQUE", col) && {
            let n = self.schema.not_null(col);
            self.fact(rule, n, "NOT NULL", col)
        }
    }

    pub(super) fn not_null(&mut self, rule: u8, col: &str) -> bool {
        let n = self.schema.not_null(col);
        self.fact(rule, n, "NOT NULL", col)
    }

    pub(super) fn unique(&mut self, rule: u8, col: &str) -> bool {
        let u = self.schema.unique(col);
        self.fact(rule, u, "UNIQUE", col)
    }

    pub(super) fn fire(&mut self, rule: u8) {
        self.fired.insert(rule);
    }
}

/// One bottom-up pass: subqueries first, then the rules in the engine's order (8 and the
/// aggregate-level part of 2 first, as the engine applies them while parsing).
pub(super) fn pass(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    let mut changed = false;
    for_each_child_query(q, &mut |c| changed |= pass(c, cx));
    type Rule = fn(&mut Query, &mut RuleCx<'_>) -> bool;
    let rules: [(u8, Rule); 16] = [
        (8, rule8_drop_is_not_null),
        (2, rule2_agg_distinct),
        (13, rule13_unneeded_join),
        (16, rule16_join_equalities),
        (3, rule3_intersect_to_and),
        (4, rule4_union_to_or),
        (1, rule1_subquery_extreme),
        (9, rule9_order_limit_to_extreme),
        (10, rule10_star),
        (17, rule17_redundant_in),
        (7, rule7_count_star),
        (6, rule6_not_in_to_except),
        (2, rule2_select_distinct),
        (12, rule12_in_to_join),
        (5, rule5_group_by_unique),
        (18, rule18_idempotent_set_op),
    ];
    for (n, rule) in rules {
        if cx.opts.on(n) && rule(q, cx) {
            cx.fire(n);
            changed = true;
        }
    }
    changed
}

/// Rule 8: drop `c IS NOT NULL` conjuncts when c is NOT NULL (inner joins only).
pub(super) fn rule8_drop_is_not_null(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    if !q.all_inner() || q.where_.is_none() {
        return false;
    }
    let parts = conjuncts(q.where_.take());
    let before = parts.len();
    let mut kept = Vec::new();
    for p in parts {
        if let Pred::IsNull {
            e: Expr::Col(c),
            negated: true,
        } = &p
            && cx.not_null(8, c)
        {
            continue;
        }
        kept.push(p);
    }
    let changed = kept.len() != before;
    q.where_ = from_conjuncts(kept);
    changed
}

/// Rule 2 (aggregate level): `AGG(DISTINCT c)` → `AGG(c)` when c is UNIQUE (single table).
pub(super) fn rule2_agg_distinct(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    if q.single_table().is_none() {
        return false;
    }
    let mut cols = Vec::new();
    own_exprs_mut(q, false, &mut |e| {
        if let Expr::Agg {
            distinct: true,
            arg,
            ..
        } = e
            && let Expr::Col(c) = arg.as_ref()
        {
            cols.push(c.clone());
        }
    });
    let ok: BTreeSet<String> = cols.into_iter().filter(|c| cx.unique(2, c)).collect();
    if ok.is_empty() {
        return false;
    }
    let mut changed = false;
    own_exprs_mut(q, false, &mut |e| {
        if let Expr::Agg { distinct, arg, .. } = e
            && *distinct
            && let Expr::Col(c) = arg.as_ref()
            && ok.contains(c)
        {
            *distinct = false;
            changed = true;
        }
    });
    changed
}

/// Rule 2 (SELECT level): drop SELECT DISTINCT when the FROM is one table and a plain selected
/// column is UNIQUE and NOT NULL (A2).
pub(super) fn rule2_select_distinct(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    if !q.distinct || q.single_table().is_none() || !q.group_by.is_empty() {
        return false;
    }
    let cols: Vec<String> = q
        .select
        .iter()
        .filter_map(|e| match e {
            Expr::Col(c) => Some(c.clone()),
            _ => None,
        })
        .collect();
    for c in cols {
        if cx.unique_nn(2, &c) {
            q.distinct = false;
            return true;
        }
    }
    false
}

/// Rule 13: `FROM t2 JOIN t1 ON t1.c1 = t2.c2` → `FROM t2` when t1.c1 is a non-composite PK,
/// t2.c2 a NOT NULL FK to it, and nothing else uses t1 (inner joins only, A4).
pub(super) fn rule13_unneeded_join(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    if q.from.len() < 2 || !q.all_inner() || q.from.iter().any(|f| matches!(f, FromItem::Sub(_))) {
        return false;
    }
    if !q.on.iter().all(|p| {
        matches!(
            p,
            Pred::Cmp {
                op: CmpOp::Eq,
                l: Expr::Col(_),
                r: Expr::Col(_)
            }
        )
    }) {
        return false;
    }
    let tables: Vec<String> = q.base_tables().into_iter().map(str::to_string).collect();
    let used = all_columns(q);
    for t1 in &tables {
        if tables.iter().filter(|t| *t == t1).count() != 1 {
            continue;
        }
        let touching: Vec<usize> =
            q.on.iter()
                .enumerate()
                .filter(|(_, p)| match p {
                    Pred::Cmp {
                        l: Expr::Col(a),
                        r: Expr::Col(b),
                        ..
                    } => table_of(a) == t1 || table_of(b) == t1,
                    _ => false,
                })
                .map(|(i, _)| i)
                .collect();
        let [idx] = touching.as_slice() else { continue };
        let Some(Pred::Cmp {
            l: Expr::Col(a),
            r: Expr::Col(b),
            ..
        }) = q.on.get(*idx)
        else {
            continue;
        };
        let (c1, c2) = if table_of(a) == t1 {
            (a.clone(), b.clone())
        } else {
            (b.clone(), a.clone())
        };
        let t2 = table_of(&c2).to_string();
        if t2 == *t1 || !tables.contains(&t2) {
            continue;
        }
        if cx.schema.fk.get(&c2) != Some(&c1) || !cx.schema.single_pk(&c1) {
            continue;
        }
        // Other uses of t1: only c1 itself (outside the ON condition), no `*` or `t1.*`.
        let on_cols = 2; // a and b of the ON condition
        let t1_uses: Vec<&String> = used
            .iter()
            .filter(|c| c.as_str() == "*" || table_of(c) == t1)
            .collect();
        let extra_bad = t1_uses.iter().any(|c| c.as_str() == "*" || (**c != c1));
        let _ = on_cols;
        if extra_bad {
            continue;
        }
        if !cx.not_null(13, &c2) {
            continue;
        }
        // Apply.
        let pos = tables.iter().position(|t| t == t1).unwrap_or(0);
        q.from.remove(pos);
        if !q.joins.is_empty() {
            q.joins.remove(pos.saturating_sub(1).min(q.joins.len() - 1));
        }
        q.on.remove(*idx);
        own_exprs_mut(q, true, &mut |e| {
            if let Expr::Col(c) = e
                && *c == c1
            {
                *c = c2.clone();
            }
        });
        return true;
    }
    false
}

/// Rule 16: columns equated by inner-join ON conditions are replaced by one representative
/// everywhere in the query's own clauses (A5: inner joins only).
pub(super) fn rule16_join_equalities(q: &mut Query, _cx: &mut RuleCx<'_>) -> bool {
    if !q.all_inner() || q.on.is_empty() {
        return false;
    }
    let mut parent: HashMap<String, String> = HashMap::new();
    fn find(parent: &mut HashMap<String, String>, x: &str) -> String {
        let mut cur = x.to_string();
        while let Some(p) = parent.get(&cur) {
            if *p == cur {
                break;
            }
            cur = p.clone();
        }
        cur
    }
    for p in &q.on {
        if let Pred::Cmp {
            op: CmpOp::Eq,
            l: Expr::Col(a),
            r: Expr::Col(b),
        } = p
        {
            let ra = find(&mut parent, a);
            let rb = find(&mut parent, b);
            parent.entry(ra.clone()).or_insert_with(|| ra.clone());
            parent.entry(rb.clone()).or_insert_with(|| rb.clone());
            if ra != rb {
                let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
                parent.insert(hi, lo);
            }
        }
    }
    let keys: Vec<String> = parent.keys().cloned().collect();
    let rep: HashMap<String, String> = keys
        .into_iter()
        .map(|k| {
            let r = find(&mut parent, &k);
            (k, r)
        })
        .filter(|(k, r)| k != r)
        .collect();
    if rep.is_empty() {
        return false;
    }
    let mut changed = false;
    own_exprs_mut(q, false, &mut |e| {
        if let Expr::Col(c) = e
            && let Some(r) = rep.get(c)
        {
            *c = r.clone();
            changed = true;
        }
    });
    changed
}

pub(super) fn sorted_select(q: &Query) -> Vec<Expr> {
    let mut s = q.select.clone();
    s.sort();
    s
}

/// Shared precondition of rules 3 and 4: the two sides select the same thing from the same
/// single table, and the selection contains a UNIQUE NOT NULL column.
pub(super) fn set_op_merge_ok(q: &Query, r: &Query, rule: u8, cx: &mut RuleCx<'_>) -> bool {
    let Some(t) = q.single_table() else {
        return false;
    };
    if r.single_table() != Some(t)
        || sorted_select(q) != sorted_select(r)
        || q.distinct != r.distinct
        || !q.group_by.is_empty()
        || q.having.is_some()
        || !q.order_by.is_empty()
        || q.limit.is_some()
        || !is_simple(r)
        || q.where_.is_none()
        || r.where_.is_none()
    {
        return false;
    }
    let table = t.to_string();
    for e in &q.select {
        match e {
            Expr::Col(c) if cx.unique_nn(rule, c) => return true,
            Expr::Star(_) => {
                let pk = cx
                    .schema
                    .tables
                    .get(&table)
                    .into_iter()
                    .flatten()
                    .any(|c| cx.schema.single_pk(&format!("{table}.{c}")));
                if pk {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

pub(super) fn merge_set_op(q: &mut Query, want: SetOp, rule: u8, cx: &mut RuleCx<'_>) -> bool {
    let Some((op, r)) = &q.set_op else {
        return false;
    };
    if *op != want {
        return false;
    }
    let r = r.as_ref().clone();
    if !set_op_merge_ok(q, &r, rule, cx) {
        return false;
    }
    let (Some(d1), Some(d2)) = (q.where_.take(), r.where_) else {
        return false;
    };
    q.where_ = Some(if d1 == d2 {
        d1
    } else if want == SetOp::Intersect {
        Pred::And(vec![d1, d2])
    } else {
        Pred::Or(vec![d1, d2])
    });
    q.set_op = None;
    true
}

/// Rule 3: `q WHERE d1 INTERSECT q WHERE d2` → `q WHERE d1 AND d2`.
pub(super) fn rule3_intersect_to_and(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    merge_set_op(q, SetOp::Intersect, 3, cx)
}

/// Rule 4: `q WHERE d1 UNION q WHERE d2` → `q WHERE d1 OR d2`.
pub(super) fn rule4_union_to_or(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    merge_set_op(q, SetOp::Union, 4, cx)
}

/// Rule 1: `WHERE c = (SELECT MIN/MAX(c) FROM t)` → `ORDER BY c ASC/DESC LIMIT 1` (c UNIQUE;
/// MIN→ASC, MAX→DESC).
pub(super) fn rule1_subquery_extreme(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    let Some(t) = q.single_table().map(str::to_string) else {
        return false;
    };
    if !q.order_by.is_empty() || q.limit.is_some() || !q.group_by.is_empty() || q.set_op.is_some() {
        return false;
    }
    let Some(Pred::Cmp {
        op: CmpOp::Eq,
        l,
        r,
    }) = &q.where_
    else {
        return false;
    };
    let (col, sub) = match (l, r) {
        (Expr::Col(c), Expr::Sub(s)) | (Expr::Sub(s), Expr::Col(c)) => (c.clone(), s),
        _ => return false,
    };
    let [
        Expr::Agg {
            func,
            distinct: false,
            arg,
        },
    ] = sub.select.as_slice()
    else {
        return false;
    };
    let desc = match func.as_str() {
        "max" => true,
        "min" => false,
        _ => return false,
    };
    if **arg != Expr::Col(col.clone())
        || sub.single_table() != Some(t.as_str())
        || sub.where_.is_some()
        || !is_simple(sub)
    {
        return false;
    }
    if !cx.unique(1, &col) || (cx.opts.strict_nulls && !cx.not_null(1, &col)) {
        return false;
    }
    q.where_ = None;
    q.order_by = vec![OrderKey {
        expr: Expr::Col(col),
        desc,
        explicit: true,
    }];
    q.limit = Some(1);
    true
}

/// Rule 9: `SELECT c … ORDER BY c DESC/ASC LIMIT 1` → `SELECT MAX/MIN(c) …`.
pub(super) fn rule9_order_limit_to_extreme(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    if q.limit != Some(1)
        || q.offset.is_some()
        || !q.group_by.is_empty()
        || q.set_op.is_some()
        || q.distinct
    {
        return false;
    }
    let [Expr::Col(c)] = q.select.as_slice() else {
        return false;
    };
    let [key] = q.order_by.as_slice() else {
        return false;
    };
    if key.expr != Expr::Col(c.clone()) {
        return false;
    }
    let c = c.clone();
    if cx.opts.strict_nulls && !cx.not_null(9, &c) {
        return false;
    }
    q.select = vec![Expr::Agg {
        func: if key.desc { "max".into() } else { "min".into() },
        distinct: false,
        arg: Box::new(Expr::Col(c)),
    }];
    q.order_by.clear();
    q.limit = None;
    true
}

/// Rule 10: a select list naming exactly all columns of the FROM tables → `SELECT *`.
pub(super) fn rule10_star(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    if q.select.is_empty() || q.from.iter().any(|f| matches!(f, FromItem::Sub(_))) {
        return false;
    }
    let mut listed = Vec::new();
    for e in &q.select {
        match e {
            Expr::Col(c) => listed.push(c.clone()),
            _ => return false,
        }
    }
    let mut all: Vec<String> = Vec::new();
    for t in q.base_tables() {
        for c in cx.schema.tables.get(t).into_iter().flatten() {
            all.push(format!("{t}.{c}"));
        }
    }
    listed.sort();
    all.sort();
    let mut dedup = listed.clone();
    dedup.dedup();
    if dedup.len() != listed.len() || listed != all {
        return false;
    }
    q.select = vec![Expr::Star(None)];
    true
}

/// Rule 17: `… FROM A WHERE c IN (SELECT c FROM A WHERE d)` → `… WHERE d` (c UNIQUE NOT NULL,
/// A6).
pub(super) fn rule17_redundant_in(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    let Some(t) = q.single_table().map(str::to_string) else {
        return false;
    };
    let parts = conjuncts(q.where_.clone());
    for (i, p) in parts.iter().enumerate() {
        let Pred::InSub {
            e: Expr::Col(c),
            q: sub,
            negated: false,
        } = p
        else {
            continue;
        };
        if sub.single_table() != Some(t.as_str())
            || sub.select != vec![Expr::Col(c.clone())]
            || sub.where_.is_none()
            || !is_simple(sub)
        {
            continue;
        }
        if !cx.unique_nn(17, c) {
            continue;
        }
        let mut new_parts = parts.clone();
        let d = sub.where_.clone();
        new_parts.remove(i);
        new_parts.extend(conjuncts(d));
        q.where_ = from_conjuncts(new_parts);
        return true;
    }
    false
}

/// Rule 7: `COUNT(c)` → `COUNT(*)` for NOT NULL c (SELECT, HAVING, ORDER BY; inner joins only).
pub(super) fn rule7_count_star(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    if !q.all_inner() {
        return false;
    }
    let mut cols = Vec::new();
    own_exprs_mut(q, false, &mut |e| {
        if let Expr::Agg {
            func,
            distinct: false,
            arg,
        } = e
            && func == "count"
            && let Expr::Col(c) = arg.as_ref()
        {
            cols.push(c.clone());
        }
    });
    let ok: BTreeSet<String> = cols.into_iter().filter(|c| cx.not_null(7, c)).collect();
    if ok.is_empty() {
        return false;
    }
    let mut changed = false;
    own_exprs_mut(q, false, &mut |e| {
        if let Expr::Agg {
            func,
            distinct: false,
            arg,
        } = e
            && func == "count"
            && matches!(arg.as_ref(), Expr::Col(c) if ok.contains(c))
        {
            **arg = Expr::Star(None);
            changed = true;
        }
    });
    changed
}

/// Rule 6: `SELECT c FROM t WHERE c NOT IN (q2)` → `SELECT c FROM t EXCEPT q2` (c UNIQUE NOT
/// NULL, q2's column NOT NULL, A10).
pub(super) fn rule6_not_in_to_except(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    if q.single_table().is_none() || !is_simple(q) || q.distinct {
        return false;
    }
    let [Expr::Col(c)] = q.select.as_slice() else {
        return false;
    };
    let Some(Pred::InSub {
        e: Expr::Col(ic),
        q: sub,
        negated: true,
    }) = &q.where_
    else {
        return false;
    };
    if ic != c || sub.set_op.is_some() {
        return false;
    }
    let [Expr::Col(sc)] = sub.select.as_slice() else {
        return false;
    };
    let (c, sc) = (c.clone(), sc.clone());
    if !cx.unique_nn(6, &c) || !cx.not_null(6, &sc) {
        return false;
    }
    let Some(Pred::InSub { q: sub, .. }) = q.where_.take() else {
        return false;
    };
    q.set_op = Some((SetOp::Except, sub));
    true
}

/// Rule 12: `… FROM t2 WHERE t2.c2 IN (SELECT t1.c1 FROM t1 WHERE d)` → `… FROM t2 JOIN t1 ON
/// t1.c1 = t2.c2 WHERE d` (t1.c1 PK, t2.c2 FK to it).
pub(super) fn rule12_in_to_join(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    if !q.all_inner() {
        return false;
    }
    let tables: Vec<String> = q.base_tables().into_iter().map(str::to_string).collect();
    let parts = conjuncts(q.where_.clone());
    for (i, p) in parts.iter().enumerate() {
        let Pred::InSub {
            e: Expr::Col(c2),
            q: sub,
            negated: false,
        } = p
        else {
            continue;
        };
        let [Expr::Col(c1)] = sub.select.as_slice() else {
            continue;
        };
        let Some(t1) = sub.single_table() else {
            continue;
        };
        if !is_simple(sub)
            || tables.iter().any(|t| t == t1)
            || !tables.iter().any(|t| t == table_of(c2))
        {
            continue;
        }
        if table_of(c1) != t1 || cx.schema.fk.get(c2) != Some(c1) || !cx.schema.single_pk(c1) {
            continue;
        }
        let mut new_parts = parts.clone();
        new_parts.remove(i);
        new_parts.extend(conjuncts(sub.where_.clone()));
        q.from.push(FromItem::Table(t1.to_string()));
        q.joins.push(JoinKind::Inner);
        q.on.push(Pred::Cmp {
            op: CmpOp::Eq,
            l: Expr::Col(c1.clone()),
            r: Expr::Col(c2.clone()),
        });
        q.where_ = from_conjuncts(new_parts);
        return true;
    }
    false
}

/// Rule 5: GROUP BY a UNIQUE NOT NULL column of a single table: extra keys are dropped, and
/// the GROUP BY itself when nothing aggregates (A24).
pub(super) fn rule5_group_by_unique(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    if q.group_by.is_empty() || q.single_table().is_none() {
        return false;
    }
    let keys: Vec<String> = q
        .group_by
        .iter()
        .filter_map(|e| match e {
            Expr::Col(c) => Some(c.clone()),
            _ => None,
        })
        .collect();
    let Some(key) = keys.into_iter().find(|c| cx.unique_nn(5, c)) else {
        return false;
    };
    if q.group_by.len() > 1 {
        q.group_by = vec![Expr::Col(key)];
        return true;
    }
    let aggregates = q.select.iter().any(has_agg) || q.order_by.iter().any(|k| has_agg(&k.expr));
    if q.having.is_none() && !aggregates {
        q.group_by.clear();
        return true;
    }
    false
}

/// Rule 18: `q UNION q` / `q INTERSECT q` → `SELECT DISTINCT …` (A7; rule 2 may then drop the
/// DISTINCT).
pub(super) fn rule18_idempotent_set_op(q: &mut Query, _cx: &mut RuleCx<'_>) -> bool {
    let Some((op, r)) = &q.set_op else {
        return false;
    };
    if !matches!(op, SetOp::Union | SetOp::Intersect) || r.set_op.is_some() {
        return false;
    }
    let mut left = q.clone();
    left.set_op = None;
    let opts = EsmPlusOptions::default();
    let mut a = left.clone();
    let mut b = r.as_ref().clone();
    canon_query(&mut a, opts);
    canon_query(&mut b, opts);
    if a != b {
        return false;
    }
    q.set_op = None;
    q.distinct = true;
    true
}

/// Rule descriptions (for documentation and details).
pub fn rule_names() -> BTreeMap<u8, &'static str> {
    BTreeMap::from([
        (
            1,
            "WHERE c = (SELECT MIN/MAX(c)) -> ORDER BY c LIMIT 1 (c UNIQUE)",
        ),
        (2, "drop DISTINCT justified by a UNIQUE NOT NULL column"),
        (3, "INTERSECT of single-table filters -> AND"),
        (4, "UNION of single-table filters -> OR"),
        (5, "GROUP BY a UNIQUE column -> no GROUP BY"),
        (6, "NOT IN (q) -> EXCEPT q"),
        (7, "COUNT(c) -> COUNT(*) for NOT NULL c"),
        (8, "drop c IS NOT NULL for NOT NULL c"),
        (9, "ORDER BY c LIMIT 1 selecting c -> MAX/MIN(c)"),
        (10, "all columns listed -> *"),
        (11, "numeric string literal -> number"),
        (12, "IN (SELECT pk ...) over an FK -> JOIN"),
        (13, "JOIN to a PK table that is not used -> removed"),
        (14, "table alias without AS"),
        (15, "IN (v1, ...) -> OR of equalities"),
        (16, "inner-join equalities -> one representative column"),
        (17, "c IN (SELECT c FROM same table WHERE d) -> d"),
        (18, "q UNION/INTERSECT q -> SELECT DISTINCT q"),
        (19, "BETWEEN -> >= AND <="),
        (20, "NOT (x op y) -> x op' y"),
    ])
}
