//! The LLM-judged gold metrics (FLEX, ROSE, Hybrid-EX) on one event.
//!
//! Two steps, so that no SQL runs on the async runtime: [`JudgedInput`] holds both queries
//! executed once (the daemon reuses the execution EX made, on its blocking pool), the
//! schema DDL and the ESM+ verdict; [`JudgedScorer::score`] then builds the shared context,
//! applies the avoidance rules, and calls each metric's judge through the structured judge seam
//! ([`StructuredJudge`]: in the daemon the LLM client with its cache, limits, retries and
//! repair; in tests an in-memory judge) — the three metrics concurrently. CPU-heavy work
//! (Hybrid-EX's Stage 2 on large tables) goes through an [`Offload`].

use std::sync::Arc;

use serde_json::{Value, json};

use crate::evaluation::{EvaluationRow, Metric, RowStatus};
use crate::event::Event;
use crate::exec::Executor;
use crate::judge::StructuredJudge;

use super::avoid::CallCounter;
use super::ex::ExConvention;
use super::flex::{FlexOptions, score_flex};
use super::gold::GoldExecution;
pub use super::hybrid_ex::HybridOptions;
use super::hybrid_ex::score_hybrid;
pub use super::judge_case::{
    GoldCase, Outcome, TableDdl, judge_error_json, lenient_bool, load_schema,
};
use super::offload::Inline;
pub use super::offload::Offload;
use super::rose::{RoseOptions, score_rose};

/// Which judged metrics to compute and how.
#[derive(Debug, Clone)]
pub struct JudgedOptions {
    /// Compute FLEX.
    pub flex: Option<FlexOptions>,
    /// Compute ROSE.
    pub rose: Option<RoseOptions>,
    /// Compute Hybrid-EX.
    pub hybrid_ex: Option<HybridOptions>,
    /// Skip the judge where deterministic evidence decides.
    pub avoidance: bool,
    /// EX convention deciding FLEX's branch and ROSE's route (`[gold] ex_convention`).
    pub ex_convention: ExConvention,
}

impl Default for JudgedOptions {
    fn default() -> Self {
        JudgedOptions {
            flex: Some(FlexOptions::default()),
            rose: Some(RoseOptions::default()),
            hybrid_ex: Some(HybridOptions::default()),
            avoidance: true,
            ex_convention: ExConvention::Bird,
        }
    }
}

impl JudgedOptions {
    /// The metrics switched on, in row order (FLEX, ROSE, Hybrid-EX).
    pub fn metrics(&self) -> Vec<Metric> {
        [
            (self.flex.is_some(), Metric::Flex),
            (self.rose.is_some(), Metric::Rose),
            (self.hybrid_ex.is_some(), Metric::HybridEx),
        ]
        .into_iter()
        .filter_map(|(on, m)| on.then_some(m))
        .collect()
    }
}

/// Everything the judged metrics need about one event that comes from a database: both
/// queries executed once, the schema, and the ESM+ verdict as avoidance evidence.
///
/// Building it runs SQL, so it happens off the async runtime (the pipeline builds it on
/// tokio's blocking pool from the same execution EX uses; [`JudgedInput::prepare`] does it on
/// the calling thread); [`JudgedScorer::score`] then only makes LLM calls.
#[derive(Debug, Clone)]
pub struct JudgedInput {
    /// The executed gold and predicted queries.
    pub execution: GoldExecution,
    /// The schema shown to the judges.
    pub schema: Arc<Vec<TableDdl>>,
    /// The ESM+ verdict, when computed.
    pub esm_plus: Option<bool>,
    /// The ETM verdict, when computed.
    pub etm: Option<bool>,
}

impl JudgedInput {
    /// Execute the event's gold and predicted SQL and load the schema, on the calling thread
    /// (blocking: call it from a blocking thread, a test or a bench). `None` when the event has
    /// no gold SQL.
    pub fn prepare(
        event: &Event,
        exec: &dyn Executor,
        esm_plus: Option<bool>,
    ) -> Option<JudgedInput> {
        let gold = event.gold.as_ref()?;
        let gold_sql = gold.sql.as_deref().filter(|s| !s.trim().is_empty())?;
        let execution = GoldExecution::run(exec, gold.db_id.as_deref(), gold_sql, &event.sql);
        let schema = match &execution {
            GoldExecution::Executed { db_id, .. } => {
                event_schema(event).unwrap_or_else(|| load_schema(exec, db_id).unwrap_or_default())
            }
            _ => Vec::new(),
        };
        Some(JudgedInput {
            execution,
            schema: Arc::new(schema),
            esm_plus,
            etm: None,
        })
    }
}

