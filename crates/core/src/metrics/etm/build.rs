//! From sqlparser's AST to the [`tree`](super::tree) ETM rewrites: the shapes the official
//! script's parser (sqlglot 26.6, default dialect) gives the same SQL, argument for argument,
//! so that the ported rules see what the originals saw — e.g. `x IS NOT NULL` is
//! `Not(Is(x, Null))`, `COUNT(*)` is `Count(this=Star, big_int=True)`, `CAST(x AS REAL)` casts
//! to `FLOAT`, a SELECT always carries `distinct` and `limit` (possibly `None`), and the
//! ORDER BY / LIMIT after a set operation belong to the set operation.
//!
//! Constructs outside that mapping are refused ([`Abort`]) rather than guessed: a refused
//! prediction does not match, as one the original parser cannot read.

use sqlparser::ast::{
    self, BinaryOperator, DataType, Distinct, Expr, FunctionArg, FunctionArgExpr,
    FunctionArguments, GroupByExpr, JoinConstraint, JoinOperator, LimitClause, ObjectName,
    ObjectNamePart, OrderByKind, OrderBySort, Query, SelectItem, SetExpr, SetOperator,
    SetQuantifier, Statement, TableFactor, UnaryOperator, Value, WindowType,
};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;

use super::tree::{Abort, Step, V};

/// Parse one statement into the tree.
pub fn parse(sql: &str) -> Step<V> {
    let statements = Parser::parse_sql(&SQLiteDialect {}, sql)
        .map_err(|e| Abort(format!("parse error: {e}")))?;
    match statements.as_slice() {
        [Statement::Query(q)] => query(q),
        [] => Err(Abort("no statement".into())),
        [_] => Err(Abort("not a query".into())),
        _ => Err(Abort("more than one statement".into())),
    }
}

/// The deepest nesting of expressions the tree is built for; deeper is refused ([`Abort`]),
/// never a stack overflow. A left-deep chain (`a AND b AND …`, `1 + 2 + …`) nests one level per
/// operator in sqlglot's tree as in sqlparser's, so a chain longer than this is refused too.
pub const MAX_DEPTH: usize = 256;

