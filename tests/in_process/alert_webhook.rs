//! Alert delivery: the webhook receives the documented JSON, failures are retried, and a dead
//! webhook never stalls scoring.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use sqlgrade::alerts::delivery::Destinations;
use sqlgrade::alerts::{AlertInput, AlertService, AlertsConfig, EstimateSource, RuleSet};
use sqlgrade::commands::backfill::{BackfillFormat, benchmark_events};
use sqlgrade::evaluation::{EvaluationRow, Metric};
use sqlgrade::event::Event;
use sqlgrade::pipeline::Pipeline;
use sqlgrade::score::Scorer;
use sqlgrade::sources::FileSource;
use sqlgrade::stores::JsonlSink;
use tokio::sync::Mutex;

#[derive(Clone, Default)]
struct Receiver {
    /// Requests answered with 500 before the receiver starts accepting.
    fail_first: usize,
    /// Never answer at all.
    hang: bool,
    requests: Arc<AtomicUsize>,
    bodies: Arc<Mutex<Vec<serde_json::Value>>>,
}

async fn receive(State(r): State<Receiver>, body: Bytes) -> StatusCode {
    let n = r.requests.fetch_add(1, Ordering::SeqCst);
    if r.hang {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    if n < r.fail_first {
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    r.bodies
        .lock()
        .await
        .push(serde_json::from_slice(&body).unwrap());
    StatusCode::OK
}

async fn serve(receiver: Receiver) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new()
        .route("/hook", post(receive))
        .with_state(receiver);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/hook")
}

fn rules(webhook: &str) -> AlertsConfig {
    AlertsConfig {
        enabled: true,
        webhook_url: Some(sqlgrade::config::Secret::new(webhook)),
        webhook_timeout_ms: 500,
        delivery_attempts: 4,
        retry_initial_ms: 10,
        retry_max_ms: 40,
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
    }
}

fn row(value: f64) -> EvaluationRow {
    let e = Event::decode(
        br#"{"question":"q","sql":"SELECT 1","app_id":"shop","agent_id":"a","agent_version":"v2","model":"m"}"#,
    )
    .unwrap();
    let mut row = EvaluationRow::for_event(&e, "2026-11-21T00:00:00Z", Metric::Stef);
    row.value = value;
    row
}

#[tokio::test]
async fn webhook_gets_slack_and_alertmanager_json_after_retries() {
    let receiver = Receiver {
        fail_first: 2,
        ..Receiver::default()
    };
    let url = serve(receiver.clone()).await;
    let config = rules(&url);
    let destinations = Destinations {
        webhook_url: Some(url),
        recording: Default::default(),
        review_url: Some("https://review.example:8089".into()),
    };
    let (service, handle) =
        AlertService::start(config, destinations, EstimateSource::Judge).unwrap();
    for phase in [85.0, 40.0, 85.0] {
        for i in 0..300 {
            let v = phase + if i % 2 == 0 { 5.0 } else { -5.0 };
            assert!(handle.offer(AlertInput::Rows(vec![row(v)])));
            // Let the engine keep up (the queue holds 10 000; this only keeps order readable).
            if i % 100 == 0 {
                tokio::task::yield_now().await;
            }
        }
    }
    let counters = Arc::clone(service.counters());
    drop(handle);
    service.finish().await.unwrap();

    assert_eq!(counters.notifications.load(Ordering::SeqCst), 2);
    assert_eq!(counters.webhook_delivered.load(Ordering::SeqCst), 2);
    assert_eq!(counters.webhook_failed_attempts.load(Ordering::SeqCst), 2);
    assert_eq!(counters.webhook_gave_up.load(Ordering::SeqCst), 0);
    assert_eq!(receiver.requests.load(Ordering::SeqCst), 4);

    let bodies = receiver.bodies.lock().await;
    assert_eq!(bodies.len(), 2);
    let (firing, resolved) = (&bodies[0], &bodies[1]);
    // Slack incoming webhook: a `text` field.
    let text = firing["text"].as_str().unwrap();
    assert!(text.starts_with("[FIRING] sqlgrade score_drop"), "{text}");
    assert!(text.contains("agent_version=v2"), "{text}");
    // Alertmanager webhook receiver format.
    assert_eq!(firing["version"], "4");
    assert_eq!(firing["status"], "firing");
    assert_eq!(firing["receiver"], "sqlgrade");
    assert_eq!(firing["truncatedAlerts"], 0);
    assert!(firing["groupKey"].is_string());
    assert!(firing["commonAnnotations"].is_object());
    let alert = &firing["alerts"][0];
    assert_eq!(alert["status"], "firing");
    assert_eq!(alert["labels"]["alertname"], "score_drop");
    assert_eq!(alert["labels"]["metric"], "stef");
    assert_eq!(alert["labels"]["app_id"], "shop");
    assert_eq!(alert["labels"]["agent_version"], "v2");
    assert_eq!(alert["labels"]["severity"], "warning");
    assert_eq!(alert["endsAt"], "0001-01-01T00:00:00Z");
    assert!(chrono::DateTime::parse_from_rfc3339(alert["startsAt"].as_str().unwrap()).is_ok());
    assert!(alert["annotations"]["summary"].is_string());
    // With `[alerts] review_url`, the alert links to its events in the review queue.
    let id = alert["annotations"]["alert_id"].as_str().unwrap();
    let link = format!("https://review.example:8089/queue?alert={id}");
    assert_eq!(alert["generatorURL"], link.as_str());
    assert_eq!(firing["externalURL"], "https://review.example:8089");
    assert!(
        text.contains(&format!("Review its events: {link}")),
        "{text}"
    );
    assert_eq!(resolved["status"], "resolved");
    let resolved_alert = &resolved["alerts"][0];
    assert_eq!(resolved_alert["fingerprint"], alert["fingerprint"]);
    assert_eq!(resolved_alert["startsAt"], alert["startsAt"]);
    assert!(
        chrono::DateTime::parse_from_rfc3339(resolved_alert["endsAt"].as_str().unwrap()).is_ok()
    );
    assert!(resolved["text"].as_str().unwrap().starts_with("[RESOLVED]"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_webhook_never_stalls_scoring() {
    // A webhook that accepts connections and never answers.
    let receiver = Receiver {
        hang: true,
        ..Receiver::default()
    };
    let url = serve(receiver.clone()).await;
    // Hair-trigger rules so the real BIRD stream produces many notifications, and tiny queues so
    // they overflow while the webhook hangs.
    let mut config = rules(&url);
    config.channel_capacity = 2;
    config.defaults = RuleSet {
        recent_window: 10,
        baseline_window: 10,
        min_samples: 5,
        evaluate_every: 1,
        fire_after: 1,
        resolve_after: 1,
        alpha: 0.5,
        stef_min_drop: 0.0,
        resolve_ratio: 0.5,
        poor_share_min_increase: 0.0,
        judge_fallback_min_increase: 0.0,
        dead_letter_min_increase: 0.0,
        ..RuleSet::default()
    };
    let (service, handle) = AlertService::start(
        config,
        Destinations {
            webhook_url: Some(url),
            recording: Default::default(),
            review_url: None,
        },
        EstimateSource::Judge,
    )
    .unwrap();
    let counters = Arc::clone(service.counters());

    let bird = sqlgrade_testkit::data::data_dir().join("bird");
    let events = benchmark_events(
        BackfillFormat::Bird,
        &bird.join("dev.jsonl"),
        &bird.join("predictions/DAIL-SQL.jsonl"),
        None,
    )
    .unwrap()
    .events;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.jsonl");
    let mut text = String::new();
    for e in &events {
        text.push_str(&serde_json::to_string(e).unwrap());
        text.push('\n');
    }
    std::fs::write(&input, text).unwrap();
    let out = dir.path().join("out");
    let pipeline = Pipeline::new(
        Box::new(FileSource::new(&input, false, 1 << 20)),
        Box::new(JsonlSink::open(&out).await.unwrap()),
        Arc::new(Scorer::deterministic()),
        &sqlgrade::config::PipelineConfig::default(),
        &sqlgrade::config::SinkConfig::default(),
    )
    .with_alerts(handle);
    let (_tx, shutdown) = tokio::sync::watch::channel(false);
    // Generous bound: this guards against a hang, it is not a performance assertion.
    let summary = tokio::time::timeout(Duration::from_secs(120), pipeline.run(shutdown))
        .await
        .expect("scoring stalled behind the alert webhook")
        .unwrap();
    assert_eq!(summary.events, events.len() as u64);
    let written = std::fs::read_to_string(out.join("evaluations.jsonl")).unwrap();
    assert_eq!(written.lines().count(), events.len());

    let queued = counters.inputs_queued.load(Ordering::SeqCst);
    let dropped = counters.inputs_dropped.load(Ordering::SeqCst);
    assert_eq!(queued + dropped, events.len() as u64);
    eprintln!(
        "inputs queued {queued}, dropped {dropped}; notifications {} (dropped {}); webhook requests {}",
        counters.notifications.load(Ordering::SeqCst),
        counters.notifications_dropped.load(Ordering::SeqCst),
        receiver.requests.load(Ordering::SeqCst)
    );
    // The webhook was tried (and is being retried) while scoring finished.
    assert!(receiver.requests.load(Ordering::SeqCst) >= 1);
    assert!(counters.notifications.load(Ordering::SeqCst) >= 1);
    drop(service);
}
