//! FLEX, ROSE and Hybrid-EX end to end against the scripted judge server and real BIRD
//! databases: which prompt variant and sections were sent, every row of ROSE's truth table,
//! malformed judge output on each metric, and the avoidance rules (zero HTTP calls).

use std::sync::Arc;

use crate::support::config;
use crate::support::openai_mock::{MockServer, Scripted};
use serde_json::{Value, json};
use sqlgrade::evaluation::{EvaluationRow, Metric, RowStatus};
use sqlgrade::event::Event;
use sqlgrade::llm::LlmClient;
use sqlgrade::metrics::avoid::Avoidance;
use sqlgrade::metrics::flex::{ERROR_CATEGORY_KEYS, FN_CATEGORY_KEYS, FlexOptions};
use sqlgrade::metrics::judged::{JudgedInput, JudgedOptions, JudgedScorer};
use sqlgrade::metrics::rose::{DEFAULT_PREVIEW_ROWS, RoseOptions};
use sqlgrade::score::sqlite::{ExecLimits, SqliteExecutor};

const TS: &str = "2026-01-01T00:00:00Z";

fn exec() -> SqliteExecutor {
    SqliteExecutor::new(
        sqlgrade_testkit::data::data_dir().join("bird/databases"),
        ExecLimits::default(),
    )
}

fn event(question: &str, evidence: Option<&str>, pred: &str, gold: &str) -> Event {
    Event::from_value(json!({
        "event_id": "e1", "question": question, "sql": pred,
        "gold": {"sql": gold, "db_id": "superhero", "evidence": evidence}
    }))
    .unwrap()
}

const Q: &str = "Which superheroes have a full name starting with Charles?";
const HINT: &str = "full name refers to full_name";
const GOLD: &str =
    "SELECT full_name, superhero_name FROM superhero WHERE full_name LIKE 'Charles%'";

/// EX = 1 with an unneeded extra filter (FLEX's EQ branch; ROSE's match path).
fn f5() -> Event {
    event(
        Q,
        Some(HINT),
        "SELECT T1.full_name, T1.superhero_name FROM superhero AS T1 WHERE T1.full_name LIKE 'Charles%' AND T1.id > 0",
        GOLD,
    )
}

/// EX = 0: other column order plus an extra column (FLEX's NEQ branch; ROSE's mismatch path).
fn f8() -> Event {
    event(
        Q,
        Some(HINT),
        "SELECT superhero_name, full_name, id FROM superhero WHERE full_name LIKE 'Charles%'",
        GOLD,
    )
}

/// Same rows as the gold, aliasing only (ROSE's match path).
fn f15() -> Event {
    f5()
}

fn failing() -> Event {
    event(
        "How many heroes?",
        None,
        "SELECT no_such_column FROM superhero",
        "SELECT COUNT(*) FROM superhero",
    )
}

fn only(metric: Metric) -> JudgedOptions {
    let d = JudgedOptions::default();
    JudgedOptions {
        flex: (metric == Metric::Flex).then_some(d.flex).flatten(),
        rose: (metric == Metric::Rose).then_some(d.rose).flatten(),
        hybrid_ex: (metric == Metric::HybridEx)
            .then_some(d.hybrid_ex)
            .flatten(),
        ..d
    }
}

fn scorer(server: &MockServer, options: JudgedOptions) -> JudgedScorer {
    let client = LlmClient::new(&config(&server.base_url())).unwrap();
    JudgedScorer::new(Arc::new(client), options)
}

/// Execute (on the test thread, as the pipeline does on the blocking pool), then judge.
async fn rows(s: &JudgedScorer, e: &Event, esm_plus: Option<bool>) -> Vec<EvaluationRow> {
    let input = JudgedInput::prepare(e, &exec(), esm_plus).unwrap();
    s.score(e, &input, TS).await
}

async fn one(s: &JudgedScorer, e: &Event, esm_plus: Option<bool>) -> EvaluationRow {
    let rows = rows(s, e, esm_plus).await;
    assert_eq!(rows.len(), 1);
    rows.into_iter().next().unwrap()
}

fn system(server: &MockServer, i: usize) -> String {
    server.requests()[i].message(0).unwrap()
}
fn user(server: &MockServer, i: usize) -> String {
    server.requests()[i].message(1).unwrap()
}

// ---------------------------------------------------------------- FLEX

