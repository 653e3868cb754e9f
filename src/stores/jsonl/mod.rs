//! The JSONL store, one directory per run: its writer ([`writer`]: `evaluations.jsonl`,
//! `inputs.jsonl` and `dead_letters.jsonl`, appended in order), the reader of one
//! `evaluations.jsonl` ([`rows`]) and the store's reader of the whole directory ([`reader`]:
//! rows, a run's rows, an event's inputs, alerts and labels).

pub mod config;
pub mod reader;
pub mod rows;
pub mod writer;

pub use reader::JsonlStore;
pub use writer::JsonlSink;
