//! Lowering sqlparser's AST to ESM+'s tree: scoped alias resolution (fix M4), join types (M1),
//! IN lists (M7), aliases without AS (rule 14), and the parse-time rules 11, 15, 19, 20.

use std::collections::HashMap;

use serde::Serialize;
use sqlparser::ast::{
    self as sa, BinaryOperator, Distinct, FunctionArg, FunctionArgExpr, FunctionArguments,
    GroupByExpr, JoinConstraint, JoinOperator, LimitClause, OrderByKind, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, SetOperator, SetQuantifier, Statement, TableFactor,
    UnaryOperator, Value,
};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;

use super::tree::{CmpOp, Expr, FromItem, JoinKind, OrderKey, PlusSchema, Pred, Query, SetOp};
use crate::sqlspec::syntax::last_identifier;

/// Why an ESM+ query could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("{0}")]
pub struct LowerError(pub String);

pub(super) type LResult<T> = Result<T, LowerError>;

pub(super) fn lerr<T>(m: impl Into<String>) -> LResult<T> {
    Err(LowerError(m.into()))
}

/// Which parse-time rules are enabled, and which fired.
#[derive(Debug, Clone, Default)]
pub struct LowerCtx {
    /// Rule numbers (1..=20) that are disabled.
    pub disabled: u32,
    /// Rules that fired while lowering.
    pub fired: Vec<u8>,
}

impl LowerCtx {
    pub(super) fn on(&self, rule: u8) -> bool {
        self.disabled & (1u32 << rule) == 0
    }

    pub(super) fn fire(&mut self, rule: u8) {
        if !self.fired.contains(&rule) {
            self.fired.push(rule);
        }
    }
}

#[derive(Debug, Clone)]
pub(super) enum Binding {
    Table(String),
    Derived(Vec<String>),
}

#[derive(Debug, Default)]
pub(super) struct Scope {
    /// (alias or table name, binding) in FROM order.
    pub(super) names: Vec<(String, Binding)>,
    pub(super) select_aliases: HashMap<String, Expr>,
}

/// Parse and lower one SQL query.
pub fn parse(sql: &str, schema: &PlusSchema, ctx: &mut LowerCtx) -> LResult<Query> {
    let stmts = Parser::new(&SQLiteDialect {})
        .with_recursion_limit(64)
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_statements())
        .map_err(|e| LowerError(e.to_string()))?;
    let [Statement::Query(q)] = stmts.as_slice() else {
        return lerr("expected exactly one SELECT statement");
    };
    let mut lw = Lowerer {
        schema,
        ctx,
        scopes: Vec::new(),
        depth: 0,
    };
    lw.query(q)
}

pub(super) struct Lowerer<'a> {
    pub(super) schema: &'a PlusSchema,
    pub(super) ctx: &'a mut LowerCtx,
    pub(super) scopes: Vec<Scope>,
    /// How deep the lowering is in nested expressions and predicates ([`MAX_DEPTH`]).
    pub(super) depth: usize,
}

/// Nested expressions and predicates lowered at most. The parser's recursion limit does not
/// bound a left-deep chain of operators (`a OR b OR c …` parses in a loop), and each level of
/// lowering is a few stack frames: without a bound, 2,000 terms overflowed a worker's stack and
/// aborted the process. AND and OR chains are flattened without recursion, so only genuinely
/// nested expressions (arithmetic chains, CASE in CASE, subqueries) meet this bound; past it the
/// query is refused with a reason.
pub const MAX_DEPTH: usize = 256;

/// The operands of a chain of `op` (`AND` or `OR`), left to right, through parentheses: a
/// left-deep chain of any length is walked with a stack of its own, not by recursion.
fn chain_operands<'e>(e: &'e sa::Expr, op: &BinaryOperator) -> Vec<&'e sa::Expr> {
    let mut operands = Vec::new();
    let mut stack = vec![e];
    while let Some(next) = stack.pop() {
        match next {
            sa::Expr::BinaryOp { left, op: o, right } if o == op => {
                stack.push(right);
                stack.push(left);
            }
            sa::Expr::Nested(inner) if matches!(&**inner, sa::Expr::BinaryOp { op: o, .. } if o == op) =>
            {
                stack.push(inner);
            }
            other => operands.push(other),
        }
    }
    operands
}

