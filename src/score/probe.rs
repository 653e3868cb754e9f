//! The read-only probe (`[stef] probe_databases`): questions the STEF checks put to a replica of
//! the event's database — what the query returns (its first [`PROBE_RESULT_ROWS`] rows, which
//! the result checks read as they read an event's own `result`; skipped when the event carries
//! one), does each literal it compares a column with occur there (and if not, does a case or
//! spacing variant), does a counted key repeat under the query's joins, and, for a query that
//! returns nothing, which of its conditions matches no row on its own — answered through the
//! read-only executor ([`SqliteExecutor`]: read-only connections, an authorizer, a per-query
//! time limit, a row cap, bounded concurrency, a result cache), on tokio's blocking pool so the
//! scoring task only awaits.
//!
//! Probes are planned and interpreted by the pure core (`stef::checks::plan_probes`,
//! `probe_findings`); this module only runs them. A probe that times out, or a database that
//! is not there, is an answer too: `probe_inconclusive` (info) on the row, never a stalled or
//! lost event. The counters ([`ProbeCounters`]) go to the run summary and are logged when the
//! prober is dropped.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlgrade_core::catalogue::DbSchema;
use sqlgrade_core::event::{Event, QueryResult};
use sqlgrade_core::exec::{ExecError, SqlValue};
use sqlgrade_core::stef::Prepared;
use sqlgrade_core::stef::checks::{
    Probe, ProbeAnswer, confirmation_probes, plan_probes, predicate_probes, probe_findings,
};
use sqlgrade_core::stef::elements::{QueryNames, name_findings};
use sqlgrade_core::stef::result_checks::{self, ResultCheckInput, ResultSource};
use sqlgrade_core::stef::text::QuestionTexts;

/// Rows of the query's own result the probe fetches for the result checks (one more tells
/// "more than this").
pub const PROBE_RESULT_ROWS: usize = 100;

use crate::score::sqlite::{ExecLimits, SqliteExecutor};

/// Runs the STEF probes of events whose database is under the probe directory.
pub struct Prober {
    executor: SqliteExecutor,
    counters: ProbeCounters,
}

/// What the probes did in a run.
#[derive(Debug, Default)]
pub struct ProbeCounters {
    /// Probes run (cache hits included).
    pub probes: AtomicU64,
    /// Probes that returned a row or none (a conclusion).
    pub answered: AtomicU64,
    /// Probes the database rejected (the query's own SQL errors).
    pub failed: AtomicU64,
    /// Probes that timed out or found no database (no conclusion).
    pub inconclusive: AtomicU64,
}

impl Prober {
    /// A prober over `<dir>/<db_id>/<db_id>.sqlite`, each probe limited to `timeout`, at most
    /// `workers` at once.
    pub fn new(dir: PathBuf, timeout: Duration, workers: usize) -> Prober {
        let limits = ExecLimits {
            timeout,
            max_rows: PROBE_RESULT_ROWS + 1,
            max_result_bytes: 1024 * 1024,
            workers: workers.max(1),
            cache_bytes: 32 * 1024 * 1024,
        };
        Prober {
            executor: SqliteExecutor::new(dir, limits),
            counters: ProbeCounters::default(),
        }
    }

    /// Whether the probe directory has `db_id`.
    pub fn has_database(&self, db_id: &str) -> bool {
        self.executor.database_path(db_id).is_some()
    }

    /// The counters so far, as the run summary shows them.
    pub fn usage(&self) -> crate::telemetry::stats::ProbeUsage {
        let c = &self.counters;
        crate::telemetry::stats::ProbeUsage {
            probes: c.probes.load(Ordering::Relaxed),
            answered: c.answered.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            inconclusive: c.inconclusive.load(Ordering::Relaxed),
        }
    }

    /// Probe `event`'s SQL on `schema`'s database and add what the answers show to
    /// `prepared`'s findings.
    pub async fn probe(&self, event: &Event, schema: &DbSchema, prepared: &mut Prepared) {
        if !self.has_database(&schema.db_id) {
            return;
        }
        prepared.evidence.probe = true;
        let sql = event.sql.as_str();
        let mut plan = plan_probes(&prepared.sql_spec, schema);
        // What one more bounded query settles (a count that may repeat its keys).
        let question = sqlgrade_core::stef::text::lower_collapsed(&event.question);
        plan.extend(confirmation_probes(
            sql,
            &question,
            &prepared.sql_spec,
            schema,
        ));
        // The event's own result (the result checks already read it) wins over a probe run; an
        // empty one asks at once which of the query's conditions matches nothing.
        if let Some(result) = &event.result {
            plan.retain(|p| *p != Probe::QueryRows);
            if result.error.is_none() && result.total_rows() == Some(0) {
                plan.extend(predicate_probes(sql));
            }
        }
        // Two rounds at most: the planned probes, then the follow-ups their answers call for
        // (variants of a missing literal; an empty run's conditions one by one).
        for _ in 0..2 {
            if plan.is_empty() {
                break;
            }
            let mut answers = Vec::with_capacity(plan.len());
            for probe in plan {
                let answer = if probe == Probe::QueryRows {
                    self.query_rows(event, &schema.db_id, prepared).await
                } else {
                    self.answer(&schema.db_id, &probe.sql(sql)).await
                };
                answers.push((probe, answer));
            }
            plan = probe_findings(&answers, &prepared.sql_spec, schema, &mut prepared.findings);
            if answers.contains(&(Probe::QueryRows, ProbeAnswer::Empty)) {
                plan.extend(predicate_probes(sql));
            }
        }
        // The probe's findings name their schema elements as the checks' do.
        let names = QueryNames::of(&prepared.sql_spec, Some(schema));
        name_findings(&mut prepared.findings, &names);
    }

