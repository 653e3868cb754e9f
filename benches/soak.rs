//! The long soak with faults, as a benchmark (not in CI):
//!
//!   cargo bench --bench soak -- [--minutes 30] [--rate 100]
//!
//! Real tansu, real ClickHouse, the real daemon (debug or release build under test) with the
//! judge-work topic and a scripted judge. Events are produced at a steady rate (`--rate` per
//! second) for `--minutes`; every 30–90 s (seeded, so a run can be repeated) one fault is
//! injected for 5–15 s: the broker SIGKILLed and started again on its storage, ClickHouse
//! likewise, or the judge answering 503. The daemon's resident memory is sampled every 10 s.
//! At the end: SIGTERM, then the figures — events produced and stored (`FINAL`), duplicates
//! before `FINAL` (rows a crash redelivered), selected vs judged, judged rows that failed, the
//! faults injected, the outages the daemon counted (its summary's `outages` line: episodes,
//! total and longest time degraded), and resident memory over time (first, last, largest).
//! Record them in `benches/README.md` ("Long soak").

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sqlgrade_testkit::events::stef_reply;
use sqlgrade_testkit::openai_mock::MockServer;
use sqlgrade_testkit::rng::SplitMix;
use sqlgrade_testkit::servers::{Harness, eventually, second_pass_config};

fn arg(name: &str, default: f64) -> f64 {
    let argv: Vec<String> = std::env::args().collect();
    argv.iter()
        .position(|a| a == name)
        .and_then(|i| argv.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    Broker,
    ClickHouse,
    Judge,
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("soak: skipped outside `cargo bench`");
        return;
    }
    let minutes = arg("--minutes", 30.0);
    let rate = arg("--rate", 100.0).max(1.0);
    let total = (minutes * 60.0 * rate) as usize;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let Some(mut h) = Harness::start("soak_bench", total, 0, false) else {
            println!("soak: the servers cannot start (scripts/services.sh install)");
            return;
        };
        h.servers.kafka.create_topic("judge-work", 3);
        let server = MockServer::start().await;
        let judge_up = server
            .respond_unless_down(stef_reply("likely_correct", 0.8), Duration::from_millis(20));
        h.extra_config = second_pass_config(&server.base_url(), 0.1, "soak", "judge-work");
        let mut daemon = h.spawn_daemon();
        let pid = daemon.child.as_ref().map(|c| c.id()).unwrap_or(0);
        let mut rng = SplitMix(20_261_127);
        let mut range = |lo: u64, hi: u64| lo + rng.below((hi - lo) as usize) as u64;
        let started = Instant::now();
        let end = started + Duration::from_secs_f64(minutes * 60.0);
        let mut next_fault = started + Duration::from_secs(range(30, 91));
        let mut rss: Vec<(u64, f64)> = Vec::new();
        let mut next_sample = started + Duration::from_secs(10);
        let mut faults: Vec<(u64, Fault, u64)> = Vec::new();
        let mut produced = 0usize;
        let mut exited_early = None;
        while Instant::now() < end && produced < total {
            // One second of events.
            let n = (rate as usize).min(total - produced);
            h.produce(n).await;
            produced += n;
            if let Some(status) = daemon
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                exited_early = Some(status);
                break;
            }
            let now = Instant::now();
            if now >= next_sample {
                rss.push((now.duration_since(started).as_secs(), rss_mib(pid)));
                next_sample = now + Duration::from_secs(10);
            }
            if now >= next_fault {
                let fault = match range(0, 3) {
                    0 => Fault::Broker,
                    1 => Fault::ClickHouse,
                    _ => Fault::Judge,
                };
                let down = Duration::from_secs(range(5, 16));
                let at = now.duration_since(started).as_secs();
                match fault {
                    Fault::Broker => {
                        tokio::task::block_in_place(|| h.servers.kafka.kill());
                        tokio::time::sleep(down).await;
                        tokio::task::block_in_place(|| h.servers.kafka.start_again());
                    }
                    Fault::ClickHouse => {
                        tokio::task::block_in_place(|| h.servers.clickhouse.kill());
                        // Events keep arriving while it is down.
                        let deadline = Instant::now() + down;
                        while Instant::now() < deadline {
                            h.produce((rate as usize).min(total - produced)).await;
                            produced += (rate as usize).min(total - produced);
                            tokio::time::sleep(Duration::from_millis(900)).await;
                        }
                        tokio::task::block_in_place(|| h.servers.clickhouse.start_again());
                    }
                    Fault::Judge => {
                        judge_up.store(false, Ordering::SeqCst);
                        tokio::time::sleep(down).await;
                        judge_up.store(true, Ordering::SeqCst);
                    }
                }
                faults.push((at, fault, down.as_secs()));
                next_fault = Instant::now() + Duration::from_secs(range(30, 91));
            } else {
                tokio::time::sleep(Duration::from_millis(1000)).await;
            }
        }
        // Let everything through, then stop.
        let stored = |h: &Harness| h.stef_rows();
        eventually(Duration::from_secs(300), || stored(&h) >= produced as u64);
        let count = |sql: &str| h.servers.clickhouse.count(sql);
        let selected = h.uniform_slice("soak", 0.1).len() as u64;
        eventually(Duration::from_secs(300), || {
            count("SELECT count() FROM sqlgrade.evaluations FINAL WHERE metric = 'stef_judged'")
                >= selected
        });
        let stop = Instant::now();
        let code = daemon.terminate(Duration::from_secs(60));
        let stop_secs = stop.elapsed().as_secs_f64();
        let log = daemon.log_text();
        let outages = log
            .lines()
            .find(|l| l.trim_start().starts_with("outages"))
            .unwrap_or("outages: none reported")
            .trim()
            .to_string();
        let rows_final = stored(&h);
        let rows_raw = count("SELECT count() FROM sqlgrade.evaluations WHERE metric = 'stef'");
        let judged =
            count("SELECT count() FROM sqlgrade.evaluations FINAL WHERE metric = 'stef_judged'");
        let judged_failed = count(
            "SELECT count() FROM sqlgrade.evaluations FINAL WHERE metric = 'stef_judged' \
             AND status != 'ok'",
        );
        let largest = rss.iter().map(|r| r.1).fold(0.0, f64::max);
        println!(
            "soak: {minutes} min at {rate} events/s; exited before SIGTERM: {exited_early:?}\n  \
             events produced {produced}, stored (FINAL) {rows_final}, rows before FINAL \
             {rows_raw} ({} duplicates)\n  selected {selected}, judged {judged}, judged rows \
             not ok {judged_failed}\n  faults injected ({}): {}\n  {outages}\n  SIGTERM: exit \
             {code:?} after {stop_secs:.1} s\n  resident memory: first {:.1} MiB, last {:.1} \
             MiB, largest {largest:.1} MiB; samples (s, MiB): {}",
            rows_raw.saturating_sub(rows_final),
            faults.len(),
            faults
                .iter()
                .map(|(at, f, d)| format!("{at}s {f:?} {d}s"))
                .collect::<Vec<_>>()
                .join(", "),
            rss.first().map_or(0.0, |r| r.1),
            rss.last().map_or(0.0, |r| r.1),
            rss.iter()
                .step_by((rss.len() / 12).max(1))
                .map(|(t, m)| format!("{t}:{m:.0}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    });
}
