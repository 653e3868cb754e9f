//! FLEX, ROSE and Hybrid-EX wired into the daemon, end to end against the scripted judge server:
//! `sqlgrade backfill --format bird` with all six gold metrics on 24 BIRD-dev questions (real
//! predictions, real databases), `check-config`'s rules for the judged metrics, and a second
//! backfill through the same scorer answered entirely from the in-process (moka) judge cache.

use crate::support;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use serde_json::{Value, json};
use sqlgrade::assembly::build_scorer;
use sqlgrade::commands::backfill::{BackfillFormat, BackfillPlan, BackfillRequest};
use sqlgrade::config::Config;
use sqlgrade::evaluation::Metric;
use sqlgrade::metrics::avoid::Avoidance;
use sqlgrade::telemetry::summary::MetricStats;
use sqlgrade_testkit::data::data_dir;
use support::cli::sqlgrade;
use support::openai_mock::{MockServer, Recorded, Scripted};

/// Questions backfilled (the first of BIRD dev).
const QUESTIONS: usize = 24;
/// A prediction containing this makes the scripted judge answer garbage.
const MALFORMED_MARKER: &str = "malformed-judge-marker";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The scripted judge: a valid reply per prompt (by its system message), garbage for any
/// prompt that shows the malformed marker.
fn reply(req: &Recorded) -> Scripted {
    let sys = req.message(0).unwrap_or_default();
    let user = req.message(1).unwrap_or_default();
    if user.contains(MALFORMED_MARKER) {
        return Scripted::Content("Looks fine to me, probably.".into());
    }
    let v = if sys.contains("You are the semantic judge of STEF") {
        support::stef_reply("correct", 0.9)
    } else if sys.contains("You are the SQL Prover") {
        json!({"expected_answer": "a", "sql_description": "b", "reason": "c", "verdict": true,
            "evidence": null})
    } else if sys.contains("Adversarial Refuter") {
        json!({"judgement": "j", "verdict": false, "ambiguity": "na", "gold_correct": true})
    } else if sys.contains("data-comparison analyst") {
        json!({"matching_category": "partial", "llm_judge_score": 0.5, "column_rename_dict": {},
            "trivial_columns": [], "index_columns": [], "order_columns": [], "common_columns": [],
            "unique_columns": {"gold": [], "pred": []}, "numeric_columns": [], "date_columns": [],
            "exact_match_columns": [], "recommended_tolerance": null, "reasoning": "r"})
    } else if sys.contains("categorise why") {
        let flag =
            |on: bool| json!({"issued": on, "explanation": if on { "wrong filter" } else { "" }});
        json!({"incorrect_schema_linking": flag(false), "incorrect_filtering_condition": flag(true),
            "missing_handling_of_nullable_column": flag(false),
            "missing_handling_of_multiple_rows": flag(false), "abused_clauses": flag(false),
            "other_fatal_issues": flag(false)})
    } else {
        // FLEX: the verdict follows the branch so both verdicts occur.
        json!({"reasoning": "scripted", "correct": sys.contains("return the same execution result")})
    };
    Scripted::json(&v)
}

/// The three special questions of the fixture.
struct Fixture {
    dir: tempfile::TempDir,
    dev: PathBuf,
    predictions: PathBuf,
    /// Prediction = the gold SQL (every judged metric decided without the LLM).
    gold_equal: (String, String),
    /// Prediction fails to execute.
    failing: String,
    /// The judge answers garbage for this one.
    malformed: String,
}

