//! Unit tests of the walk itself: one parsed query in, the spec out (the extractor's dialect
//! chain and size limits are tested through `sqlspec::extract` elsewhere).

use sqlparser::ast::{SetExpr, Statement};
use sqlparser::dialect::{GenericDialect, SQLiteDialect, SnowflakeDialect};
use sqlparser::parser::Parser;

use super::spec_of_query;
use super::walker::NestingTooDeep;
use crate::sqlspec::{AggFunc, Clause, FilterOp, FilterValue, SortDir, SqlSpec};

fn walk_with(
    dialect: &dyn sqlparser::dialect::Dialect,
    sql: &str,
) -> Result<SqlSpec, NestingTooDeep> {
    let statements = Parser::parse_sql(dialect, sql).expect("test SQL parses");
    match statements.into_iter().next() {
        Some(Statement::Query(query)) => spec_of_query(&query, true),
        other => panic!("not a query: {other:?}"),
    }
}

fn walk(sql: &str) -> SqlSpec {
    walk_with(&SQLiteDialect {}, sql).expect("walks")
}

fn filters(spec: &SqlSpec) -> Vec<String> {
    spec.filters.iter().map(ToString::to_string).collect()
}

#[test]
fn projections_aggregations_grouping_order_and_limit_of_the_outermost_query() {
    let spec = walk(
        "SELECT T1.Country AS c, SUM(T1.Spend) AS total FROM spend AS T1 \
         WHERE T1.Year = 2023 GROUP BY c ORDER BY total DESC LIMIT 5",
    );
    let exprs: Vec<&str> = spec.projections.iter().map(|p| p.expr.as_str()).collect();
    assert_eq!(exprs, ["country", "sum(spend)"]);
    assert_eq!(spec.projections[1].alias.as_deref(), Some("total"));
    assert_eq!(spec.aggregations.len(), 1, "{:?}", spec.aggregations);
    assert_eq!(spec.aggregations[0].func, AggFunc::Sum);
    assert_eq!(spec.aggregations[0].column.as_deref(), Some("spend"));
    // GROUP BY and ORDER BY resolve aliases to the projection they name.
    assert_eq!(spec.group_by, ["country"]);
    assert_eq!(spec.order_by[0].expr, "sum(spend)");
    assert_eq!(spec.order_by[0].dir, SortDir::Desc);
    assert_eq!(spec.limit, Some(5));
    assert_eq!(spec.tables, ["spend"]);
    assert_eq!(filters(&spec), ["year = 2023"]);
}

#[test]
fn filters_are_normalized() {
    let spec = walk(
        "SELECT name FROM hero WHERE height BETWEEN 150 AND 180 AND name LIKE '%man%' \
         AND publisher IN ('Marvel') AND NOT (eye = 'blue') AND 1 = 1 AND 507.0 < weight",
    );
    assert_eq!(
        filters(&spec),
        [
            "height >= 150",
            "height <= 180",
            "name contains 'man'",
            "publisher = 'marvel'",
            "eye != 'blue'",
            "weight > 507",
        ]
    );
    assert!(spec.filters.iter().all(|f| f.clause == Clause::Where));
    assert!(spec.filters.iter().all(|f| !f.in_disjunction));
}

#[test]
fn disjunctions_having_and_depth_are_marked() {
    let spec = walk(
        "SELECT team, COUNT(*) FROM players WHERE (age > 30 OR city = 'Paris') \
         AND team IN (SELECT team FROM teams WHERE league = 'A') \
         GROUP BY team HAVING COUNT(*) > 2",
    );
    let by_lhs = |lhs: &str| spec.filters.iter().find(|f| f.lhs == lhs).unwrap();
    assert!(by_lhs("age").in_disjunction && by_lhs("city").in_disjunction);
    assert_eq!(by_lhs("league").depth, 1);
    assert_eq!(by_lhs("team").op, FilterOp::In);
    assert_eq!(by_lhs("team").rhs, FilterValue::Subquery);
    let having = spec
        .filters
        .iter()
        .find(|f| f.clause == Clause::Having)
        .unwrap();
    assert_eq!(having.to_string(), "count(*) > 2");
    assert_eq!(spec.subqueries, 1);
}

