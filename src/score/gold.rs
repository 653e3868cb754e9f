//! The edge between the async scorer and the gold metrics: runs
//! [`GoldScorer`](crate::metrics::gold::GoldScorer) (EX, ESM, ESM+) on tokio's blocking pool
//! against the read-only SQLite executor, so SQL execution never stalls the runtime, and then
//! the LLM-judged metrics (FLEX, ROSE, Hybrid-EX) asynchronously.
//!
//! Per event the gold and predicted SQL are executed once, on the blocking pool, together with
//! EX/ESM/ESM+ and the schema load; the LLM-judged metrics reuse those result sets and take the
//! ESM+ verdict as avoidance evidence ([`JudgedInput`]), so only their LLM calls run on the
//! async workers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::evaluation::{EvaluationRow, Metric, MetricKind, RowStatus};
use crate::event::{Event, Gold};
use crate::metrics::flex::FlexOptions;
use crate::metrics::gold::{Evidence, GoldEvaluation, GoldExecution, GoldOptions, GoldScorer};
use crate::metrics::judged::{
    HybridOptions, JudgedInput, JudgedOptions, JudgedScorer, TableDdl, event_schema, load_schema,
};
use crate::metrics::offload::{Offload, OffloadError};
use crate::metrics::rose::RoseOptions;
use crate::score::GoldMetrics;
use crate::score::config::GoldConfig;
use crate::score::sqlite::{ExecLimits, SqliteExecutor};
use crate::telemetry::stats::{ClientUsage, LlmUsage};

/// Schema DDL per database, loaded once (`sqlite_master`) for the judged metrics' prompts.
type SchemaCache = Arc<Mutex<HashMap<String, Arc<Vec<TableDdl>>>>>;

/// The LLM-judged metrics of a [`SqliteGoldMetrics`].
struct Judged {
    scorer: Arc<JudgedScorer>,
    /// The client is the STEF judge's (its totals are reported with the judge).
    shared_with_stef: bool,
}

/// Gold metrics (EX, ESM, ESM+, and optionally FLEX, ROSE, Hybrid-EX) over SQLite databases,
/// as configured in `[gold]`.
pub struct SqliteGoldMetrics {
    scorer: Arc<GoldScorer>,
    executor: SqliteExecutor,
    options: GoldOptions,
    judged: Option<Judged>,
    schemas: SchemaCache,
}

/// Why the gold metrics could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum GoldSetupError {
    /// `gold.databases` names no directory.
    #[error("gold metrics: gold.databases {} is not a directory", .0.display())]
    NoDatabases(std::path::PathBuf),
    /// The schemas (`gold.tables`, the databases' own) could not be read.
    #[error("gold metrics: loading schemas: {0}")]
    Schemas(#[source] crate::catalogue::SchemaError),
}

/// The LLM-judged metrics switched on in `[gold]`, with their options (`None`: none is on).
pub fn judged_options(config: &GoldConfig) -> Option<JudgedOptions> {
    let options = JudgedOptions {
        flex: config.has(Metric::Flex).then_some(FlexOptions {
            preset: config.flex_render,
            error_categories: config.flex_error_categories,
        }),
        rose: config.has(Metric::Rose).then(|| RoseOptions {
            preview_rows: config.rose_preview_rows,
            ..RoseOptions::default()
        }),
        hybrid_ex: config.has(Metric::HybridEx).then_some(HybridOptions {
            cutoff: config.hybrid_cutoff,
            tolerance: config.hybrid_tolerance,
        }),
        avoidance: config.avoidance,
        ex_convention: config.ex_convention,
    };
    (!options.metrics().is_empty()).then_some(options)
}

/// Runs the core's CPU-heavy metric steps (Hybrid-EX on large tables) on tokio's blocking pool.
#[derive(Debug, Clone, Copy, Default)]
pub struct BlockingPool;

impl Offload for BlockingPool {
    fn offload(
        &self,
        job: Box<dyn FnOnce() + Send + 'static>,
    ) -> futures::future::BoxFuture<'static, Result<(), OffloadError>> {
        Box::pin(async move {
            tokio::task::spawn_blocking(job)
                .await
                .map_err(|e| OffloadError::Pool(Box::new(e)))
        })
    }
}

impl SqliteGoldMetrics {
    /// Load schemas (`tables.json` files, then introspection of `databases`) and open the
    /// executor catalogue. The LLM-judged metrics are added with
    /// [`SqliteGoldMetrics::with_judged`].
    pub fn from_config(config: &GoldConfig) -> Result<Option<SqliteGoldMetrics>, GoldSetupError> {
        let Some(databases) = &config.databases else {
            return Ok(None);
        };
        if !databases.is_dir() {
            return Err(GoldSetupError::NoDatabases(databases.clone()));
        }
        let tables: Vec<&std::path::Path> = config.tables.iter().map(|p| p.as_path()).collect();
        let catalog = crate::score::sqlite::schema::load_catalog(&tables, Some(databases))
            .map_err(GoldSetupError::Schemas)?;
        let limits = ExecLimits {
            timeout: Duration::from_millis(config.timeout_ms.max(1)),
            max_rows: config.max_rows.max(1),
            workers: config.workers.get(),
            ..ExecLimits::default()
        };
        let executor = SqliteExecutor::new(databases.clone(), limits);
        let mut scorer = GoldScorer::new(catalog).with_planner(Arc::new(
            crate::score::sqlite::schema_db::SchemaPlanner::new(),
        ));
        if config.has(Metric::TsEx) || config.has(Metric::TsExStrict) {
            // Queries on generated databases are tiny: a tighter time limit than the real
            // database's, so a runaway prediction costs at most that per suite database.
            let suite_limits = ExecLimits {
                timeout: Duration::from_millis(config.timeout_ms.clamp(1, 2_000)),
                ..limits
            };
            scorer = scorer.with_suites(Arc::new(crate::score::sqlite::suite::SuiteChecker::new(
                crate::score::sqlite::suite::SuiteConfig::default(),
                suite_limits,
                Some(executor.clone()),
            )));
        }
        let options = GoldOptions {
            ex_convention: config.ex_convention,
            metrics: config.metrics.iter().copied().collect(),
            ..GoldOptions::default()
        };
        Ok(Some(SqliteGoldMetrics {
            scorer: Arc::new(scorer),
            executor,
            options,
            judged: None,
            schemas: Arc::default(),
        }))
    }

