//! evaluation.py's exact set matching: `rebuild_sql_val` / `rebuild_sql_col` (value and
//! DISTINCT stripping, foreign-key canonicalisation), `eval_partial_match`, `eval_exact_match`
//! and `eval_hardness`.

use std::collections::HashMap;

use serde::Serialize;

use super::{
    ColUnit, CondItem, CondUnit, SpiderSchema, Sql, TableUnit, Val, ValUnit, conns, units,
};

/// Options of the official evaluator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpiderEvalOptions {
    /// `DISABLE_VALUE` (default true): strip literal values before comparison.
    pub disable_value: bool,
    /// `DISABLE_DISTINCT` (default true): strip DISTINCT flags.
    pub disable_distinct: bool,
}

impl Default for SpiderEvalOptions {
    fn default() -> Self {
        SpiderEvalOptions {
            disable_value: true,
            disable_distinct: true,
        }
    }
}

fn rebuild_condition_val(conds: &mut [CondItem]) {
    for (i, item) in conds.iter_mut().enumerate() {
        if i % 2 != 0 {
            continue;
        }
        if let CondItem::Unit(u) = item {
            for v in [&mut u.v1, &mut u.v2] {
                match v {
                    Some(Val::Sql(s)) => rebuild_sql_val(s),
                    _ => *v = None,
                }
            }
        }
    }
}

/// evaluation.py `rebuild_sql_val`.
pub fn rebuild_sql_val(sql: &mut Sql) {
    rebuild_condition_val(&mut sql.from_conds);
    rebuild_condition_val(&mut sql.having);
    rebuild_condition_val(&mut sql.where_);
    for s in [&mut sql.intersect, &mut sql.except, &mut sql.union]
        .into_iter()
        .flatten()
    {
        rebuild_sql_val(s);
    }
}

/// evaluation.py `build_valid_col_units`: columns of the tables in this query's FROM.
pub fn valid_col_prefixes(sql: &Sql) -> Vec<String> {
    sql.from_units
        .iter()
        .filter_map(|t| match t {
            TableUnit::Table(id) => Some(
                id.get(..id.len().saturating_sub(2))
                    .unwrap_or_default()
                    .to_string(),
            ),
            TableUnit::Sql(_) => None,
        })
        .collect()
}

struct ColRebuild<'a> {
    prefixes: &'a [String],
    kmap: &'a HashMap<String, String>,
    disable_distinct: bool,
}

impl ColRebuild<'_> {
    fn col_unit(&self, cu: &mut ColUnit) {
        let valid = cu
            .col
            .find('.')
            .is_some_and(|dot| self.prefixes.iter().any(|p| p == &cu.col[..dot]));
        if valid && let Some(mapped) = self.kmap.get(&cu.col) {
            cu.col = mapped.clone();
        }
        if self.disable_distinct {
            cu.distinct = None;
        }
    }

    fn val_unit(&self, vu: &mut ValUnit) {
        self.col_unit(&mut vu.c1);
        if let Some(c2) = &mut vu.c2 {
            self.col_unit(c2);
        }
    }

    fn condition(&self, conds: &mut [CondItem]) {
        for (i, item) in conds.iter_mut().enumerate() {
            if i % 2 == 0
                && let CondItem::Unit(u) = item
            {
                self.val_unit(&mut u.val_unit);
            }
        }
    }

    fn sql(&self, sql: &mut Sql) {
        for (_, vu) in &mut sql.select {
            self.val_unit(vu);
        }
        if self.disable_distinct {
            sql.select_distinct = None;
        }
        self.condition(&mut sql.from_conds);
        self.condition(&mut sql.where_);
        for cu in &mut sql.group_by {
            self.col_unit(cu);
        }
        if let Some((_, keys)) = &mut sql.order_by {
            for vu in keys {
                self.val_unit(vu);
            }
        }
        self.condition(&mut sql.having);
        for s in [&mut sql.intersect, &mut sql.except, &mut sql.union]
            .into_iter()
            .flatten()
        {
            self.sql(s);
        }
    }
}

