//! SQLite at the edge: the read-only [`SqliteExecutor`] behind the core's
//! [`Executor`](crate::exec::Executor) seam, and schemas read from `tables.json` and SQLite
//! files ([`schema`]).

pub mod constraints;
pub mod executor;
pub mod schema;
pub mod schema_db;
pub mod suite;

pub use executor::{ExecLimits, SqliteExecutor};
