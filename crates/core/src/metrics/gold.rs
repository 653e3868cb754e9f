//! The pipeline's entry point for deterministic gold metrics: one [`EvaluationRow`] per metric
//! (`ex`, `esm`, `esm_plus`, `etm`, `ts_ex`) for an event that carries gold SQL.
//!
//! Pure apart from the seams it is handed — the [`Executor`], ETM's [`PlanCheck`] and
//! `ts_ex`'s [`SuiteCheck`]; schemas are loaded once at the edge (the daemon's
//! `sqlite::schema::load_catalog`) and handed to [`GoldScorer::new`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::evaluation::{EvaluationRow, Metric, MetricKind, MetricSet, RowStatus};
use crate::event::Event;
use crate::exec::{ExecError, ExecResult, Executor, ResultSet};

use super::esm::ir::PlusSchema;
use super::esm::plus::{EsmPlusOptions, esm_plus};
use super::esm::{SchemaCatalog, SpiderEvalOptions, SpiderSchema, esm};
use super::etm::{EtmGoldError, EtmSchema, PlanCheck, etm};
use super::ex::{ExConvention, results_match};
use super::ts_ex::{SuiteCheck, SuiteMode, TsError};

/// Which gold metrics to compute and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoldOptions {
    /// Result-equality convention of EX (per run or app).
    pub ex_convention: ExConvention,
    /// The deterministic gold metrics to compute (`ts_ex` and `ts_ex_strict` are off unless
    /// asked for); others in the list are ignored here.
    pub metrics: MetricSet,
    /// Official-evaluator switches for ESM.
    pub esm_options: SpiderEvalOptions,
    /// ESM+ switches.
    pub esm_plus_options: EsmPlusOptions,
}

impl Default for GoldOptions {
    fn default() -> Self {
        GoldOptions {
            ex_convention: ExConvention::Bird,
            metrics: Metric::gold()
                .filter(|m| m.kind() == MetricKind::Gold && m.entry().on_by_default)
                .collect(),
            esm_options: SpiderEvalOptions::default(),
            esm_plus_options: EsmPlusOptions::default(),
        }
    }
}

impl GoldOptions {
    /// Whether `metric` is asked for.
    pub fn has(&self, metric: Metric) -> bool {
        self.metrics.has(metric)
    }
}

struct DbSchemas {
    spider: SpiderSchema,
    plus: PlusSchema,
    etm: EtmSchema,
}

/// Computes EX, ESM, ESM+, ETM and `ts_ex` rows for events with gold data.
pub struct GoldScorer {
    catalog: SchemaCatalog,
    prepared: Mutex<HashMap<String, Arc<DbSchemas>>>,
    planner: Option<Arc<dyn PlanCheck>>,
    suites: Option<Arc<dyn SuiteCheck>>,
}

impl GoldScorer {
    /// A scorer over already-loaded schemas.
    pub fn new(catalog: SchemaCatalog) -> GoldScorer {
        GoldScorer {
            catalog,
            prepared: Mutex::new(HashMap::new()),
            planner: None,
            suites: None,
        }
    }

    /// `ts_ex`'s suites (generated databases); without them, `ts_ex` rows are
    /// `gold_unavailable`.
    pub fn with_suites(mut self, suites: Arc<dyn SuiteCheck>) -> GoldScorer {
        self.suites = Some(suites);
        self
    }

    /// ETM's validity check (`EXPLAIN QUERY PLAN` on a schema-only database); without one,
    /// ETM rows are `gold_unavailable`.
    pub fn with_planner(mut self, planner: Arc<dyn PlanCheck>) -> GoldScorer {
        self.planner = Some(planner);
        self
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
            etm: EtmSchema::from_db(db),
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
        self.evaluate(event, exec, opts, ts, Evidence::default())
            .rows
    }

