//! Read-only SQLite executor with bounded concurrency.
//!
//! Safety layers, each sufficient on its own for its threat:
//! - files are opened with `SQLITE_OPEN_READ_ONLY` and `PRAGMA query_only = 1`;
//! - an authorizer denies every action except reading (no writes, DDL, ATTACH/DETACH, PRAGMA,
//!   transactions), and `SQLITE_LIMIT_ATTACHED` is 0;
//! - a progress handler interrupts a statement once its deadline has passed (runaway joins,
//!   recursive CTE bombs);
//! - memory: no string, blob or statement over [`super::MAX_VALUE_BYTES`] /
//!   [`super::MAX_SQL_BYTES`] (`SQLITE_LIMIT_LENGTH`, `SQLITE_LIMIT_SQL_LENGTH`), SQLite's heap
//!   capped for the whole process ([`super::configure`]), and a row cap and a result-size cap on
//!   what is materialised; hitting any of them is [`ExecError::MemoryLimit`],
//!   [`ExecError::RowLimit`] or [`ExecError::ValueLimit`], an outcome like any other;
//! - the result cache is weighed by bytes and keeps no large result.
//!
//! Concurrency: at most `workers` queries run at once (a counting semaphore); connections are
//! pooled per database and reused. The blocking [`Executor::execute`] runs the query on the
//! calling thread (a scorer or blocking-pool thread, never an async worker), which avoids a
//! thread hand-off per query; [`SqliteExecutor::execute_async`] moves the query to tokio's
//! blocking pool so the async runtime is never blocked.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use crate::exec::{ExecError, ExecResult, Executor, ResultSet, SqlValue};

/// Limits applied to every query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecLimits {
    /// Wall-clock limit per query.
    pub timeout: Duration,
    /// Largest number of rows a result may have.
    pub max_rows: usize,
    /// Largest approximate result size in bytes.
    pub max_result_bytes: usize,
    /// Most queries running at the same time.
    pub workers: usize,
    /// Bytes of cached (db, sql) outcomes kept for the run (0 = no cache); one outcome over a
    /// sixty-fourth of it is not kept.
    pub cache_bytes: usize,
}

impl Default for ExecLimits {
    fn default() -> Self {
        ExecLimits {
            timeout: Duration::from_secs(30),
            max_rows: 1_000_000,
            max_result_bytes: 32 * 1024 * 1024,
            workers: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            cache_bytes: 64 * 1024 * 1024,
        }
    }
}

type CacheKey = (String, String);

/// Locks the result cache is split over: every probe looks its query up, from every thread
/// probing, so one lock would be taken by all of them for each probe.
const CACHE_SHARDS: usize = 16;

/// Bounded cache of query outcomes for one run, weighed by bytes, split into shards (each
/// behind its own lock, FIFO within its share of the budget) chosen by a keyed hash of
/// (database, query). An outcome heavier than a quarter of a shard's share is not kept: a
/// large result is computed again rather than held (the budget holds many small ones).
struct ResultCache {
    shards: Box<[Mutex<CacheShard>]>,
    hasher: std::hash::RandomState,
}

struct CacheShard {
    budget: usize,
    weight: usize,
    map: HashMap<CacheKey, (ExecResult, usize)>,
    order: VecDeque<CacheKey>,
}

/// Approximate bytes one cached outcome holds: its key, and the result or the error's text.
fn outcome_weight(db_id: &str, sql: &str, value: &ExecResult) -> usize {
    let held = match value {
        Ok(result) => result.size_bytes(),
        Err(e) => 64 + e.to_string().len(),
    };
    (db_id.len() + sql.len() + 96).saturating_add(held)
}

impl ResultCache {
    /// A cache of about `budget` bytes of outcomes; 0 = none.
    fn new(budget: usize) -> ResultCache {
        let shards = if budget == 0 { 1 } else { CACHE_SHARDS };
        let each = budget / shards;
        ResultCache {
            shards: (0..shards)
                .map(|_| {
                    Mutex::new(CacheShard {
                        budget: each,
                        weight: 0,
                        map: HashMap::new(),
                        order: VecDeque::new(),
                    })
                })
                .collect(),
            hasher: std::hash::RandomState::new(),
        }
    }

