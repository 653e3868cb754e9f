//! SQLite at the edge: the read-only [`SqliteExecutor`] behind the core's
//! [`Executor`](crate::exec::Executor) seam, and schemas read from `tables.json` and SQLite
//! files ([`schema`]).
//!
//! Every connection is opened after [`configure`] has set SQLite's process-wide options once.

pub mod constraints;
pub mod executor;
pub mod schema;
pub mod schema_db;
pub mod suite;

pub use executor::{ExecLimits, SqliteExecutor};

/// SQLite's process-wide options, set once before the first connection of the process; every
/// place that opens one calls this first.
///
/// Memory statistics are turned off (`SQLITE_CONFIG_MEMSTATUS`, on by default): with them on,
/// every allocation and free SQLite makes takes one process-wide mutex, so every thread running a
/// probe, a gold query or a schema plan contends for it (in `perf`, 3.6 % of a 2-worker probe
/// run's CPU was that lock, and it grows with the threads). Nothing here reads those statistics.
/// When SQLite was already initialised (something opened a connection first) the call is
/// refused and SQLite keeps its defaults; only speed differs.
pub fn configure() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `sqlite3_config` is called before any other SQLite call of this crate (the
        // `Once` above runs before every connection it opens) with an option that takes one
        // `int`; when SQLite is already initialised it returns SQLITE_MISUSE and changes nothing.
        let rc = unsafe {
            rusqlite::ffi::sqlite3_config(
                rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS,
                std::ffi::c_int::from(0u8),
            )
        };
        if rc != rusqlite::ffi::SQLITE_OK {
            tracing::debug!(
                rc,
                "SQLite was initialised already; its memory statistics stay on"
            );
        }
    });
}
