//! Unit tests of the LLM-judged metrics (FLEX, ROSE, Hybrid-EX) against an in-memory
//! [`StructuredJudge`]: scripted replies per prompt, no HTTP. They cover the prompt each case
//! reaches, verdicts, malformed replies (after the repair turn too), lenient booleans, the
//! avoidance paths (no call at all) and the orchestration of the three metrics.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::executor::block_on;
use serde_json::{Value, json};

use crate::evaluation::{Metric, RowStatus};
use crate::event::Event;
use crate::exec::{ExecError, ResultSet, SqlValue};
use crate::judge::structured::{ErasedCall, ErasedOutcome, StructuredOutcome};
use crate::judge::{JudgeError, JudgeTotals, StructuredJudge, TokenUsage};

use super::avoid::{Avoidance, CallCounter};
use super::ex::ExConvention;
use super::flex::{
    FLEX_CATEGORIES_PROMPT, FLEX_EQ_PROMPT, FLEX_NEQ_PROMPT, FlexOptions, score_flex,
};
use super::gold::GoldExecution;
use super::hybrid_ex::{HYBRID_PROMPT, HybridOptions, score_hybrid};
use super::judge_case::{GoldCase, Outcome};
use super::judged::{JudgedInput, JudgedOptions, JudgedScorer};
use super::offload::Inline;
use super::rose::{
    PROVER_PROMPT, REFUTER_MATCH_PROMPT, REFUTER_RESULTS_PROMPT, RoseOptions, score_rose,
};

/// One scripted answer of the in-memory judge.
#[derive(Clone)]
enum Reply {
    /// A reply object (validated by the call's reply type, as the real client does).
    Json(Value),
    /// The judge fails (transport error, timeout, …).
    Fail(JudgeError),
}

/// An in-memory [`StructuredJudge`]: replies are scripted per prompt and consumed in order;
/// every call is recorded with its prompt and variables. A reply that fails validation gets one
/// repair turn (the next scripted reply for the same prompt), like the real client.
#[derive(Default)]
struct ScriptedJudge {
    replies: Mutex<HashMap<String, VecDeque<Reply>>>,
    calls: Mutex<Vec<(String, Value)>>,
}

impl ScriptedJudge {
    fn with(script: &[(&str, Reply)]) -> Arc<ScriptedJudge> {
        let judge = ScriptedJudge::default();
        for (prompt, reply) in script {
            judge
                .replies
                .lock()
                .unwrap()
                .entry(prompt.to_string())
                .or_default()
                .push_back(reply.clone());
        }
        Arc::new(judge)
    }

    fn prompts(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .map(|c| c.0.clone())
            .collect()
    }

    fn vars(&self, i: usize) -> Value {
        self.calls.lock().unwrap()[i].1.clone()
    }

    fn next(&self, prompt: &str) -> Option<Reply> {
        self.replies.lock().unwrap().get_mut(prompt)?.pop_front()
    }
}

#[async_trait]
impl StructuredJudge for ScriptedJudge {
    fn kind(&self) -> String {
        "llm:scripted".into()
    }

    async fn call(&self, call: ErasedCall<'_>) -> Result<ErasedOutcome, JudgeError> {
        let vars = serde_json::to_value(call.vars).expect("vars serialize");
        self.calls
            .lock()
            .unwrap()
            .push((call.prompt.to_string(), vars));
        let mut first_error = None;
        for _turn in 0..2 {
            let reply = self.next(call.prompt).ok_or_else(|| {
                JudgeError::Transport(format!("no scripted reply for {}", call.prompt))
            })?;
            match reply {
                Reply::Fail(error) => return Err(error),
                Reply::Json(value) => match call.reply.decode(value) {
                    Ok((typed, _)) => {
                        return Ok(StructuredOutcome {
                            value: typed,
                            usage: TokenUsage {
                                prompt_tokens: 100,
                                completion_tokens: 10,
                            },
                            cached: false,
                            prompt_version: format!("{}-v1", call.prompt),
                            response_mode: Some("json_schema"),
                        });
                    }
                    Err(e) if first_error.is_none() => first_error = Some(e),
                    Err(e) => {
                        return Err(JudgeError::InvalidReply(format!(
                            "{e} (after one repair retry; the first reply failed with: {})",
                            first_error.map(|e| e.to_string()).unwrap_or_default()
                        )));
                    }
                },
            }
        }
        Err(JudgeError::InvalidReply(
            first_error.map(|e| e.to_string()).unwrap_or_default(),
        ))
    }