thread_local! {
    /// How deep the building on this thread is in [`expr`].
    static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One level of [`expr`]'s nesting, left when dropped.
struct Nesting;

impl Nesting {
    fn enter() -> Result<Nesting, Abort> {
        DEPTH.with(|depth| {
            if depth.get() >= MAX_DEPTH {
                return Err(Abort(format!(
                    "the query nests expressions deeper than {MAX_DEPTH} levels"
                )));
            }
            depth.set(depth.get() + 1);
            Ok(Nesting)
        })
    }
}

impl Drop for Nesting {
    fn drop(&mut self) {
        DEPTH.with(|depth| depth.set(depth.get().saturating_sub(1)));
    }
}

fn unsupported(what: impl std::fmt::Display) -> Abort {
    Abort(format!("unsupported: {what}"))
}

fn query(q: &Query) -> Step<V> {
    let mut node = set_expr(&q.body)?;
    let n = node.node_mut()?;
    if let Some(order) = &q.order_by {
        n.set("order", order_by(order)?);
    }
    if let Some(limit) = &q.limit_clause {
        match limit {
            LimitClause::LimitOffset { limit, offset, .. } => {
                if let Some(l) = limit {
                    n.set(
                        "limit",
                        V::n(
                            "Limit",
                            vec![
                                ("this", V::Nil),
                                ("expression", expr(l)?),
                                ("expressions", V::Nil),
                            ],
                        ),
                    );
                }
                if let Some(o) = offset {
                    n.set(
                        "offset",
                        V::n(
                            "Offset",
                            vec![
                                ("this", V::Nil),
                                ("expression", expr(&o.value)?),
                                ("expressions", V::Nil),
                            ],
                        ),
                    );
                }
            }
            LimitClause::OffsetCommaLimit { offset, limit } => {
                n.set(
                    "limit",
                    V::n(
                        "Limit",
                        vec![
                            ("this", V::Nil),
                            ("expression", expr(limit)?),
                            ("expressions", V::Nil),
                        ],
                    ),
                );
                n.set(
                    "offset",
                    V::n(
                        "Offset",
                        vec![
                            ("this", V::Nil),
                            ("expression", expr(offset)?),
                            ("expressions", V::Nil),
                        ],
                    ),
                );
            }
        }
    }
    if let Some(with) = &q.with {
        let mut ctes = Vec::new();
        for cte in &with.cte_tables {
            ctes.push(V::n(
                "CTE",
                vec![
                    ("this", query(&cte.query)?),
                    ("alias", table_alias(&cte.alias.name)),
                    ("materialized", V::Nil),
                ],
            ));
        }
        n.set(
            "with",
            V::n(
                "With",
                vec![
                    ("expressions", V::L(ctes)),
                    (
                        "recursive",
                        if with.recursive { V::B(true) } else { V::Nil },
                    ),
                ],
            ),
        );
    }
    Ok(node)
}

fn set_expr(body: &SetExpr) -> Step<V> {
    match body {
        SetExpr::Select(s) => select(s),
        SetExpr::Query(q) => {
            // A parenthesised operand of a set operation is a subquery.
            let inner = query(q)?;
            Ok(subquery(inner))
        }
        SetExpr::SetOperation {
            left,
            op,
            set_quantifier,
            right,
        } => {
            let class = match op {
                SetOperator::Union => "Union",
                SetOperator::Intersect => "Intersect",
                SetOperator::Except | SetOperator::Minus => "Except",
            };
            let distinct = !matches!(set_quantifier, SetQuantifier::All);
            Ok(V::n(
                class,
                vec![
                    ("this", set_expr(left)?),
                    ("distinct", V::B(distinct)),
                    ("by_name", V::Nil),
                    ("expression", set_expr(right)?),
                ],
            ))
        }
        other => Err(unsupported(format!("set expression {other}"))),
    }
}

fn subquery(inner: V) -> V {
    V::n("Subquery", vec![("this", inner), ("alias", V::Nil)])
}

fn select(s: &ast::Select) -> Step<V> {
    let distinct = match &s.distinct {
        None | Some(Distinct::All) => V::Nil,
        Some(Distinct::Distinct) => V::n("Distinct", vec![("on", V::Nil)]),
        Some(other) => return Err(unsupported(format!("{other}"))),
    };
    if s.top.is_some() {
        return Err(unsupported("TOP"));
    }
    let mut projections = Vec::new();
    for item in &s.projection {
        projections.push(match item {
            SelectItem::UnnamedExpr(e) => expr(e)?,
            SelectItem::ExprWithAlias { expr: e, alias } => {
                V::n("Alias", vec![("this", expr(e)?), ("alias", ident(alias))])
            }
            SelectItem::Wildcard(_) => star(),
            SelectItem::QualifiedWildcard(kind, _) => match kind {
                ast::SelectItemQualifiedWildcardKind::ObjectName(name) => {
                    qualified(V::n("Star", star_args()), name)?
                }
                ast::SelectItemQualifiedWildcardKind::Expr(e) => {
                    return Err(unsupported(format!("wildcard of {e}")));
                }
            },
            other => return Err(unsupported(format!("select item {other}"))),
        });
    }
    let mut args = vec![
        ("kind", V::Nil),
        ("hint", V::Nil),
        ("distinct", distinct),
        ("expressions", V::L(projections)),
        ("limit", V::Nil),
        ("operation_modifiers", V::Nil),
    ];
    let mut joins = Vec::new();
    for (i, twj) in s.from.iter().enumerate() {
        let relation = table_factor(&twj.relation)?;
        if i == 0 {
            args.push(("from", V::n("From", vec![("this", relation)])));
        } else {
            joins.push(V::n("Join", vec![("this", relation)]));
        }
        for j in &twj.joins {
            joins.push(join(j)?);
        }
    }
    if !joins.is_empty() {
        args.push(("joins", V::L(joins)));
    }
    if let Some(w) = &s.selection {
        args.push(("where", V::n("Where", vec![("this", expr(w)?)])));
    }
    match &s.group_by {
        GroupByExpr::Expressions(exprs, modifiers) if modifiers.is_empty() => {
            if !exprs.is_empty() {
                let items = exprs.iter().map(expr).collect::<Step<Vec<_>>>()?;
                args.push(("group", V::n("Group", vec![("expressions", V::L(items))])));
            }
        }
        other => return Err(unsupported(format!("{other}"))),
    }
    if let Some(h) = &s.having {
        args.push(("having", V::n("Having", vec![("this", expr(h)?)])));
    }
    Ok(V::n("Select", args))
}

fn star_args() -> Vec<(&'static str, V)> {
    vec![("except", V::Nil), ("replace", V::Nil), ("rename", V::Nil)]
}

fn star() -> V {
    V::n("Star", star_args())
}

fn ident(i: &ast::Ident) -> V {
    V::n(
        "Identifier",
        vec![
            ("this", V::S(i.value.clone())),
            ("quoted", V::B(i.quote_style.is_some())),
        ],
    )
}

fn table_alias(i: &ast::Ident) -> V {
    V::n("TableAlias", vec![("this", ident(i)), ("columns", V::Nil)])
}

fn name_parts(name: &ObjectName) -> Step<Vec<&ast::Ident>> {
    name.0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => Ok(i),
            other => Err(unsupported(format!("name part {other}"))),
        })
        .collect()
}

