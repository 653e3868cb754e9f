//! Hostile and degenerate input: every case yields a spec or a clean `SpecError`, never a panic
//! or a stack overflow. Deep inputs run on threads with deliberately small stacks to show that
//! the bounds hold without relying on the test harness's stack size.

use crate::support;

use sqlgrade_core::evaluation::RowStatus;
use sqlgrade_core::sqlspec::{
    DEFAULT_MAX_SQL_BYTES, ExtractOptions, FilterOp, FilterValue, HARD_MAX_SQL_BYTES, SpecError,
    SqlDialect, SqlSpec, canonical_dialect, extract, extract_with,
};

/// Run `f` on a thread with a 256 KiB stack (a fraction of the usual 2–8 MiB).
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(f)
        .unwrap()
        .join()
        .expect("extraction thread panicked")
}

fn opts_with_limit(max_sql_bytes: usize) -> ExtractOptions {
    ExtractOptions {
        dialects: vec!["sqlite".into()],
        max_sql_bytes,
        // The catalogue checks' reference walk sees the same hostile inputs.
        collect_references: true,
    }
}

fn spec(sql: &str) -> SqlSpec {
    extract(sql, Some("sqlite")).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[test]
fn empty_and_whitespace_are_empty() {
    for sql in [
        "",
        " ",
        "\n\t  \r\n",
        ";",
        ";;  ;",
        "-- only a comment",
        "/* nothing */",
    ] {
        let err = extract(sql, None).unwrap_err();
        assert_eq!(err, SpecError::Empty, "{sql:?}");
        assert_eq!(err.status(), RowStatus::ParseError);
    }
}

#[test]
fn non_queries_are_not_a_query() {
    let cases = [
        ("DROP TABLE x", "DROP TABLE"),
        ("drop table if exists x;", "DROP TABLE"),
        ("INSERT INTO t (a) VALUES (1)", "INSERT"),
        ("UPDATE t SET a = 1 WHERE b = 2", "UPDATE"),
        ("DELETE FROM t WHERE a = 1", "DELETE"),
        ("CREATE TABLE t (a INT)", "CREATE TABLE"),
        ("ALTER TABLE t ADD COLUMN b INT", "ALTER TABLE"),
        (
            "WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x",
            "INSERT",
        ),
        ("SELECT * INTO t2 FROM t", "SELECT INTO"),
        ("EXPLAIN SELECT 1", "EXPLAIN"),
        ("  -- a comment first\n TRUNCATE TABLE t", "TRUNCATE"),
    ];
    for (sql, kind) in cases {
        let err = extract(sql, Some("sqlite")).unwrap_err();
        assert_eq!(
            err,
            SpecError::NotAQuery {
                kind: kind.to_string()
            },
            "{sql}"
        );
        assert_eq!(err.status(), RowStatus::NotAQuery);
    }
}

#[test]
fn several_statements_are_rejected_whole() {
    for (sql, count) in [
        ("SELECT 1; SELECT 2", 2),
        ("SELECT 1; DROP TABLE x", 2),
        ("SELECT name FROM t; DELETE FROM t; SELECT 3;", 3),
    ] {
        let err = extract(sql, Some("sqlite")).unwrap_err();
        assert_eq!(err, SpecError::MultipleStatements { count }, "{sql}");
        assert_eq!(err.status(), RowStatus::MultipleStatements);
    }
    // A single trailing semicolon is one statement.
    assert!(extract("SELECT 1;", None).is_ok());
}

#[test]
fn ten_thousand_nested_parentheses_are_a_clean_parse_error() {
    let err = on_small_stack(|| {
        let sql = format!("SELECT {}1{}", "(".repeat(10_000), ")".repeat(10_000));
        extract(&sql, Some("sqlite")).unwrap_err()
    });
    match &err {
        SpecError::Parse { dialect, message } => {
            assert_eq!(dialect, "sqlite");
            assert!(message.contains("recursion limit"), "{message}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
    assert_eq!(err.status(), RowStatus::ParseError);
}

#[test]
fn deep_subqueries_and_prefix_operators_are_clean_errors() {
    let results = on_small_stack(|| {
        let subqueries = format!(
            "{}SELECT 1{}",
            "SELECT * FROM (".repeat(5_000),
            ") AS t".repeat(5_000)
        );
        let nots = format!("SELECT 1 WHERE {} a = 1", "NOT ".repeat(10_000));
        let minus = format!("SELECT {}1", "- ".repeat(10_000));
        [subqueries, nots, minus].map(|sql| extract(&sql, None))
    });
    // Each is a parse error (for the NOT chain sqlparser backtracks past its recursion error
    // and reports the token where it gave up).
    for result in results {
        assert!(
            matches!(&result, Err(SpecError::Parse { .. })),
            "{result:?}"
        );
    }
}

#[test]
fn the_parser_recursion_limit_is_on_but_ordinary_nesting_parses() {
    // 20 nested subqueries and 30 nested parentheses are real-world deep; both parse.
    let sql = format!(
        "{}SELECT a FROM t WHERE a = {}1{}{}",
        "SELECT a FROM (".repeat(20),
        "(".repeat(30),
        ")".repeat(30),
        ") AS s".repeat(20)
    );
    let spec = spec(&sql);
    assert_eq!(spec.subqueries, 20);
    assert_eq!(spec.filters.len(), 1);
    assert_eq!(spec.filters[0].depth, 20);
}

/// `SELECT a FROM t WHERE a IN (0, 1, 2, …)` of at least `bytes` bytes.
fn big_in_list(bytes: usize) -> (String, usize) {
    let mut sql = String::from("SELECT a FROM t WHERE a IN (0");
    let mut n = 1;
    while sql.len() < bytes {
        sql.push_str(&format!(", {n}"));
        n += 1;
    }
    sql.push(')');
    (sql, n)
}

#[test]
fn one_megabyte_sql_is_too_large_under_the_default_limit() {
    let (sql, _) = big_in_list(1024 * 1024);
    let err = extract(&sql, Some("sqlite")).unwrap_err();
    assert_eq!(
        err,
        SpecError::TooLarge {
            size: sql.len(),
            limit: DEFAULT_MAX_SQL_BYTES
        }
    );
    assert_eq!(err.status(), RowStatus::SqlTooLarge);
    // The configured limit is capped by the hard ceiling.
    let (huge, _) = big_in_list(HARD_MAX_SQL_BYTES + 1);
    assert_eq!(
        extract_with(&huge, &opts_with_limit(usize::MAX)).unwrap_err(),
        SpecError::TooLarge {
            size: huge.len(),
            limit: HARD_MAX_SQL_BYTES
        }
    );
    // The limit is checked before anything else (even for blank input).
    let blank = " ".repeat(DEFAULT_MAX_SQL_BYTES + 1);
    assert!(matches!(
        extract(&blank, None),
        Err(SpecError::TooLarge { .. })
    ));
}

#[test]
fn one_megabyte_sql_is_accepted_when_the_limit_allows() {
    let (sql, n) = big_in_list(1024 * 1024);
    let spec = on_small_stack(move || extract_with(&sql, &opts_with_limit(2 * 1024 * 1024)))
        .expect("1 MB IN list parses");
    assert_eq!(spec.filters.len(), 1);
    assert_eq!(spec.filters[0].op, FilterOp::In);
    match &spec.filters[0].rhs {
        FilterValue::List(items) => assert_eq!(items.len(), n),
        other => panic!("{other:?}"),
    }
}

#[test]
fn one_megabyte_of_or_chain_is_walked_iteratively() {
    // 100,000 disjuncts: a left-nested tree 100,000 levels deep.
    let sql = format!(
        "SELECT a FROM t WHERE {}",
        vec!["a = 1"; 100_000].join(" OR ")
    );
    assert!(sql.len() > 900_000);
    let spec = on_small_stack(move || extract_with(&sql, &opts_with_limit(2 * 1024 * 1024)))
        .expect("long OR chain parses");
    assert_eq!(spec.filters.len(), 100_000);
    assert!(spec.filters.iter().all(|f| f.in_disjunction));
}

#[test]
fn one_megabyte_of_arithmetic_chain_is_a_clean_error() {
    // `1+1+…` parses iteratively into a tree ~500,000 levels deep; rendering it is refused
    // (nesting bound) and dropping it runs on a stack sized for it.
    let sql = format!("SELECT 1{}", "+1".repeat(500_000));
    let result = on_small_stack(move || extract_with(&sql, &opts_with_limit(2 * 1024 * 1024)));
    match result {
        Err(SpecError::Parse { message, .. }) => assert!(message.contains("nesting"), "{message}"),
        other => panic!("expected a nesting error, got {other:?}"),
    }
    // Moderate chains below the bound are fine.
    let sql = format!("SELECT 1{} AS n FROM t", "+1".repeat(300));
    assert_eq!(spec(&sql).projections.len(), 1);
}

#[test]
fn non_ascii_identifiers_and_values_are_lowercased() {
    let spec = spec(
        "SELECT \"Straße\", 名前, ÉCOLE FROM 顧客 WHERE 都市 = 'TŌKYŌ' AND \"Città\" LIKE '%MILANO%'",
    );
    let exprs: Vec<&str> = spec.projections.iter().map(|p| p.expr.as_str()).collect();
    assert_eq!(exprs, ["straße", "名前", "école"]);
    assert_eq!(spec.tables, ["顧客"]);
    assert_eq!(spec.filters[0].lhs, "都市");
    assert_eq!(spec.filters[0].rhs, FilterValue::Text("tōkyō".into()));
    assert_eq!(spec.filters[1].lhs, "città");
    assert_eq!(spec.filters[1].op, FilterOp::Contains);
    assert_eq!(spec.filters[1].rhs, FilterValue::Text("milano".into()));
}

#[test]
fn comments_and_strings_with_injection_text_are_inert() {
    let spec1 = spec("SELECT name FROM users -- ; DROP TABLE users");
    assert_eq!(spec1.tables, ["users"]);
    let spec2 = spec("SELECT name FROM users /* '; DROP TABLE users; -- */ WHERE id = 1 -- OR 1=1");
    assert_eq!(spec2.filters.len(), 1);
    assert_eq!(spec2.filters[0].lhs, "id");
    let spec3 = spec("SELECT name FROM users WHERE name = 'x''; DROP TABLE users; --'");
    assert_eq!(
        spec3.filters[0].rhs,
        FilterValue::Text("x'; drop table users; --".into())
    );
    // A real second statement after a string is still caught.
    assert_eq!(
        extract("SELECT 'a'; DROP TABLE users", None).unwrap_err(),
        SpecError::MultipleStatements { count: 2 }
    );
}

#[test]
fn garbage_is_a_parse_error_reporting_the_first_dialect() {
    for sql in [
        "SELECT",
        "SELECT * FROM",
        "SELEC name FROM t",
        "SELECT 'unterminated",
        "SELECT /* unterminated comment",
        "\u{0}\u{1}\u{2}",
        "🙂🙂🙂",
        "SELECT a FROM t WHERE",
    ] {
        let err = extract(sql, Some("postgres")).unwrap_err();
        match &err {
            SpecError::Parse { dialect, message } => {
                assert_eq!(dialect, "postgres", "{sql:?}");
                assert!(!message.is_empty());
            }
            other => panic!("{sql:?}: expected parse error, got {other:?}"),
        }
    }
}

#[test]
fn a_parse_error_says_where() {
    // Parses run without token locations (cheaper speculative errors); the reported failure is
    // parsed again with them.
    let err = extract("SELECT name FROM t WHERE a = = 1", Some("sqlite")).unwrap_err();
    match &err {
        SpecError::Parse { dialect, message } => {
            assert_eq!(dialect, "sqlite");
            assert!(message.contains("Line: 1, Column: "), "{message}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn lenient_retry_strips_fences_labels_and_semicolons() {
    let fenced = "Here you go:\n```sql\nSELECT name FROM t WHERE a = 1;\n```\nHope it helps";
    let spec = extract(fenced, Some("postgres")).unwrap();
    assert_eq!(spec.filters.len(), 1);
    assert_eq!(spec.projections[0].expr, "name");
    let labelled = extract("SQL: SELECT name FROM t;;", None).unwrap();
    assert_eq!(labelled.tables, ["t"]);
}

#[test]
fn dialect_chain_and_names() {
    // Backticks fail in postgres, then parse in generic.
    let spec = extract("SELECT `Full Name` FROM `t`", Some("postgres")).unwrap();
    assert_eq!(spec.dialect, "generic");
    assert_eq!(spec.projections[0].expr, "full name");
    // Brackets are SQLite/MSSQL only: the lenient retry finds SQLite.
    let spec = extract("SELECT [Full Name] FROM [t]", Some("postgres")).unwrap();
    assert_eq!(spec.dialect, "sqlite");
    // Unknown names fall back to generic.
    assert_eq!(
        extract("SELECT 1", Some("no-such-db")).unwrap().dialect,
        "generic"
    );
    assert_eq!(
        extract("SELECT 1", Some("Snowflake")).unwrap().dialect,
        "snowflake"
    );
    for (name, canonical) in [
        ("generic", "generic"),
        ("ansi", "ansi"),
        ("sqlite", "sqlite"),
        ("postgres", "postgres"),
        ("PostgreSQL", "postgres"),
        ("mysql", "mysql"),
        ("snowflake", "snowflake"),
        ("bigquery", "bigquery"),
        ("mssql", "mssql"),
        ("tsql", "mssql"),
        ("clickhouse", "clickhouse"),
        ("duckdb", "duckdb"),
        ("hive", "hive"),
        ("redshift", "redshift"),
        ("databricks", "databricks"),
        ("oracle", "generic"),
    ] {
        assert_eq!(canonical_dialect(name), canonical, "{name}");
    }
    assert_eq!(SqlDialect::from_name("tsql"), Some(SqlDialect::MsSql));
    assert_eq!(SqlDialect::from_name("nope"), None);
    // Every named dialect parses a plain query and records itself.
    for name in [
        "ansi",
        "sqlite",
        "postgres",
        "mysql",
        "snowflake",
        "bigquery",
        "mssql",
        "clickhouse",
        "duckdb",
        "hive",
        "redshift",
        "databricks",
    ] {
        let spec = extract(
            "SELECT a, COUNT(*) FROM t WHERE b = 'x' GROUP BY a",
            Some(name),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(spec.dialect, canonical_dialect(name));
        assert_eq!(spec.group_by, ["a"]);
    }
}

#[test]
fn huge_identifiers_and_literals_are_fine() {
    let long_name = "c".repeat(100_000);
    let sql = format!(
        "SELECT {long_name} FROM t WHERE x = '{}'",
        "v".repeat(100_000)
    );
    let spec = extract(&sql, None).unwrap();
    assert_eq!(spec.projections[0].expr.len(), 100_000);
    assert_eq!(spec.filters[0].rhs, FilterValue::Text("v".repeat(100_000)));
}

#[test]
fn every_prefix_and_byte_deletion_of_real_queries_is_handled() {
    // Truncations and single-character deletions of real BIRD gold queries: malformed SQL of
    // every shape the parser can meet. Each must yield a spec or a clean error, never a panic.
    let text = std::fs::read_to_string(support::data_dir().join("bird/dev.jsonl")).unwrap();
    let mut checked = 0usize;
    for line in text.lines().step_by(12).take(30) {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        let sql = row["gold_sql"].as_str().unwrap();
        let boundaries: Vec<usize> = sql.char_indices().map(|(i, _)| i).collect();
        for &end in &boundaries {
            let prefix = &sql[..end];
            let outcome = std::panic::catch_unwind(|| extract(prefix, Some("sqlite")));
            assert!(outcome.is_ok(), "panic on prefix {prefix:?}");
            checked += 1;
        }
        for (k, &at) in boundaries.iter().enumerate().step_by(3) {
            let next = boundaries.get(k + 1).copied().unwrap_or(sql.len());
            let mutated = format!("{}{}", &sql[..at], &sql[next..]);
            let outcome = std::panic::catch_unwind(|| extract(&mutated, Some("sqlite")));
            assert!(outcome.is_ok(), "panic on {mutated:?}");
            checked += 1;
        }
    }
    assert!(checked > 5_000, "{checked}");
}
