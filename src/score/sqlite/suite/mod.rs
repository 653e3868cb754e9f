//! `ts_ex` at the edge ([`SuiteChecker`], the core's [`SuiteCheck`]): small databases
//! generated from the schema, distilled against near-miss mutants of the gold query, and both
//! queries executed on them in memory — plus on the real database when there is one.
//!
//! Two kinds of suite ([`SuiteMode`]). **Constrained** (`ts_ex`): every generated database keeps
//! the database's constraints ([`DbConstraints`]) — mined from the real database when there is
//! one ([`super::constraints::mine`], once per database, cached, within a time budget),
//! else the schema's plus what people assume (keys not NULL, foreign keys pointing at existing
//! rows). Values come from the real column (within its observed domain and range), key ↔
//! label columns take real pairs together, a value that must occur in another column is drawn
//! from that column's generated values, then rows whose references dangle are deleted and a
//! candidate that still breaks a constraint is dropped — so every kept database satisfies all
//! of them, and the boundary cases they allow stay: NULLs where a column may hold them, ties
//! and duplicates in columns that are not unique, empty tables. **Strict** (`ts_ex_strict`):
//! the constraint-free generation of before — primary keys unique, foreign keys pointing at a
//! generated parent row when there is one but not enforced, NULLs only in columns whose real
//! data has them (outside keys when there is no real database).
//!
//! Either way: parents before children; values drawn from the real column (a few distinct
//! values, read-only) and — half the time — from the gold query's literals and their
//! neighbours; duplicates and ties from small pools; empty tables. A candidate is kept when the
//! gold query runs on it and it tells the gold query apart from a mutant not yet told apart;
//! the first few on which the gold query returns rows are kept regardless, so a query with no
//! mutants still gets a suite. Suites depend on the schema, the gold query, the mode and the
//! seed only, and are cached per (database, gold query, mode).
//!
//! Safety: generated databases live in memory and are guarded like the executor's connections
//! (query-only, no ATTACH, a read-only authorizer, the time and row limits) before any event
//! SQL runs on them; the real database is only read through the [`SqliteExecutor`].
//!
//! [`config`] holds the settings; [`generate`] draws the databases (value domains, key links,
//! rows); [`checker`] builds, distils, caches and runs the suites.

mod checker;
mod config;
mod generate;

pub use checker::SuiteChecker;
pub use config::SuiteConfig;
