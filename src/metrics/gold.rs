//! The pipeline's entry point for deterministic gold metrics: one [`EvaluationRow`] per metric
//! (`ex`, `esm`, `esm_plus`) for an event that carries gold SQL.
//!
//! Pure apart from the [`Executor`] it is handed; schemas are loaded once at the edge
//! ([`GoldScorer::load`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::evaluation::{EvaluationRow, Metric, RowStatus};
use crate::event::Event;
use crate::exec::{ExecError, Executor};

use super::esm::ir::PlusSchema;
use super::esm::plus::{EsmPlusOptions, esm_plus};
use super::esm::schema::SchemaError;
use super::esm::{SchemaCatalog, SpiderEvalOptions, SpiderSchema, esm};
use super::ex::{ExConvention, results_match};

/// Which gold metrics to compute and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoldOptions {
    /// Result-equality convention of EX (per run or app).
    pub ex_convention: ExConvention,
    /// Compute EX.
    pub ex: bool,
    /// Compute ESM.
    pub esm: bool,
    /// Compute ESM+.
    pub esm_plus: bool,
    /// Official-evaluator switches for ESM.
    pub esm_options: SpiderEvalOptions,
    /// ESM+ switches.
    pub esm_plus_options: EsmPlusOptions,
}

impl Default for GoldOptions {
    fn default() -> Self {
        GoldOptions {
            ex_convention: ExConvention::Bird,
            ex: true,
            esm: true,
            esm_plus: true,
            esm_options: SpiderEvalOptions::default(),
            esm_plus_options: EsmPlusOptions::default(),
        }
    }
}

struct DbSchemas {
    spider: SpiderSchema,
    plus: PlusSchema,
}

/// Computes EX, ESM and ESM+ rows for events with gold data.
pub struct GoldScorer {
    catalog: SchemaCatalog,
    prepared: Mutex<HashMap<String, Arc<DbSchemas>>>,
}

impl GoldScorer {
    /// A scorer over already-loaded schemas.
    pub fn new(catalog: SchemaCatalog) -> GoldScorer {
        GoldScorer {
            catalog,
            prepared: Mutex::new(HashMap::new()),
        }
    }

    /// Load schemas from `tables.json` files and, when given, introspect the SQLite
    /// catalogue (`<db_id>/<db_id>.sqlite`) for NOT NULL / UNIQUE facts and for databases
    /// missing from `tables.json`.
    pub fn load(
        tables_json: &[&Path],
        databases: Option<&Path>,
    ) -> Result<GoldScorer, SchemaError> {
        let mut catalog = SchemaCatalog::new();
        for p in tables_json {
            catalog.extend(SchemaCatalog::load_tables_json(p)?);
        }
        if let Some(dir) = databases {
            catalog.introspect_sqlite_dir(dir)?;
        }
        Ok(GoldScorer::new(catalog))
    }

    /// The schema catalogue.
    pub fn catalog(&self) -> &SchemaCatalog {
        &self.catalog
    }

    fn schemas(&self, db_id: &str) -> Option<Arc<DbSchemas>> {
        if let Ok(map) = self.prepared.lock()
            && let Some(s) = map.get(db_id)
        {
            return Some(Arc::clone(s));
        }
        let db = self.catalog.get(db_id)?;
        let s = Arc::new(DbSchemas {
            spider: SpiderSchema::new(db),
            plus: PlusSchema::new(db),
        });
        if let Ok(mut map) = self.prepared.lock() {
            map.insert(db_id.to_string(), Arc::clone(&s));
        }
        Some(s)
    }

