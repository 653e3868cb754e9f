//! Cost benchmark of the LLM-judged gold metrics (FLEX, ROSE, Hybrid-EX) on BIRD dev with a
//! scripted judge, through the real wiring: `[gold] metrics` with all six gold metrics, a
//! `[gold.judge]` pointing at the scripted server, `BackfillPlan` → pipeline → scorer → the
//! gold adapter (one execution per event on the blocking pool, ESM+ as avoidance evidence).
//!
//! Reports, from the run summary's LLM usage: judge calls per event per metric with and without
//! judge-call avoidance, the FLEX error-category option's extra calls, and the cache hit rate
//! when the same predictions are backfilled a second time through the same scorer.
//!
//! `cargo bench --bench llm_cost` runs all 432 BIRD-dev questions (env `LLM_COST_EVENTS` to
//! change; `LLM_COST_SYSTEM`, default SuperSQL). Under `cargo test --all-targets` (no `--bench`)
//! it runs the first 40 questions. The scripted judge answers deterministically from a hash of
//! the prompt, so the routes taken (e.g. ROSE's Prover rejections) are a fixed mix. Every
//! assertion is about counts, never time.

use sqlgrade_testkit::openai_mock;

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use openai_mock::{MockServer, Recorded, Scripted};
use serde_json::json;
use sqlgrade::assembly::build_scorer;
use sqlgrade::commands::backfill::{BackfillFormat, BackfillPlan, BackfillRequest};
use sqlgrade::config::{Config, LlmJudgeConfig, SinkKind};
use sqlgrade::evaluation::Metric;
use sqlgrade::metrics::avoid::MetricCalls;
use sqlgrade::score::Scorer;
use sqlgrade::telemetry::summary::Summary;

/// ROSE's paper: ≈1.45 judge calls per question.
const ROSE_PAPER_CALLS_PER_QUESTION: f64 = 1.45;

fn hash(s: &str) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// The scripted judge: a valid reply for each prompt, chosen from a hash of the user message.
fn reply(req: &Recorded) -> Scripted {
    let sys = req.message(0).unwrap_or_default();
    let user = req.message(1).unwrap_or_default();
    let h = hash(&user);
    let v = if sys.contains("You are the SQL Prover") {
        json!({"expected_answer": "a", "sql_description": "b", "reason": "c",
            "verdict": h % 5 < 3, "evidence": null})
    } else if sys.contains("Adversarial Refuter") {
        json!({"judgement": "j", "verdict": h.is_multiple_of(5), "ambiguity": "na",
            "gold_correct": !h.is_multiple_of(7)})
    } else if sys.contains("data-comparison analyst") {
        json!({"matching_category": "partial", "llm_judge_score": 0.5, "column_rename_dict": {},
            "trivial_columns": [], "index_columns": [], "order_columns": [], "common_columns": [],
            "unique_columns": {"gold": [], "pred": []}, "numeric_columns": [], "date_columns": [],
            "exact_match_columns": [], "recommended_tolerance": null, "reasoning": "r"})
    } else if sys.contains("categorise why") {
        let flag = |bit: u64| json!({"issued": h & (1 << bit) != 0, "explanation": "e"});
        json!({"incorrect_schema_linking": flag(0), "incorrect_filtering_condition": flag(1),
            "missing_handling_of_nullable_column": flag(2),
            "missing_handling_of_multiple_rows": flag(3), "abused_clauses": flag(4),
            "other_fatal_issues": flag(5)})
    } else {
        json!({"reasoning": "r", "correct": !h.is_multiple_of(3)})
    };
    Scripted::json(&v)
}

/// The first `n` questions of BIRD dev, as a dataset file of their own.
fn dataset_subset(dir: &Path, n: usize) -> PathBuf {
    let full = std::fs::read_to_string(sqlgrade_testkit::data::data_dir().join("bird/dev.jsonl"))
        .expect("BIRD dev.jsonl");
    let lines: Vec<&str> = full.lines().filter(|l| !l.trim().is_empty()).collect();
    let path = dir.join("dev.jsonl");
    std::fs::write(&path, lines[..n.min(lines.len())].join("\n")).expect("write subset");
    path
}

