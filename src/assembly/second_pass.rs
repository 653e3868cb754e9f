//! The second, LLM-judged pass: planner, hand-over (in-process queue or the Kafka work topic),
//! judge stage, and the gold metrics' LLM-judged scorer.

use std::sync::Arc;
use std::time::Duration;

use crate::alerts::FiringSeries;
use crate::config::{Config, KafkaSourceConfig};
use crate::pipeline::SecondPass;
use crate::sampling::{BudgetLedger, DailyCaps, Prices};
use crate::second_pass::kafka_work::{KafkaWorkSink, spawn_kafka_feeder};
use crate::second_pass::planner::PlanMode;
use crate::second_pass::stage::Leftover;
use crate::second_pass::work::QueueMode;
use crate::second_pass::{JudgeStage, JudgeStats, Planner, WorkQueue, WorkSink};

use super::error::BuildError;
use crate::score::Scorer;
use crate::sources::kafka::KafkaSource;

/// The second, LLM-judged pass of a run, when the scorer has an LLM judge: the planner
/// (`mode`: the live policy or a census), the hand-over of selected work (an in-process queue,
/// or the Kafka work topic with `judge.budget.work_topic`), and the judge stage. `firing` is the
/// alert engine's view of alerting series (a priority slice).
pub fn build_second_pass(
    config: &Config,
    scorer: &Arc<Scorer>,
    mode: PlanMode,
    firing: Arc<FiringSeries>,
    health: Option<Arc<crate::telemetry::health::Health>>,
) -> Result<Option<SecondPass>, BuildError> {
    let Some(judge) = scorer.judged_pass().cloned() else {
        return Ok(None);
    };
    let llm = config.judge.llm().ok_or(BuildError::NoSecondPassSettings)?;
    let budget = &llm.budget;
    let stats = Arc::new(JudgeStats::default());
    let planner = Arc::new(Planner::new(
        budget,
        llm.max_requests_per_second,
        mode,
        config.alerts.series_key.clone(),
        firing,
        Arc::clone(&stats),
    ));
    let ledger = budget_ledger(budget);
    let census = mode == PlanMode::Census;
    let kafka_topic = budget
        .work_topic
        .as_deref()
        .zip(config.source.kafka())
        .filter(|_| !census);
    let (queue, work_sink, feeder, leftover): (_, Arc<dyn WorkSink>, _, _) = match kafka_topic {
        Some((topic, kafka)) => {
            // The judge stage reads the work topic in its own group; its queue holds what the
            // consumer has in flight (bounded by the same capacity), most important first.
            let queue = WorkQueue::new(
                budget.queue_capacity.get(),
                QueueMode::Block,
                Arc::clone(&stats),
            );
            let consumer = KafkaSourceConfig {
                topics: vec![topic.to_string()],
                group_id: format!("{}-judge", kafka.group_id),
                dead_letter_topic: None,
                max_in_flight: budget.queue_capacity,
                ..kafka.clone()
            };
            let source = KafkaSource::new(&consumer, None)?;
            let stop = Arc::new(tokio::sync::Notify::new());
            let feeder =
                spawn_kafka_feeder(Box::new(source), Arc::clone(&queue), Arc::clone(&stop));
            let producer = crate::sources::kafka::producer(kafka, "sqlgrade-judge-work")?;
            let sink = Arc::new(KafkaWorkSink::new(producer, topic, stop, health.clone()));
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
            let queue = WorkQueue::new(budget.queue_capacity.get(), mode, Arc::clone(&stats));
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
        llm.max_concurrency,
        Duration::from_millis(budget.max_wait_ms.max(1)),
        (!census).then(|| drain_grace(budget.drain_grace_ms, config.pipeline.shutdown_timeout_ms)),
        leftover,
    )
    .with_health(health);
    tracing::info!(
        mode = ?mode,
        uniform_rate = budget.uniform_rate,
        work_topic = kafka_topic.map_or("(in-process)", |(topic, _)| topic),
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

/// The second pass's daily caps and prices, from `judge.budget`.
fn budget_ledger(budget: &crate::llm::config::JudgeBudgetConfig) -> BudgetLedger {
    BudgetLedger::new(
        DailyCaps {
            requests: budget.max_requests_per_day,
            tokens: budget.max_tokens_per_day,
            cost: budget.max_cost_per_day,
        },
        Prices {
            input_per_1k: budget.price_input_per_1k,
            output_per_1k: budget.price_output_per_1k,
        },
    )
}

/// The judge stage's drain grace at shutdown: `judge.budget.drain_grace_ms`, capped at a third
/// of `pipeline.shutdown_timeout_ms` (the stage may take the grace twice: once for queued work,
/// once for judgments in flight), so that the rest of the shutdown — the last batches, the
/// final commit — still fits in the limit.
pub(super) fn drain_grace(drain_grace_ms: u64, shutdown_timeout_ms: u64) -> Duration {
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
