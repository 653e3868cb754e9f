//! Line-oriented sources: a JSONL file (optionally tailed like `tail -f`) and standard input.
//!
//! Every non-blank line is one payload. Blank lines are skipped (they are not dead letters) but
//! still counted, so origins (`file:<path>:<line>`) match what an editor shows. A line longer than
//! the limit never grows memory without bound: only its first `max_line_bytes + 1` bytes are kept
//! (enough for the decoder to reject it as too large) and the origin records the full length. A
//! partial last line (no trailing newline) is a line at EOF; when following, it is held back until
//! the writer finishes it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use super::{AckCounter, Source, SourceError, SourceMessage};
use crate::source::{AckToken, Acknowledge, Position};

/// Read buffer size of line sources.
const READ_BUFFER_BYTES: usize = 256 * 1024;

/// How often a followed file is polled for new data at EOF.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(200);

/// One line read by [`LineReader`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The line without its terminator (`\n` or `\r\n`), at most `max_line_bytes + 1` bytes.
    pub bytes: Vec<u8>,
    /// The full length of the line in the input, terminator excluded.
    pub len: usize,
}

impl Line {
    /// Whether only a prefix of the line was kept.
    pub fn truncated(&self) -> bool {
        self.bytes.len() < self.len
    }
}

/// Splits a byte stream into lines with a per-line memory cap. Cancel-safe: state changes only
/// happen synchronously after each await, so a dropped `read_line` future loses nothing.
pub struct LineReader<R> {
    inner: BufReader<R>,
    current: Vec<u8>,
    current_len: usize,
    max_line_bytes: usize,
    bytes_consumed: u64,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// Wrap `reader`; lines keep at most `max_line_bytes + 1` bytes.
    pub fn new(reader: R, max_line_bytes: usize) -> LineReader<R> {
        LineReader {
            inner: BufReader::with_capacity(READ_BUFFER_BYTES, reader),
            current: Vec::new(),
            current_len: 0,
            max_line_bytes,
            bytes_consumed: 0,
        }
    }

    /// Bytes consumed from the underlying reader so far.
    pub fn bytes_consumed(&self) -> u64 {
        self.bytes_consumed
    }

    /// Whether a partial line (no terminator yet) is buffered.
    pub fn has_partial(&self) -> bool {
        self.current_len > 0
    }

    /// The next complete line. At EOF: the buffered partial line when `eof_ends_line`, else
    /// `None` with the partial line kept for a later call.
    pub async fn read_line(&mut self, eof_ends_line: bool) -> std::io::Result<Option<Line>> {
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                if eof_ends_line && self.has_partial() {
                    return Ok(Some(self.take_line()));
                }
                return Ok(None);
            }
            let (chunk_len, found_newline) = match memchr::memchr(b'\n', available) {
                Some(i) => (i, true),
                None => (available.len(), false),
            };
            let keep = (self.max_line_bytes + 1).saturating_sub(self.current.len());
            let chunk = available.get(..chunk_len).unwrap_or_default();
            self.current
                .extend_from_slice(chunk.get(..keep.min(chunk.len())).unwrap_or_default());
            self.current_len += chunk_len;
            let consumed = chunk_len + usize::from(found_newline);
            self.inner.consume(consumed);
            self.bytes_consumed += consumed as u64;
            if found_newline {
                return Ok(Some(self.take_line()));
            }
        }
    }

    fn take_line(&mut self) -> Line {
        let mut bytes = std::mem::take(&mut self.current);
        let mut len = std::mem::take(&mut self.current_len);
        if bytes.len() == len && bytes.last() == Some(&b'\r') {
            bytes.pop();
            len -= 1;
        }
        Line { bytes, len }
    }
}

fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

fn origin_of(prefix: &str, line_no: u64, line: &Line) -> String {
    if line.truncated() {
        format!(
            "{prefix}:{line_no} (line of {} bytes; first {} kept)",
            line.len,
            line.bytes.len()
        )
    } else {
        format!("{prefix}:{line_no}")
    }
}

/// A JSONL file source; with `follow`, keeps reading appended lines after EOF and starts over
/// when the file is truncated.
pub struct FileSource {
    path: PathBuf,
    /// The path as positions name it (formatted once, not per line).
    stream: Arc<str>,
    origin_prefix: String,
    follow: bool,
    poll_interval: Duration,
    max_line_bytes: usize,
    reader: Option<LineReader<tokio::fs::File>>,
    line_no: u64,
    /// The file's modification time when it was first opened: the `ts` of events without one.
    source_time: Option<super::SourceTime>,
    stopped: bool,
    acks: Arc<AckCounter>,
}

