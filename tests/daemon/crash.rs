//! SIGKILL mid-stream and restart: at-least-once delivery plus the ReplacingMergeTree table give
//! exactly 10,000 distinct events, none missing. Malformed messages go to the `dead_letters`
//! table here (no dead-letter topic): exactly 200 after deduplication.

use sqlgrade_testkit::servers as support;

use std::time::Duration;

use support::Harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_stream_then_restart_loses_nothing() {
    let _servers = crate::one_at_a_time().await;
    let Some(mut h) = Harness::start("daemon_crash", 10_000, 200, false) else {
        return;
    };
    h.produce(5_000).await;
    let mut daemon = h.spawn_daemon();
    assert!(
        h.wait_rows(1_500, Duration::from_secs(120)),
        "no progress:\n{}",
        daemon.log_text()
    );
    daemon.kill9();
    let at_kill = h.stef_rows();
    eprintln!("SIGKILL with {at_kill} rows stored");
    assert!(at_kill < 10_000);

    h.produce_rest().await;
    // Restart once the killed member can be evicted (see `DEAD_MEMBER_EVICTION`).
    tokio::time::sleep(support::DEAD_MEMBER_EVICTION).await;
    let daemon = h.spawn_daemon();
    assert!(
        h.wait_rows(10_000, Duration::from_secs(300)),
        "only {} rows; log:\n{}",
        h.stef_rows(),
        daemon.log_text()
    );
    h.assert_exactly_all_events();
    let ch = &h.servers.clickhouse;
    assert!(support::eventually(Duration::from_secs(30), || {
        ch.count("SELECT count() FROM sqlgrade.dead_letters FINAL") >= 200
    }));
    assert_eq!(
        ch.count("SELECT count() FROM sqlgrade.dead_letters FINAL"),
        200
    );
    assert_eq!(
        ch.count("SELECT count() FROM sqlgrade.dead_letters FINAL WHERE reason = ''"),
        0
    );
    assert_eq!(
        ch.count("SELECT uniqExact(reason) > 1 FROM sqlgrade.dead_letters FINAL"),
        1,
        "several kinds of reasons"
    );
}

/// A message that kills the process every time it is scored: through real Kafka, the daemon dies
/// on it with the window in flight, restarts scoring that window one message at a time (the
/// default, within `serial_budget_ms`), dies on it alone, then dead-letters it with the reason;
/// every other event is stored, none lost, none other dead-lettered.
#[cfg(feature = "test-hooks")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_event_is_dead_lettered_after_two_deaths_one_at_a_time_and_the_rest_is_stored() {
    let _servers = crate::one_at_a_time().await;
    // A budget no loaded machine runs past, so the pass stays serial to the poison event.
    poison_event_scenario("daemon_poison", "poison.serial_budget_ms = 600000\n", 2..=2).await;
}

/// The same with no serial pass (`serial_budget_ms = 0`): the window runs at full concurrency
/// while the guard records what is being scored; the second death names the few messages being
/// scored, the poison event among them (a third death when another was scored beside it).
#[cfg(feature = "test-hooks")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_event_at_full_concurrency_is_named_by_the_scoring_record() {
    let _servers = crate::one_at_a_time().await;
    poison_event_scenario(
        "daemon_poison_record",
        "poison.serial_budget_ms = 0\n",
        2..=3,
    )
    .await;
}

#[cfg(feature = "test-hooks")]
async fn poison_event_scenario(
    test: &str,
    source_config: &str,
    deaths_expected: std::ops::RangeInclusive<u32>,
) {
    const MARK: &str = "POISON-EVENT-3f9a1c";
    let Some(mut h) = Harness::start(test, 3_000, 0, false) else {
        return;
    };
    h.source_config = source_config.to_string();
    h.daemon_env.push((
        sqlgrade::pipeline::ABORT_ON_ENV.to_string(),
        MARK.to_string(),
    ));
    h.produce(1_500).await;
    let poison = serde_json::to_vec(&serde_json::json!({
        "event_id": "poison-1",
        "question": format!("How many heroes? {MARK}"),
        "sql": "SELECT count(*) FROM superhero",
    }))
    .unwrap();
    let at = support::produce_all(&h.producer, support::TOPIC, 1, &[poison]).await;
    eprintln!("poison event at {at:?}");
    h.produce_rest().await;

    // The first life dies with the window in flight; the second records what it scores and
    // dies on the poison event again; a third dies on it scored alone when the second was
    // scoring another message beside it. Then a life dead-letters it and stores the rest.
    let mut deaths = 0;
    let mut daemon = loop {
        let mut daemon = h.spawn_daemon();
        let settled = support::eventually(Duration::from_secs(300), || {
            daemon.exited().is_some() || h.stef_rows() >= 3_000
        });
        assert!(
            settled,
            "life {} neither died nor stored everything:\n{}",
            deaths + 1,
            daemon.log_text()
        );
        // What the guard decided in this life (read when a run goes wrong).
        for line in daemon.log_text().lines() {
            if line.contains("kafka::poison") {
                eprintln!("life {}: {line}", deaths + 1);
            }
        }
        let Some(status) = daemon.exited() else {
            break daemon;
        };
        deaths += 1;
        assert!(!status.success(), "life {deaths}: {status:?}");
        assert!(
            deaths <= *deaths_expected.end(),
            "death {deaths}:\n{}",
            daemon.log_text()
        );
        eprintln!("life {deaths} died: {status:?}");
        daemon.child = None;
        // The dead member must leave the group before the next one takes its partitions.
        tokio::time::sleep(support::DEAD_MEMBER_EVICTION).await;
    };
    assert!(
        deaths_expected.contains(&deaths),
        "the poison event killed {deaths} lives"
    );
    assert!(
        h.wait_rows(3_000, Duration::from_secs(300)),
        "only {} rows; log:\n{}",
        h.stef_rows(),
        daemon.log_text()
    );
    let ch = &h.servers.clickhouse;
    assert!(
        support::eventually(Duration::from_secs(60), || {
            ch.count("SELECT count() FROM sqlgrade.dead_letters FINAL") >= 1
        }),
        "no dead letter; log:\n{}",
        daemon.log_text()
    );
    assert!(daemon.exited().is_none(), "{}", daemon.log_text());
    h.assert_exactly_all_events();
    assert_eq!(
        ch.count("SELECT count() FROM sqlgrade.dead_letters FINAL"),
        1
    );
    assert_eq!(
        ch.count(&format!(
            "SELECT count() FROM sqlgrade.dead_letters FINAL \
             WHERE reason LIKE '%died {deaths} times while this message was in flight%' \
             AND position(payload, '{MARK}') > 0"
        )),
        1,
        "{}",
        ch.query("SELECT source, reason FROM sqlgrade.dead_letters FINAL FORMAT TSV")
    );
    assert_eq!(daemon.terminate(Duration::from_secs(30)), Some(0));
}