    fn shard(&self, db_id: &str, sql: &str) -> &Mutex<CacheShard> {
        use std::hash::BuildHasher;
        let hash = self.hasher.hash_one((db_id, sql));
        // The remainder is below `shards.len()`, which fits in a usize.
        &self.shards[(hash % self.shards.len() as u64) as usize]
    }

    fn get(&self, db_id: &str, sql: &str) -> Option<ExecResult> {
        let key = (db_id.to_string(), sql.to_string());
        let shard = self.shard(db_id, sql).lock().ok()?;
        shard.map.get(&key).map(|(value, _)| value.clone())
    }

    fn put(&self, db_id: &str, sql: &str, value: ExecResult) {
        let Ok(mut shard) = self.shard(db_id, sql).lock() else {
            return;
        };
        let weight = outcome_weight(db_id, sql, &value);
        if weight > shard.budget / 4 {
            return;
        }
        let key = (db_id.to_string(), sql.to_string());
        if shard.map.contains_key(&key) {
            return;
        }
        while shard.weight + weight > shard.budget {
            let Some(old) = shard.order.pop_front() else {
                break;
            };
            if let Some((_, freed)) = shard.map.remove(&old) {
                shard.weight -= freed;
            }
        }
        shard.weight += weight;
        shard.order.push_back(key.clone());
        shard.map.insert(key, (value, weight));
    }

    /// Bytes held now, over every shard.
    #[cfg(test)]
    fn weight(&self) -> usize {
        self.shards
            .iter()
            .filter_map(|s| s.lock().ok().map(|s| s.weight))
            .sum()
    }
}

/// Counting semaphore bounding concurrent queries.
struct Permits {
    free: Mutex<usize>,
    cv: Condvar,
}

impl Permits {
    fn acquire(&self) -> Result<PermitGuard<'_>, ExecError> {
        let mut free = self
            .free
            .lock()
            .map_err(|_| ExecError::Unavailable("executor lock poisoned".into()))?;
        while *free == 0 {
            free = self
                .cv
                .wait(free)
                .map_err(|_| ExecError::Unavailable("executor lock poisoned".into()))?;
        }
        *free -= 1;
        Ok(PermitGuard(self))
    }
}

struct PermitGuard<'a>(&'a Permits);

impl Drop for PermitGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut free) = self.0.free.lock() {
            *free += 1;
        }
        self.0.cv.notify_one();
    }
}

struct Inner {
    root: PathBuf,
    limits: ExecLimits,
    permits: Permits,
    idle: Mutex<HashMap<String, Vec<Guarded>>>,
    cache: ResultCache,
    closed: AtomicBool,
}

impl Inner {
    fn cached(&self, db_id: &str, sql: &str) -> Option<ExecResult> {
        self.cache.get(db_id, sql)
    }

    fn run(&self, db_id: &str, sql: &str) -> ExecResult {
        if self.closed.load(Ordering::Relaxed) {
            return Err(ExecError::Unavailable("executor shut down".into()));
        }
        if let Some(hit) = self.cached(db_id, sql) {
            return hit;
        }
        let path = database_path(&self.root, db_id)
            .ok_or_else(|| ExecError::UnknownDatabase(db_id.to_string()))?;
        let result = {
            let _permit = self.permits.acquire()?;
            let pooled = self
                .idle
                .lock()
                .ok()
                .and_then(|mut m| m.get_mut(db_id).and_then(Vec::pop));
            let g = match pooled {
                Some(g) => g,
                None => open_guarded(&path)?,
            };
            let out = g.run(sql, self.limits);
            if let Ok(mut m) = self.idle.lock() {
                m.entry(db_id.to_string()).or_default().push(g);
            }
            out.map(Arc::new)
        };
        self.cache.put(db_id, sql, result.clone());
        result
    }
}

