//! The executor seam of the gold metrics: result sets, values and their comparison keys, and
//! the small [`Executor`] trait.
//!
//! The metric code sees only "run this SQL on that database and give me the rows, or tell me why
//! not". The production implementation (read-only SQLite with time, row and size limits and a
//! per-run result cache) lives at the edge, in the daemon's `sqlite` module.

use std::sync::Arc;

use serde::Serialize;

/// One value of a result row, as SQLite returned it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SqlValue {
    /// SQL NULL.
    Null,
    /// INTEGER storage class.
    Integer(i64),
    /// REAL storage class.
    Real(f64),
    /// TEXT storage class (invalid UTF-8 is replaced lossily).
    Text(String),
    /// BLOB storage class.
    Blob(Vec<u8>),
}

/// For people: `NULL`, the number, the text as is, a blob as its size.
impl std::fmt::Display for SqlValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SqlValue::Null => f.write_str("NULL"),
            SqlValue::Integer(i) => write!(f, "{i}"),
            SqlValue::Real(x) => write!(f, "{x}"),
            SqlValue::Text(t) => f.write_str(t),
            SqlValue::Blob(b) => write!(f, "<blob, {} bytes>", b.len()),
        }
    }
}

impl SqlValue {
    /// The comparison key of this value with Python's equality semantics (what the reference
    /// evaluators use): an integral REAL equals the INTEGER of the same value (`507 == 507.0`),
    /// `-0.0 == 0`, TEXT never equals a number.
    pub fn key(&self) -> ValueKey {
        match self {
            SqlValue::Null => ValueKey::Null,
            SqlValue::Integer(i) => ValueKey::Int(*i),
            SqlValue::Real(f) => real_key(*f),
            SqlValue::Text(s) => ValueKey::Text(s.clone()),
            SqlValue::Blob(b) => ValueKey::Blob(b.clone()),
        }
    }

    /// Borrowed comparison key (no allocation); same semantics as [`SqlValue::key`].
    pub fn key_ref(&self) -> KeyRef<'_> {
        match self {
            SqlValue::Null => KeyRef::Null,
            SqlValue::Integer(i) => KeyRef::Int(*i),
            SqlValue::Real(f) => match real_key(*f) {
                ValueKey::Int(i) => KeyRef::Int(i),
                ValueKey::Real(bits) => KeyRef::Real(bits),
                _ => KeyRef::Null,
            },
            SqlValue::Text(s) => KeyRef::Text(s),
            SqlValue::Blob(b) => KeyRef::Blob(b),
        }
    }

    /// Approximate heap size in bytes (for the result-size cap).
    pub fn size_bytes(&self) -> usize {
        match self {
            SqlValue::Text(s) => s.len() + 8,
            SqlValue::Blob(b) => b.len() + 8,
            _ => 16,
        }
    }
}

fn real_key(f: f64) -> ValueKey {
    // 2^63 as f64; integral floats strictly inside (-2^63, 2^63) convert exactly to i64.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if f.is_finite() && f.fract() == 0.0 && f > -LIMIT && f < LIMIT {
        ValueKey::Int(f as i64)
    } else if f.is_nan() {
        ValueKey::Real(f64::NAN.to_bits())
    } else {
        ValueKey::Real(f.to_bits())
    }
}

/// Hashable, equality-comparable form of a [`SqlValue`] (see [`SqlValue::key`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ValueKey {
    /// NULL (equal to NULL, as Python's `None == None`).
    Null,
    /// An integer, or an integral real.
    Int(i64),
    /// A non-integral real, by bit pattern.
    Real(u64),
    /// Text.
    Text(String),
    /// Blob.
    Blob(Vec<u8>),
}

/// Borrowed form of [`ValueKey`], for comparing results without copying them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyRef<'a> {
    /// NULL.
    Null,
    /// An integer, or an integral real.
    Int(i64),
    /// A non-integral real, by bit pattern.
    Real(u64),
    /// Text.
    Text(&'a str),
    /// Blob.
    Blob(&'a [u8]),
}

/// The rows one query returned.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ResultSet {
    /// Column names as SQLite reports them.
    pub columns: Vec<String>,
    /// Rows, in the order SQLite produced them.
    pub rows: Vec<Vec<SqlValue>>,
}

