//! Query structure: CTEs, set operations, SELECT (projections, FROM and joins, WHERE, GROUP BY,
//! HAVING), ORDER BY and LIMIT of the outermost query, and the GROUP BY / ORDER BY items.

use sqlparser::ast::{
    Distinct, Expr, GroupByExpr, JoinConstraint, OrderByExpr, OrderByKind, Query, Select,
    SelectItem, SetExpr, SetOperator, TableFactor, TableWithJoins, TopQuantity,
};

use super::ast::{
    aggregate_func, dedup_in_place, ident_name, join_constraint, leftmost_select, limit_of,
    literal_u64, object_name, projection_ref, sort_dir, visit_children,
};
use super::walker::{AliasEntry, BoolCtx, Role, STACK_RED_ZONE, STACK_SEGMENT, Walker};
use crate::sqlspec::normalize::lowercase;
use crate::sqlspec::{Aggregation, Clause, OrderItem, Projection};

impl Walker {
    pub(super) fn walk_query(&mut self, query: &Query, depth: u32, role: Role) {
        if !self.enter() {
            return;
        }
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || {
            self.walk_query_inner(query, depth, role)
        });
        self.leave();
    }

    pub(super) fn walk_query_inner(&mut self, query: &Query, depth: u32, role: Role) {
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

    pub(super) fn walk_set_expr(&mut self, body: &SetExpr, depth: u32, role: Role) {
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
            // Data-modifying statements in a set-expression position (`INSERT … RETURNING` in a
            // CTE, dialect extensions) produce no query-side spec; the extractor reports
            // top-level non-queries itself.
            SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_) => {}
        }
        self.leave();
    }

    /// The SELECT list: each item's columns and aggregates scanned, its projection recorded
    /// (when `role` keeps projections), and the aliases that name another expression, which the
    /// clauses after it may use.
    fn walk_projection(&mut self, select: &Select, depth: u32, role: Role) -> Vec<AliasEntry> {
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
        aliases
    }

    pub(super) fn walk_select(&mut self, select: &Select, depth: u32, role: Role) {
        // Filters of a UNION branch, or of a subquery inside an OR, are alternatives.
        let disj = self.in_alternative;
        for table in &select.from {
            self.walk_table_with_joins(table, depth, disj);
        }

        let aliases = self.walk_projection(select, depth, role);

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

    pub(super) fn walk_table_with_joins(&mut self, table: &TableWithJoins, depth: u32, disj: bool) {
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

    pub(super) fn walk_table_factor(&mut self, factor: &TableFactor, depth: u32, disj: bool) {
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
            // Reshaping operators read an inner table: walk it so its name is recorded.
            TableFactor::Pivot { table, .. }
            | TableFactor::Unpivot { table, .. }
            | TableFactor::MatchRecognize { table, .. } => {
                self.walk_table_factor(table, depth, disj)
            }
            // Rows produced by a function, an expression or a document, not by a named table:
            // nothing to record as a table.
            TableFactor::TableFunction { .. }
            | TableFactor::Function { .. }
            | TableFactor::UNNEST { .. }
            | TableFactor::JsonTable { .. }
            | TableFactor::OpenJsonTable { .. }
            | TableFactor::UnpivotExpr { .. }
            | TableFactor::XmlTable { .. }
            | TableFactor::SemanticView { .. } => {}
        }
    }

    pub(super) fn add_table(&mut self, name: String) {
        if !self.spec.tables.contains(&name) {
            self.spec.tables.push(name);
        }
    }

    // ---------------------------------------------------------------- GROUP BY / ORDER BY

    pub(super) fn group_item(&mut self, expr: &Expr) -> String {
        if let Some(p) = projection_ref(&self.spec.projections, expr) {
            return p.expr.clone();
        }
        self.render(expr)
    }

    pub(super) fn order_item(&mut self, item: &OrderByExpr, depth: u32) -> OrderItem {
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
    pub(super) fn lift_order_limit(&mut self, select: &Select) {
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
    pub(super) fn find_aggregate(&mut self, expr: &Expr) -> Option<Aggregation> {
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
}
