//! The daemon end to end against real servers: Kafka (tansu) → `sqlgrade run` → ClickHouse.
//!
//! 10,000 events from the real corpus plus 200 malformed messages on a 3-partition topic: every
//! event stored exactly once, exactly 200 dead letters (with reasons) on the dead-letter topic.
//! SIGTERM mid-stream exits 0 having flushed and committed exactly what it consumed.

use sqlgrade_testkit::servers as support;

use std::collections::BTreeSet;
use std::time::Duration;

use support::{DLQ_TOPIC, GROUP, Harness, PARTITIONS, TOPIC};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_events_and_two_hundred_dead_letters() {
    let _servers = crate::one_at_a_time().await;
    let Some(mut h) = Harness::start("daemon_flow", 10_000, 200, true) else {
        return;
    };
    h.produce(4_000).await;
    let mut daemon = h.spawn_daemon();
    assert!(
        h.wait_rows(1_000, Duration::from_secs(120)),
        "daemon made no progress:\n{}",
        daemon.log_text()
    );

    // SIGTERM mid-stream: exit 0, and what is committed is exactly what is stored.
    let code = daemon.terminate(Duration::from_secs(60));
    assert_eq!(code, Some(0), "daemon log:\n{}", daemon.log_text());
    let committed = support::committed(&h.servers.kafka.brokers(), GROUP, TOPIC, PARTITIONS);
    let stored: BTreeSet<String> = h.stored_ids().into_iter().collect();
    let below_commit: BTreeSet<String> = h
        .positions
        .iter()
        .filter(|(_, (p, o))| committed.get(p).is_some_and(|c| o < c))
        .map(|(id, _)| id.clone())
        .collect();
    assert!(!below_commit.is_empty(), "nothing committed: {committed:?}");
    assert_eq!(
        stored, below_commit,
        "after SIGTERM, stored events must equal the committed prefix ({committed:?})"
    );
    eprintln!(
        "SIGTERM after {} events; committed {committed:?}",
        stored.len()
    );

    // Restart and produce the rest: every event exactly once.
    h.produce_rest().await;
    let mut daemon = h.spawn_daemon();
    assert!(
        h.wait_rows(10_000, Duration::from_secs(300)),
        "only {} rows; log:\n{}",
        h.stef_rows(),
        daemon.log_text()
    );
    h.assert_exactly_all_events();

    // Exactly the 200 malformed payloads on the dead-letter topic, with reasons.
    let brokers = h.servers.kafka.brokers();
    let letters =
        tokio::task::spawn_blocking(move || support::read_topic(&brokers, DLQ_TOPIC, 201))
            .await
            .unwrap();
    assert_eq!(letters.len(), 200);
    let mut got: Vec<Vec<u8>> = letters.iter().map(|(p, _)| p.clone()).collect();
    let mut want = h.malformed.clone();
    got.sort();
    want.sort();
    assert_eq!(
        got, want,
        "dead letters are the malformed payloads, byte for byte"
    );
    for (_, headers) in &letters {
        assert!(!headers["sqlgrade-reason"].is_empty());
    }
    // Readiness while running, then a clean exit.
    assert!(support::eventually(Duration::from_secs(10), || daemon.ready()));
    assert_eq!(daemon.terminate(Duration::from_secs(60)), Some(0));
    let committed = support::committed(&h.servers.kafka.brokers(), GROUP, TOPIC, PARTITIONS);
    let total: i64 = committed.values().sum();
    assert_eq!(
        total, 10_200,
        "everything committed at the end: {committed:?}"
    );
}