#[tokio::test]
async fn flex_eq_branch_withholds_results() {
    let server = MockServer::start().await;
    server.push([Scripted::json(
        &json!({"reasoning": "missing StatusType filter", "correct": false}),
    )]);
    let s = scorer(&server, only(Metric::Flex));
    let row = one(&s, &f5(), Some(false)).await;
    assert_eq!(row.metric, Metric::Flex);
    assert_eq!(row.status, RowStatus::Ok);
    assert_eq!(row.verdict, Some(false));
    assert_eq!(row.details.to_value()["branch"], "eq");
    assert_eq!(row.details.to_value()["ex"], true);
    assert_eq!(server.request_count(), 1);
    let sys = system(&server, 0);
    assert!(sys.contains("return the same execution result"), "{sys}");
    assert!(sys.contains("A missing DISTINCT is always tolerated"));
    let u = user(&server, 0);
    let order = [
        "**Schema**",
        "**Question**",
        "**Prediction Query**",
        "**Ground Truth Query**",
        "**Hint**",
    ];
    let pos: Vec<usize> = order
        .iter()
        .map(|h| u.find(h).unwrap_or_else(|| panic!("{h} missing in {u}")))
        .collect();
    assert!(
        pos.windows(2).all(|w| w[0] < w[1]),
        "sections out of order: {u}"
    );
    assert!(!u.contains("**Prediction Result**") && !u.contains("**Ground Truth Result**"));
    assert!(u.contains("Note: two queries have same execution results."));
    assert!(u.contains("CREATE TABLE"), "schema DDL sent");
    assert!(u.contains(HINT));
}

#[tokio::test]
async fn flex_neq_branch_shows_rendered_results() {
    let server = MockServer::start().await;
    server.push([Scripted::json(
        &json!({"reasoning": "extra columns are fine", "correct": true}),
    )]);
    let s = scorer(&server, only(Metric::Flex));
    let row = one(&s, &f8(), None).await;
    assert_eq!(row.verdict, Some(true));
    assert_eq!(row.value, 1.0);
    assert_eq!(row.details.to_value()["branch"], "neq");
    let sys = system(&server, 0);
    assert!(sys.contains("return different execution results"));
    let u = user(&server, 0);
    let order = [
        "**Schema**",
        "**Question**",
        "**Prediction Query**",
        "**Prediction Result**",
        "**Ground Truth Query**",
        "**Ground Truth Result**",
        "**Hint**",
    ];
    let pos: Vec<usize> = order
        .iter()
        .map(|h| u.find(h).unwrap_or_else(|| panic!("{h} missing")))
        .collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]));
    // Paper preset: header row and original shape.
    assert!(u.contains("| full_name | superhero_name |"), "{u}");
    assert!(u.contains("| superhero_name | full_name | id |"), "{u}");
    assert!(u.contains("| 3-D Man | Charles Chandler | 1 |"), "{u}");
    assert!(u.contains("shape=("));
    assert!(u.contains("Note: two queries have different execution results."));
}

/// FLEX's branch follows the configured EX convention: a prediction that drops the gold's
/// duplicate rows is EX = 1 under BIRD's set equality but EX = 0 under Spider's test-suite
/// multiset equality, so the same event goes to the EQ branch in one and the NEQ branch in the
/// other.
#[tokio::test]
async fn flex_branch_follows_the_configured_ex_convention() {
    use sqlgrade::metrics::ex::ExConvention;
    let gold = "SELECT eye_colour_id FROM superhero WHERE eye_colour_id IN (9, 7)";
    let pred = "SELECT DISTINCT eye_colour_id FROM superhero WHERE eye_colour_id IN (9, 7)";
    let e = event(
        "Which eye colour ids among 7 and 9 occur?",
        None,
        pred,
        gold,
    );
    let mut branches = Vec::new();
    for convention in [ExConvention::Bird, ExConvention::SpiderTestSuite] {
        let server = MockServer::start().await;
        server.push([Scripted::json(&json!({"reasoning": "ok", "correct": true}))]);
        let options = JudgedOptions {
            ex_convention: convention,
            ..only(Metric::Flex)
        };
        let row = one(&scorer(&server, options), &e, None).await;
        assert_eq!(server.request_count(), 1);
        branches.push((
            row.details.to_value()["branch"].clone(),
            row.details.to_value()["ex"].clone(),
        ));
    }
    assert_eq!(
        branches,
        vec![(json!("eq"), json!(true)), (json!("neq"), json!(false))]
    );
}

#[tokio::test]
async fn flex_without_evidence_has_no_hint_section() {
    let server = MockServer::start().await;
    server.push([Scripted::json(&json!({"reasoning": "ok", "correct": true}))]);
    let s = scorer(&server, only(Metric::Flex));
    let mut e = f8();
    e.gold.as_mut().unwrap().evidence = None;
    one(&s, &e, None).await;
    assert!(!user(&server, 0).contains("**Hint**"));
}

