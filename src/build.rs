//! Wiring a run from a [`Config`]: source, sink, judge, scorer — the one place `run`,
//! `backfill` and `score` build their components.
//!
//! Every component takes its own config section; a misconfigured one is a [`BuildError`] with
//! the reason, never silently replaced by something else.

use std::sync::Arc;
use std::time::Duration;

use crate::alert::FiringSeries;
use crate::clickhouse::judge_cache::{ClickHouseJudgeCache, ClickHouseJudgeCacheOptions};
use crate::clickhouse::sink::ClickHouseSink;
use crate::config::{
    Config, JudgeConfig, JudgeKind, SinkConfig, SinkKind, SourceConfig, SourceKind,
};
use crate::judging::planner::PlanMode;
use crate::judging::stage::Leftover;
use crate::judging::work::QueueMode;
use crate::judging::{JudgeStage, JudgeStats, Planner, WorkQueue, WorkSink};
use crate::kafka::work::{KafkaWorkSink, spawn_kafka_feeder};
use crate::pipeline::SecondPass;
use crate::sampling::{BudgetLedger, DailyCaps, Prices};
use tokio::sync::watch;

use crate::health::{ComponentHealth, Health, Phase};
use crate::judge::deterministic::DeterministicJudge;
use crate::judge::{Judge, StructuredJudge};
use crate::kafka::KafkaSource;
use crate::llm::{DurableCache, LlmClient, LlmJudge};
use crate::metrics::judged::JudgedScorer;
use crate::pipeline::{Pipeline, PipelineError};
use crate::score::gold::BlockingPool;
use crate::score::profiles::RulesStore;
use crate::score::{CatalogueStore, ProfileLookup, Scorer, ScorerOptions, WatchedRules};
use crate::sink::{JsonlSink, Sink, SinkError, StdoutSink};
use crate::source::{FileSource, Source, StdinSource};
use crate::summary::Summary;

