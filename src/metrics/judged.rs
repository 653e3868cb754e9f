//! The LLM-judged gold metrics (FLEX, ROSE, Hybrid-EX) on one event.
//!
//! Two steps, so that no SQL runs on the async runtime: [`JudgedInput`] holds both queries
//! executed once (the pipeline reuses the execution EX made, on tokio's blocking pool), the
//! schema DDL and the ESM+ verdict; [`JudgedScorer::score`] then builds the shared context,
//! applies the avoidance rules, and calls each metric's judge through the structured-call layer
//! ([`LlmClient::call_structured`]: cache, limits, retries, repair) — the three metrics
//! concurrently.

use std::sync::Arc;

use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use crate::evaluation::{EvaluationRow, Metric, RowStatus};
use crate::event::Event;
use crate::exec::{ExecError, Executor, ResultSet};
use crate::judge::JudgeError;
use crate::judge::llm::LlmClient;

use super::avoid::CallCounter;
use super::ex::{ExConvention, results_match};
use super::flex::{FlexOptions, score_flex};
use super::gold::GoldExecution;
use super::hybrid_ex::{DEFAULT_CUTOFF, DEFAULT_TOLERANCE, score_hybrid};
use super::rose::{RoseOptions, score_rose};

/// One table of the schema: its name and its `CREATE TABLE` statement.
#[derive(Debug, Clone, PartialEq)]
pub struct TableDdl {
    /// Table name.
    pub name: String,
    /// DDL text (constraints included).
    pub ddl: String,
}

/// Everything the judged metrics need about one (question, prediction, gold) item.
#[derive(Debug, Clone)]
pub struct GoldCase<'a> {
    /// Database id.
    pub db_id: &'a str,
    /// Natural-language question.
    pub question: &'a str,
    /// BIRD-style evidence / hint.
    pub evidence: Option<&'a str>,
    /// Schema tables.
    pub schema: &'a [TableDdl],
    /// Gold SQL.
    pub gold_sql: &'a str,
    /// Predicted SQL.
    pub pred_sql: &'a str,
    /// Gold result (the gold executed).
    pub gold: &'a Arc<ResultSet>,
    /// Predicted result, or why it failed.
    pub pred: Result<&'a Arc<ResultSet>, &'a ExecError>,
    /// ESM+ verdict, when computed (avoidance evidence).
    pub esm_plus: Option<bool>,
    /// How EX compares the results (FLEX's branch and ROSE's route follow EX).
    pub ex_convention: ExConvention,
}

impl GoldCase<'_> {
    /// EX under the configured convention (None when the prediction failed).
    pub fn ex(&self) -> Option<bool> {
        self.pred
            .ok()
            .map(|p| results_match(self.gold, p, self.ex_convention, self.gold_sql))
    }

    /// Schema text: tables referenced by `sqls` first (or only, with `only_referenced`).
    pub fn schema_text(&self, sqls: &[&str], only_referenced: bool) -> String {
        let tokens: std::collections::HashSet<String> =
            sqls.iter().flat_map(|s| identifier_tokens(s)).collect();
        let (used, rest): (Vec<&TableDdl>, Vec<&TableDdl>) = self
            .schema
            .iter()
            .partition(|t| tokens.contains(&t.name.to_lowercase()));
        let mut tables = used;
        if !only_referenced || tables.is_empty() {
            tables.extend(rest);
        }
        let mut out = format!("Database: {}\n", self.db_id);
        for t in tables {
            out.push('\n');
            out.push_str(t.ddl.trim());
            out.push('\n');
        }
        out
    }
}

/// Lowercased identifier tokens of a SQL text (quotes and backticks removed).
fn identifier_tokens(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quoted: Option<char> = None;
    for ch in sql.chars() {
        match quoted {
            Some(q) if ch == q => {
                out.push(std::mem::take(&mut current).to_lowercase());
                quoted = None;
            }
            Some(_) => current.push(ch),
            None if ch == '`' || ch == '"' || ch == '[' => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current).to_lowercase());
                }
                quoted = Some(if ch == '[' { ']' } else { ch });
            }
            None if ch.is_alphanumeric() || ch == '_' => current.push(ch),
            None => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current).to_lowercase());
                }
            }
        }
    }
    if !current.is_empty() {
        out.push(current.to_lowercase());
    }
    out
}

