//! Small readers over sqlparser's AST used by every part of the walk: children of an
//! expression, literals, names, operators, dates, LIMIT.

use sqlparser::ast::{
    BinaryOperator, DataType, DateTimeField, Expr, Fetch, Function, FunctionArg, FunctionArgExpr,
    FunctionArguments, Ident, LimitClause, ObjectName, ObjectNamePart, OrderByExpr, OrderBySort,
    Select, SetExpr, UnaryOperator, Value,
};

use crate::sqlspec::normalize::{
    as_year, canonical_number, lowercase, normalize_text_value, push_lowercase,
};
pub(super) use crate::sqlspec::syntax::join_constraint;
use crate::sqlspec::syntax::last_identifier;
use crate::sqlspec::{AggFunc, Filter, FilterOp, FilterValue, Projection, SortDir};

/// Call `f` on every direct child expression of `expr` (subqueries excluded: the scan handles
/// them). The match is exhaustive on purpose: a new sqlparser expression kind is a compile
/// error here, not a silently skipped subtree.
pub(super) fn visit_children<'e>(expr: &'e Expr, f: &mut dyn FnMut(&'e Expr)) {
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
        Expr::Struct { values, .. } => values.iter().for_each(&mut *f),
        Expr::Dictionary(fields) => fields.iter().for_each(|field| f(&field.value)),
        Expr::Map(map) => {
            for entry in &map.entries {
                f(&entry.key);
                f(&entry.value);
            }
        }
        Expr::MemberOf(member) => {
            f(&member.value);
            f(&member.array);
        }
        // Leaves: names, literals, wildcards.
        Expr::Identifier(_)
        | Expr::CompoundIdentifier(_)
        | Expr::Value(_)
        | Expr::TypedString(_)
        | Expr::Wildcard(_)
        | Expr::QualifiedWildcard(..)
        | Expr::MatchAgainst { .. } => {}
        // Subqueries are walked by the scan itself (at their own depth).
        Expr::InSubquery { .. } | Expr::Exists { .. } | Expr::Subquery(_) => {}
        // A lambda's body names its parameters, not columns of the query.
        Expr::Lambda(_) => {}
    }
}

/// A projection addressed by a 1-based ordinal or by its alias.
pub(super) fn projection_ref<'p>(
    projections: &'p [Projection],
    expr: &Expr,
) -> Option<&'p Projection> {
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

pub(super) fn sort_dir(item: &OrderByExpr) -> SortDir {
    match item.options.sort {
        Some(OrderBySort::Desc) => SortDir::Desc,
        _ => SortDir::Asc,
    }
}