    fn prompt_version(&self, name: &str) -> Option<String> {
        Some(format!("{name}-v1"))
    }

    fn totals(&self) -> JudgeTotals {
        JudgeTotals::default()
    }
}

fn rs(columns: &[&str], rows: Vec<Vec<SqlValue>>) -> Arc<ResultSet> {
    Arc::new(ResultSet {
        columns: columns.iter().map(|c| c.to_string()).collect(),
        rows,
    })
}

fn int(i: i64) -> SqlValue {
    SqlValue::Integer(i)
}

fn text(s: &str) -> SqlValue {
    SqlValue::Text(s.into())
}

/// Owned parts of a [`GoldCase`].
struct Item {
    gold: Arc<ResultSet>,
    pred: Result<Arc<ResultSet>, ExecError>,
    esm_plus: Option<bool>,
    etm: Option<bool>,
}

impl Item {
    fn new(gold: Arc<ResultSet>, pred: Arc<ResultSet>) -> Item {
        Item {
            gold,
            pred: Ok(pred),
            esm_plus: None,
            etm: None,
        }
    }

    fn case(&self) -> GoldCase<'_> {
        GoldCase {
            db_id: "superhero",
            question: "How many heroes have blue eyes?",
            evidence: Some("blue eyes refers to colour = 'Blue'"),
            schema: &[],
            gold_sql: "SELECT COUNT(*) FROM superhero WHERE eye_colour_id = 7",
            pred_sql: "SELECT COUNT(id) FROM superhero WHERE eye_colour_id = 7",
            gold: &self.gold,
            pred: self.pred.as_ref(),
            esm_plus: self.esm_plus,
            etm: self.etm,
            ex_convention: ExConvention::Bird,
        }
    }
}

fn same() -> Item {
    Item::new(
        rs(&["n"], vec![vec![int(3)]]),
        rs(&["n"], vec![vec![int(3)]]),
    )
}

fn different() -> Item {
    Item::new(
        rs(&["n"], vec![vec![int(3)]]),
        rs(&["n"], vec![vec![int(4)]]),
    )
}

fn flex(judge: &ScriptedJudge, item: &Item, options: FlexOptions, avoidance: bool) -> Outcome {
    block_on(score_flex(
        judge,
        &item.case(),
        &options,
        avoidance,
        &CallCounter::default(),
    ))
}

#[test]
fn flex_equal_results_take_the_strict_prompt_without_results() {
    let judge = ScriptedJudge::with(&[(
        FLEX_EQ_PROMPT,
        Reply::Json(json!({"reasoning": "counts the same rows", "correct": true})),
    )]);
    let out = flex(&judge, &same(), FlexOptions::default(), true);
    assert_eq!(judge.prompts(), [FLEX_EQ_PROMPT]);
    assert_eq!(
        (out.value, out.verdict, out.status),
        (1.0, Some(true), RowStatus::Ok)
    );
    assert_eq!(out.details["branch"], "eq");
    assert_eq!(out.details["judge"], "llm:scripted");
    // The strict branch withholds execution results on purpose.
    assert!(judge.vars(0)["pred_result"].is_null());
}

#[test]
fn flex_different_results_show_both_and_categorise_incorrect_verdicts() {
    let judge = ScriptedJudge::with(&[
        (
            FLEX_NEQ_PROMPT,
            Reply::Json(json!({"reasoning": "wrong colour", "correct": false})),
        ),
        (
            FLEX_CATEGORIES_PROMPT,
            Reply::Json(json!({
                "incorrect_schema_linking": {"issued": false, "explanation": ""},
                "incorrect_filtering_condition": {"issued": true, "explanation": "wrong id"},
                "missing_handling_of_nullable_column": {"issued": false, "explanation": ""},
                "missing_handling_of_multiple_rows": {"issued": false, "explanation": ""},
                "abused_clauses": {"issued": false, "explanation": ""},
                "other_fatal_issues": {"issued": false, "explanation": ""}
            })),
        ),
    ]);
    let options = FlexOptions {
        error_categories: true,
        ..FlexOptions::default()
    };
    let out = flex(&judge, &different(), options, true);
    assert_eq!(judge.prompts(), [FLEX_NEQ_PROMPT, FLEX_CATEGORIES_PROMPT]);
    assert_eq!((out.value, out.verdict), (0.0, Some(false)));
    assert_eq!(out.details["branch"], "neq");
    let shown = judge.vars(0);
    assert!(
        shown["pred_result"]
            .as_str()
            .is_some_and(|r| r.contains('4')),
        "{shown}"
    );
    assert!(
        shown["gt_result"].as_str().is_some_and(|r| r.contains('3')),
        "{shown}"
    );
    assert_eq!(
        out.details["error_categories"],
        json!(["incorrect_filtering_condition"])
    );
}