/// `Column(this=<this>, table=…, db=None, catalog=None)` for `a.b.<this>`.
fn qualified(this: V, name: &ObjectName) -> Step<V> {
    let parts = name_parts(name)?;
    let Some((table, rest)) = parts.split_last() else {
        return Err(unsupported("empty qualifier"));
    };
    if !rest.is_empty() {
        return Err(unsupported(format!("qualifier {name}")));
    }
    Ok(V::n(
        "Column",
        vec![
            ("this", this),
            ("table", ident(table)),
            ("db", V::Nil),
            ("catalog", V::Nil),
        ],
    ))
}

fn table_factor(t: &TableFactor) -> Step<V> {
    match t {
        TableFactor::Table {
            name,
            alias,
            args,
            with_hints,
            ..
        } => {
            if args.is_some() || !with_hints.is_empty() {
                return Err(unsupported(format!("table {t}")));
            }
            let parts = name_parts(name)?;
            let [table] = parts.as_slice() else {
                return Err(unsupported(format!("table name {name}")));
            };
            let mut a = vec![("this", ident(table)), ("db", V::Nil), ("catalog", V::Nil)];
            if let Some(alias) = alias {
                if !alias.columns.is_empty() {
                    return Err(unsupported("table alias columns"));
                }
                a.push(("alias", table_alias(&alias.name)));
            }
            Ok(V::n("Table", a))
        }
        TableFactor::Derived {
            lateral: false,
            subquery: q,
            alias,
            ..
        } => {
            let alias = match alias {
                Some(a) if a.columns.is_empty() => table_alias(&a.name),
                Some(_) => return Err(unsupported("derived table alias columns")),
                None => V::Nil,
            };
            Ok(V::n(
                "Subquery",
                vec![("this", query(q)?), ("alias", alias), ("sample", V::Nil)],
            ))
        }
        TableFactor::NestedJoin { .. } => Err(unsupported("parenthesised join")),
        other => Err(unsupported(format!("table factor {other}"))),
    }
}