    /// Score one event; `ts` is used when the event has no timestamp. Events without gold SQL
    /// get no rows.
    pub fn score_at(
        &self,
        event: &Event,
        exec: &dyn Executor,
        opts: &GoldOptions,
        ts: &str,
    ) -> Vec<EvaluationRow> {
        let Some(gold) = &event.gold else {
            return Vec::new();
        };
        let Some(gold_sql) = gold.sql.as_deref().filter(|s| !s.trim().is_empty()) else {
            return Vec::new();
        };
        let db_id = gold.db_id.as_deref();
        let mut rows = Vec::new();
        if opts.ex {
            rows.push(self.ex_row(event, exec, opts, ts, gold_sql, db_id));
        }
        let schemas = db_id.and_then(|d| self.schemas(d));
        if opts.esm {
            let mut row = EvaluationRow::for_event(event, ts, Metric::Esm);
            match &schemas {
                None => unavailable(&mut row, db_id, "no schema for this database"),
                Some(s) => match esm(&s.spider, gold_sql, &event.sql, opts.esm_options) {
                    Ok(out) => {
                        row.verdict = Some(out.verdict);
                        row.value = if out.verdict { 1.0 } else { 0.0 };
                        row.details = json!({
                            "hardness": out.hardness,
                            "pred_parsed": out.pred_parsed,
                            "pred_parse_error": out.pred_parse_error,
                            "failed_components": out.failed_components,
                            "tables_match": out.tables_match,
                            "value_check": !opts.esm_options.disable_value,
                            "distinct_check": !opts.esm_options.disable_distinct,
                        });
                    }
                    Err(e) => gold_parse_error(&mut row, &e.0),
                },
            }
            rows.push(row);
        }
        if opts.esm_plus {
            let mut row = EvaluationRow::for_event(event, ts, Metric::EsmPlus);
            match &schemas {
                None => unavailable(&mut row, db_id, "no schema for this database"),
                Some(s) => match esm_plus(&s.plus, gold_sql, &event.sql, opts.esm_plus_options) {
                    Ok(out) => {
                        row.verdict = Some(out.verdict);
                        row.value = if out.verdict { 1.0 } else { 0.0 };
                        row.details = json!({
                            "pred_parsed": out.pred_parsed,
                            "pred_parse_error": out.pred_parse_error,
                            "mismatched": out.mismatched,
                            "gold_rules": out.gold_rules,
                            "pred_rules": out.pred_rules,
                            "skipped_rules": out.skipped_rules,
                            "constraints": s.plus.db.constraints,
                            "value_check": opts.esm_plus_options.value_check,
                            "distinct_check": opts.esm_plus_options.distinct_check,
                            "paper_compat": opts.esm_plus_options.paper_compat,
                        });
                    }
                    Err(e) => gold_parse_error(&mut row, &e.0),
                },
            }
            rows.push(row);
        }
        rows
    }

    /// [`GoldScorer::score_at`] with the current time as the fallback timestamp.
    pub fn score(
        &self,
        event: &Event,
        exec: &dyn Executor,
        opts: &GoldOptions,
    ) -> Vec<EvaluationRow> {
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        self.score_at(event, exec, opts, &now)
    }

    fn ex_row(
        &self,
        event: &Event,
        exec: &dyn Executor,
        opts: &GoldOptions,
        ts: &str,
        gold_sql: &str,
        db_id: Option<&str>,
    ) -> EvaluationRow {
        let mut row = EvaluationRow::for_event(event, ts, Metric::Ex);
        let Some(db) = db_id.filter(|d| exec.has_database(d)) else {
            unavailable(&mut row, db_id, "database not in the executor catalogue");
            return row;
        };
        let convention = opts.ex_convention.as_str();
        let gold = match exec.execute(db, gold_sql) {
            Ok(g) => g,
            Err(e) => {
                row.status = RowStatus::GoldError;
                row.details = json!({"convention": convention, "gold_error": error_json(&e)});
                return row;
            }
        };
        match exec.execute(db, &event.sql) {
            Ok(pred) => {
                let ok = results_match(&gold, &pred, opts.ex_convention, gold_sql);
                row.verdict = Some(ok);
                row.value = if ok { 1.0 } else { 0.0 };
                row.details = json!({
                    "convention": convention,
                    "gold_rows": gold.rows.len(),
                    "pred_rows": pred.rows.len(),
                    "gold_columns": gold.columns.len(),
                    "pred_columns": pred.columns.len(),
                });
            }
            Err(e) => {
                row.verdict = Some(false);
                row.status = if matches!(e, ExecError::Timeout(_)) {
                    RowStatus::Timeout
                } else {
                    RowStatus::ExecError
                };
                row.details = json!({
                    "convention": convention,
                    "gold_rows": gold.rows.len(),
                    "pred_error": error_json(&e),
                });
            }
        }
        row
    }
}

fn error_json(e: &ExecError) -> Value {
    json!({"kind": e.kind(), "message": e.to_string()})
}

fn unavailable(row: &mut EvaluationRow, db_id: Option<&str>, why: &str) {
    row.status = RowStatus::GoldUnavailable;
    row.details =
        json!({"db_id": db_id, "reason": if db_id.is_none() { "gold has no db_id" } else { why }});
}

fn gold_parse_error(row: &mut EvaluationRow, msg: &str) {
    row.status = RowStatus::GoldParseError;
    row.details = json!({"gold_parse_error": msg});
}
