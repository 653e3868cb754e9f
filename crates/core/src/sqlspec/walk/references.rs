//! The reference walk: every table and column a query names, scope by scope, as written — the
//! input of the STEF catalogue checks ([`QueryReferences`]). It runs only when asked
//! ([`ExtractOptions::collect_references`](crate::sqlspec::ExtractOptions)), after the spec walk,
//! and shares its nesting bound and on-demand stack growth.
//!
//! Scopes: each SELECT opens one. Its sources are its FROM tables and derived tables (CTEs are
//! derived tables visible to the whole query); expressions of the SELECT (projections, ON, WHERE,
//! GROUP BY, HAVING) are recorded in it, and a query's ORDER BY in the scope of its last SELECT.
//! Subqueries in expressions and FROM open child scopes whose parent is the enclosing SELECT.

use sqlparser::ast::{
    BinaryOperator, DataType, Expr, Function, Query, Select, SelectItem, SetExpr, TableFactor,
    TableWithJoins, Value,
};

use super::ast::{
    aggregate_func, comparison_op, flip, function_name_is, ident_name, join_constraint, plain_args,
    string_value, visit_children,
};
use super::walker::{MAX_NESTING, STACK_RED_ZONE, STACK_SEGMENT};
use crate::sqlspec::{
    AggFunc, ColumnRef, Division, QueryReferences, RefLiteral, RefScope, RefSource, RefSourceKind,
};

/// Collect the references of `query`; `None` when it nests deeper than the walk allows.
pub(crate) fn references_of_query(query: &Query) -> Option<QueryReferences> {
    let mut walker = RefWalker {
        refs: QueryReferences::default(),
        ctes: Vec::new(),
        nesting: 0,
        too_deep: false,
    };
    walker.query(query, None);
    (!walker.too_deep).then_some(walker.refs)
}

struct RefWalker {
    refs: QueryReferences,
    /// CTE names and their columns, visible to every scope (lenient: no shadowing rules).
    ctes: Vec<(String, Option<Vec<String>>)>,
    nesting: u32,
    too_deep: bool,
}

/// A column-ish operand: the index of its column reference, if it is one.
type ColumnIdx = Option<usize>;

impl RefWalker {
    fn enter(&mut self) -> bool {
        if self.nesting >= MAX_NESTING {
            self.too_deep = true;
            return false;
        }
        self.nesting += 1;
        true
    }