impl ResultSet {
    /// Approximate bytes the result holds: its cells ([`SqlValue::size_bytes`]) and column
    /// names.
    pub fn size_bytes(&self) -> usize {
        let names: usize = self.columns.iter().map(|c| c.len() + 24).sum();
        let cells: usize = self
            .rows
            .iter()
            .map(|row| 24 + row.iter().map(SqlValue::size_bytes).sum::<usize>())
            .sum();
        names.saturating_add(cells)
    }

    /// The result as the input contract's `result` sample: every column name, the first
    /// [`crate::event::MAX_RESULT_ROWS`] rows (cells as JSON: numbers, text cut to
    /// [`crate::event::MAX_RESULT_TEXT`] characters, a blob as its hex), the full row count.
    pub fn to_query_result(&self) -> crate::event::QueryResult {
        use crate::event::{MAX_RESULT_COLUMNS, MAX_RESULT_ROWS, clip_text as clip};
        let cell = |v: &SqlValue| match v {
            SqlValue::Null => serde_json::Value::Null,
            SqlValue::Integer(i) => serde_json::Value::from(*i),
            SqlValue::Real(f) => serde_json::Number::from_f64(*f).map_or_else(
                || serde_json::Value::String(f.to_string()),
                serde_json::Value::Number,
            ),
            SqlValue::Text(s) => serde_json::Value::String(clip(s)),
            SqlValue::Blob(b) => serde_json::Value::String(clip(&hex::encode(b))),
        };
        crate::event::QueryResult {
            error: None,
            row_count: Some(self.rows.len() as u64),
            columns: self
                .columns
                .iter()
                .take(MAX_RESULT_COLUMNS)
                .map(|c| clip(c))
                .collect(),
            rows: self
                .rows
                .iter()
                .take(MAX_RESULT_ROWS)
                .map(|row| row.iter().take(MAX_RESULT_COLUMNS).map(cell).collect())
                .collect(),
            truncated: self.rows.len() > MAX_RESULT_ROWS || self.columns.len() > MAX_RESULT_COLUMNS,
            elapsed_ms: None,
        }
    }

    /// Every row as a vector of comparison keys.
    pub fn keyed_rows(&self) -> Vec<Vec<ValueKey>> {
        self.rows
            .iter()
            .map(|r| r.iter().map(SqlValue::key).collect())
            .collect()
    }

    /// Every row as a vector of borrowed comparison keys.
    pub fn key_ref_rows(&self) -> Vec<Vec<KeyRef<'_>>> {
        self.rows
            .iter()
            .map(|r| r.iter().map(SqlValue::key_ref).collect())
            .collect()
    }

    /// A short fingerprint of the result as a *set* of rows (BIRD's notion of equality: row
    /// order and duplicates ignored, column order kept, values by their comparison keys, so
    /// `507` and `507.0` agree): the first 16 hex digits of SHA-256 over the sorted distinct
    /// rows. BIRD-equal results have the same digest and, up to a 64-bit collision, the other
    /// way round (all empty results share one); it
    /// lets rows of different runs say "these systems returned the same answer" without
    /// carrying the rows (the gold audit reads it).
    pub fn set_digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut rows = self.key_ref_rows();
        rows.sort_unstable();
        rows.dedup();
        let mut hasher = Sha256::new();
        for row in &rows {
            hasher.update([0xFE]);
            for value in row {
                match value {
                    KeyRef::Null => hasher.update([0]),
                    KeyRef::Int(i) => {
                        hasher.update([1]);
                        hasher.update(i.to_le_bytes());
                    }
                    KeyRef::Real(bits) => {
                        hasher.update([2]);
                        hasher.update(bits.to_le_bytes());
                    }
                    KeyRef::Text(t) => {
                        hasher.update([3]);
                        hasher.update((t.len() as u64).to_le_bytes());
                        hasher.update(t.as_bytes());
                    }
                    KeyRef::Blob(b) => {
                        hasher.update([4]);
                        hasher.update((b.len() as u64).to_le_bytes());
                        hasher.update(b);
                    }
                }
            }
        }
        let digest = hasher.finalize();
        hex::encode(digest.get(..8).unwrap_or_default())
    }
}

