//! The AST walk: one pass over a parsed query that fills a [`SqlSpec`].
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

use sqlparser::ast::{
    BinaryOperator, CastKind, DataType, DateTimeField, Distinct, DuplicateTreatment, Expr, Fetch,
    Function, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, Ident, JoinConstraint,
    JoinOperator, LimitClause, ObjectName, ObjectNamePart, OrderByExpr, OrderByKind, OrderBySort,
    Query, Select, SelectItem, SetExpr, SetOperator, TableFactor, TableWithJoins, TopQuantity,
    UnaryOperator, Value, WindowType,
};

use super::normalize::{
    as_year, canonical_number, lowercase, normalize_text_value, push_lowercase,
};
use super::{
    AggFunc, Aggregation, Clause, Filter, FilterOp, FilterValue, OrderItem, Projection, SortDir,
    SqlSpec,
};

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

/// Remove later duplicates, keeping first-occurrence order (lists are short).
fn dedup_in_place<T: PartialEq>(items: &mut Vec<T>) {
    let mut i = 0;
    while i < items.len() {
        if items[..i].contains(&items[i]) {
            items.remove(i);
        } else {
            i += 1;
        }
    }
}

impl Walker {
    // ---------------------------------------------------------------- nesting guard

    /// Enter one recursion level; `false` (and the error flag) past [`MAX_NESTING`].
    fn enter(&mut self) -> bool {
        if self.nesting >= MAX_NESTING {
            self.too_deep = true;
            return false;
        }
        self.nesting += 1;
        true
    }

    fn leave(&mut self) {
        self.nesting = self.nesting.saturating_sub(1);
    }

    // ---------------------------------------------------------------- query structure

