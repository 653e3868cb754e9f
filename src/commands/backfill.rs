//! Batch backfill: replay a benchmark run (BIRD, Spider) or a JSONL export of agent traffic
//! through the same pipeline as the daemon, tagged with a `run_id`.
//!
//! For `bird`/`spider`, the dataset file (`dev.jsonl`: `question_id`, `db_id`, `question`,
//! `evidence`, `gold_sql`, `difficulty`/`hardness`) is joined with a predictions file
//! (`question_id`, `predicted_sql`) by `question_id`, and each pair becomes one event:
//! `event_id` = the question id as a string, `run_id` = `--run-id` or the predictions file's stem,
//! `agent_id` = the predictions file's stem, `app_id` = `bird-<db_id>` / `spider-<db_id>`,
//! `enriched_question` = question + evidence (BIRD, when there is evidence), `gold` = gold SQL,
//! db_id, evidence and difficulty. A question without a prediction is scored with empty SQL (the
//! system produced nothing), so it counts against the run, as in the benchmarks.
//!
//! Alerts: a backfill always evaluates the `[alerts]` rules over its rows (windows count
//! observations, so a replayed stream alerts where the live stream would have), without
//! dropping any input, and returns the state changes in [`BackfillReport::alerts`]. They are
//! delivered to the webhook / ClickHouse only when `[alerts] enabled = true`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use tokio::sync::watch;

use crate::alerts::AlertNotification;
use crate::assembly::{
    AssembledPipeline, BuildError, RunMode, TELEMETRY_GRACE, assemble_pipeline, build_scorer,
    finish_evaluations, finish_telemetry,
};
use crate::config::Config;
use crate::event::{Event, Gold};
use crate::pipeline::{EventTransform, PipelineError, ProgressFn};
use crate::score::Scorer;
pub use crate::second_pass::planner::PlanMode;
use crate::sources::{FileSource, MemorySource, Source};
use crate::telemetry::summary::Summary;

/// Input format of a backfill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackfillFormat {
    /// JSONL events in the input contract.
    Events,
    /// BIRD `dev.jsonl` + predictions.
    Bird,
    /// Spider `dev.jsonl` + predictions.
    Spider,
}

impl BackfillFormat {
    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            BackfillFormat::Events => "events",
            BackfillFormat::Bird => "bird",
            BackfillFormat::Spider => "spider",
        }
    }
}

impl FromStr for BackfillFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "events" => Ok(BackfillFormat::Events),
            "bird" => Ok(BackfillFormat::Bird),
            "spider" => Ok(BackfillFormat::Spider),
            other => Err(format!(
                "unknown format {other:?} (expected events, bird or spider)"
            )),
        }
    }
}

/// What to backfill.
#[derive(Debug, Clone)]
pub struct BackfillRequest {
    /// Events JSONL, or the dataset's `dev.jsonl`.
    pub input: PathBuf,
    /// Input format.
    pub format: BackfillFormat,
    /// Predictions JSONL (required for `bird`/`spider`).
    pub predictions: Option<PathBuf>,
    /// Run id; for `bird`/`spider` it defaults to the predictions file's stem, for `events` it
    /// replaces the events' own `run_id` only when given.
    pub run_id: Option<String>,
    /// With an LLM judge: judge every event (`Census`, the default: a benchmark run wants every
    /// item judged) or apply the live policy of `[judge.budget]` (`Sample`).
    pub judge: PlanMode,
}

/// Why a backfill could not run.
#[derive(Debug, thiserror::Error)]
pub enum BackfillError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A line of an input file is not what the format expects.
    #[error("{path}:{line}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The request is inconsistent.
    #[error("{0}")]
    Usage(String),
    /// A component could not be built from the configuration.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The pipeline failed.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// The alert engine could not start.
    #[error(transparent)]
    Alerts(#[from] crate::alerts::delivery::AlertError),
}

/// How long a finished backfill waits for alert deliveries that are still retrying.
const ALERT_DELIVERY_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// What a backfill produced: its summary and the alerts its rows raised.
#[derive(Debug)]
pub struct BackfillReport {
    /// What was written.
    pub summary: Summary,
    /// Alert state changes (firing / resolved), in order (the first 10,000).
    pub alerts: Vec<AlertNotification>,
}

