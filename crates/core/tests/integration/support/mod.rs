//! What the core's own tests need from outside: where the shared benchmark data is, and which
//! of its files hold SQL. The core's
//! tests depend on nothing but the core (not on `sqlgrade-testkit`, which depends on the core),
//! so this repeats the one rule of `sqlgrade_testkit::data`: `$SQLGRADE_SHARED_DIR`, else
//! `shared/` beside the repository.

use std::path::PathBuf;

/// `shared/data`.
///
/// # Panics
/// When the data is in neither place (the tests cannot run without it).
pub fn data_dir() -> PathBuf {
    let shared = match std::env::var_os("SQLGRADE_SHARED_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
    };
    let data = shared.join("data");
    assert!(
        data.is_dir(),
        "the shared benchmark data is not at {} (set SQLGRADE_SHARED_DIR to the directory that \
         holds data/)",
        data.display()
    );
    data
}

/// The SQL corpus of `shared/data`: (file relative to it, JSON field holding the SQL) — BIRD dev
/// gold and three BIRD prediction files, Spider dev gold and three Spider prediction files.
#[allow(dead_code)] // not every test binary that includes this module reads the corpus
pub const SQL_CORPUS: &[(&str, &str)] = &[
    ("bird/dev.jsonl", "gold_sql"),
    ("bird/predictions/CHESS-GPT-4o-mini.jsonl", "predicted_sql"),
    ("bird/predictions/DAIL-SQL.jsonl", "predicted_sql"),
    ("bird/predictions/SuperSQL.jsonl", "predicted_sql"),
    ("spider/dev.jsonl", "gold_sql"),
    ("spider/predictions/DAIL-SQL-GPT-4.jsonl", "predicted_sql"),
    ("spider/predictions/SuperSQL.jsonl", "predicted_sql"),
    ("spider/predictions/TA-ACL.jsonl", "predicted_sql"),
];
