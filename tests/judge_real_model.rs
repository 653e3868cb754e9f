//! The LLM judge against a real model server: llama.cpp's OpenAI-compatible server from PyPI
//! (`llama-cpp-python[server]`) with Gemma 3 270M, both installed by `scripts/services.sh
//! install` ([`sqlgrade_testkit::model_server`]).
//!
//! `sqlgrade backfill --format bird` judges two BIRD-dev questions (SuperSQL's predictions, one
//! that EX accepts and one it rejects, real databases) with the LLM judge for the STEF second
//! pass and for FLEX, ROSE and Hybrid-EX. It checks the wire and the path, not the verdicts (a
//! 270M model judges badly): the server rejects `json_schema` with an HTTP 500 and the client
//! steps down to `json_object` with the schema, once, logged; every judged row carries a
//! verdict from the model (no `judge_error`, no heuristic fallback), its tokens and the mode;
//! and a reply cut off by a tiny `judge.max_tokens` ends as a `judge_error` row that says so.
//!
//! One test, one server, run in sequence: the server answers one request at a time and each
//! call takes seconds of CPU on a 2-core machine. Every call is bounded by `judge.timeout_ms`
//! and `judge.max_tokens`, the server's startup by `model_server::STARTUP_TIMEOUT`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};
use sqlgrade_testkit::cli::sqlgrade;
use sqlgrade_testkit::data::data_dir;
use sqlgrade_testkit::model_server::{LlamaServer, MODEL_ALIAS};

/// SuperSQL's prediction of BIRD dev 195 returns the gold result (EX = 1, reference verdict) with
/// SQL that ESM+ does not match; that of 197 returns another result (EX = 0) and executes. Neither equals its
/// gold SQL, so no metric can decide without the judge.
const EX_TRUE: i64 = 195;
const EX_FALSE: i64 = 197;

/// One judge call's time bound: a ~2,700-token prompt and a reply of up to `max_tokens` on two
/// cores of a loaded CI machine take well under a minute; this leaves room, and is the bound.
const CALL_TIMEOUT_MS: u64 = 300_000;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The two questions and their predictions, written under `dir`.
fn fixture(dir: &Path) -> (PathBuf, PathBuf) {
    let bird = data_dir().join("bird");
    let wanted = [EX_TRUE, EX_FALSE];
    let mut dev = String::new();
    for line in std::fs::read_to_string(bird.join("dev.jsonl"))
        .unwrap()
        .lines()
    {
        let q: Value = serde_json::from_str(line).unwrap();
        if wanted.contains(&q["question_id"].as_i64().unwrap()) {
            dev.push_str(line);
            dev.push('\n');
        }
    }
    let mut predictions = String::new();
    let all: HashMap<i64, Value> = std::fs::read_to_string(bird.join("predictions/SuperSQL.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|p| (p["question_id"].as_i64().unwrap(), p))
        .collect();
    for id in wanted {
        predictions.push_str(&all[&id].to_string());
        predictions.push('\n');
    }
    let dev_path = dir.join("dev.jsonl");
    let predictions_path = dir.join("SuperSQL.jsonl");
    std::fs::write(&dev_path, dev).unwrap();
    std::fs::write(&predictions_path, predictions).unwrap();
    (dev_path, predictions_path)
}

/// A config: JSONL sink under `dir/out`, the BIRD databases, `metrics`, and the real server as
/// the judge with `max_tokens`.
fn write_config(dir: &Path, server: &LlamaServer, metrics: &[&str], max_tokens: u32) -> PathBuf {
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

[judge]
kind = "llm"
base_url = "{base_url}"
model = "{MODEL_ALIAS}"
api_key_env = ""
max_concurrency = 1
max_requests_per_second = 100.0
system_prompt = "in_user"
timeout_ms = {CALL_TIMEOUT_MS}
max_retries = 1
max_tokens = {max_tokens}

[gold]
databases = {databases:?}
tables = [{tables:?}]
metrics = {metrics}
flex_error_categories = true
"#,
            out = dir.join("out").display().to_string(),
            rules = dir.join("no-rules").display().to_string(),
            base_url = server.base_url(),
            databases = bird.join("databases").display().to_string(),
            tables = bird.join("tables.json").display().to_string(),
            metrics = json!(metrics),
        ),
    )
    .unwrap();
    path
}

fn backfill(dir: &Path, config: &Path, dev: &Path, predictions: &Path) -> Output {
    sqlgrade(dir)
        .env("RUST_LOG", "info")
        .args(["backfill", "--format", "bird", "--judge", "all", "--input"])
        .arg(dev)
        .arg("--predictions")
        .arg(predictions)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap()
}

/// Rows by event id, then metric.
fn rows_by_event(path: &Path) -> BTreeMap<String, BTreeMap<String, Value>> {
    let mut out: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let row: Value = serde_json::from_str(line).unwrap();
        let event = row["event_id"].as_str().unwrap().to_string();
        let metric = row["metric"].as_str().unwrap().to_string();
        out.entry(event).or_default().insert(metric, row);
    }
    out
}