/// One question of a benchmark's `dev.jsonl`.
#[derive(Debug, Clone, Deserialize)]
pub struct BenchmarkQuestion {
    /// Dataset question id (number or string).
    pub question_id: Value,
    /// Database id.
    pub db_id: String,
    /// Natural-language question.
    pub question: String,
    /// BIRD external knowledge.
    #[serde(default)]
    pub evidence: Option<String>,
    /// Reference SQL.
    pub gold_sql: String,
    /// BIRD difficulty.
    #[serde(default)]
    pub difficulty: Option<String>,
    /// Spider hardness.
    #[serde(default)]
    pub hardness: Option<String>,
}

/// One line of a predictions file.
#[derive(Debug, Clone, Deserialize)]
pub struct Prediction {
    /// Dataset question id (number or string).
    pub question_id: Value,
    /// The system's SQL.
    pub predicted_sql: String,
}

/// Benchmark events joined from a dataset and a predictions file.
#[derive(Debug, Clone, Default)]
pub struct BenchmarkEvents {
    /// One event per dataset question, in dataset order.
    pub events: Vec<Event>,
    /// Question ids without a prediction (scored with empty SQL).
    pub missing_predictions: Vec<String>,
    /// Prediction question ids not in the dataset (ignored).
    pub unknown_predictions: Vec<String>,
}

/// A question id as the event id string (`195`, `"q-7"` → `q-7`).
fn id_string(id: &Value) -> Option<String> {
    match id {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        _ => None,
    }
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>, BackfillError> {
    let text = std::fs::read_to_string(path).map_err(|source| BackfillError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let item = serde_json::from_str(line).map_err(|e| BackfillError::Parse {
            path: path.to_path_buf(),
            line: index + 1,
            message: e.to_string(),
        })?;
        out.push(item);
    }
    Ok(out)
}

/// File stem of `path` (`preds/DAIL-SQL.jsonl` → `DAIL-SQL`).
pub fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".into())
}

/// Join `dataset` (`dev.jsonl`) with `predictions` into events (see the module docs).
pub fn benchmark_events(
    format: BackfillFormat,
    dataset: &Path,
    predictions: &Path,
    run_id: Option<&str>,
) -> Result<BenchmarkEvents, BackfillError> {
    let prefix = match format {
        BackfillFormat::Bird => "bird",
        BackfillFormat::Spider => "spider",
        BackfillFormat::Events => {
            return Err(BackfillError::Usage(
                "benchmark_events needs --format bird or spider".into(),
            ));
        }
    };
    let questions: Vec<BenchmarkQuestion> = read_jsonl(dataset)?;
    let predicted: Vec<Prediction> = read_jsonl(predictions)?;
    let stem = file_stem(predictions);
    let run_id = run_id.map_or_else(|| stem.clone(), str::to_string);

    let mut by_id: HashMap<String, String> = HashMap::with_capacity(predicted.len());
    for (index, p) in predicted.into_iter().enumerate() {
        let id = id_string(&p.question_id).ok_or_else(|| BackfillError::Parse {
            path: predictions.to_path_buf(),
            line: index + 1,
            message: format!(
                "question_id must be a number or string, got {}",
                p.question_id
            ),
        })?;
        if by_id.insert(id.clone(), p.predicted_sql).is_some() {
            tracing::warn!(question_id = %id, "duplicate prediction; the last one wins");
        }
    }

    let mut out = BenchmarkEvents::default();
    for (index, q) in questions.into_iter().enumerate() {
        let id = id_string(&q.question_id).ok_or_else(|| BackfillError::Parse {
            path: dataset.to_path_buf(),
            line: index + 1,
            message: format!(
                "question_id must be a number or string, got {}",
                q.question_id
            ),
        })?;
        let sql = match by_id.remove(&id) {
            Some(sql) => sql,
            None => {
                out.missing_predictions.push(id.clone());
                String::new()
            }
        };
        let evidence = q.evidence.filter(|e| !e.trim().is_empty());
        let enriched_question = match (format, &evidence) {
            (BackfillFormat::Bird, Some(evidence)) => Some(format!("{} {}", q.question, evidence)),
            _ => None,
        };
        out.events.push(Event {
            event_id: id,
            ts: None,
            app_id: Some(format!("{prefix}-{}", q.db_id)),
            agent_id: Some(stem.clone()),
            agent_version: None,
            model: None,
            question: q.question,
            enriched_question,
            sql,
            dialect: Some("sqlite".into()),
            run_id: Some(run_id.clone()),
            db_id: Some(q.db_id.clone()),
            gold: Some(Gold {
                sql: Some(q.gold_sql),
                db_id: Some(q.db_id),
                evidence,
                schema: None,
                difficulty: q.difficulty.or(q.hardness),
                extra: Default::default(),
            }),
            result: None,
            result_ignored: None,
            trace: None,
            extra: Default::default(),
        });
    }
    out.unknown_predictions = by_id.into_keys().collect();
    out.unknown_predictions.sort();
    Ok(out)
}