/// SQLite executor over a catalogue directory laid out as `<db_id>/<db_id>.sqlite`.
/// Cheap to clone: clones share the connection pool, limits and result cache.
#[derive(Clone)]
pub struct SqliteExecutor {
    inner: Arc<Inner>,
}

impl SqliteExecutor {
    /// An executor serving databases under `root`, running at most `limits.workers` queries
    /// at once.
    pub fn new(root: impl Into<PathBuf>, limits: ExecLimits) -> SqliteExecutor {
        SqliteExecutor {
            inner: Arc::new(Inner {
                root: root.into(),
                limits,
                permits: Permits {
                    free: Mutex::new(limits.workers.max(1)),
                    cv: Condvar::new(),
                },
                idle: Mutex::new(HashMap::new()),
                cache: ResultCache::new(limits.cache_bytes),
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// The catalogue directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The limits in force.
    pub fn limits(&self) -> ExecLimits {
        self.inner.limits
    }

    /// Path of a database file, if `db_id` is a plain name whose file exists.
    pub fn database_path(&self, db_id: &str) -> Option<PathBuf> {
        database_path(&self.inner.root, db_id)
    }

    /// Execute without blocking the async runtime: the query runs on tokio's blocking pool
    /// (still bounded by the executor's permits) and this future completes when it is done.
    pub async fn execute_async(&self, db_id: &str, sql: &str) -> ExecResult {
        if let Some(hit) = self.inner.cached(db_id, sql) {
            return hit;
        }
        let inner = Arc::clone(&self.inner);
        let (db, sql) = (db_id.to_string(), sql.to_string());
        tokio::task::spawn_blocking(move || inner.run(&db, &sql))
            .await
            .unwrap_or_else(|e| Err(ExecError::Unavailable(format!("query task failed: {e}"))))
    }

    /// What an agent's trace would carry of running `sql` on `db_id`: the result's sample
    /// (columns, first rows, row count), or the database's error; `None` when the run says
    /// nothing about the query — a limit cut it short (time, rows, size) or the database is not
    /// there.
    pub fn result_sample(&self, db_id: &str, sql: &str) -> Option<crate::event::QueryResult> {
        match self.execute(db_id, sql) {
            Ok(rows) => Some(rows.to_query_result()),
            Err(
                ExecError::Timeout(_)
                | ExecError::RowLimit(_)
                | ExecError::ValueLimit(_)
                | ExecError::Unavailable(_)
                | ExecError::Open(_),
            ) => None,
            Err(e) => Some(crate::event::QueryResult {
                error: Some(e.to_string()),
                ..Default::default()
            }),
        }
    }

    /// Refuse further queries and close idle connections.
    pub fn shutdown(&self) {
        self.inner.closed.store(true, Ordering::Relaxed);
        if let Ok(mut m) = self.inner.idle.lock() {
            m.clear();
        }
    }
}

impl Executor for SqliteExecutor {
    fn execute(&self, db_id: &str, sql: &str) -> ExecResult {
        self.inner.run(db_id, sql)
    }

    fn has_database(&self, db_id: &str) -> bool {
        database_path(&self.inner.root, db_id).is_some()
    }
}

fn database_path(root: &Path, db_id: &str) -> Option<PathBuf> {
    let plain = !db_id.is_empty()
        && db_id != "."
        && db_id != ".."
        && db_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
    if !plain {
        return None;
    }
    let path = root.join(db_id).join(format!("{db_id}.sqlite"));
    path.is_file().then_some(path)
}

/// A connection plus the deadline its progress handler watches.
pub(crate) struct Guarded {
    conn: Connection,
    deadline: Arc<AtomicU64>,
    epoch: Instant,
}

impl Guarded {
    /// Run one query under `limits` (time, rows, bytes).
    pub(crate) fn run(&self, sql: &str, limits: ExecLimits) -> Result<ResultSet, ExecError> {
        let deadline = self.epoch.elapsed() + limits.timeout;
        self.deadline.store(
            u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        let out = query(&self.conn, sql, limits);
        self.deadline.store(u64::MAX, Ordering::Relaxed);
        out
    }
}

/// Open a database read-only with every guard installed.
pub(crate) fn open_guarded(path: &Path) -> Result<Guarded, ExecError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    super::configure();
    let conn =
        Connection::open_with_flags(path, flags).map_err(|e| ExecError::Open(e.to_string()))?;
    guard(conn)
}

/// Install every guard on an open connection (e.g. an in-memory database just filled):
/// `query_only`, no ATTACH, the read-only authorizer and the deadline's progress handler.
pub(crate) fn guard(mut conn: Connection) -> Result<Guarded, ExecError> {
    conn.pragma_update(None, "query_only", 1)
        .map_err(|e| ExecError::Open(e.to_string()))?;
    for (limit, value) in [
        (Limit::SQLITE_LIMIT_ATTACHED, 0),
        (Limit::SQLITE_LIMIT_LENGTH, super::MAX_VALUE_BYTES),
        (Limit::SQLITE_LIMIT_SQL_LENGTH, super::MAX_SQL_BYTES),
    ] {
        conn.set_limit(limit, value)
            .map_err(|e| ExecError::Open(e.to_string()))?;
    }
    conn.authorizer(Some(authorize))
        .map_err(|e| ExecError::Open(e.to_string()))?;
    let deadline = Arc::new(AtomicU64::new(u64::MAX));
    let epoch = Instant::now();
    let watched = Arc::clone(&deadline);
    conn.progress_handler(
        1000,
        Some(move || {
            let now = u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
            now > watched.load(Ordering::Relaxed)
        }),
    )
    .map_err(|e| ExecError::Open(e.to_string()))?;
    Ok(Guarded {
        conn,
        deadline,
        epoch,
    })
}

/// Allow reading only.
pub(crate) fn authorize(ctx: AuthContext<'_>) -> Authorization {
    match ctx.action {
        AuthAction::Select
        | AuthAction::Read { .. }
        | AuthAction::Function { .. }
        | AuthAction::Recursive => Authorization::Allow,
        _ => Authorization::Deny,
    }
}

fn map_err(e: rusqlite::Error, limits: ExecLimits) -> ExecError {
    match &e {
        rusqlite::Error::SqliteFailure(f, msg) => match f.code {
            rusqlite::ErrorCode::OperationInterrupted => {
                ExecError::Timeout(u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX))
            }
            rusqlite::ErrorCode::TooBig => ExecError::MemoryLimit(format!(
                "a string, blob or statement over {} bytes",
                super::MAX_VALUE_BYTES
            )),
            rusqlite::ErrorCode::OutOfMemory => ExecError::MemoryLimit(format!(
                "SQLite's heap limit of {} MiB for the process",
                super::SQLITE_HEAP_LIMIT_BYTES >> 20
            )),
            rusqlite::ErrorCode::AuthorizationForStatementDenied => {
                ExecError::Denied(msg.clone().unwrap_or_else(|| "not authorized".into()))
            }
            _ => ExecError::Sql(msg.clone().unwrap_or_else(|| e.to_string())),
        },
        rusqlite::Error::MultipleStatement => ExecError::MultipleStatements,
        rusqlite::Error::SqlInputError { msg, .. } => ExecError::Sql(msg.clone()),
        _ => ExecError::Sql(e.to_string()),
    }
}

fn query(conn: &Connection, sql: &str, limits: ExecLimits) -> Result<ResultSet, ExecError> {
    let mut stmt = conn.prepare(sql).map_err(|e| map_err(e, limits))?;
    if !stmt.readonly() {
        return Err(ExecError::Denied("statement is not read-only".into()));
    }
    let columns: Vec<String> = stmt.column_names().map(|c| c.to_string()).collect();
    let width = columns.len();
    let mut rows_out = Vec::new();
    let mut bytes = 0usize;
    let mut rows = stmt.query([]).map_err(|e| map_err(e, limits))?;
    loop {
        let row = match rows.next() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => return Err(map_err(e, limits)),
        };
        if rows_out.len() >= limits.max_rows {
            return Err(ExecError::RowLimit(limits.max_rows));
        }
        let mut values = Vec::with_capacity(width);
        for i in 0..width {
            let v = match row.get_ref(i).map_err(|e| map_err(e, limits))? {
                ValueRef::Null => SqlValue::Null,
                ValueRef::Integer(n) => SqlValue::Integer(n),
                ValueRef::Real(f) => SqlValue::Real(f),
                ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
            };
            bytes = bytes.saturating_add(v.size_bytes());
            values.push(v);
        }
        if bytes > limits.max_result_bytes {
            return Err(ExecError::ValueLimit(limits.max_result_bytes));
        }
        rows_out.push(values);
    }
    Ok(ResultSet {
        columns,
        rows: rows_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(n: i64) -> ExecResult {
        Ok(Arc::new(ResultSet {
            columns: vec!["n".into()],
            rows: vec![vec![SqlValue::Integer(n)]],
        }))
    }

    fn number(result: &ExecResult) -> Option<i64> {
        match result.as_ref().ok()?.rows.first()?.first()? {
            SqlValue::Integer(n) => Some(*n),
            _ => None,
        }
    }

    fn wide(bytes: usize) -> ExecResult {
        Ok(Arc::new(ResultSet {
            columns: vec!["t".into()],
            rows: vec![vec![SqlValue::Text("x".repeat(bytes))]],
        }))
    }

    #[test]
    fn the_result_cache_keeps_the_newest_outcomes_within_its_byte_budget() {
        let budget = 16 * 4096;
        let cache = ResultCache::new(budget);
        assert_eq!(cache.shards.len(), CACHE_SHARDS);
        for i in 0..1_000 {
            cache.put("db", &format!("SELECT {i}"), answer(i));
            assert!(cache.weight() <= budget, "{} > {budget}", cache.weight());
        }
        // The same query on another database is another entry.
        cache.put("other", "SELECT 999", answer(-1));
        assert_eq!(number(&cache.get("other", "SELECT 999").unwrap()), Some(-1));
        // Each shard kept the newest keys put into it, as many as its share holds.
        for shard in cache.shards.iter() {
            let mine = |db: &str, sql: &str| std::ptr::eq(cache.shard(db, sql), shard);
            let keys: Vec<i64> = (0..1_000)
                .filter(|i| mine("db", &format!("SELECT {i}")))
                .collect();
            let hits: Vec<bool> = keys
                .iter()
                .map(|i| cache.get("db", &format!("SELECT {i}")).is_some())
                .collect();
            // Hits are a suffix: once one key is kept, every later key of the shard is too.
            let first = hits.iter().position(|h| *h).unwrap_or(hits.len());
            assert!(hits[first..].iter().all(|h| *h), "{hits:?}");
            assert!(hits.iter().any(|h| *h) || keys.is_empty());
        }
        // A key is stored once: a second put does not replace the first outcome.
        cache.put("other", "SELECT 999", answer(7));
        assert_eq!(number(&cache.get("other", "SELECT 999").unwrap()), Some(-1));
    }

    #[test]
    fn large_outcomes_are_not_cached_and_an_empty_cache_keeps_nothing() {
        let budget = 16 * 4096;
        let cache = ResultCache::new(budget);
        // A quarter of a shard's 4,096 bytes is the most one outcome may weigh.
        cache.put("db", "SELECT small", wide(500));
        cache.put("db", "SELECT big", wide(2_000));
        assert!(cache.get("db", "SELECT small").is_some());
        assert!(cache.get("db", "SELECT big").is_none());
        // Many medium outcomes: the held bytes stay within the budget.
        for i in 0..10_000 {
            cache.put("db", &format!("SELECT {i}"), wide(800));
        }
        assert!(cache.weight() <= budget);
        let none = ResultCache::new(0);
        none.put("db", "SELECT 1", answer(1));
        assert!(none.get("db", "SELECT 1").is_none());
        // Errors are outcomes too (a query that failed fails again without running).
        cache.put(
            "db",
            "SELECT nope",
            Err(ExecError::Sql("no such column: nope".into())),
        );
        assert!(matches!(
            cache.get("db", "SELECT nope"),
            Some(Err(ExecError::Sql(_)))
        ));
    }
}