    fn walk_query(&mut self, query: &Query, depth: u32, role: Role) {
        if !self.enter() {
            return;
        }
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || {
            self.walk_query_inner(query, depth, role)
        });
        self.leave();
    }

    fn walk_query_inner(&mut self, query: &Query, depth: u32, role: Role) {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                let name = ident_name(&cte.alias.name);
                if !self.spec.ctes.contains(&name) {
                    self.spec.ctes.push(name);
                }
            }
            for cte in &with.cte_tables {
                self.walk_query(&cte.query, depth + 1, Role::NESTED);
            }
        }
        let has_own_order_limit =
            query.order_by.is_some() || query.limit_clause.is_some() || query.fetch.is_some();
        let body_role = Role {
            projections: role.projections,
            order_limit: role.order_limit && !has_own_order_limit,
        };
        self.walk_set_expr(&query.body, depth, body_role);

        if let Some(order_by) = &query.order_by
            && let OrderByKind::Expressions(items) = &order_by.kind
        {
            for item in items {
                if role.order_limit {
                    let order_item = self.order_item(item, depth);
                    self.spec.order_by.push(order_item);
                } else {
                    let mut first = None;
                    self.scan_expr(&item.expr, depth, true, None, &mut first);
                }
            }
        }
        if role.order_limit && (query.limit_clause.is_some() || query.fetch.is_some()) {
            self.spec.limit = limit_of(query.limit_clause.as_ref(), query.fetch.as_ref());
        }
    }

    fn walk_set_expr(&mut self, body: &SetExpr, depth: u32, role: Role) {
        if !self.enter() {
            return;
        }
        match body {
            SetExpr::Select(select) => self.walk_select(select, depth, role),
            SetExpr::Query(query) => self.walk_query(query, depth, role),
            SetExpr::SetOperation {
                left, op, right, ..
            } => {
                self.spec.set_operations = true;
                // UNION branches are alternatives: their filters are marked as disjunctive.
                let saved = self.in_alternative;
                self.in_alternative |= matches!(op, SetOperator::Union);
                let left_role = Role {
                    projections: role.projections,
                    order_limit: false,
                };
                self.walk_set_expr(left, depth, left_role);
                // EXCEPT's right branch removes rows: its filters describe what is excluded, like
                // the subquery of `NOT IN (…)`, so they sit one level deeper.
                let right_depth = match op {
                    SetOperator::Except | SetOperator::Minus => depth + 1,
                    _ => depth,
                };
                self.walk_set_expr(right, right_depth, Role::NESTED);
                self.in_alternative = saved;
            }
            SetExpr::Values(values) => {
                for row in &values.rows {
                    for expr in &row.content {
                        let mut first = None;
                        self.scan_expr(expr, depth, false, None, &mut first);
                    }
                }
            }
            SetExpr::Table(table) => {
                if let Some(name) = &table.table_name {
                    self.add_table(lowercase(name));
                }
            }
            _ => {}
        }
        self.leave();
    }

    fn walk_select(&mut self, select: &Select, depth: u32, role: Role) {
        // Filters of a UNION branch, or of a subquery inside an OR, are alternatives.
        let disj = self.in_alternative;
        for table in &select.from {
            self.walk_table_with_joins(table, depth, disj);
        }

        let mut aliases: Vec<AliasEntry> = Vec::new();
        for item in &select.projection {
            let (expr, alias) = match item {
                SelectItem::UnnamedExpr(expr) => (expr, None),
                SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias)),
                SelectItem::ExprWithAliases { expr, aliases } => (expr, aliases.first()),
                SelectItem::QualifiedWildcard(..) | SelectItem::Wildcard(..) => {
                    if role.projections {
                        self.spec.projections.push(Projection {
                            expr: "*".to_string(),
                            alias: None,
                            aggregate: None,
                            columns: Vec::new(),
                        });
                    }
                    continue;
                }
            };
            let mut columns = Vec::new();
            let mut first_agg = None;
            self.scan_expr(expr, depth, true, Some(&mut columns), &mut first_agg);
            if !role.projections && alias.is_none() {
                continue;
            }
            let text = self.render(expr);
            let alias = alias.map(ident_name);
            if let Some(alias) = &alias
                && *alias != text
            {
                aliases.push(AliasEntry {
                    alias: alias.clone(),
                    expr: text.clone(),
                    aggregate: first_agg.is_some(),
                });
            }
            if role.projections {
                dedup_in_place(&mut columns);
                self.spec.projections.push(Projection {
                    expr: text,
                    alias,
                    aggregate: first_agg,
                    columns,
                });
            }
        }

        if role.projections {
            self.spec.distinct = matches!(
                select.distinct,
                Some(Distinct::Distinct) | Some(Distinct::On(_))
            );
            // T-SQL `TOP n` (its ORDER BY, if any, belongs to the enclosing query).
            if let Some(top) = &select.top {
                self.spec.limit = match &top.quantity {
                    Some(TopQuantity::Constant(n)) => Some(*n),
                    Some(TopQuantity::Expr(expr)) => literal_u64(expr),
                    None => None,
                };
            }
        }

        if let Some(selection) = &select.selection {
            let ctx = BoolCtx {
                clause: Clause::Where,
                depth,
                join: false,
                disj,
                negated: false,
                aliases: &aliases,
            };
            self.walk_bool(selection, ctx, None);
        }

        if let GroupByExpr::Expressions(exprs, _) = &select.group_by {
            for expr in exprs {
                let mut first = None;
                self.scan_expr(expr, depth, false, None, &mut first);
                if role.projections {
                    let text = self.group_item(expr);
                    self.spec.group_by.push(text);
                }
            }
        }

        if let Some(having) = &select.having {
            let ctx = BoolCtx {
                clause: Clause::Having,
                depth,
                join: false,
                disj,
                negated: false,
                aliases: &aliases,
            };
            self.walk_bool(having, ctx, None);
        }

        if let Some(qualify) = &select.qualify {
            let mut first = None;
            self.scan_expr(qualify, depth, false, None, &mut first);
        }
        if !select.named_window.is_empty() {
            self.spec.window_functions = true;
        }
        if role.projections && role.order_limit {
            self.lift_order_limit(select);
        }
    }

    fn walk_table_with_joins(&mut self, table: &TableWithJoins, depth: u32, disj: bool) {
        if !self.enter() {
            return;
        }
        self.walk_table_factor(&table.relation, depth, disj);
        for join in &table.joins {
            self.walk_table_factor(&join.relation, depth, disj);
            if let Some(JoinConstraint::On(on)) = join_constraint(&join.join_operator) {
                let ctx = BoolCtx {
                    clause: Clause::Where,
                    depth,
                    join: true,
                    disj,
                    negated: false,
                    aliases: &[],
                };
                self.walk_bool(on, ctx, None);
            }
        }
        self.leave();
    }

    fn walk_table_factor(&mut self, factor: &TableFactor, depth: u32, disj: bool) {
        match factor {
            TableFactor::Table { name, .. } => {
                let name = object_name(name);
                if !self.spec.ctes.contains(&name) {
                    self.add_table(name);
                }
            }
            TableFactor::Derived { subquery, .. } => {
                self.spec.subqueries += 1;
                self.walk_query(subquery, depth + 1, Role::NESTED);
            }
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => self.walk_table_with_joins(table_with_joins, depth, disj),
            _ => {}
        }
    }

    fn add_table(&mut self, name: String) {
        if !self.spec.tables.contains(&name) {
            self.spec.tables.push(name);
        }
    }

    // ---------------------------------------------------------------- GROUP BY / ORDER BY

    fn group_item(&mut self, expr: &Expr) -> String {
        if let Some(p) = projection_ref(&self.spec.projections, expr) {
            return p.expr.clone();
        }
        self.render(expr)
    }

    fn order_item(&mut self, item: &OrderByExpr, depth: u32) -> OrderItem {
        let dir = sort_dir(item);
        let mut first = None;
        self.scan_expr(&item.expr, depth, true, None, &mut first);
        if let Some(p) = projection_ref(&self.spec.projections, &item.expr) {
            return OrderItem {
                expr: p.expr.clone(),
                dir,
                aggregate: p.aggregate.clone(),
            };
        }
        OrderItem {
            expr: self.render(&item.expr),
            dir,
            aggregate: first,
        }
    }

    /// `SELECT x FROM (SELECT x, … ORDER BY … LIMIT k) AS t` is a top-k query: when the outermost
    /// SELECT only passes rows through from one derived table (no join, WHERE, GROUP BY, HAVING,
    /// aggregate, nor ORDER BY / LIMIT of its own), the derived query's ORDER BY / LIMIT are the
    /// spec's. Called after the outermost SELECT's projections are known.
    fn lift_order_limit(&mut self, select: &Select) {
        let [table] = select.from.as_slice() else {
            return;
        };
        let TableFactor::Derived { subquery, .. } = &table.relation else {
            return;
        };
        let passes_through = table.joins.is_empty()
            && select.selection.is_none()
            && select.having.is_none()
            && matches!(&select.group_by, GroupByExpr::Expressions(e, _) if e.is_empty())
            && self.spec.projections.iter().all(|p| p.aggregate.is_none())
            && self.spec.order_by.is_empty()
            && self.spec.limit.is_none();
        if !passes_through {
            return;
        }
        let Some(inner) = leftmost_select(&subquery.body) else {
            return;
        };
        // The inner projections, for alias / ordinal resolution (rendered without side effects:
        // the normal walk already recorded the inner query's aggregates and filters).
        let mut scope = Vec::with_capacity(inner.projection.len());
        for item in &inner.projection {
            let (expr, alias) = match item {
                SelectItem::UnnamedExpr(expr) => (expr, None),
                SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias)),
                SelectItem::ExprWithAliases { expr, aliases } => (expr, aliases.first()),
                _ => {
                    scope.push(Projection {
                        expr: "*".to_string(),
                        alias: None,
                        aggregate: None,
                        columns: Vec::new(),
                    });
                    continue;
                }
            };
            let text = self.render(expr);
            let aggregate = self.find_aggregate(expr);
            scope.push(Projection {
                expr: text,
                alias: alias.map(ident_name),
                aggregate,
                columns: Vec::new(),
            });
        }
        if let Some(order_by) = &subquery.order_by
            && let OrderByKind::Expressions(items) = &order_by.kind
        {
            for item in items {
                let dir = sort_dir(item);
                let order_item = match projection_ref(&scope, &item.expr) {
                    Some(p) => OrderItem {
                        expr: p.expr.clone(),
                        dir,
                        aggregate: p.aggregate.clone(),
                    },
                    None => OrderItem {
                        expr: self.render(&item.expr),
                        dir,
                        aggregate: self.find_aggregate(&item.expr),
                    },
                };
                self.spec.order_by.push(order_item);
            }
        }
        self.spec.limit = limit_of(subquery.limit_clause.as_ref(), subquery.fetch.as_ref());
    }

    /// The first aggregate call in `expr` (subqueries excluded), without recording anything.
    fn find_aggregate(&mut self, expr: &Expr) -> Option<Aggregation> {
        if !self.enter() {
            return None;
        }
        let found = stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || {
            if let Expr::Function(function) = expr
                && function.over.is_none()
                && let Some(func) = aggregate_func(function)
            {
                return Some(self.aggregation(function, func));
            }
            let mut found = None;
            visit_children(expr, &mut |child| {
                if found.is_none() {
                    found = self.find_aggregate(child);
                }
            });
            found
        });
        self.leave();
        found
    }

    // ---------------------------------------------------------------- boolean structure

    fn new_group(&mut self) -> u32 {
        self.next_group += 1;
        self.next_group
    }

    fn walk_bool(&mut self, expr: &Expr, ctx: BoolCtx<'_>, group: Option<u32>) {
        if !self.enter() {
            return;
        }
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || {
            self.walk_bool_inner(expr, ctx, group)
        });
        self.leave();
    }

    fn walk_bool_inner(&mut self, expr: &Expr, ctx: BoolCtx<'_>, group: Option<u32>) {
        match expr {
            Expr::Nested(inner) => self.walk_bool(inner, ctx, group),
            Expr::UnaryOp {
                op: UnaryOperator::Not,
                expr: inner,
            } => self.walk_bool(
                inner,
                BoolCtx {
                    negated: !ctx.negated,
                    ..ctx
                },
                group,
            ),
            Expr::BinaryOp {
                op: op @ (BinaryOperator::And | BinaryOperator::Or),
                ..
            } => {
                let mut operands = Vec::new();
                flatten_chain(expr, op, &mut operands);
                let conjunction = matches!(op, BinaryOperator::And) != ctx.negated;
                if conjunction {
                    let (g, owner) = match group {
                        Some(g) => (g, false),
                        None => (self.new_group(), true),
                    };
                    let start = self.spec.filters.len();
                    for operand in operands {
                        self.walk_bool(operand, ctx, Some(g));
                    }
                    if owner {
                        self.merge_year_ranges(start, g);
                    }
                } else {
                    let child = BoolCtx { disj: true, ..ctx };
                    for operand in operands {
                        self.walk_bool(operand, child, None);
                    }
                }
            }
            _ => {
                let (g, owner) = match group {
                    Some(g) => (g, false),
                    None => (self.new_group(), true),
                };
                let start = self.spec.filters.len();
                self.atomic(expr, ctx, g);
                if owner {
                    self.merge_year_ranges(start, g);
                }
            }
        }
    }

    fn push_filter(
        &mut self,
        ctx: BoolCtx<'_>,
        group: u32,
        lhs: String,
        op: FilterOp,
        rhs: FilterValue,
    ) {
        if ctx.join && !(rhs.is_literal() || rhs == FilterValue::Null) {
            return;
        }
        self.spec.filters.push(Filter {
            lhs,
            op,
            rhs,
            clause: ctx.clause,
            in_disjunction: ctx.disj,
            depth: ctx.depth,
        });
        self.groups.push(group);
    }

    /// One predicate (no AND/OR/NOT at its root) → zero or more filters.
    fn atomic(&mut self, expr: &Expr, ctx: BoolCtx<'_>, g: u32) {
        self.atomic_filters(expr, ctx, g);
        // Then aggregates (HAVING), window functions and subqueries inside the predicate, so
        // that a predicate's own filter precedes those of its subqueries.
        let saved = self.in_alternative;
        self.in_alternative |= ctx.disj;
        let mut first = None;
        self.scan_expr(
            expr,
            ctx.depth,
            ctx.clause == Clause::Having,
            None,
            &mut first,
        );
        self.in_alternative = saved;
    }

    fn atomic_filters(&mut self, expr: &Expr, ctx: BoolCtx<'_>, g: u32) {
        let neg = ctx.negated;
        match expr {
            Expr::BinaryOp { left, op, right } => {
                if let Some(op) = comparison_op(op) {
                    self.comparison(left, op, right, ctx, g);
                } else {
                    self.boolean_expr(expr, ctx, g);
                }
            }
            Expr::AnyOp {
                left,
                compare_op,
                right,
                ..
            }
            | Expr::AllOp {
                left,
                compare_op,
                right,
            } => {
                if let Some(op) = comparison_op(compare_op) {
                    self.comparison(left, op, right, ctx, g);
                }
            }
            Expr::IsDistinctFrom(left, right) => {
                self.comparison(left, FilterOp::NotEq, right, ctx, g)
            }
            Expr::IsNotDistinctFrom(left, right) => {
                self.comparison(left, FilterOp::Eq, right, ctx, g)
            }
            Expr::Between {
                expr: subject,
                negated,
                low,
                high,
            } => {
                let lhs = self.lhs(subject, ctx);
                let low = self.value(low, lhs.year);
                let high = self.value(high, lhs.year);
                if *negated != neg {
                    let alt = BoolCtx { disj: true, ..ctx };
                    let g1 = self.new_group();
                    self.push_filter(alt, g1, lhs.text.clone(), FilterOp::Lt, low);
                    let g2 = self.new_group();
                    self.push_filter(alt, g2, lhs.text, FilterOp::Gt, high);
                } else {
                    self.push_filter(ctx, g, lhs.text.clone(), FilterOp::GtEq, low);
                    self.push_filter(ctx, g, lhs.text, FilterOp::LtEq, high);
                }
            }
            Expr::InList {
                expr: subject,
                list,
                negated,
            } => {
                let lhs = self.lhs(subject, ctx);
                let negated = *negated != neg;
                let mut values: Vec<FilterValue> =
                    list.iter().map(|item| self.value(item, lhs.year)).collect();
                if values.len() == 1 {
                    let op = if negated {
                        FilterOp::NotEq
                    } else {
                        FilterOp::Eq
                    };
                    let value = values.pop().unwrap_or(FilterValue::Null);
                    self.push_filter(ctx, g, lhs.text, op, value);
                } else {
                    let op = if negated {
                        FilterOp::NotIn
                    } else {
                        FilterOp::In
                    };
                    self.push_filter(ctx, g, lhs.text, op, FilterValue::List(values));
                }
            }
            Expr::InSubquery {
                expr: subject,
                negated,
                ..
            } => {
                let lhs = self.lhs(subject, ctx);
                let op = if *negated != neg {
                    FilterOp::NotIn
                } else {
                    FilterOp::In
                };
                self.push_filter(ctx, g, lhs.text, op, FilterValue::Subquery);
            }
            Expr::Like {
                negated,
                any,
                expr: subject,
                pattern,
                escape_char,
            }
            | Expr::ILike {
                negated,
                any,
                expr: subject,
                pattern,
                escape_char,
            } => {
                let plain = !*any && escape_char.is_none();
                self.like(subject, pattern, *negated != neg, plain, ctx, g);
            }
            Expr::SimilarTo {
                negated,
                expr: subject,
                pattern,
                ..
            }
            | Expr::RLike {
                negated,
                expr: subject,
                pattern,
                ..
            } => {
                let lhs = self.lhs(subject, ctx);
                let value = self.value(pattern, false);
                let op = if *negated != neg {
                    FilterOp::NotLike
                } else {
                    FilterOp::Like
                };
                self.push_filter(ctx, g, lhs.text, op, value);
            }
            Expr::IsNull(subject) | Expr::IsNotNull(subject) => {
                let is_null = matches!(expr, Expr::IsNull(_)) != neg;
                let lhs = self.lhs(subject, ctx);
                let op = if is_null {
                    FilterOp::IsNull
                } else {
                    FilterOp::IsNotNull
                };
                self.push_filter(ctx, g, lhs.text, op, FilterValue::Null);
            }
            Expr::IsTrue(subject)
            | Expr::IsFalse(subject)
            | Expr::IsNotTrue(subject)
            | Expr::IsNotFalse(subject) => {
                let truth = matches!(expr, Expr::IsTrue(_) | Expr::IsNotFalse(_));
                let positive = matches!(expr, Expr::IsTrue(_) | Expr::IsFalse(_)) != neg;
                let lhs = self.lhs(subject, ctx);
                let op = if positive {
                    FilterOp::Eq
                } else {
                    FilterOp::NotEq
                };
                let value = FilterValue::Text(if truth { "true" } else { "false" }.to_string());
                self.push_filter(ctx, g, lhs.text, op, value);
            }
            // EXISTS only contributes through its subquery (already walked by the scan);
            // constant conditions (`WHERE 1`) are not filters.
            Expr::Exists { .. } | Expr::Value(_) => {}
            _ => self.boolean_expr(expr, ctx, g),
        }
    }

    /// A boolean-valued expression used as a predicate (`WHERE active`, `WHERE instr(a, 'x')`):
    /// `expr = true` (or `= false` under NOT).
    fn boolean_expr(&mut self, expr: &Expr, ctx: BoolCtx<'_>, g: u32) {
        let lhs = self.lhs(expr, ctx);
        let value = if ctx.negated { "false" } else { "true" };
        self.push_filter(
            ctx,
            g,
            lhs.text,
            FilterOp::Eq,
            FilterValue::Text(value.to_string()),
        );
    }

    fn comparison(&mut self, left: &Expr, op: FilterOp, right: &Expr, ctx: BoolCtx<'_>, g: u32) {
        // `1 = 1`, `'a' <> 'b'`: constant conditions constrain nothing.
        if is_literal(left) && is_literal(right) {
            return;
        }
        let (subject, other, mut op) = if is_literal(left) && !is_literal(right) {
            (right, left, flip(op))
        } else {
            (left, right, op)
        };
        if ctx.negated {
            op = negate(op);
        }
        let mut lhs = self.lhs(subject, ctx);
        let mut value = self.value(other, lhs.year);
        // `substr(d, 1, 4) = '2023'` is a year idiom too (only recognizable with the value).
        if !lhs.year
            && let Some(date) = substr_year_arg(subject)
            && let Some(year) = value_year(&value)
        {
            lhs = Lhs {
                text: self.year_text(date),
                year: true,
            };
            value = FilterValue::Number(year.to_string());
        }
        self.push_filter(ctx, g, lhs.text, op, value);
    }

    fn like(
        &mut self,
        subject: &Expr,
        pattern: &Expr,
        negated: bool,
        plain: bool,
        ctx: BoolCtx<'_>,
        g: u32,
    ) {
        let lhs = self.lhs(subject, ctx);
        let raw = if plain {
            self.string_literal(pattern)
        } else {
            None
        };
        let Some(raw) = raw else {
            let op = if negated {
                FilterOp::NotLike
            } else {
                FilterOp::Like
            };
            let value = self.value(pattern, false);
            self.push_filter(ctx, g, lhs.text, op, value);
            return;
        };
        let pattern = normalize_text_value(&raw);
        // Only `%` counts as a wildcard: LLM-written SQL uses `_` as a literal underscore in ids
        // (`LIKE 'TR009_%'`) far more often than as a one-character wildcard.
        let is_wild = |c: char| c == '%';
        if !pattern.contains(is_wild) {
            let op = if negated {
                FilterOp::NotEq
            } else {
                FilterOp::Eq
            };
            let value = if lhs.year {
                year_value(FilterValue::Text(pattern))
            } else {
                FilterValue::Text(pattern)
            };
            self.push_filter(ctx, g, lhs.text, op, value);
            return;
        }
        if negated {
            self.push_filter(
                ctx,
                g,
                lhs.text,
                FilterOp::NotLike,
                FilterValue::Text(pattern),
            );
            return;
        }
        let leading = pattern.starts_with('%');
        let trailing = pattern.ends_with('%');
        let core = pattern.trim_matches('%');
        if core.is_empty() || core.contains(is_wild) {
            self.push_filter(ctx, g, lhs.text, FilterOp::Like, FilterValue::Text(pattern));
            return;
        }
        if !leading && trailing && !lhs.year {
            let year_part = core.strip_suffix('-').unwrap_or(core);
            if let Some(year) = as_year(year_part) {
                let text = format!("year({})", lhs.text);
                self.push_filter(
                    ctx,
                    g,
                    text,
                    FilterOp::Eq,
                    FilterValue::Number(year.to_string()),
                );
                return;
            }
        }
        let op = match (leading, trailing) {
            (true, true) => FilterOp::Contains,
            (false, true) => FilterOp::StartsWith,
            _ => FilterOp::EndsWith,
        };
        let core = core.to_string();
        self.push_filter(ctx, g, lhs.text, op, FilterValue::Text(core));
    }

    /// Merge `d >= 'Y-01-01' AND d < 'Y+1-01-01'` (or `<= 'Y-12-31'`) of one AND-group into a
    /// single `year(d) = Y`.
    fn merge_year_ranges(&mut self, start: usize, group: u32) {
        let mut i = start;
        while let (Some(filter), Some(&g)) = (self.spec.filters.get(i), self.groups.get(i)) {
            let lower = if g == group {
                lower_year_bound(filter)
            } else {
                None
            };
            let Some(year) = lower else {
                i += 1;
                continue;
            };
            let lhs = filter.lhs.clone();
            let upper = self
                .spec
                .filters
                .iter()
                .zip(&self.groups)
                .enumerate()
                .skip(start)
                .find(|(j, (f, g))| {
                    *j != i && **g == group && f.lhs == lhs && is_upper_year_bound(f, year)
                })
                .map(|(j, _)| j);
            let Some(j) = upper else {
                i += 1;
                continue;
            };
            if let Some(merged) = self.spec.filters.get_mut(i) {
                merged.lhs = format!("year({lhs})");
                merged.op = FilterOp::Eq;
                merged.rhs = FilterValue::Number(year.to_string());
            }
            // `j` comes from enumerating both vectors, so it is in bounds for each.
            self.spec.filters.remove(j);
            self.groups.remove(j);
            if j < i {
                i -= 1;
            }
            i += 1;
        }
    }

    // ---------------------------------------------------------------- filter sides

    fn lhs(&mut self, expr: &Expr, ctx: BoolCtx<'_>) -> Lhs {
        let expr = strip_date_wrappers(strip_wrappers(expr));
        if let Some(date) = year_arg(expr) {
            return Lhs {
                text: self.year_text(date),
                year: true,
            };
        }
        match expr {
            Expr::Identifier(ident) => {
                let name = ident_name(ident);
                let usable = |a: &&AliasEntry| {
                    a.alias == name && (ctx.clause == Clause::Having || !a.aggregate)
                };
                if let Some(entry) = ctx.aliases.iter().find(usable) {
                    let year = entry.expr.starts_with("year(");
                    return Lhs {
                        text: entry.expr.clone(),
                        year,
                    };
                }
                Lhs {
                    text: name,
                    year: false,
                }
            }
            Expr::CompoundIdentifier(parts) => Lhs {
                text: parts.last().map(ident_name).unwrap_or_default(),
                year: false,
            },
            _ => Lhs {
                text: self.render(expr),
                year: false,
            },
        }
    }

    fn year_text(&mut self, date: &Expr) -> String {
        let mut out = String::from("year(");
        self.render_into(strip_date_wrappers(date), &mut out);
        out.push(')');
        out
    }

    /// The content of a string literal (or a double-quoted "string" where those are strings).
    fn string_literal(&self, expr: &Expr) -> Option<String> {
        match strip_wrappers(expr) {
            Expr::Value(v) => string_value(&v.value).map(str::to_string),
            Expr::Identifier(ident) if self.dquote_strings && ident.quote_style == Some('"') => {
                Some(ident.value.clone())
            }
            _ => None,
        }
    }

    /// Normalize the right-hand side of a filter.
    fn value(&mut self, expr: &Expr, year: bool) -> FilterValue {
        let value = self.value_inner(expr);
        if year { year_value(value) } else { value }
    }

    fn value_inner(&mut self, expr: &Expr) -> FilterValue {
        let expr = strip_wrappers(expr);
        match expr {
            Expr::Value(v) => match &v.value {
                Value::Number(n, _) => number_value(n),
                Value::Null => FilterValue::Null,
                Value::Boolean(b) => FilterValue::Text(b.to_string()),
                Value::Placeholder(p) => FilterValue::Expr(p.clone()),
                other => match string_value(other) {
                    Some(s) => FilterValue::Text(normalize_text_value(s)),
                    None => FilterValue::Expr(self.render(expr)),
                },
            },
            Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr: inner,
            } => match strip_wrappers(inner) {
                Expr::Value(v) => match &v.value {
                    Value::Number(n, _) => number_value(&format!("-{n}")),
                    _ => FilterValue::Expr(self.render(expr)),
                },
                _ => FilterValue::Expr(self.render(expr)),
            },
            Expr::UnaryOp {
                op: UnaryOperator::Plus,
                expr: inner,
            } => self.value_inner(inner),
            Expr::TypedString(typed) => match string_value(&typed.value.value) {
                Some(s) => FilterValue::Text(normalize_text_value(s)),
                None => FilterValue::Expr(self.render(expr)),
            },
            Expr::Cast {
                expr: inner,
                data_type,
                ..
            } if is_literal(inner) => {
                let value = self.value_inner(inner);
                match value {
                    FilterValue::Text(t) if is_numeric_type(data_type) => {
                        match canonical_number(&t) {
                            Some(n) => FilterValue::Number(n),
                            None => FilterValue::Text(t),
                        }
                    }
                    other => other,
                }
            }
            Expr::Identifier(ident) => {
                if self.dquote_strings && ident.quote_style == Some('"') {
                    FilterValue::Text(normalize_text_value(&ident.value))
                } else {
                    FilterValue::Column(ident_name(ident))
                }
            }
            Expr::CompoundIdentifier(parts) => {
                FilterValue::Column(parts.last().map(ident_name).unwrap_or_default())
            }
            Expr::Subquery(_) => FilterValue::Subquery,
            Expr::Tuple(items) => {
                FilterValue::List(items.iter().map(|item| self.value_inner(item)).collect())
            }
            _ => FilterValue::Expr(self.render(expr)),
        }
    }

    // ---------------------------------------------------------------- expression scan

    /// Find aggregates (when `collect_aggs`), window functions, columns (into `columns`) and
    /// subqueries (walked at `depth + 1`) in `expr`. `first_agg` receives the first aggregate.
    fn scan_expr(
        &mut self,
        expr: &Expr,
        depth: u32,
        collect_aggs: bool,
        mut columns: Option<&mut Vec<String>>,
        first_agg: &mut Option<Aggregation>,
    ) {
        if !self.enter() {
            return;
        }
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || match expr {
            Expr::Identifier(ident) => {
                if let Some(cols) = columns.as_deref_mut() {
                    cols.push(ident_name(ident));
                }
            }
            Expr::CompoundIdentifier(parts) => {
                if let (Some(cols), Some(last)) = (columns.as_deref_mut(), parts.last()) {
                    cols.push(ident_name(last));
                }
            }
            Expr::Subquery(query)
            | Expr::Exists {
                subquery: query, ..
            } => {
                self.spec.subqueries += 1;
                self.walk_query(query, depth + 1, Role::NESTED);
            }
            Expr::InSubquery {
                expr: subject,
                subquery,
                ..
            } => {
                self.scan_expr(subject, depth, collect_aggs, columns, first_agg);
                self.spec.subqueries += 1;
                self.walk_query(subquery, depth + 1, Role::NESTED);
            }
            Expr::Function(function) => {
                self.scan_function(function, depth, collect_aggs, columns, first_agg)
            }
            _ => visit_children(expr, &mut |child| {
                self.scan_expr(
                    child,
                    depth,
                    collect_aggs,
                    columns.as_deref_mut(),
                    first_agg,
                )
            }),
        });
        self.leave();
    }

    fn scan_function(
        &mut self,
        function: &Function,
        depth: u32,
        collect_aggs: bool,
        mut columns: Option<&mut Vec<String>>,
        first_agg: &mut Option<Aggregation>,
    ) {
        if function.over.is_some() {
            self.spec.window_functions = true;
            if let Some(WindowType::WindowSpec(spec)) = &function.over {
                for expr in &spec.partition_by {
                    self.scan_expr(expr, depth, false, None, first_agg);
                }
                for item in &spec.order_by {
                    self.scan_expr(&item.expr, depth, false, None, first_agg);
                }
            }
        } else if collect_aggs && let Some(func) = aggregate_func(function) {
            let aggregation = self.aggregation(function, func);
            if first_agg.is_none() {
                *first_agg = Some(aggregation.clone());
            }
            self.spec.aggregations.push(aggregation);
        }
        match &function.args {
            FunctionArguments::List(list) => {
                for arg in &list.args {
                    if let Some(expr) = function_arg_expr(arg) {
                        self.scan_expr(
                            expr,
                            depth,
                            collect_aggs,
                            columns.as_deref_mut(),
                            first_agg,
                        );
                    }
                }
            }
            FunctionArguments::Subquery(query) => {
                self.spec.subqueries += 1;
                self.walk_query(query, depth + 1, Role::NESTED);
            }
            FunctionArguments::None => {}
        }
        if let Some(filter) = &function.filter {
            self.scan_expr(filter, depth, collect_aggs, columns, first_agg);
        }
    }

    fn aggregation(&mut self, function: &Function, func: AggFunc) -> Aggregation {
        let mut distinct = false;
        let mut arg = String::new();
        let mut column = None;
        if let FunctionArguments::List(list) = &function.args {
            distinct = matches!(list.duplicate_treatment, Some(DuplicateTreatment::Distinct));
            for (i, a) in list.args.iter().enumerate() {
                if i > 0 {
                    arg.push_str(", ");
                }
                self.render_function_arg(a, &mut arg);
            }
            if let [single] = list.args.as_slice()
                && let Some(expr) = function_arg_expr(single)
            {
                column = column_of(expr);
            }
        }
        Aggregation {
            func,
            column,
            distinct,
            arg,
        }
    }

    // ---------------------------------------------------------------- rendering

    /// Normalized text of `expr`.
    fn render(&mut self, expr: &Expr) -> String {
        let mut out = String::new();
        self.render_into(expr, &mut out);
        out
    }

    fn render_into(&mut self, expr: &Expr, out: &mut String) {
        if !self.enter() {
            out.push_str(ELLIPSIS);
            return;
        }
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || {
            self.render_inner(expr, out)
        });
        self.leave();
    }

    fn render_list(&mut self, exprs: &[Expr], out: &mut String) {
        for (i, e) in exprs.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            self.render_into(e, out);
        }
    }

    fn render_inner(&mut self, expr: &Expr, out: &mut String) {
        if let Some(date) = year_arg(expr) {
            out.push_str("year(");
            self.render_into(date, out);
            out.push(')');
            return;
        }
        match expr {
            Expr::Identifier(ident) => push_lowercase(out, &ident.value),
            Expr::CompoundIdentifier(parts) => {
                if let Some(last) = parts.last() {
                    push_lowercase(out, &last.value);
                }
            }
            Expr::Wildcard(_) | Expr::QualifiedWildcard(..) => out.push('*'),
            Expr::Value(v) => render_value(&v.value, out),
            Expr::TypedString(typed) => render_value(&typed.value.value, out),
            Expr::BinaryOp { left, op, right } => {
                self.render_into(left, out);
                out.push(' ');
                push_binary_op(op, out);
                out.push(' ');
                self.render_into(right, out);
            }
            Expr::UnaryOp { op, expr: inner } => {
                match op {
                    UnaryOperator::Not => out.push_str("not "),
                    UnaryOperator::Minus => out.push('-'),
                    UnaryOperator::Plus => {}
                    other => push_lowercase(out, &other.to_string()),
                }
                self.render_into(inner, out);
            }
            Expr::Nested(inner) => {
                if is_atomic(inner) {
                    self.render_into(inner, out);
                } else {
                    out.push('(');
                    self.render_into(inner, out);
                    out.push(')');
                }
            }
            Expr::Collate { expr: inner, .. } => self.render_into(inner, out),
            Expr::Function(function) => self.render_function(function, out),
            Expr::Cast {
                expr: inner,
                data_type,
                kind,
                ..
            } => {
                out.push_str(match kind {
                    CastKind::TryCast => "try_cast(",
                    CastKind::SafeCast => "safe_cast(",
                    _ => "cast(",
                });
                self.render_into(inner, out);
                out.push_str(" as ");
                push_lowercase(out, &data_type.to_string());
                out.push(')');
            }
            Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                out.push_str("case");
                if let Some(operand) = operand {
                    out.push(' ');
                    self.render_into(operand, out);
                }
                for when in conditions {
                    out.push_str(" when ");
                    self.render_into(&when.condition, out);
                    out.push_str(" then ");
                    self.render_into(&when.result, out);
                }
                if let Some(else_result) = else_result {
                    out.push_str(" else ");
                    self.render_into(else_result, out);
                }
                out.push_str(" end");
            }
            Expr::IsNull(inner) => self.render_postfix(inner, " is null", out),
            Expr::IsNotNull(inner) => self.render_postfix(inner, " is not null", out),
            Expr::IsTrue(inner) => self.render_postfix(inner, " is true", out),
            Expr::IsNotTrue(inner) => self.render_postfix(inner, " is not true", out),
            Expr::IsFalse(inner) => self.render_postfix(inner, " is false", out),
            Expr::IsNotFalse(inner) => self.render_postfix(inner, " is not false", out),
            Expr::InList {
                expr: inner,
                list,
                negated,
            } => {
                self.render_into(inner, out);
                out.push_str(if *negated { " not in (" } else { " in (" });
                self.render_list(list, out);
                out.push(')');
            }
            Expr::InSubquery {
                expr: inner,
                subquery,
                negated,
            } => {
                self.render_into(inner, out);
                out.push_str(if *negated { " not in " } else { " in " });
                self.render_query(subquery, out);
            }
            Expr::Between {
                expr: inner,
                negated,
                low,
                high,
            } => {
                self.render_into(inner, out);
                out.push_str(if *negated {
                    " not between "
                } else {
                    " between "
                });
                self.render_into(low, out);
                out.push_str(" and ");
                self.render_into(high, out);
            }
            Expr::Like {
                negated,
                expr: inner,
                pattern,
                ..
            }
            | Expr::ILike {
                negated,
                expr: inner,
                pattern,
                ..
            } => {
                self.render_into(inner, out);
                out.push_str(if *negated { " not like " } else { " like " });
                self.render_into(pattern, out);
            }
            Expr::Exists { subquery, negated } => {
                out.push_str(if *negated { "not exists " } else { "exists " });
                self.render_query(subquery, out);
            }
            Expr::Subquery(query) => self.render_query(query, out),
            Expr::Extract {
                field, expr: inner, ..
            } => {
                out.push_str("extract(");
                push_lowercase(out, &field.to_string());
                out.push_str(" from ");
                self.render_into(inner, out);
                out.push(')');
            }
            Expr::Substring {
                expr: inner,
                substring_from,
                substring_for,
                ..
            } => {
                out.push_str("substr(");
                self.render_into(inner, out);
                if let Some(from) = substring_from {
                    out.push_str(", ");
                    self.render_into(from, out);
                }
                if let Some(length) = substring_for {
                    out.push_str(", ");
                    self.render_into(length, out);
                }
                out.push(')');
            }
            Expr::Trim { expr: inner, .. } => {
                out.push_str("trim(");
                self.render_into(inner, out);
                out.push(')');
            }
            Expr::Ceil { expr: inner, .. } => {
                out.push_str("ceil(");
                self.render_into(inner, out);
                out.push(')');
            }
            Expr::Floor { expr: inner, .. } => {
                out.push_str("floor(");
                self.render_into(inner, out);
                out.push(')');
            }
            Expr::Tuple(items) => {
                out.push('(');
                self.render_list(items, out);
                out.push(')');
            }
            _ => render_fallback(expr, out),
        }
    }

    fn render_postfix(&mut self, inner: &Expr, suffix: &str, out: &mut String) {
        self.render_into(inner, out);
        out.push_str(suffix);
    }

    fn render_function_arg(&mut self, arg: &FunctionArg, out: &mut String) {
        let arg_expr = match arg {
            FunctionArg::Unnamed(a) => a,
            FunctionArg::Named { name, arg, .. } => {
                push_lowercase(out, &name.value);
                out.push_str(" => ");
                arg
            }
            FunctionArg::ExprNamed { name, arg, .. } => {
                self.render_into(name, out);
                out.push_str(" => ");
                arg
            }
        };
        match arg_expr {
            FunctionArgExpr::Expr(e) => self.render_into(e, out),
            _ => out.push('*'),
        }
    }

    fn render_function(&mut self, function: &Function, out: &mut String) {
        push_object_name(&function.name, out);
        match &function.args {
            FunctionArguments::None => {}
            FunctionArguments::Subquery(query) => {
                self.render_query(query, out);
            }
            FunctionArguments::List(list) => {
                out.push('(');
                if matches!(list.duplicate_treatment, Some(DuplicateTreatment::Distinct)) {
                    out.push_str("distinct ");
                }
                for (i, arg) in list.args.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    self.render_function_arg(arg, out);
                }
                out.push(')');
            }
        }
        if let Some(filter) = &function.filter {
            out.push_str(" filter (where ");
            self.render_into(filter, out);
            out.push(')');
        }
        match &function.over {
            None => {}
            Some(WindowType::NamedWindow(name)) => {
                out.push_str(" over ");
                push_lowercase(out, &name.value);
            }
            Some(WindowType::WindowSpec(spec)) => {
                out.push_str(" over (");
                let mut sep = "";
                if !spec.partition_by.is_empty() {
                    out.push_str("partition by ");
                    self.render_list(&spec.partition_by, out);
                    sep = " ";
                }
                if !spec.order_by.is_empty() {
                    out.push_str(sep);
                    out.push_str("order by ");
                    self.render_order_list(&spec.order_by, out);
                }
                out.push(')');
            }
        }
    }

    fn render_order_list(&mut self, items: &[OrderByExpr], out: &mut String) {
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            self.render_into(&item.expr, out);
            if matches!(item.options.sort, Some(OrderBySort::Desc)) {
                out.push_str(" desc");
            }
        }
    }

    /// Compact normalized text of a subquery: `(select … from … where … group by … order by …
    /// limit n)`.
    fn render_query(&mut self, query: &Query, out: &mut String) {
        if !self.enter() {
            out.push_str(ELLIPSIS);
            return;
        }
        out.push('(');
        self.render_set_expr(&query.body, out);
        if let Some(order_by) = &query.order_by
            && let OrderByKind::Expressions(items) = &order_by.kind
        {
            out.push_str(" order by ");
            self.render_order_list(items, out);
        }
        if let Some(limit) = limit_of(query.limit_clause.as_ref(), query.fetch.as_ref()) {
            out.push_str(" limit ");
            out.push_str(&limit.to_string());
        }
        out.push(')');
        self.leave();
    }

    fn render_set_expr(&mut self, body: &SetExpr, out: &mut String) {
        if !self.enter() {
            out.push_str(ELLIPSIS);
            return;
        }
        match body {
            SetExpr::Select(select) => self.render_select(select, out),
            SetExpr::Query(query) => self.render_query(query, out),
            SetExpr::SetOperation {
                left, op, right, ..
            } => {
                self.render_set_expr(left, out);
                out.push(' ');
                push_lowercase(out, &op.to_string());
                out.push(' ');
                self.render_set_expr(right, out);
            }
            other => render_fallback_text(&other.to_string(), out),
        }
        self.leave();
    }

    fn render_select(&mut self, select: &Select, out: &mut String) {
        out.push_str("select ");
        if matches!(
            select.distinct,
            Some(Distinct::Distinct) | Some(Distinct::On(_))
        ) {
            out.push_str("distinct ");
        }
        for (i, item) in select.projection.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            match item {
                SelectItem::UnnamedExpr(e)
                | SelectItem::ExprWithAlias { expr: e, .. }
                | SelectItem::ExprWithAliases { expr: e, .. } => self.render_into(e, out),
                SelectItem::QualifiedWildcard(..) | SelectItem::Wildcard(..) => out.push('*'),
            }
        }
        let mut first_table = true;
        for table in &select.from {
            let mut factors = vec![&table.relation];
            factors.extend(table.joins.iter().map(|j| &j.relation));
            for factor in factors {
                out.push_str(if first_table { " from " } else { ", " });
                first_table = false;
                match factor {
                    TableFactor::Table { name, .. } => push_object_name(name, out),
                    TableFactor::Derived { subquery, .. } => self.render_query(subquery, out),
                    _ => out.push('?'),
                }
            }
        }
        if let Some(selection) = &select.selection {
            out.push_str(" where ");
            self.render_into(selection, out);
        }
        if let GroupByExpr::Expressions(exprs, _) = &select.group_by
            && !exprs.is_empty()
        {
            out.push_str(" group by ");
            self.render_list(exprs, out);
        }
        if let Some(having) = &select.having {
            out.push_str(" having ");
            self.render_into(having, out);
        }
    }
}

