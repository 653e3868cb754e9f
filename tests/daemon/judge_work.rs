//! The second pass on Kafka survives a crash: real tansu, real ClickHouse, the real daemon, the
//! scripted LLM. Selected events go to the judge-work topic; the daemon is SIGKILLed while it
//! judges and started again. Afterwards every selected event has exactly one `stef_judged` row
//! (FINAL), the selection is exactly the uniform slice the hash decides (the same for both
//! daemons), and no event lacks its line-rate row.

use std::collections::BTreeSet;
use std::time::Duration;

use sqlgrade_testkit::events::stef_reply;
use sqlgrade_testkit::openai_mock::{MockServer, Scripted};
use sqlgrade_testkit::servers::{self as support, Harness, eventually};

const WORK_TOPIC: &str = "judge-work";
const SALT: &str = "crash-test";
const RATE: f64 = 0.2;

fn judged_ids(h: &Harness) -> Vec<String> {
    let body = h.servers.clickhouse.query(
        "SELECT event_id FROM sqlgrade.evaluations FINAL WHERE metric = 'stef_judged' \
         ORDER BY event_id",
    );
    body.lines().map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn judge_work_survives_a_crash_exactly_once() {
    let _servers = crate::one_at_a_time().await;
    let Some(mut h) = Harness::start("daemon_judge_work", 2_000, 0, false) else {
        return;
    };
    h.servers.kafka.create_topic(WORK_TOPIC, 3);
    let server = MockServer::start().await;
    let reply = stef_reply("likely_correct", 0.8);
    server.respond_with(move |_| Scripted::json(&reply).after(Duration::from_millis(150)));
    h.extra_config = format!(
        r#"[judge]
kind = "llm"
base_url = "{}"
model = "judge-test"
api_key_env = ""
max_requests_per_second = 40.0
max_concurrency = 8
max_retries = 1
timeout_ms = 5000

[judge.budget]
uniform_rate = {RATE}
salt = "{SALT}"
priority_not_correct = false
priority_low_confidence = false
priority_poor_tier = false
priority_new_series = 0
priority_alerting = false
work_topic = "{WORK_TOPIC}"
drain_grace_ms = 1000
"#,
        server.base_url()
    );

    let mut first = h.spawn_daemon();
    h.produce_rest().await;
    // Crash while judging: some judged rows are stored, far from all.
    let started = eventually(Duration::from_secs(120), || judged_ids(&h).len() >= 30);
    assert!(
        started,
        "the first daemon judged nothing:\n{}",
        first.log_text()
    );
    first.kill9();
    let judged_before = judged_ids(&h).len();

    // Restart once the killed member can be evicted (see `DEAD_MEMBER_EVICTION`).
    tokio::time::sleep(support::DEAD_MEMBER_EVICTION).await;
    let mut second = h.spawn_daemon();
    assert!(
        h.wait_rows(2_000, Duration::from_secs(180)),
        "line-rate rows missing:\n{}",
        second.log_text()
    );
    // The expected selection: scorable events in the uniform slice of the hash.
    let expected: BTreeSet<String> = h.uniform_slice(SALT, RATE);
    assert!(expected.len() > 300, "{}", expected.len());
    let done = eventually(Duration::from_secs(180), || {
        judged_ids(&h).len() >= expected.len()
    });
    let judged = judged_ids(&h);
    assert!(
        done,
        "{} of {} judged (before the crash: {judged_before}):\n{}",
        judged.len(),
        expected.len(),
        second.log_text()
    );
    second.terminate(Duration::from_secs(30));

    // Exactly one judged row per selected event, and nothing else judged.
    let judged_set: BTreeSet<String> = judged.iter().cloned().collect();
    assert_eq!(judged.len(), judged_set.len(), "FINAL collapses duplicates");
    assert_eq!(
        judged_set, expected,
        "the judged set is exactly the uniform slice"
    );
    // Every judged row records its selection and the line-rate row it revises.
    let bad = h.servers.clickhouse.count(
        "SELECT count() FROM sqlgrade.evaluations FINAL WHERE metric = 'stef_judged' \
         AND (selection != 'uniform' OR inclusion_probability IS NULL OR revised_value IS NULL)",
    );
    assert_eq!(bad, 0);
    // No event lost its line-rate row.
    h.assert_exactly_all_events();
    // The calibrated-estimate view sees them.
    let uniform = h
        .servers
        .clickhouse
        .count("SELECT sum(judged_uniform) FROM sqlgrade.stef_estimates_hourly");
    assert_eq!(uniform, expected.len() as u64);
    // The LLM was not paid twice for much: the durable cache answers what daemon 1 stored.
    let requests = server.request_count();
    assert!(
        requests < expected.len() + 100,
        "{requests} requests for {} judgments",
        expected.len()
    );
    let _ = support::free_port();
}
