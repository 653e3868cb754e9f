//! Read-only SQLite executor on a bounded pool of worker threads.
//!
//! Safety layers, each sufficient on its own for its threat:
//! - files are opened with `SQLITE_OPEN_READ_ONLY` and `PRAGMA query_only = 1`;
//! - an authorizer denies every action except reading (no writes, DDL, ATTACH/DETACH, PRAGMA,
//!   transactions), and `SQLITE_LIMIT_ATTACHED` is 0;
//! - a progress handler interrupts a statement once its deadline has passed (runaway joins,
//!   recursive CTE bombs);
//! - a row cap and a result-size cap stop result sets from exhausting memory.
//!
//! Queries run on `workers` dedicated OS threads fed by a bounded queue, never on the async
//! runtime; [`SqliteExecutor::execute_async`] awaits the answer without blocking it.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use super::{ExecError, ExecResult, Executor, ResultSet, SqlValue};

/// Limits applied to every query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecLimits {
    /// Wall-clock limit per query.
    pub timeout: Duration,
    /// Largest number of rows a result may have.
    pub max_rows: usize,
    /// Largest approximate result size in bytes.
    pub max_result_bytes: usize,
    /// Worker threads (concurrent queries).
    pub workers: usize,
    /// Queued queries beyond the running ones before callers block.
    pub queue_capacity: usize,
    /// Cached (db, sql) outcomes kept for the run.
    pub cache_capacity: usize,
}

impl Default for ExecLimits {
    fn default() -> Self {
        ExecLimits {
            timeout: Duration::from_secs(30),
            max_rows: 1_000_000,
            max_result_bytes: 256 * 1024 * 1024,
            workers: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            queue_capacity: 256,
            cache_capacity: 8192,
        }
    }
}

type Reply = Box<dyn FnOnce(ExecResult) + Send>;

struct Job {
    db_id: String,
    sql: String,
    reply: Reply,
}

type CacheKey = (String, String);

/// Bounded FIFO cache of query outcomes for one run.
struct ResultCache {
    capacity: usize,
    map: HashMap<CacheKey, ExecResult>,
    order: VecDeque<CacheKey>,
}

impl ResultCache {
    fn get(&self, key: &CacheKey) -> Option<ExecResult> {
        self.map.get(key).cloned()
    }

    fn put(&mut self, key: CacheKey, value: ExecResult) {
        if self.capacity == 0 || self.map.contains_key(&key) {
            return;
        }
        while self.map.len() >= self.capacity {
            match self.order.pop_front() {
                Some(old) => {
                    self.map.remove(&old);
                }
                None => break,
            }
        }
        self.order.push_back(key.clone());
        self.map.insert(key, value);
    }
}

/// SQLite executor over a catalogue directory laid out as `<db_id>/<db_id>.sqlite`.
pub struct SqliteExecutor {
    root: PathBuf,
    limits: ExecLimits,
    sender: Mutex<Option<SyncSender<Job>>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    cache: Arc<Mutex<ResultCache>>,
}

