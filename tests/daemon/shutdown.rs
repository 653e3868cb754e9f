//! Bounded shutdown: after SIGTERM the daemon exits within `pipeline.shutdown_timeout_ms`
//! whatever is unreachable — the broker (with the judge-work topic on it), ClickHouse, both, or
//! the judge endpoint — with a non-zero status and a clear error when something could not be
//! flushed or committed. Nothing unwritten was acknowledged: a daemon started once the servers
//! are back stores every event exactly once and commits every partition to its end.
//!
//! Real tansu, real ClickHouse, the real binary, the scripted LLM (which can hang on demand).

use std::time::{Duration, Instant};

use sqlgrade_testkit::events::stef_reply;
use sqlgrade_testkit::openai_mock::{MockServer, Scripted};
use sqlgrade_testkit::servers::{DEAD_MEMBER_EVICTION, Daemon, Harness, eventually};

/// The shutdown limit the tests configure.
const LIMIT: Duration = Duration::from_secs(6);
/// What the daemon may take past the limit: the run's deadline returns at the limit, the
/// process then gives the runtime 1 s (`main`); the watchdog ends it at limit + 3 s whatever
/// happens. One more second covers process teardown on a loaded machine.
const EXIT_SLACK: Duration = Duration::from_secs(4);
/// Exit status of `run` when shutdown did not finish within the limit.
const EXIT_SHUTDOWN_INCOMPLETE: i32 = 3;

const WORK_TOPIC: &str = "judge-work";

fn shutdown_config() -> String {
    format!("[pipeline]\nshutdown_timeout_ms = {}\n", LIMIT.as_millis())
}

/// SIGTERM, and the exit status and how long the exit took (`None`: it did not exit in time
/// and was killed).
fn terminate(daemon: &mut Daemon) -> (Option<i32>, Duration) {
    let t = Instant::now();
    let code = daemon.terminate(LIMIT + EXIT_SLACK);
    (code, t.elapsed())
}

/// A daemon started, once it has written `rows` STEF rows.
fn written_by_a_daemon(h: &mut Harness, rows: u64) -> Daemon {
    let daemon = h.spawn_daemon();
    assert!(
        h.wait_rows(rows, Duration::from_secs(120)),
        "no progress:\n{}",
        daemon.log_text()
    );
    daemon
}

/// Start the servers that were stopped and a fresh daemon: every event arrives exactly once and
/// every partition is committed to its end.
async fn recovers_everything(h: &mut Harness, events: u64) {
    // The usual commit interval again (a test may have held commits back until shutdown).
    h.source_config.clear();
    // The stopped daemon could not leave the group (its broker or its run was gone).
    tokio::time::sleep(DEAD_MEMBER_EVICTION).await;
    let daemon = h.spawn_daemon();
    assert!(
        h.wait_rows(events, Duration::from_secs(180)),
        "after the restart only {} rows:\n{}",
        h.stef_rows(),
        daemon.log_text()
    );
    h.assert_exactly_all_events();
    assert!(
        h.wait_all_partitions_committed(Duration::from_secs(60)),
        "partitions not committed to their end: {:?}\n{}",
        h.committed_offsets(),
        daemon.log_text()
    );
}

