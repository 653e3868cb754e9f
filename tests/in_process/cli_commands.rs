//! The `sqlgrade` binary end to end: `run` with no arguments on the embedded example, `run
//! --follow` stopped by SIGTERM, `score` on stdin, `backfill` of a BIRD run, `check-config`
//! redaction and refusals (one table of invalid settings), `migrate`'s errors, and
//! `benches/scaling-binary.sh` driving the built binary.

use crate::support;

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sqlgrade::event::Event;
use sqlgrade_testkit::data::data_dir;
use support::cli::sqlgrade;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Copy the files of `from` into `to`, subdirectories included (`rules/catalogues/`).
fn copy_files(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        if kind.is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        } else if kind.is_dir() {
            copy_files(&entry.path(), &to.join(entry.file_name()));
        }
    }
}

/// A temp dir laid out like the repository for the default config (examples/, rules/).
fn repo_layout() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("examples")).unwrap();
    std::fs::copy(
        repo().join("examples/events.jsonl"),
        dir.path().join("examples/events.jsonl"),
    )
    .unwrap();
    let rules = repo().join("rules");
    if rules.is_dir() {
        std::fs::create_dir(dir.path().join("rules")).unwrap();
        copy_files(&rules, &dir.path().join("rules"));
    }
    dir
}

/// Expected outcome of the example file: event ids of valid events, and the number of
/// undecodable non-blank lines.
fn expected_from_examples(path: &Path) -> (Vec<String>, usize) {
    let bytes = std::fs::read(path).unwrap();
    let mut ids = Vec::new();
    let mut dead = 0;
    for line in bytes.split(|&b| b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match Event::decode(line) {
            Ok(e) => ids.push(e.event_id),
            Err(_) => dead += 1,
        }
    }
    (ids, dead)
}

#[test]
fn run_without_arguments_scores_the_example_file() {
    let dir = repo_layout();
    let (expected_ids, expected_dead) =
        expected_from_examples(&dir.path().join("examples/events.jsonl"));
    assert!(
        expected_ids.len() >= 300,
        "the example has at least 300 valid events"
    );
    assert!(expected_dead >= 5, "the example has hostile lines");

    let out = sqlgrade(dir.path()).arg("run").output().unwrap();
    assert!(out.status.success(), "stderr: {}", stderr(&out));

    let rows = json_lines(&dir.path().join("sqlgrade-out/evaluations.jsonl"));
    let dead = json_lines(&dir.path().join("sqlgrade-out/dead_letters.jsonl"));
    let stef: Vec<&Value> = rows.iter().filter(|r| r["metric"] == "stef").collect();
    let mut got: Vec<String> = stef
        .iter()
        .map(|r| r["event_id"].as_str().unwrap().to_string())
        .collect();
    got.sort();
    let mut want = expected_ids.clone();
    want.sort();
    assert_eq!(got, want, "exactly one STEF row per valid event");
    assert_eq!(
        dead.len(),
        expected_dead,
        "one dead letter per hostile line"
    );
    for d in &dead {
        for key in ["received_at", "source", "reason", "payload"] {
            assert!(d.get(key).is_some(), "dead letter lacks {key}: {d}");
        }
        assert!(
            d["source"]
                .as_str()
                .unwrap()
                .starts_with("file:examples/events.jsonl:")
        );
    }
    for r in &stef {
        for key in [
            "event_id",
            "ts",
            "app_id",
            "agent_id",
            "agent_version",
            "model",
            "run_id",
            "metric",
            "value",
            "verdict",
            "status",
            "details",
            "quality_tier",
            "filter_status",
            "semantic_verdict",
            "confidence",
            "confidence_tier",
            "sigma_filters",
            "sigma_verdict",
            "leniency",
            "rules_fired",
            "enrichment_status",
            "judge",
            "judge_cached",
        ] {
            assert!(r.get(key).is_some(), "row lacks {key}: {r}");
        }
        let v = r["value"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&v));
    }
    let statuses: BTreeSet<&str> = stef.iter().map(|r| r["status"].as_str().unwrap()).collect();
    for s in ["ok", "not_a_query", "multiple_statements", "parse_error"] {
        assert!(
            statuses.contains(s),
            "example exercises status {s}: {statuses:?}"
        );
    }
    let summary = stdout(&out);
    assert!(summary.contains("sqlgrade run summary"), "{summary}");
    assert!(
        summary.contains(&format!("count {}", expected_ids.len())),
        "{summary}"
    );

    // A second run appends (the sink is append-only; ids make re-runs idempotent downstream).
    let again = sqlgrade(dir.path()).arg("run").output().unwrap();
    assert!(again.status.success());
    let rows = json_lines(&dir.path().join("sqlgrade-out/evaluations.jsonl"));
    assert_eq!(
        rows.iter().filter(|r| r["metric"] == "stef").count(),
        2 * expected_ids.len()
    );
}

