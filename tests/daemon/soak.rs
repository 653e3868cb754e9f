//! A soak with faults, sized for CI: real tansu, real ClickHouse, the real daemon with the
//! judge-work topic, a scripted judge. Events arrive in four waves while the broker and
//! ClickHouse are each SIGKILLed and started again on the same data, and the judge answers 503
//! for a while; then SIGTERM. The daemon never exits before the SIGTERM, every event has
//! exactly one line-rate row after `FINAL`, judged rows resume after each fault and no
//! judgment is lost to the outage as `judge_error`, the summary counts the outages, and the
//! SIGTERM exits 0 (issue: keep running through outages).

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use sqlgrade_testkit::events::stef_reply;
use sqlgrade_testkit::openai_mock::MockServer;
use sqlgrade_testkit::servers::{Daemon, Harness, eventually, second_pass_config};

const WORK_TOPIC: &str = "judge-work";
const SALT: &str = "soak";
const RATE: f64 = 0.1;
const WAVE: usize = 1_500;
/// How long each dependency stays down.
const OUTAGE: Duration = Duration::from_secs(8);

fn judged(h: &Harness) -> u64 {
    h.servers
        .clickhouse
        .try_query(
            "SELECT count() FROM sqlgrade.evaluations FINAL WHERE metric = 'stef_judged' \
             AND status = 'ok'",
        )
        .ok()
        .and_then(|b| b.trim().parse().ok())
        .unwrap_or(0)
}

fn still_running(daemon: &mut Daemon, when: &str) {
    let exited = daemon
        .child
        .as_mut()
        .and_then(|c| c.try_wait().ok().flatten());
    assert!(
        exited.is_none(),
        "the daemon exited {when} ({exited:?}):\n{}",
        daemon.log_text()
    );
}

/// Wait for `rows` line-rate rows and for judged rows beyond `judged_before`.
fn wait_progress(h: &Harness, daemon: &Daemon, rows: u64, judged_before: u64, after: &str) -> u64 {
    assert!(
        h.wait_rows(rows, Duration::from_secs(180)),
        "fewer than {rows} rows after {after}:\n{}",
        daemon.log_text()
    );
    assert!(
        eventually(Duration::from_secs(120), || judged(h) > judged_before),
        "no judged row after {after} ({judged_before} before):\n{}",
        daemon.log_text()
    );
    judged(h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_a_clickhouse_and_a_judge_outage_neither_stop_the_daemon_nor_lose_events() {
    let _servers = crate::one_at_a_time().await;
    let Some(mut h) = Harness::start("daemon_soak", 4 * WAVE, 0, false) else {
        return;
    };
    h.servers.kafka.create_topic(WORK_TOPIC, 3);
    let server = MockServer::start().await;
    let judge_up =
        server.respond_unless_down(stef_reply("likely_correct", 0.8), Duration::from_millis(20));
    h.extra_config = second_pass_config(&server.base_url(), RATE, SALT, WORK_TOPIC);
    let mut daemon = h.spawn_daemon();

    // Wave 1, undisturbed.
    h.produce(WAVE).await;
    let mut done = wait_progress(&h, &daemon, WAVE as u64, 0, "wave 1");

    // The broker crashes and comes back on the same storage.
    tokio::task::block_in_place(|| h.servers.kafka.kill());
    tokio::time::sleep(OUTAGE).await;
    still_running(&mut daemon, "while the broker was down");
    tokio::task::block_in_place(|| h.servers.kafka.start_again());
    h.produce(WAVE).await;
    done = wait_progress(&h, &daemon, 2 * WAVE as u64, done, "the broker outage");
    still_running(&mut daemon, "after the broker outage");

    // ClickHouse crashes and comes back on the same data.
    tokio::task::block_in_place(|| h.servers.clickhouse.kill());
    h.produce(WAVE).await;
    tokio::time::sleep(OUTAGE).await;
    still_running(&mut daemon, "while ClickHouse was down");
    tokio::task::block_in_place(|| h.servers.clickhouse.start_again());
    done = wait_progress(&h, &daemon, 3 * WAVE as u64, done, "the ClickHouse outage");
    still_running(&mut daemon, "after the ClickHouse outage");

    // The judge answers 503 for a while: its work waits instead of failing.
    judge_up.store(false, Ordering::SeqCst);
    h.produce_rest().await;
    tokio::time::sleep(OUTAGE).await;
    still_running(&mut daemon, "while the judge was down");
    judge_up.store(true, Ordering::SeqCst);
    wait_progress(&h, &daemon, 4 * WAVE as u64, done, "the judge outage");

    // Every selected event judged once: the uniform slice of the scorable events.
    let expected: BTreeSet<String> = h.uniform_slice(SALT, RATE);
    assert!(
        eventually(Duration::from_secs(180), || judged(&h)
            >= expected.len() as u64),
        "{} of {} judged:\n{}",
        judged(&h),
        expected.len(),
        daemon.log_text()
    );
    still_running(&mut daemon, "before the SIGTERM");
    assert_eq!(
        daemon.terminate(Duration::from_secs(35)),
        Some(0),
        "SIGTERM must exit 0 within 35 s:\n{}",
        daemon.log_text()
    );

    h.assert_exactly_all_events();
    let judged_ids: BTreeSet<String> = h
        .servers
        .clickhouse
        .query(
            "SELECT event_id FROM sqlgrade.evaluations FINAL WHERE metric = 'stef_judged' \
             ORDER BY event_id",
        )
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(judged_ids, expected, "exactly the uniform slice, once each");
    let errors = h.servers.clickhouse.count(
        "SELECT count() FROM sqlgrade.evaluations FINAL WHERE metric = 'stef_judged' \
         AND status != 'ok'",
    );
    assert_eq!(
        errors,
        0,
        "no judgment lost to an outage:\n{}",
        daemon.log_text()
    );
    // The summary says what was down, how often and how long.
    let log = daemon.log_text();
    let outages = log
        .lines()
        .find(|l| l.trim_start().starts_with("outages"))
        .unwrap_or_else(|| panic!("no outages line in the summary:\n{log}"));
    eprintln!(
        "{}\njudged {} of {} selected",
        outages.trim(),
        judged_ids.len(),
        expected.len()
    );
    assert!(
        outages.contains("kafka") || outages.contains("clickhouse"),
        "{outages}"
    );
    // Each component's episodes come with the failed attempts it retried.
    assert!(outages.contains("failed attempt(s)"), "{outages}");
    assert!(log.contains("judge paused"), "{log}");
}
