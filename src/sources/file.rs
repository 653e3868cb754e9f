//! Line-oriented sources: a JSONL file (optionally tailed like `tail -f`) and standard input.
//!
//! Every non-blank line is one payload. Blank lines are skipped (they are not dead letters) but
//! still counted, so origins (`file:<path>:<line>`) match what an editor shows. A line longer than
//! the limit never grows memory without bound: only its first `max_line_bytes + 1` bytes are kept
//! (enough for the decoder to reject it as too large) and the origin records the full length. A
//! partial last line (no trailing newline) is a line at EOF; when following, it is held back until
//! the writer finishes it. `[source] kind = "file"`'s keys ([`FileSourceConfig`]) are declared
//! here, beside the source that uses them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use super::{AckCounter, Source, SourceError, SourceMessage};
use crate::sources::{AckToken, Acknowledge, Position};

/// `[source] kind = "file"`: its own keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct FileSourceConfig {
    /// The JSONL file.
    pub path: PathBuf,
    /// Keep tailing the file after EOF (like `tail -f`).
    pub follow: bool,
}

impl Default for FileSourceConfig {
    fn default() -> Self {
        FileSourceConfig {
            path: PathBuf::from("examples/events.jsonl"),
            follow: false,
        }
    }
}

impl FileSourceConfig {
    /// What is wrong with these keys (each a sentence naming the key).
    pub fn problems(&self) -> Vec<String> {
        if self.path.as_os_str().is_empty() {
            vec!["source.path is required for source.kind = \"file\"".to_string()]
        } else {
            Vec::new()
        }
    }
}

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
            let newline = memchr::memchr(b'\n', available);
            if let Some(line) = self.absorb(newline) {
                return Ok(Some(line));
            }
        }
    }

    /// The next line when it is already complete in the read buffer: no read, no wait (the
    /// sources hand such lines out through [`Source::next_ready`]). `None` when the buffer
    /// holds no newline; a partial line is then left for [`LineReader::read_line`].
    pub fn buffered_line(&mut self) -> Option<Line> {
        let newline = memchr::memchr(b'\n', self.inner.buffer())?;
        self.absorb(Some(newline))
    }

    /// Take the read buffer up to the newline at `newline` (the line, when it completes one),
    /// or all of it into the partial line.
    #[inline]
    fn absorb(&mut self, newline: Option<usize>) -> Option<Line> {
        let available = self.inner.buffer();
        let chunk_len = newline.unwrap_or(available.len());
        let keep = (self.max_line_bytes + 1).saturating_sub(self.current.len());
        let chunk = available.get(..chunk_len).unwrap_or_default();
        let kept = chunk.get(..keep.min(chunk.len())).unwrap_or_default();
        self.current.extend_from_slice(kept);
        self.current_len += chunk_len;
        let consumed = chunk_len + usize::from(newline.is_some());
        self.inner.consume(consumed);
        self.bytes_consumed += consumed as u64;
        newline.map(|_| self.take_line())
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
        // Written without the formatting machinery: the source stage builds one per line.
        let mut digits = itoa::Buffer::new();
        let line_no = digits.format(line_no);
        let mut origin = String::with_capacity(prefix.len() + 1 + line_no.len());
        origin.push_str(prefix);
        origin.push(':');
        origin.push_str(line_no);
        origin
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

    /// The message of the next line read (`None` for a blank line, which is only counted).
    fn message(&mut self, line: Line) -> Option<SourceMessage> {
        self.line_no += 1;
        line_message(
            line,
            self.line_no,
            &self.stream,
            &self.origin_prefix,
            &self.acks,
            self.source_time,
        )
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
                    if let Some(message) = self.message(line) {
                        return Ok(Some(message));
                    }
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

    fn next_ready(&mut self) -> Option<SourceMessage> {
        if self.stopped {
            return None;
        }
        loop {
            let line = self.reader.as_mut()?.buffered_line()?;
            if let Some(message) = self.message(line) {
                return Some(message);
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
    /// `stdin`, as positions name it (one allocation for the source's life).
    stream: Arc<str>,
    line_no: u64,
    stopped: bool,
    acks: Arc<AckCounter>,
}

impl StdinSource {
    /// A source over the process's standard input.
    pub fn new(max_line_bytes: usize) -> StdinSource {
        StdinSource {
            reader: LineReader::new(tokio::io::stdin(), max_line_bytes),
            stream: "stdin".into(),
            line_no: 0,
            stopped: false,
            acks: Arc::new(AckCounter::default()),
        }
    }

    /// The message of the next line read (`None` for a blank line, which is only counted).
    fn message(&mut self, line: Line) -> Option<SourceMessage> {
        self.line_no += 1;
        line_message(line, self.line_no, &self.stream, "stdin", &self.acks, None)
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
            if let Some(message) = self.message(line) {
                return Ok(Some(message));
            }
        }
    }

    fn next_ready(&mut self) -> Option<SourceMessage> {
        if self.stopped {
            return None;
        }
        loop {
            let line = self.reader.buffered_line()?;
            if let Some(message) = self.message(line) {
                return Some(message);
            }
        }
    }

    fn stop(&mut self) {
        self.stopped = true;
    }
}

/// The message of line `line_no` (`None` for a blank line): positions name `stream`, origins
/// start with `origin_prefix`.
fn line_message(
    line: Line,
    line_no: u64,
    stream: &Arc<str>,
    origin_prefix: &str,
    acks: &Arc<AckCounter>,
    source_time: Option<super::SourceTime>,
) -> Option<SourceMessage> {
    if is_blank(&line.bytes) {
        return None;
    }
    let position = Position {
        stream: Arc::clone(stream),
        partition: 0,
        offset: i64::try_from(line_no).unwrap_or(i64::MAX),
    };
    let acks: Arc<dyn Acknowledge> = acks.clone();
    Some(SourceMessage {
        origin: origin_of(origin_prefix, line_no, &line),
        payload: line.bytes,
        ack: AckToken::new(position, acks),
        source_time,
        quarantine: None,
    })
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
    async fn lines_already_buffered_are_handed_out_without_a_read() {
        // Lines taken from the buffer between reads are the lines reads alone give: a CRLF, a
        // blank line, a line over the cap, a partial last line (left for the read at EOF), and
        // a line cut by the end of the read buffer (completed by the next read).
        let mut short = b"a\r\n\nbb\n".to_vec();
        short.extend(vec![b'x'; 2000]);
        short.extend(b"\nccc");
        let mut straddling = vec![b'y'; READ_BUFFER_BYTES - 3];
        straddling.extend(b"\nabcdef\nz\n");
        for (input, max) in [(short, 1000), (straddling, 1 << 20)] {
            let expected = lines_of(&input, max, true).await;
            let mut reader = LineReader::new(&input[..], max);
            assert_eq!(reader.buffered_line(), None, "nothing read yet");
            let mut lines = Vec::new();
            let mut from_buffer = 0;
            while let Some(line) = reader.read_line(true).await.unwrap() {
                lines.push(line);
                while let Some(line) = reader.buffered_line() {
                    lines.push(line);
                    from_buffer += 1;
                }
            }
            assert_eq!(lines, expected);
            assert!(from_buffer >= 1, "some lines came from the buffer");
            assert_eq!(reader.bytes_consumed(), input.len() as u64);
        }
    }

    #[tokio::test]
    async fn file_source_hands_out_buffered_lines_as_ready() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        std::fs::write(&path, b"one\n\n  \ntwo\nthree\nfour").unwrap();
        let mut src = FileSource::new(&path, false, 1024);
        assert!(src.next_ready().is_none(), "nothing read yet");
        let one = src.next().await.unwrap().unwrap();
        let two = src.next_ready().expect("a complete line in the buffer");
        assert_eq!(
            (one.payload.as_slice(), two.payload.as_slice()),
            (&b"one"[..], &b"two"[..])
        );
        assert!(
            two.origin.ends_with("r.jsonl:4"),
            "blank lines counted: {}",
            two.origin
        );
        assert_eq!(two.ack.position().offset, 4);
        let three = src.next_ready().expect("a complete line in the buffer");
        assert_eq!(three.payload, b"three");
        assert!(
            src.next_ready().is_none(),
            "a partial last line waits for a read"
        );
        assert_eq!(src.next().await.unwrap().unwrap().payload, b"four");

        std::fs::write(&path, b"a\nb\n").unwrap();
        let mut src = FileSource::new(&path, false, 1024);
        assert_eq!(src.next().await.unwrap().unwrap().payload, b"a");
        src.stop();
        assert!(
            src.next_ready().is_none(),
            "a stopped source hands out nothing more"
        );
        assert!(src.next().await.unwrap().is_none());
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
