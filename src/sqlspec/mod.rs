//! Deterministic SQL-side spec extraction (STEF §2.2–2.3) with sqlparser.
//!
//! [`extract`] turns one SQL string into a [`SqlSpec`]: projections (aliases resolved),
//! aggregations, filters from WHERE and HAVING (normalized), GROUP BY, ORDER BY and LIMIT of the
//! outermost query, with CTEs and subqueries walked. It never panics: SQL that cannot be turned
//! into a spec yields a [`SpecError`] whose [`SpecError::status`] is the row status.
//!
//! Names are normalized for schema-free alignment: lowercased, quotes removed, table qualifiers
//! dropped (`T1."Name"` → `name`). Literal values are normalized too (case, whitespace, quotes).

use serde::{Deserialize, Serialize};

use crate::evaluation::RowStatus;

mod extract;
mod normalize;
mod walk;

pub use extract::{
    DEFAULT_MAX_SQL_BYTES, ExtractOptions, PARSER_RECURSION_LIMIT, SqlDialect, canonical_dialect,
    extract, extract_with,
};
pub use normalize::{canonical_number, normalize_name, normalize_text_value};

/// The SQL-side specification Ssql of one query.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SqlSpec {
    /// Dialect that parsed the SQL (first success in the fallback chain).
    pub dialect: String,
    /// Output expressions of the outermost SELECT, in order.
    pub projections: Vec<Projection>,
    /// Every aggregate call in projections, HAVING and ORDER BY (all query levels).
    pub aggregations: Vec<Aggregation>,
    /// Filters from WHERE and HAVING (all query levels), normalized.
    pub filters: Vec<Filter>,
    /// GROUP BY expressions of the outermost SELECT (normalized names; aliases resolved).
    pub group_by: Vec<String>,
    /// ORDER BY items of the outermost query.
    pub order_by: Vec<OrderItem>,
    /// LIMIT of the outermost query.
    pub limit: Option<u64>,
    /// Whether the outermost SELECT is `SELECT DISTINCT`.
    pub distinct: bool,
    /// Tables referenced anywhere (normalized names), CTE names excluded.
    pub tables: Vec<String>,
    /// Names of CTEs defined in WITH.
    pub ctes: Vec<String>,
    /// Number of nested subqueries (FROM, WHERE, projections) walked.
    pub subqueries: usize,
    /// Whether set operations (UNION/INTERSECT/EXCEPT) occur.
    pub set_operations: bool,
    /// Whether window functions occur.
    pub window_functions: bool,
}

/// One output expression of the outermost SELECT.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Projection {
    /// Normalized expression text (`sum(spend)`, `name`, `*`).
    pub expr: String,
    /// Alias given with AS, normalized.
    pub alias: Option<String>,
    /// The aggregate this projection computes, if it is (or wraps) one.
    pub aggregate: Option<Aggregation>,
    /// Bare column names referenced by the expression.
    pub columns: Vec<String>,
}

impl Projection {
    /// Whether this projection is an aggregate expression (member of P_agg).
    pub fn is_aggregate(&self) -> bool {
        self.aggregate.is_some()
    }
}

/// Aggregate function family.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AggFunc {
    /// SUM / TOTAL.
    Sum,
    /// AVG / MEAN.
    Avg,
    /// COUNT.
    Count,
    /// MIN.
    Min,
    /// MAX.
    Max,
    /// Any other aggregate (GROUP_CONCAT, STDDEV, …), lowercased name.
    Other(String),
}

/// One aggregate call: (func, column, distinct).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Aggregation {
    /// Function family.
    pub func: AggFunc,
    /// Bare column aggregated; `None` for `*` or a non-column expression.
    pub column: Option<String>,
    /// `COUNT(DISTINCT x)` and friends.
    pub distinct: bool,
    /// Normalized text of the argument expression (`*`, `spend`, `case when … end`).
    pub arg: String,
}

/// Where a filter came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Clause {
    /// WHERE (or JOIN … ON with a literal side).
    Where,
    /// HAVING.
    Having,
}

/// Normalized comparison operator of a filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FilterOp {
    /// `=`, `IN (x)`, `LIKE 'x'` without wildcards.
    Eq,
    /// `<>` / `!=`.
    NotEq,
    /// `<`.
    Lt,
    /// `<=` (also the upper half of BETWEEN).
    LtEq,
    /// `>`.
    Gt,
    /// `>=` (also the lower half of BETWEEN).
    GtEq,
    /// `LIKE '%x%'`: the value contains x.
    Contains,
    /// `LIKE 'x%'`.
    StartsWith,
    /// `LIKE '%x'`.
    EndsWith,
    /// Any other LIKE pattern (value keeps the raw pattern).
    Like,
    /// `NOT LIKE …`.
    NotLike,
    /// `IN (a, b, …)` with more than one element, or `IN (subquery)`.
    In,
    /// `NOT IN (…)`.
    NotIn,
    /// `IS NULL`.
    IsNull,
    /// `IS NOT NULL`.
    IsNotNull,
}

