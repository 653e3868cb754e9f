//! The durable judge cache on a real ClickHouse (Debian's 18.16 here) with the scripted
//! OpenAI-compatible server: the LLM client consults its in-memory cache, then `judge_cache`,
//! then the LLM, and writes verdicts back.
//!
//! - process A (`sqlgrade run`, JSONL sink, `judge.durable_cache = "clickhouse"`, every event in
//!   the second pass's uniform slice) judges N real benchmark events: N LLM calls, N entries in
//!   `judge_cache`;
//! - process B (`sqlgrade run`, ClickHouse sink, `durable_cache` left at `auto`), a fresh
//!   process with an empty in-memory cache, scores the same events: 0 LLM calls, the same
//!   verdicts, every row `judge_cached`, the summary counts N durable hits;
//! - FLEX (an LLM-judged gold metric on `LlmClient::call_structured`, computed by the same
//!   daemons for the events that carry gold SQL) goes through the same levels;
//! - ClickHouse stopped: process C scores through the LLM, no error rows, exit 0.

mod support;

use sqlgrade_testkit::servers;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use servers::ClickHouse;
use sqlgrade::config::ClickHouseConfig;
use sqlgrade::event::Event;
use sqlgrade::stores::clickhouse::migrate::migrate;
use support::openai_mock::{MockServer, Scripted};
use support::{distinct_events, stef_reply};

/// Events without gold data (STEF only).
const EVENTS: usize = 40;
/// Events with gold SQL on BIRD's superhero database (STEF + FLEX).
const GOLD_EVENTS: usize = 2;
const VERDICTS: [&str; 4] = [
    "correct",
    "likely_correct",
    "potentially_incorrect",
    "incorrect",
];

/// Answers every request, varying the verdict with the arrival order, so that identical
/// verdicts in a later process can only come from a cache (a fresh LLM call would differ).
fn varying_replies(server: &MockServer) -> Arc<AtomicUsize> {
    let counter = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&counter);
    server.respond_with(move |request| {
        let k = seen.fetch_add(1, Ordering::SeqCst);
        let schema = request.body()["response_format"]["json_schema"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if schema == "stef_assessment" {
            let confidence = 0.5 + (k % 50) as f64 / 100.0;
            Scripted::json(&stef_reply(VERDICTS[k % 4], confidence))
        } else {
            Scripted::json(
                &json!({"reasoning": format!("scripted #{k}"), "correct": k.is_multiple_of(2)}),
            )
        }
    });
    counter
}

struct Setup {
    dir: tempfile::TempDir,
    events: PathBuf,
    mock_url: String,
    clickhouse_url: String,
}

impl Setup {
    /// A daemon config: file source over the events, the LLM judge on the mock server.
    fn config(&self, name: &str, sink: &str, durable_cache: Option<&str>) -> PathBuf {
        let sink_section = match sink {
            "clickhouse" => format!(
                "kind = \"clickhouse\"\nbatch_rows = 100\nflush_interval_ms = 100\n\n[clickhouse]\nurl = \"{}\"\ndatabase = \"sqlgrade\"\nretry_initial_ms = 100\nretry_max_ms = 500",
                self.clickhouse_url
            ),
            _ => format!(
                "kind = \"jsonl\"\ndir = \"{}\"\n\n[clickhouse]\nurl = \"{}\"\ndatabase = \"sqlgrade\"",
                self.dir.path().join(name).display(),
                self.clickhouse_url
            ),
        };
        let durable = durable_cache
            .map(|mode| format!("durable_cache = \"{mode}\"\ndurable_cache_timeout_ms = 2000\n"))
            .unwrap_or_default();
        let text = format!(
            r#"[source]
kind = "file"
path = "{events}"

[sink]
{sink_section}

[judge]
kind = "llm"
base_url = "{mock}"
model = "judge-test"
api_key_env = ""
max_requests_per_second = 1000.0
max_concurrency = 16
timeout_ms = 5000
max_retries = 1
{durable}
[judge.budget]
uniform_rate = 1.0
drain_grace_ms = 120000

[gold]
databases = "{databases}"
metrics = ["flex"]

[rules]
dir = "{rules}"
reload_interval_ms = 0

[pipeline]
workers = 8
"#,
            events = self.events.display(),
            mock = self.mock_url,
            rules = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("rules")
                .display(),
            databases = sqlgrade_testkit::data::data_dir()
                .join("bird/databases")
                .display(),
        );
        let path = self.dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// `sqlgrade run --config FILE` to completion: (exit code, stdout, stderr).
fn run(config: &Path) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sqlgrade"))
        .args(["run", "--config"])
        .arg(config)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        servers::strip_ansi(&String::from_utf8_lossy(&out.stderr)),
    )
}

