//! ESM+ (esm_plus.md §2): the functional fixes M1–M8 and the 20 equivalence rules, applied as
//! canonicalising rewrites to gold and prediction alike, then a clause-by-clause comparison.
//!
//! Where the reference engine is known to be wrong, this follows the paper and the digest's
//! [D] recommendations: rule 1 maps MIN→ASC and MAX→DESC; rules 2, 3, 4, 5, 6, 17 require
//! UNIQUE *and* NOT NULL; rule 6 also needs a NOT NULL subquery column (A10); rules 13 and 16
//! only use inner joins (A4, A5); rule 18 keeps DISTINCT (A7); NOT BETWEEN becomes
//! `x < a OR x > b` (A8); rules run bottom-up to a fixpoint (A17). By default GROUP BY is
//! compared as a set and ORDER BY keeps a direction per key (A12, A13); `paper_compat`
//! restores the paper's ordered GROUP BY and single ORDER BY direction.
//!
//! Rules whose preconditions need UNIQUE/NOT NULL facts that the schema does not provide
//! (a `tables.json` schema without the SQLite file) are skipped and recorded.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use super::ir::{
    self, CmpOp, Expr, FromItem, JoinKind, LowerCtx, OrderKey, PlusSchema, Pred, Query, SetOp,
};

/// ESM+ settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EsmPlusOptions {
    /// Compare literal values (default on).
    pub value_check: bool,
    /// Compare DISTINCT flags (default on).
    pub distinct_check: bool,
    /// Bit `n` set disables rule `n` (1..=20), like the engine's `--disable_rules`.
    pub disabled_rules: u32,
    /// Reproduce the paper's ordered GROUP BY and single ORDER BY direction (A12, A13).
    pub paper_compat: bool,
    /// Rules 1 and 9 also require the column NOT NULL (A3).
    pub strict_nulls: bool,
}

impl Default for EsmPlusOptions {
    fn default() -> Self {
        EsmPlusOptions {
            value_check: true,
            distinct_check: true,
            disabled_rules: 0,
            paper_compat: false,
            strict_nulls: false,
        }
    }
}

impl EsmPlusOptions {
    /// Options with every rule disabled ("stage 0": the functional fixes only).
    pub fn fixes_only() -> EsmPlusOptions {
        EsmPlusOptions {
            disabled_rules: u32::MAX,
            ..EsmPlusOptions::default()
        }
    }

    /// Disable one rule.
    pub fn without_rule(mut self, rule: u8) -> EsmPlusOptions {
        self.disabled_rules |= 1u32 << rule;
        self
    }

    fn on(&self, rule: u8) -> bool {
        self.disabled_rules & (1u32 << rule) == 0
    }
}

/// A rule that could not be checked.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct SkippedRule {
    /// Rule number.
    pub rule: u8,
    /// Why.
    pub reason: String,
}

/// ESM+ verdict and diagnosis for one pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EsmPlusOutcome {
    /// Match.
    pub verdict: bool,
    /// Whether the prediction parsed.
    pub pred_parsed: bool,
    /// Why it did not.
    pub pred_parse_error: Option<String>,
    /// Clauses that differ after canonicalisation.
    pub mismatched: Vec<&'static str>,
    /// Rules that rewrote the gold.
    pub gold_rules: Vec<u8>,
    /// Rules that rewrote the prediction.
    pub pred_rules: Vec<u8>,
    /// Rules that could not be checked for lack of schema facts.
    pub skipped_rules: Vec<SkippedRule>,
}

/// ESM+ of `pred` against `gold`. `Err` when the gold query cannot be parsed.
pub fn esm_plus(
    schema: &PlusSchema,
    gold: &str,
    pred: &str,
    opts: EsmPlusOptions,
) -> Result<EsmPlusOutcome, ir::LowerError> {
    let mut skipped = BTreeSet::new();
    let (g, gold_rules) = canonical(schema, gold, opts, &mut skipped)?;
    let (p, pred_rules, pred_parse_error) = match canonical(schema, pred, opts, &mut skipped) {
        Ok((p, r)) => (Some(p), r, None),
        Err(e) => (None, Vec::new(), Some(e.0)),
    };
    let mismatched = match &p {
        Some(p) => compare(&g, p),
        None => vec!["parse"],
    };
    Ok(EsmPlusOutcome {
        verdict: mismatched.is_empty(),
        pred_parsed: p.is_some(),
        pred_parse_error,
        mismatched,
        gold_rules,
        pred_rules,
        skipped_rules: skipped.into_iter().collect(),
    })
}