/// The schema of `db_id` as DDL, read from `sqlite_master` through the executor.
pub fn load_schema(exec: &dyn Executor, db_id: &str) -> Result<Vec<TableDdl>, ExecError> {
    let rs = exec.execute(
        db_id,
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL \
         AND name NOT LIKE 'sqlite_%' ORDER BY rowid",
    )?;
    Ok(rs
        .rows
        .iter()
        .filter_map(|r| match (r.first(), r.get(1)) {
            (Some(crate::exec::SqlValue::Text(n)), Some(crate::exec::SqlValue::Text(d))) => {
                Some(TableDdl {
                    name: n.clone(),
                    ddl: d.clone(),
                })
            }
            _ => None,
        })
        .collect())
}

/// A metric's result before it is put on a row.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Row value.
    pub value: f64,
    /// Binary verdict, if any.
    pub verdict: Option<bool>,
    /// Row status.
    pub status: RowStatus,
    /// Row details.
    pub details: Value,
}

/// JSON for a judge error in `details`.
pub fn judge_error_json(e: &JudgeError) -> Value {
    json!({"kind": judge_error_kind(e), "message": e.to_string()})
}

fn judge_error_kind(e: &JudgeError) -> &'static str {
    match e {
        JudgeError::Transport(_) => "transport",
        JudgeError::Http { .. } => "http",
        JudgeError::Timeout(_) => "timeout",
        JudgeError::InvalidReply(_) => "invalid_reply",
        JudgeError::Prompt(_) => "prompt",
    }
}

/// A boolean that also accepts the strings `"true"` / `"false"` (any case): models sometimes
/// quote booleans, and a quoted `"false"` must never count as true (rose.md A9, fixture S11).
pub fn lenient_bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    use serde::de::Error;
    match Value::deserialize(d)? {
        Value::Bool(b) => Ok(b),
        Value::String(s) if s.trim().eq_ignore_ascii_case("true") => Ok(true),
        Value::String(s) if s.trim().eq_ignore_ascii_case("false") => Ok(false),
        other => Err(D::Error::custom(format!("expected a boolean, got {other}"))),
    }
}

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

/// Hybrid-EX settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HybridOptions {
    /// Verdict cut-off θ (pass iff score ≥ θ).
    pub cutoff: f64,
    /// Default relative tolerance δ0.
    pub tolerance: f64,
}

impl Default for HybridOptions {
    fn default() -> Self {
        HybridOptions {
            cutoff: DEFAULT_CUTOFF,
            tolerance: DEFAULT_TOLERANCE,
        }
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

/// Scores FLEX, ROSE and Hybrid-EX rows for events with gold data, sharing one client.
#[derive(Debug)]
pub struct JudgedScorer {
    client: Arc<LlmClient>,
    options: JudgedOptions,
    counter: CallCounter,
}

impl JudgedScorer {
    /// A scorer over `client`.
    pub fn new(client: Arc<LlmClient>, options: JudgedOptions) -> JudgedScorer {
        JudgedScorer {
            client,
            options,
            counter: CallCounter::default(),
        }
    }

    /// Calls made and avoided so far, per metric.
    pub fn counter(&self) -> &CallCounter {
        &self.counter
    }

    /// The client (for cache/limit totals).
    pub fn client(&self) -> &Arc<LlmClient> {
        &self.client
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
                    row.details = details.clone();
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
            ex_convention: self.options.ex_convention,
        };
        for &m in &metrics {
            self.counter.event(m);
        }
        let avoidance = self.options.avoidance;
        let counter = &self.counter;
        let client = &self.client;
        let case = &case;
        let flex = async {
            match &self.options.flex {
                Some(o) => Some(score_flex(client, case, o, avoidance, counter).await),
                None => None,
            }
        };
        let rose = async {
            match &self.options.rose {
                Some(o) => Some(score_rose(client, case, o, avoidance, counter).await),
                None => None,
            }
        };
        let hybrid = async {
            match &self.options.hybrid_ex {
                Some(o) => Some(score_hybrid(client, case, o, avoidance, counter).await),
                None => None,
            }
        };
        let (flex, rose, hybrid) = tokio::join!(flex, rose, hybrid);
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
            row.details = outcome.details;
            Some(row)
        })
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_strip_quotes() {
        assert_eq!(
            identifier_tokens("SELECT `School Code` FROM frpm AS T1 JOIN \"Sat\".x"),
            vec![
                "select",
                "school code",
                "from",
                "frpm",
                "as",
                "t1",
                "join",
                "sat",
                "x"
            ]
        );
    }
}