/// A backfill ready to run: its source, size and run id.
pub struct BackfillPlan {
    source: Box<dyn Source>,
    total: u64,
    transform: Option<EventTransform>,
    run_id: Option<String>,
    judge: PlanMode,
}

/// For a benchmark backfill, switch the gold metrics on with the benchmark's own data when the
/// config does not name any: databases from `<dataset dir>/databases`, schemas from
/// `<dataset dir>/tables.json` (also the STEF catalogue when `[stef] catalogues` is empty), and
/// the benchmark's EX convention (BIRD: set equality; Spider: test-suite).
pub fn apply_benchmark_gold_defaults(request: &BackfillRequest, config: &mut Config) {
    let format = request.format;
    if format == BackfillFormat::Events {
        return;
    }
    let dir = request
        .input
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    if config.gold.databases.is_none() {
        let databases = dir.join("databases");
        if databases.is_dir() {
            config.gold.databases = Some(databases);
        }
    }
    let tables = dir.join("tables.json");
    if config.gold.tables.is_empty() && tables.is_file() {
        config.gold.tables.push(tables.clone());
    }
    // The STEF catalogue checks read the same schemas.
    if config.stef.catalogues.is_empty() && tables.is_file() {
        config.stef.catalogues.push(tables);
    }
    config.gold.ex_convention = match format {
        BackfillFormat::Spider => crate::metrics::ex::ExConvention::SpiderTestSuite,
        _ => crate::metrics::ex::ExConvention::Bird,
    };
}

impl BackfillPlan {
    /// Read and join the inputs of `request`.
    pub fn prepare(
        request: &BackfillRequest,
        config: &Config,
    ) -> Result<BackfillPlan, BackfillError> {
        match request.format {
            BackfillFormat::Events => {
                if request.predictions.is_some() {
                    return Err(BackfillError::Usage(
                        "--predictions only applies to --format bird or spider".into(),
                    ));
                }
                let text = std::fs::read(&request.input).map_err(|source| BackfillError::Io {
                    path: request.input.clone(),
                    source,
                })?;
                let total = count_event_lines(&text);
                let transform = request.run_id.clone().map(|run_id| {
                    let transform: EventTransform =
                        Arc::new(move |event: &mut Event| event.run_id = Some(run_id.clone()));
                    transform
                });
                Ok(BackfillPlan {
                    source: Box::new(FileSource::new(
                        &request.input,
                        false,
                        config.pipeline.max_event_bytes,
                    )),
                    total,
                    transform,
                    run_id: request.run_id.clone(),
                    judge: request.judge,
                })
            }
            format @ (BackfillFormat::Bird | BackfillFormat::Spider) => {
                let predictions = request.predictions.as_deref().ok_or_else(|| {
                    BackfillError::Usage(format!(
                        "--predictions FILE is required for --format {}",
                        format.as_str()
                    ))
                })?;
                let joined = benchmark_events(
                    format,
                    &request.input,
                    predictions,
                    request.run_id.as_deref(),
                )?;
                if !joined.missing_predictions.is_empty() {
                    tracing::warn!(
                        count = joined.missing_predictions.len(),
                        first = %joined.missing_predictions.first().cloned().unwrap_or_default(),
                        "questions without a prediction are scored with empty SQL"
                    );
                }
                if !joined.unknown_predictions.is_empty() {
                    tracing::warn!(
                        count = joined.unknown_predictions.len(),
                        "predictions for question ids not in the dataset were ignored"
                    );
                }
                let run_id = joined.events.first().and_then(|e| e.run_id.clone());
                let mut payloads = Vec::with_capacity(joined.events.len());
                for event in &joined.events {
                    let bytes = serde_json::to_vec(event).map_err(|e| {
                        BackfillError::Usage(format!("cannot encode event {}: {e}", event.event_id))
                    })?;
                    payloads.push(bytes);
                }
                Ok(BackfillPlan {
                    total: payloads.len() as u64,
                    source: Box::new(MemorySource::new(
                        format!("{}:{}", format.as_str(), file_stem(predictions)),
                        payloads,
                    )),
                    transform: None,
                    run_id,
                    judge: request.judge,
                })
            }
        }
    }

