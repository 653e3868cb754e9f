//! OTLP/HTTP export: a local receiver decodes the protobuf `ExportMetricsServiceRequest`s the
//! daemon's pipeline exports and finds the counters with the values of the run.

use sqlgrade_testkit::otlp;

use std::sync::Arc;

use sqlgrade::commands::backfill::{BackfillFormat, benchmark_events};
use sqlgrade::config::TelemetryConfig;
use sqlgrade::judge::JudgeTotals;
use sqlgrade::pipeline::Pipeline;
use sqlgrade::score::Scorer;
use sqlgrade::sources::FileSource;
use sqlgrade::stores::JsonlSink;
use sqlgrade::telemetry::Telemetry;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipeline_metrics_reach_an_otlp_http_receiver() {
    let receiver = otlp::OtlpReceiver::start().await;

    // 432 real BIRD events plus 3 lines that are not events.
    let bird = sqlgrade_testkit::data::data_dir().join("bird");
    let events = benchmark_events(
        BackfillFormat::Bird,
        &bird.join("dev.jsonl"),
        &bird.join("predictions/SuperSQL.jsonl"),
        None,
    )
    .unwrap()
    .events;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.jsonl");
    let mut text = String::new();
    for (i, e) in events.iter().enumerate() {
        text.push_str(&serde_json::to_string(e).unwrap());
        text.push('\n');
        if i % 150 == 0 {
            text.push_str("{not json\n");
        }
    }
    std::fs::write(&input, text).unwrap();

    let mut telemetry = Telemetry::start(&TelemetryConfig {
        enabled: true,
        otlp_endpoint: receiver.endpoint(),
        export_interval_ms: 60_000,
        ..TelemetryConfig::default()
    })
    .unwrap();
    // Judge cache use as an LLM judge would report it: 4 memory hits, 3 durable hits, 3 misses.
    telemetry.observe_judge(|| JudgeTotals {
        assessments: 10,
        cache_hits: 7,
        durable_hits: 3,
        ..JudgeTotals::default()
    });
    let pipeline = Pipeline::new(
        Box::new(FileSource::new(&input, false, 1 << 20)),
        Box::new(JsonlSink::open(dir.path().join("out")).await.unwrap()),
        Arc::new(Scorer::deterministic()),
        &sqlgrade::config::PipelineConfig::default(),
        &sqlgrade::config::SinkConfig::default(),
    )
    .with_metrics(telemetry.metrics());
    let (_tx, shutdown) = tokio::sync::watch::channel(false);
    let summary = pipeline.run(shutdown).await.unwrap();
    assert_eq!(summary.events, 432);
    // Shutdown exports the final values (blocking; off the async workers).
    tokio::task::spawn_blocking(move || telemetry.shutdown())
        .await
        .unwrap()
        .unwrap();

    let requests = receiver.metrics();
    assert!(!requests.is_empty(), "nothing was exported");
    let (sums, histograms) = receiver.sums_and_histograms();
    eprintln!("sums: {sums:?}\nhistograms: {histograms:?}");
    assert_eq!(sums["sqlgrade.events.consumed"], 435.0);
    assert_eq!(sums["sqlgrade.events.scored"], 432.0);
    assert_eq!(sums["sqlgrade.events.dead_lettered"], 3.0);
    assert_eq!(histograms["sqlgrade.stef.phi"].0, 432);
    assert_eq!(histograms["sqlgrade.score.latency"].0, 432);
    // Every row and dead letter went through some sink batch.
    assert_eq!(histograms["sqlgrade.sink.batch.size"].1, 435.0);
    // memory 4 + durable 3 + miss 3 (a miscomputed split would not add up to 10).
    assert_eq!(sums["sqlgrade.judge.cache.lookups"], 10.0);
    // Deterministic judge: no LLM calls, no fallbacks.
    assert!(!sums.contains_key("sqlgrade.judge.calls") || sums["sqlgrade.judge.calls"] == 0.0);
    let resource = &requests[0].resource_metrics[0]
        .resource
        .as_ref()
        .unwrap()
        .attributes;
    assert!(resource.iter().any(|kv| kv.key == "service.name"));
}