/// Parse, rewrite with the enabled rules and canonicalise one query; returns the rules that
/// fired.
pub fn canonical(
    schema: &PlusSchema,
    sql: &str,
    opts: EsmPlusOptions,
    skipped: &mut BTreeSet<SkippedRule>,
) -> Result<(Query, Vec<u8>), ir::LowerError> {
    let mut lctx = LowerCtx {
        disabled: opts.disabled_rules,
        fired: Vec::new(),
    };
    let mut q = ir::parse(sql, schema, &mut lctx)?;
    let mut cx = RuleCx {
        schema,
        opts,
        fired: lctx.fired.iter().copied().collect(),
        skipped,
    };
    for _ in 0..10 {
        if !pass(&mut q, &mut cx) {
            break;
        }
    }
    canon_query(&mut q, opts);
    Ok((q, cx.fired.into_iter().collect()))
}

/// Clause-by-clause comparison of two canonical queries; the clauses that differ.
pub fn compare(g: &Query, p: &Query) -> Vec<&'static str> {
    let mut out = Vec::new();
    if g.select != p.select {
        out.push("select");
    }
    if g.distinct != p.distinct {
        out.push("distinct");
    }
    if g.from != p.from || g.joins != p.joins {
        out.push("from");
    }
    if g.on != p.on {
        out.push("join_conditions");
    }
    if g.where_ != p.where_ {
        out.push("where");
    }
    if g.group_by != p.group_by {
        out.push("group_by");
    }
    if g.having != p.having {
        out.push("having");
    }
    if g.order_by != p.order_by {
        out.push("order_by");
    }
    if g.limit != p.limit || g.offset != p.offset {
        out.push("limit");
    }
    if g.set_op != p.set_op {
        out.push("set_operation");
    }
    out
}

// ------------------------------------------------------------------------------------------
// Canonicalisation.

fn canon_query(q: &mut Query, opts: EsmPlusOptions) {
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

fn is_literal(e: &Expr) -> bool {
    matches!(e, Expr::Num(_) | Expr::Str(_) | Expr::Null | Expr::Value)
}

fn canon_expr(e: &mut Expr, opts: EsmPlusOptions) {
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

fn strip_value(e: &mut Expr, opts: EsmPlusOptions) {
    if !opts.value_check && matches!(e, Expr::Num(_) | Expr::Str(_)) {
        *e = Expr::Value;
    }
}

fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Ge => CmpOp::Le,
        other => other,
    }
}

