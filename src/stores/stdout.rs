//! Stdout sink: rows and dead letters as JSON lines on standard output (dead letters are told
//! apart by their `reason`/`payload` fields; rows have `metric`).

use async_trait::async_trait;
use tokio::io::AsyncWriteExt;

use super::{Batch, Sink, SinkError, encode_json_lines};

/// Writes each batch to standard output and flushes it.
pub struct StdoutSink {
    out: tokio::io::Stdout,
    buffer: Vec<u8>,
}

impl StdoutSink {
    /// A sink on the process's standard output.
    pub fn new() -> StdoutSink {
        StdoutSink {
            out: tokio::io::stdout(),
            buffer: Vec::with_capacity(64 * 1024),
        }
    }
}

impl Default for StdoutSink {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Sink for StdoutSink {
    async fn write(&mut self, batch: Batch) -> Result<(), SinkError> {
        self.buffer.clear();
        encode_json_lines(&batch.rows, &mut self.buffer)?;
        encode_json_lines(&batch.dead_letters, &mut self.buffer)?;
        let io = |source| SinkError::Io {
            what: "stdout".into(),
            source,
        };
        self.out.write_all(&self.buffer).await.map_err(io)?;
        self.out.flush().await.map_err(io)
    }

    async fn flush(&mut self) -> Result<(), SinkError> {
        self.out.flush().await.map_err(|source| SinkError::Io {
            what: "stdout".into(),
            source,
        })
    }
}