#[cfg(unix)]
#[test]
fn run_follow_stops_cleanly_on_sigterm() {
    let dir = repo_layout();
    let (expected_ids, _) = expected_from_examples(&dir.path().join("examples/events.jsonl"));
    let mut child = sqlgrade(dir.path())
        .args(["run", "--follow"])
        .env("SQLGRADE__SINK__FLUSH_INTERVAL_MS", "50")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rows_path = dir.path().join("sqlgrade-out/evaluations.jsonl");
    let deadline = Instant::now() + Duration::from_secs(60);
    while json_lines(&rows_path).len() < expected_ids.len() {
        assert!(
            Instant::now() < deadline,
            "follow mode did not score the file"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "--follow keeps running at EOF"
    );
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert!(stdout(&out).contains("sqlgrade run summary"));
}

#[test]
fn score_reads_one_event_from_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let event = r#"{"event_id": "cli-1", "app_id": "superhero-analytics", "question": "How many superheroes have blue eyes?", "sql": "SELECT COUNT(*) FROM superhero AS T1 JOIN colour AS T2 ON T1.eye_colour_id = T2.id WHERE T2.colour = 'Blue'"}"#;
    let run = |input: &[u8]| {
        let mut child = sqlgrade(dir.path())
            .arg("score")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    };
    let out = run(event.as_bytes());
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let rows: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["event_id"], "cli-1");
    assert_eq!(rows[0]["metric"], "stef");
    assert_eq!(rows[0]["judge"], "deterministic");

    let bad = run(br#"{"question": "no sql here"}"#);
    assert_eq!(bad.status.code(), Some(2));
    let dl: Value = serde_json::from_str(stdout(&bad).trim()).unwrap();
    assert_eq!(dl["reason"], "missing required field `sql`");
    assert_eq!(dl["source"], "stdin");
    assert_eq!(dl["payload"], r#"{"question": "no sql here"}"#);
}

#[test]
fn backfill_bird_writes_one_row_per_question() {
    let dir = tempfile::tempdir().unwrap();
    let bird = data_dir().join("bird");
    let out = sqlgrade(dir.path())
        .args(["backfill", "--format", "bird", "--input"])
        .arg(bird.join("dev.jsonl"))
        .arg("--predictions")
        .arg(bird.join("predictions/CHESS-GPT-4o-mini.jsonl"))
        .env("SQLGRADE__SINK__DIR", dir.path().join("out"))
        .output()
        .unwrap();
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let rows = json_lines(&dir.path().join("out/evaluations.jsonl"));
    let stef: Vec<&Value> = rows.iter().filter(|r| r["metric"] == "stef").collect();
    assert_eq!(stef.len(), 432);
    let ids: BTreeSet<String> = stef
        .iter()
        .map(|r| r["event_id"].as_str().unwrap().to_string())
        .collect();
    let questions: BTreeSet<String> = std::fs::read_to_string(bird.join("dev.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["question_id"].to_string())
        .collect();
    assert_eq!(ids, questions, "event_id = question_id");
    assert!(stef.iter().all(|r| r["run_id"] == "CHESS-GPT-4o-mini"));
    assert!(stef.iter().all(|r| r["agent_id"] == "CHESS-GPT-4o-mini"));
    let apps: BTreeSet<&str> = stef.iter().map(|r| r["app_id"].as_str().unwrap()).collect();
    assert_eq!(
        apps,
        BTreeSet::from(["bird-student_club", "bird-superhero", "bird-toxicology"])
    );
    let summary = stdout(&out);
    assert!(summary.contains("count 432"), "{summary}");
    assert!(summary.contains("run_id CHESS-GPT-4o-mini"), "{summary}");
    assert!(summary.contains("P90"), "{summary}");

    // The benchmark's own databases and schemas switch the gold metrics on: one row per metric
    // per question, and EX reproduces the reference evaluator's verdict for every item.
    for metric in ["ex", "esm", "esm_plus"] {
        let n = rows.iter().filter(|r| r["metric"] == metric).count();
        assert_eq!(n, 432, "{metric} rows");
    }
    let reference: std::collections::BTreeMap<String, bool> =
        std::fs::read_to_string(bird.join("reference/ex_CHESS-GPT-4o-mini.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (v["question_id"].to_string(), v["ex"] == 1)
            })
            .collect();
    let mut agree = 0;
    for row in rows.iter().filter(|r| r["metric"] == "ex") {
        let id = row["event_id"].as_str().unwrap();
        let got = row["verdict"].as_bool().unwrap_or(false);
        assert_eq!(
            Some(&got),
            reference.get(id),
            "EX verdict of question {id}: {row}"
        );
        assert!(row["details"]["difficulty"].is_string(), "{row}");
        agree += 1;
    }
    assert_eq!(agree, 432);
    assert!(
        summary.contains("simple"),
        "per-difficulty lines: {summary}"
    );
    // Plain ESM cannot parse 365 of the 432 gold queries: those rows are not scored, so the
    // mean is over the 67 scored rows (it equals the verdict rate) and says its coverage.
    let esm = summary
        .lines()
        .find(|l| l.starts_with("esm "))
        .unwrap_or_else(|| panic!("no esm line: {summary}"));
    assert!(
        esm.contains("count 432  mean 0.4478  over 67 scored (coverage 15.5%)  verdict true 44.8%"),
        "{esm}"
    );
    let ex = summary.lines().find(|l| l.starts_with("ex ")).unwrap();
    assert!(!ex.contains("coverage"), "every EX row is scored: {ex}");
}

#[test]
fn backfill_events_with_run_id() {
    let dir = tempfile::tempdir().unwrap();
    let out = sqlgrade(dir.path())
        .args(["backfill", "--run-id", "replay-1", "--input"])
        .arg(repo().join("examples/events.jsonl"))
        .env("SQLGRADE__SINK__DIR", dir.path().join("out"))
        .output()
        .unwrap();
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let rows = json_lines(&dir.path().join("out/evaluations.jsonl"));
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r["run_id"] == "replay-1"));

    let missing = sqlgrade(dir.path())
        .args(["backfill", "--format", "spider", "--input"])
        .arg(data_dir().join("spider/dev.jsonl"))
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains("--predictions"),
        "{}",
        stderr(&missing)
    );
}

