//! SQLite at the edge: the read-only [`SqliteExecutor`] behind the core's
//! [`Executor`](crate::exec::Executor) seam, and schemas read from `tables.json` and SQLite
//! files ([`schema`]).
//!
//! Every connection is opened after [`configure`] (in [`heap`]) has set SQLite's process-wide
//! options once.

pub mod constraints;
pub mod executor;
pub mod heap;
pub mod schema;
pub mod schema_db;
pub mod suite;

pub use executor::{ExecLimits, SqliteExecutor};
pub use heap::{MAX_SQL_BYTES, MAX_VALUE_BYTES, SQLITE_HEAP_LIMIT_BYTES, configure};
