//! The edge between the async scorer and the synchronous gold metrics: runs
//! [`GoldScorer`](crate::metrics::gold::GoldScorer) on tokio's blocking pool against the
//! read-only SQLite executor, so SQL execution never stalls the runtime.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::config::GoldConfig;
use crate::evaluation::{EvaluationRow, Metric, RowStatus};
use crate::event::{Event, Gold};
use crate::exec::{ExecLimits, SqliteExecutor};
use crate::metrics::ex::ExConvention;
use crate::metrics::gold::{GoldOptions, GoldScorer};
use crate::scorer::GoldMetrics;

/// Gold metrics (EX, ESM, ESM+) over SQLite databases, as configured in `[gold]`.
pub struct SqliteGoldMetrics {
    scorer: Arc<GoldScorer>,
    executor: SqliteExecutor,
    options: GoldOptions,
}

/// Why the gold metrics could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("gold metrics: {0}")]
pub struct GoldSetupError(String);

impl SqliteGoldMetrics {
    /// Load schemas (`tables.json` files, then introspection of `databases`) and open the
    /// executor catalogue.
    pub fn from_config(config: &GoldConfig) -> Result<Option<SqliteGoldMetrics>, GoldSetupError> {
        let Some(databases) = &config.databases else {
            return Ok(None);
        };
        if !databases.is_dir() {
            return Err(GoldSetupError(format!(
                "gold.databases {} is not a directory",
                databases.display()
            )));
        }
        let tables: Vec<&std::path::Path> = config.tables.iter().map(|p| p.as_path()).collect();
        let scorer = GoldScorer::load(&tables, Some(databases))
            .map_err(|e| GoldSetupError(format!("loading schemas: {e}")))?;
        let limits = ExecLimits {
            timeout: Duration::from_millis(config.timeout_ms.max(1)),
            max_rows: config.max_rows.max(1),
            workers: config.workers.max(1),
            ..ExecLimits::default()
        };
        let has = |m: &str| config.metrics.iter().any(|x| x == m);
        let options = GoldOptions {
            ex_convention: if config.ex_convention == "spider" {
                ExConvention::SpiderTestSuite
            } else {
                ExConvention::Bird
            },
            ex: has("ex"),
            esm: has("esm"),
            esm_plus: has("esm_plus"),
            ..GoldOptions::default()
        };
        Ok(Some(SqliteGoldMetrics {
            scorer: Arc::new(scorer),
            executor: SqliteExecutor::new(databases.clone(), limits),
            options,
        }))
    }
}

#[async_trait]
impl GoldMetrics for SqliteGoldMetrics {
    async fn score(&self, event: &Event, gold: &Gold, ts: &str) -> Vec<EvaluationRow> {
        let scorer = Arc::clone(&self.scorer);
        let executor = self.executor.clone();
        let options = self.options;
        let owned = event.clone();
        let ts_owned = ts.to_string();
        let difficulty = gold.difficulty.clone();
        let result = tokio::task::spawn_blocking(move || {
            scorer.score_at(&owned, &executor, &options, &ts_owned)
        })
        .await;
        let mut rows = match result {
            Ok(rows) => rows,
            // A panic inside a metric must not lose the event: one explicit row per metric.
            Err(join_error) => {
                let mut rows = Vec::new();
                for (on, metric) in [
                    (options.ex, Metric::Ex),
                    (options.esm, Metric::Esm),
                    (options.esm_plus, Metric::EsmPlus),
                ] {
                    if on {
                        let mut row = EvaluationRow::for_event(event, ts, metric);
                        row.status = RowStatus::GoldUnavailable;
                        row.details = serde_json::json!({
                            "error": format!("internal error in gold metric: {join_error}")
                        });
                        rows.push(row);
                    }
                }
                rows
            }
        };
        if let Some(difficulty) = difficulty {
            for row in &mut rows {
                if let Value::Object(map) = &mut row.details {
                    map.entry("difficulty")
                        .or_insert_with(|| Value::String(difficulty.clone()));
                }
            }
        }
        rows
    }
}