#[tokio::test]
async fn flex_failing_prediction_is_incorrect_without_a_call() {
    let server = MockServer::start().await;
    let s = scorer(&server, only(Metric::Flex));
    let row = one(&s, &failing(), None).await;
    assert_eq!(row.status, RowStatus::ExecError);
    assert_eq!(row.verdict, Some(false));
    assert_eq!(row.details.to_value()["avoided"], "prediction_failed");
    assert_eq!(server.request_count(), 0);
    let counts = s.counter().snapshot();
    assert_eq!(
        counts[&Metric::Flex].avoided[&Avoidance::PredictionFailed],
        1
    );
    assert_eq!(counts[&Metric::Flex].llm_calls, 0);
}

#[tokio::test]
async fn flex_malformed_output_is_a_judge_error() {
    let server = MockServer::start().await;
    server.respond_with(|_| Scripted::Content("I think it is probably fine.".into()));
    let s = scorer(&server, only(Metric::Flex));
    let row = one(&s, &f5(), None).await;
    assert_eq!(row.status, RowStatus::JudgeError);
    assert_eq!(row.verdict, None);
    assert_eq!(row.value, 0.0);
    assert_eq!(row.details.to_value()["branch"], "eq");
    assert_eq!(
        row.details.to_value()["judge_error"]["kind"],
        "invalid_reply"
    );
    assert!(server.request_count() >= 1);
}

#[tokio::test]
async fn flex_quoted_boolean_is_parsed() {
    let server = MockServer::start().await;
    server.push([Scripted::Content(
        "Analysis...\n```json\n{\"reasoning\": \"r\", \"correct\": \"false\"}\n```".into(),
    )]);
    let s = scorer(&server, only(Metric::Flex));
    let row = one(&s, &f8(), None).await;
    assert_eq!(row.status, RowStatus::Ok);
    assert_eq!(row.verdict, Some(false));
}

// ---------------------------------------------------------------- FLEX error categories

fn flex_with_categories() -> JudgedOptions {
    JudgedOptions {
        flex: Some(FlexOptions {
            error_categories: true,
            ..FlexOptions::default()
        }),
        ..only(Metric::Flex)
    }
}

/// A categorisation reply over `keys` with `issued` set (explanations say which key).
fn taxonomy(keys: &[&str], issued: &[&str]) -> Value {
    let map: serde_json::Map<String, Value> = keys
        .iter()
        .map(|k| {
            let on = issued.contains(k);
            (
                k.to_string(),
                json!({"issued": on, "explanation": if on { format!("{k} because") } else { String::new() }}),
            )
        })
        .collect();
    Value::Object(map)
}

fn categories(issued: &[&str]) -> Value {
    taxonomy(&ERROR_CATEGORY_KEYS, issued)
}

#[tokio::test]
async fn flex_error_categories_follow_an_incorrect_verdict() {
    let server = MockServer::start().await;
    server.push([
        Scripted::json(&json!({"reasoning": "missing StatusType filter", "correct": false})),
        Scripted::json(&categories(&[
            "incorrect_filtering_condition",
            "abused_clauses",
        ])),
    ]);
    let s = scorer(&server, flex_with_categories());
    let row = one(&s, &f5(), Some(false)).await;
    assert_eq!(row.status, RowStatus::Ok);
    assert_eq!(
        row.verdict,
        Some(false),
        "the categoriser never changes the verdict"
    );
    assert_eq!(
        row.details.to_value()["error_categories"],
        json!(["incorrect_filtering_condition", "abused_clauses"])
    );
    assert_eq!(
        row.details.to_value()["error_category_explanations"]["abused_clauses"],
        "abused_clauses because"
    );
    assert_eq!(row.details.to_value()["llm_calls"], 2);
    assert_eq!(server.request_count(), 2);
    let sys = system(&server, 1);
    assert!(sys.contains("categorise why"), "{sys}");
    let u = user(&server, 1);
    let order = [
        "**Schema**",
        "**Question**",
        "**Prediction Query**",
        "**Ground Truth Query**",
        "**Judgment**",
        "**Hint**",
    ];
    let pos: Vec<usize> = order
        .iter()
        .map(|h| u.find(h).unwrap_or_else(|| panic!("{h} missing in {u}")))
        .collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "{u}");
    assert!(
        u.contains("missing StatusType filter"),
        "the first judgment is shown"
    );
    assert!(!u.contains("Result**"), "no execution results: {u}");
    assert_eq!(s.counter().snapshot()[&Metric::Flex].llm_calls, 2);
}