    fn query(&mut self, query: &Query, parent: Option<usize>) {
        if !self.enter() {
            return;
        }
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || {
            if let Some(with) = &query.with {
                for cte in &with.cte_tables {
                    let columns = if cte.alias.columns.is_empty() {
                        output_names(&cte.query)
                    } else {
                        Some(
                            cte.alias
                                .columns
                                .iter()
                                .map(|c| c.name.value.clone())
                                .collect(),
                        )
                    };
                    self.ctes.push((cte.alias.name.value.clone(), columns));
                    self.query(&cte.query, parent);
                }
            }
            let last = self.set_expr(&query.body, parent);
            if let Some(order_by) = &query.order_by
                && let sqlparser::ast::OrderByKind::Expressions(items) = &order_by.kind
            {
                let scope = last.or(parent);
                for item in items {
                    self.expr(&item.expr, scope);
                }
            }
        });
        self.nesting = self.nesting.saturating_sub(1);
    }

    /// Walk a query body; returns the scope of its last SELECT.
    fn set_expr(&mut self, body: &SetExpr, parent: Option<usize>) -> Option<usize> {
        if !self.enter() {
            return None;
        }
        let last = stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || match body {
            SetExpr::Select(select) => Some(self.select(select, parent)),
            SetExpr::Query(q) => {
                self.query(q, parent);
                None
            }
            SetExpr::SetOperation { left, right, .. } => {
                let l = self.set_expr(left, parent);
                self.set_expr(right, parent).or(l)
            }
            _ => None,
        });
        self.nesting = self.nesting.saturating_sub(1);
        last
    }

    fn select(&mut self, select: &Select, parent: Option<usize>) -> usize {
        let scope = self.refs.scopes.len();
        self.refs.scopes.push(RefScope {
            parent,
            sources: Vec::new(),
            aliases: select
                .projection
                .iter()
                .filter_map(|item| match item {
                    SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.clone()),
                    _ => None,
                })
                .collect(),
        });
        for table in &select.from {
            self.table_with_joins(table, scope);
        }
        for item in &select.projection {
            match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    self.expr(e, Some(scope));
                }
                _ => {}
            }
        }
        if let Some(selection) = &select.selection {
            self.expr(selection, Some(scope));
        }
        if let sqlparser::ast::GroupByExpr::Expressions(exprs, _) = &select.group_by {
            for e in exprs {
                self.expr(e, Some(scope));
            }
        }
        if let Some(having) = &select.having {
            self.expr(having, Some(scope));
        }
        scope
    }

    fn table_with_joins(&mut self, table: &TableWithJoins, scope: usize) {
        self.table_factor(&table.relation, scope);
        for join in &table.joins {
            self.table_factor(&join.relation, scope);
            if let Some(sqlparser::ast::JoinConstraint::On(on)) =
                join_constraint(&join.join_operator)
            {
                self.expr(on, Some(scope));
            }
        }
    }

    fn table_factor(&mut self, factor: &TableFactor, scope: usize) {
        let (binding, kind) = match factor {
            TableFactor::Table { name, alias, .. } => {
                let table = name
                    .0
                    .last()
                    .and_then(|p| p.as_ident())
                    .map(|i| i.value.clone())
                    .unwrap_or_default();
                let cte = self
                    .ctes
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(&table))
                    .map(|(_, cols)| cols.clone());
                let binding = alias
                    .as_ref()
                    .map(|a| a.name.value.clone())
                    .unwrap_or_else(|| table.clone());
                let kind = match cte {
                    Some(cols) => RefSourceKind::Derived(cols),
                    None => RefSourceKind::Table(table),
                };
                (binding, kind)
            }
            TableFactor::Derived {
                subquery, alias, ..
            } => {
                self.query(subquery, Some(scope));
                let columns = match alias.as_ref().filter(|a| !a.columns.is_empty()) {
                    Some(a) => Some(a.columns.iter().map(|c| c.name.value.clone()).collect()),
                    None => output_names(subquery),
                };
                (
                    alias
                        .as_ref()
                        .map(|a| a.name.value.clone())
                        .unwrap_or_default(),
                    RefSourceKind::Derived(columns),
                )
            }
            TableFactor::NestedJoin {
                table_with_joins,
                alias,
            } => {
                self.table_with_joins(table_with_joins, scope);
                match alias {
                    Some(a) => (a.name.value.clone(), RefSourceKind::Derived(None)),
                    None => return,
                }
            }
            // Table functions, UNNEST, PIVOT, …: names the catalogue cannot know.
            _ => (String::new(), RefSourceKind::Derived(None)),
        };
        if let Some(s) = self.refs.scopes.get_mut(scope) {
            s.sources.push(RefSource { binding, kind });
        }
    }

    /// Record a column reference; its index.
    fn column(&mut self, expr: &Expr, scope: Option<usize>) -> ColumnIdx {
        let scope = scope?;
        let (qualifier, ident) = match expr {
            Expr::Identifier(ident) => (None, ident),
            Expr::CompoundIdentifier(parts) => {
                let (last, rest) = parts.split_last()?;
                (rest.last().map(|q| q.value.clone()), last)
            }
            _ => return None,
        };
        self.refs.columns.push(ColumnRef {
            scope,
            qualifier,
            name: ident.value.clone(),
            double_quoted: ident.quote_style == Some('"'),
        });
        Some(self.refs.columns.len() - 1)
    }

    fn expr(&mut self, expr: &Expr, scope: Option<usize>) {
        if !self.enter() {
            return;
        }
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || {
            self.expr_inner(expr, scope)
        });
        self.nesting = self.nesting.saturating_sub(1);
    }

    fn expr_inner(&mut self, expr: &Expr, scope: Option<usize>) {
        match expr {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
                self.column(expr, scope);
                return;
            }
            Expr::BinaryOp { left, op, right } => {
                let l = unwrap_column(left);
                let r = unwrap_column(right);
                if *op == BinaryOperator::Divide {
                    let both_integer = integer_valued(left, 0) && integer_valued(right, 0);
                    let forces_real = forces_real(left) || forces_real(right);
                    // Pushed before the operands are walked (an outer division before the
                    // divisions inside it); the operands are walked here, in order, so that
                    // each side's column references are a range of `columns`.
                    let at = self.refs.divisions.len();
                    let start = self.refs.columns.len();
                    self.refs.divisions.push(Division {
                        // Only a division that will be reported is rendered.
                        text: if both_integer && !forces_real {
                            expr.to_string()
                        } else {
                            String::new()
                        },
                        forces_real,
                        both_integer,
                        numerator_columns: start..start,
                        denominator_columns: start..start,
                    });
                    self.expr(left, scope);
                    let middle = self.refs.columns.len();
                    self.expr(right, scope);
                    if let Some(d) = self.refs.divisions.get_mut(at) {
                        d.numerator_columns = start..middle;
                        d.denominator_columns = middle..self.refs.columns.len();
                    }
                    return;
                }
                if let Some(fop) = comparison_op(op) {
                    match (l, r) {
                        (Some(a), Some(b)) => {
                            let (a, b) = (self.column(a, scope), self.column(b, scope));
                            if *op == BinaryOperator::Eq
                                && let (Some(a), Some(b)) = (a, b)
                            {
                                self.refs.equalities.push((a, b));
                            }
                            return;
                        }
                        (Some(col), None) => {
                            if let Some(lit) = literal(right)
                                && let Some(c) = self.column(col, scope)
                            {
                                self.refs.comparisons.push((c, fop, lit));
                                return;
                            }
                        }
                        (None, Some(col)) => {
                            if let Some(lit) = literal(left)
                                && let Some(c) = self.column(col, scope)
                            {
                                self.refs.comparisons.push((c, flip(fop), lit));
                                return;
                            }
                        }
                        (None, None) => {}
                    }
                }
            }
            Expr::Function(function) => {
                if function.over.is_none()
                    && let Some(func) = aggregate_func(function)
                    && matches!(func, AggFunc::Sum | AggFunc::Avg | AggFunc::Count)
                    && let Some(args) = plain_args(function)
                    && let [arg] = args.as_slice()
                    && let Some(col) = unwrap_column(arg)
                {
                    if let Some(c) = self.column(col, scope) {
                        self.refs.aggregates.push((func, c, is_distinct(function)));
                    }
                    return;
                }
            }
            Expr::InSubquery { expr, subquery, .. } => {
                self.expr(expr, scope);
                self.query(subquery, scope);
                return;
            }
            Expr::Exists { subquery, .. } | Expr::Subquery(subquery) => {
                self.query(subquery, scope);
                return;
            }
            _ => {}
        }
        let mut children: Vec<&Expr> = Vec::new();
        visit_children(expr, &mut |child| children.push(child));
        for child in children {
            self.expr(child, scope);
        }
    }
}