/// `sqlgrade check-config` in `dir`, with `config` (if any) and the environment overrides.
fn check_config(dir: &Path, config: Option<&Path>, env: &[(&str, &str)]) -> Output {
    let mut command = sqlgrade(dir);
    command.arg("check-config");
    if let Some(config) = config {
        command.arg("--config").arg(config);
    }
    command.envs(env.iter().copied()).output().unwrap()
}

#[test]
fn check_config_redacts_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sqlgrade.toml");
    std::fs::write(
        &config,
        r#"
[sink]
kind = "clickhouse"
url = "http://writer:url-secret-123@clickhouse:8123"
user = "writer"
password = "file-secret-456"

[judge]
kind = "llm"
api_key = "sk-inline-789"

[source]
kind = "kafka"
brokers = "kafka:9092"
topics = ["agents"]

[source.kafka_properties]
"sasl.password" = "kafka-secret-000"
"security.protocol" = "SASL_SSL"
"#,
    )
    .unwrap();
    let out = check_config(
        dir.path(),
        Some(&config),
        &[("SQLGRADE__JUDGE__MODEL", "gpt-test")],
    );
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    for secret in [
        "url-secret-123",
        "file-secret-456",
        "sk-inline-789",
        "kafka-secret-000",
    ] {
        assert!(!text.contains(secret), "{secret} leaked:\n{text}");
        assert!(!stderr(&out).contains(secret), "{secret} leaked on stderr");
    }
    assert!(text.contains("<redacted>"));
    assert!(
        text.contains("gpt-test"),
        "env overrides are applied:\n{text}"
    );
    assert!(text.contains("SASL_SSL"));
    let parsed: toml::Value = toml::from_str(&text).unwrap();
    let tables: HashMap<String, toml::Value> =
        parsed.as_table().unwrap().clone().into_iter().collect();
    for section in [
        "source",
        "sink",
        "clickhouse",
        "judge",
        "rules",
        "gold",
        "pipeline",
    ] {
        assert!(tables.contains_key(section), "missing [{section}]");
    }
}

