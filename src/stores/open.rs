//! [`Store`]: the store `[sink]` names (on the `[clickhouse]` server when its kind is
//! ClickHouse), built once per command and handed to whatever writes to it or reads it back. The
//! one place outside the config checks that matches the sink's kind.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::clickhouse::review_store::ClickHouseStore;
use super::jsonl::reader::JsonlStore;
use super::read::ReviewStore;
use crate::stores::clickhouse::config::ClickHouseConfig;
use crate::stores::clickhouse::sink::ClickHouseSink;
use crate::stores::config::{SinkConfig, SinkKind};
use crate::stores::{JsonlSink, Sink, SinkError, StdoutSink};
use crate::telemetry::health::Health;

/// The store of a run: a JSONL directory, ClickHouse (one server or a cluster), or stdout
/// (written, never read back).
#[derive(Debug, Clone)]
pub struct Store {
    settings: SinkConfig,
    clickhouse: ClickHouseConfig,
}

/// Where alert notifications are recorded beside the rows, so that the review page over the
/// store shows them.
#[derive(Debug, Clone, Default)]
pub struct AlertRecording {
    /// Append to the JSONL directory's `alerts.jsonl`.
    pub jsonl_dir: Option<PathBuf>,
    /// Insert into ClickHouse `alerts` on this connection.
    pub clickhouse: Option<ClickHouseConfig>,
}

impl Store {
    /// The store `settings` (`[sink]`) names; `clickhouse` is the `[clickhouse]` server (the
    /// store when the sink's kind is ClickHouse; alerts and the judge cache may use it anyway).
    pub fn new(settings: &SinkConfig, clickhouse: &ClickHouseConfig) -> Store {
        Store {
            settings: settings.clone(),
            clickhouse: clickhouse.clone(),
        }
    }

    /// A JSONL directory store at `dir` (`--dir` of `serve`, `import-labels`, `calibrate`),
    /// whatever the config's `[sink]` says.
    pub fn jsonl_dir(dir: impl Into<PathBuf>) -> Store {
        Store {
            settings: SinkConfig {
                kind: SinkKind::jsonl(dir),
                ..SinkConfig::default()
            },
            clickhouse: ClickHouseConfig::default(),
        }
    }

    /// The `[sink]` settings (its kind, batching).
    pub fn settings(&self) -> &SinkConfig {
        &self.settings
    }

    /// The writer the pipeline writes batches through, reporting its state to `health` where
    /// it has one (ClickHouse).
    pub async fn writer(&self, health: Option<Arc<Health>>) -> Result<Box<dyn Sink>, SinkError> {
        Ok(match &self.settings.kind {
            SinkKind::Jsonl(jsonl) => Box::new(JsonlSink::open(&jsonl.dir).await?),
            SinkKind::Stdout => Box::new(StdoutSink::new()),
            SinkKind::Clickhouse => {
                let sink = ClickHouseSink::new(&self.clickhouse);
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
        match &self.settings.kind {
            SinkKind::Jsonl(jsonl) => Some(Arc::new(
                JsonlStore::new(&jsonl.dir).with_max_rows(max_rows),
            )),
            SinkKind::Clickhouse => {
                Some(Arc::new(ClickHouseStore::new(&self.clickhouse, max_rows)))
            }
            SinkKind::Stdout => None,
        }
    }

    /// Where alerts are recorded: the JSONL directory, and ClickHouse `alerts` when
    /// `to_clickhouse` (`[alerts] clickhouse`, on the `[clickhouse]` server whatever the sink's
    /// kind).
    pub fn alert_recording(&self, to_clickhouse: bool) -> AlertRecording {
        AlertRecording {
            jsonl_dir: self.dir().map(Path::to_path_buf),
            clickhouse: to_clickhouse.then(|| self.clickhouse.clone()),
        }
    }

    /// The ClickHouse connection, when ClickHouse is the store (`migrate`, `prune`, the judge
    /// cache's `auto` mode).
    pub fn clickhouse(&self) -> Option<&ClickHouseConfig> {
        (self.settings.kind == SinkKind::Clickhouse).then_some(&self.clickhouse)
    }

    /// The `[clickhouse]` server, whatever the store is (the judge cache or alert records
    /// asked for there explicitly).
    pub fn clickhouse_server(&self) -> &ClickHouseConfig {
        &self.clickhouse
    }

    /// The directory, when the store is a JSONL directory.
    pub fn dir(&self) -> Option<&Path> {
        self.settings.dir()
    }

    /// Whether rows go to standard output (summaries and alerts then go to stderr).
    pub fn writes_to_stdout(&self) -> bool {
        self.settings.kind == SinkKind::Stdout
    }

    /// The store for logs and messages (no credentials).
    pub fn describe(&self) -> String {
        match &self.settings.kind {
            SinkKind::Jsonl(jsonl) => format!("JSONL directory {}", jsonl.dir.display()),
            SinkKind::Stdout => "stdout".to_string(),
            SinkKind::Clickhouse => format!(
                "ClickHouse {} / {}",
                crate::settings::redact_url(crate::stores::clickhouse::url(&self.clickhouse)),
                self.clickhouse.database
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

        let clickhouse = Store::new(
            &SinkConfig {
                kind: SinkKind::Clickhouse,
                ..SinkConfig::default()
            },
            &ClickHouseConfig {
                url: Some("http://user:pw@127.0.0.1:8123".into()),
                ..ClickHouseConfig::default()
            },
        );
        assert!(clickhouse.clickhouse().is_some() && clickhouse.dir().is_none());
        assert!(
            !clickhouse.describe().contains("pw"),
            "{}",
            clickhouse.describe()
        );
        assert!(clickhouse.alert_recording(true).clickhouse.is_some());

        let stdout = Store::new(
            &SinkConfig {
                kind: SinkKind::Stdout,
                ..SinkConfig::default()
            },
            &ClickHouseConfig::default(),
        );
        assert!(stdout.writes_to_stdout() && stdout.reader(10).is_none());
        assert!(stdout.alert_recording(false).jsonl_dir.is_none());
    }
}