/// The left-most SELECT of a set expression (through parenthesized queries).
pub(super) fn leftmost_select(body: &SetExpr) -> Option<&Select> {
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
pub(super) fn flatten_chain<'e>(expr: &'e Expr, op: &BinaryOperator, out: &mut Vec<&'e Expr>) {
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

pub(super) fn ident_name(ident: &Ident) -> String {
    lowercase(&ident.value)
}

/// Last part of an object name, lowercased (`main.Schools` → `schools`).
pub(super) fn object_name(name: &ObjectName) -> String {
    match (last_identifier(name), name.0.last()) {
        (Some(ident), _) => ident_name(ident),
        (None, Some(ObjectNamePart::Function(func))) => ident_name(&func.name),
        (None, _) => String::new(),
    }
}

pub(super) fn push_object_name(name: &ObjectName, out: &mut String) {
    match name.0.last() {
        Some(ObjectNamePart::Identifier(ident)) => push_lowercase(out, &ident.value),
        Some(ObjectNamePart::Function(func)) => push_lowercase(out, &func.name.value),
        None => {}
    }
}

pub(super) fn function_name_is(function: &Function, name: &str) -> bool {
    match function.name.0.last() {
        Some(ObjectNamePart::Identifier(ident)) => ident.value.eq_ignore_ascii_case(name),
        _ => false,
    }
}

pub(super) fn function_arg_expr(arg: &FunctionArg) -> Option<&Expr> {
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
pub(super) fn plain_args(function: &Function) -> Option<Vec<&Expr>> {
    match &function.args {
        FunctionArguments::List(list) => list.args.iter().map(function_arg_expr).collect(),
        _ => None,
    }
}

/// The aggregate family of a (non-window) function call, if it is an aggregate.
pub(super) fn aggregate_func(function: &Function) -> Option<AggFunc> {
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
pub(super) fn column_of(expr: &Expr) -> Option<String> {
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
pub(super) fn strip_date_wrappers(mut expr: &Expr) -> &Expr {
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
pub(super) fn strip_wrappers(mut expr: &Expr) -> &Expr {
    loop {
        match expr {
            Expr::Nested(inner) | Expr::Collate { expr: inner, .. } => expr = inner,
            _ => return expr,
        }
    }
}

pub(super) fn strip_nested(mut expr: &Expr) -> &Expr {
    while let Expr::Nested(inner) = expr {
        expr = inner;
    }
    expr
}

/// The date argument of a year idiom: `YEAR(d)`, `EXTRACT(YEAR FROM d)`, `strftime('%Y', d)`,
/// `date_part('year', d)`, `to_char(d, 'YYYY')`, also inside CAST / parentheses.
pub(super) fn year_arg(expr: &Expr) -> Option<&Expr> {
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

pub(super) fn is_year_word(expr: &Expr) -> bool {
    match strip_nested(expr) {
        Expr::Identifier(ident) => ident.value.eq_ignore_ascii_case("year"),
        other => literal_str(other).is_some_and(|s| s.eq_ignore_ascii_case("year")),
    }
}

/// `substr(d, 1, 4)` / `substring(d from 1 for 4)` → `d` (a year idiom when compared with a
/// four-digit value).
pub(super) fn substr_year_arg(expr: &Expr) -> Option<&Expr> {
    substr_prefix_arg(expr, 4)
}

/// `substr(d, 1, len)` (either syntax) → `d`.
pub(super) fn substr_prefix_arg(expr: &Expr, len: u64) -> Option<&Expr> {
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

pub(super) fn literal_str(expr: &Expr) -> Option<&str> {
    match strip_nested(expr) {
        Expr::Value(v) => string_value(&v.value),
        _ => None,
    }
}

pub(super) fn literal_u64(expr: &Expr) -> Option<u64> {
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

pub(super) fn string_value(value: &Value) -> Option<&str> {
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

pub(super) fn number_value(raw: &str) -> FilterValue {
    match canonical_number(raw) {
        Some(n) => FilterValue::Number(n),
        None => FilterValue::Number(lowercase(raw)),
    }
}

/// Values compared with a year idiom: four-digit text or numbers become the number.
pub(super) fn year_value(value: FilterValue) -> FilterValue {
    match value {
        FilterValue::Text(t) => match as_year(&t) {
            Some(y) => FilterValue::Number(y.to_string()),
            None => FilterValue::Text(t),
        },
        FilterValue::List(items) => FilterValue::List(items.into_iter().map(year_value).collect()),
        other => other,
    }
}

pub(super) fn value_year(value: &FilterValue) -> Option<u32> {
    match value {
        FilterValue::Text(t) | FilterValue::Number(t) => as_year(t),
        _ => None,
    }
}

/// A number literal (`1996`, `-3`, `2.5`).
pub(super) fn is_number(expr: &Expr) -> bool {
    match strip_wrappers(expr) {
        Expr::Value(v) => matches!(v.value, Value::Number(..)),
        Expr::UnaryOp {
            op: UnaryOperator::Minus | UnaryOperator::Plus,
            expr,
        } => is_number(expr),
        _ => false,
    }
}

/// Functions whose result is text in SQLite (and in most engines).
const TEXT_FUNCTIONS: [&str; 17] = [
    "strftime",
    "substr",
    "substring",
    "date",
    "time",
    "datetime",
    "upper",
    "lower",
    "trim",
    "ltrim",
    "rtrim",
    "replace",
    "printf",
    "format",
    "char",
    "group_concat",
    "concat",
];

/// Whether an expression's value is text whatever its arguments (a text function's result, a
/// concatenation, a cast to text): compared with a number, SQLite converts neither side.
pub(super) fn text_valued(expr: &Expr) -> bool {
    match strip_wrappers(expr) {
        Expr::Function(function) => TEXT_FUNCTIONS.iter().any(|n| function_name_is(function, n)),
        Expr::Substring { .. } | Expr::Trim { .. } => true,
        Expr::BinaryOp {
            op: BinaryOperator::StringConcat,
            ..
        } => true,
        Expr::Cast { data_type, .. } => matches!(
            data_type,
            DataType::Text | DataType::Varchar(_) | DataType::Char(_) | DataType::String(_)
        ),
        _ => false,
    }
}

/// A literal operand (string, number, NULL, typed string, negated number, cast of a literal).
pub(super) fn is_literal(expr: &Expr) -> bool {
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

pub(super) fn is_atomic(expr: &Expr) -> bool {
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

pub(super) fn is_numeric_type(data_type: &DataType) -> bool {
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

pub(super) fn comparison_op(op: &BinaryOperator) -> Option<FilterOp> {
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
pub(super) fn flip(op: FilterOp) -> FilterOp {
    match op {
        FilterOp::Lt => FilterOp::Gt,
        FilterOp::LtEq => FilterOp::GtEq,
        FilterOp::Gt => FilterOp::Lt,
        FilterOp::GtEq => FilterOp::LtEq,
        other => other,
    }
}

/// The logical negation of a comparison.
pub(super) fn negate(op: FilterOp) -> FilterOp {
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

pub(super) fn push_binary_op(op: &BinaryOperator, out: &mut String) {
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
pub(super) fn render_value(value: &Value, out: &mut String) {
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
pub(super) fn render_fallback(expr: &Expr, out: &mut String) {
    render_fallback_text(&expr.to_string(), out);
}

/// Lowercase outside string literals, drop identifier quotes, collapse whitespace.
pub(super) fn render_fallback_text(text: &str, out: &mut String) {
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
pub(super) fn lower_year_bound(filter: &Filter) -> Option<u32> {
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
pub(super) fn is_upper_year_bound(filter: &Filter, year: u32) -> bool {
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
pub(super) fn date_parts(value: &str) -> Option<(u32, u32, u32, &str)> {
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

pub(super) fn time_suffix(rest: &str) -> &str {
    rest.trim_start_matches([' ', 't'])
}

pub(super) fn is_midnight(rest: &str) -> bool {
    time_suffix(rest)
        .chars()
        .all(|c| c == '0' || c == ':' || c == '.')
}

pub(super) fn is_end_of_day(rest: &str) -> bool {
    let t = time_suffix(rest);
    t.is_empty() || t.starts_with("23:59")
}

/// LIMIT / FETCH FIRST as a number (non-numeric limits are not recorded).
pub(super) fn limit_of(limit: Option<&LimitClause>, fetch: Option<&Fetch>) -> Option<u64> {
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

/// Remove later duplicates, keeping first-occurrence order (lists are short).
pub(super) fn dedup_in_place<T: PartialEq>(items: &mut Vec<T>) {
    let mut i = 0;
    while i < items.len() {
        if items[..i].contains(&items[i]) {
            items.remove(i);
        } else {
            i += 1;
        }
    }
}
