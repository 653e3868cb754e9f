//! SQLite's process-wide options ([`configure`]) and its heap, limited for the whole process
//! without SQLite's memory statistics.
//!
//! `sqlite3_hard_heap_limit64` is enforced only with `SQLITE_CONFIG_MEMSTATUS` on, which takes
//! one process-wide mutex around every allocation and free: on a backfill with the probe and
//! the gold metrics over 2 workers that cost +26 % user CPU, 16× the system time (the mutex's
//! futex) and +48 % wall time (CHANGELOG.md). Here SQLite's own allocator is wrapped
//! instead (`SQLITE_CONFIG_MALLOC`): each allocation, reallocation and free adds to or takes
//! from one atomic counter of the bytes held, and an allocation that would pass the limit
//! fails — SQLite reports `SQLITE_NOMEM` for the query that asked, which the executor turns
//! into [`crate::exec::ExecError::MemoryLimit`]. The bytes counted are the allocator's own
//! sizes (`xSize`), so the count is exact.

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, Ordering};

use rusqlite::ffi;

/// The longest string or blob any query on event SQL may make or read (`SQLITE_LIMIT_LENGTH`):
/// a cell a person would read. `zeroblob(1000000000)` or a `printf` padded to a gigabyte fails
/// with [`crate::exec::ExecError::MemoryLimit`] instead of allocating it.
pub const MAX_VALUE_BYTES: i32 = 1_000_000;

/// The longest statement SQLite accepts (`SQLITE_LIMIT_SQL_LENGTH`).
pub const MAX_SQL_BYTES: i32 = 1_000_000;

/// The most heap SQLite may hold for the whole process — page caches, sorters, in-memory suite
/// databases, every value of every running query. An allocation past it fails the query that
/// asked for it ([`crate::exec::ExecError::MemoryLimit`]); it is a backstop behind the length
/// limits, which stop each hostile query long before it.
pub const SQLITE_HEAP_LIMIT_BYTES: i64 = 192 * 1024 * 1024;

/// SQLite's process-wide options, set once before the first connection of the process; every
/// place that opens one calls this first.
///
/// The heap limit ([`SQLITE_HEAP_LIMIT_BYTES`]) is kept by this module's allocator, with SQLite's
/// memory statistics off (with them on, every allocation takes one process-wide mutex: +26 %
/// CPU on a backfill with the probe and gold metrics). When SQLite was initialised already
/// (something opened a connection first), `sqlite3_hard_heap_limit64` keeps it instead, with
/// the statistics as they are (on by default).
pub fn configure() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if install(SQLITE_HEAP_LIMIT_BYTES) {
            return;
        }
        // SAFETY: `sqlite3_hard_heap_limit64` takes a plain integer and may be called at any
        // time from any thread; it only sets the limit.
        let before = unsafe { rusqlite::ffi::sqlite3_hard_heap_limit64(SQLITE_HEAP_LIMIT_BYTES) };
        tracing::debug!(
            before,
            limit = SQLITE_HEAP_LIMIT_BYTES,
            "SQLite was initialised already; its own heap limit set"
        );
    });
}

/// The allocator SQLite had before ours (its default, over the system's `malloc`).
struct System(ffi::sqlite3_mem_methods);

// SAFETY: the methods are plain function pointers, and `pAppData` is the default allocator's
// (null for SQLite's built-in one) — only ever handed back to those functions.
unsafe impl Sync for System {}
// SAFETY: as above.
unsafe impl Send for System {}

static SYSTEM: OnceLock<System> = OnceLock::new();
/// Bytes SQLite holds now.
static HELD: AtomicI64 = AtomicI64::new(0);
/// The most it may hold.
static LIMIT: AtomicI64 = AtomicI64::new(i64::MAX);

/// Bytes SQLite holds now (for tests and the bench's notes).
pub fn held() -> i64 {
    HELD.load(Ordering::Relaxed)
}

fn system() -> Option<&'static ffi::sqlite3_mem_methods> {
    SYSTEM.get().map(|s| &s.0)
}

/// The allocator's size of `p` (0 for null or without a size method).
///
/// # Safety
/// `p` is null or an allocation of the system allocator.
unsafe fn size_of(system: &ffi::sqlite3_mem_methods, p: *mut c_void) -> i64 {
    match (p.is_null(), system.xSize) {
        // SAFETY: `p` is a live allocation of this allocator (the caller's promise).
        (false, Some(size)) => i64::from(unsafe { size(p) }),
        _ => 0,
    }
}

/// Reserve `bytes` against the limit; false (nothing reserved) when it would pass it.
fn reserve(bytes: i64) -> bool {
    if bytes <= 0 {
        return true;
    }
    let before = HELD.fetch_add(bytes, Ordering::Relaxed);
    if before.saturating_add(bytes) > LIMIT.load(Ordering::Relaxed) {
        HELD.fetch_sub(bytes, Ordering::Relaxed);
        return false;
    }
    true
}