/// Sentinel secrets in every place a secret can be configured — in the file and from the
/// environment, under names that do not look secret, in URLs' credentials and queries — and none
/// of them in anything `check-config`, `run` (a Kafka source whose broker is down, a judge and a
/// webhook that cannot be reached) or `score` prints (issue 79).
#[test]
fn no_sentinel_secret_in_any_output() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sqlgrade.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[source]
kind = "kafka"
brokers = "127.0.0.1:1"
topics = ["agents"]

[source.kafka_properties]
"sasl.password" = "SENTINEL-kafka-password"
"sasl.oauthbearer.config" = "principal=x secret=SENTINEL-oauth-config"
"ssl.key.password" = "SENTINEL-key-password"
"security.protocol" = "PLAINTEXT"

[sink]
kind = "jsonl"
dir = {out:?}

[clickhouse]
url = "http://writer:SENTINEL-url-password@127.0.0.1:1/?access_token=SENTINEL-url-query"
password = "SENTINEL-clickhouse-password"

[judge]
kind = "llm"
base_url = "http://127.0.0.1:1/v1?api-key=SENTINEL-base-url-query"
api_key = "SENTINEL-api-key"
max_retries = 0

[alerts]
webhook_url = "http://127.0.0.1:1/services/SENTINEL-webhook-path"

