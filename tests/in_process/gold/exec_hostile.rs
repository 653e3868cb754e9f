//! Hostile SQL against the executor: every attempt ends with a clear status within the time
//! limit, and neither the copy it ran on nor the shared original changes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use sqlgrade::exec::{ExecError, Executor};
use sqlgrade::score::sqlite::{ExecLimits, SqliteExecutor};

fn sha256(path: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

fn shared_db() -> PathBuf {
    sqlgrade_testkit::data::data_dir().join("bird/databases/toxicology/toxicology.sqlite")
}

/// A catalogue in a temp dir holding a copy of toxicology as `tox`.
fn copy_catalogue() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("tox");
    std::fs::create_dir(&db_dir).unwrap();
    let copy = db_dir.join("tox.sqlite");
    std::fs::copy(shared_db(), &copy).unwrap();
    let mut perms = std::fs::metadata(&copy).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false); // writable on disk: only the executor's guards protect it
    std::fs::set_permissions(&copy, perms).unwrap();
    (dir, copy)
}

const LIMIT: Duration = Duration::from_millis(1500);

fn limits() -> ExecLimits {
    ExecLimits {
        timeout: LIMIT,
        max_rows: 10_000,
        workers: 2,
        cache_bytes: 0,
        ..ExecLimits::default()
    }
}

#[test]
fn hostile_sql_ends_with_a_clear_status_and_changes_nothing() {
    let original_before = sha256(&shared_db());
    let (dir, copy) = copy_catalogue();
    let before = sha256(&copy);
    let exec = SqliteExecutor::new(dir.path(), limits());
    let evil = dir.path().join("evil.db");
    let attach = format!("ATTACH DATABASE '{}' AS evil", evil.display());
    let cases: Vec<(&str, String, &str)> = vec![
        ("delete", "DELETE FROM atom".into(), "denied"),
        ("insert", "INSERT INTO molecule VALUES ('X1', '+')".into(), "denied"),
        ("update", "UPDATE atom SET element = 'x'".into(), "denied"),
        ("drop", "DROP TABLE bond".into(), "denied"),
        ("create", "CREATE TABLE t(a)".into(), "denied"),
        ("attach", attach, "denied"),
        ("writable_schema", "PRAGMA writable_schema=1".into(), "denied"),
        ("query_only_off", "PRAGMA query_only=0".into(), "denied"),
        ("vacuum_into", format!("VACUUM INTO '{}'", dir.path().join("v.db").display()), "denied"),
        ("stacked", "SELECT 1; DELETE FROM atom".into(), "denied|multiple_statements"),
        ("stacked_reads", "SELECT 1; SELECT 2".into(), "multiple_statements"),
        (
            "recursive_cte_count",
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
                .into(),
            "timeout",
        ),
        (
            "recursive_cte_rows",
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c".into(),
            "row_limit",
        ),
        (
            "cross_join_1e12",
            "SELECT count(*) FROM atom a, atom b, atom c".into(),
            "timeout",
        ),
        (
            "cross_join_rows",
            "SELECT * FROM atom a, atom b, atom c ORDER BY a.atom_id, b.atom_id DESC".into(),
            "row_limit|timeout",
        ),
        // Memory: each would allocate from a hundred megabytes to gigabytes.
        ("zeroblob_1g", "SELECT zeroblob(1000000000)".into(), "memory_limit"),
        (
            "printf_1g",
            "SELECT printf('%.*c', 1000000000, 'x')".into(),
            "memory_limit",
        ),
        (
            "group_concat_randomblob",
            "SELECT group_concat(randomblob(1000000)) FROM atom a, atom b".into(),
            // SQLite stops appending past the limit but steps every row before it says so.
            "memory_limit|timeout",
        ),
        (
            "replace_hex_zeroblob",
            "SELECT replace(hex(zeroblob(100000000)), '0', 'ab')".into(),
            "memory_limit",
        ),
        (
            "repeat_via_replace",
            "SELECT length(replace(hex(zeroblob(400000)), '0', '0123456789'))".into(),
            "memory_limit",
        ),
        (
            "wide_rows",
            "SELECT randomblob(900000) FROM atom a, atom b".into(),
            "value_limit|timeout",
        ),
        ("readfile", "SELECT readfile('/etc/passwd')".into(), "sql_error"),
        ("writefile", "SELECT writefile('x.txt', 'x')".into(), "sql_error"),
        (
            "load_extension",
            "SELECT load_extension('/tmp/nothing.so')".into(),
            "sql_error|denied",
        ),
    ];
    for (name, sql, want) in &cases {
        let t0 = Instant::now();
        let res = exec.execute("tox", sql);
        let took = t0.elapsed();
        let err = res.expect_err(name);
        assert!(want.split('|').any(|w| w == err.kind()), "{name}: {err}");
        assert!(took < LIMIT * 3, "{name} took {took:?}");
        println!("{name:22} -> {:20} in {took:?}: {err}", err.kind());
    }
    // Ordinary reads still work afterwards.
    let ok = exec.execute("tox", "SELECT count(*) FROM atom").unwrap();
    assert_eq!(ok.rows.len(), 1);
    exec.shutdown();
    assert!(!evil.exists(), "ATTACH must not create a file");
    assert!(
        !dir.path().join("v.db").exists(),
        "VACUUM INTO must not create a file"
    );
    assert_eq!(sha256(&copy), before, "the copy's checksum changed");
    assert_eq!(
        sha256(&shared_db()),
        original_before,
        "the shared original changed"
    );
}

#[test]
fn unknown_or_unsafe_database_ids_are_rejected() {
    let (dir, _copy) = copy_catalogue();
    let exec = SqliteExecutor::new(dir.path(), limits());
    for id in ["nope", "../tox", "tox/../tox", "", ".."] {
        let err = exec.execute(id, "SELECT 1").unwrap_err();
        assert!(matches!(err, ExecError::UnknownDatabase(_)), "{id}: {err}");
    }
    assert!(exec.has_database("tox"));
    assert!(!exec.has_database("../tox"));
}

#[test]
fn async_execution_does_not_block_the_runtime() {
    let (dir, _copy) = copy_catalogue();
    let exec = SqliteExecutor::new(dir.path(), limits());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let slow = exec.execute_async("tox", "SELECT count(*) FROM atom a, atom b, atom c");
        let ticker = async {
            let mut ticks = 0;
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                ticks += 1;
            }
            ticks
        };
        let (slow, ticks) = tokio::join!(slow, ticker);
        assert_eq!(ticks, 5);
        assert_eq!(slow.unwrap_err().kind(), "timeout");
        let fast = exec
            .execute_async("tox", "SELECT count(*) FROM bond")
            .await
            .unwrap();
        assert_eq!(fast.rows.len(), 1);
    });
}