#[tokio::test]
async fn flex_categories_are_not_asked_for_a_true_positive() {
    // EX = 1 and judged correct: nothing to explain, no second call.
    let server = MockServer::start().await;
    server.push([Scripted::json(
        &json!({"reasoning": "fine", "correct": true}),
    )]);
    let s = scorer(&server, flex_with_categories());
    let row = one(&s, &f5(), Some(false)).await;
    assert_eq!(row.details.to_value()["branch"], "eq");
    assert_eq!(row.verdict, Some(true));
    assert!(row.details.to_value().get("error_categories").is_none());
    assert!(row.details.to_value().get("fn_categories").is_none());
    assert_eq!(row.details.to_value()["llm_calls"], 1);
    assert_eq!(server.request_count(), 1);
}

fn fn_categories_reply(issued: &[&str]) -> String {
    serde_json::to_string_pretty(&taxonomy(&FN_CATEGORY_KEYS, issued)).unwrap()
}

#[tokio::test]
async fn flex_false_negative_categories_say_why_ex_missed_it() {
    // EX = 0 (other column order plus an extra column) but judged correct: the Fig 13 taxonomy.
    // The released FN template ends without a closing brace or fence, and models follow it: the
    // reply below is cut before its final `}` and must still be read.
    let server = MockServer::start().await;
    let mut cut = fn_categories_reply(&["different_output_structure"]);
    assert_eq!(cut.pop(), Some('}'));
    server.push([
        Scripted::json(&json!({"reasoning": "same heroes, extra id column", "correct": true})),
        Scripted::Content(format!("```json\n{cut}\n")),
    ]);
    let s = scorer(&server, flex_with_categories());
    let row = one(&s, &f8(), None).await;
    assert_eq!(row.status, RowStatus::Ok);
    assert_eq!(row.details.to_value()["branch"], "neq");
    assert_eq!(
        row.verdict,
        Some(true),
        "the categoriser never changes the verdict"
    );
    assert_eq!(
        row.details.to_value()["fn_categories"],
        json!(["different_output_structure"])
    );
    assert_eq!(
        row.details.to_value()["fn_category_explanations"]["different_output_structure"],
        "different_output_structure because"
    );
    assert!(row.details.to_value().get("error_categories").is_none());
    assert_eq!(row.details.to_value()["llm_calls"], 2);
    assert_eq!(
        server.request_count(),
        2,
        "no repair turn for the unterminated object"
    );
    let sys = system(&server, 1);
    assert!(sys.contains("missed a correct answer"), "{sys}");
    assert!(sys.contains("incorrect_ground_truth_query"), "{sys}");
    let u = user(&server, 1);
    assert!(
        u.contains("extra id column"),
        "the first judgment is shown: {u}"
    );
    assert!(!u.contains("Result**"), "no execution results: {u}");
}

#[tokio::test]
async fn flex_false_negative_categories_can_point_at_the_gold() {
    let server = MockServer::start().await;
    server.push([
        Scripted::json(&json!({"reasoning": "the gold answers another question", "correct": true})),
        Scripted::Content(fn_categories_reply(&[
            "incorrect_ground_truth_query",
            "multiple_answers_available",
        ])),
    ]);
    let s = scorer(&server, flex_with_categories());
    let row = one(&s, &f8(), None).await;
    assert_eq!(
        row.details.to_value()["fn_categories"],
        json!(["incorrect_ground_truth_query", "multiple_answers_available"])
    );
}

#[tokio::test]
async fn flex_false_negative_categorisation_failure_keeps_the_verdict() {
    let server = MockServer::start().await;
    server.push([Scripted::json(
        &json!({"reasoning": "fine", "correct": true}),
    )]);
    server.respond_with(|_| Scripted::Content("no idea".into()));
    let s = scorer(&server, flex_with_categories());
    let row = one(&s, &f8(), None).await;
    assert_eq!(row.status, RowStatus::Ok);
    assert_eq!((row.value, row.verdict), (1.0, Some(true)));
    assert_eq!(
        row.details.to_value()["fn_categories_error"]["kind"],
        "invalid_reply"
    );
    assert!(row.details.to_value().get("fn_categories").is_none());
}