/// The column an operand names, through parentheses, casts and collations.
fn unwrap_column(expr: &Expr) -> Option<&Expr> {
    match expr {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => Some(expr),
        Expr::Nested(inner)
        | Expr::Cast { expr: inner, .. }
        | Expr::Collate { expr: inner, .. } => unwrap_column(inner),
        _ => None,
    }
}

/// A literal operand.
fn literal(expr: &Expr) -> Option<RefLiteral> {
    match expr {
        Expr::Nested(inner) => literal(inner),
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => Some(RefLiteral {
                text: n.clone(),
                quoted: false,
            }),
            other => string_value(other).map(|s| RefLiteral {
                text: s.to_string(),
                quoted: true,
            }),
        },
        Expr::UnaryOp {
            op: sqlparser::ast::UnaryOperator::Minus,
            expr,
        } => literal(expr).map(|mut l| {
            l.text.insert(0, '-');
            l
        }),
        _ => None,
    }
}

fn is_distinct(function: &Function) -> bool {
    matches!(
        &function.args,
        sqlparser::ast::FunctionArguments::List(list)
            if matches!(list.duplicate_treatment, Some(sqlparser::ast::DuplicateTreatment::Distinct))
    )
}

/// Output column names of a query (its left-most SELECT), `None` when a `*` hides them.
fn output_names(query: &Query) -> Option<Vec<String>> {
    let mut body = query.body.as_ref();
    loop {
        match body {
            SetExpr::Select(select) => {
                let mut names = Vec::with_capacity(select.projection.len());
                for item in &select.projection {
                    match item {
                        SelectItem::ExprWithAlias { alias, .. } => names.push(alias.value.clone()),
                        SelectItem::UnnamedExpr(e) => match unwrap_column(e) {
                            Some(Expr::Identifier(i)) => names.push(ident_name(i)),
                            Some(Expr::CompoundIdentifier(parts)) => {
                                names.extend(parts.last().map(ident_name))
                            }
                            _ => names.push(e.to_string()),
                        },
                        _ => return None,
                    }
                }
                return Some(names);
            }
            SetExpr::Query(q) => body = q.body.as_ref(),
            SetExpr::SetOperation { left, .. } => body = left.as_ref(),
            _ => return None,
        }
    }
}