/// Canonical text of a number literal.
pub fn canon_number(text: &str) -> Option<String> {
    let f: f64 = text.trim().parse().ok()?;
    Some(canon_f64(f))
}

pub(super) fn canon_f64(f: f64) -> String {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{}", f as i64)
    } else {
        format!("{f:?}")
    }
}

/// Rule 11's numeric-string pattern (esm_plus.md A9): `^-?(0|[1-9]\d*)(\.\d*[1-9])?$`.
pub fn numeric_string(s: &str) -> bool {
    let body = s.strip_prefix('-').unwrap_or(s);
    let (int, frac) = match body.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (body, None),
    };
    let int_ok = int == "0"
        || (!int.is_empty() && int.chars().all(|c| c.is_ascii_digit()) && !int.starts_with('0'));
    let frac_ok = match frac {
        None => true,
        Some(f) => !f.is_empty() && f.chars().all(|c| c.is_ascii_digit()) && !f.ends_with('0'),
    };
    int_ok && frac_ok
}

pub(super) fn ident_lower(i: &sa::Ident) -> String {
    i.value.to_lowercase()
}

pub(super) fn object_last(name: &sa::ObjectName) -> Option<String> {
    last_identifier(name).map(ident_lower)
}

pub(super) fn literal_i64(e: &sa::Expr) -> Option<i64> {
    match e {
        sa::Expr::Value(v) => match &v.value {
            Value::Number(n, _) => n.parse::<i64>().ok(),
            _ => None,
        },
        _ => None,
    }
}