#[tokio::test]
async fn flex_error_categories_are_off_by_default() {
    let server = MockServer::start().await;
    server.push([Scripted::json(
        &json!({"reasoning": "wrong", "correct": false}),
    )]);
    let s = scorer(&server, only(Metric::Flex));
    let row = one(&s, &f5(), None).await;
    assert_eq!(row.verdict, Some(false));
    assert!(row.details.to_value().get("error_categories").is_none());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn flex_error_category_failure_keeps_the_verdict() {
    let server = MockServer::start().await;
    server.push([Scripted::json(
        &json!({"reasoning": "wrong", "correct": false}),
    )]);
    server.respond_with(|_| Scripted::Content("{\"incorrect_schema_linking\": true}".into()));
    let s = scorer(&server, flex_with_categories());
    let row = one(&s, &f5(), None).await;
    assert_eq!(row.status, RowStatus::Ok);
    assert_eq!((row.value, row.verdict), (0.0, Some(false)));
    assert_eq!(row.details.to_value()["reasoning"], "wrong");
    assert_eq!(
        row.details.to_value()["error_categories_error"]["kind"],
        "invalid_reply"
    );
    assert!(row.details.to_value().get("error_categories").is_none());
    assert_eq!(server.request_count(), 3, "verdict, categories, one repair");
}

#[tokio::test]
async fn flex_error_category_of_a_failing_prediction_needs_no_call() {
    let server = MockServer::start().await;
    let s = scorer(&server, flex_with_categories());
    let row = one(&s, &failing(), None).await;
    assert_eq!(row.status, RowStatus::ExecError);
    assert_eq!(row.details.to_value()["error_categories"], json!(["error"]));
    assert_eq!(server.request_count(), 0);
}

// ---------------------------------------------------------------- avoidance

#[tokio::test]
async fn esm_plus_equivalence_avoids_flex_and_rose_calls() {
    let server = MockServer::start().await;
    let opts = JudgedOptions {
        hybrid_ex: None,
        ..JudgedOptions::default()
    };
    let s = scorer(&server, opts);
    let rows = rows(&s, &f8(), Some(true)).await;
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r.verdict, Some(true), "{r:?}");
        assert_eq!(r.details.to_value()["avoided"], "esm_plus_equivalent");
    }
    assert_eq!(server.request_count(), 0);
    let c = s.counter().snapshot();
    assert_eq!(c[&Metric::Rose].avoided[&Avoidance::EsmPlusEquivalent], 1);
}