/// Apply evaluation.py's rebuild steps (values, then columns/FK map/DISTINCT) in place.
pub fn rebuild(sql: &mut Sql, schema: &SpiderSchema, opts: SpiderEvalOptions) {
    let prefixes = valid_col_prefixes(sql);
    if opts.disable_value {
        rebuild_sql_val(sql);
    }
    ColRebuild {
        prefixes: &prefixes,
        kmap: &schema.kmap,
        disable_distinct: opts.disable_distinct,
    }
    .sql(sql);
}

/// (label_total, pred_total, count) of one component, and whether it scores 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Component {
    /// Occurrences in the gold.
    pub gold_total: usize,
    /// Occurrences in the prediction.
    pub pred_total: usize,
    /// Matched occurrences.
    pub matched: usize,
}

impl Component {
    /// `get_scores(...) == 1`.
    pub fn ok(&self) -> bool {
        self.pred_total == self.gold_total && self.matched == self.pred_total
    }
}

fn count_multiset<T: PartialEq + Clone>(pred: &[T], gold: &[T]) -> usize {
    let mut remaining: Vec<T> = gold.to_vec();
    let mut cnt = 0;
    for p in pred {
        if let Some(pos) = remaining.iter().position(|g| g == p) {
            cnt += 1;
            remaining.remove(pos);
        }
    }
    cnt
}

fn keywords(sql: &Sql) -> Vec<&'static str> {
    let mut res = Vec::new();
    if !sql.where_.is_empty() {
        res.push("where");
    }
    if !sql.group_by.is_empty() {
        res.push("group");
    }
    if !sql.having.is_empty() {
        res.push("having");
    }
    if let Some((dir, _)) = &sql.order_by {
        res.push(if dir == "desc" { "desc" } else { "asc" });
        res.push("order");
    }
    if sql.limit.is_some() {
        res.push("limit");
    }
    if sql.except.is_some() {
        res.push("except");
    }
    if sql.union.is_some() {
        res.push("union");
    }
    if sql.intersect.is_some() {
        res.push("intersect");
    }
    let all = || {
        units(&sql.from_conds)
            .chain(units(&sql.where_))
            .chain(units(&sql.having))
    };
    if conns(&sql.from_conds)
        .chain(conns(&sql.where_))
        .chain(conns(&sql.having))
        .any(|c| c == "or")
    {
        res.push("or");
    }
    if all().any(|u| u.not) {
        res.push("not");
    }
    if all().any(|u| u.op == 8) {
        res.push("in");
    }
    if all().any(|u| u.op == 9) {
        res.push("like");
    }
    res
}