impl Lowerer<'_> {
    pub(super) fn query(&mut self, q: &sa::Query) -> LResult<Query> {
        if q.with.is_some() {
            return lerr("WITH is not supported");
        }
        let mut out = self.set_expr(&q.body)?;
        // ORDER BY / LIMIT of the whole query: resolved in the scope of the leftmost SELECT.
        if let Some(ob) = &q.order_by {
            let OrderByKind::Expressions(keys) = &ob.kind else {
                return lerr("ORDER BY ALL is not supported");
            };
            let mut okeys = Vec::new();
            for k in keys {
                let expr = self.with_select_scope(&q.body, |lw| lw.expr(&k.expr, true))?;
                let (desc, explicit) = match k.options.sort {
                    Some(sa::OrderBySort::Desc) => (true, true),
                    Some(sa::OrderBySort::Asc) => (false, true),
                    Some(sa::OrderBySort::Using(_)) => return lerr("ORDER BY USING"),
                    None => (false, false),
                };
                okeys.push(OrderKey {
                    expr,
                    desc,
                    explicit,
                });
            }
            out.order_by = okeys;
        }
        match &q.limit_clause {
            None => {}
            Some(LimitClause::LimitOffset { limit, offset, .. }) => {
                if let Some(l) = limit {
                    out.limit = Some(literal_i64(l).ok_or_else(|| LowerError("LIMIT".into()))?);
                }
                if let Some(o) = offset {
                    out.offset =
                        Some(literal_i64(&o.value).ok_or_else(|| LowerError("OFFSET".into()))?);
                }
            }
            Some(LimitClause::OffsetCommaLimit { offset, limit }) => {
                out.limit = Some(literal_i64(limit).ok_or_else(|| LowerError("LIMIT".into()))?);
                out.offset = Some(literal_i64(offset).ok_or_else(|| LowerError("OFFSET".into()))?);
            }
        }
        Ok(out)
    }

    /// Re-enter the scope of the leftmost SELECT of `body` to resolve ORDER BY keys.
    pub(super) fn with_select_scope<T>(
        &mut self,
        body: &SetExpr,
        f: impl FnOnce(&mut Self) -> LResult<T>,
    ) -> LResult<T> {
        let mut cur = body;
        loop {
            match cur {
                SetExpr::SetOperation { left, .. } => cur = left,
                SetExpr::Query(q) => cur = &q.body,
                _ => break,
            }
        }
        if let SetExpr::Select(sel) = cur {
            let scope = self.scope_of(sel)?;
            self.scopes.push(scope);
            // Re-register select aliases.
            let mut aliases = HashMap::new();
            for item in &sel.projection {
                if let SelectItem::ExprWithAlias { expr, alias } = item {
                    let e = self.expr(expr, false)?;
                    aliases.insert(ident_lower(alias), e);
                }
            }
            if let Some(s) = self.scopes.last_mut() {
                s.select_aliases = aliases;
            }
            let r = f(self);
            self.scopes.pop();
            r
        } else {
            f(self)
        }
    }

    pub(super) fn set_expr(&mut self, body: &SetExpr) -> LResult<Query> {
        match body {
            SetExpr::Select(sel) => self.select(sel),
            SetExpr::Query(q) => self.query(q),
            SetExpr::SetOperation {
                left,
                op,
                set_quantifier,
                right,
            } => {
                let mut l = self.set_expr(left)?;
                let r = self.set_expr(right)?;
                let all = matches!(set_quantifier, SetQuantifier::All);
                let op = match (op, all) {
                    (SetOperator::Union, false) => SetOp::Union,
                    (SetOperator::Union, true) => SetOp::UnionAll,
                    (SetOperator::Intersect, false) => SetOp::Intersect,
                    (SetOperator::Except | SetOperator::Minus, false) => SetOp::Except,
                    _ => return lerr("unsupported set quantifier"),
                };
                // Attach at the end of the left chain (right-nested like Spider's parser).
                attach_set_op(&mut l, op, r);
                Ok(l)
            }
            _ => lerr("only SELECT queries are supported"),
        }
    }

    pub(super) fn table_binding(
        &mut self,
        tf: &TableFactor,
    ) -> LResult<(String, Binding, FromItem)> {
        match tf {
            TableFactor::Table { name, alias, .. } => {
                let t = object_last(name).ok_or_else(|| LowerError("table name".into()))?;
                if !self.schema.tables.contains_key(&t) {
                    return lerr(format!("unknown table {t}"));
                }
                let key = match alias {
                    Some(a) => {
                        if !a.explicit && self.ctx.on(14) {
                            self.ctx.fire(14);
                        } else if !a.explicit {
                            return lerr("table alias without AS (rule 14 disabled)");
                        }
                        ident_lower(&a.name)
                    }
                    None => t.clone(),
                };
                Ok((key, Binding::Table(t.clone()), FromItem::Table(t)))
            }
            TableFactor::Derived {
                subquery, alias, ..
            } => {
                let q = self.query(subquery)?;
                let cols: Vec<String> = subquery_output_names(subquery);
                let key = alias
                    .as_ref()
                    .map(|a| ident_lower(&a.name))
                    .unwrap_or_else(|| "@derived".into());
                Ok((key, Binding::Derived(cols), FromItem::Sub(Box::new(q))))
            }
            TableFactor::NestedJoin { .. } => lerr("parenthesised joins are not supported"),
            _ => lerr("unsupported FROM item"),
        }
    }

    pub(super) fn scope_of(&mut self, sel: &sa::Select) -> LResult<Scope> {
        let mut scope = Scope::default();
        for twj in &sel.from {
            let (k, b, _) = self.table_binding(&twj.relation)?;
            scope.names.push((k, b));
            for j in &twj.joins {
                let (k, b, _) = self.table_binding(&j.relation)?;
                scope.names.push((k, b));
            }
        }
        Ok(scope)
    }

    pub(super) fn select(&mut self, sel: &sa::Select) -> LResult<Query> {
        let mut q = Query::default();
        // FROM first: it defines the scope.
        let mut scope = Scope::default();
        let mut on_exprs: Vec<(usize, &sa::Expr)> = Vec::new();
        for (i, twj) in sel.from.iter().enumerate() {
            let (k, b, item) = self.table_binding(&twj.relation)?;
            if i > 0 {
                q.joins.push(JoinKind::Inner);
            }
            scope.names.push((k, b));
            q.from.push(item);
            for j in &twj.joins {
                let (kind, constraint) = match &j.join_operator {
                    JoinOperator::Join(c) | JoinOperator::Inner(c) => (JoinKind::Inner, Some(c)),
                    JoinOperator::CrossJoin(c) => (JoinKind::Inner, Some(c)),
                    JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (JoinKind::Left, Some(c)),
                    JoinOperator::Right(c) | JoinOperator::RightOuter(c) => {
                        (JoinKind::Right, Some(c))
                    }
                    JoinOperator::FullOuter(c) => (JoinKind::Full, Some(c)),
                    _ => return lerr("unsupported join type"),
                };
                let (k, b, item) = self.table_binding(&j.relation)?;
                scope.names.push((k, b));
                q.from.push(item);
                q.joins.push(kind);
                match constraint {
                    Some(JoinConstraint::On(e)) => on_exprs.push((q.from.len(), e)),
                    Some(JoinConstraint::None) | None => {}
                    Some(_) => return lerr("JOIN USING/NATURAL is not supported"),
                }
            }
        }
        self.scopes.push(scope);
        let r = self.select_body(sel, &mut q, &on_exprs);
        self.scopes.pop();
        r.map(|_| q)
    }

    pub(super) fn select_body(
        &mut self,
        sel: &sa::Select,
        q: &mut Query,
        on_exprs: &[(usize, &sa::Expr)],
    ) -> LResult<()> {
        for (_, e) in on_exprs {
            let p = self.pred(e)?;
            match p {
                Pred::And(parts) => q.on.extend(parts),
                other => q.on.push(other),
            }
        }
        q.distinct = match &sel.distinct {
            None | Some(Distinct::All) => false,
            Some(Distinct::Distinct) => true,
            Some(_) => return lerr("DISTINCT ON is not supported"),
        };
        let mut aliases = HashMap::new();
        for item in &sel.projection {
            match item {
                SelectItem::UnnamedExpr(e) => q.select.push(self.expr(e, false)?),
                SelectItem::ExprWithAlias { expr, alias } => {
                    let e = self.expr(expr, false)?;
                    aliases.insert(ident_lower(alias), e.clone());
                    q.select.push(e);
                }
                SelectItem::Wildcard(_) => q.select.push(Expr::Star(None)),
                SelectItem::QualifiedWildcard(
                    SelectItemQualifiedWildcardKind::ObjectName(n),
                    _,
                ) => {
                    let a = object_last(n).unwrap_or_default();
                    let t = match self.lookup_alias(&a) {
                        Some(Binding::Table(t)) => t,
                        _ => a,
                    };
                    q.select.push(Expr::Star(Some(t)));
                }
                _ => return lerr("unsupported select item"),
            }
        }
        if let Some(s) = self.scopes.last_mut() {
            s.select_aliases = aliases;
        }
        if let Some(w) = &sel.selection {
            q.where_ = Some(self.pred(w)?);
        }
        match &sel.group_by {
            GroupByExpr::Expressions(exprs, mods) => {
                if !mods.is_empty() {
                    return lerr("GROUP BY modifiers are not supported");
                }
                for e in exprs {
                    q.group_by.push(self.expr(e, true)?);
                }
            }
            GroupByExpr::All(_) => return lerr("GROUP BY ALL is not supported"),
        }
        if let Some(h) = &sel.having {
            q.having = Some(self.pred_with_aliases(h)?);
        }
        Ok(())
    }

    pub(super) fn lookup_alias(&self, name: &str) -> Option<Binding> {
        for scope in self.scopes.iter().rev() {
            if let Some((_, b)) = scope.names.iter().find(|(k, _)| k == name) {
                return Some(b.clone());
            }
        }
        None
    }

    pub(super) fn column(&mut self, parts: &[sa::Ident], allow_alias: bool) -> LResult<Expr> {
        match parts {
            [] => lerr("empty identifier"),
            [single] => {
                let c = ident_lower(single);
                for scope in self.scopes.iter().rev() {
                    if allow_alias
                        && let Some(e) = scope.select_aliases.get(&c)
                        && !scope.names.iter().any(|(_, b)| match b {
                            Binding::Table(t) => {
                                self.schema.tables.get(t).is_some_and(|cs| cs.contains(&c))
                            }
                            Binding::Derived(cs) => cs.contains(&c),
                        })
                    {
                        return Ok(e.clone());
                    }
                    for (_, b) in &scope.names {
                        match b {
                            Binding::Table(t) => {
                                if self.schema.tables.get(t).is_some_and(|cs| cs.contains(&c)) {
                                    return Ok(Expr::Col(format!("{t}.{c}")));
                                }
                            }
                            Binding::Derived(cs) => {
                                if cs.contains(&c) {
                                    return Ok(Expr::Col(format!("@derived.{c}")));
                                }
                            }
                        }
                    }
                }
                if single.quote_style == Some('"') {
                    // A double-quoted token that names no column is a string (A18).
                    return Ok(Expr::Str(single.value.clone()));
                }
                if let Some(scope) = self.scopes.last()
                    && let Some(e) = scope.select_aliases.get(&c)
                {
                    return Ok(e.clone());
                }
                Ok(Expr::Col(format!("?.{c}")))
            }
            [.., a, c] => {
                let a = ident_lower(a);
                let c = ident_lower(c);
                match self.lookup_alias(&a) {
                    Some(Binding::Table(t)) => Ok(Expr::Col(format!("{t}.{c}"))),
                    Some(Binding::Derived(_)) => Ok(Expr::Col(format!("@derived.{c}"))),
                    None => lerr(format!("unknown table or alias {a}")),
                }
            }
        }
    }

    /// Enter one level of nesting ([`MAX_DEPTH`]).
    fn descend(&mut self) -> LResult<()> {
        if self.depth >= MAX_DEPTH {
            return lerr(format!(
                "the query nests expressions deeper than {MAX_DEPTH} levels"
            ));
        }
        self.depth += 1;
        Ok(())
    }

    pub(super) fn expr(&mut self, e: &sa::Expr, allow_alias: bool) -> LResult<Expr> {
        self.descend()?;
        let lowered = self.expr_at(e, allow_alias);
        self.depth -= 1;
        lowered
    }

    fn expr_at(&mut self, e: &sa::Expr, allow_alias: bool) -> LResult<Expr> {
        Ok(match e {
            sa::Expr::Identifier(i) => self.column(std::slice::from_ref(i), allow_alias)?,
            sa::Expr::CompoundIdentifier(parts) => self.column(parts, allow_alias)?,
            sa::Expr::Value(v) => match &v.value {
                Value::Number(n, _) => Expr::Num(canon_number(n).unwrap_or_else(|| n.clone())),
                Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Expr::Str(s.clone()),
                Value::Null => Expr::Null,
                Value::Boolean(b) => Expr::Num(if *b { "1".into() } else { "0".into() }),
                other => Expr::Other(other.to_string().to_lowercase()),
            },
            sa::Expr::Nested(inner) => self.expr(inner, allow_alias)?,
            sa::Expr::UnaryOp { op, expr } => match op {
                UnaryOperator::Minus => match self.expr(expr, allow_alias)? {
                    Expr::Num(n) => match n.strip_prefix('-') {
                        Some(pos) => Expr::Num(pos.to_string()),
                        None if n == "0" => Expr::Num(n),
                        None => Expr::Num(format!("-{n}")),
                    },
                    other => Expr::Neg(Box::new(other)),
                },
                UnaryOperator::Plus => self.expr(expr, allow_alias)?,
                UnaryOperator::Not => Expr::Pred(Box::new(self.pred(e)?)),
                _ => Expr::Other(e.to_string().to_lowercase()),
            },
            sa::Expr::BinaryOp { left, op, right } => {
                let sym = match op {
                    BinaryOperator::Plus => "+",
                    BinaryOperator::Minus => "-",
                    BinaryOperator::Multiply => "*",
                    BinaryOperator::Divide => "/",
                    BinaryOperator::Modulo => "%",
                    BinaryOperator::StringConcat => "||",
                    _ => return Ok(Expr::Pred(Box::new(self.pred(e)?))),
                };
                Expr::Bin {
                    op: sym.into(),
                    l: Box::new(self.expr(left, allow_alias)?),
                    r: Box::new(self.expr(right, allow_alias)?),
                }
            }
            sa::Expr::Function(f) => self.function(f, allow_alias)?,
            sa::Expr::Cast {
                expr, data_type, ..
            } => Expr::Func {
                name: format!("cast:{}", data_type.to_string().to_lowercase()),
                args: vec![self.expr(expr, allow_alias)?],
            },
            sa::Expr::Subquery(q) => Expr::Sub(Box::new(self.query(q)?)),
            sa::Expr::IsNull(_)
            | sa::Expr::IsNotNull(_)
            | sa::Expr::InList { .. }
            | sa::Expr::InSubquery { .. }
            | sa::Expr::Between { .. }
            | sa::Expr::Like { .. }
            | sa::Expr::ILike { .. }
            | sa::Expr::Exists { .. } => Expr::Pred(Box::new(self.pred(e)?)),
            other => Expr::Other(other.to_string().to_lowercase()),
        })
    }

    pub(super) fn function(&mut self, f: &sa::Function, allow_alias: bool) -> LResult<Expr> {
        let name = object_last(&f.name).unwrap_or_default();
        let (distinct, args): (bool, Vec<&FunctionArg>) = match &f.args {
            FunctionArguments::None => (false, Vec::new()),
            FunctionArguments::List(l) => (
                matches!(
                    l.duplicate_treatment,
                    Some(sa::DuplicateTreatment::Distinct)
                ),
                l.args.iter().collect(),
            ),
            FunctionArguments::Subquery(_) => return lerr("function over a subquery"),
        };
        let mut lowered = Vec::new();
        for a in args {
            match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => {
                    lowered.push(self.expr(e, allow_alias)?)
                }
                FunctionArg::Unnamed(FunctionArgExpr::Wildcard) => lowered.push(Expr::Star(None)),
                FunctionArg::Unnamed(FunctionArgExpr::QualifiedWildcard(n)) => {
                    lowered.push(Expr::Star(object_last(n)))
                }
                _ => return lerr("named function arguments are not supported"),
            }
        }
        if matches!(name.as_str(), "max" | "min" | "count" | "sum" | "avg")
            && lowered.len() == 1
            && f.filter.is_none()
            && f.over.is_none()
        {
            let arg = lowered.pop().unwrap_or(Expr::Star(None));
            return Ok(Expr::Agg {
                func: name,
                distinct,
                arg: Box::new(arg),
            });
        }
        if f.over.is_some() {
            return Ok(Expr::Other(f.to_string().to_lowercase()));
        }
        Ok(Expr::Func {
            name: if distinct {
                format!("{name}:distinct")
            } else {
                name
            },
            args: lowered,
        })
    }

    pub(super) fn pred_with_aliases(&mut self, e: &sa::Expr) -> LResult<Pred> {
        // HAVING may name select aliases (A15); resolution handles that via allow_alias in
        // comparisons below.
        self.pred_inner(e, true)
    }

    pub(super) fn pred(&mut self, e: &sa::Expr) -> LResult<Pred> {
        self.pred_inner(e, false)
    }

    pub(super) fn value(&mut self, e: &sa::Expr, allow_alias: bool) -> LResult<Expr> {
        let v = self.expr(e, allow_alias)?;
        Ok(match v {
            Expr::Str(s) if numeric_string(&s) && self.ctx.on(11) => {
                self.ctx.fire(11);
                Expr::Num(canon_number(&s).unwrap_or(s))
            }
            other => other,
        })
    }

    pub(super) fn pred_inner(&mut self, e: &sa::Expr, aa: bool) -> LResult<Pred> {
        self.descend()?;
        let lowered = self.pred_at(e, aa);
        self.depth -= 1;
        lowered
    }

    fn pred_at(&mut self, e: &sa::Expr, aa: bool) -> LResult<Pred> {
        Ok(match e {
            sa::Expr::Nested(inner) => self.pred_inner(inner, aa)?,
            sa::Expr::BinaryOp { left, op, right } => {
                let cmp = match op {
                    BinaryOperator::And => {
                        let mut parts = Vec::new();
                        for side in chain_operands(e, op) {
                            match self.pred_inner(side, aa)? {
                                Pred::And(ps) => parts.extend(ps),
                                p => parts.push(p),
                            }
                        }
                        return Ok(Pred::And(parts));
                    }
                    BinaryOperator::Or => {
                        let mut parts = Vec::new();
                        for side in chain_operands(e, op) {
                            match self.pred_inner(side, aa)? {
                                Pred::Or(ps) => parts.extend(ps),
                                p => parts.push(p),
                            }
                        }
                        return Ok(Pred::Or(parts));
                    }
                    BinaryOperator::Eq => CmpOp::Eq,
                    BinaryOperator::NotEq => CmpOp::Ne,
                    BinaryOperator::Lt => CmpOp::Lt,
                    BinaryOperator::Gt => CmpOp::Gt,
                    BinaryOperator::LtEq => CmpOp::Le,
                    BinaryOperator::GtEq => CmpOp::Ge,
                    _ => return Ok(Pred::Expr(self.expr(e, aa)?)),
                };
                Pred::Cmp {
                    op: cmp,
                    l: self.value(left, aa)?,
                    r: self.value(right, aa)?,
                }
            }
            sa::Expr::UnaryOp {
                op: UnaryOperator::Not,
                expr,
            } => {
                let inner = self.pred_inner(expr, aa)?;
                self.negate(inner)
            }
            sa::Expr::InList {
                expr,
                list,
                negated,
            } => {
                let l = self.value(expr, aa)?;
                let mut items = Vec::new();
                for it in list {
                    items.push(self.value(it, aa)?);
                }
                if self.ctx.on(15) {
                    self.ctx.fire(15);
                    let op = if *negated { CmpOp::Ne } else { CmpOp::Eq };
                    let mut atoms: Vec<Pred> = items
                        .into_iter()
                        .map(|r| Pred::Cmp {
                            op,
                            l: l.clone(),
                            r,
                        })
                        .collect();
                    if atoms.len() == 1 {
                        atoms.pop().unwrap_or(Pred::And(Vec::new()))
                    } else if *negated {
                        Pred::And(atoms)
                    } else {
                        Pred::Or(atoms)
                    }
                } else {
                    Pred::InList {
                        e: l,
                        list: items,
                        negated: *negated,
                    }
                }
            }
            sa::Expr::InSubquery {
                expr,
                subquery,
                negated,
            } => Pred::InSub {
                e: self.value(expr, aa)?,
                q: Box::new(self.query(subquery)?),
                negated: *negated,
            },
            sa::Expr::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let x = self.value(expr, aa)?;
                let lo = self.value(low, aa)?;
                let hi = self.value(high, aa)?;
                if self.ctx.on(19) {
                    self.ctx.fire(19);
                    if *negated {
                        Pred::Or(vec![
                            Pred::Cmp {
                                op: CmpOp::Lt,
                                l: x.clone(),
                                r: lo,
                            },
                            Pred::Cmp {
                                op: CmpOp::Gt,
                                l: x,
                                r: hi,
                            },
                        ])
                    } else {
                        Pred::And(vec![
                            Pred::Cmp {
                                op: CmpOp::Ge,
                                l: x.clone(),
                                r: lo,
                            },
                            Pred::Cmp {
                                op: CmpOp::Le,
                                l: x,
                                r: hi,
                            },
                        ])
                    }
                } else {
                    Pred::Between {
                        e: x,
                        lo,
                        hi,
                        negated: *negated,
                    }
                }
            }
            sa::Expr::Like {
                negated,
                expr,
                pattern,
                escape_char: None,
                any: false,
            }
            | sa::Expr::ILike {
                negated,
                expr,
                pattern,
                escape_char: None,
                any: false,
            } => Pred::Like {
                e: self.value(expr, aa)?,
                pat: self.value(pattern, aa)?,
                negated: *negated,
            },
            sa::Expr::IsNull(x) => Pred::IsNull {
                e: self.value(x, aa)?,
                negated: false,
            },
            sa::Expr::IsNotNull(x) => Pred::IsNull {
                e: self.value(x, aa)?,
                negated: true,
            },
            sa::Expr::Exists { subquery, negated } => Pred::Exists {
                q: Box::new(self.query(subquery)?),
                negated: *negated,
            },
            other => Pred::Expr(self.expr(other, aa)?),
        })
    }

    pub(super) fn negate(&mut self, p: Pred) -> Pred {
        match p {
            Pred::Cmp { op, l, r } if self.ctx.on(20) => {
                self.ctx.fire(20);
                Pred::Cmp {
                    op: op.negated(),
                    l,
                    r,
                }
            }
            Pred::InSub { e, q, negated } => Pred::InSub {
                e,
                q,
                negated: !negated,
            },
            Pred::InList { e, list, negated } => Pred::InList {
                e,
                list,
                negated: !negated,
            },
            Pred::Like { e, pat, negated } => Pred::Like {
                e,
                pat,
                negated: !negated,
            },
            Pred::IsNull { e, negated } => Pred::IsNull {
                e,
                negated: !negated,
            },
            Pred::Exists { q, negated } => Pred::Exists {
                q,
                negated: !negated,
            },
            Pred::Between { e, lo, hi, negated } => Pred::Between {
                e,
                lo,
                hi,
                negated: !negated,
            },
            Pred::Not(inner) => *inner,
            other => Pred::Not(Box::new(other)),
        }
    }
}

pub(super) fn attach_set_op(q: &mut Query, op: SetOp, r: Query) {
    match &mut q.set_op {
        Some((_, next)) => attach_set_op(next, op, r),
        None => q.set_op = Some((op, Box::new(r))),
    }
}

pub(super) fn subquery_output_names(q: &sa::Query) -> Vec<String> {
    let mut cur = q.body.as_ref();
    loop {
        match cur {
            SetExpr::SetOperation { left, .. } => cur = left,
            SetExpr::Query(inner) => cur = &inner.body,
            _ => break,
        }
    }
    let SetExpr::Select(sel) = cur else {
        return Vec::new();
    };
    sel.projection
        .iter()
        .filter_map(|item| match item {
            SelectItem::ExprWithAlias { alias, .. } => Some(ident_lower(alias)),
            SelectItem::UnnamedExpr(sa::Expr::Identifier(i)) => Some(ident_lower(i)),
            SelectItem::UnnamedExpr(sa::Expr::CompoundIdentifier(p)) => p.last().map(ident_lower),
            _ => None,
        })
        .collect()
}