impl FileSource {
    /// A source over `path`; lines above `max_line_bytes` are cut (see the module docs).
    pub fn new(path: impl Into<PathBuf>, follow: bool, max_line_bytes: usize) -> FileSource {
        let path = path.into();
        FileSource {
            origin_prefix: format!("file:{}", path.display()),
            stream: path.display().to_string().into(),
            path,
            follow,
            poll_interval: DEFAULT_POLL_INTERVAL,
            max_line_bytes,
            reader: None,
            line_no: 0,
            source_time: None,
            stopped: false,
            acks: Arc::new(AckCounter::default()),
        }
    }

    /// Change how often a followed file is polled at EOF.
    pub fn with_poll_interval(mut self, interval: Duration) -> FileSource {
        self.poll_interval = interval;
        self
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Shared acknowledgement counter.
    pub fn acks(&self) -> Arc<AckCounter> {
        Arc::clone(&self.acks)
    }

    async fn open(&self) -> Result<LineReader<tokio::fs::File>, SourceError> {
        let file = tokio::fs::File::open(&self.path)
            .await
            .map_err(|source| SourceError::Io {
                what: self.path.display().to_string(),
                source,
            })?;
        Ok(LineReader::new(file, self.max_line_bytes))
    }

    /// Whether the file shrank below what was read (truncated / rewritten in place).
    async fn was_truncated(&self, consumed: u64) -> bool {
        match tokio::fs::metadata(&self.path).await {
            Ok(meta) => meta.len() < consumed,
            Err(_) => false,
        }
    }
}

/// A file's modification time as RFC 3339 (`None` when the platform cannot tell).
async fn modified_time(path: &std::path::Path) -> Option<super::SourceTime> {
    let modified = tokio::fs::metadata(path).await.ok()?.modified().ok()?;
    let millis = modified
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_millis();
    super::SourceTime::from_millis(i64::try_from(millis).ok()?)
}

#[async_trait]
impl Source for FileSource {
    async fn next(&mut self) -> Result<Option<SourceMessage>, SourceError> {
        loop {
            if self.stopped {
                return Ok(None);
            }
            if self.reader.is_none() {
                self.reader = Some(self.open().await?);
                if self.source_time.is_none() {
                    self.source_time = modified_time(&self.path).await;
                }
            }
            let Some(reader) = self.reader.as_mut() else {
                continue;
            };
            let line = reader
                .read_line(!self.follow)
                .await
                .map_err(|source| SourceError::Io {
                    what: self.path.display().to_string(),
                    source,
                })?;
            match line {
                Some(line) => {
                    self.line_no += 1;
                    if is_blank(&line.bytes) {
                        continue;
                    }
                    let position = Position {
                        stream: self.stream.clone(),
                        partition: 0,
                        offset: i64::try_from(self.line_no).unwrap_or(i64::MAX),
                    };
                    let acks: Arc<dyn Acknowledge> = self.acks.clone();
                    return Ok(Some(SourceMessage {
                        origin: origin_of(&self.origin_prefix, self.line_no, &line),
                        payload: line.bytes,
                        ack: AckToken::new(position, acks),
                        source_time: self.source_time,
                    }));
                }
                None if !self.follow => return Ok(None),
                None => {
                    let consumed = reader.bytes_consumed();
                    if self.was_truncated(consumed).await {
                        tracing::warn!(
                            path = %self.path.display(),
                            "file shrank below the read position; reading it again from the start"
                        );
                        self.reader = None;
                        self.line_no = 0;
                        continue;
                    }
                    tokio::time::sleep(self.poll_interval).await;
                }
            }
        }
    }

    fn stop(&mut self) {
        self.stopped = true;
    }

    async fn finish(&mut self) -> Result<(), SourceError> {
        tracing::debug!(
            path = %self.path.display(),
            lines = self.line_no,
            acknowledged = self.acks.acked(),
            "file source finished"
        );
        Ok(())
    }
}

/// JSONL on standard input, until EOF.
pub struct StdinSource {
    reader: LineReader<tokio::io::Stdin>,
    line_no: u64,
    stopped: bool,
    acks: Arc<AckCounter>,
}

impl StdinSource {
    /// A source over the process's standard input.
    pub fn new(max_line_bytes: usize) -> StdinSource {
        StdinSource {
            reader: LineReader::new(tokio::io::stdin(), max_line_bytes),
            line_no: 0,
            stopped: false,
            acks: Arc::new(AckCounter::default()),
        }
    }
}

#[async_trait]
impl Source for StdinSource {
    async fn next(&mut self) -> Result<Option<SourceMessage>, SourceError> {
        loop {
            if self.stopped {
                return Ok(None);
            }
            let line = self
                .reader
                .read_line(true)
                .await
                .map_err(|source| SourceError::Io {
                    what: "stdin".into(),
                    source,
                })?;
            let Some(line) = line else {
                return Ok(None);
            };
            self.line_no += 1;
            if is_blank(&line.bytes) {
                continue;
            }
            let position = Position {
                stream: "stdin".into(),
                partition: 0,
                offset: i64::try_from(self.line_no).unwrap_or(i64::MAX),
            };
            let acks: Arc<dyn Acknowledge> = self.acks.clone();
            return Ok(Some(SourceMessage {
                origin: origin_of("stdin", self.line_no, &line),
                payload: line.bytes,
                ack: AckToken::new(position, acks),
                source_time: None,
            }));
        }
    }