/// The ten partial-match components of evaluation.py, in its order.
pub fn partial_match(pred: &Sql, gold: &Sql) -> Vec<(&'static str, Component)> {
    let mut out = Vec::with_capacity(10);
    // select / select(no AGG)
    let (ps, gs) = (&pred.select, &gold.select);
    let cnt = count_multiset(ps, gs);
    let pv: Vec<&ValUnit> = ps.iter().map(|u| &u.1).collect();
    let gv: Vec<&ValUnit> = gs.iter().map(|u| &u.1).collect();
    let cnt_wo = count_multiset(&pv, &gv);
    let c = |m| Component {
        gold_total: gs.len(),
        pred_total: ps.len(),
        matched: m,
    };
    out.push(("select", c(cnt)));
    out.push(("select(no AGG)", c(cnt_wo)));
    // where / where(no OP)
    let pw: Vec<&CondUnit> = units(&pred.where_).collect();
    let gw: Vec<&CondUnit> = units(&gold.where_).collect();
    let cnt = count_multiset(&pw, &gw);
    let pwv: Vec<&ValUnit> = pw.iter().map(|u| &u.val_unit).collect();
    let gwv: Vec<&ValUnit> = gw.iter().map(|u| &u.val_unit).collect();
    let cnt_wo = count_multiset(&pwv, &gwv);
    let c = |m| Component {
        gold_total: gw.len(),
        pred_total: pw.len(),
        matched: m,
    };
    out.push(("where", c(cnt)));
    out.push(("where(no OP)", c(cnt_wo)));
    // group(no Having)
    let strip = |cu: &ColUnit| match cu.col.split_once('.') {
        Some((_, rest)) => rest.split('.').next().unwrap_or(rest).to_string(),
        None => cu.col.clone(),
    };
    let pg: Vec<String> = pred.group_by.iter().map(strip).collect();
    let gg: Vec<String> = gold.group_by.iter().map(strip).collect();
    out.push((
        "group(no Having)",
        Component {
            gold_total: gg.len(),
            pred_total: pg.len(),
            matched: count_multiset(&pg, &gg),
        },
    ));
    // group
    let pt = usize::from(!pred.group_by.is_empty());
    let lt = usize::from(!gold.group_by.is_empty());
    let pcols: Vec<&String> = pred.group_by.iter().map(|c| &c.col).collect();
    let gcols: Vec<&String> = gold.group_by.iter().map(|c| &c.col).collect();
    let m = usize::from(pt == 1 && lt == 1 && pcols == gcols && pred.having == gold.having);
    out.push((
        "group",
        Component {
            gold_total: lt,
            pred_total: pt,
            matched: m,
        },
    ));
    // order
    let pt = usize::from(pred.order_by.is_some());
    let lt = usize::from(gold.order_by.is_some());
    let m = usize::from(
        gold.order_by.is_some()
            && pred.order_by == gold.order_by
            && pred.limit.is_some() == gold.limit.is_some(),
    );
    out.push((
        "order",
        Component {
            gold_total: lt,
            pred_total: pt,
            matched: m,
        },
    ));
    out.push(("and/or", and_or_component(pred, gold)));
    out.push(("IUEN", iuen_component(pred, gold)));
    // keywords
    let pk = keywords(pred);
    let gk = keywords(gold);
    let m = pk.iter().filter(|k| gk.contains(k)).count();
    out.push((
        "keywords",
        Component {
            gold_total: gk.len(),
            pred_total: pk.len(),
            matched: m,
        },
    ));
    out
}

/// evaluation.py's `eval_and_or`: the sets of WHERE connectives agree (1 of 1), or not (0, the
/// totals crossed as evaluation.py returns them).
fn and_or_component(pred: &Sql, gold: &Sql) -> Component {
    let mut pa: Vec<&str> = conns(&pred.where_).collect();
    let mut ga: Vec<&str> = conns(&gold.where_).collect();
    pa.sort_unstable();
    pa.dedup();
    ga.sort_unstable();
    ga.dedup();
    if pa == ga {
        Component {
            gold_total: 1,
            pred_total: 1,
            matched: 1,
        }
    } else {
        Component {
            gold_total: pa.len(),
            pred_total: ga.len(),
            matched: 0,
        }
    }
}

/// evaluation.py's `eval_IUEN`: INTERSECT, EXCEPT and UNION present on each side, and those on
/// both that match exactly.
fn iuen_component(pred: &Sql, gold: &Sql) -> Component {
    let mut comp = Component {
        gold_total: 0,
        pred_total: 0,
        matched: 0,
    };
    for (p, g) in [
        (&pred.intersect, &gold.intersect),
        (&pred.except, &gold.except),
        (&pred.union, &gold.union),
    ] {
        comp.pred_total += usize::from(p.is_some());
        comp.gold_total += usize::from(g.is_some());
        if let (Some(p), Some(g)) = (p, g) {
            comp.matched += usize::from(exact_match(p, g));
        }
    }
    comp
}

