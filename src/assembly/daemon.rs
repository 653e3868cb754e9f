//! The daemon of `sqlgrade run`: health endpoint, source, scorer, sink, alert engine, agreement
//! monitor and telemetry around one pipeline, and a shutdown bounded by its deadline.

use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use tokio::sync::watch;

use super::components::{build_scorer, build_source_with_health};
use super::error::BuildError;
use super::pipeline::{
    AssembledPipeline, RunMode, TELEMETRY_GRACE, assemble_pipeline, finish_evaluations,
    finish_telemetry,
};
use crate::pipeline::{Pipeline, PipelineError};
use crate::stores::ReviewStore;
use crate::telemetry::health::{ComponentHealth, Health, Phase};
use crate::telemetry::summary::Summary;

/// The daemon of `sqlgrade run`, wired from a [`Config`]: health endpoint, source, scorer, sink,
/// alert engine and telemetry around one [`Pipeline`].
pub struct Daemon {
    pub(super) pipeline: Pipeline,
    pub(super) health: Arc<Health>,
    pub(super) health_server: Option<crate::telemetry::health::HealthServer>,
    pub(super) alerts: Option<crate::alerts::AlertService>,
    pub(super) telemetry: Option<crate::telemetry::Telemetry>,
    /// The evaluation-event exporter (`[telemetry] evaluations`).
    pub(super) evaluations: Option<crate::telemetry::evaluations::EvaluationExporter>,
    /// The agreement monitor and how often it polls (`[server] agreement_poll_ms`).
    pub(super) agreement: Option<(crate::review_page::agreement::AgreementMonitor, Duration)>,
    pub(super) shutdown_timeout: Duration,
}

