//! The ClickHouse DDL on a *current* ClickHouse release. The other ClickHouse tests run on
//! Debian's server (18.16); here every file of `deploy/clickhouse/` — split exactly as `sqlgrade
//! migrate` splits it — plus the migrations bookkeeping, sample writes through the materialized
//! views, the durable judge-cache lookup and every Grafana dashboard query run on chDB, the
//! ClickHouse engine built as a library (PyPI `chdb-core-lite`, installed by
//! `scripts/services.sh install` into a virtualenv; `SQLGRADE_CHDB_PYTHON` names another
//! interpreter). Without chDB the test prints SKIPPED, or fails under `SQLGRADE_REQUIRE_SERVERS`.

use sqlgrade_testkit::servers;

use sqlgrade_testkit::dashboard;

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use sqlgrade::stores::clickhouse::judge_cache::{JUDGE_CACHE_LOOKUP, JUDGE_CACHE_LOOKUP_MANY};
use sqlgrade::stores::clickhouse::migrate::{
    CREATE_MIGRATIONS_TABLE, MIGRATIONS, READ_MIGRATIONS, checksum, statements,
};
use sqlgrade::stores::clickhouse::queries::EVENT_ROWS;

/// The interpreter with chDB: `$SQLGRADE_CHDB_PYTHON`, else the virtualenv services.sh makes.
fn chdb_python() -> Result<PathBuf, String> {
    let python = match std::env::var_os("SQLGRADE_CHDB_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => {
            let venv = std::env::var_os("SQLGRADE_CHDB_VENV")
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME")
                        .map(|h| Path::new(&h).join(".cache/sqlgrade/chdb-venv"))
                })
                .ok_or("HOME is not set")?;
            venv.join("bin/python")
        }
    };
    let works = Command::new(&python)
        .args(["-c", "import chdb"])
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        Ok(python)
    } else {
        Err(format!(
            "{} cannot import chdb (run scripts/services.sh install)",
            python.display()
        ))
    }
}

