//! JSONL sink: `evaluations.jsonl`, `inputs.jsonl` (the scored events' question, enriched
//! question and SQL, for the review page) and `dead_letters.jsonl` in one directory, append
//! mode. The review page (`sqlgrade serve --dir`) adds `labels.jsonl`; the alert service adds
//! `alerts.jsonl`.
//!
//! Each batch is encoded in memory, appended with one write per file, then `fsync`ed before
//! `write` returns, so an acknowledged message is on disk. The encoded buffer itself goes to the
//! blocking write and comes back for the next batch: a `tokio::fs::File` would copy every byte
//! of it into a buffer of its own first.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use crate::stores::{Batch, Sink, SinkError, encode_json_lines, encode_json_lines_owned};

/// File name of evaluation rows inside the sink directory.
pub const EVALUATIONS_FILE: &str = "evaluations.jsonl";

/// File name of event inputs inside the sink directory.
pub const INPUTS_FILE: &str = "inputs.jsonl";

/// File name of dead letters inside the sink directory.
pub const DEAD_LETTERS_FILE: &str = "dead_letters.jsonl";

/// Appends rows and dead letters to two JSONL files in a directory.
pub struct JsonlSink {
    dir: PathBuf,
    evaluations: Arc<std::fs::File>,
    inputs: Option<Arc<std::fs::File>>,
    dead_letters: Arc<std::fs::File>,
    buffer: Vec<u8>,
}

impl JsonlSink {
    /// Create the directory if needed and open (create/append) both files.
    pub async fn open(dir: impl Into<PathBuf>) -> Result<JsonlSink, SinkError> {
        let dir = dir.into();
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|source| SinkError::Io {
                what: dir.display().to_string(),
                source,
            })?;
        let evaluations = open_append(&dir.join(EVALUATIONS_FILE)).await?;
        let dead_letters = open_append(&dir.join(DEAD_LETTERS_FILE)).await?;
        Ok(JsonlSink {
            dir,
            evaluations,
            inputs: None,
            dead_letters,
            buffer: Vec::with_capacity(64 * 1024),
        })
    }

    /// The output directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

async fn open_append(path: &Path) -> Result<Arc<std::fs::File>, SinkError> {
    let file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .await
        .map_err(|source| SinkError::Io {
            what: path.display().to_string(),
            source,
        })?;
    Ok(Arc::new(file.into_std().await))
}

/// Append `buffer` to `file` and `fsync` it on the blocking pool; `buffer` is moved there and
/// back (its capacity serves the next batch), not copied.
async fn append_durably(
    file: &Arc<std::fs::File>,
    buffer: &mut Vec<u8>,
    what: &Path,
) -> Result<(), SinkError> {
    let io = |source| SinkError::Io {
        what: what.display().to_string(),
        source,
    };
    let bytes = std::mem::take(buffer);
    let file = Arc::clone(file);
    let (bytes, written) = tokio::task::spawn_blocking(move || {
        let written = (&*file).write_all(&bytes).and_then(|()| file.sync_data());
        (bytes, written)
    })
    .await
    .map_err(|join| io(std::io::Error::other(join)))?;
    *buffer = bytes;
    written.map_err(io)
}

#[async_trait]
impl Sink for JsonlSink {
    async fn write(&mut self, batch: Batch) -> Result<(), SinkError> {
        let Batch {
            rows,
            dead_letters,
            inputs,
        } = batch;
        if !inputs.is_empty() {
            let path = self.dir.join(INPUTS_FILE);
            if self.inputs.is_none() {
                self.inputs = Some(open_append(&path).await?);
            }
            if let Some(file) = self.inputs.as_ref() {
                self.buffer.clear();
                encode_json_lines_owned(inputs, &mut self.buffer)?;
                append_durably(file, &mut self.buffer, &path).await?;
            }
        }
        if !rows.is_empty() {
            self.buffer.clear();
            encode_json_lines_owned(rows, &mut self.buffer)?;
            let path = self.dir.join(EVALUATIONS_FILE);
            append_durably(&self.evaluations, &mut self.buffer, &path).await?;
        }
        if !dead_letters.is_empty() {
            self.buffer.clear();
            encode_json_lines(&dead_letters, &mut self.buffer)?;
            let path = self.dir.join(DEAD_LETTERS_FILE);
            append_durably(&self.dead_letters, &mut self.buffer, &path).await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), SinkError> {
        // Nothing is held back: every `write` appended and synced its bytes before returning.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_encoding_writes_the_serial_bytes() {
        let rows: Vec<serde_json::Value> = (0..1_000)
            .map(|i| serde_json::json!({"event_id": format!("ev-{i}"), "value": i, "details": {"n": [i, i + 1]}}))
            .collect();
        let mut serial = Vec::new();
        encode_json_lines(&rows, &mut serial).unwrap();
        let mut parallel = b"kept ".to_vec();
        crate::stores::encode_json_lines_in_chunks(rows.clone(), 3, &mut parallel).unwrap();
        let mut owned = Vec::new();
        encode_json_lines_owned(rows, &mut owned).unwrap();
        assert_eq!(owned, serial, "whatever the machine's cores");
        assert_eq!(&parallel[..5], b"kept ", "appends to what is there");
        assert_eq!(&parallel[5..], &serial[..]);
        let mut few = Vec::new();
        encode_json_lines_owned(vec![serde_json::json!(1)], &mut few).unwrap();
        assert_eq!(few, b"1\n");
    }
    use crate::evaluation::{DeadLetter, EvaluationRow, Metric};
    use crate::event::Event;
    use crate::review::EventInputs;

    #[tokio::test]
    async fn appends_rows_and_dead_letters() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let event = Event::decode(br#"{"event_id":"e1","question":"q","sql":"SELECT 1"}"#).unwrap();
        let row = EvaluationRow::for_event(&event, "2026-01-01T00:00:00Z", Metric::Ex);
        for _ in 0..2 {
            let mut sink = JsonlSink::open(&out).await.unwrap();
            sink.write(Batch {
                rows: vec![row.clone()],
                inputs: vec![EventInputs::from_event(
                    event.clone(),
                    "2026-01-01T00:00:00Z",
                )],
                dead_letters: vec![DeadLetter::new("stdin:1", "malformed JSON", b"{x")],
            })
            .await
            .unwrap();
            sink.flush().await.unwrap();
        }
        let rows = std::fs::read_to_string(out.join(EVALUATIONS_FILE)).unwrap();
        let dls = std::fs::read_to_string(out.join(DEAD_LETTERS_FILE)).unwrap();
        assert_eq!(rows.lines().count(), 2, "append mode keeps earlier rows");
        assert_eq!(dls.lines().count(), 2);
        let inputs = std::fs::read_to_string(out.join(INPUTS_FILE)).unwrap();
        assert_eq!(inputs.lines().count(), 2);
        assert!(inputs.contains(r#""sql":"SELECT 1""#), "{inputs}");
        let back: EvaluationRow = serde_json::from_str(rows.lines().next().unwrap()).unwrap();
        assert_eq!(back, row);
        let dl: DeadLetter = serde_json::from_str(dls.lines().next().unwrap()).unwrap();
        assert_eq!(dl.payload, "{x");
    }

    #[tokio::test]
    async fn unwritable_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        std::fs::write(&file, b"").unwrap();
        assert!(matches!(
            JsonlSink::open(file.join("sub")).await,
            Err(SinkError::Io { .. })
        ));
    }
}