    /// Add the LLM-judged metrics; `shared_with_stef` says whether their client is the STEF
    /// judge's own.
    pub fn with_judged(
        mut self,
        judged: JudgedScorer,
        shared_with_stef: bool,
    ) -> SqliteGoldMetrics {
        self.judged = Some(Judged {
            scorer: Arc::new(judged),
            shared_with_stef,
        });
        self
    }

    /// Every metric this computes, in row order.
    fn metrics(&self) -> Vec<Metric> {
        let mut metrics: Vec<Metric> = Metric::gold()
            .filter(|m| m.kind() == MetricKind::Gold && self.options.has(*m))
            .collect();
        if let Some(judged) = &self.judged {
            metrics.extend(judged.scorer.options().metrics());
        }
        metrics
    }
}

/// The schema shown to the judged metrics: the event's own `gold.schema`, else the database's
/// DDL (cached per database). Blocking.
fn schema_for(
    event: &Event,
    execution: &GoldExecution,
    executor: &SqliteExecutor,
    cache: &SchemaCache,
) -> Arc<Vec<TableDdl>> {
    if let Some(own) = event_schema(event) {
        return Arc::new(own);
    }
    let GoldExecution::Executed { db_id, .. } = execution else {
        return Arc::default();
    };
    if let Ok(map) = cache.lock()
        && let Some(schema) = map.get(db_id)
    {
        return Arc::clone(schema);
    }
    match load_schema(executor, db_id) {
        Ok(tables) => {
            let schema = Arc::new(tables);
            if let Ok(mut map) = cache.lock() {
                map.insert(db_id.clone(), Arc::clone(&schema));
            }
            schema
        }
        Err(error) => {
            tracing::warn!(db_id = %db_id, %error, "cannot load the schema DDL for the judged metrics");
            Arc::default()
        }
    }
}

#[async_trait]
impl GoldMetrics for SqliteGoldMetrics {
    async fn score(&self, event: &Event, gold: &Gold, ts: &str) -> Vec<EvaluationRow> {
        let scorer = Arc::clone(&self.scorer);
        let executor = self.executor.clone();
        let schemas = Arc::clone(&self.schemas);
        let options = self.options;
        let avoidance = self
            .judged
            .as_ref()
            .is_some_and(|j| j.scorer.options().avoidance);
        let evidence = Evidence {
            execution: self.judged.is_some(),
            esm_plus: avoidance,
            etm: avoidance,
        };
        let owned = event.clone();
        let ts_owned = ts.to_string();
        let difficulty = gold.difficulty.clone();
        // Execution (gold, prediction, schema), EX, ESM and ESM+ on the blocking pool.
        let result = tokio::task::spawn_blocking(move || {
            let GoldEvaluation {
                rows,
                execution,
                esm_plus,
                etm,
            } = scorer.evaluate(&owned, &executor, &options, &ts_owned, evidence);
            let input = execution.map(|execution| JudgedInput {
                schema: schema_for(&owned, &execution, &executor, &schemas),
                execution,
                esm_plus,
                etm,
            });
            (rows, input)
        })
        .await;
        let mut rows = match result {
            Ok((mut rows, input)) => {
                // The judged metrics: LLM calls only, on the async runtime.
                if let (Some(judged), Some(input)) = (&self.judged, input) {
                    rows.extend(judged.scorer.score(event, &input, ts).await);
                }
                rows
            }
            // A panic inside a metric must not lose the event: one explicit row per metric.
            Err(join_error) => self
                .metrics()
                .into_iter()
                .map(|metric| {
                    let mut row = EvaluationRow::for_event(event, ts, metric);
                    row.status = RowStatus::GoldUnavailable;
                    row.details = serde_json::json!({
                        "error": format!("internal error in gold metric: {join_error}")
                    })
                    .into();
                    row
                })
                .collect(),
        };
        if let Some(difficulty) = difficulty {
            for row in &mut rows {
                if let Value::Object(map) = row.details.tree_mut() {
                    map.entry("difficulty")
                        .or_insert_with(|| Value::String(difficulty.clone()));
                }
            }
        }
        rows
    }

    fn llm_usage(&self) -> LlmUsage {
        let Some(judged) = &self.judged else {
            return LlmUsage::default();
        };
        let judge = judged.scorer.judge();
        LlmUsage {
            clients: if judged.shared_with_stef {
                Vec::new()
            } else {
                vec![ClientUsage {
                    role: "gold metrics".into(),
                    judge: judge.kind(),
                    totals: judge.totals(),
                }]
            },
            judged: judged.scorer.counter().snapshot(),
        }
    }

    fn shares_judge_client(&self) -> bool {
        self.judged.as_ref().is_some_and(|j| j.shared_with_stef)
    }

    async fn flush(&self) {
        // A client shared with the STEF judge is flushed by the judge.
        if let Some(judged) = self.judged.as_ref().filter(|j| !j.shared_with_stef) {
            judged.scorer.judge().flush().await;
        }
    }
}