#[test]
fn flex_quoted_false_is_false_and_a_repaired_reply_is_used() {
    let judge = ScriptedJudge::with(&[
        (FLEX_NEQ_PROMPT, Reply::Json(json!({"reasoning": "x"}))),
        (
            FLEX_NEQ_PROMPT,
            Reply::Json(json!({"reasoning": "x", "correct": "False"})),
        ),
    ]);
    let out = flex(&judge, &different(), FlexOptions::default(), true);
    assert_eq!(out.verdict, Some(false));
    assert_eq!(out.status, RowStatus::Ok);
}

#[test]
fn flex_malformed_replies_are_a_judge_error_not_a_verdict() {
    let judge = ScriptedJudge::with(&[
        (FLEX_NEQ_PROMPT, Reply::Json(json!({"verdict": "yes"}))),
        (FLEX_NEQ_PROMPT, Reply::Json(json!({"correct": 1}))),
    ]);
    let out = flex(&judge, &different(), FlexOptions::default(), true);
    assert_eq!(out.status, RowStatus::JudgeError);
    assert_eq!((out.value, out.verdict), (0.0, None));
    assert_eq!(out.details["judge_error"]["kind"], "invalid_reply");
    let failing =
        ScriptedJudge::with(&[(FLEX_NEQ_PROMPT, Reply::Fail(JudgeError::Timeout(30_000)))]);
    let out = flex(&failing, &different(), FlexOptions::default(), true);
    assert_eq!(out.status, RowStatus::JudgeError);
    assert_eq!(out.details["judge_error"]["kind"], "timeout");
}

#[test]
fn avoidance_decides_without_a_call() {
    // A prediction that fails to execute is incorrect, whatever avoidance says.
    let failed = Item {
        pred: Err(ExecError::Sql("no such column: x".into())),
        ..same()
    };
    let judge = ScriptedJudge::with(&[]);
    let counter = CallCounter::default();
    let out = block_on(score_flex(
        judge.as_ref(),
        &failed.case(),
        &FlexOptions::default(),
        false,
        &counter,
    ));
    assert_eq!((out.value, out.verdict), (0.0, Some(false)));
    assert_eq!(out.status, RowStatus::ExecError);
    let rose = block_on(score_rose(
        judge.as_ref(),
        &failed.case(),
        &RoseOptions::default(),
        false,
        &counter,
    ));
    assert_eq!(rose.verdict, Some(false));
    // An ESM+-equivalent prediction is correct for FLEX and ROSE, only with avoidance on.
    let equivalent = Item {
        esm_plus: Some(true),
        ..different()
    };
    let out = flex(&judge, &equivalent, FlexOptions::default(), true);
    assert_eq!(
        (out.verdict, out.details["avoided"].clone()),
        (Some(true), json!("esm_plus_equivalent"))
    );
    let rose = block_on(score_rose(
        judge.as_ref(),
        &equivalent.case(),
        &RoseOptions::default(),
        true,
        &counter,
    ));
    assert_eq!(rose.verdict, Some(true));
    // So is an ETM-matched one; an ETM miss decides nothing (the judge is asked).
    let matched = Item {
        etm: Some(true),
        ..different()
    };
    let out = flex(&judge, &matched, FlexOptions::default(), true);
    assert_eq!(
        (out.verdict, out.details["avoided"].clone()),
        (Some(true), json!("etm_equivalent"))
    );
    // Identical tables: Hybrid-EX 1.0.
    let hybrid = block_on(score_hybrid(
        judge.as_ref(),
        &Inline,
        &same().case(),
        &HybridOptions::default(),
        true,
        &counter,
    ));
    assert_eq!((hybrid.value, hybrid.verdict), (1.0, Some(true)));
    assert_eq!(hybrid.details["avoided"], "identical_results");
    assert!(judge.prompts().is_empty(), "{:?}", judge.prompts());
    let snapshot = counter.snapshot();
    assert_eq!(
        snapshot[&Metric::Flex].avoided[&Avoidance::PredictionFailed],
        1
    );
    assert_eq!(
        snapshot[&Metric::Rose].avoided[&Avoidance::EsmPlusEquivalent],
        1
    );
    assert_eq!(
        snapshot[&Metric::HybridEx].avoided[&Avoidance::IdenticalResults],
        1
    );
    // With avoidance off the ESM+ evidence is ignored and the judge is asked.
    let judge = ScriptedJudge::with(&[(
        FLEX_NEQ_PROMPT,
        Reply::Json(json!({"reasoning": "r", "correct": false})),
    )]);
    let out = flex(&judge, &equivalent, FlexOptions::default(), false);
    assert_eq!(out.verdict, Some(false));
    assert_eq!(judge.prompts(), [FLEX_NEQ_PROMPT]);
}