// -------------------------------------------------------------------- free helpers

/// Call `f` on every direct child expression of `expr` (subqueries excluded: the scan handles
/// them). Variants without expression children are ignored.
fn visit_children(expr: &Expr, f: &mut dyn FnMut(&Expr)) {
    match expr {
        Expr::IsFalse(e)
        | Expr::IsNotFalse(e)
        | Expr::IsTrue(e)
        | Expr::IsNotTrue(e)
        | Expr::IsNull(e)
        | Expr::IsNotNull(e)
        | Expr::IsUnknown(e)
        | Expr::IsNotUnknown(e)
        | Expr::Nested(e)
        | Expr::UnaryOp { expr: e, .. }
        | Expr::Convert { expr: e, .. }
        | Expr::Cast { expr: e, .. }
        | Expr::Extract { expr: e, .. }
        | Expr::Ceil { expr: e, .. }
        | Expr::Floor { expr: e, .. }
        | Expr::Collate { expr: e, .. }
        | Expr::Prefixed { value: e, .. }
        | Expr::IsJson { expr: e, .. }
        | Expr::IsNormalized { expr: e, .. }
        | Expr::JsonAccess { value: e, .. }
        | Expr::CompoundFieldAccess { root: e, .. }
        | Expr::OuterJoin(e)
        | Expr::Prior(e)
        | Expr::Named { expr: e, .. } => f(e),
        Expr::IsDistinctFrom(a, b)
        | Expr::IsNotDistinctFrom(a, b)
        | Expr::BinaryOp {
            left: a, right: b, ..
        }
        | Expr::Like {
            expr: a,
            pattern: b,
            ..
        }
        | Expr::ILike {
            expr: a,
            pattern: b,
            ..
        }
        | Expr::SimilarTo {
            expr: a,
            pattern: b,
            ..
        }
        | Expr::RLike {
            expr: a,
            pattern: b,
            ..
        }
        | Expr::AnyOp {
            left: a, right: b, ..
        }
        | Expr::AllOp {
            left: a, right: b, ..
        }
        | Expr::InUnnest {
            expr: a,
            array_expr: b,
            ..
        }
        | Expr::AtTimeZone {
            timestamp: a,
            time_zone: b,
        }
        | Expr::Position { expr: a, r#in: b } => {
            f(a);
            f(b);
        }
        Expr::InList { expr, list, .. } => {
            f(expr);
            list.iter().for_each(&mut *f);
        }
        Expr::Between {
            expr, low, high, ..
        } => {
            f(expr);
            f(low);
            f(high);
        }
        Expr::Substring {
            expr,
            substring_from,
            substring_for,
            ..
        } => {
            f(expr);
            if let Some(e) = substring_from {
                f(e);
            }
            if let Some(e) = substring_for {
                f(e);
            }
        }
        Expr::Trim {
            expr,
            trim_what,
            trim_characters,
            ..
        } => {
            f(expr);
            if let Some(e) = trim_what {
                f(e);
            }
            if let Some(chars) = trim_characters {
                chars.iter().for_each(&mut *f);
            }
        }
        Expr::Overlay {
            expr,
            overlay_what,
            overlay_from,
            overlay_for,
        } => {
            f(expr);
            f(overlay_what);
            f(overlay_from);
            if let Some(e) = overlay_for {
                f(e);
            }
        }
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            if let Some(e) = operand {
                f(e);
            }
            for when in conditions {
                f(&when.condition);
                f(&when.result);
            }
            if let Some(e) = else_result {
                f(e);
            }
        }
        Expr::Tuple(items) => items.iter().for_each(&mut *f),
        Expr::Array(array) => array.elem.iter().for_each(&mut *f),
        Expr::Interval(interval) => f(&interval.value),
        Expr::GroupingSets(sets) | Expr::Cube(sets) | Expr::Rollup(sets) => {
            sets.iter().flatten().for_each(&mut *f)
        }
        Expr::Function(function) => {
            if let FunctionArguments::List(list) = &function.args {
                for arg in &list.args {
                    if let Some(e) = function_arg_expr(arg) {
                        f(e);
                    }
                }
            }
        }
        _ => {}
    }
}

