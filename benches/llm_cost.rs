//! Cost benchmark of the LLM-judged gold metrics (FLEX, ROSE, Hybrid-EX) on BIRD dev with a
//! scripted judge: LLM calls per event per metric with and without judge-call avoidance, and
//! the cache hit rate when the same predictions are backfilled a second time.
//!
//! `cargo bench --bench llm_cost` (env `LLM_COST_EVENTS`, default 300; `LLM_COST_SYSTEM`,
//! default SuperSQL). The scripted judge answers deterministically from a hash of the prompt,
//! so the routes taken (e.g. ROSE's Prover rejections) are a fixed, realistic mix.

#[path = "../tests/support/openai_mock.rs"]
mod openai_mock;

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::BufRead;
use std::sync::Arc;

use openai_mock::{MockServer, Recorded, Scripted};
use serde_json::{Value, json};
use sqlgrade::evaluation::Metric;
use sqlgrade::event::Event;
use sqlgrade::exec::{ExecLimits, SqliteExecutor};
use sqlgrade::judge::llm::{LlmClient, LlmConfig};
use sqlgrade::metrics::avoid::MetricCalls;
use sqlgrade::metrics::gold::{GoldOptions, GoldScorer};
use sqlgrade::metrics::judged::{JudgedOptions, JudgedScorer};

fn read_jsonl(path: &std::path::Path) -> Vec<Value> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::io::BufReader::new(f)
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect()
}

fn events(system: &str, n: usize) -> Vec<Event> {
    let data = sqlgrade::testdata::data_dir().join("bird");
    let questions: HashMap<i64, Value> = read_jsonl(&data.join("dev.jsonl"))
        .into_iter()
        .map(|q| (q["question_id"].as_i64().unwrap(), q))
        .collect();
    read_jsonl(&data.join(format!("predictions/{system}.jsonl")))
        .into_iter()
        .filter_map(|p| {
            let id = p["question_id"].as_i64()?;
            let q = questions.get(&id)?;
            Event::from_value(json!({
                "event_id": format!("bird-{system}-{id}"), "question": q["question"],
                "sql": p["predicted_sql"],
                "gold": {"sql": q["gold_sql"], "db_id": q["db_id"], "evidence": q["evidence"]}
            }))
            .ok()
        })
        .take(n)
        .collect()
}

fn hash(s: &str) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

fn reply(req: &Recorded) -> Scripted {
    let sys = req.message(0).unwrap_or_default();
    let user = req.message(1).unwrap_or_default();
    let h = hash(&user);
    let v = if sys.contains("You are the SQL Prover") {
        json!({"expected_answer": "a", "sql_description": "b", "reason": "c",
            "verdict": h % 5 < 3, "evidence": null})
    } else if sys.contains("Adversarial Refuter") {
        json!({"judgement": "j", "verdict": h.is_multiple_of(5), "ambiguity": "na", "gold_correct": !h.is_multiple_of(7)})
    } else if sys.contains("data-comparison analyst") {
        json!({"matching_category": "partial", "llm_judge_score": 0.5, "column_rename_dict": {},
            "trivial_columns": [], "index_columns": [], "order_columns": [], "common_columns": [],
            "unique_columns": {"gold": [], "pred": []}, "numeric_columns": [], "date_columns": [],
            "exact_match_columns": [], "recommended_tolerance": null, "reasoning": "r"})
    } else {
        json!({"reasoning": "r", "correct": !h.is_multiple_of(3)})
    };
    Scripted::json(&v)
}

fn client(server: &MockServer) -> Arc<LlmClient> {
    let cfg = LlmConfig {
        base_url: server.base_url(),
        model: "bench-judge".into(),
        max_requests_per_second: 0.0,
        max_concurrency: 32,
        ..LlmConfig::default()
    };
    Arc::new(LlmClient::new(cfg).unwrap())
}

async fn backfill(
    scorer: &JudgedScorer,
    events: &[Event],
    esm_plus: &[Option<bool>],
    exec: &SqliteExecutor,
) {
    for (e, esm) in events.iter().zip(esm_plus) {
        scorer.score_at(e, exec, *esm, "2026-01-01T00:00:00Z").await;
    }
}

fn print(label: &str, snap: &BTreeMap<Metric, MetricCalls>, n: usize) {
    for (m, c) in snap {
        let avoided: u64 = c.avoided.values().sum();
        println!(
            "{label:<22} {:<10} events {:>4}  llm calls {:>5}  per event {:.3}  avoided {:>4} {:?}  cache hits {:>5} ({:.1}%)",
            m.as_str(),
            c.events,
            c.llm_calls,
            c.llm_calls as f64 / n as f64,
            avoided,
            c.avoided,
            c.cache_hits,
            if c.llm_calls == 0 {
                0.0
            } else {
                100.0 * c.cache_hits as f64 / c.llm_calls as f64
            }
        );
    }
}

fn main() {
    let n: usize = std::env::var("LLM_COST_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let system = std::env::var("LLM_COST_SYSTEM").unwrap_or_else(|_| "SuperSQL".into());
    let data = sqlgrade::testdata::data_dir().join("bird");
    let exec = SqliteExecutor::new(data.join("databases"), ExecLimits::default());
    let events = events(&system, n);
    let gold =
        GoldScorer::load(&[&data.join("tables.json")], Some(&data.join("databases"))).unwrap();
    let opts = GoldOptions {
        ex: false,
        esm: false,
        ..GoldOptions::default()
    };
    let esm_plus: Vec<Option<bool>> = events
        .iter()
        .map(|e| {
            gold.score_at(e, &exec, &opts, "t")
                .first()
                .and_then(|r| r.verdict)
        })
        .collect();
    let n = events.len();
    println!(
        "BIRD dev, {system}, {n} events; ESM+-equivalent: {}",
        esm_plus.iter().filter(|v| **v == Some(true)).count()
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let server = MockServer::start().await;
        server.respond_with(reply);
        let off = JudgedScorer::new(client(&server), JudgedOptions { avoidance: false, ..JudgedOptions::default() });
        backfill(&off, &events, &esm_plus, &exec).await;
        print("without avoidance", &off.counter().snapshot(), n);
        let before = server.request_count();
        let on = JudgedScorer::new(client(&server), JudgedOptions::default());
        backfill(&on, &events, &esm_plus, &exec).await;
        print("with avoidance", &on.counter().snapshot(), n);
        let first = on.counter().snapshot();
        let http_first = server.request_count() - before;
        backfill(&on, &events, &esm_plus, &exec).await;
        let http_second = server.request_count() - before - http_first;
        let second = on.counter().snapshot();
        for (m, c) in &second {
            let f = &first[m];
            let calls = c.llm_calls - f.llm_calls;
            let hits = c.cache_hits - f.cache_hits;
            println!("second backfill        {:<10} llm calls {:>5}  cache hits {:>5} ({:.1}%)",
                m.as_str(), calls, hits, if calls == 0 { 100.0 } else { 100.0 * hits as f64 / calls as f64 });
        }
        println!("HTTP requests: first backfill with avoidance {http_first}, second backfill {http_second}");
    });
}