fn refuter(verdict: bool, gold_correct: bool) -> Reply {
    Reply::Json(
        json!({"judgement": "j", "verdict": verdict, "ambiguity": "na",
        "gold_correct": gold_correct}),
    )
}

#[test]
fn rose_routes_matched_results_to_the_refuter_and_others_through_the_prover() {
    let judge = ScriptedJudge::with(&[(REFUTER_MATCH_PROMPT, refuter(false, true))]);
    let out = block_on(score_rose(
        judge.as_ref(),
        &same().case(),
        &RoseOptions::default(),
        true,
        &CallCounter::default(),
    ));
    assert_eq!(judge.prompts(), [REFUTER_MATCH_PROMPT]);
    assert_eq!(
        (out.verdict, out.details["path"].clone()),
        (Some(true), json!("match_upheld"))
    );

    let prover = |verdict: bool| {
        Reply::Json(
            json!({"expected_answer": "a count", "sql_description": "counts",
            "reason": "because", "verdict": verdict, "evidence": null}),
        )
    };
    // The prover rejects: incorrect, no refuter call.
    let judge = ScriptedJudge::with(&[(PROVER_PROMPT, prover(false))]);
    let out = block_on(score_rose(
        judge.as_ref(),
        &different().case(),
        &RoseOptions::default(),
        true,
        &CallCounter::default(),
    ));
    assert_eq!(judge.prompts(), [PROVER_PROMPT]);
    assert_eq!(
        (out.verdict, out.details["path"].clone()),
        (Some(false), json!("prover_rejected"))
    );
    // The prover passes and the refuter overturns, flagging the gold as faulty.
    let judge = ScriptedJudge::with(&[
        (PROVER_PROMPT, prover(true)),
        (REFUTER_RESULTS_PROMPT, refuter(true, false)),
    ]);
    let out = block_on(score_rose(
        judge.as_ref(),
        &different().case(),
        &RoseOptions::default(),
        true,
        &CallCounter::default(),
    ));
    assert_eq!(judge.prompts(), [PROVER_PROMPT, REFUTER_RESULTS_PROMPT]);
    assert_eq!(out.verdict, Some(false));
    assert_eq!(out.details["path"], "prover_passed_overturned");
    assert_eq!(out.details["gold_incorrect"], true);
    // A failing refuter is a judge error that keeps what the prover said.
    let judge = ScriptedJudge::with(&[
        (PROVER_PROMPT, prover(true)),
        (
            REFUTER_RESULTS_PROMPT,
            Reply::Fail(JudgeError::Transport("reset".into())),
        ),
    ]);
    let out = block_on(score_rose(
        judge.as_ref(),
        &different().case(),
        &RoseOptions::default(),
        true,
        &CallCounter::default(),
    ));
    assert_eq!((out.status, out.verdict), (RowStatus::JudgeError, None));
    assert_eq!(out.details["failed_role"], "refuter");
    assert!(out.details["prover"].is_object());
}