impl SqliteExecutor {
    /// Start `limits.workers` worker threads serving databases under `root`.
    pub fn new(root: impl Into<PathBuf>, limits: ExecLimits) -> SqliteExecutor {
        let root = root.into();
        let workers_n = limits.workers.max(1);
        let (tx, rx) = sync_channel::<Job>(limits.queue_capacity.max(1));
        let rx = Arc::new(Mutex::new(rx));
        let mut handles = Vec::with_capacity(workers_n);
        for i in 0..workers_n {
            let rx = Arc::clone(&rx);
            let root = root.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("sqlgrade-exec-{i}"))
                .spawn(move || worker_loop(&root, limits, &rx));
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => tracing::error!(error = %e, "cannot spawn executor worker"),
            }
        }
        SqliteExecutor {
            root,
            limits,
            sender: Mutex::new(Some(tx)),
            workers: Mutex::new(handles),
            cache: Arc::new(Mutex::new(ResultCache {
                capacity: limits.cache_capacity,
                map: HashMap::new(),
                order: VecDeque::new(),
            })),
        }
    }

    /// The catalogue directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The limits in force.
    pub fn limits(&self) -> ExecLimits {
        self.limits
    }

    /// Path of a database file, if `db_id` is a plain name whose file exists.
    pub fn database_path(&self, db_id: &str) -> Option<PathBuf> {
        database_path(&self.root, db_id)
    }

    fn cached(&self, db_id: &str, sql: &str) -> Option<ExecResult> {
        let key = (db_id.to_string(), sql.to_string());
        self.cache.lock().ok()?.get(&key)
    }

    fn make_job(&self, db_id: &str, sql: &str, reply: Reply) -> Job {
        let cache = Arc::clone(&self.cache);
        let key = (db_id.to_string(), sql.to_string());
        let reply: Reply = Box::new(move |res: ExecResult| {
            if !matches!(res, Err(ExecError::Unavailable(_)))
                && let Ok(mut c) = cache.lock()
            {
                c.put(key, res.clone());
            }
            reply(res);
        });
        Job {
            db_id: db_id.to_string(),
            sql: sql.to_string(),
            reply,
        }
    }

    fn sender(&self) -> Result<SyncSender<Job>, ExecError> {
        self.sender
            .lock()
            .map_err(|_| ExecError::Unavailable("executor lock poisoned".into()))?
            .clone()
            .ok_or_else(|| ExecError::Unavailable("executor shut down".into()))
    }

    /// Execute without blocking the async runtime: the query runs on the worker pool and this
    /// future completes when it is done.
    pub async fn execute_async(&self, db_id: &str, sql: &str) -> ExecResult {
        if let Some(hit) = self.cached(db_id, sql) {
            return hit;
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let reply: Reply = Box::new(move |r| {
            let _ = tx.send(r);
        });
        let sender = self.sender()?;
        let mut job = self.make_job(db_id, sql, reply);
        // The queue is bounded: when it is full, yield to the runtime and retry.
        loop {
            match sender.try_send(job) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) => {
                    job = back;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Err(TrySendError::Disconnected(_)) => {
                    return Err(ExecError::Unavailable("executor workers stopped".into()));
                }
            }
        }
        rx.await
            .unwrap_or_else(|_| Err(ExecError::Unavailable("worker dropped the query".into())))
    }

    /// Stop the workers after the queued queries finish.
    pub fn shutdown(&self) {
        if let Ok(mut s) = self.sender.lock() {
            s.take();
        }
        if let Ok(mut w) = self.workers.lock() {
            for h in w.drain(..) {
                let _ = h.join();
            }
        }
    }
}

impl Drop for SqliteExecutor {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Executor for SqliteExecutor {
    fn execute(&self, db_id: &str, sql: &str) -> ExecResult {
        if let Some(hit) = self.cached(db_id, sql) {
            return hit;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let reply: Reply = Box::new(move |r| {
            let _ = tx.send(r);
        });
        let job = self.make_job(db_id, sql, reply);
        self.sender()?
            .send(job)
            .map_err(|_| ExecError::Unavailable("executor workers stopped".into()))?;
        rx.recv()
            .unwrap_or_else(|_| Err(ExecError::Unavailable("worker dropped the query".into())))
    }

    fn has_database(&self, db_id: &str) -> bool {
        database_path(&self.root, db_id).is_some()
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
struct Guarded {
    conn: Connection,
    deadline: Arc<AtomicU64>,
    epoch: Instant,
}

fn worker_loop(root: &Path, limits: ExecLimits, rx: &Mutex<Receiver<Job>>) {
    let mut conns: HashMap<String, Guarded> = HashMap::new();
    loop {
        let job = {
            let Ok(guard) = rx.lock() else { return };
            match guard.recv() {
                Ok(job) => job,
                Err(_) => return,
            }
        };
        let result = run_job(root, limits, &mut conns, &job.db_id, &job.sql);
        (job.reply)(result);
    }
}

fn run_job(
    root: &Path,
    limits: ExecLimits,
    conns: &mut HashMap<String, Guarded>,
    db_id: &str,
    sql: &str,
) -> ExecResult {
    if !conns.contains_key(db_id) {
        let path = database_path(root, db_id)
            .ok_or_else(|| ExecError::UnknownDatabase(db_id.to_string()))?;
        let g = open_guarded(&path)?;
        conns.insert(db_id.to_string(), g);
    }
    let g = conns
        .get(db_id)
        .ok_or_else(|| ExecError::UnknownDatabase(db_id.to_string()))?;
    let start = g.epoch.elapsed() + limits.timeout;
    g.deadline.store(
        u64::try_from(start.as_nanos()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
    let out = query(&g.conn, sql, limits);
    g.deadline.store(u64::MAX, Ordering::Relaxed);
    out.map(Arc::new)
}

/// Open a database read-only with every guard installed.
fn open_guarded(path: &Path) -> Result<Guarded, ExecError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn =
        Connection::open_with_flags(path, flags).map_err(|e| ExecError::Open(e.to_string()))?;
    conn.pragma_update(None, "query_only", 1)
        .map_err(|e| ExecError::Open(e.to_string()))?;
    conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)
        .map_err(|e| ExecError::Open(e.to_string()))?;
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
fn authorize(ctx: AuthContext<'_>) -> Authorization {
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
