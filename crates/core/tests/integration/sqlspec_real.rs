//! Real queries, verbatim from `shared/data` (BIRD dev gold, BIRD predictions of SuperSQL,
//! CHESS and DAIL-SQL, Spider dev gold, Spider predictions of DAIL-SQL, SuperSQL and TA-ACL),
//! with every field of the extracted spec asserted.
//!
//! Each case names its file and `question_id`; the test first checks that the SQL below is the
//! file's SQL byte for byte, then extracts with the SQLite dialect and compares:
//! - projections as `expr [as alias] [=> aggregate]`,
//! - aggregations as `func([distinct ]arg)`,
//! - filters as `lhs op rhs` plus ` [having]`, ` [or]` (in a disjunction), ` [dN]` (depth N),
//! - ORDER BY items as `expr dir [=> aggregate]`,
//! - and GROUP BY, LIMIT, DISTINCT, tables, CTEs, subquery count, set operations, windows.
//!
//! Coverage: joins with T1/T2 aliases, derived tables, CTEs, scalar/IN/EXISTS subqueries, CASE,
//! IIF, CAST, window functions, UNION/INTERSECT/EXCEPT, BETWEEN (numbers, strings, dates), LIKE
//! (contains, starts-with, no wildcard, NOT LIKE), IN lists and subqueries, year idioms
//! (SUBSTR, strftime, STRFTIME, BETWEEN a year, LIKE 'YYYY-%'), IS [NOT] NULL, HAVING, ORDER BY
//! aliases, ORDER BY … LIMIT 1, backticks, double-quoted identifiers and double-quoted strings.

mod bird;
mod spider;
use crate::support;

use sqlgrade_core::sqlspec::{Clause, Filter, Projection, SqlSpec, extract};

pub struct Case {
    file: &'static str,
    id: i64,
    sql: &'static str,
    projections: &'static [&'static str],
    aggregations: &'static [&'static str],
    filters: &'static [&'static str],
    group_by: &'static [&'static str],
    order_by: &'static [&'static str],
    limit: Option<u64>,
    distinct: bool,
    tables: &'static [&'static str],
    ctes: &'static [&'static str],
    subqueries: usize,
    set_operations: bool,
    window_functions: bool,
}

fn projection_text(p: &Projection) -> String {
    let alias = p
        .alias
        .as_ref()
        .map(|a| format!(" as {a}"))
        .unwrap_or_default();
    let agg = p
        .aggregate
        .as_ref()
        .map(|a| format!(" => {a}"))
        .unwrap_or_default();
    format!("{}{alias}{agg}", p.expr)
}

fn filter_text(f: &Filter) -> String {
    let having = if f.clause == Clause::Having {
        " [having]"
    } else {
        ""
    };
    let or = if f.in_disjunction { " [or]" } else { "" };
    let depth = if f.depth > 0 {
        format!(" [d{}]", f.depth)
    } else {
        String::new()
    };
    format!("{f}{having}{or}{depth}")
}

/// The SQL of `question_id` in `file` (gold or predicted).
fn sql_in_file(file: &str, id: i64) -> String {
    let field = if file.contains("predictions") {
        "predicted_sql"
    } else {
        "gold_sql"
    };
    let text = std::fs::read_to_string(support::data_dir().join(file)).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|row| row["question_id"].as_i64() == Some(id))
        .and_then(|row| row[field].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("{file} has no question {id}"))
}

fn check(case: &Case, spec: &SqlSpec) -> Vec<String> {
    let mut problems = Vec::new();
    let mut cmp = |what: &str, got: Vec<String>, want: &[&str]| {
        if got != want {
            problems.push(format!("{what}:\n      got  {got:?}\n      want {want:?}"));
        }
    };
    cmp(
        "projections",
        spec.projections.iter().map(projection_text).collect(),
        case.projections,
    );
    cmp(
        "aggregations",
        spec.aggregations.iter().map(|a| a.to_string()).collect(),
        case.aggregations,
    );
    cmp(
        "filters",
        spec.filters.iter().map(filter_text).collect(),
        case.filters,
    );
    cmp("group_by", spec.group_by.clone(), case.group_by);
    cmp(
        "order_by",
        spec.order_by
            .iter()
            .map(|o| {
                let agg = o
                    .aggregate
                    .as_ref()
                    .map(|a| format!(" => {a}"))
                    .unwrap_or_default();
                format!("{o}{agg}")
            })
            .collect(),
        case.order_by,
    );
    cmp("tables", spec.tables.clone(), case.tables);
    cmp("ctes", spec.ctes.clone(), case.ctes);
    let scalars = [
        (
            "limit",
            format!("{:?}", spec.limit),
            format!("{:?}", case.limit),
        ),
        (
            "distinct",
            spec.distinct.to_string(),
            case.distinct.to_string(),
        ),
        (
            "subqueries",
            spec.subqueries.to_string(),
            case.subqueries.to_string(),
        ),
        (
            "set_operations",
            spec.set_operations.to_string(),
            case.set_operations.to_string(),
        ),
        (
            "window_functions",
            spec.window_functions.to_string(),
            case.window_functions.to_string(),
        ),
        ("dialect", spec.dialect.clone(), "sqlite".to_string()),
    ];
    for (what, got, want) in scalars {
        if got != want {
            problems.push(format!("{what}: got {got}, want {want}"));
        }
    }
    problems
}

#[test]
fn real_queries_extract_as_expected() {
    let cases: Vec<&Case> = bird::CASES.iter().chain(spider::CASES).collect();
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    let mut failures = Vec::new();
    for case in cases {
        assert_eq!(
            sql_in_file(case.file, case.id),
            case.sql,
            "{} #{}: the SQL is not verbatim",
            case.file,
            case.id
        );
        match extract(case.sql, Some("sqlite")) {
            Ok(spec) => {
                let problems = check(case, &spec);
                if !problems.is_empty() {
                    failures.push(format!(
                        "{} #{}: {}\n    {}",
                        case.file,
                        case.id,
                        case.sql,
                        problems.join("\n    ")
                    ));
                }
            }
            Err(err) => failures.push(format!("{} #{}: {err}", case.file, case.id)),
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

#[test]
fn projection_columns_and_aggregate_columns() {
    // bird/dev.jsonl #201 (verbatim): columns of a projection; aggregate column through CASE.
    let spec = extract(
        "SELECT CAST(COUNT(DISTINCT CASE WHEN T1.element = 'c' THEN T1.atom_id ELSE NULL END) AS REAL) * 100 / COUNT(DISTINCT T1.atom_id) FROM atom AS T1 INNER JOIN bond AS T2 ON T1.molecule_id = T2.molecule_id WHERE T2.bond_type = '='",
        Some("sqlite"),
    )
    .unwrap();
    assert_eq!(spec.projections[0].columns, ["element", "atom_id"]);
    assert_eq!(spec.aggregations[0].column, None);
    assert!(spec.aggregations[0].distinct);
    assert_eq!(spec.aggregations[1].column.as_deref(), Some("atom_id"));
    // spider/dev.jsonl #0 (verbatim): COUNT(*) has no column.
    let spec = extract("SELECT count(*) FROM singer", Some("sqlite")).unwrap();
    assert_eq!(spec.aggregations[0].column, None);
    assert_eq!(spec.aggregations[0].arg, "*");
}