impl FilterOp {
    /// Canonical symbol used in text renderings (`=`, `>=`, `contains`, …).
    pub fn symbol(self) -> &'static str {
        match self {
            FilterOp::Eq => "=",
            FilterOp::NotEq => "!=",
            FilterOp::Lt => "<",
            FilterOp::LtEq => "<=",
            FilterOp::Gt => ">",
            FilterOp::GtEq => ">=",
            FilterOp::Contains => "contains",
            FilterOp::StartsWith => "starts_with",
            FilterOp::EndsWith => "ends_with",
            FilterOp::Like => "like",
            FilterOp::NotLike => "not_like",
            FilterOp::In => "in",
            FilterOp::NotIn => "not_in",
            FilterOp::IsNull => "is_null",
            FilterOp::IsNotNull => "is_not_null",
        }
    }
}

/// Right-hand side of a filter, normalized.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum FilterValue {
    /// A string literal: lowercased, whitespace collapsed, quotes removed; LIKE wildcards stripped
    /// for Contains/StartsWith/EndsWith.
    Text(String),
    /// A numeric literal in canonical form (`507`, `0.5`; `507.0` → `507`).
    Number(String),
    /// A list (IN with several elements), each normalized.
    List(Vec<FilterValue>),
    /// Another column (join-like predicate), normalized bare name.
    Column(String),
    /// A subquery.
    Subquery,
    /// `NULL` (for IS NULL / IS NOT NULL).
    Null,
    /// Any other expression, normalized text.
    Expr(String),
}

impl FilterValue {
    /// Whether the value is a literal constant (text, number or a list of them).
    pub fn is_literal(&self) -> bool {
        match self {
            FilterValue::Text(_) | FilterValue::Number(_) => true,
            FilterValue::List(items) => items.iter().all(FilterValue::is_literal),
            _ => false,
        }
    }
}

/// One normalized filter `lhs op rhs`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Filter {
    /// Normalized left-hand side: a bare column name (`country`), a year idiom (`year(order_date)`),
    /// or normalized expression text.
    pub lhs: String,
    /// Comparison.
    pub op: FilterOp,
    /// Right-hand side.
    pub rhs: FilterValue,
    /// WHERE or HAVING.
    pub clause: Clause,
    /// Whether it sits under an OR (disjunctive filters are alternatives, not all required).
    pub in_disjunction: bool,
    /// Nesting depth: 0 for the outermost query, 1+ inside subqueries/CTEs.
    pub depth: u32,
}

/// Sort direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SortDir {
    /// Ascending (also the default when unspecified).
    Asc,
    /// Descending.
    Desc,
}

/// One ORDER BY item.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OrderItem {
    /// Normalized expression (aliases resolved to the projection they name).
    pub expr: String,
    /// Direction.
    pub dir: SortDir,
    /// The aggregate the item orders by, if any.
    pub aggregate: Option<Aggregation>,
}

/// Why SQL could not be turned into a spec.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// Empty or whitespace-only SQL.
    #[error("empty SQL")]
    Empty,
    /// Larger than the configured limit; not parsed.
    #[error("SQL is {size} bytes, above the limit of {limit} bytes")]
    TooLarge {
        /// SQL length.
        size: usize,
        /// Configured limit.
        limit: usize,
    },
    /// No dialect of the fallback chain could parse it; the message is the first dialect's error.
    #[error("parse error ({dialect}): {message}")]
    Parse {
        /// Dialect whose error is reported.
        dialect: String,
        /// Parser message.
        message: String,
    },
    /// A statement other than a query.
    #[error("not a query: {kind} statement")]
    NotAQuery {
        /// Statement kind (`INSERT`, `DROP`, …).
        kind: String,
    },
    /// More than one statement.
    #[error("multiple statements ({count})")]
    MultipleStatements {
        /// Number of statements.
        count: usize,
    },
}

impl SpecError {
    /// The row status this error maps to.
    pub fn status(&self) -> RowStatus {
        match self {
            SpecError::Empty | SpecError::Parse { .. } => RowStatus::ParseError,
            SpecError::TooLarge { .. } => RowStatus::SqlTooLarge,
            SpecError::NotAQuery { .. } => RowStatus::NotAQuery,
            SpecError::MultipleStatements { .. } => RowStatus::MultipleStatements,
        }
    }
}
