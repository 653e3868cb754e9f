//! ROSE (Pei et al.): the Prover–Refuter cascade, exactly as `shared/specs/rose.md` §2.1–2.2.
//!
//! | executable | E_p≡E_g | Prover  | Refuter        | ROSE | calls |
//! |------------|---------|---------|----------------|------|-------|
//! | no         | –       | –       | –              | 0    | 0     |
//! | yes        | yes     | skipped | uphold (false) | 1    | 1     |
//! | yes        | yes     | skipped | overturn       | 0    | 1     |
//! | yes        | no      | false   | not run        | 0    | 1     |
//! | yes        | no      | true    | uphold         | 1    | 2     |
//! | yes        | no      | true    | overturn       | 0    | 2     |
//!
//! Routing equality follows A4 (same shape, multiset of rows each canonicalised as a sorted list
//! of normalised cells, A5). GoldX = `gold_correct == false` on any Refuter call; the ambiguity
//! string is parsed into tags (A10). A failed judge call gives status `judge_error` (excluded
//! from aggregates, A9), with everything obtained before the failure kept in `details`.
//! Prompts are written in our own words with the paper's sections and rules (A15).

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::evaluation::{Metric, RowStatus};
use crate::exec::{ResultSet, SqlValue};
use crate::judge::StructuredJudge;
use crate::judge::structured::{ReplySchema, StructuredCall, StructuredReply, call_structured};

use super::avoid::{Avoidance, CallCounter};
use super::flex::{RenderSpec, exec_failure, render_result};
use super::judge_case::{GoldCase, Outcome, judge_error_json, lenient_bool};

/// Prompt of the SQL Prover.
pub const PROVER_PROMPT: &str = "rose_prover";
/// Prompt of the Refuter with results (mismatch path, variant A).
pub const REFUTER_RESULTS_PROMPT: &str = "rose_refuter_results";
/// Prompt of the Refuter without results (match path, variant B).
pub const REFUTER_MATCH_PROMPT: &str = "rose_refuter_match";

/// Rows of a result shown in ROSE's prompts by default: the released code's first 20 rows
/// (rose.md §2.6, A6).
pub const DEFAULT_PREVIEW_ROWS: usize = 20;
/// Largest preview accepted (`gold.rose_preview_rows`): the annotators saw at most 200 rows
/// (rose.md A6); beyond that the prompt only grows.
pub const MAX_PREVIEW_ROWS: usize = 200;

/// ROSE settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoseOptions {
    /// Rows shown in result previews (`gold.rose_preview_rows`; A6: 20).
    pub preview_rows: usize,
    /// Longest text cell shown, in characters (A6: 200).
    pub max_chars: usize,
}

impl Default for RoseOptions {
    fn default() -> Self {
        RoseOptions {
            preview_rows: DEFAULT_PREVIEW_ROWS,
            max_chars: 200,
        }
    }
}

/// The Prover's reply (keys in the order the model should produce them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProverReply {
    /// What a correct answer contains.
    pub expected_answer: String,
    /// What the SQL computes.
    pub sql_description: String,
    /// Semantic justification.
    pub reason: String,
    /// true = the prediction adequately answers the question.
    #[serde(deserialize_with = "lenient_bool")]
    pub verdict: bool,
    /// Pointers into the result (only when verdict is true).
    #[serde(default)]
    pub evidence: Option<String>,
}

/// The Refuter's reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefuterReply {
    /// One-sentence semantic judgement.
    pub judgement: String,
    /// true = overturn the pass.
    #[serde(deserialize_with = "lenient_bool")]
    pub verdict: bool,
    /// `ambiguous question` | `ambiguous schema` | `na` | a comma-joined combination.
    pub ambiguity: String,
    /// false = the gold SQL is faulty.
    #[serde(deserialize_with = "lenient_bool")]
    pub gold_correct: bool,
}

static PROVER_SCHEMA: LazyLock<ReplySchema> = LazyLock::new(|| {
    ReplySchema::new(
        "rose_prover",
        json!({"type": "object", "additionalProperties": false,
            "required": ["expected_answer", "sql_description", "reason", "verdict", "evidence"],
            "properties": {
                "expected_answer": {"type": "string"}, "sql_description": {"type": "string"},
                "reason": {"type": "string"}, "verdict": {"type": "boolean"},
                "evidence": {"type": ["string", "null"]}}}),
    )
    .with_max_tokens(1024)
});

static REFUTER_SCHEMA: LazyLock<ReplySchema> = LazyLock::new(|| {
    ReplySchema::new(
        "rose_refuter",
        json!({"type": "object", "additionalProperties": false,
            "required": ["judgement", "verdict", "ambiguity", "gold_correct"],
            "properties": {
                "judgement": {"type": "string"}, "verdict": {"type": "boolean"},
                "ambiguity": {"type": "string"}, "gold_correct": {"type": "boolean"}}}),
    )
    .with_max_tokens(1024)
});