/// Why a query produced no result set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "kind", content = "message", rename_all = "snake_case")]
pub enum ExecError {
    /// No database with this id in the catalogue (or the id is not a plain name).
    #[error("unknown database `{0}`")]
    UnknownDatabase(String),
    /// The database file exists but could not be opened.
    #[error("cannot open database: {0}")]
    Open(String),
    /// The query ran longer than the time limit and was interrupted.
    #[error("query exceeded the time limit of {0} ms")]
    Timeout(u64),
    /// The query returned more rows than the row cap.
    #[error("query returned more than {0} rows")]
    RowLimit(usize),
    /// The result exceeded the result-size cap.
    #[error("query result exceeded {0} bytes")]
    ValueLimit(usize),
    /// The query needed more memory than an evaluator allows: a string or blob over the length
    /// limit, or the process's SQLite heap limit (what it was is named).
    #[error("query hit a memory limit: {0}")]
    MemoryLimit(String),
    /// The statement tried something a read-only evaluator forbids (write, ATTACH, PRAGMA, …).
    #[error("statement not authorized: {0}")]
    Denied(String),
    /// The text holds more than one statement.
    #[error("more than one statement")]
    MultipleStatements,
    /// SQLite rejected or failed the query (syntax error, no such column, …).
    #[error("{0}")]
    Sql(String),
    /// The executor is shut down or its pool is gone.
    #[error("executor unavailable: {0}")]
    Unavailable(String),
}

impl ExecError {
    /// Short machine-readable kind, used in row details.
    pub fn kind(&self) -> &'static str {
        match self {
            ExecError::UnknownDatabase(_) => "unknown_database",
            ExecError::Open(_) => "open",
            ExecError::Timeout(_) => "timeout",
            ExecError::RowLimit(_) => "row_limit",
            ExecError::ValueLimit(_) => "value_limit",
            ExecError::MemoryLimit(_) => "memory_limit",
            ExecError::Denied(_) => "denied",
            ExecError::MultipleStatements => "multiple_statements",
            ExecError::Sql(_) => "sql_error",
            ExecError::Unavailable(_) => "unavailable",
        }
    }
}

/// Outcome of executing one query.
pub type ExecResult = Result<Arc<ResultSet>, ExecError>;

/// Runs SQL against a named database. Implementations must be safe to call from many threads;
/// calls block the calling thread (async callers run them on a blocking pool).
pub trait Executor: Send + Sync {
    /// Execute one read-only query on database `db_id`.
    fn execute(&self, db_id: &str, sql: &str) -> ExecResult;

    /// Whether `db_id` names a database this executor can reach.
    fn has_database(&self, db_id: &str) -> bool;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs(rows: Vec<Vec<SqlValue>>) -> ResultSet {
        ResultSet {
            columns: vec!["a".into(), "b".into()],
            rows,
        }
    }

    #[test]
    fn set_digest_follows_bird_equality() {
        use SqlValue::{Integer, Null, Real, Text};
        let a = rs(vec![
            vec![Integer(1), Text("x".into())],
            vec![Integer(2), Null],
        ]);
        // Other order, a duplicate, and 2.0 for 2: the same set of rows.
        let b = rs(vec![
            vec![Real(2.0), Null],
            vec![Integer(1), Text("x".into())],
            vec![Integer(1), Text("x".into())],
        ]);
        assert_eq!(a.set_digest(), b.set_digest());
        assert_eq!(a.set_digest().len(), 16);
        // Column order matters; text never equals a number; a missing row matters.
        let swapped = rs(vec![
            vec![Text("x".into()), Integer(1)],
            vec![Null, Integer(2)],
        ]);
        assert_ne!(a.set_digest(), swapped.set_digest());
        let text = rs(vec![
            vec![Integer(1), Text("x".into())],
            vec![Text("2".into()), Null],
        ]);
        assert_ne!(a.set_digest(), text.set_digest());
        let fewer = rs(vec![vec![Integer(1), Text("x".into())]]);
        assert_ne!(a.set_digest(), fewer.set_digest());
        // Value boundaries are unambiguous: ("ab", "c") is not ("a", "bc").
        let ab = rs(vec![vec![Text("ab".into()), Text("c".into())]]);
        let bc = rs(vec![vec![Text("a".into()), Text("bc".into())]]);
        assert_ne!(ab.set_digest(), bc.set_digest());
        assert_eq!(rs(vec![]).set_digest(), ResultSet::default().set_digest());
    }
}