fn config(server: &MockServer, out: &Path, avoidance: bool, categories: bool) -> Config {
    let bird = sqlgrade_testkit::data::data_dir().join("bird");
    let mut config = Config::default();
    config.sink.kind = SinkKind::jsonl(out.to_path_buf());
    config.rules.dir = out.join("no-rules");
    config.rules.reload_interval_ms = 0;
    config.pipeline.workers = std::num::NonZeroUsize::new(16).unwrap();
    config.gold.databases = Some(bird.join("databases"));
    config.gold.tables = vec![bird.join("tables.json")];
    config.gold.metrics = sqlgrade::evaluation::Metric::gold().collect();
    config.gold.avoidance = avoidance;
    config.gold.flex_error_categories = categories;
    config.gold.judge = Some(LlmJudgeConfig {
        base_url: server.base_url(),
        model: "bench-judge".into(),
        api_key_env: String::new(),
        max_requests_per_second: 10_000.0,
        max_concurrency: 32,
        ..LlmJudgeConfig::default()
    });
    config
}

async fn backfill(
    config: &Config,
    scorer: &Arc<Scorer>,
    input: &Path,
    predictions: &Path,
) -> Summary {
    let request = BackfillRequest {
        input: input.to_path_buf(),
        format: BackfillFormat::Bird,
        predictions: Some(predictions.to_path_buf()),
        run_id: None,
        judge: sqlgrade::commands::backfill::PlanMode::Census,
    };
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    BackfillPlan::prepare(&request, config)
        .expect("backfill plan")
        .run_with_scorer(config, Arc::clone(scorer), shutdown, None)
        .await
        .expect("backfill")
}

/// The judged metrics' agreement with the official evaluator's EX verdicts (the labels
/// `backfill --labels` would take), and the tokens per 1,000 events — what `sqlgrade backfill
/// --labels` prints, here for a scripted judge whose verdicts come from a hash of the prompt (so
/// κ measures nothing about a model; the command and its arithmetic are what runs).
fn agreement_with_reference_ex(system: &str, out: &Path) {
    let reference =
        sqlgrade_testkit::data::data_dir().join(format!("bird/reference/ex_{system}.jsonl"));
    let Ok(text) = std::fs::read_to_string(&reference) else {
        println!("no reference EX verdicts for {system}: agreement not measured");
        return;
    };
    let labels: Vec<sqlgrade::commands::calibrate::Label> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| sqlgrade::commands::calibrate::Label {
            event_id: None,
            question_id: Some(v["question_id"].to_string()),
            label: v["ex"] == 1,
            reviewer: None,
        })
        .collect();
    let rows =
        sqlgrade::commands::calibrate::read_rows(&out.join("evaluations.jsonl")).expect("rows");
    for metric in [Metric::Flex, Metric::Rose, Metric::HybridEx] {
        let r = sqlgrade::commands::calibrate::calibrate(&labels, &rows, metric, None, None);
        let (klo, khi) = r.kappa_interval.unwrap_or((f64::NAN, f64::NAN));
        let (alo, ahi) = r.accuracy_interval.unwrap_or((f64::NAN, f64::NAN));
        println!(
            "agreement with reference EX  {:<10} n {:>4}  kappa {:.3} [{klo:.3}, {khi:.3}]  accuracy {:.3} [{alo:.3}, {ahi:.3}]  tokens per 1,000 events {:.0}",
            metric.as_str(),
            r.matched,
            r.kappa.unwrap_or(f64::NAN),
            r.accuracy.unwrap_or(f64::NAN),
            r.spend.tokens_per_1k_events.unwrap_or(0.0),
        );
    }
}

fn per_event(c: &MetricCalls) -> f64 {
    c.llm_calls as f64 / c.events.max(1) as f64
}