#[test]
fn hybrid_uses_the_alignment_and_falls_back_to_the_heuristic() {
    let gold = rs(
        &["name", "n"],
        vec![vec![text("a"), int(1)], vec![text("b"), int(2)]],
    );
    let pred = rs(
        &["hero", "cnt"],
        vec![vec![text("a"), int(1)], vec![text("b"), int(2)]],
    );
    let item = Item::new(gold, pred);
    let judge = ScriptedJudge::with(&[(
        HYBRID_PROMPT,
        Reply::Json(json!({
            "matching_category": "complete", "llm_judge_score": 1.0,
            "column_rename_dict": {"hero": "name", "cnt": "n"}, "trivial_columns": [],
            "index_columns": ["name"], "order_columns": [], "common_columns": [],
            "unique_columns": {"gold": [], "pred": []}, "numeric_columns": ["n"],
            "date_columns": [], "exact_match_columns": [], "recommended_tolerance": null,
            "reasoning": "renamed columns"
        })),
    )]);
    let counter = CallCounter::default();
    let out = block_on(score_hybrid(
        judge.as_ref(),
        &Inline,
        &item.case(),
        &HybridOptions::default(),
        true,
        &counter,
    ));
    assert_eq!(out.status, RowStatus::Ok, "{}", out.details);
    assert_eq!(out.value, 1.0, "{}", out.details);
    assert_eq!(out.details["alignment_source"], "llm");
    let failing = ScriptedJudge::with(&[(
        HYBRID_PROMPT,
        Reply::Fail(JudgeError::Http {
            status: 503,
            body: "busy".into(),
        }),
    )]);
    let out = block_on(score_hybrid(
        failing.as_ref(),
        &Inline,
        &item.case(),
        &HybridOptions::default(),
        true,
        &counter,
    ));
    assert_eq!(out.status, RowStatus::JudgeFallback);
    assert_eq!(out.details["alignment_source"], "heuristic");
    assert!(out.verdict.is_some());
}

fn event() -> Event {
    Event::from_value(json!({
        "event_id": "e1", "question": "How many heroes have blue eyes?",
        "sql": "SELECT COUNT(id) FROM superhero WHERE eye_colour_id = 7",
        "gold": {"sql": "SELECT COUNT(*) FROM superhero WHERE eye_colour_id = 7",
                 "db_id": "superhero"}
    }))
    .unwrap()
}

#[test]
fn the_scorer_runs_all_three_metrics_and_reports_unavailable_gold() {
    let judge = ScriptedJudge::with(&[
        (
            FLEX_EQ_PROMPT,
            Reply::Json(json!({"reasoning": "same", "correct": true})),
        ),
        (REFUTER_MATCH_PROMPT, refuter(false, true)),
    ]);
    let scorer = JudgedScorer::new(
        judge.clone() as Arc<dyn StructuredJudge>,
        JudgedOptions::default(),
    );
    let input = JudgedInput {
        execution: GoldExecution::Executed {
            db_id: "superhero".into(),
            gold: rs(&["n"], vec![vec![int(3)]]),
            pred: Ok(rs(&["n"], vec![vec![int(3)]])),
        },
        schema: Arc::new(Vec::new()),
        esm_plus: Some(false),
        etm: Some(false),
    };
    let rows = block_on(scorer.score(&event(), &input, "2026-01-01T00:00:00Z"));
    let metrics: Vec<Metric> = rows.iter().map(|r| r.metric).collect();
    assert_eq!(metrics, [Metric::Flex, Metric::Rose, Metric::HybridEx]);
    assert!(rows.iter().all(|r| r.verdict == Some(true)), "{rows:?}");
    // Hybrid-EX was avoided (identical tables); FLEX and ROSE asked the judge once each.
    let mut prompts = judge.prompts();
    prompts.sort();
    assert_eq!(prompts, [FLEX_EQ_PROMPT, REFUTER_MATCH_PROMPT]);
    let calls = scorer.counter().snapshot();
    assert_eq!(calls[&Metric::Flex].llm_calls, 1);
    assert_eq!(calls[&Metric::HybridEx].llm_calls, 0);

    let unavailable = JudgedInput {
        execution: GoldExecution::Unavailable {
            db_id: Some("nope".into()),
            reason: "unknown database",
        },
        schema: Arc::new(Vec::new()),
        esm_plus: None,
        etm: None,
    };
    let rows = block_on(scorer.score(&event(), &unavailable, "2026-01-01T00:00:00Z"));
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r.status == RowStatus::GoldUnavailable));
    assert!(rows.iter().all(|r| r.details.to_value()["db_id"] == "nope"));
}