fn join(j: &ast::Join) -> Step<V> {
    let (side, kind, constraint) = match &j.join_operator {
        JoinOperator::Join(c) => (None, None, Some(c)),
        JoinOperator::Inner(c) => (None, Some("INNER"), Some(c)),
        JoinOperator::Left(c) => (Some("LEFT"), None, Some(c)),
        JoinOperator::LeftOuter(c) => (Some("LEFT"), Some("OUTER"), Some(c)),
        JoinOperator::Right(c) => (Some("RIGHT"), None, Some(c)),
        JoinOperator::RightOuter(c) => (Some("RIGHT"), Some("OUTER"), Some(c)),
        JoinOperator::FullOuter(c) => (Some("FULL"), Some("OUTER"), Some(c)),
        JoinOperator::CrossJoin(c) => (None, Some("CROSS"), Some(c)),
        other => return Err(unsupported(format!("join {other:?}"))),
    };
    let mut args = vec![("this", table_factor(&j.relation)?)];
    if let Some(side) = side {
        args.push(("side", V::S(side.into())));
    }
    if let Some(kind) = kind {
        args.push(("kind", V::S(kind.into())));
    }
    match constraint {
        Some(JoinConstraint::On(e)) => args.push(("on", expr(e)?)),
        Some(JoinConstraint::Using(names)) => {
            let mut ids = Vec::new();
            for n in names {
                let parts = name_parts(n)?;
                let [one] = parts.as_slice() else {
                    return Err(unsupported(format!("USING {n}")));
                };
                ids.push(ident(one));
            }
            args.push(("using", V::L(ids)));
        }
        Some(JoinConstraint::Natural) => return Err(unsupported("NATURAL JOIN")),
        Some(JoinConstraint::None) | None => {}
    }
    Ok(V::n("Join", args))
}

fn order_by(order: &ast::OrderBy) -> Step<V> {
    let OrderByKind::Expressions(items) = &order.kind else {
        return Err(unsupported("ORDER BY ALL"));
    };
    let mut out = Vec::new();
    for item in items {
        out.push(ordered(item)?);
    }
    Ok(V::n(
        "Order",
        vec![
            ("this", V::Nil),
            ("expressions", V::L(out)),
            ("siblings", V::Nil),
        ],
    ))
}

fn ordered(item: &ast::OrderByExpr) -> Step<V> {
    let desc = match &item.options.sort {
        None => V::Nil,
        Some(OrderBySort::Asc) => V::B(false),
        Some(OrderBySort::Desc) => V::B(true),
        Some(other) => return Err(unsupported(format!("ORDER BY {other:?}"))),
    };
    let is_desc = matches!(desc, V::B(true));
    // The default dialect sorts NULLs as small values: first ascending, last descending.
    let nulls_first = item.options.nulls_first.unwrap_or(!is_desc);
    Ok(V::n(
        "Ordered",
        vec![
            ("this", expr(&item.expr)?),
            ("desc", desc),
            ("nulls_first", V::B(nulls_first)),
            ("with_fill", V::Nil),
        ],
    ))
}

fn binary(class: &'static str, left: V, right: V) -> V {
    V::n(class, vec![("this", left), ("expression", right)])
}

fn not(inner: V) -> V {
    V::n("Not", vec![("this", inner)])
}

fn expr(e: &Expr) -> Step<V> {
    let _level = Nesting::enter()?;
    expr_at(e)
}

