//! ClickHouse stopped for 20 s mid-stream: the sink holds its batch (and the offsets), the daemon
//! reports not-ready, and once the server is back everything arrives without a restart.

use sqlgrade_testkit::servers as support;

use std::time::{Duration, Instant};

use support::Harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickhouse_outage_of_twenty_seconds_loses_nothing() {
    let _servers = crate::one_at_a_time().await;
    let Some(mut h) = Harness::start("daemon_outage", 10_000, 0, false) else {
        return;
    };
    h.produce(5_000).await;
    let daemon = h.spawn_daemon();
    assert!(
        h.wait_rows(1_500, Duration::from_secs(120)),
        "no progress:\n{}",
        daemon.log_text()
    );
    assert!(support::eventually(Duration::from_secs(10), || daemon.ready()));

    let down = Instant::now();
    tokio::task::block_in_place(|| h.servers.clickhouse.stop());
    h.produce_rest().await;
    assert!(
        support::eventually(Duration::from_secs(15), || !daemon.ready()),
        "readiness should drop while ClickHouse is down"
    );
    let left = Duration::from_secs(20).saturating_sub(down.elapsed());
    tokio::time::sleep(left).await;
    tokio::task::block_in_place(|| h.servers.clickhouse.start_again());

    assert!(
        h.wait_rows(10_000, Duration::from_secs(300)),
        "only {} rows; log:\n{}",
        h.stef_rows(),
        daemon.log_text()
    );
    h.assert_exactly_all_events();
    assert!(
        support::eventually(Duration::from_secs(20), || daemon.ready()),
        "ready again"
    );
    assert!(
        daemon.log_text().contains("retrying"),
        "the outage was noticed and retried"
    );
}
