//! What the LLM-judged gold metrics (FLEX, ROSE, Hybrid-EX) share: the item they judge
//! ([`GoldCase`]: question, both queries, both results, schema, avoidance evidence), the schema
//! as DDL ([`TableDdl`]), a metric's [`Outcome`] before it becomes a row, and lenient reply
//! parsing helpers. Each metric module imports this one; none imports another metric's
//! orchestration ([`super::judged`]).

use std::sync::Arc;

use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use crate::evaluation::RowStatus;
use crate::exec::{ExecError, Executor, ResultSet};
use crate::judge::JudgeError;

use super::ex::{ExConvention, results_match};

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
    /// ETM verdict, when computed (avoidance evidence).
    pub etm: Option<bool>,
    /// How EX compares the results (FLEX's branch and ROSE's route follow EX).
    pub ex_convention: ExConvention,
}

impl GoldCase<'_> {
    /// The tree-matching evidence that decides "correct" without a judge call: an
    /// ESM+-equivalent or ETM-matched prediction (both rewrite the two queries with rules
    /// meant to preserve equivalence and compare; a match is evidence of equivalence, a miss
    /// is not evidence of anything, so only a match decides). ETM keeps a few rewrites of the
    /// released script that do not always preserve it (e.g. `x OR a = a` → `x`; `ts_ex` finds
    /// them on Spider in about 1% of ETM matches), documented in `metrics::etm`.
    pub fn tree_match(&self) -> Option<crate::metrics::avoid::Avoidance> {
        use crate::metrics::avoid::Avoidance;
        if self.esm_plus == Some(true) {
            Some(Avoidance::EsmPlusEquivalent)
        } else if self.etm == Some(true) {
            Some(Avoidance::EtmEquivalent)
        } else {
            None
        }
    }

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