/// A projection addressed by a 1-based ordinal or by its alias.
fn projection_ref<'p>(projections: &'p [Projection], expr: &Expr) -> Option<&'p Projection> {
    match strip_nested(expr) {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => {
                let idx: usize = n.parse().ok()?;
                projections.get(idx.checked_sub(1)?)
            }
            _ => None,
        },
        Expr::Identifier(ident) => {
            let name = ident_name(ident);
            projections
                .iter()
                .find(|p| p.alias.as_deref() == Some(name.as_str()))
        }
        _ => None,
    }
}

fn sort_dir(item: &OrderByExpr) -> SortDir {
    match item.options.sort {
        Some(OrderBySort::Desc) => SortDir::Desc,
        _ => SortDir::Asc,
    }
}

/// The left-most SELECT of a set expression (through parenthesized queries).
fn leftmost_select(body: &SetExpr) -> Option<&Select> {
    let mut body = body;
    loop {
        match body {
            SetExpr::Select(select) => return Some(select),
            SetExpr::Query(query) => body = &query.body,
            SetExpr::SetOperation { left, .. } => body = left,
            _ => return None,
        }
    }
}

/// Operands of a left- or right-nested chain of `op` (through parentheses), iteratively.
fn flatten_chain<'e>(expr: &'e Expr, op: &BinaryOperator, out: &mut Vec<&'e Expr>) {
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        match e {
            Expr::BinaryOp { left, op: o, right } if o == op => {
                stack.push(right);
                stack.push(left);
            }
            Expr::Nested(inner) if matches!(inner.as_ref(), Expr::BinaryOp { op: o, .. } if o == op) => {
                stack.push(inner)
            }
            _ => out.push(e),
        }
    }
}