    /// The query's first rows: the answer to [`Probe::QueryRows`], and, when there are rows,
    /// the result checks' findings on them (failures and empty results are `probe_findings`').
    async fn query_rows(&self, event: &Event, db_id: &str, prepared: &mut Prepared) -> ProbeAnswer {
        let query = event.sql.trim().trim_end_matches(';').trim_end();
        let sql = format!("SELECT * FROM ({query}) LIMIT {}", PROBE_RESULT_ROWS + 1);
        self.counters.probes.fetch_add(1, Ordering::Relaxed);
        let outcome = self.executor.execute_async(db_id, &sql).await;
        let answer = match &outcome {
            Ok(result) => match result.rows.first() {
                Some(row) => ProbeAnswer::Row(row.first().and_then(value_text)),
                None => ProbeAnswer::Empty,
            },
            // Wider rows than the size cap: there are rows, nothing more is known.
            Err(ExecError::RowLimit(_) | ExecError::ValueLimit(_)) => ProbeAnswer::Row(None),
            Err(error) => classify(error),
        };
        self.count(&answer);
        if let Ok(result) = outcome
            && !result.rows.is_empty()
        {
            let mut sample: QueryResult = result.to_query_result();
            if result.rows.len() > PROBE_RESULT_ROWS {
                // `LIMIT n + 1` answered n + 1 rows: more than n, how many more is unknown.
                sample.row_count = None;
                sample.truncated = true;
            }
            let texts = QuestionTexts::new(&event.question, event.enriched_question.as_deref());
            let found = result_checks::run(&ResultCheckInput {
                texts: &texts,
                question_spec: &prepared.question_spec,
                result: &sample,
                source: ResultSource::Probe,
            });
            prepared.findings.extend(found);
        }
        answer
    }

    fn count(&self, answer: &ProbeAnswer) {
        let counter = match answer {
            ProbeAnswer::Row(_) | ProbeAnswer::Empty => &self.counters.answered,
            ProbeAnswer::Failed(_) => &self.counters.failed,
            ProbeAnswer::Inconclusive(_) => &self.counters.inconclusive,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    async fn answer(&self, db_id: &str, sql: &str) -> ProbeAnswer {
        self.counters.probes.fetch_add(1, Ordering::Relaxed);
        let answer = match self.executor.execute_async(db_id, sql).await {
            Ok(result) => match result.rows.first() {
                Some(row) => ProbeAnswer::Row(row.first().and_then(value_text)),
                None => ProbeAnswer::Empty,
            },
            // One row is all a value probe asks for; a row cap means there were rows.
            Err(ExecError::RowLimit(_)) => ProbeAnswer::Row(None),
            Err(error) => classify(&error),
        };
        self.count(&answer);
        answer
    }
}

/// A failed probe: the query's own error, or no conclusion (time limit, no database).
fn classify(error: &ExecError) -> ProbeAnswer {
    match error {
        ExecError::Sql(_) | ExecError::Denied(_) | ExecError::MultipleStatements => {
            ProbeAnswer::Failed(error.to_string())
        }
        _ => ProbeAnswer::Inconclusive(error.to_string()),
    }
}

/// A probed value as text, for the finding's evidence.
fn value_text(value: &SqlValue) -> Option<String> {
    match value {
        SqlValue::Null | SqlValue::Blob(_) => None,
        SqlValue::Integer(i) => Some(i.to_string()),
        SqlValue::Real(r) => Some(r.to_string()),
        SqlValue::Text(t) => Some(t.clone()),
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        let c = &self.counters;
        let probes = c.probes.load(Ordering::Relaxed);
        if probes > 0 {
            tracing::info!(
                probes,
                answered = c.answered.load(Ordering::Relaxed),
                failed = c.failed.load(Ordering::Relaxed),
                inconclusive = c.inconclusive.load(Ordering::Relaxed),
                "STEF probes"
            );
        }
        self.executor.shutdown();
    }
}
