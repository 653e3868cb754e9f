//! Per-event tracing spans over OTLP/HTTP: the process installs
//! `telemetry::span_export_layer()` in its subscriber (as the binary does at startup), telemetry
//! starts, and a local receiver decodes the `ExportTraceServiceRequest`s: one `score_event` span
//! per scored event, carrying the event's `event_id`, `app_id`, `agent_id` and `agent_version`.
//!
//! Its own test binary: the subscriber is process-global.

use sqlgrade_testkit::otlp;

use std::collections::BTreeMap;
use std::sync::Arc;

use sqlgrade::commands::backfill::{BackfillFormat, benchmark_events};
use sqlgrade::config::TelemetryConfig;
use sqlgrade::pipeline::Pipeline;
use sqlgrade::score::Scorer;
use sqlgrade::sources::FileSource;
use sqlgrade::stores::JsonlSink;
use sqlgrade::telemetry::{EVENT_SPAN, Telemetry, span_export_layer};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// The target of the pipeline's per-event spans (the exporter takes the `sqlgrade` target's).
const SCORING: &str = "sqlgrade::pipeline::scoring";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scored_event_exports_a_span_with_its_event_id() {
    tracing_subscriber::registry()
        .with(span_export_layer())
        .init();
    let receiver = otlp::OtlpReceiver::start().await;

    let bird = sqlgrade_testkit::data::data_dir().join("bird");
    let mut events = benchmark_events(
        BackfillFormat::Bird,
        &bird.join("dev.jsonl"),
        &bird.join("predictions/DAIL-SQL.jsonl"),
        None,
    )
    .unwrap()
    .events;
    for (i, e) in events.iter_mut().enumerate() {
        e.agent_version = Some(format!("v{}", i % 2));
    }
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.jsonl");
    let mut text = String::new();
    for e in &events {
        text.push_str(&serde_json::to_string(e).unwrap());
        text.push('\n');
    }
    text.push_str("{not an event\n");
    std::fs::write(&input, text).unwrap();

    // The layer keeps the subscriber's maximum level (a missing hint would make it TRACE, and
    // `log`'s bridge would hand every `log::debug!` of sqlparser's to the subscriber).
    assert_eq!(
        tracing::level_filters::LevelFilter::current(),
        tracing::level_filters::LevelFilter::INFO
    );
    // Spans before telemetry starts are not exported (the layer is inert): with nothing else
    // wanting them, they are not even built.
    let early = tracing::info_span!(target: SCORING, "before_start", event_id = "early");
    assert!(early.is_disabled(), "a span was built with no exporter");
    early.in_scope(|| {});
    assert!(tracing::info_span!(target: SCORING, EVENT_SPAN, event_id = "early").is_disabled());

    let telemetry = Telemetry::start(&TelemetryConfig {
        enabled: true,
        otlp_endpoint: receiver.endpoint(),
        export_interval_ms: 200,
        ..TelemetryConfig::default()
    })
    .unwrap();
    assert!(
        !tracing::info_span!(target: SCORING, EVENT_SPAN, event_id = "probe").is_disabled(),
        "spans are built once the exporter is connected"
    );
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
    tokio::task::spawn_blocking(move || telemetry.shutdown())
        .await
        .unwrap()
        .unwrap();
    // After shutdown the layer is inert again.
    let late = tracing::info_span!(target: SCORING, EVENT_SPAN, event_id = "after-shutdown");
    assert!(late.is_disabled());
    late.in_scope(|| {});

    let spans = receiver.spans();
    // The pipeline's spans: the test's own `probe` span is exported too, and left out here.
    let scored: Vec<_> = spans
        .iter()
        .filter(|s| s.name == EVENT_SPAN)
        .filter(|s| {
            otlp::attribute_string(&s.attributes, "event_id").is_none_or(|id| id != "probe")
        })
        .collect();
    eprintln!(
        "{} trace requests, {} spans, {} score_event spans",
        receiver.traces().len(),
        spans.len(),
        scored.len()
    );
    let mut by_event: BTreeMap<String, Vec<&_>> = BTreeMap::new();
    for span in &scored {
        let id = otlp::attribute_string(&span.attributes, "event_id")
            .expect("score_event span without event_id");
        by_event.entry(id).or_default().push(*span);
    }
    assert_eq!(by_event.len(), 432, "one span per scored event");
    assert!(by_event.values().all(|v| v.len() == 1));
    for (i, e) in events.iter().enumerate() {
        let span = by_event[&e.event_id][0];
        let attr = |k: &str| otlp::attribute_string(&span.attributes, k);
        assert_eq!(attr("app_id"), e.app_id, "event {}", e.event_id);
        assert_eq!(attr("agent_id").as_deref(), Some("DAIL-SQL"));
        assert_eq!(attr("agent_version"), Some(format!("v{}", i % 2)));
        assert_eq!(attr("model"), None, "absent fields are not recorded");
        assert!(attr("origin").is_some_and(|o| o.contains("events.jsonl")));
        assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
        assert_eq!(span.trace_id.len(), 16);
    }
    assert!(
        !spans.iter().any(|s| {
            otlp::attribute_string(&s.attributes, "event_id")
                .is_some_and(|id| id == "early" || id == "after-shutdown")
        }),
        "spans outside the telemetry's lifetime were exported"
    );
    let resource = receiver.traces()[0].resource_spans[0]
        .resource
        .clone()
        .unwrap();
    assert_eq!(
        otlp::attribute_string(&resource.attributes, "service.name").as_deref(),
        Some("sqlgrade")
    );
}