fn print(label: &str, judged: &BTreeMap<Metric, MetricCalls>) {
    for (m, c) in judged {
        let avoided: u64 = c.avoided.values().sum();
        println!(
            "{label:<34} {:<10} events {:>4}  judge calls {:>5}  per event {:.3}  cache hits {:>5}  avoided {:>4} {:?}",
            m.as_str(),
            c.events,
            c.llm_calls,
            per_event(c),
            c.cache_hits,
            avoided,
            c.avoided,
        );
    }
}

fn main() {
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let n: usize = std::env::var("LLM_COST_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if bench_mode { 432 } else { 40 });
    let system = std::env::var("LLM_COST_SYSTEM").unwrap_or_else(|_| "SuperSQL".into());
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dataset_subset(dir.path(), n);
    let predictions =
        sqlgrade_testkit::data::data_dir().join(format!("bird/predictions/{system}.jsonl"));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let server = MockServer::start().await;
        server.respond_with(reply);
        let mut summaries = BTreeMap::new();
        for (label, avoidance, categories) in [
            ("without avoidance", false, false),
            ("with avoidance", true, false),
            ("with avoidance + FLEX categories", true, true),
        ] {
            let out = dir.path().join(label.replace(' ', "-"));
            let config = config(&server, &out, avoidance, categories);
            let scorer = Arc::new(build_scorer(&config).expect("scorer"));
            let http_before = server.request_count();
            let started = Instant::now();
            let first = backfill(&config, &scorer, &input, &predictions).await;
            let http_first = server.request_count() - http_before;
            println!(
                "{label}: {} events, {} rows, {http_first} HTTP requests, {:.1} s",
                first.events,
                first.rows,
                started.elapsed().as_secs_f64()
            );
            print(label, &first.llm.judged);
            if label == "with avoidance" {
                agreement_with_reference_ex(&system, &out);
                // The same predictions again through the same scorer: everything from the cache.
                let second = backfill(&config, &scorer, &input, &predictions).await;
                let http_second = server.request_count() - http_before - http_first;
                print("second backfill (same scorer)", &second.llm.judged);
                println!("HTTP requests: first backfill {http_first}, second backfill {http_second}");
                assert_eq!(http_second, 0, "the second backfill must not reach the LLM");
                for (m, c) in &second.llm.judged {
                    assert_eq!(
                        c.cache_hits, c.llm_calls,
                        "{m}: every judge call of the second backfill is a cache hit"
                    );
                    assert_eq!(c.llm_calls, first.llm.judged[m].llm_calls, "{m}: same calls");
                }
                print!("{}", second.render("second backfill summary"));
            }
            summaries.insert(label, first);
        }
        let without = &summaries["without avoidance"].llm.judged;
        let with = &summaries["with avoidance"].llm.judged;
        let categories = &summaries["with avoidance + FLEX categories"].llm.judged;
        for m in [Metric::Flex, Metric::Rose, Metric::HybridEx] {
            assert_eq!(with[&m].events as usize, n.min(432), "{m}: one judged row per event");
            assert!(
                with[&m].llm_calls <= without[&m].llm_calls,
                "{m}: avoidance never adds calls"
            );
            assert!(
                with[&m].avoided.values().sum::<u64>() > 0,
                "{m}: deterministic evidence decides some BIRD events"
            );
        }
        let rose = per_event(&with[&Metric::Rose]);
        assert!(
            rose < ROSE_PAPER_CALLS_PER_QUESTION,
            "ROSE with avoidance: {rose:.3} calls per event, paper ≈1.45"
        );
        assert!(
            categories[&Metric::Flex].llm_calls > with[&Metric::Flex].llm_calls,
            "the error-category call is made for incorrect FLEX verdicts"
        );
        println!(
            "calls per event with avoidance: FLEX {:.3}, ROSE {:.3} (paper ≈{ROSE_PAPER_CALLS_PER_QUESTION}), Hybrid-EX {:.3}; FLEX with categories {:.3}",
            per_event(&with[&Metric::Flex]),
            rose,
            per_event(&with[&Metric::HybridEx]),
            per_event(&categories[&Metric::Flex]),
        );
    });
}