#[tokio::test]
async fn avoidance_off_calls_the_judge() {
    let server = MockServer::start().await;
    server.push([Scripted::json(&json!({"reasoning": "ok", "correct": true}))]);
    let mut opts = only(Metric::Flex);
    opts.avoidance = false;
    let s = scorer(&server, opts);
    one(&s, &f8(), Some(true)).await;
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn identical_tables_avoid_hybrid_call() {
    let server = MockServer::start().await;
    let s = scorer(&server, only(Metric::HybridEx));
    let e = event(
        Q,
        None,
        "SELECT full_name, superhero_name FROM superhero WHERE full_name LIKE 'Charles%' AND id > 0",
        GOLD,
    );
    let row = one(&s, &e, None).await;
    assert_eq!(row.value, 1.0);
    assert_eq!(row.details.to_value()["avoided"], "identical_results");
    assert_eq!(server.request_count(), 0);
    // Same rows but renamed columns: not identical, the judge is asked.
    server.push([Scripted::json(&alignment(
        json!({"s": "full_name", "c": "superhero_name"}),
        json!([]),
    ))]);
    let e = event(
        Q,
        None,
        "SELECT full_name AS s, superhero_name AS c FROM superhero WHERE full_name LIKE 'Charles%'",
        GOLD,
    );
    let row = one(&s, &e, None).await;
    assert_eq!(server.request_count(), 1);
    assert_eq!(row.value, 1.0);
    assert_eq!(row.details.to_value()["alignment_source"], "llm");
}

#[tokio::test]
async fn hybrid_failing_prediction_scores_zero_without_a_call() {
    let server = MockServer::start().await;
    let s = scorer(&server, only(Metric::HybridEx));
    let row = one(&s, &failing(), None).await;
    assert_eq!(row.value, 0.0);
    assert_eq!(row.status, RowStatus::ExecError);
    assert_eq!(row.details.to_value()["match_category"], "no_match");
    assert_eq!(server.request_count(), 0);
}

// ---------------------------------------------------------------- Hybrid-EX via the judge

fn alignment(rename: Value, index: Value) -> Value {
    json!({
        "matching_category": "complete", "llm_judge_score": 0.95,
        "column_rename_dict": rename, "trivial_columns": [], "index_columns": index,
        "order_columns": [], "common_columns": [], "unique_columns": {"gold": [], "pred": []},
        "numeric_columns": [], "date_columns": [], "exact_match_columns": [],
        "recommended_tolerance": null, "reasoning": "aligned"
    })
}

#[tokio::test]
async fn hybrid_uses_the_alignment_and_reports_llm_ex() {
    let server = MockServer::start().await;
    server.push([Scripted::json(&alignment(
        json!({"hero": "superhero_name", "name": "full_name"}),
        json!(["superhero_name"]),
    ))]);
    let s = scorer(&server, only(Metric::HybridEx));
    let e = event(
        Q,
        None,
        "SELECT superhero_name AS hero, full_name AS name, id FROM superhero WHERE full_name LIKE 'Charles%'",
        GOLD,
    );
    let row = one(&s, &e, None).await;
    // Index path on superhero_name; compared columns full_name (equal) and id (padded on the
    // gold side, so 0): every row scores 1/2.
    assert_eq!(row.status, RowStatus::Ok);
    assert_eq!(row.value, 0.5);
    assert_eq!(row.verdict, Some(false));
    assert_eq!(row.details.to_value()["path"], "index_matched");
    assert_eq!(row.details.to_value()["n_padded"], 1);
    assert_eq!(row.details.to_value()["n_matched"], 3);
    assert_eq!(row.details.to_value()["alignment_source"], "llm");
    assert_eq!(row.details.to_value()["llm_ex"], 0.95);
    assert_eq!(row.details.to_value()["match_category"], "complete");
    let u = user(&server, 0);
    assert!(
        u.contains("gold_result") && u.contains("hero,name,id"),
        "{u}"
    );
}

#[tokio::test]
async fn hybrid_large_tables_are_scored_off_the_runtime() {
    // 750 × 749 row pairs: Stage 2 runs on the blocking pool; the result is the same.
    let server = MockServer::start().await;
    server.push([Scripted::json(&alignment(json!({}), json!(["id"])))]);
    let s = scorer(&server, only(Metric::HybridEx));
    let e = event(
        "List the heroes",
        None,
        "SELECT id, superhero_name FROM superhero WHERE id > 1",
        "SELECT id, superhero_name FROM superhero",
    );
    let row = one(&s, &e, None).await;
    assert_eq!(row.status, RowStatus::Ok);
    assert_eq!(row.details.to_value()["path"], "index_matched");
    assert_eq!(row.details.to_value()["n_matched"], 749);
    assert_eq!(row.details.to_value()["n_unmatched"], 1);
    assert!((row.value - 749.0 / 750.0).abs() < 1e-9, "{}", row.value);
    assert_eq!(row.verdict, Some(true));
}

#[tokio::test]
async fn hybrid_malformed_output_falls_back_to_heuristic() {
    let server = MockServer::start().await;
    server.respond_with(|_| Scripted::Content("{\"matching_category\": \"great\"}".into()));
    let s = scorer(&server, only(Metric::HybridEx));
    let e = event(
        Q,
        None,
        "SELECT full_name AS s, superhero_name AS c FROM superhero WHERE full_name LIKE 'Charles%'",
        GOLD,
    );
    let row = one(&s, &e, None).await;
    assert_eq!(row.status, RowStatus::JudgeFallback);
    assert_eq!(row.details.to_value()["alignment_source"], "heuristic");
    assert_eq!(row.details.to_value()["llm_ex"], Value::Null);
    assert_eq!(row.details.to_value()["match_category"], Value::Null);
    assert_eq!(
        row.details.to_value()["judge_error"]["kind"],
        "invalid_reply"
    );
    // Positional mapping (equal column counts, same types) recovers the renamed columns.
    assert_eq!(row.value, 1.0);
    assert_eq!(row.verdict, Some(true));
}

// ---------------------------------------------------------------- ROSE truth table

fn prover(verdict: Value) -> Value {
    json!({"expected_answer": "names", "sql_description": "selects names", "reason": "prover reason",
        "verdict": verdict, "evidence": null})
}
fn refuter(verdict: bool, ambiguity: &str, gold_correct: bool) -> Value {
    json!({"judgement": "j", "verdict": verdict, "ambiguity": ambiguity, "gold_correct": gold_correct})
}

/// A server answering the Prover and the Refuter by role (system prompt).
async fn rose_server(prover_reply: Option<Value>, refuter_reply: Option<Value>) -> MockServer {
    let server = MockServer::start().await;
    server.respond_with(move |req| {
        let sys = req.message(0).unwrap_or_default();
        let reply = if sys.contains("You are the SQL Prover") {
            prover_reply.clone()
        } else {
            refuter_reply.clone()
        };
        match reply {
            Some(v) => Scripted::json(&v),
            None => Scripted::Content("not json at all".into()),
        }
    });
    server
}

fn roles(server: &MockServer) -> Vec<&'static str> {
    server
        .requests()
        .iter()
        .map(|r| {
            let sys = r.message(0).unwrap_or_default();
            if sys.contains("You are the SQL Prover") {
                "prover"
            } else {
                "refuter"
            }
        })
        .collect()
}

