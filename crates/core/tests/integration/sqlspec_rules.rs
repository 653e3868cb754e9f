//! The normalization rules of STEF §2.3 (and sqlgrade's extensions), one construct per test:
//! each filter is checked through its `lhs op rhs` rendering plus its flags.

use sqlgrade_core::sqlspec::{
    AggFunc, Clause, FilterOp, FilterValue, SortDir, SqlSpec, canonical_number, extract,
    normalize_name, normalize_text_value,
};

fn spec(sql: &str) -> SqlSpec {
    extract(sql, None).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn filters(sql: &str) -> Vec<String> {
    spec(sql).filters.iter().map(|f| f.to_string()).collect()
}

#[test]
fn names_and_values_are_normalized() {
    assert_eq!(
        filters("SELECT 1 FROM t AS T1 WHERE T1.\"Country\" = '  United   STATES '"),
        ["country = 'united states'"]
    );
    assert_eq!(
        filters("SELECT 1 FROM t WHERE `Full Name` = 'X'"),
        ["full name = 'x'"]
    );
    assert_eq!(
        filters("SELECT 1 FROM t WHERE price = 507.0 AND rate = 0.50 AND n = -3"),
        ["price = 507", "rate = 0.5", "n = -3"]
    );
    assert_eq!(normalize_name("T1.\"Name\""), "name");
    assert_eq!(normalize_text_value("'Ben   Jones'"), "ben jones");
    assert_eq!(canonical_number("507.0").as_deref(), Some("507"));
}

#[test]
fn like_and_ilike() {
    assert_eq!(
        filters(
            "SELECT 1 FROM t WHERE a LIKE 'x' AND b ILIKE '%China%' AND c LIKE 'ab%' \
             AND d LIKE '%yz' AND e LIKE 'a%b' AND f NOT LIKE '%q%' AND g NOT LIKE 'exact'"
        ),
        [
            "a = 'x'",
            "b contains 'china'",
            "c starts_with 'ab'",
            "d ends_with 'yz'",
            "e like 'a%b'",
            "f not_like '%q%'",
            "g != 'exact'",
        ]
    );
    // `_` is a literal underscore for classification.
    assert_eq!(
        filters("SELECT 1 FROM t WHERE id LIKE 'TR009_%'"),
        ["id starts_with 'tr009_'"]
    );
}

#[test]
fn between_in_and_flips() {
    assert_eq!(
        filters("SELECT 1 FROM t WHERE x BETWEEN 1 AND 10.0"),
        ["x >= 1", "x <= 10"]
    );
    assert_eq!(filters("SELECT 1 FROM t WHERE x IN ('a')"), ["x = 'a'"]);
    assert_eq!(filters("SELECT 1 FROM t WHERE x NOT IN (5)"), ["x != 5"]);
    assert_eq!(
        filters("SELECT 1 FROM t WHERE x IN ('a', 'B')"),
        ["x in ('a', 'b')"]
    );
    assert_eq!(
        filters("SELECT 1 FROM t WHERE 'x' = col AND 5 < n AND 10 >= m"),
        ["col = 'x'", "n > 5", "m <= 10"]
    );
    // NOT BETWEEN: two alternatives.
    let spec = spec("SELECT 1 FROM t WHERE x NOT BETWEEN 1 AND 5");
    let rendered: Vec<String> = spec.filters.iter().map(|f| f.to_string()).collect();
    assert_eq!(rendered, ["x < 1", "x > 5"]);
    assert!(spec.filters.iter().all(|f| f.in_disjunction));
}

#[test]
fn negation() {
    assert_eq!(
        filters(
            "SELECT 1 FROM t WHERE NOT (a = 1) AND NOT b > 2 AND NOT (c IN (1, 2)) \
             AND NOT (d IS NULL) AND NOT (e LIKE '%x%')"
        ),
        [
            "a != 1",
            "b <= 2",
            "c not_in (1, 2)",
            "d is_not_null",
            "e not_like '%x%'"
        ]
    );
    // De Morgan: NOT (a OR b) is a conjunction, NOT (a AND b) a disjunction.
    let spec1 = spec("SELECT 1 FROM t WHERE NOT (a = 1 OR b = 2)");
    assert!(spec1.filters.iter().all(|f| !f.in_disjunction));
    assert_eq!(spec1.filters[1].to_string(), "b != 2");
    let spec2 = spec("SELECT 1 FROM t WHERE NOT (a = 1 AND b = 2)");
    assert!(spec2.filters.iter().all(|f| f.in_disjunction));
}

#[test]
fn year_idioms_become_one_filter() {
    for sql in [
        "SELECT 1 FROM t WHERE YEAR(d) = 2023",
        "SELECT 1 FROM t WHERE strftime('%Y', d) = '2023'",
        "SELECT 1 FROM t WHERE CAST(strftime('%Y', T1.d) AS INTEGER) = 2023",
        "SELECT 1 FROM t WHERE EXTRACT(YEAR FROM d) = 2023",
        "SELECT 1 FROM t WHERE d >= '2023-01-01' AND d < '2024-01-01'",
        "SELECT 1 FROM t WHERE d >= '2023-01-01' AND d <= '2023-12-31'",
        "SELECT 1 FROM t WHERE d < '2024-01-01' AND d >= '2023-01-01'",
        "SELECT 1 FROM t WHERE d BETWEEN '2023-01-01' AND '2023-12-31 23:59:59'",
        "SELECT 1 FROM t WHERE d LIKE '2023%'",
        "SELECT 1 FROM t WHERE d LIKE '2023-%'",
        "SELECT 1 FROM t WHERE SUBSTR(d, 1, 4) = '2023'",
        "SELECT 1 FROM t WHERE '2023' = strftime('%Y', d)",
        "SELECT 1 FROM t WHERE date_part('year', d) = 2023",
    ] {
        let spec = spec(sql);
        assert_eq!(spec.filters.len(), 1, "{sql}: {:?}", spec.filters);
        let f = &spec.filters[0];
        assert_eq!(f.lhs, "year(d)", "{sql}");
        assert_eq!(f.op, FilterOp::Eq, "{sql}");
        assert_eq!(f.rhs, FilterValue::Number("2023".into()), "{sql}");
    }
    // Not a whole year: kept as a range.
    assert_eq!(
        filters("SELECT 1 FROM t WHERE d >= '2023-01-01' AND d < '2023-07-01'"),
        ["d >= '2023-01-01'", "d < '2023-07-01'"]
    );
    // Alternatives are not merged across OR.
    assert_eq!(
        filters("SELECT 1 FROM t WHERE d >= '2023-01-01' OR d < '2024-01-01'"),
        ["d >= '2023-01-01'", "d < '2024-01-01'"]
    );
    // Other comparisons with a year idiom get numeric years.
    assert_eq!(
        filters("SELECT 1 FROM t WHERE strftime('%Y', d) BETWEEN '2010' AND '2015'"),
        ["year(d) >= 2010", "year(d) <= 2015"]
    );
}

#[test]
fn disjunctions_and_join_conditions() {
    let spec = spec(
        "SELECT 1 FROM a AS T1 JOIN b AS T2 ON T1.id = T2.a_id AND T2.kind = 'X' \
         WHERE T1.x = 1 AND (T1.y = 2 OR T1.z = 3) AND T1.p = T2.q",
    );
    let rendered: Vec<String> = spec.filters.iter().map(|f| f.to_string()).collect();
    assert_eq!(rendered, ["kind = 'x'", "x = 1", "y = 2", "z = 3", "p = q"]);
    let flags: Vec<bool> = spec.filters.iter().map(|f| f.in_disjunction).collect();
    assert_eq!(flags, [false, false, true, true, false]);
    assert_eq!(spec.filters[4].rhs, FilterValue::Column("q".into()));
    assert!(spec.filters.iter().all(|f| f.clause == Clause::Where));
}

#[test]
fn having_with_alias_resolution() {
    let spec = spec(
        "SELECT country, SUM(spend) AS total_spend FROM t GROUP BY country \
         HAVING total_spend > 100 ORDER BY total_spend DESC",
    );
    assert_eq!(spec.filters[0].to_string(), "sum(spend) > 100");
    assert_eq!(spec.filters[0].clause, Clause::Having);
    assert_eq!(spec.projections[1].expr, "sum(spend)");
    assert_eq!(spec.projections[1].alias.as_deref(), Some("total_spend"));
    assert!(!spec.projections[0].is_aggregate());
    assert!(spec.projections[1].is_aggregate());
    assert_eq!(spec.order_by[0].expr, "sum(spend)");
    assert_eq!(spec.order_by[0].dir, SortDir::Desc);
    assert_eq!(
        spec.order_by[0].aggregate.as_ref().map(|a| a.func.clone()),
        Some(AggFunc::Sum)
    );
}

#[test]
fn group_by_and_order_by_ordinals_and_aliases() {
    let spec =
        spec("SELECT strftime('%Y', d) AS yr, COUNT(*) AS n FROM t GROUP BY 1 ORDER BY 2 DESC, yr");
    assert_eq!(spec.group_by, ["year(d)"]);
    let order: Vec<String> = spec.order_by.iter().map(|o| o.to_string()).collect();
    assert_eq!(order, ["count(*) desc", "year(d) asc"]);
    let aliased = extract("SELECT a AS x, b FROM t GROUP BY x, T.b", None).unwrap();
    assert_eq!(aliased.group_by, ["a", "b"]);
}

#[test]
fn limits() {
    assert_eq!(spec("SELECT a FROM t LIMIT 1 OFFSET 2").limit, Some(1));
    assert_eq!(spec("SELECT a FROM t LIMIT 2, 5").limit, Some(5));
    assert_eq!(spec("SELECT a FROM t LIMIT ALL").limit, None);
    assert_eq!(spec("SELECT a FROM t LIMIT :n").limit, None);
    assert_eq!(
        extract("SELECT TOP 3 a FROM t", Some("mssql"))
            .unwrap()
            .limit,
        Some(3)
    );
    let top_ordered = extract("SELECT TOP 3 a FROM t ORDER BY a DESC", Some("mssql")).unwrap();
    assert_eq!(top_ordered.limit, Some(3));
    assert_eq!(top_ordered.order_by[0].to_string(), "a desc");
    assert_eq!(
        extract("SELECT a FROM t FETCH FIRST 4 ROWS ONLY", Some("postgres"))
            .unwrap()
            .limit,
        Some(4)
    );
    // The outermost query's LIMIT, not a subquery's.
    assert_eq!(
        spec("SELECT a FROM t WHERE b IN (SELECT b FROM u LIMIT 10)").limit,
        None
    );
}

#[test]
fn set_operations_use_the_leftmost_select_and_the_whole_order_limit() {
    let spec = spec(
        "SELECT name, age FROM a WHERE x = 1 UNION SELECT nm, years FROM b WHERE y = 2 \
         ORDER BY age DESC LIMIT 5",
    );
    let exprs: Vec<&str> = spec.projections.iter().map(|p| p.expr.as_str()).collect();
    assert_eq!(exprs, ["name", "age"]);
    assert!(spec.set_operations);
    assert_eq!(spec.limit, Some(5));
    assert_eq!(spec.order_by[0].to_string(), "age desc");
    assert!(spec.filters.iter().all(|f| f.in_disjunction));
    assert_eq!(spec.tables, ["a", "b"]);
    // Parenthesized branches too; INTERSECT branches are all required; EXCEPT's right branch
    // is one level deeper (like the subquery of NOT IN).
    let parenthesized = extract(
        "(SELECT a FROM t WHERE x = 1) UNION (SELECT a FROM t WHERE x = 2)",
        None,
    )
    .unwrap();
    assert!(parenthesized.filters.iter().all(|f| f.in_disjunction));
    assert_eq!(parenthesized.filters.len(), 2);
    let except = extract(
        "SELECT a FROM t WHERE x = 1 INTERSECT SELECT a FROM t WHERE y = 2 EXCEPT SELECT a FROM u WHERE z = 3",
        None,
    )
    .unwrap();
    let flags: Vec<(String, bool, u32)> = except
        .filters
        .iter()
        .map(|f| (f.to_string(), f.in_disjunction, f.depth))
        .collect();
    assert_eq!(
        flags,
        [
            ("x = 1".to_string(), false, 0),
            ("y = 2".to_string(), false, 0),
            ("z = 3".to_string(), false, 1)
        ]
    );
}

#[test]
fn ctes_subqueries_windows_distinct() {
    let spec = spec(
        "WITH recent AS (SELECT * FROM orders WHERE yr = 2024) \
         SELECT DISTINCT c.name, ROW_NUMBER() OVER (PARTITION BY c.region ORDER BY c.total DESC) \
         FROM recent JOIN customers AS c ON c.id = recent.cid \
         WHERE c.total > (SELECT AVG(total) FROM customers) \
         AND EXISTS (SELECT 1 FROM returns r WHERE r.cid = c.id AND r.kind = 'full')",
    );
    assert_eq!(spec.ctes, ["recent"]);
    assert_eq!(spec.tables, ["orders", "customers", "returns"]);
    assert_eq!(spec.subqueries, 2);
    assert!(spec.window_functions);
    assert!(spec.distinct);
    // Window calls are not aggregations; the subquery's AVG is.
    let aggs: Vec<String> = spec.aggregations.iter().map(|a| a.to_string()).collect();
    assert_eq!(aggs, ["avg(total)"]);
    let rendered: Vec<(String, u32)> = spec
        .filters
        .iter()
        .map(|f| (f.to_string(), f.depth))
        .collect();
    assert_eq!(
        rendered,
        [
            ("yr = 2024".to_string(), 1),
            ("total > (subquery)".to_string(), 0),
            ("cid = id".to_string(), 1),
            ("kind = 'full'".to_string(), 1),
        ]
    );
}

#[test]
fn derived_top_k_is_lifted_only_for_pass_through_selects() {
    let lifted = spec(
        "SELECT t.name FROM (SELECT name, COUNT(*) AS n FROM x GROUP BY name ORDER BY n DESC LIMIT 1) AS t",
    );
    assert_eq!(lifted.limit, Some(1));
    assert_eq!(lifted.order_by[0].to_string(), "count(*) desc");
    assert!(lifted.order_by[0].aggregate.is_some());
    // An aggregate over the derived table is not a top-k of the outer result.
    let counted = spec("SELECT COUNT(*) FROM (SELECT a FROM x ORDER BY a LIMIT 10) AS t");
    assert_eq!(counted.limit, None);
    assert!(counted.order_by.is_empty());
}

#[test]
fn double_quoted_strings_depend_on_the_dialect() {
    let sqlite = extract("SELECT a FROM t WHERE name = \"Bob\"", Some("sqlite")).unwrap();
    assert_eq!(sqlite.filters[0].rhs, FilterValue::Text("bob".into()));
    let postgres = extract("SELECT a FROM t WHERE name = \"Bob\"", Some("postgres")).unwrap();
    assert_eq!(postgres.filters[0].rhs, FilterValue::Column("bob".into()));
}

#[test]
fn min_max_with_two_arguments_are_scalar() {
    let spec = spec("SELECT MAX(a, b), MIN(c) FROM t");
    let aggs: Vec<String> = spec.aggregations.iter().map(|a| a.to_string()).collect();
    assert_eq!(aggs, ["min(c)"]);
    assert!(!spec.projections[0].is_aggregate());
}

#[test]
fn constant_conditions_are_not_filters() {
    assert_eq!(
        filters("SELECT a FROM t WHERE 1 = 1 AND b = 2 AND TRUE AND 'x' <> 'y'"),
        ["b = 2"]
    );
}

#[test]
fn aliases_resolve_in_having_and_for_computed_columns_in_where() {
    let spec = spec(
        "SELECT strftime('%Y', d) AS yr, COUNT(id) AS id FROM t WHERE yr = '2023' AND id > 5 \
         GROUP BY yr HAVING id > 2",
    );
    let rendered: Vec<String> = spec.filters.iter().map(|f| f.to_string()).collect();
    assert_eq!(rendered, ["year(d) = 2023", "id > 5", "count(id) > 2"]);
}
