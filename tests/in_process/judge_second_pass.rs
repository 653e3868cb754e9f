//! The second, LLM-judged pass against the scripted OpenAI-compatible server: the line-rate pass
//! keeps its pace whatever the judge does, the judge works within its quota and caps, nothing is
//! lost (every selected event is judged or shed and counted), a benchmark backfill judges every
//! event with `judge.max_concurrency` calls in flight, and cost accounting matches the tokens
//! the server reported.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use sqlgrade::config::{Config, JudgeConfig, LlmJudgeConfig};
use sqlgrade::sampling::ShedReason;
use sqlgrade::telemetry::summary::Summary;
use sqlgrade_testkit::events::{benchmark_events, stef_reply};
use sqlgrade_testkit::openai_mock::{MockServer, Scripted};

/// `n` events with pairwise distinct judge inputs (a per-copy suffix on the question), from
/// every BIRD and Spider prediction.
fn events(n: usize) -> Vec<Value> {
    let mut base = Vec::new();
    for (dataset, system) in [
        ("bird", "SuperSQL"),
        ("bird", "CHESS-GPT-4o-mini"),
        ("spider", "SuperSQL"),
        ("spider", "TA-ACL"),
    ] {
        base.extend(benchmark_events(dataset, system));
    }
    (0..n)
        .map(|i| {
            let e = &base[i % base.len()];
            let mut v = serde_json::to_value(e).unwrap();
            v["event_id"] = json!(format!("ev-{i}"));
            v["question"] = json!(format!("{} (#{})", e.question, i / base.len()));
            v["agent_id"] = json!("agent-a");
            v["agent_version"] = json!(if i % 2 == 0 { "1" } else { "2" });
            v
        })
        .collect()
}

