//! The store: where a run's results live and are read back — a JSONL directory or ClickHouse
//! (or, write-only, stdout) — as one component built from `[sink]` ([`Store`]). It hands out the
//! writer the pipeline writes rows, inputs and dead letters through ([`Store::writer`]), the
//! reader of rows, a run's rows, inputs, alerts and labels that `serve`, `report`, `audit`,
//! `calibrate`, `import-labels` and the agreement monitor share ([`Store::reader`],
//! [`ReviewStore`]), and where alerts are recorded. The store's kind is matched here only (and
//! in the config's own checks), so adding a kind touches this folder and `stores::config`.
//!
//! The writing side's seam (`stores::Sink`) and the read model (`stores::StoredRow`) sit lower,
//! because the ClickHouse writer and reader (`crate::stores::clickhouse`) build on them.

pub mod breakdown;
pub mod clickhouse;
pub mod config;
pub mod jsonl;
pub mod monitor;
mod open;
mod read;
mod row;
pub mod stdout;
mod writer;

pub use clickhouse::review_store::{ClickHouseStore, RECENT_ROWS_TTL};
pub use jsonl::{JsonlSink, JsonlStore};
pub use open::{AlertRecording, Store};
pub use read::{
    ALERTS_FILE, AlertView, LABELS_FILE, ReviewStore, StoreError, labels_from_jsonl, read_jsonl,
};
pub use row::{
    StoredRow, blank_is_none, flexible_bool, flexible_count, json_or_text, parse_time, rfc3339_time,
};
pub use stdout::StdoutSink;
pub use writer::{
    Batch, MIN_CORES_FOR_PARALLEL_ENCODING, MIN_ITEMS_PER_ENCODER, Sink, SinkError,
    encode_json_lines, encode_json_lines_in_chunks, encode_json_lines_owned, parallel_encoding,
};
