//! Building the pipeline's components from a [`Config`]: source, sink and scorer.
//!
//! Every component is built from configuration; a misconfigured one is a [`BuildError`] with
//! the reason, never silently replaced by something else.

use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, JudgeKind, SinkKind, SourceKind};
use crate::health::Health;
use crate::judge::Judge;
use crate::judge::deterministic::DeterministicJudge;
use crate::scorer::{ProfileLookup, Scorer, ScorerOptions, WatchedRules};
use crate::sink::clickhouse::{ClickHouseSettings, ClickHouseSink};
use crate::sink::{JsonlSink, Sink, SinkError, StdoutSink};
use crate::source::kafka::{KafkaSettings, KafkaSource};
use crate::source::{FileSource, Source, StdinSource};
use crate::stef::rules::RulesStore;

/// Why a component could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The sink could not be opened.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// The source could not be created (e.g. invalid librdkafka properties).
    #[error(transparent)]
    Source(#[from] crate::source::SourceError),
    /// Rule profiles could not be loaded.
    #[error("cannot load rule profiles: {0}")]
    Rules(String),
    /// Gold metrics could not be set up.
    #[error(transparent)]
    Gold(#[from] crate::pipeline::gold::GoldSetupError),
    /// The LLM judge could not be set up (bad URL, missing API key, broken prompt template).
    #[error("cannot set up the LLM judge: {0}")]
    Judge(String),
}

/// The configured source (`[source]`).
pub fn build_source(config: &Config) -> Result<Box<dyn Source>, BuildError> {
    build_source_with_health(config, None)
}

/// The configured source, reporting its state to `health` (the daemon's `/readyz`).
pub fn build_source_with_health(
    config: &Config,
    health: Option<Arc<Health>>,
) -> Result<Box<dyn Source>, BuildError> {
    let max_line = config.pipeline.max_event_bytes;
    match config.source.kind {
        SourceKind::File => Ok(Box::new(FileSource::new(
            &config.source.path,
            config.source.follow,
            max_line,
        ))),
        SourceKind::Stdin => Ok(Box::new(StdinSource::new(max_line))),
        SourceKind::Kafka => Ok(Box::new(KafkaSource::new(
            KafkaSettings::from_config(config),
            health,
        )?)),
    }
}

/// The configured sink (`[sink]`).
pub async fn build_sink(config: &Config) -> Result<Box<dyn Sink>, BuildError> {
    build_sink_with_health(config, None).await
}

/// The configured sink, reporting its state to `health` (the daemon's `/readyz`).
pub async fn build_sink_with_health(
    config: &Config,
    health: Option<Arc<Health>>,
) -> Result<Box<dyn Sink>, BuildError> {
    match config.sink.kind {
        SinkKind::Jsonl => Ok(Box::new(JsonlSink::open(&config.sink.dir).await?)),
        SinkKind::Stdout => Ok(Box::new(StdoutSink::new())),
        SinkKind::Clickhouse => {
            let sink = ClickHouseSink::new(ClickHouseSettings::from_config(&config.sink));
            Ok(Box::new(match health {
                Some(h) => sink.with_health(h),
                None => sink,
            }))
        }
    }
}

/// The configured judge (`[judge]`).
pub fn build_judge(config: &Config) -> Result<Arc<dyn Judge>, BuildError> {
    match config.judge.kind {
        JudgeKind::Deterministic => Ok(Arc::new(DeterministicJudge)),
        JudgeKind::Llm => crate::judge::llm::LlmJudge::from_judge_config(&config.judge)
            .map(|judge| Arc::new(judge) as Arc<dyn Judge>)
            .map_err(|e| BuildError::Judge(e.to_string())),
    }
}

/// The rule profiles (`[rules]`).
///
/// A missing directory means every app gets the default profile (logged); invalid profile files
/// are logged and skipped (the store reports them); with `reload_interval_ms > 0` the directory
/// is watched for changes for as long as the returned lookup lives.
pub fn build_profiles(config: &Config) -> Result<Arc<dyn ProfileLookup>, BuildError> {
    let dir = &config.rules.dir;
    if !dir.is_dir() {
        tracing::info!(
            dir = %dir.display(),
            "rules directory not found; every app uses the default rule profile"
        );
        return Ok(Arc::new(RulesStore::empty()));
    }
    let (store, report) =
        RulesStore::load_dir(dir).map_err(|e| BuildError::Rules(e.to_string()))?;
    for error in &report.errors {
        tracing::warn!(%error, "rule profile skipped");
    }
    tracing::info!(dir = %dir.display(), apps = ?report.loaded, "rule profiles loaded");
    if config.rules.reload_interval_ms == 0 {
        return Ok(Arc::new(store));
    }
    Ok(Arc::new(WatchedRules::new(
        store,
        Duration::from_millis(config.rules.reload_interval_ms),
    )))
}

/// The scorer: judge, rule profiles and limits from the config.
pub fn build_scorer(config: &Config) -> Result<Scorer, BuildError> {
    let judge = build_judge(config)?;
    let profiles = build_profiles(config)?;
    let scorer = Scorer::new(
        judge,
        profiles,
        ScorerOptions {
            max_sql_bytes: config.pipeline.max_sql_bytes,
        },
    );
    Ok(
        match crate::pipeline::gold::SqliteGoldMetrics::from_config(&config.gold)? {
            Some(gold) => scorer.with_gold(Arc::new(gold)),
            None => scorer,
        },
    )
}