/// 2,000 events written with nothing committed (commits held until shutdown), the broker
/// stopped, then SIGTERM: a non-zero exit within the limit with an error on stderr that
/// contains `says`; nothing lost once the broker is back. The caller sets up the judge.
async fn sigterm_with_the_broker_gone(mut h: Harness, says: &str) {
    h.source_config = "commit_interval_ms = 3600000\n".into();
    h.produce_rest().await;
    let mut daemon = written_by_a_daemon(&mut h, 2_000);
    tokio::task::block_in_place(|| h.servers.kafka.stop());
    let (code, took) = terminate(&mut daemon);
    let log = daemon.log_text();
    assert!(took <= LIMIT + EXIT_SLACK, "took {took:?}:\n{log}");
    assert!(
        code.is_some_and(|c| c != 0),
        "the offsets could not be committed, yet status {code:?}:\n{log}"
    );
    assert!(
        log.contains("sqlgrade: error:") && log.contains(says),
        "no clear error:\n{log}"
    );
    tokio::task::block_in_place(|| h.servers.kafka.start_again());
    recovers_everything(&mut h, 2_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_the_broker_and_its_judge_work_topic_gone_exits_within_the_limit() {
    let _servers = crate::one_at_a_time().await;
    let Some(mut h) = Harness::start("daemon_shutdown_broker", 2_000, 0, false) else {
        return;
    };
    h.servers.kafka.create_topic(WORK_TOPIC, 3);
    let server = MockServer::start().await;
    let reply = stef_reply("likely_correct", 0.8);
    server.respond_with(move |_| Scripted::json(&reply));
    // The second pass hands work over through the topic on the same broker.
    h.extra_config = format!(
        r#"{}
[judge]
kind = "llm"
base_url = "{}"
model = "judge-test"
api_key_env = ""
max_requests_per_second = 200.0
max_retries = 0
timeout_ms = 2000

[judge.budget]
uniform_rate = 0.2
priority_not_correct = false
priority_low_confidence = false
priority_poor_tier = false
priority_new_series = 0
priority_alerting = false
work_topic = "{WORK_TOPIC}"
"#,
        shutdown_config(),
        server.base_url()
    );
    // Which step reports it depends on when the broker's loss is noticed (the final commit,
    // the shutdown deadline, or the judge-work hand-over failing first); each ends the run with
    // its error on stderr.
    sigterm_with_the_broker_gone(h, "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_the_broker_gone_exits_non_zero_within_the_limit() {
    let _servers = crate::one_at_a_time().await;
    let Some(mut h) = Harness::start("daemon_shutdown_broker_only", 2_000, 0, false) else {
        return;
    };
    h.extra_config = shutdown_config();
    // The final commit fails, times out, or the deadline names the unreachable broker.
    sigterm_with_the_broker_gone(h, "commit").await;
}

/// ClickHouse stopped while the daemon has read events it cannot write (and, with
/// `broker_too`, the broker stopped as well), then SIGTERM: exit 3 within the limit, the error
/// naming what was pending; nothing lost once the servers are back.
async fn sigterm_with_clickhouse_gone(test: &str, broker_too: bool) {
    let Some(mut h) = Harness::start(test, 3_000, 0, false) else {
        return;
    };
    h.extra_config = shutdown_config();
    h.produce(2_000).await;
    let mut daemon = written_by_a_daemon(&mut h, 2_000);
    tokio::task::block_in_place(|| h.servers.clickhouse.stop());
    h.produce_rest().await;
    // The sink holds a batch it cannot write (readiness drops when an insert fails).
    assert!(
        eventually(Duration::from_secs(60), || !daemon.ready()),
        "the daemon never tried to write:\n{}",
        daemon.log_text()
    );
    if broker_too {
        tokio::task::block_in_place(|| h.servers.kafka.stop());
    }
    let (code, took) = terminate(&mut daemon);
    let log = daemon.log_text();
    assert!(took <= LIMIT + EXIT_SLACK, "took {took:?}:\n{log}");
    assert_eq!(code, Some(EXIT_SHUTDOWN_INCOMPLETE), "{log}");
    assert!(
        log.contains("shutdown did not finish within") && log.contains("clickhouse: degraded"),
        "the error does not say what was pending:\n{log}"
    );
    tokio::task::block_in_place(|| {
        if broker_too {
            h.servers.kafka.start_again();
        }
        h.servers.clickhouse.start_again();
    });
    recovers_everything(&mut h, 3_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_clickhouse_gone_exits_non_zero_within_the_limit() {
    let _servers = crate::one_at_a_time().await;
    sigterm_with_clickhouse_gone("daemon_shutdown_clickhouse", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_the_broker_and_clickhouse_gone_exits_non_zero_within_the_limit() {
    let _servers = crate::one_at_a_time().await;
    sigterm_with_clickhouse_gone("daemon_shutdown_both", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_the_judge_endpoint_hanging_exits_cleanly_within_the_limit() {
    let _servers = crate::one_at_a_time().await;
    let Some(mut h) = Harness::start("daemon_shutdown_judge", 1_000, 0, false) else {
        return;
    };
    let server = MockServer::start().await;
    let reply = stef_reply("likely_correct", 0.8);
    // Every judgment hangs far beyond the limit (the request timeout is longer still).
    server.respond_with(move |_| Scripted::json(&reply).after(Duration::from_secs(120)));
    h.extra_config = format!(
        r#"{}
[judge]
kind = "llm"
base_url = "{}"
model = "judge-test"
api_key_env = ""
max_retries = 0
timeout_ms = 60000

[judge.budget]
uniform_rate = 0.5
priority_not_correct = false
priority_low_confidence = false
priority_poor_tier = false
priority_new_series = 0
priority_alerting = false
drain_grace_ms = 30000
"#,
        shutdown_config(),
        server.base_url()
    );
    h.produce_rest().await;
    let mut daemon = written_by_a_daemon(&mut h, 1_000);
    assert!(
        eventually(Duration::from_secs(30), || server.request_count() > 0),
        "the judge was never asked:\n{}",
        daemon.log_text()
    );
    let (code, took) = terminate(&mut daemon);
    let log = daemon.log_text();
    assert!(took <= LIMIT + EXIT_SLACK, "took {took:?}:\n{log}");
    // Every line-rate row is written and committed; the judgments that could not finish are
    // counted as shed at shutdown (a budgeted sample), so the exit is clean.
    assert_eq!(code, Some(0), "{log}");
    assert!(
        log.contains("drain grace capped") && log.contains("drain grace period ended"),
        "{log}"
    );
    assert!(
        h.wait_all_partitions_committed(Duration::from_secs(30)),
        "{:?}\n{log}",
        h.committed_offsets()
    );
}
