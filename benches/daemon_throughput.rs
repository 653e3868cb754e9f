//! Daemon throughput: Kafka (tansu) → `sqlgrade run` (deterministic judge) → ClickHouse.
//!
//!   cargo bench --bench daemon_throughput -- [--events N] [--rate R] [--partitions P]
//!
//! Starts its own ClickHouse and tansu (as the integration tests do; `scripts/services.sh install`
//! first), migrates, then measures two things with the release daemon as a separate process:
//!
//! Batching as in deploy/config/production.toml (5,000 rows or 1 s).
//!
//! 1. **Backlog drain**: N events (default 100,000, from the real BIRD/Spider corpus) are
//!    produced first, then the daemon starts; the sustained rate is measured between 10 % and 90 %
//!    of the rows landing in ClickHouse (`count()` of `evaluations FINAL`), plus the daemon's peak
//!    resident memory (VmHWM).
//! 2. **End-to-end lag at a fixed rate**: events are produced at R/s (default 5,000) for 20 s
//!    while the daemon runs; lag = how long ago the event that ClickHouse just reached was
//!    produced (sampled every 250 ms; p50 / p99 / max).
//!
//! Results are printed and recorded in benches/README.md ("## daemon throughput").

use sqlgrade_testkit::servers as support;

use std::time::{Duration, Instant};

use support::{Harness, PARTITIONS, TOPIC};

struct Args {
    events: usize,
    rate: usize,
    lag_seconds: u64,
}

