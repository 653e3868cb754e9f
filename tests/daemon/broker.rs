//! The broker restarts mid-stream: the consumer reconnects and nothing is lost.

use sqlgrade_testkit::servers as support;

use std::time::Duration;

use support::Harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_restart_mid_stream_loses_nothing() {
    let _servers = crate::one_at_a_time().await;
    let Some(mut h) = Harness::start("daemon_broker", 10_000, 0, false) else {
        return;
    };
    h.produce(5_000).await;
    let daemon = h.spawn_daemon();
    assert!(
        h.wait_rows(1_500, Duration::from_secs(120)),
        "no progress:\n{}",
        daemon.log_text()
    );
    tokio::task::block_in_place(|| h.servers.kafka.restart());
    h.produce_rest().await;
    assert!(
        h.wait_rows(10_000, Duration::from_secs(300)),
        "only {} rows; log:\n{}",
        h.stef_rows(),
        daemon.log_text()
    );
    h.assert_exactly_all_events();
}