/// Why a component could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The health endpoint could not start.
    #[error(transparent)]
    Health(#[from] crate::health::HealthError),
    /// The alert engine could not start.
    #[error(transparent)]
    Alerts(#[from] crate::alert::delivery::AlertError),
    /// Telemetry export could not start.
    #[error(transparent)]
    Telemetry(#[from] crate::telemetry::TelemetryError),
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
    Gold(#[from] crate::score::gold::GoldSetupError),
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
        SourceKind::Kafka => Ok(Box::new(KafkaSource::new(&config.source, health)?)),
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
            let sink = ClickHouseSink::new(&config.sink);
            Ok(Box::new(match health {
                Some(h) => sink.with_health(h),
                None => sink,
            }))
        }
    }
}

/// The configured judge (`[judge]`). The LLM judge's client consults its in-memory cache, then
/// the durable cache `judge.durable_cache` selects ([`build_durable_cache`]), then the endpoint.
pub fn build_judge(config: &Config) -> Result<Arc<dyn Judge>, BuildError> {
    match config.judge.kind {
        JudgeKind::Deterministic => Ok(Arc::new(DeterministicJudge)),
        JudgeKind::Llm => Ok(Arc::new(LlmJudge::new(build_llm_client(config)?))),
    }
}

/// The LLM client of `[judge]` (whatever `judge.kind` says); see [`build_llm_client_for`].
pub fn build_llm_client(config: &Config) -> Result<Arc<LlmClient>, BuildError> {
    build_llm_client_for(config, &config.judge)
}

/// The LLM client for the judge settings `judge` (`[judge]`, or `[gold.judge]` for the gold
/// metrics): endpoint, API key (an inline `api_key` wins over `api_key_env`), limits, the
/// in-memory cache and the durable cache of [`build_durable_cache`]. LLM-backed metrics built
/// from one config share one client where they can (FLEX, ROSE and Hybrid-EX use the STEF
/// judge's when they name the same endpoint and model), so that they share caches and limits.
pub fn build_llm_client_for(
    config: &Config,
    judge: &JudgeConfig,
) -> Result<Arc<LlmClient>, BuildError> {
    let client = LlmClient::new(judge).map_err(|e| BuildError::Judge(e.to_string()))?;
    Ok(Arc::new(match build_durable_cache(judge, &config.sink) {
        Some(durable) => client.with_durable_cache(durable),
        None => client,
    }))
}

/// The durable verdict cache `judge.durable_cache` selects: ClickHouse `judge_cache` on the
/// `[sink]` server for `clickhouse`, and for `auto` when `sink.kind = "clickhouse"`; none for
/// `off` or `auto` with another sink. Lookups wait at most `judge.durable_cache_timeout_ms`;
/// the writer's batch, retry window and queue bound are `judge.durable_cache_write_batch`,
/// `durable_cache_retry_ms` and `durable_cache_max_queued`.
pub fn build_durable_cache(
    judge: &JudgeConfig,
    sink: &SinkConfig,
) -> Option<Arc<dyn DurableCache>> {
    if !judge.durable_cache.uses_clickhouse(sink.kind) {
        return None;
    }
    tracing::info!(
        url = %crate::config::redact_url(crate::clickhouse::url(sink)),
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

/// The scorer: the deterministic judge for every event's line-rate row, the LLM judge (with
/// `judge.kind = "llm"`) for the second pass, rule profiles and limits from the config, plus
/// the gold metrics of `[gold]` (with the LLM-judged ones when `gold.metrics` names any).
pub fn build_scorer(config: &Config) -> Result<Scorer, BuildError> {
    let llm_judge = match config.judge.kind {
        JudgeKind::Llm => Some(build_judge(config)?),
        JudgeKind::Deterministic => None,
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
    );
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

/// The second, LLM-judged pass of a run, when the scorer has an LLM judge: the planner
/// (`mode`: the live policy or a census), the hand-over of selected work (an in-process queue,
/// or the Kafka work topic with `judge.budget.work_topic`), and the judge stage. `firing` is the
/// alert engine's view of alerting series (a priority slice).
pub fn build_second_pass(
    config: &Config,
    scorer: &Arc<Scorer>,
    mode: PlanMode,
    firing: Arc<FiringSeries>,
) -> Result<Option<SecondPass>, BuildError> {
    let Some(judge) = scorer.judged_pass().cloned() else {
        return Ok(None);
    };
    let budget = &config.judge.budget;
    let stats = Arc::new(JudgeStats::default());
    let planner = Arc::new(Planner::new(
        budget,
        config.judge.max_requests_per_second,
        mode,
        config.alerts.series_key.clone(),
        firing,
        Arc::clone(&stats),
    ));
    let ledger = BudgetLedger::new(
        DailyCaps {
            requests: budget.max_requests_per_day,
            tokens: budget.max_tokens_per_day,
            cost: budget.max_cost_per_day,
        },
        Prices {
            input_per_1k: budget.price_input_per_1k,
            output_per_1k: budget.price_output_per_1k,
        },
    );
    let census = mode == PlanMode::Census;
    let kafka_topic = budget
        .work_topic
        .as_deref()
        .filter(|_| config.source.kind == SourceKind::Kafka && !census);
    let (queue, work_sink, feeder, leftover): (_, Arc<dyn WorkSink>, _, _) = match kafka_topic {
        Some(topic) => {
            // The judge stage reads the work topic in its own group; its queue holds what the
            // consumer has in flight (bounded by the same capacity), most important first.
            let queue = WorkQueue::new(budget.queue_capacity, QueueMode::Block, Arc::clone(&stats));
            let consumer = SourceConfig {
                topics: vec![topic.to_string()],
                group_id: format!("{}-judge", config.source.group_id),
                dead_letter_topic: None,
                max_in_flight: budget.queue_capacity,
                ..config.source.clone()
            };
            let source = KafkaSource::new(&consumer, None)?;
            let stop = Arc::new(tokio::sync::Notify::new());
            let feeder =
                spawn_kafka_feeder(Box::new(source), Arc::clone(&queue), Arc::clone(&stop));
            let producer = crate::kafka::producer(&config.source, "sqlgrade-judge-work")?;
            let sink = Arc::new(KafkaWorkSink::new(producer, topic, stop));
            (
                queue,
                sink as Arc<dyn WorkSink>,
                Some(feeder),
                Leftover::Keep,
            )
        }
        None => {
            let mode = if census {
                QueueMode::Block
            } else {
                QueueMode::Shed
            };
            let queue = WorkQueue::new(budget.queue_capacity, mode, Arc::clone(&stats));
            let sink = Arc::clone(&queue) as Arc<dyn WorkSink>;
            (queue, sink, None, Leftover::Shed)
        }
    };
    let stage = JudgeStage::new(
        Arc::clone(&queue),
        queue.closed_signal(),
        Arc::clone(scorer),
        judge,
        ledger,
        Arc::clone(&stats),
        config.judge.max_concurrency,
        Duration::from_millis(budget.max_wait_ms.max(1)),
        (!census).then(|| drain_grace(budget.drain_grace_ms, config.pipeline.shutdown_timeout_ms)),
        leftover,
    );
    tracing::info!(
        mode = ?mode,
        uniform_rate = budget.uniform_rate,
        work_topic = kafka_topic.unwrap_or("(in-process)"),
        "LLM judge: second pass on"
    );
    Ok(Some(SecondPass {
        planner,
        work_sink,
        stage,
        feeder,
        stats,
    }))
}

/// The LLM-judged gold metrics (FLEX, ROSE, Hybrid-EX) named in `gold.metrics`, and whether
/// their client is the STEF judge's. They use `[gold.judge]`, else `[judge]`; the STEF judge's
/// client (cache, rate limits, concurrency) is shared whenever both name the same endpoint and
/// model. Named metrics without an LLM judge are an error, never skipped.
fn build_judged(
    config: &Config,
    stef_judge: Option<&dyn Judge>,
) -> Result<Option<(JudgedScorer, bool)>, BuildError> {
    let Some(options) = crate::score::gold::judged_options(&config.gold) else {
        return Ok(None);
    };
    let Some(settings) = config.gold_judge() else {
        return Err(BuildError::Judge(
            "gold.metrics names LLM-judged metrics (flex, rose, hybrid_ex), but no LLM judge is \
             configured: set [judge] kind = \"llm\" or add [gold.judge] with kind = \"llm\""
                .into(),
        ));
    };
    let same_endpoint = config.judge.kind == JudgeKind::Llm
        && settings.base_url.trim() == config.judge.base_url.trim()
        && settings.model == config.judge.model;
    if same_endpoint && let Some(client) = stef_judge.and_then(|j| j.structured_judge()) {
        if config
            .gold
            .judge
            .as_ref()
            .is_some_and(|g| g != &config.judge)
        {
            tracing::warn!(
                "[gold.judge] names the same endpoint and model as [judge]: the gold metrics \
                 share the STEF judge's client, with [judge]'s limits and cache"
            );
        }
        return Ok(Some((judged_scorer(client, options), true)));
    }
    let client = build_llm_client_for(config, settings)
        .map_err(|e| BuildError::Judge(format!("gold metrics: {e}")))?;
    Ok(Some((judged_scorer(client, options), false)))
}

/// The judged metrics over `judge`, their CPU-heavy steps on tokio's blocking pool.
fn judged_scorer(
    judge: Arc<dyn StructuredJudge>,
    options: crate::metrics::judged::JudgedOptions,
) -> JudgedScorer {
    JudgedScorer::new(judge, options).with_offload(Arc::new(BlockingPool))
}

/// The daemon of `sqlgrade run`, wired from a [`Config`]: health endpoint, source, scorer, sink,
/// alert engine and telemetry around one [`Pipeline`].
pub struct Daemon {
    pipeline: Pipeline,
    health: Arc<Health>,
    health_server: Option<crate::health::HealthServer>,
    alerts: Option<crate::alert::AlertService>,
    telemetry: Option<crate::telemetry::Telemetry>,
    /// The agreement monitor and how often it polls (`[server] agreement_poll_ms`).
    agreement: Option<(crate::serve::agreement::AgreementMonitor, Duration)>,
    shutdown_timeout: Duration,
}

impl Daemon {
    /// Build every component of `config` (nothing is read from the source yet). Must be called
    /// inside a tokio runtime.
    pub async fn build(config: &Config) -> Result<Daemon, BuildError> {
        let health = Arc::new(Health::new());
        let health_server = if config.server.listen.trim().is_empty() {
            None
        } else {
            let review = if config.server.review {
                match crate::serve::store_for(&config.sink, config.server.review_max_rows) {
                    Some(store) => Some(crate::serve::router(std::sync::Arc::new(
                        crate::serve::ReviewState::new(store, config.server.token.clone())
                            .with_calibration(
                                crate::serve::view::CalibrationSample::from_settings(
                                    &config.server,
                                ),
                            ),
                    ))),
                    None => {
                        tracing::warn!(
                            "[server] review needs a JSONL or ClickHouse sink; the stdout sink has nothing to read"
                        );
                        None
                    }
                }
            } else {
                None
            };
            Some(crate::health::serve(&config.server.listen, health.clone(), review).await?)
        };
        let scorer = Arc::new(build_scorer(config)?);
        let source = build_source_with_health(config, Some(health.clone()))?;
        let sink = build_sink_with_health(config, Some(health.clone())).await?;
        tracing::info!(
            source = ?config.source.kind,
            path = %config.source.path.display(),
            follow = config.source.follow,
            sink = ?config.sink.kind,
            dir = %config.sink.dir.display(),
            judge = %scorer.judge_kind(),
            workers = config.pipeline.workers,
            "sqlgrade run starting"
        );
        let mut pipeline = Pipeline::new(
            source,
            sink,
            Arc::clone(&scorer),
            &config.pipeline,
            &config.sink,
        );
        let mut firing = Arc::new(FiringSeries::default());
        let mut alert_handle = None;
        let alerts = if config.alerts.enabled {
            let (service, handle) = crate::alert::AlertService::start(
                config.alerts.clone(),
                crate::alert::delivery::Destinations::from_config(&config.alerts, &config.sink),
            )?;
            firing = service.firing();
            alert_handle = Some(handle.clone());
            pipeline = pipeline.with_alerts(handle);
            Some(service)
        } else {
            None
        };
        let agreement = agreement_monitor(config, alert_handle);
        let second_pass = build_second_pass(config, &scorer, PlanMode::Sample, firing)?;
        let telemetry = if config.telemetry.enabled {
            let mut telemetry = crate::telemetry::Telemetry::start(&config.telemetry)?;
            // Every LLM client of the run: the STEF judge's and the gold metrics' own, if any.
            let judged = Arc::clone(&scorer);
            telemetry.observe_judge(move || judged.llm_usage().total());
            if let Some(second_pass) = &second_pass {
                telemetry.observe_judge_pass(Arc::clone(&second_pass.stats));
            }
            if let Some((monitor, _)) = &agreement {
                let board = monitor.board();
                telemetry.observe_agreement(move || board.rows());
            }
            pipeline = pipeline.with_metrics(telemetry.metrics());
            Some(telemetry)
        } else {
            None
        };
        if let Some(second_pass) = second_pass {
            pipeline = pipeline.with_second_pass(second_pass);
        }
        Ok(Daemon {
            pipeline,
            health,
            health_server,
            alerts,
            telemetry,
            agreement,
            shutdown_timeout: Duration::from_millis(config.pipeline.shutdown_timeout_ms.max(1)),
        })
    }

    /// The daemon's health registry (`/healthz`, `/readyz`).
    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// Run until the source ends or `shutdown` turns `true`; then stop the health endpoint, give
    /// pending alert deliveries a bounded grace period, flush telemetry, and return what the run
    /// wrote.
    ///
    /// Once `shutdown` turns `true`, all of that finishes within `pipeline.shutdown_timeout_ms`
    /// whatever is unreachable: past it the run returns [`PipelineError::ShutdownTimeout`]
    /// naming what was still pending (the unhealthy components), and the pipeline is left
    /// behind. Nothing it had not written was acknowledged, so that is redelivered on the next
    /// start. The caller should then exit without waiting for the runtime's blocking tasks
    /// (a commit stuck on an unreachable broker is one).
    pub async fn run(self, shutdown: watch::Receiver<bool>) -> Result<Summary, PipelineError> {
        let Daemon {
            pipeline,
            health,
            health_server,
            alerts,
            telemetry,
            agreement,
            shutdown_timeout,
        } = self;
        let (stop_agreement, agreement_stopped) = watch::channel(false);
        let agreement_task =
            agreement.map(|(monitor, every)| monitor.spawn(every, agreement_stopped));
        {
            // Not ready while draining.
            let mut draining = shutdown.clone();
            let health = health.clone();
            tokio::spawn(async move {
                while draining.changed().await.is_ok() {
                    if *draining.borrow() {
                        health.set_phase(Phase::Draining);
                        break;
                    }
                }
            });
        }
        health.set_phase(Phase::Running);
        let deadline = ShutdownDeadline::new(shutdown.clone(), shutdown_timeout);
        // Its own task: a step that blocks its thread (a librdkafka call waiting for a broker
        // that is gone) cannot hold the deadline back.
        let mut pipeline_task = tokio::spawn(pipeline.run(shutdown));
        let result = tokio::select! {
            joined = &mut pipeline_task => joined
                .unwrap_or_else(|e| Err(PipelineError::Task(format!("pipeline: {e}")))),
            () = deadline.expired() => Err(PipelineError::ShutdownTimeout {
                limit: shutdown_timeout,
                pending: pending_components(&health),
            }),
        };
        health.set_phase(Phase::Draining);
        if let Some(server) = health_server {
            server.shutdown().await;
        }
        if let Some(mut task) = agreement_task {
            // One last poll pairs the labels of what the run wrote last; it releases its alert
            // handle when it ends, so the engine can finish after it.
            let _ = stop_agreement.send(true);
            let grace = deadline
                .remaining()
                .map_or(AGREEMENT_GRACE, |r| r.min(AGREEMENT_GRACE));
            if tokio::time::timeout(grace, &mut task).await.is_err() {
                tracing::warn!("the agreement monitor's last poll did not finish; abandoning it");
                task.abort();
            }
        }
        if let Some(service) = alerts {
            // Pending deliveries get a bounded grace period; shutdown never waits on a dead
            // webhook, nor past the shutdown deadline.
            let counters = Arc::clone(service.counters());
            let grace = deadline
                .remaining()
                .map_or(ALERT_GRACE, |r| r.min(ALERT_GRACE));
            if tokio::time::timeout(grace, service.finish()).await.is_err() {
                tracing::warn!("alert delivery still retrying at shutdown; abandoning it");
            }
            tracing::info!(?counters, "alerting finished");
        }
        if let Some(telemetry) = telemetry {
            // The exporter's final push blocks; keep it off the async workers.
            let grace = deadline
                .remaining()
                .map_or(TELEMETRY_GRACE, |r| r.min(TELEMETRY_GRACE));
            let push = tokio::task::spawn_blocking(move || telemetry.shutdown());
            match tokio::time::timeout(grace, push).await {
                Ok(Ok(Err(error))) => tracing::warn!(%error, "telemetry shutdown"),
                Ok(Err(error)) => tracing::warn!(%error, "telemetry shutdown task"),
                Ok(Ok(Ok(()))) => {}
                Err(_) => tracing::warn!("telemetry's final push did not finish; abandoning it"),
            }
        }
        result
    }
}

/// How long the agreement monitor's last poll may take when the daemon stops.
const AGREEMENT_GRACE: Duration = Duration::from_secs(10);

/// The agreement monitor of a run (`[server] agreement_poll_ms`): with a store to read labels
/// from (a JSONL or ClickHouse sink) and someone to tell (alerts or telemetry).
fn agreement_monitor(
    config: &Config,
    alerts: Option<crate::alert::AlertHandle>,
) -> Option<(crate::serve::agreement::AgreementMonitor, Duration)> {
    if config.server.agreement_poll_ms == 0 || (alerts.is_none() && !config.telemetry.enabled) {
        return None;
    }
    let store = crate::serve::store_for(&config.sink, config.server.review_max_rows)?;
    let monitor = crate::serve::agreement::AgreementMonitor::new(
        store,
        alerts,
        config.alerts.defaults.agreement_window,
    );
    Some((
        monitor,
        Duration::from_millis(config.server.agreement_poll_ms),
    ))
}

/// The judge stage's drain grace at shutdown: `judge.budget.drain_grace_ms`, capped at a third
/// of `pipeline.shutdown_timeout_ms` (the stage may take the grace twice: once for queued work,
/// once for judgments in flight), so that the rest of the shutdown — the last batches, the
/// final commit — still fits in the limit.
fn drain_grace(drain_grace_ms: u64, shutdown_timeout_ms: u64) -> Duration {
    let cap = shutdown_timeout_ms / 3;
    if drain_grace_ms > cap {
        tracing::info!(
            drain_grace_ms,
            capped_at_ms = cap,
            "judge drain grace capped to fit pipeline.shutdown_timeout_ms"
        );
    }
    Duration::from_millis(drain_grace_ms.min(cap))
}

/// The components that are not healthy, as `name: state (detail)`, for the shutdown error.
fn pending_components(health: &Health) -> String {
    let unhealthy: Vec<String> = health
        .components()
        .into_iter()
        .filter_map(|(name, state)| match state {
            ComponentHealth::Ok => None,
            ComponentHealth::Degraded(why) => Some(format!("{name}: degraded ({why})")),
            ComponentHealth::Failed(why) => Some(format!("{name}: failed ({why})")),
        })
        .collect();
    if unhealthy.is_empty() {
        "no component reported a fault".to_string()
    } else {
        unhealthy.join("; ")
    }
}

/// The moment shutdown was requested plus the limit: what the shutdown steps must fit in.
struct ShutdownDeadline {
    at: std::sync::OnceLock<tokio::time::Instant>,
    limit: Duration,
    signalled: tokio::sync::watch::Receiver<bool>,
}

impl ShutdownDeadline {
    fn new(signalled: watch::Receiver<bool>, limit: Duration) -> ShutdownDeadline {
        ShutdownDeadline {
            at: std::sync::OnceLock::new(),
            limit,
            signalled,
        }
    }

    /// Resolves `limit` after shutdown was requested; never without a request.
    async fn expired(&self) {
        let mut signalled = self.signalled.clone();
        if signalled.wait_for(|requested| *requested).await.is_err() {
            // Nobody can ask for shutdown any more: the run ends on its own.
            return std::future::pending().await;
        }
        let at = *self
            .at
            .get_or_init(|| tokio::time::Instant::now() + self.limit);
        tokio::time::sleep_until(at).await;
    }

    /// Time left once shutdown was requested (`None` before: no limit applies yet).
    fn remaining(&self) -> Option<Duration> {
        if !*self.signalled.borrow() {
            return None;
        }
        let at = *self
            .at
            .get_or_init(|| tokio::time::Instant::now() + self.limit);
        Some(at.saturating_duration_since(tokio::time::Instant::now()))
    }
}

/// How long pending alert deliveries may still retry when the daemon stops.
const ALERT_GRACE: Duration = Duration::from_secs(30);

/// How long telemetry's final push may take when the daemon stops.
const TELEMETRY_GRACE: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DurableCacheMode;

    fn llm_config(sink: SinkKind, mode: DurableCacheMode) -> Config {
        let mut config = Config::default();
        config.judge.kind = JudgeKind::Llm;
        config.judge.api_key_env = String::new();
        config.judge.durable_cache = mode;
        config.sink.kind = sink;
        config.sink.url = Some("http://127.0.0.1:1".into());
        config
    }

    #[test]
    fn durable_cache_follows_the_mode_and_the_sink() {
        let on = |sink, mode| {
            let config = llm_config(sink, mode);
            build_durable_cache(&config.judge, &config.sink).is_some()
        };
        assert!(on(SinkKind::Clickhouse, DurableCacheMode::Auto));
        assert!(!on(SinkKind::Jsonl, DurableCacheMode::Auto));
        assert!(!on(SinkKind::Stdout, DurableCacheMode::Auto));
        assert!(on(SinkKind::Jsonl, DurableCacheMode::Clickhouse));
        assert!(!on(SinkKind::Clickhouse, DurableCacheMode::Off));
        // The judge builds either way (the cache connects lazily).
        for mode in [
            DurableCacheMode::Auto,
            DurableCacheMode::Clickhouse,
            DurableCacheMode::Off,
        ] {
            let judge = build_judge(&llm_config(SinkKind::Clickhouse, mode)).unwrap();
            assert_eq!(judge.kind(), "llm:gpt-4o-mini");
        }
    }

    #[test]
    fn explicit_clickhouse_cache_needs_a_server() {
        let mut config = llm_config(SinkKind::Jsonl, DurableCacheMode::Clickhouse);
        config.sink.url = None;
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("judge.durable_cache"), "{error}");
        config.judge.durable_cache = DurableCacheMode::Auto;
        config.validate().unwrap();
    }
}