fn args() -> Args {
    let mut a = Args {
        events: 100_000,
        rate: 5_000,
        lag_seconds: 20,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let value = argv.get(i + 1).and_then(|v| v.parse::<usize>().ok());
        match (argv[i].as_str(), value) {
            ("--events", Some(v)) => a.events = v,
            ("--rate", Some(v)) => a.rate = v,
            ("--lag-seconds", Some(v)) => a.lag_seconds = v as u64,
            _ => {
                // `cargo bench` passes `--bench`; ignore anything unknown.
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    a
}

fn rss_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// CPU seconds (user + system) a process has used so far.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<f64>().ok()))
        .sum();
    ticks / 100.0
}

/// CPU seconds of (daemon, broker, clickhouse).
fn cpu_all(daemon: u32, h: &Harness) -> [f64; 3] {
    [
        cpu_seconds(daemon),
        h.servers.kafka.pid().map_or(0.0, cpu_seconds),
        h.servers.clickhouse.pid().map_or(0.0, cpu_seconds),
    ]
}

fn rows(h: &Harness) -> u64 {
    support::http_post(
        h.servers.clickhouse.http_port,
        "/",
        // Every bench event yields one STEF row; a bare count() is answered from part metadata,
        // so polling costs the server next to nothing.
        "SELECT count() FROM sqlgrade.evaluations",
    )
    .ok()
    .and_then(|b| b.trim().parse().ok())
    .unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test --all-targets` runs bench binaries without `--bench`: the daemon tests
        // cover correctness, so there is nothing to measure here.
        println!("daemon_throughput: skipped outside `cargo bench`");
        return;
    }
    let args = args();
    let lag_events = args.rate * args.lag_seconds as usize;
    let Some(mut h) = Harness::start("daemon_throughput", args.events + lag_events, 0, false)
    else {
        eprintln!("daemon_throughput: servers unavailable; nothing measured");
        return;
    };
    // Production-like batching (deploy/config/production.toml).
    h.batch = (5000, 1000);
    eprintln!(
        "producing {} events to {TOPIC} ({PARTITIONS} partitions)…",
        args.events
    );
    let t = Instant::now();
    h.produce(args.events).await;
    eprintln!("produced in {:.1?}", t.elapsed());

    // 1. Backlog drain.
    let daemon = h.spawn_daemon();
    let pid = daemon.child.as_ref().map(|c| c.id()).unwrap_or(0);
    let start = Instant::now();
    let (lo, hi) = (args.events as u64 / 10, args.events as u64 * 9 / 10);
    let (mut t_lo, mut t_hi) = (None, None);
    let mut peak_rss = 0;
    loop {
        let n = rows(&h);
        peak_rss = peak_rss.max(rss_kib(pid, "VmRSS:").unwrap_or(0));
        if t_lo.is_none() && n >= lo {
            t_lo = Some((Instant::now(), n, cpu_all(pid, &h)));
        }
        if t_hi.is_none() && n >= hi {
            t_hi = Some((Instant::now(), n, cpu_all(pid, &h)));
        }
        if n >= args.events as u64 {
            break;
        }
        if start.elapsed() > Duration::from_secs(900) {
            eprintln!("timed out at {n} rows\n{}", daemon.log_text());
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let total = start.elapsed();
    let (Some((a, na, cpu_a)), Some((b, nb, cpu_b))) = (t_lo, t_hi) else {
        return;
    };
    let sustained = (nb - na) as f64 / (b - a).as_secs_f64();
    let window_events = (nb - na) as f64;
    let cpu: Vec<f64> = (0..3).map(|i| cpu_b[i] - cpu_a[i]).collect();
    let total_cpu: f64 = cpu.iter().sum();
    let hwm = rss_kib(pid, "VmHWM:").unwrap_or(peak_rss);
    println!("daemon_throughput backlog: {} events", args.events);
    println!("  sustained (10%→90%): {sustained:.0} events/s");
    println!(
        "  overall incl. startup: {:.0} events/s ({:.1?})",
        args.events as f64 / total.as_secs_f64(),
        total
    );
    println!("  peak RSS (VmHWM): {:.1} MiB", hwm as f64 / 1024.0);
    println!(
        "  CPU in the window: daemon {:.1} s, broker {:.1} s, clickhouse {:.1} s \
         ({:.0} µs of daemon CPU per event)",
        cpu[0],
        cpu[1],
        cpu[2],
        cpu[0] / window_events * 1e6
    );
    println!(
        "  CPU-bound capacity: daemon alone {:.0} events/s per core; whole stack on 2 \
         uncontended cores {:.0} events/s",
        window_events / cpu[0].max(1e-9),
        2.0 * window_events / total_cpu.max(1e-9)
    );
    println!(
        "  machine load during the run (1-min loadavg): {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .next()
            .unwrap_or("?")
    );

    // 2. Lag at a fixed production rate.
    let base = rows(&h);
    let mut produced_at: Vec<(Instant, u64)> = Vec::new();
    let tick = Duration::from_millis(100);
    let per_tick = (args.rate / 10).max(1);
    let begin = Instant::now();
    let mut sent = 0usize;
    let mut lags: Vec<f64> = Vec::new();
    let mut next_sample = Instant::now();
    while sent < lag_events {
        let due = begin + tick * ((sent / per_tick) as u32);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
        h.produce(per_tick).await;
        sent += per_tick;
        produced_at.push((Instant::now(), sent as u64));
        if Instant::now() >= next_sample {
            next_sample = Instant::now() + Duration::from_millis(250);
            let stored = rows(&h).saturating_sub(base);
            // When was the `stored`-th lag event produced?
            if let Some((when, _)) = produced_at.iter().find(|(_, n)| *n >= stored)
                && stored > 0
            {
                lags.push(when.elapsed().as_secs_f64());
            }
        }
    }
    let produce_rate = sent as f64 / begin.elapsed().as_secs_f64();
    let deadline = Instant::now() + Duration::from_secs(120);
    while rows(&h) < base + sent as u64 && Instant::now() < deadline {
        let stored = rows(&h).saturating_sub(base);
        if let Some((when, _)) = produced_at.iter().find(|(_, n)| *n >= stored) {
            lags.push(when.elapsed().as_secs_f64());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let drained = rows(&h) >= base + sent as u64;
    lags.sort_by(|a, b| a.total_cmp(b));
    let hwm = rss_kib(pid, "VmHWM:").unwrap_or(0);
    println!(
        "daemon_throughput lag: {sent} events at {produce_rate:.0}/s offered ({} requested)",
        args.rate
    );
    println!(
        "  end-to-end lag p50 {:.2} s, p99 {:.2} s, max {:.2} s ({} samples){}",
        percentile(&lags, 0.5),
        percentile(&lags, 0.99),
        lags.last().copied().unwrap_or(f64::NAN),
        lags.len(),
        if drained {
            ""
        } else {
            " — NOT fully drained"
        }
    );
    println!(
        "  peak RSS over both phases: {:.1} MiB",
        hwm as f64 / 1024.0
    );
    drop(daemon);
}