fn join_constraint(op: &JoinOperator) -> Option<&JoinConstraint> {
    match op {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c)
        | JoinOperator::CrossJoin(c)
        | JoinOperator::Semi(c)
        | JoinOperator::LeftSemi(c)
        | JoinOperator::RightSemi(c)
        | JoinOperator::Anti(c)
        | JoinOperator::LeftAnti(c)
        | JoinOperator::RightAnti(c)
        | JoinOperator::StraightJoin(c)
        | JoinOperator::AsOf { constraint: c, .. } => Some(c),
        _ => None,
    }
}

fn ident_name(ident: &Ident) -> String {
    lowercase(&ident.value)
}

/// Last part of an object name, lowercased (`main.Schools` → `schools`).
fn object_name(name: &ObjectName) -> String {
    match name.0.last() {
        Some(ObjectNamePart::Identifier(ident)) => ident_name(ident),
        Some(ObjectNamePart::Function(func)) => ident_name(&func.name),
        None => String::new(),
    }
}

fn push_object_name(name: &ObjectName, out: &mut String) {
    match name.0.last() {
        Some(ObjectNamePart::Identifier(ident)) => push_lowercase(out, &ident.value),
        Some(ObjectNamePart::Function(func)) => push_lowercase(out, &func.name.value),
        None => {}
    }
}