    fn stop(&mut self) {
        self.stopped = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    async fn lines_of(input: &[u8], max: usize, eof_ends_line: bool) -> Vec<Line> {
        let mut r = LineReader::new(input, max);
        let mut out = Vec::new();
        while let Some(line) = r.read_line(eof_ends_line).await.unwrap() {
            out.push(line);
        }
        out
    }

    #[tokio::test]
    async fn splits_lines_and_handles_crlf_and_partial_tail() {
        let lines = lines_of(b"a\r\nbb\n\nccc", 100, true).await;
        let texts: Vec<&[u8]> = lines.iter().map(|l| l.bytes.as_slice()).collect();
        assert_eq!(texts, vec![&b"a"[..], b"bb", b"", b"ccc"]);
        let held = lines_of(b"a\nccc", 100, false).await;
        assert_eq!(held.len(), 1, "partial line held back when following");
    }

    #[tokio::test]
    async fn long_lines_are_capped_not_buffered() {
        let mut input = vec![b'x'; 3 * READ_BUFFER_BYTES + 17];
        input.extend_from_slice(b"\nok\n");
        let lines = lines_of(&input, 1000, true).await;
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].bytes.len(), 1001);
        assert_eq!(lines[0].len, 3 * READ_BUFFER_BYTES + 17);
        assert!(lines[0].truncated());
        assert_eq!(lines[1].bytes, b"ok");
    }

    #[tokio::test]
    async fn file_source_skips_blank_lines_and_numbers_origins() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.jsonl");
        std::fs::write(&path, b"one\n\n  \ntwo").unwrap();
        let mut src = FileSource::new(&path, false, 1024);
        let a = src.next().await.unwrap().unwrap();
        let b = src.next().await.unwrap().unwrap();
        assert!(src.next().await.unwrap().is_none());
        assert_eq!(a.payload, b"one");
        assert!(a.origin.ends_with("e.jsonl:1"), "{}", a.origin);
        assert_eq!(b.payload, b"two");
        assert!(b.origin.ends_with("e.jsonl:4"), "{}", b.origin);
        a.ack.ack();
        assert_eq!(src.acks().acked(), 1);
    }

    #[tokio::test]
    async fn follow_waits_for_appended_and_completed_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tail.jsonl");
        std::fs::write(&path, b"first\nsec").unwrap();
        let mut src =
            FileSource::new(&path, true, 1024).with_poll_interval(Duration::from_millis(10));
        assert_eq!(src.next().await.unwrap().unwrap().payload, b"first");
        let writer = {
            let path = path.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .unwrap();
                f.write_all(b"ond\nthird\n").unwrap();
            })
        };
        let second = tokio::time::timeout(Duration::from_secs(5), src.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(
            second.payload, b"second",
            "partial line completed by the writer"
        );
        let third = src.next().await.unwrap().unwrap();
        assert_eq!(third.payload, b"third");
        writer.await.unwrap();
        src.stop();
        assert!(src.next().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn follow_restarts_after_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rot.jsonl");
        std::fs::write(&path, b"aaaaaaaaaa\n").unwrap();
        let mut src =
            FileSource::new(&path, true, 1024).with_poll_interval(Duration::from_millis(10));
        assert_eq!(src.next().await.unwrap().unwrap().payload, b"aaaaaaaaaa");
        std::fs::write(&path, b"b\n").unwrap();
        let next = tokio::time::timeout(Duration::from_secs(5), src.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(next.payload, b"b");
        assert!(next.origin.ends_with("rot.jsonl:1"), "{}", next.origin);
    }

    #[tokio::test]
    async fn missing_file_is_an_error_not_a_panic() {
        let mut src = FileSource::new("/nonexistent/sqlgrade.jsonl", false, 10);
        assert!(matches!(src.next().await, Err(SourceError::Io { .. })));
    }
}