fn canon_pred(p: &mut Pred, opts: EsmPlusOptions) {
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

fn for_each_child_query(q: &mut Query, f: &mut dyn FnMut(&mut Query)) {
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

fn expr_queries(e: &mut Expr, f: &mut dyn FnMut(&mut Query)) {
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

fn pred_queries(p: &mut Pred, f: &mut dyn FnMut(&mut Query)) {
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
fn own_exprs_mut(q: &mut Query, with_on: bool, f: &mut dyn FnMut(&mut Expr)) {
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

fn expr_visit(e: &mut Expr, f: &mut dyn FnMut(&mut Expr)) {
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

fn pred_visit(p: &mut Pred, f: &mut dyn FnMut(&mut Expr)) {
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
fn all_columns(q: &mut Query) -> Vec<String> {
    let mut out = Vec::new();
    collect_cols(q, &mut out);
    out
}

fn collect_cols(q: &mut Query, out: &mut Vec<String>) {
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

fn table_of(col: &str) -> &str {
    col.split_once('.').map_or("", |(t, _)| t)
}

fn conjuncts(p: Option<Pred>) -> Vec<Pred> {
    match p {
        None => Vec::new(),
        Some(Pred::And(v)) => v,
        Some(other) => vec![other],
    }
}

fn from_conjuncts(mut v: Vec<Pred>) -> Option<Pred> {
    match v.len() {
        0 => None,
        1 => v.pop(),
        _ => Some(Pred::And(v)),
    }
}

fn has_agg(e: &Expr) -> bool {
    match e {
        Expr::Agg { .. } => true,
        Expr::Func { args, .. } => args.iter().any(has_agg),
        Expr::Bin { l, r, .. } => has_agg(l) || has_agg(r),
        Expr::Neg(x) => has_agg(x),
        _ => false,
    }
}

fn is_simple(q: &Query) -> bool {
    q.group_by.is_empty()
        && q.having.is_none()
        && q.order_by.is_empty()
        && q.limit.is_none()
        && q.offset.is_none()
        && q.set_op.is_none()
}

// ------------------------------------------------------------------------------------------
// Rules.

struct RuleCx<'a> {
    schema: &'a PlusSchema,
    opts: EsmPlusOptions,
    fired: BTreeSet<u8>,
    skipped: &'a mut BTreeSet<SkippedRule>,
}

impl RuleCx<'_> {
    /// Evaluate a schema fact; unknown facts are recorded as a skipped rule.
    fn fact(&mut self, rule: u8, fact: Option<bool>, what: &str, col: &str) -> bool {
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

    fn unique_nn(&mut self, rule: u8, col: &str) -> bool {
        let u = self.schema.unique(col);
        self.fact(rule, u, "UNIQUE", col) && {
            let n = self.schema.not_null(col);
            self.fact(rule, n, "NOT NULL", col)
        }
    }

    fn not_null(&mut self, rule: u8, col: &str) -> bool {
        let n = self.schema.not_null(col);
        self.fact(rule, n, "NOT NULL", col)
    }

    fn unique(&mut self, rule: u8, col: &str) -> bool {
        let u = self.schema.unique(col);
        self.fact(rule, u, "UNIQUE", col)
    }

    fn fire(&mut self, rule: u8) {
        self.fired.insert(rule);
    }
}

/// One bottom-up pass: subqueries first, then the rules in the engine's order (8 and the
/// aggregate-level part of 2 first, as the engine applies them while parsing).
fn pass(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
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
fn rule8_drop_is_not_null(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
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
fn rule2_agg_distinct(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
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
fn rule2_select_distinct(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
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
fn rule13_unneeded_join(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
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
fn rule16_join_equalities(q: &mut Query, _cx: &mut RuleCx<'_>) -> bool {
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

fn sorted_select(q: &Query) -> Vec<Expr> {
    let mut s = q.select.clone();
    s.sort();
    s
}

/// Shared precondition of rules 3 and 4: the two sides select the same thing from the same
/// single table, and the selection contains a UNIQUE NOT NULL column.
fn set_op_merge_ok(q: &Query, r: &Query, rule: u8, cx: &mut RuleCx<'_>) -> bool {
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

fn merge_set_op(q: &mut Query, want: SetOp, rule: u8, cx: &mut RuleCx<'_>) -> bool {
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
fn rule3_intersect_to_and(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    merge_set_op(q, SetOp::Intersect, 3, cx)
}

/// Rule 4: `q WHERE d1 UNION q WHERE d2` → `q WHERE d1 OR d2`.
fn rule4_union_to_or(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
    merge_set_op(q, SetOp::Union, 4, cx)
}

/// Rule 1: `WHERE c = (SELECT MIN/MAX(c) FROM t)` → `ORDER BY c ASC/DESC LIMIT 1` (c UNIQUE;
/// MIN→ASC, MAX→DESC).
fn rule1_subquery_extreme(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
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
fn rule9_order_limit_to_extreme(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
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
fn rule10_star(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
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
fn rule17_redundant_in(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
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
fn rule7_count_star(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
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
fn rule6_not_in_to_except(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
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
fn rule12_in_to_join(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
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
fn rule5_group_by_unique(q: &mut Query, cx: &mut RuleCx<'_>) -> bool {
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
fn rule18_idempotent_set_op(q: &mut Query, _cx: &mut RuleCx<'_>) -> bool {
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