fn function_name_is(function: &Function, name: &str) -> bool {
    match function.name.0.last() {
        Some(ObjectNamePart::Identifier(ident)) => ident.value.eq_ignore_ascii_case(name),
        _ => false,
    }
}

fn function_arg_expr(arg: &FunctionArg) -> Option<&Expr> {
    match arg {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(e))
        | FunctionArg::Named {
            arg: FunctionArgExpr::Expr(e),
            ..
        }
        | FunctionArg::ExprNamed {
            arg: FunctionArgExpr::Expr(e),
            ..
        } => Some(e),
        _ => None,
    }
}

/// Plain (unnamed expression) arguments of a function, if it has an argument list.
fn plain_args(function: &Function) -> Option<Vec<&Expr>> {
    match &function.args {
        FunctionArguments::List(list) => list.args.iter().map(function_arg_expr).collect(),
        _ => None,
    }
}

/// The aggregate family of a (non-window) function call, if it is an aggregate.
fn aggregate_func(function: &Function) -> Option<AggFunc> {
    let Some(ObjectNamePart::Identifier(ident)) = function.name.0.last() else {
        return None;
    };
    let arg_count = match &function.args {
        FunctionArguments::List(list) => list.args.len(),
        _ => return None,
    };
    let name = lowercase(&ident.value);
    let func = match name.as_str() {
        "sum" => AggFunc::Sum,
        "total" if arg_count == 1 => AggFunc::Sum,
        "avg" | "mean" => AggFunc::Avg,
        "count" | "count_big" => AggFunc::Count,
        // Two-argument MIN/MAX are scalar in SQLite.
        "min" if arg_count == 1 => AggFunc::Min,
        "max" if arg_count == 1 => AggFunc::Max,
        "group_concat"
        | "string_agg"
        | "array_agg"
        | "listagg"
        | "stddev"
        | "stddev_pop"
        | "stddev_samp"
        | "stdev"
        | "stdevp"
        | "variance"
        | "var_pop"
        | "var_samp"
        | "var"
        | "median"
        | "mode"
        | "any_value"
        | "count_if"
        | "countif"
        | "approx_count_distinct"
        | "approx_distinct"
        | "bool_and"
        | "bool_or"
        | "every"
        | "bit_and"
        | "bit_or"
        | "bit_xor"
        | "percentile_cont"
        | "percentile_disc"
        | "approx_percentile"
        | "approx_quantiles"
        | "corr"
        | "covar_pop"
        | "covar_samp"
        | "json_group_array"
        | "json_group_object"
        | "json_agg"
        | "jsonb_agg"
        | "json_object_agg"
        | "collect_list"
        | "collect_set"
        | "arg_max"
        | "arg_min"
        | "argmax"
        | "argmin"
        | "max_by"
        | "min_by"
        | "uniq"
        | "uniqexact"
        | "product"
        | "arbitrary"
        | "kurtosis"
        | "skewness"
        | "regr_slope"
        | "regr_intercept"
        | "regr_count"
        | "hll_count" => AggFunc::Other(name),
        _ => return None,
    };
    Some(func)
}