#[test]
fn backfill_with_a_real_llama_cpp_server_judges_every_event() {
    let Some(server) = LlamaServer::start("judge_real_model") else {
        return;
    };
    let judge = format!("llm:{MODEL_ALIAS}");

    // 1. The whole path, default token cap.
    let dir = tempfile::tempdir().unwrap();
    let (dev, predictions) = fixture(dir.path());
    let config = write_config(
        dir.path(),
        &server,
        &["ex", "flex", "rose", "hybrid_ex"],
        2048,
    );
    let out = backfill(dir.path(), &config, &dev, &predictions);
    let stderr = text(&out.stderr);
    let context = || {
        format!(
            "stderr:\n{stderr}\nstdout:\n{}\nserver log:\n{}",
            text(&out.stdout),
            server.log_tail(3000)
        )
    };
    assert!(out.status.success(), "{}", context());
    // llama-cpp-python answers json_schema with HTTP 500; the client steps down once, logged.
    let step_downs = stderr
        .lines()
        .filter(|l| l.contains("stepping down"))
        .collect::<Vec<_>>();
    assert_eq!(step_downs.len(), 1, "{}", context());
    assert!(
        step_downs[0].contains("rejected=\"json_schema\"")
            && step_downs[0].contains("next=\"json_object\""),
        "{}",
        context()
    );

    let rows = rows_by_event(&dir.path().join("out/evaluations.jsonl"));
    assert_eq!(
        rows.keys().cloned().collect::<Vec<_>>(),
        vec![EX_TRUE.to_string(), EX_FALSE.to_string()],
        "{}",
        context()
    );
    assert_eq!(rows[&EX_TRUE.to_string()]["ex"]["verdict"], true);
    assert_eq!(rows[&EX_FALSE.to_string()]["ex"]["verdict"], false);
    let mut judged_gold_rows = 0;
    for (event, metrics) in &rows {
        // The STEF second pass: the model's own verdict, its tokens, the mode.
        let judged = &metrics["stef_judged"];
        assert_eq!(
            judged["status"],
            "ok",
            "event {event}: {judged}\n{}",
            context()
        );
        assert_eq!(judged["judge"], judge.as_str(), "{judged}");
        assert_eq!(judged["judge_cached"], false, "{judged}");
        assert!(judged["prompt_tokens"].as_u64().unwrap() > 0, "{judged}");
        assert!(
            judged["completion_tokens"].as_u64().unwrap() > 0,
            "{judged}"
        );
        assert_eq!(
            judged["details"]["response_mode"], "json_object",
            "{judged}"
        );
        // Its identity: the endpoint's model name, the model the server reported answering,
        // the prompt version and the response mode it settled on.
        let identity = judged["judge_identity"].as_str().unwrap();
        assert!(
            identity.starts_with("llm model=")
                && !identity.contains(" served=? ")
                && identity.contains(" prompt=stef-")
                && identity.ends_with(" mode=json_object"),
            "{identity}"
        );

        // FLEX, ROSE, Hybrid-EX: a verdict from the model wherever the model was asked.
        for metric in ["flex", "rose", "hybrid_ex"] {
            let row = &metrics[metric];
            let details = &row["details"];
            assert_eq!(
                row["status"],
                "ok",
                "event {event} {metric}: {row}\n{}",
                context()
            );
            assert!(row["verdict"].is_boolean(), "{row}");
            let calls = details["llm_calls"].as_u64().unwrap_or(0);
            if metric == "hybrid_ex" && details["avoided"].is_string() {
                continue;
            }
            if metric == "hybrid_ex" {
                assert_eq!(details["alignment_source"], "llm", "{row}");
            } else {
                assert!(
                    calls >= 1,
                    "event {event} {metric} did not ask the model: {row}"
                );
            }
            assert!(details["prompt_tokens"].as_u64().unwrap() > 0, "{row}");
            assert!(details["completion_tokens"].as_u64().unwrap() > 0, "{row}");
            assert_eq!(details["response_mode"], "json_object", "{row}");
            judged_gold_rows += 1;
        }
    }
    assert!(judged_gold_rows >= 5, "{}", context());

    // The summary counts the model's tokens.
    let summary = text(&out.stdout);
    assert!(summary.contains(&format!("LLM judge {judge}")), "{summary}");
    assert!(!summary.contains("failures 1"), "{summary}");

    // 2. A cap the reply cannot fit in: recorded as a judge_error that names the cap, after
    //    one repair turn; never a hang.
    let dir = tempfile::tempdir().unwrap();
    let (dev, predictions) = fixture(dir.path());
    let config = write_config(dir.path(), &server, &["ex"], 8);
    let out = backfill(dir.path(), &config, &dev, &predictions);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "stderr:\n{stderr}");
    let rows = rows_by_event(&dir.path().join("out/evaluations.jsonl"));
    assert_eq!(rows.len(), 2);
    for (event, metrics) in &rows {
        let judged = &metrics["stef_judged"];
        assert_eq!(judged["status"], "judge_error", "event {event}: {judged}");
        let error = judged["details"]["judge_error"].as_str().unwrap();
        assert!(
            error.contains("cut off at judge.max_tokens = 8 (finish_reason = length)")
                && error.contains("after one repair retry"),
            "{error}"
        );
        // The line-rate row is there regardless.
        assert_eq!(metrics["stef"]["status"], "ok");
    }
    let summary = text(&out.stdout);
    assert!(summary.contains("cut off"), "{summary}");
}