fn sorted_tables(units: &[TableUnit]) -> Vec<&TableUnit> {
    let mut v: Vec<&TableUnit> = units.iter().collect();
    v.sort_by(|a, b| match (a, b) {
        (TableUnit::Table(x), TableUnit::Table(y)) => x.cmp(y),
        (TableUnit::Sql(_), TableUnit::Table(_)) => std::cmp::Ordering::Less,
        (TableUnit::Table(_), TableUnit::Sql(_)) => std::cmp::Ordering::Greater,
        (TableUnit::Sql(_), TableUnit::Sql(_)) => std::cmp::Ordering::Equal,
    });
    v
}

/// evaluation.py `eval_exact_match` on rebuilt queries.
pub fn exact_match(pred: &Sql, gold: &Sql) -> bool {
    if !partial_match(pred, gold).iter().all(|(_, c)| c.ok()) {
        return false;
    }
    if !gold.from_units.is_empty() {
        return sorted_tables(&gold.from_units) == sorted_tables(&pred.from_units);
    }
    true
}

/// Spider hardness bucket of a (gold) query, as `Evaluator.eval_hardness`.
pub fn hardness(sql: &Sql) -> &'static str {
    let all_units = || {
        units(&sql.from_conds)
            .chain(units(&sql.where_))
            .chain(units(&sql.having))
    };
    let mut c1 = 0usize;
    c1 += usize::from(!sql.where_.is_empty());
    c1 += usize::from(!sql.group_by.is_empty());
    c1 += usize::from(sql.order_by.is_some());
    c1 += usize::from(sql.limit.is_some());
    c1 += sql.from_units.len().saturating_sub(1);
    c1 += conns(&sql.from_conds)
        .chain(conns(&sql.where_))
        .chain(conns(&sql.having))
        .filter(|c| *c == "or")
        .count();
    c1 += all_units().filter(|u| u.op == 9).count();
    let mut c2 = 0usize;
    for u in all_units() {
        c2 += usize::from(matches!(u.v1, Some(Val::Sql(_))));
        c2 += usize::from(matches!(u.v2, Some(Val::Sql(_))));
    }
    c2 += usize::from(sql.intersect.is_some())
        + usize::from(sql.except.is_some())
        + usize::from(sql.union.is_some());
    let mut others = 0usize;
    // count_agg over select units (agg_id), where cond units (not_op as "agg"!), group by
    // col units, order by col units, having cond units: the script's has_agg looks at unit[0].
    let mut agg = sql.select.iter().filter(|(a, _)| *a != 0).count();
    agg += units(&sql.where_).filter(|u| u.not).count();
    agg += sql.group_by.iter().filter(|c| c.agg != 0).count();
    if let Some((_, keys)) = &sql.order_by {
        agg += keys.iter().filter(|k| k.c1.agg != 0).count();
        agg += keys
            .iter()
            .filter_map(|k| k.c2.as_ref())
            .filter(|c| c.agg != 0)
            .count();
    }
    // count_agg(sql['having']) iterates the whole list, connectors included: a unit's [0] is
    // its not_op; a connector string's [0] is a character, never equal to 0.
    for (i, item) in sql.having.iter().enumerate() {
        match item {
            CondItem::Unit(u) => agg += usize::from(u.not),
            CondItem::Conn(_) => {
                let _ = i;
                agg += 1;
            }
        }
    }
    if agg > 1 {
        others += 1;
    }
    if sql.select.len() > 1 {
        others += 1;
    }
    if sql.where_.len() > 1 {
        others += 1;
    }
    if sql.group_by.len() > 1 {
        others += 1;
    }
    if c1 <= 1 && others == 0 && c2 == 0 {
        "easy"
    } else if (others <= 2 && c1 <= 1 && c2 == 0) || (c1 <= 2 && others < 2 && c2 == 0) {
        "medium"
    } else if (others > 2 && c1 <= 2 && c2 == 0)
        || (2 < c1 && c1 <= 3 && others <= 2 && c2 == 0)
        || (c1 <= 1 && others == 0 && c2 <= 1)
    {
        "hard"
    } else {
        "extra"
    }
}