fn write_events(dir: &Path, events: &[Value]) -> std::path::PathBuf {
    let path = dir.join("events.jsonl");
    let text: String = events.iter().map(|e| format!("{e}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

fn base_config(dir: &Path, input: &Path, out: &str) -> Config {
    let mut config = Config::default();
    config.source.kind = sqlgrade::config::SourceKind::file(input);
    config.sink.kind = sqlgrade::config::SinkKind::jsonl(dir.join(out));
    config.rules.reload_interval_ms = 0;
    config.pipeline.workers = std::num::NonZeroUsize::new(2).unwrap();
    config
}

fn llm_config(dir: &Path, input: &Path, out: &str, server: &MockServer) -> Config {
    let mut config = base_config(dir, input, out);
    config.judge = JudgeConfig::from(LlmJudgeConfig {
        base_url: server.base_url(),
        model: "judge-test".into(),
        api_key_env: String::new(),
        max_retries: 0,
        timeout_ms: 10_000,
        ..LlmJudgeConfig::default()
    });
    config
}

/// The LLM judge's settings of a config made by [`llm_config`].
fn llm(config: &mut Config) -> &mut LlmJudgeConfig {
    config.judge.llm_mut().expect("an LLM judge")
}

async fn run(config: &Config) -> Summary {
    config.validate().unwrap();
    let daemon = sqlgrade::assembly::Daemon::build(config).await.unwrap();
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    daemon.run(shutdown).await.unwrap()
}

/// `(metric → event ids)` of a JSONL sink's output, and the rows of one metric.
fn rows(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("evaluations.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn ids(rows: &[Value], metric: &str) -> Vec<String> {
    rows.iter()
        .filter(|r| r["metric"] == metric)
        .map(|r| r["event_id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_line_rate_pass_keeps_its_pace_with_a_slow_judge() {
    let n = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let input = write_events(dir.path(), &events(n));

    // Deterministic only: the reference pace.
    let reference = run(&base_config(dir.path(), &input, "det")).await;
    assert_eq!(reference.events, n as u64);

    // The same events with an LLM judge answering in 1 s, 20 requests/s.
    let server = MockServer::start().await;
    let reply = stef_reply("incorrect", 0.9);
    server.respond_with(move |_| Scripted::json(&reply).after(Duration::from_secs(1)));
    let mut config = llm_config(dir.path(), &input, "llm", &server);
    let judge = llm(&mut config);
    judge.max_requests_per_second = 20.0;
    judge.max_concurrency = 32;
    judge.budget.uniform_rate = 0.05;
    judge.budget.drain_grace_ms = 3_000;
    let summary = run(&config).await;

    // Every event's line-rate row, at about the deterministic pace.
    let line = summary.line_rate_elapsed.unwrap();
    assert!(
        line.as_secs_f64() <= 1.5 * reference.elapsed.as_secs_f64() + 2.0,
        "line-rate pass {line:?} vs deterministic run {:?}",
        reference.elapsed
    );
    let out = rows(&dir.path().join("llm"));
    let stef: BTreeSet<String> = ids(&out, "stef").into_iter().collect();
    assert_eq!(stef.len(), n, "every event has exactly its line-rate row");
    assert_eq!(ids(&out, "stef").len(), n);

    // The judge worked within its quota; everything selected is judged or shed and counted.
    let pass = summary.judge_pass.clone().unwrap();
    let judged = ids(&out, "stef_judged");
    assert_eq!(judged.len() as u64, pass.judged + pass.failures);
    assert_eq!(pass.failures, 0);
    assert_eq!(
        pass.judged + pass.shed_total(),
        pass.selected,
        "selected = judged + shed: {pass:?}"
    );
    assert!(
        pass.selected_uniform >= 800 && pass.selected_uniform <= 1200,
        "{pass:?}"
    );
    assert!(
        pass.shed.get(&ShedReason::Shutdown).copied().unwrap_or(0) > 0,
        "far more was selected than 20 req/s can judge: the rest is reported at shutdown"
    );
    let requests = server.request_count() as u64;
    assert_eq!(
        requests,
        pass.judged - pass.cache_hits,
        "one request per judgment"
    );
    assert_eq!(pass.spent.requests, requests);
    // At most the quota (20/s) over the time the judge stage ran, with 3 requests of slack.
    let window = summary.elapsed.as_secs_f64();
    assert!(
        (requests as f64) <= 20.0 * window + 3.0,
        "{requests} requests in {window:.1} s"
    );
    // The limiter's guarantee is on send times (paced at 19.1/s, burst 1: ≤ 20 in any second);
    // the server sees arrival times, which a busy 2-core machine running this file's tests side
    // by side delays by up to a few hundred ms (CI once saw > 22 in one second). Over 5 s windows
    // that jitter is diluted: at most 5 × 19.1 + 2 ≈ 98 sends, plus 8 for up to 400 ms of
    // delivery jitter; an unpaced judge at 32 in flight and 1 s per answer would show 160.
    let busiest = server.max_in_window(Duration::from_secs(5));
    let busiest_second = server.max_in_window(Duration::from_secs(1));
    eprintln!("busiest windows at the server: {busiest_second} in 1 s, {busiest} in 5 s");
    assert!(busiest <= 106, "{busiest} requests in the busiest 5 s");
    // And it used the quota: at 1 s per answer and 32 in flight, 20/s are sustainable.
    assert!(
        requests as f64 >= 0.7 * 20.0 * (window - line.as_secs_f64()).max(1.0),
        "{requests} requests in {window:.1} s"
    );
    // Judged rows say why they were selected and what they revise.
    let first = out.iter().find(|r| r["metric"] == "stef_judged").unwrap();
    assert!(first["selection"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(first["revised_value"].is_number());
    assert_eq!(first["judge"], "llm:judge-test");
    let text = summary.render("slow judge");
    eprintln!("{text}");
    assert!(text.contains("LLM judge, second pass"), "{text}");
    assert!(text.contains("shutdown"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_census_backfill_judges_every_event_with_calls_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let data = sqlgrade_testkit::data::data_dir();
    let server = MockServer::start().await;
    let reply = stef_reply("correct", 0.9);
    server.respond_with(move |_| Scripted::json(&reply).after(Duration::from_millis(500)));
    let mut config = llm_config(dir.path(), Path::new("unused"), "out", &server);
    let judge = llm(&mut config);
    judge.max_requests_per_second = 100.0;
    judge.max_concurrency = 20;
    config.gold.metrics = vec![sqlgrade::evaluation::Metric::Ex];
    let request = sqlgrade::commands::backfill::BackfillRequest {
        input: data.join("bird/dev.jsonl"),
        format: sqlgrade::commands::backfill::BackfillFormat::Bird,
        predictions: Some(data.join("bird/predictions/DAIL-SQL.jsonl")),
        run_id: None,
        judge: sqlgrade::commands::backfill::PlanMode::Census,
    };
    sqlgrade::commands::backfill::apply_benchmark_gold_defaults(&request, &mut config);
    let plan = sqlgrade::commands::backfill::BackfillPlan::prepare(&request, &config).unwrap();
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let started = std::time::Instant::now();
    let summary = plan.run(&config, shutdown, None).await.unwrap();
    let took = started.elapsed();
    let out = rows(&dir.path().join("out"));
    let scorable = out
        .iter()
        .filter(|r| r["metric"] == "stef" && r["status"] == "ok")
        .count();
    let judged = ids(&out, "stef_judged");
    assert_eq!(judged.len(), scorable, "every scorable event is judged");
    assert_eq!(ids(&out, "stef").len(), 432);
    let pass = summary.judge_pass.unwrap();
    assert_eq!(pass.shed_total(), 0, "a census sheds nothing: {pass:?}");
    assert!(judged.iter().all(|id| !id.is_empty()));
    // 0.5 s per answer with 20 in flight: ~40 judgments/s, far above one at a time (2/s).
    let rate = judged.len() as f64 / took.as_secs_f64();
    assert!(rate >= 10.0, "{} judgments in {took:?}", judged.len());
    let census = out.iter().find(|r| r["metric"] == "stef_judged").unwrap();
    assert_eq!(census["selection"], "census");
    assert_eq!(census["inclusion_probability"], 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daily_caps_stop_llm_calls_and_cost_follows_the_servers_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_events(dir.path(), &events(300));
    let server = MockServer::start().await;
    let reply = stef_reply("likely_correct", 0.8);
    let content = reply.to_string();
    server.respond_with(move |_| Scripted::json(&reply));
    let mut config = llm_config(dir.path(), &input, "out", &server);
    let judge = llm(&mut config);
    judge.max_requests_per_second = 1000.0;
    judge.max_concurrency = 8;
    judge.budget.uniform_rate = 1.0;
    judge.budget.max_requests_per_day = 40;
    judge.budget.price_input_per_1k = 0.5;
    judge.budget.price_output_per_1k = 1.5;
    judge.budget.drain_grace_ms = 60_000;
    let summary = run(&config).await;
    let out = rows(&dir.path().join("out"));
    // Rows keep flowing: every event has its line-rate row.
    assert_eq!(ids(&out, "stef").len(), 300);
    // The LLM stopped at the cap.
    assert_eq!(server.request_count(), 40);
    let pass = summary.judge_pass.clone().unwrap();
    assert_eq!(pass.spent.requests, 40);
    assert_eq!(pass.judged, 40);
    assert_eq!(
        pass.shed.get(&ShedReason::DailyRequests).copied(),
        Some(pass.selected - 40)
    );
    assert_eq!(pass.left_today.0, Some(0));
    // Cost from the tokens the server reported (prompt = body bytes / 4, completion = reply
    // bytes / 4, rounded up), at the configured prices.
    let prompt: u64 = server
        .requests()
        .iter()
        .map(|r| r.raw.len().div_ceil(4) as u64)
        .sum();
    let completion = 40 * content.len().div_ceil(4) as u64;
    assert_eq!(pass.spent.prompt_tokens, prompt);
    assert_eq!(pass.spent.completion_tokens, completion);
    let cost = prompt as f64 / 1000.0 * 0.5 + completion as f64 / 1000.0 * 1.5;
    assert!(
        (pass.spent.cost - cost).abs() < 1e-9,
        "{} vs {cost}",
        pass.spent.cost
    );
    let text = summary.render("t");
    assert!(text.contains("daily_requests"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_hits_cost_no_budget() {
    // Two copies of every event under new ids: the second copy's verdicts are in the cache.
    let dir = tempfile::tempdir().unwrap();
    let base = events(50);
    let mut twice = base.clone();
    for (i, e) in base.iter().enumerate() {
        let mut copy = e.clone();
        copy["event_id"] = json!(format!("copy-{i}"));
        twice.push(copy);
    }
    let input = write_events(dir.path(), &twice);
    let server = MockServer::start().await;
    let reply = stef_reply("correct", 0.9);
    server.respond_with(move |_| Scripted::json(&reply));
    let mut config = llm_config(dir.path(), &input, "out", &server);
    let judge = llm(&mut config);
    judge.max_requests_per_second = 1000.0;
    judge.max_concurrency = 1;
    judge.budget.uniform_rate = 1.0;
    judge.budget.max_requests_per_day = 25;
    judge.budget.drain_grace_ms = 60_000;
    let summary = run(&config).await;
    let pass = summary.judge_pass.unwrap();
    // 25 requests paid for 25 originals; their copies were answered from the cache although
    // the request cap was reached by then; everything else hit the cap.
    assert_eq!(server.request_count(), 25);
    assert_eq!(pass.judged, 50, "{pass:?}");
    assert_eq!(pass.cache_hits, 25);
    assert_eq!(
        pass.shed.get(&ShedReason::DailyRequests).copied(),
        Some(pass.selected - 50)
    );
    let by_metric: BTreeMap<String, usize> =
        rows(&dir.path().join("out"))
            .iter()
            .fold(BTreeMap::new(), |mut m, r| {
                *m.entry(r["metric"].as_str().unwrap().to_string())
                    .or_default() += 1;
                m
            });
    assert_eq!(by_metric["stef_judged"], 50);
}

/// The second pass shows the judge what the query returned and the schema it touches: BIRD
/// events with the agent's `result` and `[stef] catalogues = tables.json`; every prompt the
/// scripted server receives carries both blocks (the tables the SQL reads, their described
/// columns), bounded, and the rows' token counts come from the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_judge_sees_the_result_and_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let data = sqlgrade_testkit::data::data_dir();
    let mut events: Vec<Value> = benchmark_events("bird", "SuperSQL")
        .into_iter()
        .take(6)
        .enumerate()
        .map(|(i, e)| {
            let mut v = serde_json::to_value(&e).unwrap();
            v["event_id"] = json!(format!("ev-{i}"));
            // BIRD's first dev questions are about toxicology: the catalogue's `db_id`.
            v["db_id"] = json!("toxicology");
            v
        })
        .collect();
    // A result far larger than the prompt may carry (under the 4 MiB event limit; decoding
    // keeps 100 rows of 256-byte cells, the prompt 10 rows of 16 cells of 120 bytes).
    let long = "x".repeat(600);
    for e in &mut events {
        e["result"] = json!({
            "columns": (0..30).map(|c| format!("col{c}")).collect::<Vec<_>>(),
            "rows": (0..150).map(|_| (0..30).map(|_| long.clone()).collect::<Vec<_>>()).collect::<Vec<_>>(),
            "row_count": 150,
        });
    }
    let input = write_events(dir.path(), &events);
    let server = MockServer::start().await;
    let reply = stef_reply("correct", 0.9);
    server.respond_with(move |_| Scripted::json(&reply));
    let mut config = llm_config(dir.path(), &input, "out", &server);
    let judge = llm(&mut config);
    judge.budget.uniform_rate = 1.0;
    judge.budget.drain_grace_ms = 30_000;
    config.stef.catalogues = vec![data.join("bird/tables.json")];
    run(&config).await;

    let out = rows(&dir.path().join("out"));
    assert_eq!(ids(&out, "stef_judged").len(), events.len());
    let requests = server.requests();
    assert_eq!(requests.len(), events.len());
    for request in &requests {
        let user = request.message(1).expect("a user message");
        assert!(user.contains("<data name=\"query_result\">"), "{user}");
        assert!(user.contains("<data name=\"schema\">"), "{user}");
        assert!(user.contains("\"row_count\":150") && user.contains("\"truncated\":true"));
        // Ten rows of sixteen clipped cells, not 150 × 30 × 600 bytes.
        assert!(user.len() < 40_000, "{} bytes", user.len());
    }
    // The tables the SQL reads are shown with their described columns (toxicology's first
    // questions read `bond`, `atom`, `molecule`).
    let all: String = requests.iter().filter_map(|r| r.message(1)).collect();
    assert!(all.contains("\"read_by_sql\":true"), "{all}");
    assert!(
        ["bond", "atom", "molecule"]
            .iter()
            .any(|t| all.contains(&format!("\"name\":\"{t}\"")))
    );
    let judged = out.iter().find(|r| r["metric"] == "stef_judged").unwrap();
    assert!(
        judged["prompt_tokens"].as_u64().unwrap_or(0) > 0,
        "{judged}"
    );
}

/// A judge that cannot be reached is a paused judge, not failed work: while the server answers
/// 503 the judgments go back in the queue (no `judge_error` row), the stage pauses after a few
/// failures in a row and probes, and once the server answers again every selected event is
/// judged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_judge_pauses_the_stage_and_loses_no_judgment() {
    let n = 200;
    let dir = tempfile::tempdir().unwrap();
    let input = write_events(dir.path(), &events(n));
    let server = MockServer::start().await;
    let reply = stef_reply("likely_correct", 0.8);
    // Down for 2.5 s from the first request on (whenever the machine gets there).
    let outage = Duration::from_millis(2_500);
    let first = std::sync::OnceLock::new();
    server.respond_with(move |_| {
        if first.get_or_init(std::time::Instant::now).elapsed() < outage {
            Scripted::status(503)
        } else {
            Scripted::json(&reply)
        }
    });
    let mut config = llm_config(dir.path(), &input, "llm", &server);
    let judge = llm(&mut config);
    judge.max_requests_per_second = 200.0;
    judge.max_concurrency = 8;
    judge.budget.uniform_rate = 0.25;
    // Time to wait the outage out after the file ends (the drain grace is capped at a third
    // of the shutdown limit).
    config.pipeline.shutdown_timeout_ms = 90_000;
    llm(&mut config).budget.drain_grace_ms = 30_000;
    let summary = run(&config).await;
    let pass = summary.judge_pass.clone().unwrap();
    let out = rows(&dir.path().join("llm"));
    let judged: Vec<&Value> = out
        .iter()
        .filter(|r| r["metric"] == "stef_judged")
        .collect();
    assert_eq!(pass.failures, 0, "{pass:?}");
    assert!(
        judged.iter().all(|r| r["status"] == "ok"),
        "a judge_error row"
    );
    assert!(pass.selected > 20, "{pass:?}");
    assert_eq!(
        pass.judged, pass.selected,
        "every selected event judged: {pass:?}"
    );
    assert_eq!(judged.len() as u64, pass.selected);
    assert!(pass.put_back > 0 && pass.paused > 0, "{pass:?}");
    // The stage paused instead of sending the put-back judgments again and again: the outage
    // cost the judgments in flight when it began and a probe per pause, not hundreds of 503s.
    let requests = server.request_count() as u64;
    assert!(
        requests <= pass.selected + 30,
        "{requests} requests for {pass:?}"
    );
    let text = summary.render("outage");
    eprintln!("{text}");
    assert!(text.contains("judge paused"), "{text}");
}
