//! Each component from its own config section: source, sink, judge, LLM client, durable cache,
//! rule profiles, scorer.

use std::sync::Arc;
use std::time::Duration;

use crate::config::{
    Config, DurableCacheMode, JudgeConfig, LlmJudgeConfig, SourceFormat, SourceKind,
};
use crate::sources::otlp::{OtlpEncoding, OtlpMessages};
use crate::stores::clickhouse::judge_cache::{ClickHouseJudgeCache, ClickHouseJudgeCacheOptions};

use super::error::BuildError;
use crate::judge::deterministic::DeterministicJudge;
use crate::judge::{Judge, StructuredJudge};
use crate::llm::{DurableCache, LlmClient, LlmJudge};
use crate::metrics::judged::JudgedScorer;
use crate::score::gold::BlockingPool;
use crate::score::profiles::RulesStore;
use crate::score::{CatalogueStore, ProfileLookup, Scorer, ScorerOptions, WatchedRules};
use crate::sources::kafka::KafkaSource;
use crate::sources::{FileSource, Source, StdinSource};
use crate::stores::Store;
use crate::telemetry::health::Health;

/// The configured source (`[source]`).
pub fn build_source(config: &Config) -> Result<Box<dyn Source>, BuildError> {
    build_source_with_health(config, None)
}

/// The configured source, reporting its state to `health` (the daemon's `/readyz`).
pub fn build_source_with_health(
    config: &Config,
    health: Option<Arc<Health>>,
) -> Result<Box<dyn Source>, BuildError> {
    let encoding = match config.source.format {
        SourceFormat::Event => None,
        SourceFormat::OtlpProto => Some(OtlpEncoding::Protobuf),
        SourceFormat::OtlpJson => Some(OtlpEncoding::Json),
    };
    // A line holding a whole OTLP request may be as long as a request may be.
    let max_line = match encoding {
        Some(_) => config
            .pipeline
            .max_event_bytes
            .max(config.source.otlp.max_body_bytes),
        None => config.pipeline.max_event_bytes,
    };
    let source: Box<dyn Source> = match &config.source.kind {
        SourceKind::File(file) => Box::new(FileSource::new(&file.path, file.follow, max_line)),
        SourceKind::Stdin => Box::new(StdinSource::new(max_line)),
        SourceKind::Kafka(kafka) => Box::new(KafkaSource::new(kafka, health)?),
        SourceKind::Otlp => Box::new(crate::sources::otlp::OtlpSource::bind(
            &config.source.otlp,
            &config.source.otlp_mapping,
            health,
        )?),
    };
    Ok(match encoding {
        Some(encoding) if config.source.kind != SourceKind::Otlp => Box::new(OtlpMessages::new(
            source,
            encoding,
            &config.source.otlp,
            &config.source.otlp_mapping,
        )),
        _ => source,
    })
}

/// The configured judge (`[judge]`). The LLM judge's client consults its in-memory cache, then
/// the durable cache `judge.durable_cache` selects ([`build_durable_cache`]), then the endpoint.
pub fn build_judge(config: &Config) -> Result<Arc<dyn Judge>, BuildError> {
    match &config.judge {
        JudgeConfig::Deterministic => Ok(Arc::new(DeterministicJudge)),
        JudgeConfig::Llm(llm) => Ok(Arc::new(LlmJudge::new(build_llm_client_for(config, llm)?))),
    }
}

/// The LLM client for the judge settings `judge` (`[judge]`, or `[gold.judge]` for the gold
/// metrics): endpoint, API key (an inline `api_key` wins over `api_key_env`), limits, the
/// in-memory cache and the durable cache of [`build_durable_cache`]. LLM-backed metrics built
/// from one config share one client where they can (FLEX, ROSE and Hybrid-EX use the STEF
/// judge's when they name the same endpoint and model), so that they share caches and limits.
pub fn build_llm_client_for(
    config: &Config,
    judge: &LlmJudgeConfig,
) -> Result<Arc<LlmClient>, BuildError> {
    let section = if config
        .judge
        .llm()
        .is_some_and(|own| std::ptr::eq(judge, own))
    {
        "judge"
    } else {
        "gold.judge"
    };
    let client = LlmClient::new(judge).map_err(|source| BuildError::Judge { section, source })?;
    Ok(Arc::new(
        match build_durable_cache(judge, &config.store()) {
            Some(durable) => client.with_durable_cache(durable),
            None => client,
        },
    ))
}

