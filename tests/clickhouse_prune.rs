//! `sqlgrade prune` against Debian's ClickHouse 18.16 (the release without TTL): whole months
//! older than the cut-off go from every partitioned table (the detail tables and the rollups
//! their views fed), a month that is partly newer stays, `--dry-run` drops nothing, and an
//! unknown table is refused.

use sqlgrade_testkit::cli::sqlgrade;
use sqlgrade_testkit::servers::{self as support, ClickHouse};

fn out(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn prune_drops_whole_old_months_from_every_table() {
    let dir = tempfile::tempdir().unwrap();
    let ch = match ClickHouse::start_in(dir.path()) {
        Ok(ch) => ch,
        Err(e) => return support::skip("prune_drops_whole_old_months_from_every_table", &e),
    };
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        format!(
            "[sink]\nkind = \"clickhouse\"\n[clickhouse]\nurl = \"{}\"\ndatabase = \"pr\"\n",
            ch.url()
        ),
    )
    .unwrap();
    let migrate = sqlgrade(dir.path())
        .args(["migrate", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(migrate.status.success(), "{}", out(&migrate));
    // Two old months, and one row of this month (now − 1 h, so it is this month's in UTC
    // unless the test runs in the first hour of a month; then it is last month's, also new).
    ch.query(
        "INSERT INTO pr.evaluations (event_id, ts, metric, value, status, details, rules_fired, scored_at) VALUES \
         ('old1', toDateTime('2024-01-15 10:00:00'), 'stef', 50, 'ok', '{}', [], now()), \
         ('old2', toDateTime('2024-02-20 10:00:00'), 'stef', 60, 'ok', '{}', [], now()), \
         ('new1', now() - 3600, 'stef', 70, 'ok', '{}', [], now())",
    );
    ch.query(
        "INSERT INTO pr.dead_letters VALUES (toDateTime('2024-01-15 10:00:00'), 'file:x:1', 'malformed JSON: x', '{', 'utf8', '')",
    );
    let count = |table: &str| ch.count(&format!("SELECT count() FROM pr.{table}"));
    assert_eq!(count("evaluations"), 3);
    assert_eq!(count("evaluations_hourly"), 3, "one rollup row per hour");
    assert_eq!(count("evaluations_scored_hourly"), 3);

    let dry = sqlgrade(dir.path())
        .args(["prune", "--older-than", "365days", "--dry-run", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let text = out(&dry);
    assert!(dry.status.success(), "{text}");
    assert!(text.contains("would drop  evaluations 202401"), "{text}");
    assert!(text.contains("would drop  evaluations 202402"), "{text}");
    assert!(text.contains("would drop  dead_letters 202401"), "{text}");
    assert_eq!(count("evaluations"), 3, "a dry run drops nothing");

    let unknown = sqlgrade(dir.path())
        .args([
            "prune",
            "--older-than",
            "1d",
            "--table",
            "judge_cache",
            "--config",
        ])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!unknown.status.success());
    assert!(out(&unknown).contains("not a partitioned sqlgrade table"));

    let pruned = sqlgrade(dir.path())
        .args(["prune", "--older-than", "365days", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let text = out(&pruned);
    assert!(pruned.status.success(), "{text}");
    assert!(
        text.contains("dropped  evaluations_hourly 202401"),
        "{text}"
    );
    assert!(
        text.contains("dropped  evaluations_scored_hourly 202402"),
        "{text}"
    );
    assert_eq!(
        ch.query("SELECT groupArray(event_id) FROM pr.evaluations")
            .trim(),
        "['new1']"
    );
    assert_eq!(count("evaluations_hourly"), 1);
    assert_eq!(count("evaluations_scored_hourly"), 1);
    assert_eq!(count("dead_letters"), 0);

    // A month that is only partly older than the cut-off stays: cut the current month in half.
    let this_month = sqlgrade(dir.path())
        .args([
            "prune",
            "--older-than",
            "1s",
            "--table",
            "evaluations",
            "--config",
        ])
        .arg(&config)
        .output()
        .unwrap();
    assert!(this_month.status.success(), "{}", out(&this_month));
    assert_eq!(count("evaluations"), 1, "{}", out(&this_month));
}
