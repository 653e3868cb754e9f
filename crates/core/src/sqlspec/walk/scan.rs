//! The expression scan: aggregates, window functions, columns and subqueries anywhere in an
//! expression.

use sqlparser::ast::{DuplicateTreatment, Expr, Function, FunctionArguments, WindowType};

use super::ast::{aggregate_func, column_of, function_arg_expr, ident_name, visit_children};
use super::walker::{Role, STACK_RED_ZONE, STACK_SEGMENT, Walker};
use crate::sqlspec::{AggFunc, Aggregation};

impl Walker {
    /// Find aggregates (when `collect_aggs`), window functions, columns (into `columns`) and
    /// subqueries (walked at `depth + 1`) in `expr`. `first_agg` receives the first aggregate.
    pub(super) fn scan_expr(
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

    pub(super) fn scan_function(
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

    pub(super) fn aggregation(&mut self, function: &Function, func: AggFunc) -> Aggregation {
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
}