[server]
listen = "127.0.0.1:0"
"#,
            out = dir.path().join("out").display().to_string()
        ),
    )
    .unwrap();
    let env = [
        ("SQLGRADE__SERVER__TOKEN", "SENTINEL-review-token"),
        (
            "SQLGRADE__SOURCE__KAFKA_PROPERTIES__SSL_KEY_PEM",
            "SENTINEL-env-pem",
        ),
    ];
    let sentinels = |text: &str| -> Vec<String> {
        text.match_indices("SENTINEL")
            .map(|(at, _)| text[at..].chars().take(40).collect())
            .collect()
    };
    let mut outputs = Vec::new();
    let checked = check_config(dir.path(), Some(&config), &env);
    assert!(checked.status.success(), "stderr: {}", stderr(&checked));
    outputs.push(("check-config", stdout(&checked) + &stderr(&checked)));

    // `run`: until it has started (its startup line written), then SIGTERM.
    let log = dir.path().join("run.log");
    let mut child = sqlgrade(dir.path())
        .args(["run", "--config"])
        .arg(&config)
        .envs(env)
        .env("RUST_LOG", "debug,rdkafka=debug")
        .stdout(std::fs::File::create(dir.path().join("run.out")).unwrap())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("sqlgrade run starting")
    {
        assert!(Instant::now() < deadline, "run did not start");
        assert!(child.try_wait().unwrap().is_none(), "run exited");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let librdkafka try the broker that is down (its errors are logged).
    std::thread::sleep(Duration::from_secs(2));
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let _ = child.wait();
    outputs.push((
        "run",
        std::fs::read_to_string(dir.path().join("run.out")).unwrap()
            + &std::fs::read_to_string(&log).unwrap(),
    ));

    // `score`: the LLM judge's call fails against an address nothing listens on.
    let mut scored = sqlgrade(dir.path())
        .args(["score", "--config"])
        .arg(&config)
        .envs(env)
        .env("RUST_LOG", "debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    scored
        .stdin
        .take()
        .unwrap()
        .write_all(
            br#"{"event_id":"e1","question":"How many heroes?","sql":"SELECT count(*) FROM superhero"}"#,
        )
        .unwrap();
    let scored = scored.wait_with_output().unwrap();
    outputs.push(("score", stdout(&scored) + &stderr(&scored)));
    assert!(
        stdout(&scored).contains("\"e1\""),
        "score wrote no row:\n{}",
        stderr(&scored)
    );

    for (command, text) in &outputs {
        assert!(!text.is_empty(), "{command} printed nothing");
        let leaked = sentinels(text);
        assert!(leaked.is_empty(), "{command} printed {leaked:?}");
    }
}

/// Each invalid setting is refused (exit non-zero) with a message naming it; a config file,
/// when given, is written first.
#[test]
fn check_config_refuses_invalid_settings_by_name() {
    const GOLD_JUDGE: &str = "[gold]\nmetrics = [\"ex\", \"flex\"]\n\n[gold.judge]\nkind = \"llm\"\n\
        base_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\ndurable_cache = \"clickhouse\"\n";
    /// A config file's text (if any), environment overrides, the messages the refusal names.
    type Case<'a> = (Option<&'a str>, &'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case<'_>] = &[
        (
            None,
            &[("SQLGRADE__PIPELINE__WORKERS", "0")],
            &["pipeline.workers"],
        ),
        (
            None,
            &[
                ("SQLGRADE__JUDGE__KIND", "llm"),
                ("SQLGRADE__JUDGE__DURABLE_CACHE_WRITE_BATCH", "0"),
                ("SQLGRADE__JUDGE__DURABLE_CACHE_RETRY_MS", "0"),
            ],
            &[
                "judge.durable_cache_write_batch must be at least 1",
                "judge.durable_cache_retry_ms must be at least 1",
            ],
        ),
        (
            None,
            &[
                ("SQLGRADE__JUDGE__KIND", "llm"),
                ("SQLGRADE__JUDGE__DURABLE_CACHE_MAX_QUEUED", "10"),
            ],
            &["judge.durable_cache_max_queued (10) must be at least"],
        ),
        (
            None,
            &[("SQLGRADE__GOLD__ROSE_PREVIEW_ROWS", "0")],
            &["gold.rose_preview_rows must be between 1 and 200"],
        ),
        (
            Some(GOLD_JUDGE),
            &[],
            &["gold.judge.durable_cache = \"clickhouse\" needs clickhouse.url"],
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (file, env, messages) in cases {
        let config = file.map(|text| {
            let path = dir.path().join("sqlgrade.toml");
            std::fs::write(&path, text).unwrap();
            path
        });
        let out = check_config(dir.path(), config.as_deref(), env);
        assert!(!out.status.success(), "{env:?} accepted: {}", stdout(&out));
        for message in *messages {
            assert!(stderr(&out).contains(message), "{env:?}: {}", stderr(&out));
        }
    }
    // With the server named, the gold judge's durable cache is accepted.
    let config = dir.path().join("sqlgrade.toml");
    let with_sink = format!(
        "{GOLD_JUDGE}\n[sink]\nkind = \"jsonl\"\n[clickhouse]\nurl = \"http://127.0.0.1:8123\"\n"
    );
    std::fs::write(&config, with_sink).unwrap();
    let out = check_config(dir.path(), Some(&config), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn check_config_exposes_the_durable_cache_writer_settings() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sqlgrade.toml");
    std::fs::write(
        &config,
        "[judge]\nkind = \"llm\"\napi_key_env = \"\"\ndurable_cache_write_batch = 64\n\
         durable_cache_retry_ms = 250\ndurable_cache_max_queued = 1000\n",
    )
    .unwrap();
    let out = check_config(dir.path(), Some(&config), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let parsed: toml::Value = toml::from_str(&stdout(&out)).unwrap();
    let judge = &parsed["judge"];
    assert_eq!(judge["durable_cache_write_batch"].as_integer(), Some(64));
    assert_eq!(judge["durable_cache_retry_ms"].as_integer(), Some(250));
    assert_eq!(judge["durable_cache_max_queued"].as_integer(), Some(1000));
    // The same file with the kind switched back from the environment: the LLM kind's keys are
    // a leftover, named in a warning; the daemon still starts.
    let out = check_config(
        dir.path(),
        Some(&config),
        &[("SQLGRADE__JUDGE__KIND", "deterministic")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("judge.durable_cache_write_batch")
            && stderr(&out).contains("ignored"),
        "{}",
        stderr(&out)
    );
    let parsed: toml::Value = toml::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        parsed["judge"]
            .as_table()
            .map(|t| t.keys().map(String::as_str).collect::<Vec<_>>()),
        Some(vec!["kind"])
    );
}

#[test]
fn migrate_needs_a_clickhouse_sink_and_reports_an_unreachable_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "[sink]\nkind = \"jsonl\"\n").unwrap();
    let out = sqlgrade(dir.path())
        .args(["migrate", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("ClickHouse sink not configured"),
        "{}",
        stderr(&out)
    );
    // Port 1 on loopback: nothing listens there.
    std::fs::write(
        &config,
        "[sink]\nkind = \"clickhouse\"\n[clickhouse]\nurl = \"http://127.0.0.1:1\"\npassword = \"pw-never-shown\"\n",
    )
    .unwrap();
    let out = sqlgrade(dir.path())
        .args(["migrate", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot create the database"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("pw-never-shown"));
}

#[test]
fn run_from_stdin_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = sqlgrade(dir.path())
        .arg("run")
        .env("SQLGRADE__SOURCE__KIND", "stdin")
        .env("SQLGRADE__SINK__KIND", "stdout")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = concat!(
        r#"{"event_id": "s1", "question": "How many singers?", "sql": "SELECT count(*) FROM singer"}"#,
        "\n\n",
        "not json\n",
        r#"{"event_id": "s2", "question": "Names of singers", "sql": "SELECT name FROM singer"}"#
    );
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: BTreeSet<&str> = lines
        .iter()
        .filter(|l| l["metric"] == "stef")
        .map(|l| l["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        BTreeSet::from(["s1", "s2"]),
        "partial last line scored too"
    );
    let dead: Vec<&Value> = lines.iter().filter(|l| l.get("reason").is_some()).collect();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0]["source"], "stdin:3",
        "blank line counted, not dead-lettered"
    );
    assert!(
        stderr(&out).contains("sqlgrade run summary"),
        "summary goes to stderr when rows go to stdout"
    );
}

#[test]
fn events_without_ts_take_the_files_time_on_every_run() {
    // A re-run over the same file (a redelivery) must give rows the same event time, so that
    // they land in the same ClickHouse partition and hour and collapse with the first run's.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("no-ts.jsonl");
    std::fs::write(
        &input,
        "{\"event_id\": \"a\", \"question\": \"How many heroes?\", \"sql\": \"SELECT COUNT(*) FROM superhero\"}\n\
         {\"event_id\": \"b\", \"ts\": \"2026-03-01T00:00:00Z\", \"question\": \"How many heroes?\", \"sql\": \"SELECT COUNT(*) FROM superhero\"}\n",
    )
    .unwrap();
    // 2026-01-02T03:04:05Z
    let mtime = std::time::UNIX_EPOCH + Duration::from_secs(1_767_323_045);
    std::fs::File::options()
        .write(true)
        .open(&input)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let mut runs = Vec::new();
    for run in ["first", "second"] {
        let out_dir = dir.path().join(run);
        let out = sqlgrade(dir.path())
            .arg("run")
            .env("SQLGRADE__SOURCE__PATH", &input)
            .env("SQLGRADE__SINK__DIR", &out_dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let mut ts: Vec<(String, String)> = json_lines(&out_dir.join("evaluations.jsonl"))
            .iter()
            .map(|r| {
                (
                    r["event_id"].as_str().unwrap().to_string(),
                    r["ts"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        ts.sort();
        runs.push(ts);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(runs[0], runs[1]);
    let of = |id: &str| runs[0].iter().find(|(e, _)| e == id).unwrap().1.clone();
    assert_eq!(of("a"), "2026-01-02T03:04:05.000Z", "the file's time");
    assert!(
        of("b").starts_with("2026-03-01T00:00:00"),
        "the event's own ts"
    );
}

/// `benches/scaling-binary.sh` (the scaling table for a machine with a built binary alone): a
/// table row per worker count whose outcomes it counted, and a refusal, not a table, when the
/// base has no events or the binary fails.
#[test]
fn the_scaling_script_runs_a_built_binary_and_counts_its_outcomes() {
    let scaling = |binary: &Path, base: &Path, args: &[&str]| {
        Command::new("bash")
            .arg(repo().join("benches/scaling-binary.sh"))
            .arg(binary)
            .arg(base)
            .args(args)
            .output()
            .unwrap()
    };
    let binary = Path::new(env!("CARGO_BIN_EXE_sqlgrade"));
    let examples = repo().join("examples/events.jsonl");
    let out = scaling(
        binary,
        &examples,
        &["--events", "600", "--workers", "1,2", "--stages-only"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("600 events"), "{text}");
    let rows: Vec<Vec<f64>> = text
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| workers"))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|cell| cell.trim().parse::<f64>().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert_eq!((rows[0][0], rows[1][0]), (1.0, 2.0), "{text}");
    assert_eq!(rows[0][2], 1.0, "one worker is the reference: {text}");
    assert!(rows.iter().all(|r| r[1] > 0.0 && r[3] > 0.0), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let no_events = dir.path().join("no-events.jsonl");
    std::fs::write(&no_events, "{\"question\": \"q\"}\n[1, 2]\n").unwrap();
    let out = scaling(binary, &no_events, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stderr(&out).contains("event_id"), "{}", stderr(&out));

    // A binary whose run fails ends the script with its log, before any table row.
    let failing = dir.path().join("fails.sh");
    std::fs::write(&failing, "#!/bin/sh\necho 'config refused' >&2\nexit 3\n").unwrap();
    let mut mode = std::fs::metadata(&failing).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
    std::fs::set_permissions(&failing, mode).unwrap();
    let out = scaling(&failing, &examples, &["--events", "10", "--workers", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("config refused"), "{}", stderr(&out));
    assert!(!stdout(&out).contains("| 1 |"), "{}", stdout(&out));

    // A run that exits 0 but leaves events without an outcome is no measurement either.
    let loses = dir.path().join("loses.sh");
    std::fs::write(
        &loses,
        r#"#!/bin/sh
[ "$1" = run ] || exit 0
out=$(sed -n 's/^dir = "\(.*\)"$/\1/p' "$3")
mkdir -p "$out" && echo '{"metric":"stef"}' > "$out/evaluations.jsonl"
"#,
    )
    .unwrap();
    std::fs::set_permissions(&loses, std::fs::metadata(&failing).unwrap().permissions()).unwrap();
    let out = scaling(&loses, &examples, &["--events", "10", "--workers", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("1 STEF rows and 0 dead letters for 10 events"),
        "{}",
        stderr(&out)
    );
}
