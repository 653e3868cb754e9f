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

/// Static membership (`[source] group_instance_id`): a member SIGKILLed mid-stream and
/// restarted with the same id takes its own partitions back — the broker hands the returning
/// instance its member id and assignment (KIP-345; tansu 0.6 implements that part) — with no
/// rebalance of the other member, and nothing is lost: every event stored exactly once, every
/// partition committed to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_restarted_after_sigkill_takes_its_own_partitions_back() {
    let Some(mut h) = Harness::start("daemon_group_static", 10_000, 0, false) else {
        return;
    };
    h.produce(3_000).await;
    let mut a = h.spawn_member(Some("member-a"));
    let b = h.spawn_member(Some("member-b"));
    // Both members hold partitions (the group formed) and work is being written.
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
    let owned = last_assignment(&a.log_text()).unwrap_or_default();
    let b_rebalances = rebalances(&b.log_text());
    a.kill9();
    h.produce_rest().await;
    let restarted = h.spawn_member(Some("member-a"));
    assert!(
        support::eventually(Duration::from_secs(60), || {
            last_assignment(&restarted.log_text()).is_some()
        }),
        "the restarted member got no assignment:\n{}",
        restarted.log_text()
    );
    assert!(
        h.wait_rows(10_000, Duration::from_secs(300)),
        "only {} rows; partitions {:?}:\n{}\n----\n{}",
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
    assert_eq!(
        last_assignment(&restarted.log_text()).as_deref(),
        Some(owned.as_str()),
        "the restarted member holds other partitions than before:\n{}",
        restarted.log_text()
    );
    assert_eq!(
        rebalances(&b.log_text()),
        b_rebalances,
        "the other member went through a rebalance:\n{}",
        b.log_text()
    );
}
