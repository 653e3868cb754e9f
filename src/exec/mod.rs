//! SQL executors for gold metrics (SQLite, read-only, time- and row-limited). (Skeleton.)