impl StructuredReply for ProverReply {
    fn schema() -> &'static ReplySchema {
        &PROVER_SCHEMA
    }
}

impl StructuredReply for RefuterReply {
    fn schema() -> &'static ReplySchema {
        &REFUTER_SCHEMA
    }
}

/// Normalised cell text for routing (A5).
fn route_cell(v: &SqlValue) -> String {
    match v {
        SqlValue::Null => "None".to_string(),
        SqlValue::Integer(i) => i.to_string(),
        SqlValue::Real(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
            format!("{}", *f as i64)
        }
        SqlValue::Real(f) => f.to_string(),
        SqlValue::Text(s) => s.clone(),
        SqlValue::Blob(b) => hex::encode(b),
    }
}

/// Routing equality E_p ≡ E_g (A4): same row and column counts, and equal multisets of rows,
/// each row taken as the sorted list of its normalised cells (column-order insensitive, no
/// duplicate-cancelling hash).
pub fn results_equivalent(gold: &ResultSet, pred: &ResultSet) -> bool {
    if gold.rows.len() != pred.rows.len() || gold.columns.len() != pred.columns.len() {
        return false;
    }
    let canon = |rs: &ResultSet| {
        let mut rows: Vec<Vec<String>> = rs
            .rows
            .iter()
            .map(|r| {
                let mut cells: Vec<String> = r.iter().map(route_cell).collect();
                cells.sort();
                cells
            })
            .collect();
        rows.sort();
        rows
    };
    canon(gold) == canon(pred)
}

/// Ambiguity tags of a Refuter reply (split on `,`, trimmed, lowercased).
pub fn ambiguity_tags(ambiguity: &str) -> Vec<String> {
    ambiguity
        .split(',')
        .map(|t| t.trim().to_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

#[derive(Serialize)]
struct ProverVars<'a> {
    question: &'a str,
    evidence: &'a str,
    predicted_sql: &'a str,
    db_info: String,
    sql_result: String,
}

#[derive(Serialize)]
struct RefuterVars<'a> {
    question: &'a str,
    evidence: &'a str,
    db_info: String,
    predicted_sql: &'a str,
    gold_sql: &'a str,
    pred_result: Option<String>,
    gold_result: Option<String>,
    prover_reason: Option<&'a str>,
}

fn flags(r: &RefuterReply) -> Value {
    let tags = ambiguity_tags(&r.ambiguity);
    json!({
        "gold_incorrect": !r.gold_correct,
        "ambiguous_question": tags.iter().any(|t| t == "ambiguous question"),
        "ambiguous_schema": tags.iter().any(|t| t == "ambiguous schema"),
        "ambiguity_tags": tags,
    })
}

