//! Two daemons in one consumer group share the partitions: 10,000 distinct events, none missing,
//! and both members did work.

use sqlgrade_testkit::servers as support;

use std::time::Duration;

use support::Harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_in_one_group_share_the_work() {
    let Some(mut h) = Harness::start("daemon_group", 10_000, 0, false) else {
        return;
    };
    h.produce(3_000).await;
    let first = h.spawn_daemon();
    let second = h.spawn_daemon();
    assert!(
        h.wait_rows(1_000, Duration::from_secs(120)),
        "no progress:\n{}",
        first.log_text()
    );
    h.produce_rest().await;
    assert!(
        h.wait_rows(10_000, Duration::from_secs(300)),
        "only {} rows; logs:\n{}\n----\n{}",
        h.stef_rows(),
        first.log_text(),
        second.log_text()
    );
    h.assert_exactly_all_events();
    for d in [&first, &second] {
        let log = d.log_text();
        assert!(
            log.contains("partitions=[(\"agent-events\"") && log.contains("partitions assigned"),
            "a member never got a partition:\n{log}"
        );
    }
}