fn expr_at(e: &Expr) -> Step<V> {
    Ok(match e {
        Expr::Identifier(i) => V::n("Column", vec![("this", ident(i))]),
        Expr::CompoundIdentifier(parts) => match parts.as_slice() {
            [table, col] => V::n(
                "Column",
                vec![
                    ("this", ident(col)),
                    ("table", ident(table)),
                    ("db", V::Nil),
                    ("catalog", V::Nil),
                ],
            ),
            _ => return Err(unsupported(format!("name {e}"))),
        },
        Expr::Value(v) => value(&v.value)?,
        Expr::Nested(inner) => V::n("Paren", vec![("this", expr(inner)?)]),
        Expr::BinaryOp { left, op, right } => {
            let (l, r) = (expr(left)?, expr(right)?);
            match op {
                BinaryOperator::Eq => binary("EQ", l, r),
                BinaryOperator::NotEq => binary("NEQ", l, r),
                BinaryOperator::Gt => binary("GT", l, r),
                BinaryOperator::GtEq => binary("GTE", l, r),
                BinaryOperator::Lt => binary("LT", l, r),
                BinaryOperator::LtEq => binary("LTE", l, r),
                BinaryOperator::And => binary("And", l, r),
                BinaryOperator::Or => binary("Or", l, r),
                BinaryOperator::Plus => binary("Add", l, r),
                BinaryOperator::Minus => binary("Sub", l, r),
                BinaryOperator::Multiply => binary("Mul", l, r),
                BinaryOperator::Modulo => binary("Mod", l, r),
                BinaryOperator::Divide => V::n(
                    "Div",
                    vec![
                        ("this", l),
                        ("expression", r),
                        ("typed", V::B(false)),
                        ("safe", V::B(false)),
                    ],
                ),
                BinaryOperator::StringConcat => V::n(
                    "DPipe",
                    vec![("this", l), ("expression", r), ("safe", V::B(true))],
                ),
                other => return Err(unsupported(format!("operator {other}"))),
            }
        }
        Expr::UnaryOp { op, expr: inner } => match op {
            UnaryOperator::Not => not(expr(inner)?),
            UnaryOperator::Minus => V::n("Neg", vec![("this", expr(inner)?)]),
            UnaryOperator::Plus => expr(inner)?,
            other => return Err(unsupported(format!("operator {other}"))),
        },
        Expr::IsNull(inner) => V::n(
            "Is",
            vec![("this", expr(inner)?), ("expression", V::n("Null", vec![]))],
        ),
        Expr::IsNotNull(inner) => not(V::n(
            "Is",
            vec![("this", expr(inner)?), ("expression", V::n("Null", vec![]))],
        )),
        Expr::InList {
            expr: inner,
            list,
            negated,
        } => {
            let items = list.iter().map(expr).collect::<Step<Vec<_>>>()?;
            let node = V::n(
                "In",
                vec![("this", expr(inner)?), ("expressions", V::L(items))],
            );
            if *negated { not(node) } else { node }
        }
        Expr::InSubquery {
            expr: inner,
            subquery: q,
            negated,
        } => {
            let node = V::n(
                "In",
                vec![("this", expr(inner)?), ("query", subquery(query(q)?))],
            );
            if *negated { not(node) } else { node }
        }
        Expr::Between {
            expr: inner,
            negated,
            low,
            high,
        } => {
            let node = V::n(
                "Between",
                vec![
                    ("this", expr(inner)?),
                    ("low", expr(low)?),
                    ("high", expr(high)?),
                ],
            );
            if *negated { not(node) } else { node }
        }
        Expr::Like {
            negated,
            any: false,
            expr: inner,
            pattern,
            escape_char: None,
        } => {
            let node = binary("Like", expr(inner)?, expr(pattern)?);
            if *negated { not(node) } else { node }
        }
        Expr::ILike {
            negated,
            any: false,
            expr: inner,
            pattern,
            escape_char: None,
        } => {
            let node = binary("ILike", expr(inner)?, expr(pattern)?);
            if *negated { not(node) } else { node }
        }
        Expr::Exists {
            subquery: q,
            negated,
        } => {
            let node = V::n("Exists", vec![("this", query(q)?)]);
            if *negated { not(node) } else { node }
        }
        Expr::Subquery(q) => V::n(
            "Subquery",
            vec![
                ("this", query(q)?),
                ("pivots", V::Nil),
                ("alias", V::Nil),
                ("sample", V::Nil),
            ],
        ),
        Expr::Cast {
            expr: inner,
            data_type,
            format: None,
            ..
        } => V::n(
            "Cast",
            vec![
                ("this", expr(inner)?),
                ("to", data_type_node(data_type)),
                ("format", V::Nil),
                ("safe", V::Nil),
                ("action", V::Nil),
                ("default", V::Nil),
            ],
        ),
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            let mut ifs = Vec::new();
            for w in conditions {
                ifs.push(V::n(
                    "If",
                    vec![("this", expr(&w.condition)?), ("true", expr(&w.result)?)],
                ));
            }
            V::n(
                "Case",
                vec![
                    (
                        "this",
                        operand.as_deref().map(expr).transpose()?.unwrap_or(V::Nil),
                    ),
                    ("ifs", V::L(ifs)),
                    (
                        "default",
                        else_result
                            .as_deref()
                            .map(expr)
                            .transpose()?
                            .unwrap_or(V::Nil),
                    ),
                ],
            )
        }
        Expr::Substring {
            expr: inner,
            substring_from,
            substring_for,
            ..
        } => V::n(
            "Substring",
            vec![
                ("this", expr(inner)?),
                (
                    "start",
                    substring_from
                        .as_deref()
                        .map(expr)
                        .transpose()?
                        .unwrap_or(V::Nil),
                ),
                (
                    "length",
                    substring_for
                        .as_deref()
                        .map(expr)
                        .transpose()?
                        .unwrap_or(V::Nil),
                ),
            ],
        ),
        Expr::Function(f) => function(f)?,
        other => return Err(unsupported(format!("expression {other}"))),
    })
}