/// The durable verdict cache `judge.durable_cache` selects: ClickHouse `judge_cache` on the
/// `[clickhouse]` server for `clickhouse`, and for `auto` when the store is ClickHouse; none for
/// `off` or `auto` with another store. Lookups wait at most `judge.durable_cache_timeout_ms`;
/// the writer's batch, retry window and queue bound are `judge.durable_cache_write_batch`,
/// `durable_cache_retry_ms` and `durable_cache_max_queued`.
pub fn build_durable_cache(judge: &LlmJudgeConfig, store: &Store) -> Option<Arc<dyn DurableCache>> {
    let sink = match judge.durable_cache {
        DurableCacheMode::Auto => store.clickhouse()?,
        DurableCacheMode::Clickhouse => store.clickhouse_server(),
        DurableCacheMode::Off => return None,
    };
    tracing::info!(
        url = %crate::config::redact_url(crate::stores::clickhouse::url(sink)),
        database = %sink.database,
        "durable judge cache: ClickHouse judge_cache"
    );
    Some(Arc::new(ClickHouseJudgeCache::new(
        sink,
        ClickHouseJudgeCacheOptions {
            lookup_timeout: Duration::from_millis(judge.durable_cache_timeout_ms.max(1)),
            write_batch: judge.durable_cache_write_batch.max(1),
            outage_backoff: Duration::from_millis(judge.durable_cache_retry_ms.max(1)),
            max_queued: judge
                .durable_cache_max_queued
                .max(judge.durable_cache_write_batch.max(1)),
            ..ClickHouseJudgeCacheOptions::default()
        },
    )))
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
    let (store, report) = RulesStore::load_dir(dir).map_err(BuildError::Rules)?;
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

/// The scorer: the deterministic judge for every event's line-rate row, the LLM judge (with
/// `judge.kind = "llm"`) for the second pass, rule profiles and limits from the config, plus
/// the gold metrics of `[gold]` (with the LLM-judged ones when `gold.metrics` names any).
pub fn build_scorer(config: &Config) -> Result<Scorer, BuildError> {
    let llm_judge = match config.judge {
        JudgeConfig::Llm(_) => Some(build_judge(config)?),
        JudgeConfig::Deterministic => None,
    };
    let profiles = build_profiles(config)?;
    let gold = crate::score::gold::SqliteGoldMetrics::from_config(&config.gold)?;
    let gold = match gold {
        Some(gold) => Some(match build_judged(config, llm_judge.as_deref())? {
            Some((judged, shared)) => gold.with_judged(judged, shared),
            None => gold,
        }),
        None => None,
    };
    let mut scorer = Scorer::new(
        Arc::new(DeterministicJudge),
        profiles,
        ScorerOptions {
            max_sql_bytes: config.pipeline.max_sql_bytes,
        },
    )
    .with_verdict_model(config.stef.verdict_model()?);
    if let Some(judge) = llm_judge {
        scorer = scorer.with_judged_pass(judge);
    }
    let catalogues = CatalogueStore::new(config.stef.catalogues.clone(), config.rules.dir.clone());
    let watcher = (config.rules.reload_interval_ms > 0)
        .then(|| catalogues.watch(Duration::from_millis(config.rules.reload_interval_ms)));
    scorer = scorer.with_catalogues(catalogues, watcher);
    if let Some(dir) = &config.stef.probe_databases {
        scorer = scorer.with_prober(crate::score::probe::Prober::new(
            dir.clone(),
            Duration::from_millis(config.stef.probe_timeout_ms),
            config.stef.probe_workers,
        ));
    }
    Ok(match gold {
        Some(gold) => scorer.with_gold(Arc::new(gold)),
        None => scorer,
    })
}

/// The LLM-judged gold metrics (FLEX, ROSE, Hybrid-EX) named in `gold.metrics`, and whether
/// their client is the STEF judge's. They use `[gold.judge]`, else `[judge]`; the STEF judge's
/// client (cache, rate limits, concurrency) is shared whenever both name the same endpoint and
/// model. Named metrics without an LLM judge are an error, never skipped.
pub(super) fn build_judged(
    config: &Config,
    stef_judge: Option<&dyn Judge>,
) -> Result<Option<(JudgedScorer, bool)>, BuildError> {
    let Some(options) = crate::score::gold::judged_options(&config.gold) else {
        return Ok(None);
    };
    let Some(settings) = config.gold_judge() else {
        return Err(BuildError::NoGoldJudge);
    };
    let stef_settings = config.judge.llm();
    let same_endpoint = stef_settings.is_some_and(|stef| {
        settings.base_url.trim() == stef.base_url.trim() && settings.model == stef.model
    });
    if same_endpoint && let Some(client) = stef_judge.and_then(|j| j.structured_judge()) {
        if config.gold.judge.is_some() && config.gold.judge.as_ref() != stef_settings {
            tracing::warn!(
                "[gold.judge] names the same endpoint and model as [judge]: the gold metrics \
                 share the STEF judge's client, with [judge]'s limits and cache"
            );
        }
        return Ok(Some((judged_scorer(client, options), true)));
    }
    let client = build_llm_client_for(config, settings)?;
    Ok(Some((judged_scorer(client, options), false)))
}

/// The judged metrics over `judge`, their CPU-heavy steps on tokio's blocking pool.
pub(super) fn judged_scorer(
    judge: Arc<dyn StructuredJudge>,
    options: crate::metrics::judged::JudgedOptions,
) -> JudgedScorer {
    JudgedScorer::new(judge, options).with_offload(Arc::new(BlockingPool))
}