unsafe extern "C" fn limited_malloc(n: c_int) -> *mut c_void {
    let Some(system) = system() else {
        return std::ptr::null_mut();
    };
    let Some(malloc) = system.xMalloc else {
        return std::ptr::null_mut();
    };
    let wanted = i64::from(n);
    if !reserve(wanted) {
        return std::ptr::null_mut();
    }
    // SAFETY: SQLite's own call, passed on unchanged to the allocator it had.
    let p = unsafe { malloc(n) };
    if p.is_null() {
        HELD.fetch_sub(wanted, Ordering::Relaxed);
        return p;
    }
    // SAFETY: `p` was just allocated by this allocator.
    let real = unsafe { size_of(system, p) };
    HELD.fetch_add(real - wanted, Ordering::Relaxed);
    p
}

unsafe extern "C" fn limited_free(p: *mut c_void) {
    let Some(system) = system() else {
        return;
    };
    // SAFETY: SQLite frees only what this allocator gave it.
    let held = unsafe { size_of(system, p) };
    if let Some(free) = system.xFree {
        // SAFETY: as above.
        unsafe { free(p) };
        HELD.fetch_sub(held, Ordering::Relaxed);
    }
}

unsafe extern "C" fn limited_realloc(p: *mut c_void, n: c_int) -> *mut c_void {
    let Some(system) = system() else {
        return std::ptr::null_mut();
    };
    let Some(realloc) = system.xRealloc else {
        return std::ptr::null_mut();
    };
    // SAFETY: SQLite reallocates only what this allocator gave it.
    let old = unsafe { size_of(system, p) };
    let growth = i64::from(n) - old;
    if !reserve(growth) {
        // SQLite keeps the old allocation and reports out of memory.
        return std::ptr::null_mut();
    }
    // SAFETY: SQLite's own call, passed on unchanged.
    let q = unsafe { realloc(p, n) };
    if q.is_null() {
        HELD.fetch_sub(growth.max(0), Ordering::Relaxed);
        return q;
    }
    // SAFETY: `q` was just (re)allocated by this allocator.
    let real = unsafe { size_of(system, q) };
    HELD.fetch_add(real - old - growth.max(0), Ordering::Relaxed);
    q
}

unsafe extern "C" fn limited_size(p: *mut c_void) -> c_int {
    match system().and_then(|s| s.xSize) {
        // SAFETY: passed on unchanged.
        Some(size) => unsafe { size(p) },
        None => 0,
    }
}

unsafe extern "C" fn limited_roundup(n: c_int) -> c_int {
    match system().and_then(|s| s.xRoundup) {
        // SAFETY: passed on unchanged.
        Some(roundup) => unsafe { roundup(n) },
        None => n,
    }
}

unsafe extern "C" fn limited_init(app: *mut c_void) -> c_int {
    match system().and_then(|s| s.xInit) {
        // SAFETY: passed on unchanged (`app` is the system allocator's own data).
        Some(init) => unsafe { init(app) },
        None => ffi::SQLITE_OK,
    }
}

unsafe extern "C" fn limited_shutdown(app: *mut c_void) {
    if let Some(shutdown) = system().and_then(|s| s.xShutdown) {
        // SAFETY: passed on unchanged.
        unsafe { shutdown(app) }
    }
}

/// Put the limiting allocator in place, holding SQLite to `limit` bytes, and turn SQLite's
/// memory statistics off. False when SQLite was initialised already (something opened a
/// connection first): then nothing changed.
pub fn install(limit: i64) -> bool {
    LIMIT.store(limit, Ordering::Relaxed);
    if SYSTEM.get().is_some() {
        return true;
    }
    let mut current = std::mem::MaybeUninit::<ffi::sqlite3_mem_methods>::zeroed();
    // SAFETY: GETMALLOC writes the current allocator's methods into the struct pointed to;
    // before SQLite is initialised it succeeds, after it returns SQLITE_MISUSE.
    let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_GETMALLOC, current.as_mut_ptr()) };
    if rc != ffi::SQLITE_OK {
        return false;
    }
    // SAFETY: SQLITE_OK: the struct was filled in.
    let current = unsafe { current.assume_init() };
    let app = current.pAppData;
    if SYSTEM.set(System(current)).is_err() {
        return true;
    }
    let limited = ffi::sqlite3_mem_methods {
        xMalloc: Some(limited_malloc),
        xFree: Some(limited_free),
        xRealloc: Some(limited_realloc),
        xSize: Some(limited_size),
        xRoundup: Some(limited_roundup),
        xInit: Some(limited_init),
        xShutdown: Some(limited_shutdown),
        pAppData: app,
    };
    // SAFETY: MALLOC copies the methods (the struct may go); they stay valid for the process
    // (plain functions over `SYSTEM`, set above and never changed).
    let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MALLOC, &limited) };
    if rc != ffi::SQLITE_OK {
        return false;
    }
    // SAFETY: an option that takes one `int`, before initialisation.
    unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, c_int::from(0u8)) };
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_sqlite_holds_are_counted_and_given_back() {
        super::configure();
        if SYSTEM.get().is_none() {
            // SQLite was initialised before `configure` in this test process: nothing to count.
            return;
        }
        let before = held();
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE t(b); INSERT INTO t SELECT randomblob(4000) FROM \
             (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 5000) SELECT x FROM c);",
        )
        .unwrap();
        let during = held();
        assert!(during > before + 10_000_000, "{before} → {during}");
        drop(conn);
        // Other tests may hold SQLite memory meanwhile: what this connection held went back.
        assert!(held() < during - 10_000_000, "{during} → {}", held());
    }
}
