//! The reads of `evaluations` before and after the read-keyed sorting key of migration 011, on
//! 20 million generated rows: rows read, bytes read and latency of each shipped drill-down query
//! (the dashboard's "Latest evaluations" panel, one run's rows, the recent poor events of one
//! agent version, one event by id), from `system.query_log`, plus the time migration 011 takes
//! to copy the table.
//!
//!   cargo bench --bench clickhouse_reads -- [--rows N] [--repeat R]
//!
//! Starts its own ClickHouse (Debian 18.16, as the integration tests do; `scripts/services.sh
//! install` first), applies migrations 001–010 (the old key, `(event_id, metric, run_key)`),
//! generates N rows (default 20,000,000) with `INSERT … SELECT … FROM numbers()` — 2 metrics per
//! event, 60 days of event time over 2 monthly partitions, 8 apps × 6 agents × 4 versions of live
//! traffic plus 10% of rows in 40 benchmark runs, tiers and statuses drawn from a hash — runs each
//! query R times (default 3) in its pre-011 form, applies 011 (the copy), and runs each query in
//! its shipped form. Reports the median latency and the rows/bytes read of each (`log_queries`,
//! read from `system.query_log`). Results are recorded in benches/README.md
//! ("## ClickHouse reads").

use sqlgrade_testkit::servers as support;

use std::time::Instant;

use sqlgrade::config::ClickHouseConfig;
use sqlgrade::stores::clickhouse::migrate::{migrate, migrate_to};
use sqlgrade::stores::clickhouse::queries;
use support::ClickHouse;

const DB: &str = "bench";

struct Args {
    rows: u64,
    repeat: usize,
}