    /// Number of messages the backfill will process (for progress bars).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The run id the rows carry (when one is imposed).
    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    /// Run through the configured scorer and sink (alerts evaluated, see
    /// [`BackfillPlan::run_with_alerts`]).
    pub async fn run(
        self,
        config: &Config,
        shutdown: watch::Receiver<bool>,
        progress: Option<ProgressFn>,
    ) -> Result<Summary, BackfillError> {
        Ok(self
            .run_with_alerts(config, shutdown, progress)
            .await?
            .summary)
    }

    /// Run through the configured scorer and sink, evaluating the `[alerts]` rules over every
    /// row (delivered only when `[alerts] enabled`); returns the summary and the alerts.
    pub async fn run_with_alerts(
        self,
        config: &Config,
        shutdown: watch::Receiver<bool>,
        progress: Option<ProgressFn>,
    ) -> Result<BackfillReport, BackfillError> {
        let scorer = Arc::new(build_scorer(config)?);
        self.run_with_scorer_and_alerts(config, scorer, shutdown, progress)
            .await
    }

    /// Run through `scorer` (e.g. one shared by several backfills, whose judge caches then
    /// carry over) and the configured sink. The summary's LLM usage counts this run only.
    pub async fn run_with_scorer(
        self,
        config: &Config,
        scorer: Arc<Scorer>,
        shutdown: watch::Receiver<bool>,
        progress: Option<ProgressFn>,
    ) -> Result<Summary, BackfillError> {
        Ok(self
            .run_with_scorer_and_alerts(config, scorer, shutdown, progress)
            .await?
            .summary)
    }

    /// [`BackfillPlan::run_with_scorer`], returning the alerts too (see
    /// [`BackfillPlan::run_with_alerts`]).
    pub async fn run_with_scorer_and_alerts(
        self,
        config: &Config,
        scorer: Arc<Scorer>,
        shutdown: watch::Receiver<bool>,
        progress: Option<ProgressFn>,
    ) -> Result<BackfillReport, BackfillError> {
        let store = config.store();
        let AssembledPipeline {
            mut pipeline,
            alerts,
            telemetry,
            evaluations,
            ..
        } = assemble_pipeline(
            config,
            RunMode::Batch { judge: self.judge },
            self.source,
            &store,
            scorer,
            None,
        )
        .await?;
        if let Some(transform) = self.transform {
            pipeline = pipeline.with_transform(transform);
        }
        if let Some(progress) = progress {
            pipeline = pipeline.with_progress(progress);
        }
        let mut result = pipeline.run(shutdown).await;
        finish_evaluations(evaluations, TELEMETRY_GRACE, result.as_mut().ok()).await;
        // The pipeline dropped its handle: the engine drains what it was given.
        let alerts = match alerts {
            Some(service) => service.finish_recorded(ALERT_DELIVERY_GRACE).await.1,
            None => Vec::new(),
        };
        if let Some(telemetry) = telemetry {
            finish_telemetry(telemetry, TELEMETRY_GRACE).await;
        }
        Ok(BackfillReport {
            summary: result?,
            alerts,
        })
    }
}

/// The lines of an events file that are not blank (the backfill's total, for its progress):
/// the line ends found by `memchr`, a line read only up to its first non-blank byte.
fn count_event_lines(text: &[u8]) -> u64 {
    let mut count = 0u64;
    let mut start = 0usize;
    for end in memchr::memchr_iter(b'\n', text).chain(std::iter::once(text.len())) {
        if text
            .get(start..end)
            .is_some_and(|line| !line.iter().all(u8::is_ascii_whitespace))
        {
            count += 1;
        }
        start = end + 1;
    }
    count
}

