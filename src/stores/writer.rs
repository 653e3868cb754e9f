//! Sinks for evaluation rows, event inputs and dead letters: the [`Sink`] trait, and the JSONL
//! and stdout sinks. The ClickHouse sink lives with the other ClickHouse code (`crate::stores::clickhouse::sink`).

use async_trait::async_trait;

use crate::evaluation::{DeadLetter, EvaluationRow};
use crate::review::EventInputs;

/// A batch handed to a sink: rows, the inputs of the events they score, and dead letters,
/// written together.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    /// Evaluation rows.
    pub rows: Vec<EvaluationRow>,
    /// The inputs (question, enriched question, SQL) of the events scored in this batch, for
    /// the review page; empty with `[sink] store_inputs = false`.
    pub inputs: Vec<EventInputs>,
    /// Dead letters.
    pub dead_letters: Vec<DeadLetter>,
}

impl Batch {
    /// Whether the batch holds nothing.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.inputs.is_empty() && self.dead_letters.is_empty()
    }
}

/// Why a sink failed permanently (after its own retries).
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// Local I/O.
    #[error("sink I/O error on {what}: {source}")]
    Io {
        /// What was being written.
        what: String,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Serialization.
    #[error("sink serialization error: {0}")]
    Serialize(#[source] serde_json::Error),
    /// Writing a JSON line ([`crate::json_text`]).
    #[error("sink serialization error: {0}")]
    Encode(#[source] crate::json_text::JsonTextError),
    /// The remote store failed (after its retries): what was being done, and the client's error.
    #[error("sink store error: {what}: {source}")]
    Backend {
        /// What was being done (`evaluations: giving up after 12 attempts`, `judge_cache get`).
        what: String,
        /// The store client's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The remote store failed without an error of its own (no answer in time, an injected
    /// failure): the message says why.
    #[error("sink store error: {0}")]
    Store(String),
}

impl SinkError {
    /// [`SinkError::Backend`]: `what` failed with `source`.
    pub fn backend(
        what: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> SinkError {
        SinkError::Backend {
            what: what.into(),
            source: Box::new(source),
        }
    }
}

/// Durable destination. `write` returns only when the batch is durably stored (retrying transient
/// failures internally); the pipeline acknowledges the batch's messages after it returns `Ok`.
#[async_trait]
pub trait Sink: Send {
    /// Store one batch.
    async fn write(&mut self, batch: Batch) -> Result<(), SinkError>;

    /// Flush any buffered state (called at shutdown).
    async fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }

    /// Another writer to the same destination whose writes may run at the same time as this
    /// one's (the pipeline then keeps several batches in flight and acknowledges them in
    /// order). `None`, the default, for sinks that must write one batch at a time, such as
    /// files appended in order.
    fn concurrent_writer(&self) -> Option<Box<dyn Sink>> {
        None
    }
}

/// Items per thread below which [`encode_json_lines_owned`] encodes on the calling thread.
pub const MIN_ITEMS_PER_ENCODER: usize = 256;

/// Cores below which [`encode_json_lines_owned`] encodes on the calling thread: on 2 cores the
/// scorer pool already keeps every core busy and handing chunks to other threads cost ~10 % of
/// the events/s (measured, `CHANGELOG.md`, "Scaling"); the writer becomes the limit only
/// with many scoring workers.
pub const MIN_CORES_FOR_PARALLEL_ENCODING: usize = 4;

/// [`encode_json_lines`] of a batch the caller owns, spread over the machine's cores (from
/// [`MIN_CORES_FOR_PARALLEL_ENCODING`] on; serial below): the items
/// are cut into consecutive chunks (at least [`MIN_ITEMS_PER_ENCODER`] each), each chunk encoded
/// — and dropped — on rayon's pool (persistent threads), and the lines appended in their order,
/// so the bytes are those of the serial encoder. The sink's task, which every batch crosses one
/// at a time, keeps only the concatenation and the write.
pub fn encode_json_lines_owned<T: serde::Serialize + Send>(
    items: Vec<T>,
    out: &mut Vec<u8>,
) -> Result<(), SinkError> {
    let threads = rayon::current_num_threads().min(items.len() / MIN_ITEMS_PER_ENCODER);
    if threads <= 1 || !parallel_encoding() {
        return encode_json_lines(&items, out);
    }
    encode_json_lines_in_chunks(items, threads, out)
}

/// Whether sinks spread a batch's encoding over rayon's pool: from
/// [`MIN_CORES_FOR_PARALLEL_ENCODING`] cores on (the JSON lines here, ClickHouse's RowBinary
/// chunks in [`crate::stores::clickhouse::rowbinary`]).
pub fn parallel_encoding() -> bool {
    // Read once: `available_parallelism` reads the cgroup limits on every call.
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let cores = *CORES.get_or_init(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    cores >= MIN_CORES_FOR_PARALLEL_ENCODING
}

/// [`encode_json_lines`] of `items` cut into `chunks` consecutive chunks, each encoded and
/// dropped on rayon's pool, appended in order (the serial bytes).
pub fn encode_json_lines_in_chunks<T: serde::Serialize + Send>(
    items: Vec<T>,
    chunks: usize,
    out: &mut Vec<u8>,
) -> Result<(), SinkError> {
    // rayon's prelude: the parallel-iterator traits, by the crate's own convention.
    use rayon::prelude::*;
    let per_thread = items.len().div_ceil(chunks.max(1)).max(1);
    let parts: Vec<Result<Vec<u8>, SinkError>> = items
        .into_par_iter()
        .chunks(per_thread)
        .map(|chunk| {
            let mut buffer = Vec::new();
            encode_json_lines(&chunk, &mut buffer).map(|()| buffer)
        })
        .collect();
    for part in parts {
        out.extend_from_slice(&part?);
    }
    Ok(())
}

/// Serialize `items` as JSON lines (one object per line, `\n`-terminated) into `out`: the bytes
/// of `serde_json::to_writer`, written by [`crate::json_text`].
pub fn encode_json_lines<T: serde::Serialize>(
    items: &[T],
    out: &mut Vec<u8>,
) -> Result<(), SinkError> {
    for item in items {
        crate::json_text::write(out, item).map_err(SinkError::Encode)?;
        out.push(b'\n');
    }
    Ok(())
}