/// The schema an event supplies itself (`gold.schema`), as one pseudo-table.
pub fn event_schema(event: &Event) -> Option<Vec<TableDdl>> {
    let text = event.gold.as_ref()?.schema.as_ref()?;
    (!text.trim().is_empty()).then(|| {
        vec![TableDdl {
            name: String::new(),
            ddl: text.clone(),
        }]
    })
}

/// Scores FLEX, ROSE and Hybrid-EX rows for events with gold data, sharing one judge.
pub struct JudgedScorer {
    judge: Arc<dyn StructuredJudge>,
    offload: Arc<dyn Offload>,
    options: JudgedOptions,
    counter: CallCounter,
}

impl std::fmt::Debug for JudgedScorer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JudgedScorer")
            .field("judge", &self.judge.kind())
            .field("options", &self.options)
            .field("counter", &self.counter)
            .finish()
    }
}

impl JudgedScorer {
    /// A scorer over `judge`; CPU-heavy steps run inline (see [`JudgedScorer::with_offload`]).
    pub fn new(judge: Arc<dyn StructuredJudge>, options: JudgedOptions) -> JudgedScorer {
        JudgedScorer {
            judge,
            offload: Arc::new(Inline),
            options,
            counter: CallCounter::default(),
        }
    }

    /// Run CPU-heavy steps through `offload` (the daemon: its blocking pool).
    pub fn with_offload(mut self, offload: Arc<dyn Offload>) -> JudgedScorer {
        self.offload = offload;
        self
    }

    /// Calls made and avoided so far, per metric.
    pub fn counter(&self) -> &CallCounter {
        &self.counter
    }

    /// The judge (for cache/limit totals).
    pub fn judge(&self) -> &Arc<dyn StructuredJudge> {
        &self.judge
    }

    /// The options in effect.
    pub fn options(&self) -> &JudgedOptions {
        &self.options
    }

    /// Score one event from its prepared `input`: one row per configured metric. Only LLM
    /// calls happen here (concurrently for the three metrics); nothing blocks.
    pub async fn score(&self, event: &Event, input: &JudgedInput, ts: &str) -> Vec<EvaluationRow> {
        let metrics = self.options.metrics();
        let rows_with = |status: RowStatus, details: Value| {
            metrics
                .iter()
                .map(|&m| {
                    let mut row = EvaluationRow::for_event(event, ts, m);
                    row.status = status;
                    row.details = details.clone().into();
                    row
                })
                .collect::<Vec<_>>()
        };
        let (db_id, gold_rs, pred_rs) = match &input.execution {
            GoldExecution::Unavailable { db_id, reason } => {
                return rows_with(
                    RowStatus::GoldUnavailable,
                    json!({"db_id": db_id, "reason": reason}),
                );
            }
            GoldExecution::GoldFailed(e) => {
                return rows_with(
                    RowStatus::GoldError,
                    json!({"gold_error": {"kind": e.kind(), "message": e.to_string()}}),
                );
            }
            GoldExecution::Executed { db_id, gold, pred } => (db_id, gold, pred),
        };
        let Some(gold_sql) = event
            .gold
            .as_ref()
            .and_then(|g| g.sql.as_deref())
            .filter(|s| !s.trim().is_empty())
        else {
            return Vec::new();
        };
        let case = GoldCase {
            db_id,
            question: &event.question,
            evidence: event.gold.as_ref().and_then(|g| g.evidence.as_deref()),
            schema: &input.schema,
            gold_sql,
            pred_sql: &event.sql,
            gold: gold_rs,
            pred: pred_rs.as_ref(),
            esm_plus: input.esm_plus,
            etm: input.etm,
            ex_convention: self.options.ex_convention,
        };
        for &m in &metrics {
            self.counter.event(m);
        }
        let avoidance = self.options.avoidance;
        let counter = &self.counter;
        let judge = self.judge.as_ref();
        let offload = self.offload.as_ref();
        let case = &case;
        let flex = async {
            match &self.options.flex {
                Some(o) => Some(score_flex(judge, case, o, avoidance, counter).await),
                None => None,
            }
        };
        let rose = async {
            match &self.options.rose {
                Some(o) => Some(score_rose(judge, case, o, avoidance, counter).await),
                None => None,
            }
        };
        let hybrid = async {
            match &self.options.hybrid_ex {
                Some(o) => Some(score_hybrid(judge, offload, case, o, avoidance, counter).await),
                None => None,
            }
        };
        let (flex, rose, hybrid) = futures::join!(flex, rose, hybrid);
        [
            (Metric::Flex, flex),
            (Metric::Rose, rose),
            (Metric::HybridEx, hybrid),
        ]
        .into_iter()
        .filter_map(|(m, outcome)| {
            let outcome = outcome?;
            let mut row = EvaluationRow::for_event(event, ts, m);
            row.value = outcome.value;
            row.verdict = outcome.verdict;
            row.status = outcome.status;
            row.details = outcome.details.into();
            Some(row)
        })
        .collect()
    }
}