#[cfg(test)]
mod tests {
    #[test]
    fn event_lines_are_the_non_blank_lines() {
        for (text, lines) in [
            ("", 0),
            ("\n", 0),
            ("{}", 1),
            ("{}\n", 1),
            ("{}\n\n  \t\n{}", 2),
            ("\n{}\r\n{}\n \n", 2),
            ("  {}  \n", 1),
        ] {
            let reference = text
                .as_bytes()
                .split(|&b| b == b'\n')
                .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
                .count() as u64;
            assert_eq!(count_event_lines(text.as_bytes()), lines, "{text:?}");
            assert_eq!(reference, lines, "{text:?}");
        }
    }
    use super::*;
    use sqlgrade_testkit::data::data_dir;

    #[test]
    fn bird_join_uses_question_ids_and_file_stem() {
        let bird = data_dir().join("bird");
        let joined = benchmark_events(
            BackfillFormat::Bird,
            &bird.join("dev.jsonl"),
            &bird.join("predictions/DAIL-SQL.jsonl"),
            None,
        )
        .unwrap();
        assert_eq!(joined.events.len(), 432);
        assert!(joined.missing_predictions.is_empty());
        assert!(joined.unknown_predictions.is_empty());
        let first = &joined.events[0];
        assert_eq!(first.event_id, "195");
        assert_eq!(first.run_id.as_deref(), Some("DAIL-SQL"));
        assert_eq!(first.agent_id.as_deref(), Some("DAIL-SQL"));
        assert_eq!(first.app_id.as_deref(), Some("bird-toxicology"));
        assert_eq!(first.question, "What is the most common bond type?");
        assert_eq!(
            first.enriched_question.as_deref(),
            Some(
                "What is the most common bond type? most common bond type refers MAX(COUNT(bond_type))"
            )
        );
        assert!(first.sql.starts_with("SELECT bond_type FROM bond"));
        let gold = first.gold.as_ref().unwrap();
        assert_eq!(gold.db_id.as_deref(), Some("toxicology"));
        assert_eq!(gold.difficulty.as_deref(), Some("simple"));
        assert!(
            gold.sql
                .as_deref()
                .unwrap()
                .starts_with("SELECT T.bond_type")
        );
        // Round trip through the input contract.
        let bytes = serde_json::to_vec(first).unwrap();
        assert_eq!(&Event::decode(&bytes).unwrap(), first);
    }

    #[test]
    fn spider_join_and_explicit_run_id() {
        let spider = data_dir().join("spider");
        let joined = benchmark_events(
            BackfillFormat::Spider,
            &spider.join("dev.jsonl"),
            &spider.join("predictions/TA-ACL.jsonl"),
            Some("nightly-7"),
        )
        .unwrap();
        assert_eq!(joined.events.len(), 1034);
        let e = &joined.events[0];
        assert_eq!(e.event_id, "0");
        assert_eq!(e.run_id.as_deref(), Some("nightly-7"));
        assert_eq!(e.app_id.as_deref(), Some("spider-concert_singer"));
        assert!(e.enriched_question.is_none());
    }

    #[test]
    fn missing_and_unknown_predictions_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("dev.jsonl");
        let preds = dir.path().join("sys.jsonl");
        std::fs::write(
            &dev,
            concat!(
                r#"{"question_id": 1, "db_id": "d", "question": "q1", "evidence": "", "gold_sql": "SELECT 1"}"#,
                "\n",
                r#"{"question_id": 2, "db_id": "d", "question": "q2", "gold_sql": "SELECT 2"}"#,
                "\n"
            ),
        )
        .unwrap();
        std::fs::write(
            &preds,
            concat!(
                r#"{"question_id": 1, "predicted_sql": "SELECT 1"}"#,
                "\n",
                r#"{"question_id": 9, "predicted_sql": "SELECT 9"}"#,
                "\n"
            ),
        )
        .unwrap();
        let joined = benchmark_events(BackfillFormat::Bird, &dev, &preds, None).unwrap();
        assert_eq!(joined.events.len(), 2);
        assert_eq!(joined.missing_predictions, vec!["2"]);
        assert_eq!(joined.unknown_predictions, vec!["9"]);
        assert_eq!(joined.events[1].sql, "");
        assert!(
            joined.events[0].enriched_question.is_none(),
            "blank evidence"
        );
    }

    #[test]
    fn bad_lines_are_located() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("dev.jsonl");
        std::fs::write(&dev, "{\"question_id\": 1}\n").unwrap();
        let err = benchmark_events(BackfillFormat::Bird, &dev, &dev, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("dev.jsonl:1"), "{err}");
    }
}
