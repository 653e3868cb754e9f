//! `ts_ex` on fixtures whose equivalence depends on the data: bag semantics, NULLs, ties, and
//! a pair that coincides on the real database only. Each not-equivalent verdict carries a
//! counterexample, which this test re-executes on its own database built from the script.
//! Hostile predictions: nothing is written to the real database, runaway queries end by the
//! time limit.

use std::time::{Duration, Instant};

use rusqlite::Connection;
use sqlgrade::catalogue::{DbSchema, SchemaCatalog};
use sqlgrade::exec::{ResultSet, SqlValue};
use sqlgrade::metrics::ex::{ExConvention, results_match};
use sqlgrade::metrics::ts_ex::{SuiteCheck, SuiteMode, TsOutcome};
use sqlgrade::score::sqlite::ExecLimits;
use sqlgrade::score::sqlite::SqliteExecutor;
use sqlgrade::score::sqlite::schema_db::schema_ddl;
use sqlgrade::score::sqlite::suite::{SuiteChecker, SuiteConfig};

fn catalogue() -> SchemaCatalog {
    SchemaCatalog::parse_simple(
        r#"{"db_id": "shop", "tables": [
            {"name": "customer", "primary_key": ["id"], "columns": [
                {"name": "id", "type": "integer"}, {"name": "name", "type": "text"},
                {"name": "city", "type": "text"}, {"name": "age", "type": "integer"}]},
            {"name": "orders", "primary_key": ["id"], "columns": [
                {"name": "id", "type": "integer"},
                {"name": "customer_id", "type": "integer", "references": "customer.id"},
                {"name": "amount", "type": "real"}]}
        ]}"#,
        true,
    )
    .unwrap()
}

fn limits() -> ExecLimits {
    ExecLimits {
        timeout: Duration::from_millis(300),
        max_rows: 10_000,
        ..ExecLimits::default()
    }
}

fn check(
    checker: &SuiteChecker,
    db: &DbSchema,
    gold: &str,
    pred: &str,
    convention: ExConvention,
) -> TsOutcome {
    checker
        .check(db, gold, pred, "", convention, SuiteMode::Constrained)
        .unwrap()
}

