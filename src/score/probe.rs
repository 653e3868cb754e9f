//! The read-only probe (`[stef] probe_databases`): questions the STEF checks put to a replica of
//! the event's database — does the query return rows, does each literal it compares a column
//! with occur there (and if not, does a case or spacing variant) — answered through the
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
use sqlgrade_core::exec::{ExecError, SqlValue};
use sqlgrade_core::stef::Prepared;
use sqlgrade_core::stef::checks::{ProbeAnswer, plan_probes, probe_findings};

use crate::sqlite::{ExecLimits, SqliteExecutor};

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
            max_rows: 1,
            max_result_bytes: 64 * 1024,
            workers: workers.max(1),
            cache_capacity: 65_536,
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
    pub fn usage(&self) -> crate::stats::ProbeUsage {
        let c = &self.counters;
        crate::stats::ProbeUsage {
            probes: c.probes.load(Ordering::Relaxed),
            answered: c.answered.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            inconclusive: c.inconclusive.load(Ordering::Relaxed),
        }
    }

    /// Probe `sql` on `schema`'s database and add what the answers show to `prepared`'s
    /// findings.
    pub async fn probe(&self, sql: &str, schema: &DbSchema, prepared: &mut Prepared) {
        if !self.has_database(&schema.db_id) {
            return;
        }
        let mut plan = plan_probes(&prepared.sql_spec, schema);
        // Two rounds at most: the planned probes, then the variant probes they call for.
        for _ in 0..2 {
            if plan.is_empty() {
                break;
            }
            let mut answers = Vec::with_capacity(plan.len());
            for probe in plan {
                let answer = self.answer(&schema.db_id, &probe.sql(sql)).await;
                answers.push((probe, answer));
            }
            plan = probe_findings(&answers, &mut prepared.findings);
        }
    }

    async fn answer(&self, db_id: &str, sql: &str) -> ProbeAnswer {
        self.counters.probes.fetch_add(1, Ordering::Relaxed);
        let answer = match self.executor.execute_async(db_id, sql).await {
            Ok(result) => match result.rows.first() {
                Some(row) => ProbeAnswer::Row(row.first().and_then(value_text)),
                None => ProbeAnswer::Empty,
            },
            // One row is all a probe asks for; a row cap means there were rows.
            Err(ExecError::RowLimit(_)) => ProbeAnswer::Row(None),
            Err(
                error @ (ExecError::Sql(_) | ExecError::Denied(_) | ExecError::MultipleStatements),
            ) => ProbeAnswer::Failed(error.to_string()),
            Err(error) => ProbeAnswer::Inconclusive(error.to_string()),
        };
        let counter = match &answer {
            ProbeAnswer::Row(_) | ProbeAnswer::Empty => &self.counters.answered,
            ProbeAnswer::Failed(_) => &self.counters.failed,
            ProbeAnswer::Inconclusive(_) => &self.counters.inconclusive,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        answer
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
