//! Rendering: normalized expression text (names unqualified and lowercased, literals
//! normalized, year idioms as `year(d)`), written into one `String` per expression.

use sqlparser::ast::{
    CastKind, Distinct, DuplicateTreatment, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArguments, GroupByExpr, OrderByExpr, OrderByKind, OrderBySort, Query, Select,
    SelectItem, SetExpr, TableFactor, UnaryOperator, WindowType,
};

use super::ast::{
    is_atomic, limit_of, push_binary_op, push_object_name, render_fallback, render_fallback_text,
    render_value, year_arg,
};
use super::walker::{ELLIPSIS, STACK_RED_ZONE, STACK_SEGMENT, Walker};
use crate::sqlspec::normalize::push_lowercase;

impl Walker {
    /// Normalized text of `expr`.
    pub(super) fn render(&mut self, expr: &Expr) -> String {
        let mut out = String::new();
        self.render_into(expr, &mut out);
        out
    }

    pub(super) fn render_into(&mut self, expr: &Expr, out: &mut String) {
        if !self.enter() {
            out.push_str(ELLIPSIS);
            return;
        }
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || {
            self.render_inner(expr, out)
        });
        self.leave();
    }

    pub(super) fn render_list(&mut self, exprs: &[Expr], out: &mut String) {
        for (i, e) in exprs.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            self.render_into(e, out);
        }
    }

    pub(super) fn render_inner(&mut self, expr: &Expr, out: &mut String) {
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

    pub(super) fn render_postfix(&mut self, inner: &Expr, suffix: &str, out: &mut String) {
        self.render_into(inner, out);
        out.push_str(suffix);
    }

    pub(super) fn render_function_arg(&mut self, arg: &FunctionArg, out: &mut String) {
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

    pub(super) fn render_function(&mut self, function: &Function, out: &mut String) {
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

    pub(super) fn render_order_list(&mut self, items: &[OrderByExpr], out: &mut String) {
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
    pub(super) fn render_query(&mut self, query: &Query, out: &mut String) {
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

    pub(super) fn render_set_expr(&mut self, body: &SetExpr, out: &mut String) {
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

    pub(super) fn render_select(&mut self, select: &Select, out: &mut String) {
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
