//! The durable judge cache on a real ClickHouse (Debian's 18.16 here) with the scripted
//! OpenAI-compatible server: the LLM client consults its in-memory cache, then `judge_cache`,
//! then the LLM, and writes verdicts back.
//!
//! - process A (`sqlgrade run`, JSONL sink, `judge.durable_cache = "clickhouse"`) scores N real
//!   benchmark events: N LLM calls, N entries in `judge_cache`;
//! - process B (`sqlgrade run`, ClickHouse sink, `durable_cache` left at `auto`), a fresh
//!   process with an empty in-memory cache, scores the same events: 0 LLM calls, the same
//!   verdicts, every row `judge_cached`, the summary counts N durable hits;
//! - FLEX (an LLM-judged gold metric on `LlmClient::call_structured`) goes through the same
//!   levels when its client comes from `build_llm_client`;
//! - ClickHouse stopped: process C scores through the LLM, no error rows, exit 0.

mod support;

#[path = "support/servers.rs"]
mod servers;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use servers::ClickHouse;
use sqlgrade::config::Config;
use sqlgrade::evaluation::Metric;
use sqlgrade::event::Event;
use sqlgrade::exec::{ExecLimits, SqliteExecutor};
use sqlgrade::metrics::judged::{JudgedOptions, JudgedScorer};
use sqlgrade::migrate::migrate;
use sqlgrade::pipeline::build::build_llm_client;
use sqlgrade::sink::clickhouse::ClickHouseSettings;
use support::openai_mock::{MockServer, Scripted};
use support::{distinct_events, stef_reply};

const EVENTS: usize = 40;
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
                "kind = \"clickhouse\"\nurl = \"{}\"\ndatabase = \"sqlgrade\"\nbatch_rows = 100\nflush_interval_ms = 100\nretry_initial_ms = 100\nretry_max_ms = 500",
                self.clickhouse_url
            ),
            _ => format!(
                "kind = \"jsonl\"\ndir = \"{}\"\nurl = \"{}\"\ndatabase = \"sqlgrade\"",
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

/// The summary's judge line.
fn judge_line(stdout: &str) -> String {
    stdout
        .lines()
        .find(|l| l.starts_with("judge "))
        .unwrap_or_else(|| panic!("no judge line in the summary:\n{stdout}"))
        .to_string()
}

/// STEF rows of a JSONL sink directory by event id.
fn jsonl_stef_rows(dir: &Path) -> BTreeMap<String, Value> {
    std::fs::read_to_string(dir.join("evaluations.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["metric"] == "stef")
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
    let settings = ClickHouseSettings {
        url: ch.url(),
        database: "sqlgrade".into(),
        ..ClickHouseSettings::default()
    };
    migrate(&settings).await.unwrap();

    let server = MockServer::start().await;
    let _replies = varying_replies(&server);
    let events_path = dir.path().join("events.jsonl");
    let events = distinct_events(EVENTS);
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

    // Process A: every verdict comes from the LLM and is written back to judge_cache.
    let (code, stdout, stderr) = run(&setup.config("a", "jsonl", Some("clickhouse")));
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_eq!(server.request_count(), EVENTS, "{stderr}");
    let line = judge_line(&stdout);
    assert!(
        line.contains(&format!("assessments {EVENTS} "))
            && line.contains("cache hits 0 ")
            && line.contains(&format!("LLM calls {EVENTS} ")),
        "{line}"
    );
    assert!(stderr.contains("durable judge cache: ClickHouse judge_cache"));
    assert_eq!(
        ch.count("SELECT count() FROM sqlgrade.judge_cache FINAL"),
        EVENTS as u64
    );
    let rows_a = jsonl_stef_rows(&setup.dir.path().join("a"));
    assert_eq!(rows_a.len(), EVENTS);
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
        server.request_count(),
        EVENTS,
        "B made LLM calls:\n{stderr}"
    );
    let line = judge_line(&stdout);
    assert!(
        line.contains(&format!(
            "cache hits {EVENTS} (100.0%: memory 0, durable {EVENTS})"
        )) && line.contains("LLM calls 0 "),
        "{line}"
    );
    let stored = ch.query(
        "SELECT event_id, semantic_verdict, confidence, value, judge_cached, status \
         FROM sqlgrade.evaluations FINAL WHERE metric = 'stef' ORDER BY event_id",
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
    assert_eq!(compared, EVENTS);

    // FLEX on call_structured: the same levels, with a client built from the config.
    let config = Config::load(Some(&setup.config("flex", "jsonl", Some("clickhouse")))).unwrap();
    let flex_event = Event::from_value(json!({
        "event_id": "flex-1",
        "question": "Which superheroes have a full name starting with Charles?",
        "sql": "SELECT T1.full_name, T1.superhero_name FROM superhero AS T1 WHERE T1.full_name LIKE 'Charles%' AND T1.id > 0",
        "gold": {"sql": "SELECT full_name, superhero_name FROM superhero WHERE full_name LIKE 'Charles%'",
                 "db_id": "superhero", "evidence": "full name refers to full_name"}
    }))
    .unwrap();
    let exec = SqliteExecutor::new(
        sqlgrade::testdata::data_dir().join("bird/databases"),
        ExecLimits::default(),
    );
    let flex_only = JudgedOptions {
        rose: None,
        hybrid_ex: None,
        ..JudgedOptions::default()
    };
    let first_client = build_llm_client(&config).unwrap();
    let first = JudgedScorer::new(Arc::clone(&first_client), flex_only.clone());
    let rows = first
        .score_at(&flex_event, &exec, Some(false), "2026-01-01T00:00:00Z")
        .await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].metric, Metric::Flex);
    assert_eq!(server.request_count(), EVENTS + 1);
    first_client.flush_durable_cache().await.unwrap();
    let second_client = build_llm_client(&config).unwrap();
    let second = JudgedScorer::new(Arc::clone(&second_client), flex_only);
    let again = second
        .score_at(&flex_event, &exec, Some(false), "2026-01-01T00:00:00Z")
        .await;
    assert_eq!(
        server.request_count(),
        EVENTS + 1,
        "FLEX asked the LLM again"
    );
    assert_eq!(again[0].verdict, rows[0].verdict);
    assert_eq!(again[0].value, rows[0].value);
    let totals = second_client.totals();
    assert_eq!(
        (totals.durable_hits, totals.llm_calls),
        (1, 0),
        "{totals:?}"
    );

    // ClickHouse stopped: a fresh process scores everything through the LLM, no error rows.
    ch.stop();
    let before = server.request_count();
    let (code, stdout, stderr) = run(&setup.config("c", "jsonl", Some("clickhouse")));
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_eq!(server.request_count(), before + EVENTS);
    let line = judge_line(&stdout);
    assert!(
        line.contains("durable 0)") && line.contains(&format!("LLM calls {EVENTS} ")),
        "{line}"
    );
    assert!(
        stderr.contains("durable judge cache (ClickHouse judge_cache) unavailable"),
        "{stderr}"
    );
    let rows_c = jsonl_stef_rows(&setup.dir.path().join("c"));
    assert_eq!(rows_c.len(), EVENTS);
    for r in rows_c.values() {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["judge"], "llm:judge-test");
    }
    let dead =
        std::fs::read_to_string(setup.dir.path().join("c/dead_letters.jsonl")).unwrap_or_default();
    assert!(dead.trim().is_empty(), "{dead}");
}
