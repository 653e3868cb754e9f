//! Boolean structure and filters: WHERE / HAVING / ON split into conjunctions and disjunctions
//! (iteratively, so long chains cost no stack), NOT pushed into comparisons, each predicate
//! turned into normalized filters (comparisons, LIKE, ranges, year idioms), and the filter sides.

use sqlparser::ast::{BinaryOperator, Expr, UnaryOperator, Value};

use super::ast::{
    comparison_op, flatten_chain, flip, ident_name, is_literal, is_number, is_numeric_type,
    is_upper_year_bound, lower_year_bound, negate, number_value, string_value, strip_date_wrappers,
    strip_wrappers, substr_year_arg, text_valued, value_year, year_arg, year_value,
};
use super::walker::{AliasEntry, BoolCtx, Lhs, STACK_RED_ZONE, STACK_SEGMENT, Walker};
use crate::sqlspec::normalize::{as_year, canonical_number, normalize_text_value};
use crate::sqlspec::{Clause, Filter, FilterOp, FilterValue};

impl Walker {
    pub(super) fn new_group(&mut self) -> u32 {
        self.next_group += 1;
        self.next_group
    }

    pub(super) fn walk_bool(&mut self, expr: &Expr, ctx: BoolCtx<'_>, group: Option<u32>) {
        if !self.enter() {
            return;
        }
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || {
            self.walk_bool_inner(expr, ctx, group)
        });
        self.leave();
    }

    pub(super) fn walk_bool_inner(&mut self, expr: &Expr, ctx: BoolCtx<'_>, group: Option<u32>) {
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
                    if matches!(op, BinaryOperator::Or)
                        && operands.iter().any(|o| {
                            matches!(
                                o,
                                Expr::BinaryOp {
                                    op: BinaryOperator::And,
                                    ..
                                }
                            )
                        })
                    {
                        self.spec.mixed_and_or = true;
                    }
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

    pub(super) fn push_filter(
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
    pub(super) fn atomic(&mut self, expr: &Expr, ctx: BoolCtx<'_>, g: u32) {
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

    pub(super) fn atomic_filters(&mut self, expr: &Expr, ctx: BoolCtx<'_>, g: u32) {
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
                if is_number(low) || is_number(high) {
                    self.note_text_number(subject, || expr.to_string());
                }
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
                if list.iter().any(is_number) {
                    self.note_text_number(subject, || expr.to_string());
                }
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

    /// Record a comparison of `subject` with a number when `subject` is text-valued
    /// ([`SqlSpec::text_number_comparisons`](crate::sqlspec::SqlSpec)); `render` writes it.
    fn note_text_number(&mut self, subject: &Expr, render: impl FnOnce() -> String) {
        if self.spec.text_number_comparisons.len() < crate::sqlspec::MAX_SHAPE_NOTES
            && text_valued(subject)
        {
            self.spec.text_number_comparisons.push(render());
        }
    }

    /// A boolean-valued expression used as a predicate (`WHERE active`, `WHERE instr(a, 'x')`):
    /// `expr = true` (or `= false` under NOT).
    pub(super) fn boolean_expr(&mut self, expr: &Expr, ctx: BoolCtx<'_>, g: u32) {
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

    pub(super) fn comparison(
        &mut self,
        left: &Expr,
        op: FilterOp,
        right: &Expr,
        ctx: BoolCtx<'_>,
        g: u32,
    ) {
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
        if is_number(other) {
            self.note_text_number(subject, || format!("{subject} {} {other}", op.symbol()));
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

    pub(super) fn like(
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
    pub(super) fn merge_year_ranges(&mut self, start: usize, group: u32) {
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

    pub(super) fn lhs(&mut self, expr: &Expr, ctx: BoolCtx<'_>) -> Lhs {
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

    pub(super) fn year_text(&mut self, date: &Expr) -> String {
        let mut out = String::from("year(");
        self.render_into(strip_date_wrappers(date), &mut out);
        out.push(')');
        out
    }

    /// The content of a string literal (or a double-quoted "string" where those are strings).
    pub(super) fn string_literal(&self, expr: &Expr) -> Option<String> {
        match strip_wrappers(expr) {
            Expr::Value(v) => string_value(&v.value).map(str::to_string),
            Expr::Identifier(ident) if self.dquote_strings && ident.quote_style == Some('"') => {
                Some(ident.value.clone())
            }
            _ => None,
        }
    }

    /// Normalize the right-hand side of a filter.
    pub(super) fn value(&mut self, expr: &Expr, year: bool) -> FilterValue {
        let value = self.value_inner(expr);
        if year { year_value(value) } else { value }
    }

    pub(super) fn value_inner(&mut self, expr: &Expr) -> FilterValue {
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
}