fn result(conn: &Connection, sql: &str) -> Result<ResultSet, String> {
    let mut stmt = conn.prepare(sql).map_err(|e| e.to_string())?;
    let columns: Vec<String> = stmt.column_names().map(|c| c.to_string()).collect();
    let width = columns.len();
    let rows = stmt
        .query_map([], |r| {
            (0..width)
                .map(|i| {
                    Ok(match r.get_ref(i)? {
                        rusqlite::types::ValueRef::Null => SqlValue::Null,
                        rusqlite::types::ValueRef::Integer(n) => SqlValue::Integer(n),
                        rusqlite::types::ValueRef::Real(f) => SqlValue::Real(f),
                        rusqlite::types::ValueRef::Text(t) => {
                            SqlValue::Text(String::from_utf8_lossy(t).into_owned())
                        }
                        rusqlite::types::ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
                    })
                })
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(|e| e.to_string())?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    Ok(ResultSet { columns, rows })
}

/// The counterexample, rebuilt from its script alone, really tells the two queries apart.
fn assert_refutes(db: &DbSchema, out: &TsOutcome, gold: &str, pred: &str, conv: ExConvention) {
    assert!(!out.verdict, "{out:?}");
    let cx = out.counterexample.as_ref().expect("a counterexample");
    assert!(!cx.truncated);
    let conn = Connection::open_in_memory().unwrap();
    for ddl in schema_ddl(db) {
        conn.execute(&ddl, []).unwrap();
    }
    conn.execute_batch(&cx.script).unwrap();
    let g = result(&conn, gold).unwrap();
    match result(&conn, pred) {
        Ok(p) => assert!(
            !results_match(&g, &p, conv, gold),
            "the counterexample does not distinguish {gold} from {pred}:\n{}",
            cx.script
        ),
        Err(_) => assert!(cx.pred.is_err()),
    }
    assert_eq!(cx.gold.row_count, g.rows.len());
}

#[test]
fn data_dependent_equivalences_get_their_verdict_and_a_real_counterexample() {
    let catalog = catalogue();
    let db = catalog.get("shop").unwrap();
    let checker = SuiteChecker::new(SuiteConfig::default(), limits(), None);
    let spider = ExConvention::SpiderTestSuite;
    let bird = ExConvention::Bird;

    // Equivalent only under set semantics: duplicates tell them apart as bags.
    let (gold, pred) = (
        "SELECT city FROM customer",
        "SELECT DISTINCT city FROM customer",
    );
    let out = check(&checker, db, gold, pred, spider);
    assert_refutes(db, &out, gold, pred, spider);
    assert!(check(&checker, db, gold, pred, bird).verdict);

    // Equivalent only without NULLs.
    let (gold, pred) = (
        "SELECT count(age) FROM customer",
        "SELECT count(*) FROM customer",
    );
    let out = check(&checker, db, gold, pred, spider);
    assert_refutes(db, &out, gold, pred, spider);

    // Equivalent only without ties.
    let (gold, pred) = (
        "SELECT name FROM customer WHERE age = (SELECT max(age) FROM customer)",
        "SELECT name FROM customer ORDER BY age DESC LIMIT 1",
    );
    let out = check(&checker, db, gold, pred, spider);
    assert_refutes(db, &out, gold, pred, spider);

    // A boundary: >= and > differ only on the literal itself, which the generator plants.
    let (gold, pred) = (
        "SELECT name FROM customer WHERE age >= 40",
        "SELECT name FROM customer WHERE age > 40",
    );
    let out = check(&checker, db, gold, pred, spider);
    assert_refutes(db, &out, gold, pred, spider);

    // Truly equivalent: no database tells them apart.
    let out = check(
        &checker,
        db,
        "SELECT name FROM customer WHERE age > 30",
        "SELECT c.name FROM customer AS c WHERE 30 < c.age",
        spider,
    );
    assert!(out.verdict, "{out:?}");
    assert!(
        out.suite_size > 0 && out.mutants > 0 && out.mutants_killed > 0,
        "{out:?}"
    );
    assert!(out.counterexample.is_none());

    // Deterministic: the same pair gives the same suite and verdict from a fresh checker.
    let again = SuiteChecker::new(SuiteConfig::default(), limits(), None);
    let first = check(
        &checker,
        db,
        "SELECT count(age) FROM customer",
        "SELECT count(*) FROM customer",
        spider,
    );
    let second = check(
        &again,
        db,
        "SELECT count(age) FROM customer",
        "SELECT count(*) FROM customer",
        spider,
    );
    assert_eq!(first, second);
}

#[test]
fn a_pair_that_coincides_on_the_real_database_is_refuted_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = catalogue();
    let db = catalog.get("shop").unwrap();
    std::fs::create_dir(dir.path().join("shop")).unwrap();
    let path = dir.path().join("shop/shop.sqlite");
    {
        let conn = Connection::open(&path).unwrap();
        for ddl in schema_ddl(db) {
            conn.execute(&ddl, []).unwrap();
        }
        conn.execute_batch(
            "INSERT INTO customer VALUES (1, 'Ann', 'Oslo', 41), (2, 'Bo', 'Rome', 52);
             INSERT INTO orders VALUES (1, 1, 9.5);",
        )
        .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let real = SqliteExecutor::new(dir.path(), limits());
    let checker = SuiteChecker::new(SuiteConfig::default(), limits(), Some(real.clone()));
    let (gold, pred) = (
        "SELECT name FROM customer WHERE age > 30",
        "SELECT name FROM customer",
    );
    // EX on the real database says they agree...
    let g = sqlgrade::exec::Executor::execute(&real, "shop", gold).unwrap();
    let p = sqlgrade::exec::Executor::execute(&real, "shop", pred).unwrap();
    assert!(results_match(&g, &p, ExConvention::SpiderTestSuite, gold));
    // ...the suite does not.
    let out = check(&checker, db, gold, pred, ExConvention::SpiderTestSuite);
    assert!(out.real_database);
    assert_eq!(out.differs_on, Some("suite"));
    assert_refutes(db, &out, gold, pred, ExConvention::SpiderTestSuite);

    // Hostile predictions: writes are refused, a runaway query ends by the time limit, and
    // the real database is byte for byte what it was.
    let out = check(
        &checker,
        db,
        gold,
        "DELETE FROM customer",
        ExConvention::Bird,
    );
    assert!(!out.verdict);
    let started = Instant::now();
    let runaway = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) \
                   SELECT name FROM customer, n WHERE age > 30 AND i < 0";
    let out = check(&checker, db, gold, runaway, ExConvention::Bird);
    assert!(!out.verdict);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    real.shutdown();
    assert_eq!(std::fs::read(&path).unwrap(), before);
}