/// The first `QUESTIONS` questions of BIRD dev with SuperSQL's predictions, some replaced: one
/// by the gold SQL, one by SQL that fails, and (`with_malformed`) one by SQL the judge chokes on.
fn fixture(with_malformed: bool) -> Fixture {
    let bird = data_dir().join("bird");
    let questions: Vec<Value> = std::fs::read_to_string(bird.join("dev.jsonl"))
        .unwrap()
        .lines()
        .take(QUESTIONS)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let predicted: HashMap<i64, String> =
        std::fs::read_to_string(bird.join("predictions/SuperSQL.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .map(|p| {
                (
                    p["question_id"].as_i64().unwrap(),
                    p["predicted_sql"].as_str().unwrap().to_string(),
                )
            })
            .collect();
    let dir = tempfile::tempdir().unwrap();
    let id = |i: usize| questions[i]["question_id"].as_i64().unwrap();
    let mut dev = String::new();
    let mut preds = String::new();
    for (i, q) in questions.iter().enumerate() {
        dev.push_str(&q.to_string());
        dev.push('\n');
        let sql = match i {
            0 => q["gold_sql"].as_str().unwrap().to_string(),
            1 => "SELECT no_such_column FROM bond".to_string(),
            2 if with_malformed => format!("SELECT '{MALFORMED_MARKER}' AS answer"),
            _ => predicted[&id(i)].clone(),
        };
        preds.push_str(&json!({"question_id": id(i), "predicted_sql": sql}).to_string());
        preds.push('\n');
    }
    std::fs::write(dir.path().join("dev.jsonl"), dev).unwrap();
    std::fs::write(dir.path().join("SuperSQL-subset.jsonl"), preds).unwrap();
    Fixture {
        dev: dir.path().join("dev.jsonl"),
        predictions: dir.path().join("SuperSQL-subset.jsonl"),
        gold_equal: (
            id(0).to_string(),
            questions[0]["question"].as_str().unwrap().to_string(),
        ),
        failing: id(1).to_string(),
        malformed: id(2).to_string(),
        dir,
    }
}

/// A config: JSONL sink in the fixture dir, the BIRD databases, all six gold metrics, and the
/// judge section(s) given.
fn write_config(dir: &Path, judge_sections: &str) -> PathBuf {
    let bird = data_dir().join("bird");
    let path = dir.join("sqlgrade.toml");
    std::fs::write(
        &path,
        format!(
            r#"
[sink]
kind = "jsonl"
dir = {out:?}

[rules]
dir = {rules:?}

[pipeline]
workers = 8

[gold]
databases = {databases:?}
tables = [{tables:?}]
metrics = ["ex", "esm", "esm_plus", "flex", "rose", "hybrid_ex"]
flex_error_categories = true
hybrid_cutoff = 0.8
{judge_sections}
"#,
            out = dir.join("out").display().to_string(),
            rules = dir.join("no-rules").display().to_string(),
            databases = bird.join("databases").display().to_string(),
            tables = bird.join("tables.json").display().to_string(),
        ),
    )
    .unwrap();
    path
}

fn gold_judge_section(server: &MockServer) -> String {
    format!(
        r#"
[gold.judge]
kind = "llm"
base_url = "{}"
model = "mock-judge"
api_key_env = ""
api_key = "sk-gold-secret"
max_requests_per_second = 1000.0
max_concurrency = 16
"#,
        server.base_url()
    )
}

/// `[judge]` on the scripted server, which the judged gold metrics then share (no
/// `[gold.judge]`).
fn shared_judge_section(server: &MockServer) -> String {
    format!(
        "[judge]\nkind = \"llm\"\nbase_url = \"{}\"\nmodel = \"mock-judge\"\napi_key_env = \"\"\n\
         max_requests_per_second = 1000.0\nmax_concurrency = 16\n",
        server.base_url()
    )
}

fn rows_by_event(path: &Path) -> BTreeMap<String, BTreeMap<String, Value>> {
    let mut out: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let row: Value = serde_json::from_str(line).unwrap();
        let event = row["event_id"].as_str().unwrap().to_string();
        let metric = row["metric"].as_str().unwrap().to_string();
        assert!(
            out.entry(event).or_default().insert(metric, row).is_none(),
            "one row per (event, metric)"
        );
    }
    out
}

fn backfill_cli(f: &Fixture, config: &Path) -> Output {
    backfill_cli_with(f, config, &[])
}

