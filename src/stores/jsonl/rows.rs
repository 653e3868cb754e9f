//! The JSONL store's reader: one file of JSON lines (`evaluations.jsonl`, `inputs.jsonl`,
//! `labels.jsonl`, `alerts.jsonl`) into values, every line that does not parse kept with its
//! line number so that each caller decides: `calibrate` refuses the file, the review page and
//! `report` skip the line and say so in the log.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::stores::StoredRow;

/// A JSONL file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct ReadError {
    /// The file.
    pub path: PathBuf,
    /// The OS error.
    #[source]
    pub source: std::io::Error,
}

impl ReadError {
    /// Whether the file does not exist (a JSONL directory before its first write).
    pub fn is_not_found(&self) -> bool {
        self.source.kind() == std::io::ErrorKind::NotFound
    }
}

/// A line that is not a value of the type read.
#[derive(Debug)]
pub struct Unreadable {
    /// 1-based line number.
    pub line: usize,
    /// Why it did not parse.
    pub error: serde_json::Error,
}

/// The values of a JSONL file and the lines that did not parse.
#[derive(Debug)]
pub struct Lines<T> {
    /// Values, in file order.
    pub items: Vec<T>,
    /// Lines that are not values (blank lines are neither).
    pub unreadable: Vec<Unreadable>,
}

impl<T> Lines<T> {
    /// The values, after logging how many lines were skipped (`what`: what the lines should
    /// have been).
    pub fn skipping_unreadable(self, path: &Path, what: &str) -> Vec<T> {
        if !self.unreadable.is_empty() {
            tracing::warn!(
                skipped = self.unreadable.len(),
                path = %path.display(),
                "lines that are not {what} were skipped"
            );
        }
        self.items
    }
}

/// Read every line of `path` as a `T`.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<Lines<T>, ReadError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReadError {
        path: path.to_path_buf(),
        source,
    })?;
    let mut lines = Lines {
        items: Vec::new(),
        unreadable: Vec::new(),
    };
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(value) => lines.items.push(value),
            Err(error) => lines.unreadable.push(Unreadable { line: i + 1, error }),
        }
    }
    Ok(lines)
}

/// The evaluation rows of an `evaluations.jsonl` file (lines that are not rows are skipped and
/// counted in the log).
pub fn rows(path: &Path) -> Result<Vec<StoredRow>, ReadError> {
    Ok(read(path)?.skipping_unreadable(path, "evaluation rows"))
}

/// The rows of one run.
pub fn rows_of_run(path: &Path, run_id: &str) -> Result<Vec<StoredRow>, ReadError> {
    let mut rows = rows(path)?;
    rows.retain(|r| r.run_id.as_deref() == Some(run_id));
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_encodings_read_alike_and_bad_lines_are_numbered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("evaluations.jsonl");
        std::fs::write(
            &path,
            concat!(
                r#"{"event_id":"1","ts":"2026-01-02T03:04:05Z","agent_id":"a","run_id":"r","metric":"ex","value":1.0,"verdict":true,"status":"ok","details":{"k":1}}"#,
                "\n\nnot json\n",
                r#"{"event_id":"2","ts_utc":"2026-01-02 03:04:05","agent_id":"","run_id":"r","metric":"ex","value":1.0,"verdict":1,"status":"ok","details":"{\"k\":1}"}"#,
                "\n",
                r#"{"event_id":"3","run_id":"other","metric":"ex","value":0.0,"verdict":0,"status":"ok"}"#,
                "\n"
            ),
        )
        .unwrap();
        let lines: Lines<StoredRow> = read(&path).unwrap();
        assert_eq!(lines.items.len(), 3);
        assert_eq!(lines.unreadable.len(), 1);
        assert_eq!(lines.unreadable[0].line, 3);
        let run = rows_of_run(&path, "r").unwrap();
        assert_eq!(run.len(), 2);
        assert_eq!(run[0].ts, run[1].ts);
        assert_eq!(run[0].verdict, run[1].verdict);
        assert_eq!(run[0].details, run[1].details);
        assert_eq!(run[1].agent_id, None);
        assert_eq!(run[1].variant(), "unknown");
        let missing = read::<StoredRow>(&dir.path().join("none.jsonl")).unwrap_err();
        assert!(missing.is_not_found());
    }
}