#[test]
fn year_idioms_become_year_filters() {
    for sql in [
        "SELECT * FROM orders WHERE strftime('%Y', order_date) = '2023'",
        "SELECT * FROM orders WHERE order_date LIKE '2023%'",
        "SELECT * FROM orders WHERE order_date >= '2023-01-01' AND order_date < '2024-01-01'",
        "SELECT * FROM orders WHERE SUBSTR(order_date, 1, 4) = '2023'",
    ] {
        assert_eq!(filters(&walk(sql)), ["year(order_date) = 2023"], "{sql}");
    }
}

#[test]
fn ctes_and_set_operations() {
    let spec = walk(
        "WITH recent AS (SELECT id FROM orders WHERE y = 2024) \
         SELECT id FROM recent UNION SELECT id FROM archive WHERE y = 2020",
    );
    assert_eq!(spec.ctes, ["recent"]);
    // The CTE's name is not a table; the tables it reads are.
    assert_eq!(spec.tables, ["orders", "archive"]);
    assert!(spec.set_operations);
    // Filters of a UNION branch are alternatives.
    let archive = spec.filters.iter().find(|f| f.rhs.to_string() == "2020");
    assert!(
        archive.is_some_and(|f| f.in_disjunction),
        "{:?}",
        spec.filters
    );
}

#[test]
fn double_quoted_names_used_as_values_are_strings() {
    let spec = walk("SELECT * FROM member WHERE position = \"Vice President\"");
    assert_eq!(filters(&spec), ["position = 'vice president'"]);
    let generic = walk_with(&GenericDialect {}, "SELECT * FROM t WHERE a = \"x\"").unwrap();
    assert_eq!(generic.filters[0].rhs, FilterValue::Text("x".into()));
}

#[test]
fn window_functions_are_not_aggregations() {
    let spec = walk("SELECT name, SUM(x) OVER (PARTITION BY g) FROM t");
    assert!(spec.window_functions);
    assert!(spec.aggregations.is_empty(), "{:?}", spec.aggregations);
}

#[test]
fn reshaping_operators_record_their_inner_table() {
    let spec = walk_with(
        &SnowflakeDialect {},
        "SELECT * FROM monthly_sales PIVOT (SUM(amount) FOR month IN ('JAN', 'FEB')) AS p",
    )
    .unwrap();
    assert_eq!(spec.tables, ["monthly_sales"]);
}

#[test]
fn struct_and_map_children_are_scanned() {
    // Aggregates inside constructor expressions are found (no silently skipped subtree).
    let spec = walk_with(
        &GenericDialect {},
        "SELECT MAP {'total': SUM(amount)} FROM sales",
    )
    .unwrap();
    assert_eq!(spec.aggregations.len(), 1, "{:?}", spec.aggregations);
    assert_eq!(spec.aggregations[0].column.as_deref(), Some("amount"));
}

#[test]
fn excessive_nesting_is_an_error_not_a_crash() {
    let depth = 1200;
    let sql = format!(
        "SELECT * FROM t WHERE {}a = 1{}",
        "(".repeat(depth),
        ")".repeat(depth)
    );
    let dialect = SQLiteDialect {};
    let parsed = Parser::new(&dialect)
        .with_recursion_limit(5000)
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query());
    let query = parsed.expect("parses with a raised recursion limit");
    let error = spec_of_query(&query, true).unwrap_err();
    assert!(error.to_string().contains("nesting exceeds"), "{error}");
    // The query body is a SELECT; the limit is the walk's, not the parser's.
    assert!(matches!(*query.body, SetExpr::Select(_)));
}