/// `backfill --format bird` of the fixture with `extra` arguments.
fn backfill_cli_with(f: &Fixture, config: &Path, extra: &[&std::ffi::OsStr]) -> Output {
    sqlgrade(f.dir.path())
        .args(["backfill", "--format", "bird", "--input"])
        .arg(&f.dev)
        .arg("--predictions")
        .arg(&f.predictions)
        .arg("--config")
        .arg(config)
        .args(extra)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_bird_computes_flex_rose_and_hybrid_ex() {
    let server = MockServer::start().await;
    server.respond_with(reply);
    let f = fixture(true);
    let config = write_config(f.dir.path(), &gold_judge_section(&server));
    let out = backfill_cli(&f, &config);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let rows = rows_by_event(&f.dir.path().join("out/evaluations.jsonl"));

    // Nothing lost: every question has all seven rows.
    assert_eq!(rows.len(), QUESTIONS);
    for (event, metrics) in &rows {
        let names: Vec<&str> = metrics.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            vec!["esm", "esm_plus", "ex", "flex", "hybrid_ex", "rose", "stef"],
            "event {event}"
        );
        for m in ["flex", "rose", "hybrid_ex"] {
            let row = &metrics[m];
            assert_eq!(row["run_id"], "SuperSQL-subset");
            assert!(
                row["status"].is_string() && row["details"].is_object(),
                "{row}"
            );
        }
    }

    // Prediction = gold: decided by evidence, zero HTTP requests mention the question.
    let (gold_equal, question) = &f.gold_equal;
    let r = &rows[gold_equal];
    for m in ["flex", "rose"] {
        assert_eq!(r[m]["status"], "ok");
        assert_eq!(r[m]["verdict"], true);
        assert_eq!(
            r[m]["details"]["avoided"], "esm_plus_equivalent",
            "{}",
            r[m]
        );
    }
    assert_eq!(r["hybrid_ex"]["value"], 1.0);
    assert_eq!(r["hybrid_ex"]["details"]["avoided"], "identical_results");
    let requests = server.requests();
    assert!(!requests.is_empty());
    // Each call is capped by its reply's own default (one verdict and a paragraph: 1,024
    // tokens; the alignment: 2,048), below judge.max_tokens (default 2,048).
    for req in &requests {
        let sys = req.message(0).unwrap_or_default();
        let expected = if sys.contains("data-comparison analyst") {
            2048
        } else {
            1024
        };
        assert_eq!(
            req.body()["max_tokens"],
            expected,
            "{}",
            &sys[..80.min(sys.len())]
        );
    }
    assert!(
        requests.iter().all(|req| !req
            .message(1)
            .unwrap_or_default()
            .contains(question.as_str())),
        "no judge request for the event whose prediction equals the gold"
    );

    // A prediction that fails to execute: incorrect without a call, FLEX category `error`.
    let r = &rows[&f.failing];
    for m in ["flex", "rose", "hybrid_ex"] {
        assert_eq!(r[m]["status"], "exec_error", "{}", r[m]);
        assert_eq!(r[m]["value"], 0.0);
        assert_eq!(r[m]["details"]["avoided"], "prediction_failed");
    }
    assert_eq!(r["flex"]["details"]["error_categories"], json!(["error"]));

    // Malformed judge replies: explicit fallback statuses, the rows are kept.
    let r = &rows[&f.malformed];
    assert_eq!(r["flex"]["status"], "judge_error");
    assert_eq!(r["flex"]["verdict"], Value::Null);
    assert_eq!(r["flex"]["details"]["judge_error"]["kind"], "invalid_reply");
    assert_eq!(r["rose"]["status"], "judge_error");
    assert_eq!(r["rose"]["details"]["failed_role"], "prover");
    assert_eq!(r["hybrid_ex"]["status"], "judge_fallback");
    assert_eq!(r["hybrid_ex"]["details"]["alignment_source"], "heuristic");
    assert_eq!(r["hybrid_ex"]["details"]["cutoff"], 0.8);

    // The rest went to the judge: FLEX rows carry a branch; incorrect ones their categories.
    let judged_flex: Vec<&Value> = rows
        .values()
        .map(|m| &m["flex"])
        .filter(|r| r["details"]["llm_calls"].as_u64().unwrap_or(0) > 0 && r["status"] == "ok")
        .collect();
    assert!(!judged_flex.is_empty());
    for row in &judged_flex {
        let branch = row["details"]["branch"].as_str().unwrap();
        assert_eq!(row["verdict"], branch == "eq", "{row}");
        if row["verdict"] == false {
            assert_eq!(
                row["details"]["error_categories"],
                json!(["incorrect_filtering_condition"])
            );
            assert_eq!(row["details"]["llm_calls"], 2);
        } else {
            assert!(row["details"].get("error_categories").is_none());
        }
    }
    assert!(
        judged_flex.iter().any(|r| r["verdict"] == false),
        "some NEQ verdicts"
    );

    // The summary table: judged metrics with calls and avoided calls, and the client totals.
    let summary = text(&out.stdout);
    assert!(
        summary.contains("LLM judge llm:mock-judge (gold metrics)"),
        "{summary}"
    );
    assert!(summary.contains("LLM-judged metrics"), "{summary}");
    for line in ["flex ", "rose ", "hybrid_ex "] {
        assert!(
            summary
                .lines()
                .any(|l| l.trim_start().starts_with(line) && l.contains("avoided")),
            "{line}: {summary}"
        );
    }
    assert!(summary.contains("esm_plus_equivalent"), "{summary}");
    assert!(summary.contains("prediction_failed 1"), "{summary}");
    assert!(!summary.contains("sk-gold-secret"));
}