/// Score ROSE for one case.
pub async fn score_rose(
    judge: &dyn StructuredJudge,
    case: &GoldCase<'_>,
    options: &RoseOptions,
    avoidance: bool,
    counter: &CallCounter,
) -> Outcome {
    let pred = match case.pred {
        Ok(p) => p,
        Err(e) => {
            counter.avoided(Metric::Rose, Avoidance::PredictionFailed);
            return exec_failure(e, json!({"path": "not_executable"}));
        }
    };
    let ex = case.ex().unwrap_or(false);
    if avoidance && let Some(why) = case.tree_match() {
        counter.avoided(Metric::Rose, why);
        return Outcome {
            value: 1.0,
            verdict: Some(true),
            status: RowStatus::Ok,
            details: json!({"avoided": why.as_str(), (Metric::Ex.as_str()): ex,
                "path": "avoided", "llm_calls": 0}),
        };
    }
    let spec = RenderSpec {
        header: true,
        max_rows: options.preview_rows,
        head: options.preview_rows,
        tail: 0,
        max_chars: options.max_chars,
    };
    let evidence = case.evidence.unwrap_or("");
    let matched = results_equivalent(case.gold, pred);
    let mut details = json!({(Metric::Ex.as_str()): ex, "routed_match": matched,
        "judge": judge.kind()});
    let mut tokens = (0u64, 0u64);
    let mut calls = 0u32;
    let mut cached_all = true;
    let mut prover_reason = None;
    let mut prover_json = Value::Null;
    if !matched {
        let vars = ProverVars {
            question: case.question,
            evidence,
            predicted_sql: case.pred_sql,
            db_info: case.schema_text(&[case.pred_sql], true),
            sql_result: render_result(pred, spec),
        };
        let call = StructuredCall::new(PROVER_PROMPT, &vars, "");
        let result = call_structured::<ProverReply, _, _>(judge, call, &|_| Ok(())).await;
        counter.call(Metric::Rose, result.as_ref().is_ok_and(|o| o.cached));
        calls += 1;
        let prover = match result {
            Ok(p) => p,
            Err(e) => {
                return judge_failed(details, "prover", &e, calls);
            }
        };
        tokens.0 += prover.usage.prompt_tokens;
        tokens.1 += prover.usage.completion_tokens;
        cached_all &= prover.cached;
        prover_json = serde_json::to_value(&prover.value).unwrap_or(Value::Null);
        if !prover.value.verdict {
            set(
                &mut details,
                json!({"path": "prover_rejected", "prover": prover_json,
                "llm_calls": calls, "cached": cached_all,
                "prompt_tokens": tokens.0, "completion_tokens": tokens.1,
                "response_mode": prover.response_mode,
                "prover_prompt_version": prover.prompt_version}),
            );
            return Outcome {
                value: 0.0,
                verdict: Some(false),
                status: RowStatus::Ok,
                details,
            };
        }
        prover_reason = Some(prover.value.reason);
    }
    let vars = RefuterVars {
        question: case.question,
        evidence,
        db_info: case.schema_text(&[case.pred_sql, case.gold_sql], true),
        predicted_sql: case.pred_sql,
        gold_sql: case.gold_sql,
        pred_result: (!matched).then(|| render_result(pred, spec)),
        gold_result: (!matched).then(|| render_result(case.gold, spec)),
        prover_reason: prover_reason.as_deref(),
    };
    let prompt = if matched {
        REFUTER_MATCH_PROMPT
    } else {
        REFUTER_RESULTS_PROMPT
    };
    let call = StructuredCall::new(prompt, &vars, "");
    let result = call_structured::<RefuterReply, _, _>(judge, call, &|_| Ok(())).await;
    counter.call(Metric::Rose, result.as_ref().is_ok_and(|o| o.cached));
    calls += 1;
    if !prover_json.is_null() {
        set(&mut details, json!({"prover": prover_json}));
    }
    let refuter = match result {
        Ok(r) => r,
        Err(e) => return judge_failed(details, "refuter", &e, calls),
    };
    tokens.0 += refuter.usage.prompt_tokens;
    tokens.1 += refuter.usage.completion_tokens;
    cached_all &= refuter.cached;
    let upheld = !refuter.value.verdict;
    let path = match (matched, upheld) {
        (true, true) => "match_upheld",
        (true, false) => "match_overturned",
        (false, true) => "prover_passed_upheld",
        (false, false) => "prover_passed_overturned",
    };
    set(&mut details, flags(&refuter.value));
    set(
        &mut details,
        json!({"path": path, "refuter": refuter.value, "llm_calls": calls,
        "cached": cached_all, "prompt_tokens": tokens.0, "completion_tokens": tokens.1,
        "response_mode": refuter.response_mode,
        "refuter_prompt_version": refuter.prompt_version}),
    );
    Outcome {
        value: if upheld { 1.0 } else { 0.0 },
        verdict: Some(upheld),
        status: RowStatus::Ok,
        details,
    }
}

fn set(details: &mut Value, extra: Value) {
    if let (Some(d), Value::Object(x)) = (details.as_object_mut(), extra) {
        d.extend(x);
    }
}

fn judge_failed(
    mut details: Value,
    role: &str,
    e: &crate::judge::JudgeError,
    calls: u32,
) -> Outcome {
    set(
        &mut details,
        json!({"path": format!("{role}_failed"), "failed_role": role,
        "judge_error": judge_error_json(e), "llm_calls": calls}),
    );
    Outcome {
        value: 0.0,
        verdict: None,
        status: RowStatus::JudgeError,
        details,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs(cols: &[&str], rows: Vec<Vec<SqlValue>>) -> ResultSet {
        ResultSet {
            columns: cols.iter().map(|c| c.to_string()).collect(),
            rows,
        }
    }
    fn t(s: &str) -> SqlValue {
        SqlValue::Text(s.into())
    }

    #[test]
    fn routing_s9_column_and_row_order_insensitive() {
        let g = rs(
            &["x", "y"],
            vec![vec![t("a"), t("b")], vec![t("c"), t("d")]],
        );
        let p = rs(
            &["y", "x"],
            vec![vec![t("d"), t("c")], vec![t("b"), t("a")]],
        );
        assert!(results_equivalent(&g, &p));
    }

    #[test]
    fn routing_s10_duplicates_do_not_cancel() {
        let g = rs(
            &["n"],
            vec![vec![SqlValue::Integer(7)], vec![SqlValue::Integer(7)]],
        );
        let p = rs(
            &["n"],
            vec![vec![SqlValue::Integer(5)], vec![SqlValue::Integer(5)]],
        );
        assert!(!results_equivalent(&g, &p));
        let p2 = rs(
            &["n"],
            vec![vec![SqlValue::Real(7.0)], vec![SqlValue::Integer(7)]],
        );
        assert!(results_equivalent(&g, &p2));
    }

    #[test]
    fn tags_split() {
        assert_eq!(
            ambiguity_tags(" Ambiguous Question, ambiguous schema"),
            vec!["ambiguous question", "ambiguous schema"]
        );
    }
}
