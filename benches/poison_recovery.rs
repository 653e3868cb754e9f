//! Recovery from a poison event: how long after a death the daemon needs before every message
//! that was in flight is stored again.
//!
//!   SQLGRADE_BIN=BUILD cargo bench --bench poison_recovery -- [--events N]
//!       [--max-in-flight M] [--poison-at K] [--lives L] [--batch-rows B] [--flush-ms F]
//!       [--serial-budget-ms S]
//!
//! `BUILD` is a `sqlgrade` built with the `test-hooks` feature (`cargo build --release
//! --features test-hooks`): its `SQLGRADE_TEST_ABORT_ON` hook aborts the process when a payload
//! holds the mark — a real crash (SIGABRT), not a simulated one. Starts its own tansu and
//! ClickHouse (`scripts/services.sh install` first), produces N real events (default 5,000; 3
//! partitions) with one marked event after the K-th (default N/2), then runs the daemon with
//! `source.max_in_flight = M` (default 100,000, production's) and the sink's batches of
//! production's config (`batch_rows` B = 50,000, `flush_interval_ms` F = 1,000: what was scored
//! in the last second is not stored yet) until it has died once with the window in flight (the
//! windows each partition's marker names are printed from the second life's log). From the first restart on it times the daemon until every event of the
//! window is stored in ClickHouse and the poison event is dead-lettered, counting the deaths on
//! the way (each followed by the consumer group's eviction of the dead member, as the tests
//! wait, which is inside the time and reported beside it). At most L lives (default 6).
//!
//! `--serial-budget-ms` sets `[source.poison] serial_budget_ms` (a build that knows it): 0 runs
//! the window at full concurrency from the first restart, recording what is being scored.
//!
//! Prints one line: deaths, seconds from the first restart to the last row, the eviction waits
//! inside that time, and the rows and dead letters stored.

use std::time::{Duration, Instant};

use sqlgrade_testkit::servers::{
    ClickHouse, DEAD_MEMBER_EVICTION, Harness, TOPIC, eventually, produce_all,
};

/// STEF rows and dead letters stored.
fn stored(ch: &ClickHouse) -> (u64, u64) {
    ch.try_query(
        "SELECT (SELECT count() FROM sqlgrade.evaluations FINAL WHERE metric = 'stef'), \
         (SELECT count() FROM sqlgrade.dead_letters FINAL) FORMAT TSV",
    )
    .ok()
    .and_then(|line| {
        let mut parts = line.split_whitespace().map(|n| n.parse::<u64>().ok());
        Some((parts.next()??, parts.next()??))
    })
    .unwrap_or((0, 0))
}

fn arg(name: &str) -> Option<usize> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test --all-targets` runs bench binaries without `--bench`: the daemon tests
        // (`tests/daemon/crash.rs`) cover correctness, so there is nothing to measure here.
        println!("poison_recovery: skipped outside `cargo bench`");
        return;
    }
    const MARK: &str = "POISON-EVENT-bench-7c2e";
    let events = arg("--events").unwrap_or(5_000);
    let max_in_flight = arg("--max-in-flight").unwrap_or(100_000);
    let poison_at = arg("--poison-at").unwrap_or(events / 2).min(events);
    let lives = arg("--lives").unwrap_or(6);
    let Some(mut h) = Harness::start("bench_poison", events, 0, false) else {
        eprintln!("servers unavailable: skipped");
        return;
    };
    h.max_in_flight = max_in_flight;
    if let Some(budget) = arg("--serial-budget-ms") {
        h.source_config = format!("poison.serial_budget_ms = {budget}\n");
    }
    h.batch = (
        arg("--batch-rows").unwrap_or(50_000),
        arg("--flush-ms").unwrap_or(1_000) as u64,
    );
    h.daemon_env
        .push(("SQLGRADE_TEST_ABORT_ON".to_string(), MARK.to_string()));
    h.produce(poison_at).await;
    let poison = serde_json::to_vec(&serde_json::json!({
        "event_id": "poison-1",
        "question": format!("How many heroes? {MARK}"),
        "sql": "SELECT count(*) FROM superhero",
    }))
    .expect("json");
    produce_all(&h.producer, TOPIC, 1, &[poison]).await;
    h.produce_rest().await;

    // The first life takes the backlog in flight and dies on the poison event.
    let mut daemon = h.spawn_daemon();
    if !eventually(Duration::from_secs(300), || daemon.exited().is_some()) {
        eprintln!("the first life did not die:\n{}", daemon.log_text());
        std::process::exit(1);
    }
    daemon.child = None;
    tokio::time::sleep(DEAD_MEMBER_EVICTION).await;

    let started = Instant::now();
    let mut deaths = 1;
    let mut evictions = Duration::ZERO;
    let mut finished = None;
    for _ in 1..lives {
        let mut daemon = h.spawn_daemon();
        let settled = eventually(Duration::from_secs(1_800), || {
            daemon.exited().is_some() || {
                let (rows, dead) = stored(&h.servers.clickhouse);
                rows >= events as u64 && dead >= 1
            }
        });
        if deaths == 1 {
            for line in daemon.log_text().lines() {
                if line.contains("in flight") && line.contains("upto") {
                    eprintln!("{line}");
                }
            }
        }
        if daemon.exited().is_some() {
            deaths += 1;
            daemon.child = None;
            let eviction = Instant::now();
            tokio::time::sleep(DEAD_MEMBER_EVICTION).await;
            evictions += eviction.elapsed();
            continue;
        }
        if settled {
            finished = Some(started.elapsed());
        }
        daemon.terminate(Duration::from_secs(30));
        break;
    }
    let (rows, dead) = stored(&h.servers.clickhouse);
    match finished {
        Some(elapsed) => println!(
            "poison recovery: {events} events, max_in_flight {max_in_flight}: {deaths} deaths; \
             {:.1} s from the first restart to the last row ({:.1} s of it waiting for the group \
             to evict the dead member); {rows} rows, {dead} dead letters",
            elapsed.as_secs_f64(),
            evictions.as_secs_f64()
        ),
        None => {
            println!(
                "poison recovery: {events} events, max_in_flight {max_in_flight}: not done \
                 after {deaths} deaths ({rows} rows, {dead} dead letters)"
            );
            std::process::exit(1);
        }
    }
}