#[test]
fn check_config_requires_an_llm_judge_for_judged_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, "[gold]\nmetrics = [\"ex\", \"flex\", \"rose\"]\n").unwrap();
    let out = sqlgrade(dir.path())
        .args(["check-config", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("gold.metrics includes flex, rose") && err.contains("[gold.judge]"),
        "{err}"
    );

    std::fs::write(
        &path,
        "[gold]\nmetrics = [\"hybrid_ex\"]\nhybrid_cutoff = 1.5\nflex_render = \"tiny\"\n",
    )
    .unwrap();
    let out = sqlgrade(dir.path())
        .args(["check-config", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("tiny"), "{}", text(&out.stderr));

    std::fs::write(
        &path,
        "[gold]\nmetrics = [\"flex\"]\nflex_render = \"repo_v1\"\n[gold.judge]\nkind = \"llm\"\n\
         base_url = \"http://127.0.0.1:9/v1\"\napi_key = \"sk-inline\"\n",
    )
    .unwrap();
    let out = sqlgrade(dir.path())
        .args(["check-config", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let effective = text(&out.stdout);
    assert!(effective.contains("[gold.judge]"), "{effective}");
    assert!(
        effective.contains("flex_render = \"repo_v1\""),
        "{effective}"
    );
    assert!(
        !effective.contains("sk-inline"),
        "secret redacted: {effective}"
    );
}

/// Two backfills of the same predictions through one scorer (one process): the second is
/// answered entirely by the in-process moka cache — STEF and the judged metrics share one
/// client here (`[judge] kind = "llm"`, no `[gold.judge]`). Across processes the cache would
/// have to be the durable one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_backfill_is_served_from_the_shared_cache() {
    let server = MockServer::start().await;
    server.respond_with(reply);
    // Failed judge calls are never cached, so the fixture has no malformed replies here.
    let f = fixture(false);
    let judge = shared_judge_section(&server);
    let config_path = write_config(f.dir.path(), &judge);
    let config = Config::load_with_env(Some(&config_path), Some(HashMap::new())).unwrap();
    let scorer = Arc::new(build_scorer(&config).unwrap());
    let request = BackfillRequest {
        input: f.dev.clone(),
        format: BackfillFormat::Bird,
        predictions: Some(f.predictions.clone()),
        run_id: None,
        judge: sqlgrade::commands::backfill::PlanMode::Census,
    };
    let run = || async {
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        BackfillPlan::prepare(&request, &config)
            .unwrap()
            .run_with_scorer(&config, Arc::clone(&scorer), shutdown, None)
            .await
            .unwrap()
    };
    let first = run().await;
    let http_first = server.request_count();
    let second = run().await;

    // One client, reported once, shared by STEF and the gold metrics.
    assert_eq!(first.llm.clients.len(), 1, "{:?}", first.llm.clients);
    let client = &first.llm.clients[0];
    assert_eq!(client.role, "STEF judge + gold metrics");
    assert_eq!(client.judge, "llm:mock-judge");
    assert_eq!(client.totals.http_requests as usize, http_first);
    assert!(
        first
            .render("t")
            .contains("LLM judge llm:mock-judge (STEF judge + gold metrics)")
    );
    let stef_and_judged: u64 =
        QUESTIONS as u64 + first.llm.judged.values().map(|c| c.llm_calls).sum::<u64>();
    assert_eq!(client.totals.assessments, stef_and_judged);

    // Second backfill: no HTTP request at all, every call a cache hit.
    assert_eq!(
        server.request_count(),
        http_first,
        "second backfill reached the LLM"
    );
    let again = &second.llm.clients[0].totals;
    assert_eq!(again.http_requests, 0);
    assert_eq!(again.assessments, client.totals.assessments);
    assert_eq!(again.cache_hits, again.assessments, "100% cache hits");
    for (metric, calls) in &second.llm.judged {
        assert_eq!(calls.events, QUESTIONS as u64, "{metric}");
        assert!(calls.llm_calls > 0, "{metric}");
        assert_eq!(
            calls.cache_hits, calls.llm_calls,
            "{metric}: 100% cache hits"
        );
        assert_eq!(calls.llm_calls, first.llm.judged[metric].llm_calls);
        assert_eq!(calls.avoided, first.llm.judged[metric].avoided);
    }
    assert_eq!(
        second.llm.judged[&Metric::Flex].avoided[&Avoidance::PredictionFailed],
        1
    );
    for metric in ["flex", "rose", "hybrid_ex"] {
        assert_same_stats(&first.metrics[metric], &second.metrics[metric], metric);
    }
}

/// Same rows from the cache: equal counts and statuses, and value sums equal up to rounding
/// (events complete out of order, so the f64 sums add the same values in another order).
fn assert_same_stats(a: &MetricStats, b: &MetricStats, metric: &str) {
    let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs().max(1.0);
    assert_eq!(
        (a.count, a.verdicts, a.verdicts_true, &a.statuses),
        (b.count, b.verdicts, b.verdicts_true, &b.statuses),
        "{metric}: same rows from the cache"
    );
    assert!(
        close(a.mean().unwrap_or(0.0), b.mean().unwrap_or(0.0)),
        "{metric}: {a:?} vs {b:?}"
    );
    let keys = |m: &MetricStats| m.by_difficulty.keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(a), keys(b), "{metric}");
    for (difficulty, (n, sum)) in &a.by_difficulty {
        let (m, other) = b.by_difficulty[difficulty];
        assert!(
            *n == m && close(*sum, other),
            "{metric} {difficulty}: {a:?} vs {b:?}"
        );
    }
}

/// Only `flex` and `hybrid_ex` configured (no `ex`, no `esm_plus`): the gold adapter still
/// executes both queries once and computes the ESM+ verdict as avoidance evidence, so a
/// prediction equal to the gold costs no LLM call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avoidance_evidence_without_esm_plus_rows() {
    let server = MockServer::start().await;
    server.respond_with(reply);
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), &gold_judge_section(&server));
    let mut config = Config::load_with_env(Some(&path), Some(HashMap::new())).unwrap();
    config.gold.metrics = vec![Metric::Flex, Metric::HybridEx];
    config.gold.flex_error_categories = false;
    let scorer = build_scorer(&config).unwrap();
    let gold = "SELECT COUNT(*) FROM superhero WHERE eye_colour_id = 9";
    let event = |sql: &str| {
        sqlgrade::event::Event::from_value(json!({
            "event_id": "e", "question": "How many heroes have blue eyes?", "sql": sql,
            "gold": {"sql": gold, "db_id": "superhero"}
        }))
        .unwrap()
    };
    let rows = scorer.score(&event(gold)).await;
    let metrics: Vec<&str> = rows.iter().map(|r| r.metric.as_str()).collect();
    assert_eq!(metrics, vec!["stef", "flex", "hybrid_ex"]);
    assert_eq!(rows[1].details.to_value()["avoided"], "esm_plus_equivalent");
    assert_eq!(rows[2].details.to_value()["avoided"], "identical_results");
    assert_eq!(server.request_count(), 0);
    // A different prediction goes to the judge (FLEX's NEQ branch, Hybrid-EX's alignment).
    let rows = scorer
        .score(&event("SELECT COUNT(id) + 1 FROM superhero"))
        .await;
    assert_eq!(rows[1].details.to_value()["branch"], "neq");
    assert_eq!(rows[2].details.to_value()["alignment_source"], "llm");
    assert_eq!(server.request_count(), 2);
    let usage = scorer.llm_usage();
    assert_eq!(usage.clients.len(), 1, "the STEF judge is deterministic");
    assert_eq!(usage.clients[0].role, "gold metrics");
    assert_eq!(usage.judged[&Metric::Flex].llm_calls, 1);
    assert_eq!(
        usage.judged[&Metric::Flex].avoided[&Avoidance::EsmPlusEquivalent],
        1
    );
}