fn value(v: &Value) -> Step<V> {
    Ok(match v {
        Value::Number(text, _) => V::literal(text, false),
        Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => V::literal(s, true),
        Value::Null => V::n("Null", vec![]),
        Value::Boolean(b) => V::n("Boolean", vec![("this", V::B(*b))]),
        other => return Err(unsupported(format!("value {other}"))),
    })
}

/// The data type node of a CAST; the class names the library gives SQLite's common types.
fn data_type_node(t: &DataType) -> V {
    let name: &'static str = match t {
        DataType::Float(_)
        | DataType::Real
        | DataType::Float4
        | DataType::Float8
        | DataType::Float32
        | DataType::Float64 => "FLOAT",
        DataType::Double(_) | DataType::DoublePrecision => "DOUBLE",
        DataType::Int(_) | DataType::Integer(_) => "INT",
        DataType::BigInt(_) => "BIGINT",
        DataType::SmallInt(_) => "SMALLINT",
        DataType::Text => "TEXT",
        DataType::Varchar(_) | DataType::CharacterVarying(_) => "VARCHAR",
        DataType::Char(_) | DataType::Character(_) => "CHAR",
        DataType::Numeric(_) | DataType::Decimal(_) | DataType::Dec(_) => "DECIMAL",
        DataType::Date => "DATE",
        DataType::Datetime(_) => "DATETIME",
        DataType::Timestamp(_, _) => "TIMESTAMP",
        DataType::Boolean | DataType::Bool => "BOOLEAN",
        DataType::Blob(_) => "BLOB",
        _ => "USERDEFINED",
    };
    V::n(
        "DataType",
        vec![
            ("this", V::E(name)),
            ("expressions", V::Nil),
            ("nested", V::B(false)),
            ("prefix", V::Nil),
        ],
    )
}