/// Whether an operand, as written, makes a division non-integer: a cast to a non-integer
/// numeric type, a decimal literal, or a float-valued function anywhere in it.
fn forces_real(expr: &Expr) -> bool {
    /// Functions whose result is REAL whatever their arguments.
    const REAL_FUNCTIONS: [&str; 7] = [
        "real",
        "float",
        "double",
        "avg",
        "round",
        "julianday",
        "total",
    ];
    let mut stack = vec![expr];
    let mut budget = 256usize;
    while let Some(e) = stack.pop() {
        budget = budget.saturating_sub(1);
        if budget == 0 {
            return true; // too large to tell: do not accuse it
        }
        let real = match e {
            Expr::Cast { data_type, .. } => real_type(data_type),
            Expr::Value(v) => {
                matches!(&v.value, Value::Number(n, _) if n.contains(['.', 'e', 'E']))
            }
            Expr::Function(f) => REAL_FUNCTIONS.iter().any(|n| function_name_is(f, n)),
            _ => false,
        };
        if real {
            return true;
        }
        visit_children(e, &mut |child| stack.push(child));
    }
    false
}

fn real_type(data_type: &DataType) -> bool {
    let text = data_type.to_string().to_ascii_lowercase();
    ["real", "float", "double", "decimal", "numeric", "number"]
        .iter()
        .any(|t| text.contains(t))
}

/// How deep [`integer_valued`] looks before it gives up (and says "not integer": a long
/// arithmetic chain is not accused).
const INTEGER_DEPTH: u32 = 32;

/// Whether an operand is integer-valued as written: COUNT, a SUM of integer-valued CASE/IIF
/// branches, an integer literal, or `+ - *` of such operands.
fn integer_valued(expr: &Expr, depth: u32) -> bool {
    if depth > INTEGER_DEPTH {
        return false;
    }
    match expr {
        Expr::Nested(inner) => integer_valued(inner, depth + 1),
        Expr::Value(v) => {
            matches!(&v.value, Value::Number(n, _) if n.bytes().all(|b| b.is_ascii_digit()))
        }
        Expr::BinaryOp { left, op, right } => {
            matches!(
                op,
                BinaryOperator::Plus | BinaryOperator::Minus | BinaryOperator::Multiply
            ) && integer_valued(left, depth + 1)
                && integer_valued(right, depth + 1)
        }
        Expr::Function(f) if f.over.is_none() => {
            if function_name_is(f, "count") {
                return true;
            }
            if function_name_is(f, "sum")
                && let Some(args) = plain_args(f)
                && let [arg] = args.as_slice()
            {
                return integer_branches(arg);
            }
            false
        }
        _ => false,
    }
}

/// A CASE / IIF whose every result is an integer literal (the `SUM(CASE WHEN … THEN 1 ELSE 0
/// END)` count idiom), or a comparison (SQLite's 0/1).
fn integer_branches(expr: &Expr) -> bool {
    let int_lit = |e: &Expr| matches!(e, Expr::Value(v) if matches!(&v.value, Value::Number(n, _) if n.bytes().all(|b| b.is_ascii_digit())));
    match expr {
        Expr::Nested(inner) => integer_branches(inner),
        Expr::Case {
            conditions,
            else_result,
            ..
        } => {
            conditions.iter().all(|w| int_lit(&w.result))
                && else_result.as_deref().is_none_or(int_lit)
        }
        Expr::Function(f) if function_name_is(f, "iif") => match plain_args(f).as_deref() {
            Some([_, a, b]) => int_lit(a) && int_lit(b),
            _ => false,
        },
        Expr::BinaryOp { op, .. } => comparison_op(op).is_some(),
        _ => false,
    }
}