/// `backfill` builds its pipeline with `run`'s builder (`assembly::assemble_pipeline`, a mode
/// not a copy), so `[telemetry]` covers a backfill too: a BIRD backfill's events reach the
/// receiver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_exports_the_pipeline_metrics_too() {
    use sqlgrade::commands::backfill::{BackfillPlan, BackfillRequest, PlanMode};
    use sqlgrade::config::{Config, SinkKind};

    let receiver = otlp::OtlpReceiver::start().await;
    let bird = sqlgrade_testkit::data::data_dir().join("bird");
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.sink.kind = SinkKind::jsonl(dir.path().join("out"));
    config.rules.reload_interval_ms = 0;
    config.telemetry = TelemetryConfig {
        enabled: true,
        otlp_endpoint: receiver.endpoint(),
        export_interval_ms: 60_000,
        ..TelemetryConfig::default()
    };
    let request = BackfillRequest {
        input: bird.join("dev.jsonl"),
        format: BackfillFormat::Bird,
        predictions: Some(bird.join("predictions/DAIL-SQL.jsonl")),
        run_id: None,
        judge: PlanMode::Census,
    };
    let plan = BackfillPlan::prepare(&request, &config).unwrap();
    let (_tx, shutdown) = tokio::sync::watch::channel(false);
    let summary = plan.run(&config, shutdown, None).await.unwrap();
    assert_eq!(summary.events, 432);
    // The backfill's end pushed the final values.
    let (sums, histograms) = receiver.sums_and_histograms();
    assert_eq!(sums["sqlgrade.events.consumed"], 432.0);
    assert_eq!(sums["sqlgrade.events.scored"], 432.0);
    assert_eq!(histograms["sqlgrade.stef.phi"].0, 432);
}

/// Evaluation events wait in their queue while the collector is away and go out when it comes
/// back; beyond the queue they are dropped and counted, never blocking the caller.
#[tokio::test(flavor = "current_thread")]
async fn evaluation_events_wait_for_the_collector_within_their_queue() {
    use sqlgrade::evaluation::{EvaluationRow, Metric};
    use sqlgrade::telemetry::evaluations::EvaluationExporter;

    let port = sqlgrade_testkit::servers::free_port();
    let config = TelemetryConfig {
        evaluations: true,
        evaluations_queue: 10,
        otlp_endpoint: format!("http://127.0.0.1:{port}"),
        ..TelemetryConfig::default()
    };
    let exporter = EvaluationExporter::start(&config).unwrap();
    let rows: Vec<EvaluationRow> = (0..50)
        .map(|i| {
            let event = sqlgrade::event::Event::from_value(serde_json::json!({
                "event_id": format!("e{i}"), "question": "q", "sql": "SELECT 1",
                "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
            }))
            .unwrap();
            let mut row = EvaluationRow::for_event(&event, "2026-01-01T00:00:00Z", Metric::Stef);
            row.value = 80.0;
            row
        })
        .collect();
    // On this single-threaded runtime the exporter's task has not run yet: ten fit.
    exporter.sender().submit(&rows, None);
    assert_eq!(exporter.sender().counts().dropped_queue_full, 40);
    // The task takes them and finds nobody listening; it retries (waited for, bounded).
    let waiting = std::time::Instant::now();
    while exporter.sender().counts().failed_attempts == 0 {
        assert!(
            waiting.elapsed() < std::time::Duration::from_secs(30),
            "no export attempt within 30 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let receiver = otlp::OtlpReceiver::start_on(port).await;
    let counts = exporter.finish(std::time::Duration::from_secs(30)).await;
    assert_eq!(counts.submitted, 50);
    assert_eq!(counts.sent, 10, "{counts:?}");
    assert_eq!(counts.dropped_queue_full, 40);
    assert_eq!(counts.dropped_at_shutdown + counts.refused, 0);
    assert!(counts.failed_attempts >= 1, "{counts:?}");
    let records = receiver.log_records();
    assert_eq!(records.len(), 10);
    assert!(
        records
            .iter()
            .all(|r| r.event_name == "gen_ai.evaluation.result")
    );
}
