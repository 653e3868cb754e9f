//! Alerts land in ClickHouse `alerts` (firing, then replaced by its resolved row), and
//! `report` reads a run back from ClickHouse `evaluations`. Needs Debian's `clickhouse-server`
//! (scripts/services.sh install); skips loudly without it.

use sqlgrade_testkit::servers as support;

use std::collections::HashMap;

use sqlgrade::alerts::delivery::Destinations;
use sqlgrade::alerts::{AlertInput, AlertService, AlertsConfig, EstimateSource, RuleSet};
use sqlgrade::commands::backfill::{BackfillFormat, benchmark_events};
use sqlgrade::commands::report::RunReport;
use sqlgrade::config::ClickHouseConfig;
use sqlgrade::evaluation::{EvaluationRow, Metric};
use sqlgrade::event::Event;
use sqlgrade::score::Scorer;
use sqlgrade::stores::clickhouse::migrate::migrate;
use sqlgrade::stores::clickhouse::rows::RowReader;
use sqlgrade::stores::clickhouse::sink::ClickHouseSink;
use sqlgrade::stores::{Batch, Sink};
use support::ClickHouse;

fn row(value: f64) -> EvaluationRow {
    let e = Event::decode(
        br#"{"question":"q","sql":"SELECT 1","app_id":"shop","agent_id":"a","agent_version":"v9","model":"m"}"#,
    )
    .unwrap();
    let mut row = EvaluationRow::for_event(&e, "2026-11-21T00:00:00Z", Metric::Stef);
    row.value = value;
    row
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_table_and_report_from_clickhouse() {
    let root = tempfile::tempdir().unwrap();
    let ch = match ClickHouse::start_in(root.path()) {
        Ok(ch) => ch,
        Err(e) => {
            eprintln!("SKIPPED: ClickHouse unavailable: {e}");
            return;
        }
    };
    let settings = ClickHouseConfig {
        url: Some(ch.url()),
        database: "alerts_it".into(),
        retry_initial_ms: 50,
        retry_max_ms: 500,
        ..ClickHouseConfig::default()
    };
    migrate(&settings, None).await.unwrap();

    // Alerts: one incident, fired then resolved.
    let config = AlertsConfig {
        enabled: true,
        clickhouse: true,
        retry_initial_ms: 10,
        defaults: RuleSet {
            recent_window: 50,
            baseline_window: 100,
            min_samples: 30,
            evaluate_every: 5,
            poor_share_min_increase: 0.0,
            judge_fallback_min_increase: 0.0,
            dead_letter_min_increase: 0.0,
            ..RuleSet::default()
        },
        ..AlertsConfig::default()
    };
    let (service, handle) = AlertService::start(
        config,
        Destinations {
            webhook_url: None,
            recording: sqlgrade::stores::AlertRecording {
                clickhouse: Some(settings.clone()),
                jsonl_dir: None,
            },
            review_url: None,
        },
        EstimateSource::Judge,
    )
    .unwrap();
    for phase in [85.0, 40.0, 85.0] {
        for i in 0..300 {
            let v = phase + if i % 2 == 0 { 5.0 } else { -5.0 };
            assert!(handle.offer(AlertInput::Rows(vec![row(v)])));
            if i % 50 == 0 {
                tokio::task::yield_now().await;
            }
        }
    }
    let counters = std::sync::Arc::clone(service.counters());
    drop(handle);
    service.finish().await.unwrap();
    assert_eq!(
        counters
            .clickhouse_delivered
            .load(std::sync::atomic::Ordering::SeqCst),
        2
    );
    let rows = ch.query(
        "SELECT alert_id, rule, metric, agent_version, details FROM alerts_it.alerts FINAL FORMAT JSONEachRow",
    );
    let lines: Vec<serde_json::Value> = rows
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{rows}");
    assert_eq!(lines[0]["rule"], "score_drop");
    assert_eq!(lines[0]["metric"], "stef");
    assert_eq!(lines[0]["agent_version"], "v9");
    let details: serde_json::Value =
        serde_json::from_str(lines[0]["details"].as_str().unwrap()).unwrap();
    assert_eq!(details["state"], "resolved", "{details}");

    // Report: a real scored run written through the ClickHouse sink, read back.
    let bird = sqlgrade_testkit::data::data_dir().join("bird");
    let events = benchmark_events(
        BackfillFormat::Bird,
        &bird.join("dev.jsonl"),
        &bird.join("predictions/DAIL-SQL.jsonl"),
        Some("ch-run"),
    )
    .unwrap()
    .events;
    let scorer = Scorer::deterministic();
    let mut batch = Batch::default();
    for e in &events {
        batch
            .rows
            .extend(scorer.score_at(e, "2026-11-21T00:00:00Z").await);
    }
    let mean_phi = batch.rows.iter().map(|r| r.value).sum::<f64>() / batch.rows.len() as f64;
    let mut sink = ClickHouseSink::new(&settings);
    sink.write(batch).await.unwrap();
    sink.flush().await.unwrap();
    let read = RowReader::new(&settings).of_run("ch-run").await.unwrap();
    assert_eq!(read.len(), events.len());
    let report = RunReport::build("ch-run", &read, &HashMap::new()).unwrap();
    let variant = &report.variants["DAIL-SQL"];
    assert_eq!(variant.events, events.len());
    assert!((variant.phi_mean - mean_phi).abs() < 1e-6);
    assert_eq!(variant.tiers.values().sum::<usize>(), events.len());
}