impl Daemon {
    /// Build every component of `config` (nothing is read from the source yet). Must be called
    /// inside a tokio runtime.
    pub async fn build(config: &Config) -> Result<Daemon, BuildError> {
        let health = Arc::new(Health::new());
        // One store for the run: the pipeline writes to it, alerts are recorded in it, the
        // review page and the agreement monitor share one reader of it.
        let store = config.store();
        let reader = store.reader(config.server.review_max_rows);
        let health_server = if config.server.listen.trim().is_empty() {
            None
        } else {
            let review = if config.server.review {
                match &reader {
                    Some(reader) => Some(crate::review_page::router(std::sync::Arc::new(
                        crate::review_page::ReviewState::new(
                            Arc::clone(reader),
                            config.server.token.clone(),
                        )
                        .with_allowed_hosts(&config.server.allowed_hosts)
                        .with_calibration(
                            crate::review_page::view::CalibrationSample::from_settings(
                                &config.server,
                            ),
                        )
                        .with_model(config.stef.verdict_model()?),
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
            Some(
                crate::telemetry::health::serve(&config.server.listen, health.clone(), review)
                    .await?,
            )
        };
        let scorer = Arc::new(build_scorer(config)?);
        let source = build_source_with_health(config, Some(health.clone()))?;
        tracing::info!(
            source = ?config.source.kind,
            store = %store.describe(),
            judge = %scorer.judge_kind(),
            workers = config.pipeline.workers,
            "sqlgrade run starting"
        );
        let AssembledPipeline {
            pipeline,
            alerts,
            alert_handle,
            mut telemetry,
            evaluations,
        } = assemble_pipeline(
            config,
            RunMode::Live,
            source,
            &store,
            scorer,
            Some(health.clone()),
        )
        .await?;
        let agreement = agreement_monitor(config, reader, alert_handle, &health);
        if let Some(telemetry) = telemetry.as_mut() {
            let health = Arc::clone(&health);
            telemetry.observe_outages(move || outage_stats(&health));
        }
        if let (Some(telemetry), Some(evaluations)) = (telemetry.as_mut(), &evaluations) {
            let sender = evaluations.sender();
            telemetry.observe_evaluation_events(move || sender.counts());
        }
        if let (Some(telemetry), Some((monitor, _))) = (telemetry.as_mut(), &agreement) {
            let board = monitor.board();
            telemetry.observe_agreement(move || board.rows());
        }
        Ok(Daemon {
            pipeline,
            health,
            health_server,
            alerts,
            telemetry,
            evaluations,
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
            evaluations,
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
                .unwrap_or_else(|source| Err(PipelineError::Joined {
                    task: "pipeline".to_string(),
                    source,
                })),
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
        let mut result = result;
        let grace = deadline
            .remaining()
            .map_or(TELEMETRY_GRACE, |r| r.min(TELEMETRY_GRACE));
        finish_evaluations(evaluations, grace, result.as_mut().ok()).await;
        if let Some(telemetry) = telemetry {
            let grace = deadline
                .remaining()
                .map_or(TELEMETRY_GRACE, |r| r.min(TELEMETRY_GRACE));
            finish_telemetry(telemetry, grace).await;
        }
        result.map(|mut summary| {
            summary.outages = outage_stats(&health);
            summary
        })
    }
}

/// The health registry's outages as run statistics.
pub(super) fn outage_stats(
    health: &Health,
) -> std::collections::BTreeMap<String, crate::telemetry::stats::OutageStats> {
    health
        .outages()
        .into_iter()
        .map(|(component, o)| {
            (
                component,
                crate::telemetry::stats::OutageStats {
                    episodes: o.episodes,
                    total: o.total,
                    longest: o.longest,
                    failures: o.failures,
                },
            )
        })
        .collect()
}

/// How long the agreement monitor's last poll may take when the daemon stops.
pub(super) const AGREEMENT_GRACE: Duration = Duration::from_secs(10);

/// The agreement monitor of a run (`[server] agreement_poll_ms`): with a store to read labels
/// from (`store`: none for stdout) and someone to tell (alerts or telemetry).
pub(super) fn agreement_monitor(
    config: &Config,
    store: Option<Arc<dyn ReviewStore>>,
    alerts: Option<crate::alerts::AlertHandle>,
    health: &Arc<Health>,
) -> Option<(crate::review_page::agreement::AgreementMonitor, Duration)> {
    if config.server.agreement_poll_ms == 0 || (alerts.is_none() && !config.telemetry.enabled) {
        return None;
    }
    let store = store?;
    let monitor = crate::review_page::agreement::AgreementMonitor::new(
        store,
        alerts,
        config.alerts.defaults.agreement_window,
    )
    .with_judged_row_window(judged_row_window(config))
    .with_sink_outage(sink_outage_clock(health));
    Some((
        monitor,
        Duration::from_millis(config.server.agreement_poll_ms),
    ))
}

/// The ClickHouse sink's total outage time so far (the health registry's `clickhouse` clock;
/// zero for sinks that do not report one).
fn sink_outage_clock(health: &Arc<Health>) -> impl Fn() -> Duration + Send + Sync + 'static {
    let health = Arc::clone(health);
    move || {
        health
            .outages()
            .get("clickhouse")
            .map_or(Duration::ZERO, |o| o.total)
    }
}

/// How late the judge's second pass can write an event's LLM-judged row after its line-rate
/// row: work older than `judge.budget.max_wait_ms` is shed, a call takes at most its longest
/// call, and the row then waits for the sink's flush — with a minute for the write itself. A
/// config without an LLM judge gets the judge defaults' window (a replica reading the judge-work
/// topic may be the one that judges).
fn judged_row_window(config: &Config) -> Duration {
    let defaults = crate::llm::config::LlmJudgeConfig::default();
    let llm = config.judge.llm().unwrap_or(&defaults);
    Duration::from_millis(llm.budget.max_wait_ms)
        .saturating_add(llm.max_call())
        .saturating_add(Duration::from_millis(config.sink.flush_interval_ms))
        .saturating_add(Duration::from_secs(60))
}

/// The components that are not healthy, as `name: state (detail)`, for the shutdown error.
pub(super) fn pending_components(health: &Health) -> String {
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
pub(super) struct ShutdownDeadline {
    pub(super) at: std::sync::OnceLock<tokio::time::Instant>,
    pub(super) limit: Duration,
    pub(super) signalled: tokio::sync::watch::Receiver<bool>,
}

impl ShutdownDeadline {
    pub(super) fn new(signalled: watch::Receiver<bool>, limit: Duration) -> ShutdownDeadline {
        ShutdownDeadline {
            at: std::sync::OnceLock::new(),
            limit,
            signalled,
        }
    }

    /// Resolves `limit` after shutdown was requested; never without a request.
    pub(super) async fn expired(&self) {
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
    pub(super) fn remaining(&self) -> Option<Duration> {
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
pub(super) const ALERT_GRACE: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assembly::{build_durable_cache, build_judge};
    use crate::config::{DurableCacheMode, JudgeConfig, LlmJudgeConfig, SinkKind};

    fn llm_config(sink: SinkKind, mode: DurableCacheMode) -> Config {
        let mut config = Config {
            judge: JudgeConfig::from(LlmJudgeConfig {
                api_key_env: String::new(),
                durable_cache: mode,
                ..LlmJudgeConfig::default()
            }),
            ..Config::default()
        };
        config.sink.kind = sink;
        config.clickhouse.url = Some("http://127.0.0.1:1".into());
        config
    }

    #[test]
    fn durable_cache_follows_the_mode_and_the_sink() {
        let on = |sink, mode| {
            let config = llm_config(sink, mode);
            build_durable_cache(config.judge.llm().unwrap(), &config.store()).is_some()
        };
        assert!(on(SinkKind::Clickhouse, DurableCacheMode::Auto));
        assert!(!on(SinkKind::default(), DurableCacheMode::Auto));
        assert!(!on(SinkKind::Stdout, DurableCacheMode::Auto));
        assert!(on(SinkKind::default(), DurableCacheMode::Clickhouse));
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
        let mut config = llm_config(SinkKind::default(), DurableCacheMode::Clickhouse);
        config.clickhouse.url = None;
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("judge.durable_cache"), "{error}");
        config.judge.llm_mut().unwrap().durable_cache = DurableCacheMode::Auto;
        config.validate().unwrap();
    }

    #[test]
    fn the_sink_outage_clock_counts_the_clickhouse_sinks_outages() {
        let health = Arc::new(Health::new());
        let clock = sink_outage_clock(&health);
        assert_eq!(clock(), Duration::ZERO);
        health.set("kafka", ComponentHealth::Degraded("down".into()));
        health.set("clickhouse", ComponentHealth::Ok);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(clock(), Duration::ZERO, "another component's outage");
        health.set(
            "clickhouse",
            ComponentHealth::Degraded("insert failing".into()),
        );
        std::thread::sleep(Duration::from_millis(20));
        let during = clock();
        assert!(during >= Duration::from_millis(20), "{during:?}");
        health.set("clickhouse", ComponentHealth::Ok);
        let after = clock();
        assert!(after >= during);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(clock(), after, "the clock stops when the sink is back");
    }

    #[test]
    fn the_judged_row_window_is_as_late_as_the_second_pass_can_write() {
        let mut config = llm_config(SinkKind::Clickhouse, DurableCacheMode::Off);
        let llm = config.judge.llm_mut().unwrap();
        llm.budget.max_wait_ms = 120_000;
        llm.timeout_ms = 10_000;
        llm.max_call_ms = 0;
        config.sink.flush_interval_ms = 2_000;
        // 120 s queued + 20 s call (twice the timeout) + 2 s flush + 60 s write.
        assert_eq!(judged_row_window(&config), Duration::from_secs(202));
        // No LLM judge here: the judge defaults' window, the monitor's own default.
        let plain = Config::default();
        assert_eq!(
            judged_row_window(&plain),
            crate::review_page::agreement::DEFAULT_JUDGED_ROW_WINDOW
                + Duration::from_millis(plain.sink.flush_interval_ms)
        );
    }
}