#[tokio::test]
async fn rose_not_executable_scores_zero_with_no_call() {
    let server = rose_server(None, None).await;
    let s = scorer(&server, only(Metric::Rose));
    let row = one(&s, &failing(), None).await;
    assert_eq!((row.value, row.verdict), (0.0, Some(false)));
    assert_eq!(row.details.to_value()["path"], "not_executable");
    assert_eq!(row.details.to_value()["llm_calls"], 0);
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn rose_match_path_uphold() {
    let server = rose_server(None, Some(refuter(false, "na", true))).await;
    let s = scorer(&server, only(Metric::Rose));
    let row = one(&s, &f15(), None).await;
    assert_eq!((row.value, row.verdict), (1.0, Some(true)));
    assert_eq!(row.details.to_value()["path"], "match_upheld");
    assert_eq!(row.details.to_value()["llm_calls"], 1);
    assert_eq!(roles(&server), vec!["refuter"]);
    let u = user(&server, 0);
    assert!(u.contains("identical results") && u.contains("###### Gold Standard SQL"));
    assert!(!u.contains("Execution Result") && !u.contains("Prover's Reasoning"));
    assert_eq!(row.details.to_value()["gold_incorrect"], false);
    assert_eq!(row.details.to_value()["ambiguous_question"], false);
}

#[tokio::test]
async fn rose_match_path_overturn_keeps_diagnostics() {
    let server = rose_server(None, Some(refuter(true, "na", false))).await;
    let s = scorer(&server, only(Metric::Rose));
    let row = one(&s, &f15(), None).await;
    assert_eq!((row.value, row.verdict), (0.0, Some(false)));
    assert_eq!(row.details.to_value()["path"], "match_overturned");
    assert_eq!(row.details.to_value()["gold_incorrect"], true);
    assert_eq!(roles(&server), vec!["refuter"]);
}

#[tokio::test]
async fn rose_prover_reject_is_final() {
    let server = rose_server(Some(prover(json!(false))), Some(refuter(false, "na", true))).await;
    let s = scorer(&server, only(Metric::Rose));
    let row = one(&s, &f8(), None).await;
    assert_eq!((row.value, row.verdict), (0.0, Some(false)));
    assert_eq!(row.details.to_value()["path"], "prover_rejected");
    assert_eq!(row.details.to_value()["llm_calls"], 1);
    assert!(
        row.details.to_value().get("gold_incorrect").is_none(),
        "no diagnostics without the Refuter"
    );
    assert_eq!(roles(&server), vec!["prover"]);
    let u = user(&server, 0);
    assert!(u.contains("###### SQL Execution Result"));
    assert!(
        !u.contains("Gold Standard SQL") && !u.contains(GOLD),
        "the Prover never sees the gold: {u}"
    );
}

#[tokio::test]
async fn rose_prover_pass_refuter_uphold_flags_goldx() {
    let server = rose_server(Some(prover(json!(true))), Some(refuter(false, "na", false))).await;
    let s = scorer(&server, only(Metric::Rose));
    let row = one(&s, &f8(), None).await;
    assert_eq!((row.value, row.verdict), (1.0, Some(true)));
    assert_eq!(row.details.to_value()["path"], "prover_passed_upheld");
    assert_eq!(row.details.to_value()["llm_calls"], 2);
    assert_eq!(row.details.to_value()["gold_incorrect"], true);
    assert_eq!(roles(&server), vec!["prover", "refuter"]);
    let u = user(&server, 1);
    for section in [
        "Predicted SQL Execution Result",
        "Gold SQL Execution Result",
        "Prover's Reasoning",
    ] {
        assert!(u.contains(section), "{section} missing");
    }
    assert!(u.contains("prover reason"));
}

#[tokio::test]
async fn rose_prover_pass_refuter_uphold_flags_ambq() {
    let server = rose_server(
        Some(prover(json!(true))),
        Some(refuter(false, "ambiguous question", true)),
    )
    .await;
    let s = scorer(&server, only(Metric::Rose));
    let row = one(&s, &f8(), None).await;
    assert_eq!(row.value, 1.0);
    assert_eq!(row.details.to_value()["ambiguous_question"], true);
    assert_eq!(row.details.to_value()["gold_incorrect"], false);
}

#[tokio::test]
async fn rose_prover_pass_refuter_overturn() {
    let server = rose_server(
        Some(prover(json!(true))),
        Some(refuter(true, "ambiguous schema", true)),
    )
    .await;
    let s = scorer(&server, only(Metric::Rose));
    let row = one(&s, &f8(), None).await;
    assert_eq!((row.value, row.verdict), (0.0, Some(false)));
    assert_eq!(row.details.to_value()["path"], "prover_passed_overturned");
    assert_eq!(row.details.to_value()["ambiguous_schema"], true);
    assert_eq!(row.details.to_value()["llm_calls"], 2);
}

#[tokio::test]
async fn rose_quoted_false_verdict_is_false() {
    let server = rose_server(
        Some(prover(json!("false"))),
        Some(refuter(false, "na", true)),
    )
    .await;
    let s = scorer(&server, only(Metric::Rose));
    let row = one(&s, &f8(), None).await;
    assert_eq!(row.value, 0.0);
    assert_eq!(row.details.to_value()["path"], "prover_rejected");
}

#[tokio::test]
async fn rose_refuter_garbage_is_a_judge_error_that_keeps_the_prover() {
    let server = rose_server(Some(prover(json!(true))), None).await;
    let s = scorer(&server, only(Metric::Rose));
    let row = one(&s, &f8(), None).await;
    assert_eq!(row.status, RowStatus::JudgeError);
    assert_eq!(row.verdict, None);
    assert_eq!(row.details.to_value()["failed_role"], "refuter");
    assert_eq!(row.details.to_value()["prover"]["verdict"], true);
    assert_eq!(
        row.details.to_value()["judge_error"]["kind"],
        "invalid_reply"
    );
}

#[tokio::test]
async fn rose_gold_failure_is_reported_not_scored() {
    let server = rose_server(None, None).await;
    let s = scorer(&server, only(Metric::Rose));
    let e = event("q", None, "SELECT 1", "SELECT nope FROM superhero");
    let row = one(&s, &e, None).await;
    assert_eq!(row.status, RowStatus::GoldError);
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn second_scoring_is_served_from_cache() {
    let server = rose_server(Some(prover(json!(true))), Some(refuter(false, "na", true))).await;
    let s = scorer(&server, only(Metric::Rose));
    one(&s, &f8(), None).await;
    let row = one(&s, &f8(), None).await;
    assert_eq!(server.request_count(), 2);
    assert_eq!(row.details.to_value()["cached"], true);
    let c = s.counter().snapshot();
    assert_eq!(c[&Metric::Rose].llm_calls, 4);
    assert_eq!(c[&Metric::Rose].cache_hits, 2);
}

/// Data rows of the result table in a ROSE prompt (the `sql_result` data block holds the
/// JSON-encoded markdown table: header, rule, rows, `...`, shape).
fn preview_rows(prompt: &str) -> usize {
    let start = prompt
        .find("<data name=\"sql_result\">")
        .expect("a result block")
        + 24;
    let end = start + prompt[start..].find("</data>").expect("block end");
    let table: String = serde_json::from_str(&prompt[start..end]).expect("JSON-encoded text");
    table.lines().filter(|l| l.starts_with('|')).count() - 2
}

#[tokio::test]
async fn rose_preview_size_follows_the_setting() {
    // 750 rows against 10: the mismatch path, the Prover sees a preview of the prediction.
    let many = event(
        "List the ids of the first ten superheroes.",
        None,
        "SELECT id FROM superhero",
        "SELECT id FROM superhero WHERE id <= 10",
    );
    let mut shown = Vec::new();
    for rows in [None, Some(3)] {
        let server = rose_server(Some(prover(json!(false))), None).await;
        let mut options = only(Metric::Rose);
        if let Some(n) = rows {
            options.rose = Some(RoseOptions {
                preview_rows: n,
                ..RoseOptions::default()
            });
        }
        let s = scorer(&server, options);
        let row = one(&s, &many, None).await;
        assert_eq!(
            row.details.to_value()["path"],
            "prover_rejected",
            "{}",
            row.details
        );
        let u = user(&server, 0);
        shown.push(preview_rows(&u));
    }
    assert_eq!(shown, vec![DEFAULT_PREVIEW_ROWS, 3]);
}