fn function(f: &ast::Function) -> Step<V> {
    let parts = name_parts(&f.name)?;
    let [name] = parts.as_slice() else {
        return Err(unsupported(format!("function {}", f.name)));
    };
    let written = name.value.clone();
    let lower = written.to_lowercase();
    let (distinct, raw_args) = match &f.args {
        FunctionArguments::None => (false, Vec::new()),
        FunctionArguments::List(list) => {
            if !list.clauses.is_empty() {
                return Err(unsupported(format!("function clauses in {}", f.name)));
            }
            let distinct = matches!(
                list.duplicate_treatment,
                Some(ast::DuplicateTreatment::Distinct)
            );
            let mut args = Vec::new();
            for a in &list.args {
                match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => args.push(expr(e)?),
                    FunctionArg::Unnamed(FunctionArgExpr::Wildcard) => args.push(star()),
                    other => return Err(unsupported(format!("function argument {other}"))),
                }
            }
            (distinct, args)
        }
        FunctionArguments::Subquery(_) => {
            return Err(unsupported(format!("function over a subquery: {}", f.name)));
        }
    };
    if f.filter.is_some() || !f.within_group.is_empty() || f.null_treatment.is_some() {
        return Err(unsupported(format!("function modifiers in {}", f.name)));
    }
    let mut args = raw_args.into_iter();
    // `COUNT(DISTINCT a)` puts the DISTINCT around the arguments.
    let this = if distinct {
        let all: Vec<V> = args.by_ref().collect();
        V::n("Distinct", vec![("expressions", V::L(all))])
    } else {
        args.next().unwrap_or(V::Nil)
    };
    let rest: Vec<V> = args.collect();
    let node = match lower.as_str() {
        "count" => V::n(
            "Count",
            vec![
                ("this", this),
                ("expressions", V::L(rest)),
                ("big_int", V::B(true)),
            ],
        ),
        "sum" => V::n("Sum", vec![("this", this)]),
        "avg" => V::n("Avg", vec![("this", this)]),
        "max" => V::n("Max", vec![("this", this), ("expressions", V::L(rest))]),
        "min" => V::n("Min", vec![("this", this), ("expressions", V::L(rest))]),
        "substr" | "substring" => {
            let mut rest = rest.into_iter();
            V::n(
                "Substring",
                vec![
                    ("this", this),
                    ("start", rest.next().unwrap_or(V::Nil)),
                    ("length", rest.next().unwrap_or(V::Nil)),
                ],
            )
        }
        "iif" | "if" => {
            let mut rest = rest.into_iter();
            V::n(
                "If",
                vec![
                    ("this", this),
                    ("true", rest.next().unwrap_or(V::Nil)),
                    ("false", rest.next().unwrap_or(V::Nil)),
                ],
            )
        }
        "coalesce" | "ifnull" | "nvl" => V::n(
            "Coalesce",
            vec![
                ("this", this),
                ("expressions", V::L(rest)),
                ("is_nvl", V::Nil),
            ],
        ),
        "upper" | "ucase" => V::n("Upper", vec![("this", this)]),
        "lower" | "lcase" => V::n("Lower", vec![("this", this)]),
        "length" | "len" => V::n("Length", vec![("this", this)]),
        "abs" => V::n("Abs", vec![("this", this)]),
        "round" => {
            let mut rest = rest.into_iter();
            V::n(
                "Round",
                vec![("this", this), ("decimals", rest.next().unwrap_or(V::Nil))],
            )
        }
        "group_concat" => {
            let mut rest = rest.into_iter();
            V::n(
                "GroupConcat",
                vec![("this", this), ("separator", rest.next().unwrap_or(V::Nil))],
            )
        }
        "instr" => {
            let mut rest = rest.into_iter();
            V::n(
                "StrPosition",
                vec![("this", this), ("substr", rest.next().unwrap_or(V::Nil))],
            )
        }
        "date" => V::n("Date", vec![("this", this), ("expressions", V::L(rest))]),
        "datetime" => V::n(
            "Datetime",
            vec![("this", this), ("expressions", V::L(rest))],
        ),
        "trim" => V::n("Trim", vec![("this", this), ("expression", V::L(rest))]),
        _ => {
            let mut all = Vec::new();
            if !matches!(this, V::Nil) {
                all.push(this);
            }
            all.extend(rest);
            V::n(
                "Anonymous",
                vec![("this", V::S(written)), ("expressions", V::L(all))],
            )
        }
    };
    match &f.over {
        None => Ok(node),
        Some(WindowType::WindowSpec(spec)) => {
            let partition = spec
                .partition_by
                .iter()
                .map(expr)
                .collect::<Step<Vec<_>>>()?;
            let order = if spec.order_by.is_empty() {
                V::Nil
            } else {
                let items = spec
                    .order_by
                    .iter()
                    .map(ordered)
                    .collect::<Step<Vec<_>>>()?;
                V::n(
                    "Order",
                    vec![
                        ("this", V::Nil),
                        ("expressions", V::L(items)),
                        ("siblings", V::Nil),
                    ],
                )
            };
            if spec.window_frame.is_some() {
                return Err(unsupported("window frame"));
            }
            Ok(V::n(
                "Window",
                vec![
                    ("this", node),
                    ("partition_by", V::L(partition)),
                    ("order", order),
                    ("spec", V::Nil),
                    ("alias", V::Nil),
                    ("over", V::S("OVER".into())),
                    ("first", V::Nil),
                ],
            ))
        }
        Some(WindowType::NamedWindow(_)) => Err(unsupported("named window")),
    }
}
