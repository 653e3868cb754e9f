//! GoldScorer: one row per metric with the right statuses, over real benchmark data.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use sqlgrade::evaluation::{Metric, RowStatus};
use sqlgrade::event::Event;
use sqlgrade::metrics::ex::ExConvention;
use sqlgrade::metrics::gold::{GoldOptions, GoldScorer};
use sqlgrade::score::sqlite::{ExecLimits, SqliteExecutor};

fn data() -> PathBuf {
    sqlgrade_testkit::data::data_dir()
}

fn scorer() -> GoldScorer {
    let bird = data().join("bird/tables.json");
    let spider = data().join("spider/tables.json");
    let mut s = GoldScorer::new(
        sqlgrade::score::sqlite::schema::load_catalog(
            &[&bird, &spider],
            Some(&data().join("bird/databases")),
        )
        .unwrap(),
    );
    let mut cat = s.catalog().clone();
    sqlgrade::score::sqlite::schema::introspect_sqlite_dir(
        &mut cat,
        &data().join("spider/databases"),
    )
    .unwrap();
    s = GoldScorer::new(cat).with_planner(std::sync::Arc::new(
        sqlgrade::score::sqlite::schema_db::SchemaPlanner::new(),
    ));
    s
}

fn event(sql: &str, gold_sql: &str, db: &str) -> Event {
    Event::from_value(json!({
        "event_id": "e1", "question": "q", "sql": sql,
        "gold": {"sql": gold_sql, "db_id": db}
    }))
    .unwrap()
}

const TS: &str = "2026-01-01T00:00:00Z";

#[test]
fn rows_and_statuses() {
    let s = scorer();
    let exec = SqliteExecutor::new(
        data().join("bird/databases"),
        ExecLimits {
            timeout: Duration::from_millis(800),
            ..ExecLimits::default()
        },
    );
    let o = GoldOptions::default();
    let gold = "SELECT COUNT(*) FROM atom WHERE element = 'cl'";

    let rows = s.score_at(
        &event(
            "SELECT count(atom_id) FROM atom WHERE element = 'cl'",
            gold,
            "toxicology",
        ),
        &exec,
        &o,
        TS,
    );
    let metrics: Vec<Metric> = rows.iter().map(|r| r.metric).collect();
    assert_eq!(
        metrics,
        vec![Metric::Ex, Metric::Esm, Metric::EsmPlus, Metric::Etm]
    );
    assert!(
        rows.iter().all(|r| r.status == RowStatus::Ok && r.ts == TS),
        "{rows:#?}"
    );
    assert_eq!(rows[0].verdict, Some(true));
    assert_eq!(
        rows[1].verdict,
        Some(false),
        "ESM: COUNT(col) is not COUNT(*)"
    );
    assert_eq!(
        rows[2].verdict,
        Some(true),
        "ESM+ rule 7 (atom_id is the PK): {:#?}",
        rows[2]
    );
    assert_eq!(rows[2].details.to_value()["pred_rules"], json!([7]));
    assert_eq!(
        rows[3].verdict,
        Some(true),
        "ETM rule 6 (atom_id is the single-column key): {:#?}",
        rows[3]
    );

    let rows = s.score_at(
        &event("SELECT nope FROM atom", gold, "toxicology"),
        &exec,
        &o,
        TS,
    );
    assert_eq!(rows[0].status, RowStatus::ExecError);
    assert_eq!(rows[0].verdict, Some(false));
    assert_eq!(
        rows[0].details.to_value()["pred_error"]["message"],
        "no such column: nope"
    );

    let slow = "SELECT count(*) FROM atom a, atom b, atom c";
    let rows = s.score_at(&event(slow, gold, "toxicology"), &exec, &o, TS);
    assert_eq!(rows[0].status, RowStatus::Timeout);
    assert_eq!(rows[0].value, 0.0);

    let rows = s.score_at(
        &event(gold, "SELECT broken FROM", "toxicology"),
        &exec,
        &o,
        TS,
    );
    assert_eq!(rows[0].status, RowStatus::GoldError);
    assert_eq!(rows[0].verdict, None);
    assert_eq!(rows[1].status, RowStatus::GoldParseError);
    assert_eq!(rows[2].status, RowStatus::GoldParseError);
    // ETM: the gold query does not plan on the schema.
    assert_eq!(rows[3].status, RowStatus::GoldError);

    let rows = s.score_at(&event(gold, gold, "no_such_db"), &exec, &o, TS);
    assert!(
        rows.iter().all(|r| r.status == RowStatus::GoldUnavailable),
        "{rows:#?}"
    );

    let no_gold = Event::from_value(json!({"question": "q", "sql": "SELECT 1"})).unwrap();
    assert!(s.score_at(&no_gold, &exec, &o, TS).is_empty());

    let json = serde_json::to_value(&rows[0]).unwrap();
    assert_eq!(json["metric"], "ex");
    assert_eq!(json["status"], "gold_unavailable");
}

#[test]
fn spider_convention_on_concert_singer() {
    let s = scorer();
    let exec = SqliteExecutor::new(data().join("spider/databases"), ExecLimits::default());
    let o = GoldOptions {
        ex_convention: ExConvention::SpiderTestSuite,
        ..GoldOptions::default()
    };
    // Column order differs: Spider's test-suite EX accepts it, BIRD's does not.
    let e = event(
        "SELECT Country, Name FROM singer",
        "SELECT Name, Country FROM singer",
        "concert_singer",
    );
    assert_eq!(s.score_at(&e, &exec, &o, TS)[0].verdict, Some(true));
    let bird = GoldOptions::default();
    assert_eq!(s.score_at(&e, &exec, &bird, TS)[0].verdict, Some(false));
    // ORDER BY in the gold makes order matter.
    let e = event(
        "SELECT Name FROM singer ORDER BY Age ASC",
        "SELECT Name FROM singer ORDER BY Age DESC",
        "concert_singer",
    );
    assert_eq!(s.score_at(&e, &exec, &o, TS)[0].verdict, Some(false));
    assert_eq!(s.score_at(&e, &exec, &bird, TS)[0].verdict, Some(true));
}

#[test]
fn bird_run_through_the_scorer_on_two_threads() {
    let s = scorer();
    let exec = SqliteExecutor::new(data().join("bird/databases"), ExecLimits::default());
    let o = GoldOptions::default();
    let read = |p: PathBuf| -> Vec<Value> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let dev = read(data().join("bird/dev.jsonl"));
    let preds = read(data().join("bird/predictions/SuperSQL.jsonl"));
    let events: Vec<Event> = dev
        .iter()
        .zip(preds.iter())
        .map(|(d, p)| {
            assert_eq!(d["question_id"], p["question_id"]);
            Event::from_value(json!({
                "event_id": d["question_id"].to_string(), "question": d["question"],
                "sql": p["predicted_sql"], "gold": {"sql": d["gold_sql"], "db_id": d["db_id"]}
            }))
            .unwrap()
        })
        .collect();
    let (a, b) = events.split_at(events.len() / 2);
    let ex_sum = std::thread::scope(|sc| {
        let run = |part: &[Event]| -> f64 {
            part.iter()
                .map(|e| s.score_at(e, &exec, &o, TS)[0].value)
                .sum()
        };
        let h = sc.spawn(move || run(a));
        run(b) + h.join().unwrap()
    });
    assert_eq!(ex_sum as usize, 308, "SuperSQL EX 71.30%");
}