    /// Score one event and keep what other metrics can reuse: the executed queries and the
    /// ESM+ verdict (`evidence` asks for them even when EX / ESM+ rows are not wanted). Both
    /// queries are executed at most once. Events without gold SQL get no rows and no evidence.
    pub fn evaluate(
        &self,
        event: &Event,
        exec: &dyn Executor,
        opts: &GoldOptions,
        ts: &str,
        evidence: Evidence,
    ) -> GoldEvaluation {
        let mut out = GoldEvaluation::default();
        let Some(gold) = &event.gold else {
            return out;
        };
        let Some(gold_sql) = gold.sql.as_deref().filter(|s| !s.trim().is_empty()) else {
            return out;
        };
        let db_id = gold.db_id.as_deref();
        if opts.has(Metric::Ex) || evidence.execution {
            let execution = GoldExecution::run(exec, db_id, gold_sql, &event.sql);
            if opts.has(Metric::Ex) {
                out.rows.push(ex_row(event, opts, ts, gold_sql, &execution));
            }
            if evidence.execution {
                out.execution = Some(execution);
            }
        }
        let schemas = db_id.and_then(|d| self.schemas(d));
        if opts.has(Metric::Esm) {
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
                        })
                        .into();
                    }
                    Err(e) => gold_parse_error(&mut row, &e.0),
                },
            }
            out.rows.push(row);
        }
        if opts.has(Metric::EsmPlus) || evidence.esm_plus {
            let mut row = EvaluationRow::for_event(event, ts, Metric::EsmPlus);
            match &schemas {
                None => unavailable(&mut row, db_id, "no schema for this database"),
                Some(s) => match esm_plus(&s.plus, gold_sql, &event.sql, opts.esm_plus_options) {
                    Ok(result) => {
                        out.esm_plus = Some(result.verdict);
                        row.verdict = Some(result.verdict);
                        row.value = if result.verdict { 1.0 } else { 0.0 };
                        row.details = json!({
                            "pred_parsed": result.pred_parsed,
                            "pred_parse_error": result.pred_parse_error,
                            "mismatched": result.mismatched,
                            "gold_rules": result.gold_rules,
                            "pred_rules": result.pred_rules,
                            "skipped_rules": result.skipped_rules,
                            "constraints": s.plus.db.constraints,
                            "value_check": opts.esm_plus_options.value_check,
                            "distinct_check": opts.esm_plus_options.distinct_check,
                            "paper_compat": opts.esm_plus_options.paper_compat,
                        })
                        .into();
                    }
                    Err(e) => gold_parse_error(&mut row, &e.0),
                },
            }
            if opts.has(Metric::EsmPlus) {
                out.rows.push(row);
            }
        }
        for (on, mode) in [
            (opts.has(Metric::TsEx), SuiteMode::Constrained),
            (opts.has(Metric::TsExStrict), SuiteMode::Strict),
        ] {
            if on {
                out.rows
                    .push(self.ts_ex_row(event, ts, db_id, gold_sql, opts.ex_convention, mode));
            }
        }
        if opts.has(Metric::Etm) || evidence.etm {
            let row = self.etm_row(event, ts, db_id, schemas.as_deref(), gold_sql);
            if row.status == RowStatus::Ok {
                out.etm = row.verdict;
            }
            if opts.has(Metric::Etm) {
                out.rows.push(row);
            }
        }
        out
    }

    fn ts_ex_row(
        &self,
        event: &Event,
        ts: &str,
        db_id: Option<&str>,
        gold_sql: &str,
        convention: ExConvention,
        mode: SuiteMode,
    ) -> EvaluationRow {
        let metric = match mode {
            SuiteMode::Constrained => Metric::TsEx,
            SuiteMode::Strict => Metric::TsExStrict,
        };
        let mut row = EvaluationRow::for_event(event, ts, metric);
        let (Some(db), Some(suites)) = (
            db_id.and_then(|d| self.catalog.get(d)),
            self.suites.as_deref(),
        ) else {
            let why = if self.suites.is_none() {
                "no test-suite generator configured"
            } else {
                "no schema for this database"
            };
            unavailable(&mut row, db_id, why);
            return row;
        };
        let asked = [
            Some(event.question.as_str()),
            event.enriched_question.as_deref(),
            event.gold.as_ref().and_then(|g| g.evidence.as_deref()),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("\n");
        match suites.check(db, gold_sql, &event.sql, &asked, convention, mode) {
            Ok(out) => {
                row.verdict = Some(out.verdict);
                row.value = if out.verdict { 1.0 } else { 0.0 };
                if out.pred_error.is_some() {
                    row.status = RowStatus::ExecError;
                }
                let verdict = match (out.verdict, &out.gold_suspect) {
                    (true, Some(_)) => "ex_fallback_gold_suspect",
                    (true, None) => "equivalent_on_suite",
                    (false, _) => "not_equivalent",
                };
                let mut details = json!({
                    "ts_verdict": verdict,
                    "suite_size": out.suite_size,
                    "mutants": out.mutants,
                    "mutants_killed": out.mutants_killed,
                    "real_database": out.real_database,
                    "differs_on": out.differs_on,
                    "pred_error": out.pred_error,
                    "counterexample": out.counterexample,
                    "ex_convention": convention.as_str(),
                    "suite_mode": out.mode,
                    "constraints": {
                        "mined": out.constraints_mined,
                        "assumed": out.assumptions,
                    },
                });
                if let Some(suspect) = &out.gold_suspect {
                    details["gold_suspect"] = json!(suspect);
                }
                row.details = details.into();
            }
            Err(e @ TsError::Gold(_)) => {
                row.status = RowStatus::GoldError;
                row.details = json!({"error": e.to_string()}).into();
            }
            Err(e @ TsError::Unavailable(_)) => unavailable(&mut row, db_id, &e.to_string()),
        }
        row
    }

    fn etm_row(
        &self,
        event: &Event,
        ts: &str,
        db_id: Option<&str>,
        schemas: Option<&DbSchemas>,
        gold_sql: &str,
    ) -> EvaluationRow {
        let mut row = EvaluationRow::for_event(event, ts, Metric::Etm);
        let (Some(s), Some(db), Some(planner)) = (
            schemas,
            db_id.and_then(|d| self.catalog.get(d)),
            self.planner.as_deref(),
        ) else {
            let why = if self.planner.is_none() {
                "no planning database for ETM's validity check"
            } else {
                "no schema for this database"
            };
            unavailable(&mut row, db_id, why);
            return row;
        };
        match etm(db, &s.etm, planner, gold_sql, &event.sql) {
            Ok(result) => {
                row.verdict = Some(result.verdict);
                row.value = if result.verdict { 1.0 } else { 0.0 };
                row.details = json!({
                    "miss": result.miss,
                    "reason": result.reason,
                    "constraints": db.constraints,
                })
                .into();
            }
            Err(EtmGoldError::Unparsed(e)) => gold_parse_error(&mut row, &e),
            Err(e @ EtmGoldError::Invalid(_)) => {
                row.status = RowStatus::GoldError;
                row.details = json!({"error": e.to_string()}).into();
            }
        }
        row
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
}

/// What [`GoldScorer::evaluate`] should compute beyond the rows it emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Evidence {
    /// Execute gold and prediction and return the results ([`GoldEvaluation::execution`]).
    pub execution: bool,
    /// Compute the ESM+ verdict ([`GoldEvaluation::esm_plus`]) even without an ESM+ row.
    pub esm_plus: bool,
    /// Compute the ETM verdict ([`GoldEvaluation::etm`]) even without an ETM row.
    pub etm: bool,
}