/// `backfill --labels`: the one command that measures a judge. With BIRD's reference EX
/// verdicts as the labels, it prints per metric (the STEF second pass and the judged gold
/// metrics among them) κ and accuracy with their 95% intervals and what the judge spent per
/// 1,000 events at `[judge.budget]`'s prices, computed from the rows the run wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_with_labels_measures_agreement_and_spend() {
    let server = MockServer::start().await;
    server.respond_with(reply);
    let f = fixture(false);
    let judge = shared_judge_section(&server)
        + "[judge.budget]\nprice_input_per_1k = 0.002\nprice_output_per_1k = 0.008\n";
    let config = write_config(f.dir.path(), &judge);
    let reference: HashMap<i64, bool> =
        std::fs::read_to_string(data_dir().join("bird/reference/ex_SuperSQL.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .map(|v| (v["question_id"].as_i64().unwrap(), v["ex"] == 1))
            .collect();
    let ids: Vec<i64> = std::fs::read_to_string(&f.dev)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["question_id"]
                .as_i64()
                .unwrap()
        })
        .collect();
    let labels: String = ids
        .iter()
        .map(|id| format!("{}\n", json!({"question_id": id, "label": reference[id]})))
        .collect();
    let labels_path = f.dir.path().join("labels.jsonl");
    std::fs::write(&labels_path, labels).unwrap();

    let out = backfill_cli_with(&f, &config, &["--labels".as_ref(), labels_path.as_os_str()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", text(&out.stderr));
    let section = stdout
        .split_once(&format!("Agreement with {QUESTIONS} labels"))
        .unwrap_or_else(|| panic!("no agreement section: {stdout}"))
        .1;
    let rows =
        sqlgrade::commands::calibrate::read_rows(&f.dir.path().join("out/evaluations.jsonl"))
            .unwrap();
    for metric in ["stef_judged", "flex", "rose", "hybrid_ex", "ex"] {
        let block = section
            .split("metric: ")
            .find(|b| b.starts_with(&format!("{metric}\n")))
            .unwrap_or_else(|| panic!("no {metric} block: {section}"));
        assert!(
            block.contains("cohen_kappa: ") && block.contains("[95% bootstrap"),
            "{block}"
        );
        assert!(block.contains("[95% Wilson"), "{block}");
        if metric == "ex" {
            // The labels are the reference EX verdicts of the unmodified predictions (two of
            // the fixture's differ): EX spends nothing on a judge.
            assert!(block.contains("matched 24"), "{block}");
            assert!(!block.contains("judge spend"), "{block}");
            continue;
        }
        // Spend: the rows' own tokens, per 1,000 events, at the configured prices.
        let m: Metric = serde_json::from_value(json!(metric)).unwrap();
        let spend = sqlgrade::commands::calibrate::spend(
            &rows,
            m,
            Some(sqlgrade::commands::calibrate::Prices {
                input_per_1k: 0.002,
                output_per_1k: 0.008,
            }),
        );
        assert_eq!(spend.events, QUESTIONS, "{metric}");
        assert!(spend.prompt_tokens > 0, "{metric}");
        let expected = format!(
            "per 1,000 events {:.0} tokens, cost {:.4}",
            spend.tokens_per_1k_events.unwrap(),
            spend.cost_per_1k_events.unwrap()
        );
        assert!(block.contains(&expected), "{metric}: {expected}\n{block}");
    }

    // Without a run id there is nothing to measure: refused before any work is done.
    let events = f.dir.path().join("events.jsonl");
    std::fs::write(&events, "").unwrap();
    let out = sqlgrade(f.dir.path())
        .args(["backfill", "--input"])
        .arg(&events)
        .arg("--config")
        .arg(&config)
        .arg("--labels")
        .arg(&labels_path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--labels needs a run id"),
        "{}",
        text(&out.stderr)
    );
}