/// The LLM client's numbers in the run summary: (calls requested, cache hits, durable hits,
/// LLM calls).
fn llm_usage(stdout: &str) -> (u64, u64, u64, u64) {
    let numbers = |label: &str| -> Vec<u64> {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no {label:?} line in the summary:\n{stdout}"));
        line.split_whitespace()
            .filter_map(|w| w.parse::<u64>().ok())
            .collect()
    };
    // "calls requested N  cache hits H (p%)  durable hits D  failures F"
    let requested = numbers("calls requested");
    // "LLM calls C  HTTP requests …"
    let calls = numbers("LLM calls");
    (requested[0], requested[1], requested[2], calls[0])
}

/// Rows of one metric in a JSONL sink directory, by event id.
fn jsonl_rows(dir: &Path, metric: &str) -> BTreeMap<String, Value> {
    std::fs::read_to_string(dir.join("evaluations.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["metric"] == metric)
        .map(|r| (r["event_id"].as_str().unwrap().to_string(), r))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verdicts_survive_the_process_through_clickhouse_and_an_outage_falls_back_to_the_llm() {
    let dir = tempfile::tempdir().unwrap();
    let mut ch = match ClickHouse::start_in(dir.path()) {
        Ok(ch) => ch,
        Err(e) => return servers::skip("judge_cache_clickhouse", &e),
    };
    let settings = ClickHouseConfig {
        url: Some(ch.url()),
        database: "sqlgrade".into(),
        ..ClickHouseConfig::default()
    };
    migrate(&settings, None).await.unwrap();

    let server = MockServer::start().await;
    let _replies = varying_replies(&server);
    let events_path = dir.path().join("events.jsonl");
    let mut events = distinct_events(EVENTS);
    events.extend(gold_events());
    let text: String = events
        .iter()
        .map(|e| serde_json::to_string(e).unwrap() + "\n")
        .collect();
    std::fs::write(&events_path, text).unwrap();
    let setup = Setup {
        dir,
        events: events_path,
        mock_url: server.base_url(),
        clickhouse_url: ch.url(),
    };
    let all = (EVENTS + GOLD_EVENTS) as u64;

    // Process A: every verdict comes from the LLM and is written back to judge_cache.
    let (code, stdout, stderr) = run(&setup.config("a", "jsonl", Some("clickhouse")));
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("durable judge cache: ClickHouse judge_cache"));
    let rows_a = jsonl_rows(&setup.dir.path().join("a"), "stef_judged");
    let flex_a = jsonl_rows(&setup.dir.path().join("a"), "flex");
    assert_eq!(rows_a.len() as u64, all);
    assert_eq!(flex_a.len(), GOLD_EVENTS);
    // FLEX calls made (the rest avoided by deterministic evidence).
    let flex_calls = flex_a
        .values()
        .filter(|r| r["details"].get("avoided").is_none())
        .count() as u64;
    assert!(flex_calls >= 1, "no FLEX call to cache: {flex_a:?}");
    let requests = all + flex_calls;
    assert_eq!(server.request_count() as u64, requests, "{stderr}");
    let (requested, hits, durable, llm_calls) = llm_usage(&stdout);
    assert_eq!(
        (requested, hits, durable, llm_calls),
        (requests, 0, 0, requests),
        "{stdout}"
    );
    assert_eq!(
        ch.count("SELECT count() FROM sqlgrade.judge_cache FINAL"),
        requests
    );
    let distinct_verdicts: std::collections::BTreeSet<&str> = rows_a
        .values()
        .map(|r| r["semantic_verdict"].as_str().unwrap())
        .collect();
    assert_eq!(distinct_verdicts.len(), 4, "the replies vary");
    for r in rows_a.values() {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["judge"], "llm:judge-test");
        assert_eq!(r["judge_cached"], false);
    }

    // Process B: empty in-memory cache, durable cache found through `auto` + ClickHouse sink.
    let (code, stdout, stderr) = run(&setup.config("b", "clickhouse", None));
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        server.request_count() as u64,
        requests,
        "B made LLM calls:\n{stderr}"
    );
    let (requested, hits, durable, llm_calls) = llm_usage(&stdout);
    assert_eq!(
        (requested, hits, durable, llm_calls),
        (requests, requests, requests, 0),
        "{stdout}"
    );
    let stored = ch.query(
        "SELECT event_id, semantic_verdict, confidence, value, judge_cached, status \
         FROM sqlgrade.evaluations FINAL WHERE metric = 'stef_judged' ORDER BY event_id",
    );
    let mut compared = 0;
    for line in stored.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let a = &rows_a[f[0]];
        assert_eq!(f[1], a["semantic_verdict"].as_str().unwrap(), "{line}");
        assert!(
            (f[2].parse::<f64>().unwrap() - a["confidence"].as_f64().unwrap()).abs() < 1e-9,
            "{line} vs {a}"
        );
        assert!(
            (f[3].parse::<f64>().unwrap() - a["value"].as_f64().unwrap()).abs() < 1e-6,
            "{line} vs {a}"
        );
        assert_eq!(f[4], "1", "B's verdicts are cached: {line}");
        assert_eq!(f[5], "ok");
        compared += 1;
    }
    assert_eq!(compared as u64, all);
    let flex_b = ch.query(
        "SELECT event_id, verdict, value, status FROM sqlgrade.evaluations FINAL \
         WHERE metric = 'flex' ORDER BY event_id",
    );
    assert_eq!(flex_b.lines().count(), GOLD_EVENTS, "{flex_b}");
    for line in flex_b.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let a = &flex_a[f[0]];
        let verdict_a = match a["verdict"].as_bool() {
            Some(true) => "1",
            Some(false) => "0",
            None => "\\N",
        };
        assert_eq!(
            (f[1], f[3]),
            (verdict_a, a["status"].as_str().unwrap()),
            "{line} vs {a}"
        );
        assert!(
            (f[2].parse::<f64>().unwrap() - a["value"].as_f64().unwrap()).abs() < 1e-9,
            "{line} vs {a}"
        );
    }

    // ClickHouse stopped: a fresh process scores everything through the LLM, no error rows.
    ch.stop();
    let (code, stdout, stderr) = run(&setup.config("c", "jsonl", Some("clickhouse")));
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_eq!(server.request_count() as u64, 2 * requests);
    let (_, hits, durable, llm_calls) = llm_usage(&stdout);
    assert_eq!((hits, durable, llm_calls), (0, 0, requests), "{stdout}");
    assert!(
        stderr.contains("durable judge cache (ClickHouse judge_cache) unavailable"),
        "{stderr}"
    );
    let rows_c = jsonl_rows(&setup.dir.path().join("c"), "stef_judged");
    assert_eq!(rows_c.len() as u64, all);
    for r in rows_c.values() {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["judge"], "llm:judge-test");
    }
    for r in jsonl_rows(&setup.dir.path().join("c"), "flex").values() {
        assert_eq!(r["status"], "ok", "{r}");
    }
    let dead =
        std::fs::read_to_string(setup.dir.path().join("c/dead_letters.jsonl")).unwrap_or_default();
    assert!(dead.trim().is_empty(), "{dead}");
}

/// Events with gold SQL on BIRD's superhero database whose predictions execute and are not
/// ESM+-equivalent to the gold, so FLEX asks its judge (EQ and NEQ branch).
fn gold_events() -> Vec<Event> {
    let gold = "SELECT full_name, superhero_name FROM superhero WHERE full_name LIKE 'Charles%'";
    [
        "SELECT T1.full_name, T1.superhero_name FROM superhero AS T1 WHERE T1.full_name LIKE 'Charles%' AND T1.id > 0",
        "SELECT superhero_name, full_name, id FROM superhero WHERE full_name LIKE 'Charles%'",
    ]
    .iter()
    .enumerate()
    .map(|(i, pred)| {
        Event::from_value(json!({
            "event_id": format!("flex-{i}"),
            "question": "Which superheroes have a full name starting with Charles?",
            "sql": pred,
            "dialect": "sqlite",
            "gold": {"sql": gold, "db_id": "superhero", "evidence": "full name refers to full_name"}
        }))
        .unwrap()
    })
    .collect()
}