/// The column an expression denotes, through parentheses and casts.
fn column_of(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Identifier(ident) => Some(ident_name(ident)),
        Expr::CompoundIdentifier(parts) => parts.last().map(ident_name),
        Expr::Nested(inner)
        | Expr::Cast { expr: inner, .. }
        | Expr::Collate { expr: inner, .. } => column_of(inner),
        _ => None,
    }
}

/// A filter's date column without conversions that keep its identity: `date(d)`,
/// `datetime(d)`, `substr(d, 1, 10)`, `CAST(d AS DATE)` (BIRD gold writes
/// `date(SUBSTR(event_date, 1, 10)) BETWEEN …` for `event_date BETWEEN …`).
fn strip_date_wrappers(mut expr: &Expr) -> &Expr {
    loop {
        let inner = match strip_wrappers(expr) {
            Expr::Function(function)
                if function.over.is_none()
                    && (function_name_is(function, "date")
                        || function_name_is(function, "datetime")) =>
            {
                match plain_args(function).as_deref() {
                    Some([d]) => *d,
                    _ => return expr,
                }
            }
            Expr::Cast {
                expr: inner,
                data_type: DataType::Date | DataType::Datetime(_) | DataType::Timestamp(..),
                ..
            } => inner,
            other => match substr_prefix_arg(other, 10) {
                Some(d) => d,
                None => return other,
            },
        };
        expr = inner;
    }
}

/// `expr` without parentheses and COLLATE.
fn strip_wrappers(mut expr: &Expr) -> &Expr {
    loop {
        match expr {
            Expr::Nested(inner) | Expr::Collate { expr: inner, .. } => expr = inner,
            _ => return expr,
        }
    }
}

fn strip_nested(mut expr: &Expr) -> &Expr {
    while let Expr::Nested(inner) = expr {
        expr = inner;
    }
    expr
}

/// The date argument of a year idiom: `YEAR(d)`, `EXTRACT(YEAR FROM d)`, `strftime('%Y', d)`,
/// `date_part('year', d)`, `to_char(d, 'YYYY')`, also inside CAST / parentheses.
fn year_arg(expr: &Expr) -> Option<&Expr> {
    match expr {
        Expr::Nested(inner) | Expr::Cast { expr: inner, .. } => year_arg(strip_nested(inner)),
        Expr::Extract {
            field: DateTimeField::Year | DateTimeField::Years,
            expr: inner,
            ..
        } => Some(inner),
        Expr::Function(function) if function.over.is_none() => {
            let args = plain_args(function)?;
            if function_name_is(function, "year") {
                return match args.as_slice() {
                    [d] => Some(*d),
                    _ => None,
                };
            }
            if function_name_is(function, "strftime") {
                return match args.as_slice() {
                    [fmt, d] if literal_str(fmt) == Some("%Y") => Some(*d),
                    _ => None,
                };
            }
            if function_name_is(function, "date_part") || function_name_is(function, "datepart") {
                return match args.as_slice() {
                    [part, d] if is_year_word(part) => Some(*d),
                    _ => None,
                };
            }
            if function_name_is(function, "to_char") {
                return match args.as_slice() {
                    [d, fmt]
                        if literal_str(fmt).is_some_and(|f| f.eq_ignore_ascii_case("yyyy")) =>
                    {
                        Some(*d)
                    }
                    _ => None,
                };
            }
            None
        }
        _ => None,
    }
}

fn is_year_word(expr: &Expr) -> bool {
    match strip_nested(expr) {
        Expr::Identifier(ident) => ident.value.eq_ignore_ascii_case("year"),
        other => literal_str(other).is_some_and(|s| s.eq_ignore_ascii_case("year")),
    }
}

/// `substr(d, 1, 4)` / `substring(d from 1 for 4)` → `d` (a year idiom when compared with a
/// four-digit value).
fn substr_year_arg(expr: &Expr) -> Option<&Expr> {
    substr_prefix_arg(expr, 4)
}

/// `substr(d, 1, len)` (either syntax) → `d`.
fn substr_prefix_arg(expr: &Expr, len: u64) -> Option<&Expr> {
    let is_one = |e: &Expr| literal_u64(e) == Some(1);
    let is_four = |e: &Expr| literal_u64(e) == Some(len);
    match strip_wrappers(expr) {
        Expr::Substring {
            expr: inner,
            substring_from: Some(from),
            substring_for: Some(length),
            ..
        } if is_one(from) && is_four(length) => Some(inner),
        Expr::Function(function)
            if function_name_is(function, "substr") || function_name_is(function, "substring") =>
        {
            match plain_args(function)?.as_slice() {
                [d, from, length] if is_one(from) && is_four(length) => Some(*d),
                _ => None,
            }
        }
        _ => None,
    }
}

fn literal_str(expr: &Expr) -> Option<&str> {
    match strip_nested(expr) {
        Expr::Value(v) => string_value(&v.value),
        _ => None,
    }
}

fn literal_u64(expr: &Expr) -> Option<u64> {
    match strip_nested(expr) {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => n
                .parse::<u64>()
                .ok()
                .or_else(|| canonical_number(n).and_then(|c| c.parse().ok())),
            _ => None,
        },
        _ => None,
    }
}

fn string_value(value: &Value) -> Option<&str> {
    match value {
        Value::SingleQuotedString(s)
        | Value::DoubleQuotedString(s)
        | Value::TripleSingleQuotedString(s)
        | Value::TripleDoubleQuotedString(s)
        | Value::EscapedStringLiteral(s)
        | Value::UnicodeStringLiteral(s)
        | Value::NationalStringLiteral(s)
        | Value::SingleQuotedRawStringLiteral(s)
        | Value::DoubleQuotedRawStringLiteral(s)
        | Value::TripleSingleQuotedRawStringLiteral(s)
        | Value::TripleDoubleQuotedRawStringLiteral(s) => Some(s),
        Value::DollarQuotedString(d) => Some(&d.value),
        _ => None,
    }
}