fn args() -> Args {
    let mut a = Args {
        rows: 20_000_000,
        repeat: 3,
    };
    let argv: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < argv.len() {
        let value = argv
            .get(i + 1)
            .and_then(|v| v.replace('_', "").parse().ok());
        match (argv[i].as_str(), value) {
            ("--rows", Some(v)) => {
                a.rows = v;
                i += 1;
            }
            ("--repeat", Some(v)) => {
                a.repeat = v as usize;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    a
}

fn run(ch: &ClickHouse, sql: &str) -> String {
    ch.try_query_in(DB, sql)
        .unwrap_or_else(|e| panic!("{sql}\n{e}"))
}

/// (rows read, bytes read, duration ms) of a logged query (the log is flushed asynchronously:
/// asked again for a few seconds).
fn logged(ch: &ClickHouse, query_id: &str) -> (u64, u64, u64) {
    for _ in 0..50 {
        run(ch, "SYSTEM FLUSH LOGS");
        let body = run(
            ch,
            &format!(
                "SELECT read_rows, read_bytes, query_duration_ms FROM system.query_log \
                 WHERE query_id = '{query_id}' AND type = 2 LIMIT 1"
            ),
        );
        let cols: Vec<u64> = body
            .split_whitespace()
            .map(|c| c.parse().unwrap_or(0))
            .collect();
        if let [r, b, d] = cols[..] {
            return (r, b, d);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("query {query_id} never reached system.query_log")
}

struct Measured {
    rows: u64,
    bytes: u64,
    median_ms: u64,
    result_rows: usize,
}

fn measure(ch: &ClickHouse, label: &str, sql: &str, repeat: usize) -> Measured {
    let mut durations = Vec::new();
    let (mut rows, mut bytes, mut result_rows) = (0, 0, 0);
    for i in 0..repeat.max(1) {
        let id = format!(
            "{}-{i}-{}",
            label.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
            std::process::id()
        );
        let path = format!("/?database={DB}&log_queries=1&query_id={id}");
        let body = support::http_request_to(
            &ch.host,
            ch.http_port,
            &format!(
                "POST {path} HTTP/1.0\r\nContent-Length: {}\r\n\r\n{sql}",
                sql.len()
            ),
        )
        .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(body.0, 200, "{label}: {}", body.1);
        result_rows = body.1.lines().count();
        let (r, b, d) = logged(ch, &id);
        (rows, bytes) = (r, b);
        durations.push(d);
    }
    durations.sort_unstable();
    Measured {
        rows,
        bytes,
        median_ms: durations[durations.len() / 2],
        result_rows,
    }
}

fn main() {
    let a = args();
    let dir = tempfile::tempdir().unwrap();
    let ch = match ClickHouse::start_in(dir.path()) {
        Ok(ch) => ch,
        Err(e) => {
            eprintln!("SKIPPED clickhouse_reads: {e}");
            return;
        }
    };
    // The schema before 011, as `migrate` left it; 011 is applied below by `migrate`.
    let settings = ClickHouseConfig {
        url: Some(ch.url()),
        database: DB.into(),
        ..ClickHouseConfig::default()
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(migrate_to(&settings, None, 10))
        .expect("migrations 001-010 apply");

    // Generate rows in chunks of 2M (bounded memory on 18.16).
    let t = Instant::now();
    let chunk = 2_000_000u64;
    let mut start = 0;
    while start < a.rows {
        let n = chunk.min(a.rows - start);
        run(
            &ch,
            &format!(
                "INSERT INTO evaluations (event_id, ts, app_id, agent_id, agent_version, model, run_id, run_key, \
                 metric, value, verdict, status, details, quality_tier, semantic_verdict, confidence, rules_fired, \
                 judge, prompt_tokens, completion_tokens, latency_us, scored_at) \
                 SELECT \
                   concat('ev-', toString(intDiv(number, 2))) AS event_id, \
                   toDateTime('2026-09-01 00:00:00') + intDiv(intDiv(number, 2) * 5184000, {half}) AS ts, \
                   if(h % 10 = 0, NULL, concat('app-', toString(h % 8))) AS app_id, \
                   if(h % 10 = 0, concat('system-', toString(h % 40)), concat('agent-', toString(intDiv(h, 8) % 6))) AS agent_id, \
                   concat('v', toString(intDiv(h, 48) % 4)) AS agent_version, \
                   'gpt-4o' AS model, \
                   if(h % 10 = 0, concat('run-', toString(h % 40)), NULL) AS run_id, \
                   ifNull(run_id, '') AS run_key, \
                   if(number % 2 = 0, 'stef', if(h % 10 = 0, 'ex', 'stef_judged')) AS metric, \
                   (h % 1000) / 10 AS value, \
                   toUInt8(h % 3 != 0) AS verdict, \
                   if(h % 97 = 0, 'sql_too_large', 'ok') AS status, \
                   '{{\"findings\":[]}}' AS details, \
                   arrayElement(['excellent', 'good', 'marginal', 'poor'], (intDiv(h, 7) % 4) + 1) AS quality_tier, \
                   if(h % 3 = 0, 'incorrect', 'correct') AS semantic_verdict, \
                   0.8 AS confidence, \
                   emptyArrayString() AS rules_fired, \
                   'deterministic' AS judge, \
                   toUInt64(0), toUInt64(0), toUInt64(40), \
                   ts + 1 AS scored_at \
                 FROM (SELECT number, cityHash64(intDiv(number, 2)) AS h FROM numbers({start}, {n}))",
                half = a.rows / 2,
            ),
        );
        start += n;
    }
    run(&ch, "OPTIMIZE TABLE evaluations FINAL");
    let total = run(&ch, "SELECT count() FROM evaluations");
    eprintln!(
        "generated {} rows in {:.1?} (merged)",
        total.trim(),
        t.elapsed()
    );

    // A concrete event, run and agent version to drill into.
    let event = run(
        &ch,
        "SELECT event_id FROM evaluations WHERE event_id = 'ev-4242' LIMIT 1",
    );
    assert_eq!(event.trim(), "ev-4242");
    let version = run(
        &ch,
        "SELECT app_id, agent_id, agent_version FROM evaluations WHERE app_id = 'app-3' LIMIT 1",
    );
    let v: Vec<&str> = version.split_whitespace().collect();
    let (app, agent, ver) = (v[0], v[1], v[2]);
    let recent = "toDateTime('2026-10-25 00:00:00')";

    let before: Vec<(&str, String)> = vec![
        (
            "latest evaluations panel",
            "SELECT ts, event_id, app_id, agent_id, agent_version, model, value AS phi, quality_tier, semantic_verdict, status, judge \
             FROM evaluations FINAL WHERE metric = 'stef' AND ts >= toDateTime('2026-10-29 00:00:00') AND ts <= toDateTime('2026-10-31 00:00:00') \
             AND ifNull(app_id, '') IN ('app-3') AND ifNull(agent_id, '') IN ('agent-1', 'agent-2') ORDER BY ts DESC LIMIT 200"
                .to_string(),
        ),
        (
            "one run's rows",
            "SELECT event_id, agent_id, agent_version, run_id, metric, value, verdict, status, quality_tier, details, semantic_verdict, \
             inclusion_probability, revised_value, revised_verdict FROM evaluations FINAL WHERE run_id = 'run-10'"
                .to_string(),
        ),
        (
            "recent poor events of one version",
            format!(
                "SELECT event_id, ts, value, status, quality_tier FROM evaluations FINAL \
                 WHERE ifNull(app_id, '') = '{app}' AND ifNull(agent_id, '') = '{agent}' AND ifNull(agent_version, '') = '{ver}' \
                 AND metric = 'stef' AND ts >= {recent} AND quality_tier = 'poor' ORDER BY ts DESC LIMIT 100"
            ),
        ),
        (
            "one event by id",
            "SELECT metric, value, status FROM evaluations FINAL WHERE event_id = 'ev-4242'".to_string(),
        ),
    ];
    let after: Vec<String> = vec![
        "SELECT ts, event_id, app_id, agent_id, agent_version, model, value AS phi, quality_tier, semantic_verdict, status, judge \
         FROM evaluations FINAL WHERE run_key = '' AND app_key IN ('app-3') AND agent_key IN ('agent-1', 'agent-2') AND metric = 'stef' \
         AND ts >= toDateTime('2026-10-29 00:00:00') AND ts <= toDateTime('2026-10-31 00:00:00') ORDER BY ts DESC LIMIT 200"
            .to_string(),
        queries::RUN_ROWS.replace('?', "'run-10'"),
        queries::RECENT_POOR_EVENTS
            .replacen('?', &format!("'{app}'"), 1)
            .replacen('?', &format!("'{agent}'"), 1)
            .replacen('?', &format!("'{ver}'"), 1)
            .replacen("toDateTime(?)", recent, 1),
        queries::EVENT_ROWS.replace('?', "'ev-4242'"),
    ];

    let old: Vec<Measured> = before
        .iter()
        .map(|(label, sql)| measure(&ch, label, sql, a.repeat))
        .collect();

    let t = Instant::now();
    let report = runtime
        .block_on(migrate(&settings, None))
        .expect("migration 011 applies");
    // 011 copies the table; 012 (a column with a DEFAULT) is metadata only, 013 new tables.
    assert_eq!(
        report.applied,
        sqlgrade::stores::clickhouse::migrate::MIGRATIONS
            .iter()
            .filter(|m| m.version >= 11)
            .map(|m| m.name)
            .collect::<Vec<_>>(),
        "011 and every migration after it"
    );
    let migrate_s = t.elapsed().as_secs_f64();
    run(&ch, "OPTIMIZE TABLE evaluations FINAL");
    let copied = run(&ch, "SELECT count() FROM evaluations");
    eprintln!(
        "migration 011 copied {} rows in {migrate_s:.1} s",
        copied.trim()
    );

    let new: Vec<Measured> = before
        .iter()
        .zip(&after)
        .map(|((label, _), sql)| measure(&ch, &format!("{label} new"), sql, a.repeat))
        .collect();

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "\n## evaluations reads, {} rows, median of {} runs (load {})\n",
        total.trim(),
        a.repeat,
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "| query | result rows | rows read before → after | MB read before → after | ms before → after |"
    );
    println!("|---|---|---|---|---|");
    for (((label, _), o), n) in before.iter().zip(&old).zip(&new) {
        assert_eq!(
            o.result_rows, n.result_rows,
            "{label}: the shipped form returns other rows"
        );
        println!(
            "| {label} | {} | {} → {} | {:.1} → {:.1} | {} → {} |",
            n.result_rows,
            o.rows,
            n.rows,
            o.bytes as f64 / 1e6,
            n.bytes as f64 / 1e6,
            o.median_ms,
            n.median_ms
        );
    }
    println!(
        "\nmigration 011 (copy of {} rows): {migrate_s:.1} s",
        copied.trim()
    );
}
