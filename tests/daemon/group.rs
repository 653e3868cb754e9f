//! Two daemons in one consumer group share the partitions: 10,000 distinct events, none missing,
//! and both members did work.

use sqlgrade_testkit::servers as support;

use std::time::Duration;

use support::Harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_in_one_group_share_the_work() {
    let _servers = crate::one_at_a_time().await;
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

/// The partitions of the last "partitions assigned" line of a daemon's log.
fn last_assignment(log: &str) -> Option<String> {
    log.lines()
        .rev()
        .find(|l| l.contains("partitions assigned"))
        .and_then(|l| l.split("partitions=").nth(1))
        .map(|p| p.trim().to_string())
}

/// Rebalance lines (assignments and revocations) in a daemon's log.
fn rebalances(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("partitions assigned") || l.contains("partitions revoked"))
        .count()
}

/// A member SIGKILLed mid-stream and restarted as orchestrators do: every partition ends up
/// consumed and committed to its end, nothing lost. tansu 0.6 (the broker here) evicts a dead
/// dynamic member when a member joins after the dead one's session timed out (its join runs
/// the missed-heartbeat check), so the restart waits [`support::DEAD_MEMBER_EVICTION`]; a restart within the session can leave the dead member's partitions
/// assigned to it on tansu. Static membership (`group_instance_id`), which avoids the wait on
/// Apache Kafka, does not form a group with librdkafka on tansu 0.6 (a second static member
/// never got an assignment), so it cannot be run here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_killed_and_restarted_leaves_no_partition_unconsumed() {
    let _servers = crate::one_at_a_time().await;
    let Some(mut h) = Harness::start("daemon_group_restart", 10_000, 0, false) else {
        return;
    };
    h.produce(3_000).await;
    let mut a = h.spawn_daemon();
    let b = h.spawn_daemon();
    assert!(
        support::eventually(Duration::from_secs(120), || {
            last_assignment(&a.log_text()).is_some_and(|p| p != "[]")
                && last_assignment(&b.log_text()).is_some_and(|p| p != "[]")
        }),
        "the group never formed with both members:\n{}\n----\n{}",
        a.log_text(),
        b.log_text()
    );
    assert!(
        h.wait_rows(1_000, Duration::from_secs(120)),
        "no progress:\n{}",
        a.log_text()
    );
    a.kill9();
    h.produce_rest().await;
    tokio::time::sleep(support::DEAD_MEMBER_EVICTION).await;
    let restarted = h.spawn_daemon();
    assert!(
        h.wait_rows(10_000, Duration::from_secs(300)),
        "only {} rows; partitions (committed, end) {:?}:\n{}\n----\n{}",
        h.stef_rows(),
        h.committed_offsets(),
        restarted.log_text(),
        b.log_text()
    );
    h.assert_exactly_all_events();
    assert!(
        h.wait_all_partitions_committed(Duration::from_secs(60)),
        "partitions not committed to their end: {:?}",
        h.committed_offsets()
    );
    assert!(
        rebalances(&b.log_text()) > 1,
        "the surviving member never took part in a rebalance:\n{}",
        b.log_text()
    );
}