fn number_value(raw: &str) -> FilterValue {
    match canonical_number(raw) {
        Some(n) => FilterValue::Number(n),
        None => FilterValue::Number(lowercase(raw)),
    }
}

/// Values compared with a year idiom: four-digit text or numbers become the number.
fn year_value(value: FilterValue) -> FilterValue {
    match value {
        FilterValue::Text(t) => match as_year(&t) {
            Some(y) => FilterValue::Number(y.to_string()),
            None => FilterValue::Text(t),
        },
        FilterValue::List(items) => FilterValue::List(items.into_iter().map(year_value).collect()),
        other => other,
    }
}

fn value_year(value: &FilterValue) -> Option<u32> {
    match value {
        FilterValue::Text(t) | FilterValue::Number(t) => as_year(t),
        _ => None,
    }
}

/// A literal operand (string, number, NULL, typed string, negated number, cast of a literal).
fn is_literal(expr: &Expr) -> bool {
    match strip_wrappers(expr) {
        Expr::Value(v) => !matches!(v.value, Value::Placeholder(_)),
        Expr::TypedString(_) => true,
        Expr::UnaryOp {
            op: UnaryOperator::Minus | UnaryOperator::Plus,
            expr,
        } => is_literal(expr),
        Expr::Cast { expr, .. } => is_literal(expr),
        _ => false,
    }
}

fn is_atomic(expr: &Expr) -> bool {
    matches!(
        expr,
        Expr::Identifier(_)
            | Expr::CompoundIdentifier(_)
            | Expr::Value(_)
            | Expr::Function(_)
            | Expr::Nested(_)
            | Expr::Subquery(_)
            | Expr::Cast { .. }
    )
}

fn is_numeric_type(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Int(_)
            | DataType::Integer(_)
            | DataType::BigInt(_)
            | DataType::SmallInt(_)
            | DataType::TinyInt(_)
            | DataType::Real
            | DataType::Float(_)
            | DataType::Double(_)
            | DataType::DoublePrecision
            | DataType::Numeric(_)
            | DataType::Decimal(_)
    )
}

fn comparison_op(op: &BinaryOperator) -> Option<FilterOp> {
    Some(match op {
        BinaryOperator::Eq | BinaryOperator::Spaceship => FilterOp::Eq,
        BinaryOperator::NotEq => FilterOp::NotEq,
        BinaryOperator::Lt => FilterOp::Lt,
        BinaryOperator::LtEq => FilterOp::LtEq,
        BinaryOperator::Gt => FilterOp::Gt,
        BinaryOperator::GtEq => FilterOp::GtEq,
        _ => return None,
    })
}

/// The operator with its operands swapped (`5 < x` ≡ `x > 5`).
fn flip(op: FilterOp) -> FilterOp {
    match op {
        FilterOp::Lt => FilterOp::Gt,
        FilterOp::LtEq => FilterOp::GtEq,
        FilterOp::Gt => FilterOp::Lt,
        FilterOp::GtEq => FilterOp::LtEq,
        other => other,
    }
}

/// The logical negation of a comparison.
fn negate(op: FilterOp) -> FilterOp {
    match op {
        FilterOp::Eq => FilterOp::NotEq,
        FilterOp::NotEq => FilterOp::Eq,
        FilterOp::Lt => FilterOp::GtEq,
        FilterOp::LtEq => FilterOp::Gt,
        FilterOp::Gt => FilterOp::LtEq,
        FilterOp::GtEq => FilterOp::Lt,
        FilterOp::In => FilterOp::NotIn,
        FilterOp::NotIn => FilterOp::In,
        FilterOp::IsNull => FilterOp::IsNotNull,
        FilterOp::IsNotNull => FilterOp::IsNull,
        FilterOp::Like | FilterOp::Contains | FilterOp::StartsWith | FilterOp::EndsWith => {
            FilterOp::NotLike
        }
        FilterOp::NotLike => FilterOp::Like,
    }
}

fn push_binary_op(op: &BinaryOperator, out: &mut String) {
    let symbol = match op {
        BinaryOperator::Plus => "+",
        BinaryOperator::Minus => "-",
        BinaryOperator::Multiply => "*",
        BinaryOperator::Divide => "/",
        BinaryOperator::Modulo => "%",
        BinaryOperator::StringConcat => "||",
        BinaryOperator::Gt => ">",
        BinaryOperator::Lt => "<",
        BinaryOperator::GtEq => ">=",
        BinaryOperator::LtEq => "<=",
        BinaryOperator::Eq => "=",
        BinaryOperator::NotEq => "!=",
        BinaryOperator::And => "and",
        BinaryOperator::Or => "or",
        other => {
            push_lowercase(out, &other.to_string());
            return;
        }
    };
    out.push_str(symbol);
}

/// Literals in expression text: strings normalized like filter values; numbers as written
/// (`* 1.0` forces float division in SQLite, so it is not canonicalized to `* 1`).
fn render_value(value: &Value, out: &mut String) {
    match value {
        Value::Number(n, _) => push_lowercase(out, n),
        Value::Null => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Placeholder(p) => out.push_str(p),
        other => match string_value(other) {
            Some(s) => {
                out.push('\'');
                out.push_str(&normalize_text_value(s));
                out.push('\'');
            }
            None => render_fallback_text(&other.to_string(), out),
        },
    }
}

/// Rare expression kinds: sqlparser's own rendering, normalized.
fn render_fallback(expr: &Expr, out: &mut String) {
    render_fallback_text(&expr.to_string(), out);
}

/// Lowercase outside string literals, drop identifier quotes, collapse whitespace.
fn render_fallback_text(text: &str, out: &mut String) {
    let mut in_string = false;
    let mut pending_space = false;
    for c in text.chars() {
        if in_string {
            out.extend(c.to_lowercase());
            if c == '\'' {
                in_string = false;
            }
            continue;
        }
        match c {
            '\'' => {
                if pending_space {
                    out.push(' ');
                    pending_space = false;
                }
                in_string = true;
                out.push(c);
            }
            '"' | '`' | '[' | ']' => {}
            c if c.is_whitespace() => pending_space = !out.is_empty(),
            c => {
                if pending_space {
                    out.push(' ');
                    pending_space = false;
                }
                out.extend(c.to_lowercase());
            }
        }
    }
}

/// `d >= 'Y-01-01'` or `d > 'Y-1-12-31'`: the year whose start it bounds.
fn lower_year_bound(filter: &Filter) -> Option<u32> {
    let FilterValue::Text(v) = &filter.rhs else {
        return None;
    };
    let (y, m, d, rest) = date_parts(v)?;
    match filter.op {
        FilterOp::GtEq if m == 1 && d == 1 && is_midnight(rest) => Some(y),
        FilterOp::Gt if m == 12 && d == 31 && is_end_of_day(rest) => y.checked_add(1),
        _ => None,
    }
}

/// `d < 'Y+1-01-01'` or `d <= 'Y-12-31'`.
fn is_upper_year_bound(filter: &Filter, year: u32) -> bool {
    let FilterValue::Text(v) = &filter.rhs else {
        return false;
    };
    let Some((y, m, d, rest)) = date_parts(v) else {
        return false;
    };
    match filter.op {
        FilterOp::Lt => Some(y) == year.checked_add(1) && m == 1 && d == 1 && is_midnight(rest),
        FilterOp::LtEq => y == year && m == 12 && d == 31 && is_end_of_day(rest),
        _ => false,
    }
}

/// `(year, month, day, rest)` of a `YYYY-MM-DD…` text value.
fn date_parts(value: &str) -> Option<(u32, u32, u32, &str)> {
    let b = value.as_bytes();
    if b.len() < 10 || b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<u32> {
        let part = value.get(range)?;
        if part.bytes().all(|c| c.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    Some((num(0..4)?, num(5..7)?, num(8..10)?, value.get(10..)?))
}

fn time_suffix(rest: &str) -> &str {
    rest.trim_start_matches([' ', 't'])
}

fn is_midnight(rest: &str) -> bool {
    time_suffix(rest)
        .chars()
        .all(|c| c == '0' || c == ':' || c == '.')
}

fn is_end_of_day(rest: &str) -> bool {
    let t = time_suffix(rest);
    t.is_empty() || t.starts_with("23:59")
}

/// LIMIT / FETCH FIRST as a number (non-numeric limits are not recorded).
fn limit_of(limit: Option<&LimitClause>, fetch: Option<&Fetch>) -> Option<u64> {
    match limit {
        Some(LimitClause::LimitOffset {
            limit: Some(expr), ..
        }) => literal_u64(expr),
        Some(LimitClause::OffsetCommaLimit { limit, .. }) => literal_u64(limit),
        _ => fetch
            .and_then(|f| f.quantity.as_ref())
            .and_then(literal_u64),
    }
}