/// Run `statements` (label, SQL) in one chDB session; returns (version, results). Statements
/// `sqlgrade migrate` runs only when needed (`Statement::skip_query`, by label in `skips`) are
/// guarded the same way.
fn run_chdb(
    python: &Path,
    statements: &[(String, String)],
    skips: &HashMap<String, String>,
) -> (String, Vec<Value>) {
    let plan = json!({
        "statements": statements
            .iter()
            .map(|(label, sql)| json!({"label": label, "sql": sql, "skip_if": skips.get(label)}))
            .collect::<Vec<_>>()
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/chdb_run.py");
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(plan.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chdb_run.py failed: {stderr}");
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("chdb_run.py printed no JSON ({e}): {stderr}"));
    (
        report["version"].as_str().unwrap().to_string(),
        report["results"].as_array().unwrap().clone(),
    )
}

#[test]
fn ddl_and_shipped_queries_run_on_a_current_clickhouse() {
    let python = match chdb_python() {
        Ok(p) => p,
        Err(why) => {
            return servers::skip("ddl_and_shipped_queries_run_on_a_current_clickhouse", &why);
        }
    };
    let mut plan: Vec<(String, String)> = vec![
        (
            "create database".into(),
            "CREATE DATABASE IF NOT EXISTS sqlgrade".into(),
        ),
        ("use".into(), "USE sqlgrade".into()),
        ("schema_migrations".into(), CREATE_MIGRATIONS_TABLE.into()),
    ];
    // Every file, statement by statement, twice: the second pass shows `IF NOT EXISTS` (and the
    // runner's guard of `ADD COLUMN`) makes a re-run harmless.
    let mut skips = HashMap::new();
    for pass in 1..=2 {
        for m in MIGRATIONS {
            for (i, statement) in statements(m.sql).into_iter().enumerate() {
                let label = format!("pass {pass}: {} #{}", m.name, i + 1);
                if let Some(skip) = statement.skip_query(str::to_string) {
                    skips.insert(label.clone(), skip);
                }
                plan.push((label, statement.sql));
            }
            if pass == 1 {
                plan.push((
                    format!("record {}", m.name),
                    format!(
                        "INSERT INTO schema_migrations VALUES ({}, '{}', '{}', now())",
                        m.version,
                        m.name,
                        checksum(m.sql)
                    ),
                ));
            }
        }
    }
    // Writes like the sink's (an event redelivered), through the materialized views. Event
    // times are literals: `ts` is in the sorting key (migration 011), and `now() - 7200`
    // evaluated by two INSERTs a second apart would make a redelivery a different row.
    let writes = [
        "INSERT INTO evaluations (event_id, ts, app_id, agent_id, agent_version, model, metric, value, verdict, status, details, quality_tier, semantic_verdict, confidence, rules_fired, judge, judge_cached, scored_at) VALUES \
         ('e1', toDateTime('2026-11-24 08:00:00'), 'bird', 'SuperSQL', 'v1', 'gpt-4o', 'stef', 92.5, 1, 'ok', '{}', 'excellent', 'correct', 0.9, ['safety_limit'], 'llm:gpt-4o', 1, now()), \
         ('e2', toDateTime('2026-11-24 08:00:00'), 'bird', 'SuperSQL', 'v1', 'gpt-4o', 'stef', 40, 0, 'ok', '{}', 'poor', 'incorrect', 0.8, [], 'deterministic', 0, now()), \
         ('e1', toDateTime('2026-11-24 08:00:00'), 'bird', 'SuperSQL', 'v1', 'gpt-4o', 'ex', 1, 1, 'ok', '{}', NULL, NULL, NULL, [], NULL, NULL, now()), \
         ('e2', toDateTime('2026-11-24 08:00:00'), 'bird', 'SuperSQL', 'v1', 'gpt-4o', 'ex', 0, NULL, 'gold_error', '{}', NULL, NULL, NULL, [], NULL, NULL, now())",
        "INSERT INTO evaluations (event_id, ts, app_id, agent_id, agent_version, model, metric, value, verdict, status, details, quality_tier, judge, judge_cached, scored_at) VALUES \
         ('e2', toDateTime('2026-11-24 08:00:00'), 'bird', 'SuperSQL', 'v1', 'gpt-4o', 'stef', 40, 0, 'ok', '{}', 'poor', 'deterministic', 0, now() + 1)",
        "INSERT INTO evaluations (event_id, ts, run_id, run_key, metric, value, status, details, rules_fired, scored_at) VALUES \
         ('q1', toDateTime('2026-11-24 08:00:00'), 'sysA', 'sysA', 'esm', 1, 'ok', '{}', [], now()), \
         ('q1', toDateTime('2026-11-24 08:00:00'), 'sysB', 'sysB', 'esm', 0, 'ok', '{}', [], now()), \
         ('q1', toDateTime('2026-11-24 08:00:00'), 'sysA', 'sysA', 'esm', 1, 'ok', '{}', [], now() + 1)",
        "INSERT INTO dead_letters VALUES (now() - 60, 'kafka:t/0@7', 'malformed JSON: EOF while parsing', '{oops', 'utf8', '')",
        "INSERT INTO dead_letters VALUES (now() - 30, 'kafka:t/0@7', 'malformed JSON: EOF while parsing', '{oops', 'utf8', '')",
        "INSERT INTO alerts VALUES ('a1', now(), 'bird', 'SuperSQL', 'v1', 'gpt-4o', 'stef', 'stef_drop', 'warning', now() - 3600, now(), 80, 60, 200, 'Φ dropped', '{}')",
        "INSERT INTO judge_cache VALUES ('k1', '{\"v\":1}', now() - 10), ('k2', '{\"v\":7}', now())",
        "INSERT INTO judge_cache VALUES ('k1', '{\"v\":2}', now())",
    ];
    for (i, sql) in writes.iter().enumerate() {
        plan.push((format!("write {}", i + 1), (*sql).to_string()));
    }
    // Reads with the answers they must give.
    let lookup = JUDGE_CACHE_LOOKUP.replace('?', "'k1'");
    let lookup_many = format!(
        "SELECT arrayStringConcat(arraySort(groupArray(concat(key, '=', value))), ' ') FROM ({})",
        JUDGE_CACHE_LOOKUP_MANY.replace("IN_LIST", "'k1', 'k2', 'k3'")
    );
    let applied = MIGRATIONS.len().to_string();
    let checks: Vec<(&str, String, &str)> = vec![
        (
            "applied migrations",
            format!("SELECT count() FROM ({READ_MIGRATIONS})"),
            applied.as_str(),
        ),
        (
            "evaluations deduplicated",
            "SELECT count() FROM evaluations FINAL WHERE metric = 'stef'".into(),
            "2",
        ),
        (
            "rollup counts distinct events",
            "SELECT uniqMerge(events), uniqIfMerge(tier_excellent), uniqIfMerge(tier_poor), uniqIfMerge(judge_cached), uniqIfMerge(judged_by_llm) FROM evaluations_hourly WHERE metric = 'stef'".into(),
            "2\t1\t1\t1\t1",
        ),
        (
            "rollup mean of every row (the gold_error row counts as 0)",
            "SELECT round(avgMerge(value_avg), 2) FROM evaluations_hourly WHERE metric = 'ex'".into(),
            "0.5",
        ),
        (
            "scored rollup: mean over scored rows, with coverage",
            "SELECT round(avgIfMerge(value_avg), 2), uniqIfMerge(scored), uniqMerge(events) FROM evaluations_scored_hourly WHERE metric = 'ex'".into(),
            "1\t1\t2",
        ),
        (
            "one row per (event, metric, run): runs kept apart, a redelivery collapsed",
            "SELECT count() FROM evaluations FINAL WHERE event_id = 'q1'".into(),
            "2",
        ),
        (
            "one event through its lookup table",
            EVENT_ROWS.replace('?', "'e2'").replace("SELECT metric, value, status", "SELECT count()"),
            "2",
        ),
        ("dead letters deduplicated", "SELECT count() FROM dead_letters FINAL".into(), "1"),
        (
            "dead-letter rollup",
            "SELECT reason_class, uniqMerge(letters) FROM dead_letters_hourly GROUP BY reason_class".into(),
            "malformed JSON\t1",
        ),
        ("alerts", "SELECT count() FROM alerts FINAL".into(), "1"),
        ("judge cache lookup (newest wins)", lookup, "{\"v\":2}"),
        (
            "judge cache lookup of several keys (newest of each, absent keys left out)",
            lookup_many,
            "k1={\"v\":2} k2={\"v\":7}",
        ),
    ];
    for (label, sql, _) in &checks {
        plan.push(((*label).to_string(), sql.clone()));
    }
    let queries = dashboard::dashboard_queries();
    for (i, q) in queries.iter().enumerate() {
        plan.push((
            format!("dashboard query {}", i + 1),
            dashboard::grafana_to_sql(q),
        ));
    }

    let (version, results) = run_chdb(&python, &plan, &skips);
    eprintln!(
        "chDB ClickHouse version {version}: {} statements",
        plan.len()
    );
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("version {version:?}"));
    assert!(major >= 24, "not a current release: {version}");
    assert_eq!(results.len(), plan.len());
    let failures: Vec<String> = results
        .iter()
        .zip(&plan)
        .filter(|(r, _)| r["ok"] != true)
        .map(|(r, (label, sql))| format!("{label}: {}\n    {sql}", r["error"]))
        .collect();
    assert!(
        failures.is_empty(),
        "on ClickHouse {version}:\n{}",
        failures.join("\n")
    );
    for (label, _, expected) in &checks {
        let result = results.iter().find(|r| r["label"] == *label).unwrap();
        // TSV escapes backslashes only; the JSON values here have none.
        assert_eq!(
            result["output"].as_str().unwrap().trim(),
            *expected,
            "{label} on ClickHouse {version}"
        );
    }
}
