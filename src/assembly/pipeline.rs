//! One pipeline builder for `run` and `backfill`: a mode, not a copy. Both get the same stages
//! around a source, a sink and a scorer — the alert engine, the LLM judge's second pass and
//! telemetry — and differ only where the mode says so ([`RunMode`]). Before this, each wired
//! its own pipeline and the backfill had drifted (no telemetry).

use std::sync::Arc;
use std::time::Duration;

use crate::alerts::delivery::{AlertHandle, AlertService, Destinations};
use crate::config::Config;
use crate::pipeline::Pipeline;
use crate::score::Scorer;
use crate::second_pass::planner::PlanMode;
use crate::sources::Source;
use crate::stores::Store;

use super::error::BuildError;
use super::second_pass::build_second_pass;

/// How long telemetry's final push may take when a run stops.
pub const TELEMETRY_GRACE: Duration = Duration::from_secs(5);

/// Most alert notifications a batch run keeps for its report.
pub const MAX_RECORDED_ALERTS: usize = 10_000;

/// What kind of run a pipeline serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMode {
    /// The daemon (`sqlgrade run`): the alert engine only with `[alerts] enabled`, fed through
    /// a live handle (a full queue drops the input and counts it; scoring never waits); the
    /// judge's live sampling policy.
    Live,
    /// A batch (`backfill`): the `[alerts]` rules evaluated over every row (a lossless handle:
    /// the batch waits for the engine), delivered only with `[alerts] enabled`, and the
    /// notifications recorded for the report; `judge` says whether every event is judged or
    /// the live policy applies.
    Batch {
        /// The second pass's selection.
        judge: PlanMode,
    },
}

/// A pipeline with what runs beside it, ready to run.
pub struct AssembledPipeline {
    /// The pipeline, every stage wired.
    pub pipeline: Pipeline,
    /// The alert engine (and its deliveries), when the mode runs one.
    pub alerts: Option<AlertService>,
    /// A handle to the alert engine for other producers (the daemon's agreement monitor);
    /// dropped before [`AlertService::finish`] is awaited.
    pub alert_handle: Option<AlertHandle>,
    /// Telemetry export (`[telemetry] enabled`), observing the pipeline, the judges and the
    /// second pass.
    pub telemetry: Option<crate::telemetry::Telemetry>,
    /// Every row as an evaluation event (`[telemetry] evaluations`): finish it after the
    /// pipeline with [`finish_evaluations`].
    pub evaluations: Option<crate::telemetry::evaluations::EvaluationExporter>,
}

/// Wire `source` and `scorer` into a pipeline for `mode` that writes to `store`, with the
/// alert engine (recording alerts in the same store), the second pass and telemetry the config
/// asks for; the store's writer and the stages that can be degraded (the judge-work hand-over)
/// report to `health`. Must be called inside a tokio runtime.
pub async fn assemble_pipeline(
    config: &Config,
    mode: RunMode,
    source: Box<dyn Source>,
    store: &Store,
    scorer: Arc<Scorer>,
    health: Option<Arc<crate::telemetry::health::Health>>,
) -> Result<AssembledPipeline, BuildError> {
    let sink = store.writer(health.clone()).await?;
    let mut pipeline = Pipeline::new(
        source,
        sink,
        Arc::clone(&scorer),
        &config.pipeline,
        store.settings(),
    );
    // The estimate alerts rest on the LLM judge's uniform slice when the run has one, else on
    // the line rate's p_correct.
    let plan = match mode {
        RunMode::Live => PlanMode::Sample,
        RunMode::Batch { judge } => judge,
    };
    let estimates = if scorer.judged_pass().is_some() && plan_has_uniform_slice(config, plan) {
        crate::alerts::EstimateSource::Judge
    } else {
        crate::alerts::EstimateSource::LineRate
    };
    let (alerts, alert_handle) = match mode {
        RunMode::Live if !config.alerts.enabled => (None, None),
        RunMode::Live => {
            let (service, handle) = AlertService::start(
                config.alerts.clone(),
                Destinations::from_config(&config.alerts, store),
                estimates,
            )?;
            pipeline = pipeline.with_alerts(handle.clone());
            (Some(service), Some(handle))
        }
        RunMode::Batch { .. } => {
            let destinations = if config.alerts.enabled {
                Destinations::from_config(&config.alerts, store)
            } else {
                Destinations::default()
            };
            let (service, handle) = AlertService::start_recording(
                config.alerts.clone(),
                destinations,
                estimates,
                MAX_RECORDED_ALERTS,
            )?;
            pipeline = pipeline.with_alerts(handle.lossless());
            (Some(service), None)
        }
    };
    let firing = alerts
        .as_ref()
        .map(AlertService::firing)
        .unwrap_or_default();
    let second_pass = build_second_pass(config, &scorer, plan, firing, health)?;
    let telemetry = if config.telemetry.enabled {
        let mut telemetry = crate::telemetry::Telemetry::start(&config.telemetry)?;
        // Every LLM client of the run: the STEF judge's and the gold metrics' own, if any.
        let judged = Arc::clone(&scorer);
        telemetry.observe_judge(move || judged.llm_usage().total());
        if let Some(second_pass) = &second_pass {
            telemetry.observe_judge_pass(Arc::clone(&second_pass.stats));
        }
        pipeline = pipeline.with_metrics(telemetry.metrics());
        Some(telemetry)
    } else {
        None
    };
    let evaluations = if config.telemetry.evaluations {
        let exporter = crate::telemetry::evaluations::EvaluationExporter::start(&config.telemetry)?;
        pipeline = pipeline.with_evaluations(exporter.sender());
        Some(exporter)
    } else {
        None
    };
    if let Some(second_pass) = second_pass {
        pipeline = pipeline.with_second_pass(second_pass);
    }
    Ok(AssembledPipeline {
        pipeline,
        alerts,
        alert_handle,
        telemetry,
        evaluations,
    })
}

/// Push telemetry's last data and stop it, within `grace`: the exporter's final push blocks, so
/// it runs off the async workers, and an unreachable collector is abandoned, never waited for.
pub async fn finish_telemetry(telemetry: crate::telemetry::Telemetry, grace: Duration) {
    let push = tokio::task::spawn_blocking(move || telemetry.shutdown());
    match tokio::time::timeout(grace, push).await {
        Ok(Ok(Err(error))) => tracing::warn!(%error, "telemetry shutdown"),
        Ok(Err(error)) => tracing::warn!(%error, "telemetry shutdown task"),
        Ok(Ok(Ok(()))) => {}
        Err(_) => tracing::warn!("telemetry's final push did not finish; abandoning it"),
    }
}

/// Send the evaluation events still queued within `grace` (a collector that is away is retried
/// until then), and put what became of them in the run's summary.
pub async fn finish_evaluations(
    evaluations: Option<crate::telemetry::evaluations::EvaluationExporter>,
    grace: Duration,
    summary: Option<&mut crate::telemetry::summary::Summary>,
) {
    let Some(exporter) = evaluations else { return };
    let counts = exporter.finish(grace).await;
    tracing::info!(?counts, "evaluation events finished");
    if let Some(summary) = summary {
        summary.evaluation_events = Some(counts);
    }
}

/// Whether a run's second pass judges a uniform sample (a census, or a live policy with a
/// uniform slice): what the estimate alerts can rest on.
fn plan_has_uniform_slice(config: &Config, plan: PlanMode) -> bool {
    match plan {
        PlanMode::Census => true,
        PlanMode::Sample => config
            .judge
            .llm()
            .is_some_and(|judge| judge.budget.uniform_rate > 0.0),
    }
}