/// The rows of one event and the evidence the LLM-judged metrics reuse.
#[derive(Debug, Clone, Default)]
pub struct GoldEvaluation {
    /// EX / ESM / ESM+ rows, as configured.
    pub rows: Vec<EvaluationRow>,
    /// The executed queries, when asked for and the event has gold SQL.
    pub execution: Option<GoldExecution>,
    /// The ESM+ verdict, when computed and the gold SQL parsed.
    pub esm_plus: Option<bool>,
    /// The ETM verdict, when computed and the gold SQL usable.
    pub etm: Option<bool>,
}

/// Gold and predicted SQL of one event, each executed once.
#[derive(Debug, Clone)]
pub enum GoldExecution {
    /// Nothing was executed: the event names no database, or not one the executor serves.
    Unavailable {
        /// The event's `db_id`.
        db_id: Option<String>,
        /// Why (for `details.reason`).
        reason: &'static str,
    },
    /// The gold SQL failed; the prediction was not executed.
    GoldFailed(ExecError),
    /// Both were executed; the prediction may have failed.
    Executed {
        /// The database.
        db_id: String,
        /// The gold result.
        gold: Arc<ResultSet>,
        /// The predicted result, or why there is none.
        pred: ExecResult,
    },
}

impl GoldExecution {
    /// Execute `gold_sql`, then (when it succeeded) `pred_sql`, on `db_id`. Blocking.
    pub fn run(
        exec: &dyn Executor,
        db_id: Option<&str>,
        gold_sql: &str,
        pred_sql: &str,
    ) -> GoldExecution {
        let Some(db) = db_id.filter(|d| exec.has_database(d)) else {
            return GoldExecution::Unavailable {
                db_id: db_id.map(str::to_string),
                reason: if db_id.is_none() {
                    "gold has no db_id"
                } else {
                    "database not in the executor catalogue"
                },
            };
        };
        match exec.execute(db, gold_sql) {
            Err(e) => GoldExecution::GoldFailed(e),
            Ok(gold) => GoldExecution::Executed {
                db_id: db.to_string(),
                gold,
                pred: exec.execute(db, pred_sql),
            },
        }
    }
}

