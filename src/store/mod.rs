//! The store: where a run's results live and are read back — a JSONL directory or ClickHouse
//! (or, write-only, stdout) — as one component built from `[sink]` ([`Store`]). It hands out the
//! writer the pipeline writes rows, inputs and dead letters through ([`Store::writer`]), the
//! reader of rows, a run's rows, inputs, alerts and labels that `serve`, `report`, `audit`,
//! `calibrate`, `import-labels` and the agreement monitor share ([`Store::reader`],
//! [`ReviewStore`]), and where alerts are recorded. The store's kind is matched here only (and
//! in the config's own checks), so adding a kind touches this folder and `sink::config`.
//!
//! The writing side's seam (`sink::Sink`) and the read model (`stored::StoredRow`) sit lower,
//! because the ClickHouse writer and reader (`crate::clickhouse`) build on them.

mod clickhouse_db;
mod jsonl_dir;
mod open;
mod read;

pub use clickhouse_db::{ClickHouseStore, RECENT_ROWS_TTL};
pub use jsonl_dir::JsonlStore;
pub use open::{AlertRecording, Store};
pub use read::{
    ALERTS_FILE, AlertView, LABELS_FILE, ReviewStore, StoreError, labels_from_jsonl, read_jsonl,
};
