//! [`Store`]: the store `[sink]` names, built once per command and handed to whatever writes to
//! it or reads it back. The one place outside the config checks that matches the sink's kind.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::clickhouse_db::ClickHouseStore;
use super::jsonl_dir::JsonlStore;
use super::read::ReviewStore;
use crate::clickhouse::sink::ClickHouseSink;
use crate::health::Health;
use crate::sink::config::{SinkConfig, SinkKind};
use crate::sink::{JsonlSink, Sink, SinkError, StdoutSink};

/// The store of a run: a JSONL directory, ClickHouse (one server or a cluster), or stdout
/// (written, never read back).
#[derive(Debug, Clone)]
pub struct Store {
    settings: SinkConfig,
}

/// Where alert notifications are recorded beside the rows, so that the review page over the
/// store shows them.
#[derive(Debug, Clone, Default)]
pub struct AlertRecording {
    /// Append to the JSONL directory's `alerts.jsonl`.
    pub jsonl_dir: Option<PathBuf>,
    /// Insert into ClickHouse `alerts` on this connection.
    pub clickhouse: Option<SinkConfig>,
}

impl Store {
    /// The store `settings` (`[sink]`) names.
    pub fn new(settings: &SinkConfig) -> Store {
        Store {
            settings: settings.clone(),
        }
    }

    /// A JSONL directory store at `dir` (`--dir` of `serve`, `import-labels`, `calibrate`),
    /// whatever the config's `[sink]` says.
    pub fn jsonl_dir(dir: impl Into<PathBuf>) -> Store {
        Store {
            settings: SinkConfig {
                kind: SinkKind::Jsonl,
                dir: dir.into(),
                ..SinkConfig::default()
            },
        }
    }

    /// The `[sink]` settings (batching, retries, the connection).
    pub fn settings(&self) -> &SinkConfig {
        &self.settings
    }

    /// The writer the pipeline writes batches through, reporting its state to `health` where
    /// it has one (ClickHouse).
    pub async fn writer(&self, health: Option<Arc<Health>>) -> Result<Box<dyn Sink>, SinkError> {
        Ok(match self.settings.kind {
            SinkKind::Jsonl => Box::new(JsonlSink::open(&self.settings.dir).await?),
            SinkKind::Stdout => Box::new(StdoutSink::new()),
            SinkKind::Clickhouse => {
                let sink = ClickHouseSink::new(&self.settings);
                Box::new(match health {
                    Some(h) => sink.with_health(h),
                    None => sink,
                })
            }
        })
    }

    /// The reader of what the store holds; the review page's overview and queue read the
    /// `max_rows` most recent evaluation rows. `None` for stdout (nothing to read back).
    pub fn reader(&self, max_rows: usize) -> Option<Arc<dyn ReviewStore>> {
        match self.settings.kind {
            SinkKind::Jsonl => Some(Arc::new(
                JsonlStore::new(&self.settings.dir).with_max_rows(max_rows),
            )),
            SinkKind::Clickhouse => Some(Arc::new(ClickHouseStore::new(&self.settings, max_rows))),
            SinkKind::Stdout => None,
        }
    }

    /// Where alerts are recorded: the JSONL directory, and ClickHouse `alerts` when
    /// `to_clickhouse` (`[alerts] clickhouse`, on the `[sink]` connection whatever its kind).
    pub fn alert_recording(&self, to_clickhouse: bool) -> AlertRecording {
        AlertRecording {
            jsonl_dir: self.dir().map(Path::to_path_buf),
            clickhouse: to_clickhouse.then(|| self.settings.clone()),
        }
    }

    /// The ClickHouse connection, when ClickHouse is the store (`migrate`, `prune`, the judge
    /// cache's `auto` mode).
    pub fn clickhouse(&self) -> Option<&SinkConfig> {
        (self.settings.kind == SinkKind::Clickhouse).then_some(&self.settings)
    }

    /// The directory, when the store is a JSONL directory.
    pub fn dir(&self) -> Option<&Path> {
        (self.settings.kind == SinkKind::Jsonl).then_some(self.settings.dir.as_path())
    }

    /// Whether rows go to standard output (summaries and alerts then go to stderr).
    pub fn writes_to_stdout(&self) -> bool {
        self.settings.kind == SinkKind::Stdout
    }

    /// The store for logs and messages (no credentials).
    pub fn describe(&self) -> String {
        match self.settings.kind {
            SinkKind::Jsonl => format!("JSONL directory {}", self.settings.dir.display()),
            SinkKind::Stdout => "stdout".to_string(),
            SinkKind::Clickhouse => format!(
                "ClickHouse {} / {}",
                crate::settings::redact_url(crate::clickhouse::url(&self.settings)),
                self.settings.database
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_says_what_it_offers() {
        let jsonl = Store::jsonl_dir("out");
        assert_eq!(jsonl.dir(), Some(Path::new("out")));
        assert!(jsonl.clickhouse().is_none() && !jsonl.writes_to_stdout());
        assert!(jsonl.reader(10).is_some());
        let recording = jsonl.alert_recording(false);
        assert_eq!(recording.jsonl_dir.as_deref(), Some(Path::new("out")));
        assert!(recording.clickhouse.is_none());

        let clickhouse = Store::new(&SinkConfig {
            kind: SinkKind::Clickhouse,
            url: Some("http://user:pw@127.0.0.1:8123".into()),
            ..SinkConfig::default()
        });
        assert!(clickhouse.clickhouse().is_some() && clickhouse.dir().is_none());
        assert!(
            !clickhouse.describe().contains("pw"),
            "{}",
            clickhouse.describe()
        );
        assert!(clickhouse.alert_recording(true).clickhouse.is_some());

        let stdout = Store::new(&SinkConfig {
            kind: SinkKind::Stdout,
            ..SinkConfig::default()
        });
        assert!(stdout.writes_to_stdout() && stdout.reader(10).is_none());
        assert!(stdout.alert_recording(false).jsonl_dir.is_none());
    }
}