fn ex_row(
    event: &Event,
    opts: &GoldOptions,
    ts: &str,
    gold_sql: &str,
    execution: &GoldExecution,
) -> EvaluationRow {
    let mut row = EvaluationRow::for_event(event, ts, Metric::Ex);
    let convention = opts.ex_convention.as_str();
    match execution {
        GoldExecution::Unavailable { db_id, reason } => {
            row.status = RowStatus::GoldUnavailable;
            row.details = json!({"db_id": db_id, "reason": reason}).into();
        }
        GoldExecution::GoldFailed(e) => {
            row.status = RowStatus::GoldError;
            row.details = json!({"convention": convention, "gold_error": error_json(e)}).into();
        }
        GoldExecution::Executed {
            gold,
            pred: Ok(pred),
            ..
        } => {
            let ok = results_match(gold, pred, opts.ex_convention, gold_sql);
            row.verdict = Some(ok);
            row.value = if ok { 1.0 } else { 0.0 };
            row.details = json!({
                "convention": convention,
                "gold_rows": gold.rows.len(),
                "pred_rows": pred.rows.len(),
                "gold_columns": gold.columns.len(),
                "pred_columns": pred.columns.len(),
                "gold_digest": gold.set_digest(),
                "pred_digest": pred.set_digest(),
            })
            .into();
        }
        GoldExecution::Executed {
            gold, pred: Err(e), ..
        } => {
            row.verdict = Some(false);
            row.status = if matches!(e, ExecError::Timeout(_)) {
                RowStatus::Timeout
            } else {
                RowStatus::ExecError
            };
            row.details = json!({
                "convention": convention,
                "gold_rows": gold.rows.len(),
                "gold_digest": gold.set_digest(),
                "pred_error": error_json(e),
            })
            .into();
        }
    }
    row
}

fn error_json(e: &ExecError) -> Value {
    json!({"kind": e.kind(), "message": e.to_string()})
}

fn unavailable(row: &mut EvaluationRow, db_id: Option<&str>, why: &str) {
    row.status = RowStatus::GoldUnavailable;
    row.details =
        json!({"db_id": db_id, "reason": if db_id.is_none() { "gold has no db_id" } else { why }})
            .into();
}

fn gold_parse_error(row: &mut EvaluationRow, msg: &str) {
    row.status = RowStatus::GoldParseError;
    row.details = json!({"gold_parse_error": msg}).into();
}
