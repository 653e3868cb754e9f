//! Migration 011 on a table that already holds rows (Debian's ClickHouse 18.16): `evaluations`
//! is rebuilt with the read-keyed sorting key and its rows copied; a run interrupted after the
//! swap finishes on the next `migrate` without redoing the copy; deduplication still holds
//! across the migration (a row redelivered afterwards collapses with its copied twin; runs stay
//! apart); the rollups keep counting; one event is found through its lookup table; 012 fills
//! `finding_codes` from the details.

use sqlgrade_testkit::servers::{self as support, ClickHouse};

use sqlgrade::config::ClickHouseConfig;
use sqlgrade::stores::clickhouse::migrate::{MIGRATIONS, migrate, migrate_to, statements};
use sqlgrade::stores::clickhouse::queries;

const DB: &str = "rk";

fn run(ch: &ClickHouse, sql: &str) -> String {
    ch.try_query_in(DB, sql)
        .unwrap_or_else(|e| panic!("{sql}\n{e}"))
}

#[tokio::test]
async fn migration_011_copies_rows_and_finishes_an_interrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let ch = match ClickHouse::start_in(dir.path()) {
        Ok(ch) => ch,
        Err(e) => return support::skip("migration_011_copies_rows", &e),
    };
    let settings = ClickHouseConfig {
        url: Some(ch.url()),
        database: DB.into(),
        ..ClickHouseConfig::default()
    };
    migrate_to(&settings, None, 10).await.unwrap();
    // Rows under the old key: e1 delivered twice, one event without labels, one question
    // scored in two runs.
    run(
        &ch,
        "INSERT INTO evaluations (event_id, ts, app_id, agent_id, agent_version, metric, value, status, details, rules_fired, scored_at, run_key) VALUES \
         ('e1', '2026-11-01 10:00:00', 'app', 'agent', 'v1', 'stef', 80, 'ok', '{}', [], '2026-11-01 10:00:01', ''), \
         ('e1', '2026-11-01 10:00:00', 'app', 'agent', 'v1', 'stef', 80, 'ok', '{}', [], '2026-11-01 10:00:02', ''), \
         ('e1', '2026-11-01 10:00:00', 'app', 'agent', 'v1', 'ex', 1, 'ok', '{}', [], '2026-11-01 10:00:01', ''), \
         ('e2', '2026-11-01 11:00:00', NULL, NULL, NULL, 'stef', 40, 'ok', '{}', [], '2026-11-01 11:00:01', '')",
    );
    run(
        &ch,
        "INSERT INTO evaluations (event_id, ts, run_id, run_key, metric, value, status, details, rules_fired, scored_at) VALUES \
         ('q1', '2026-10-01 00:00:00', 'sysA', 'sysA', 'esm', 1, 'ok', '{}', [], now()), \
         ('q1', '2026-10-01 00:00:00', 'sysB', 'sysB', 'esm', 0, 'ok', '{}', [], now())",
    );

    // A run of 011 interrupted right after the swap: the views are not recreated yet.
    let steps = statements(MIGRATIONS[10].sql);
    assert_eq!(MIGRATIONS[10].name, "011_read_key.sql");
    let swap = steps
        .iter()
        .position(|s| s.sql.starts_with("RENAME TABLE"))
        .unwrap();
    for s in &steps[..=swap] {
        run(&ch, &s.sql);
    }
    let report = migrate(&settings, None).await.unwrap();
    assert_eq!(
        report.applied,
        sqlgrade::stores::clickhouse::migrate::MIGRATIONS
            .iter()
            .filter(|m| m.version >= 11)
            .map(|m| m.name)
            .collect::<Vec<_>>(),
        "011 and every migration after it"
    );
    let tables = run(
        &ch,
        "SELECT name FROM system.tables WHERE database = currentDatabase() ORDER BY name",
    );
    assert!(
        !tables.contains("evaluations_keyed\n"),
        "the guarded copy ran again after the swap:\n{tables}"
    );
    assert!(tables.contains("evaluations_before_011\n"), "{tables}");
    assert!(tables.contains("evaluations_hourly_mv\n"), "{tables}");
    let key = run(
        &ch,
        "SELECT sorting_key FROM system.tables WHERE database = currentDatabase() AND name = 'evaluations'",
    );
    assert_eq!(
        key.trim(),
        "run_key, app_key, agent_key, version_key, metric, ts, event_id"
    );

    // Rows copied, labels keyed ('' for NULL), deduplication as before.
    assert_eq!(
        run(&ch, "SELECT count() FROM evaluations FINAL").trim(),
        "5",
        "e1 stef once, e1 ex, e2 stef, q1 in two runs"
    );
    assert_eq!(
        run(
            &ch,
            "SELECT app_key, agent_key, version_key FROM evaluations WHERE event_id = 'e2'"
        ),
        "\t\t\n"
    );
    // A redelivery after the migration (written as the sink writes, keys included) collapses
    // with the copied row, and the recreated views see it.
    run(
        &ch,
        "INSERT INTO evaluations (event_id, ts, app_id, agent_id, agent_version, metric, value, status, details, rules_fired, scored_at, run_key, app_key, agent_key, version_key) VALUES \
         ('e1', '2026-11-01 10:00:00', 'app', 'agent', 'v1', 'stef', 80, 'ok', '{}', [], now(), '', 'app', 'agent', 'v1'), \
         ('e3', '2026-11-01 12:00:00', 'app', 'agent', 'v1', 'stef', 20, 'ok', '{}', [], now(), '', 'app', 'agent', 'v1')",
    );
    assert_eq!(
        run(
            &ch,
            "SELECT count() FROM evaluations FINAL WHERE event_id = 'e1' AND metric = 'stef'"
        )
        .trim(),
        "1"
    );
    assert_eq!(
        run(
            &ch,
            "SELECT uniqMerge(events) FROM evaluations_hourly WHERE metric = 'stef' AND app_id = 'app'"
        )
        .trim(),
        "2",
        "e1 (counted before the migration, again after: distinct) and e3"
    );
    // One event through its lookup table (filled from the copied rows and by its view).
    let e1 = run(&ch, &queries::EVENT_ROWS.replace('?', "'e1'"));
    assert_eq!(e1.lines().count(), 2, "{e1}");
    let e3 = run(&ch, &queries::EVENT_ROWS.replace('?', "'e3'"));
    assert_eq!(e3.lines().count(), 1, "{e3}");
    // Finding codes come from the details (012): none for the copied rows, the codes of a
    // STEF row's findings (not a "code" inside evidence text) for a new one.
    run(
        &ch,
        r#"INSERT INTO evaluations (event_id, ts, metric, value, status, details, rules_fired, scored_at, run_key, app_key, agent_key, version_key) VALUES ('e4', '2026-11-01 13:00:00', 'stef', 30, 'ok', '{"findings":[{"code":"unknown_table","severity":"error","category":"schema","evidence":"table \\"x\\" with \\"code\\":\\"fake\\",\\"severity\\""},{"code":"ratio_integer_division","severity":"warning","category":"function","evidence":"A / B"}]}', [], now(), '', '', '', '')"#,
    );
    assert_eq!(
        run(
            &ch,
            "SELECT finding_codes FROM evaluations WHERE event_id = 'e4'"
        )
        .trim(),
        "['unknown_table','ratio_integer_division']"
    );
    assert_eq!(
        run(
            &ch,
            "SELECT finding_codes FROM evaluations FINAL WHERE event_id = 'e1' AND metric = 'stef'"
        )
        .trim(),
        "[]"
    );
    // One run's rows through the key's first column.
    let run_a = run(&ch, &queries::RUN_ROWS.replace('?', "'sysA'"));
    assert_eq!(run_a.lines().count(), 1, "{run_a}");
}
