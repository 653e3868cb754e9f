//! SIGKILL mid-stream and restart: at-least-once delivery plus the ReplacingMergeTree table give
//! exactly 10,000 distinct events, none missing. Malformed messages go to the `dead_letters`
//! table here (no dead-letter topic): exactly 200 after deduplication.

use sqlgrade_testkit::servers as support;

use std::time::Duration;

use support::Harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_stream_then_restart_loses_nothing() {
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
