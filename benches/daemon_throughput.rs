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
//! 3. **The same backlog with the LLM judge on** (`--llm-rate`, default 50 requests/s): a
//!    scripted OpenAI-compatible judge answering in `--llm-latency-ms` (default 1,000 ms), the
//!    second pass on the live policy (uniform slice 5% plus priority slices, in-process queue),
//!    on fresh servers in the same run: the sustained line-rate, side by side with (1), and the
//!    judge's utilisation (requests/s in the window ÷ the quota). `--no-llm` skips it.
//!
//! Results are printed and recorded in benches/README.md ("## daemon throughput").

use sqlgrade_testkit::servers as support;

use std::time::{Duration, Instant};

use support::{Harness, PARTITIONS, TOPIC};

struct Args {
    events: usize,
    rate: usize,
    lag_seconds: u64,
    llm: bool,
    llm_rate: usize,
    llm_latency_ms: usize,
}

fn args() -> Args {
    let mut a = Args {
        events: 100_000,
        rate: 5_000,
        lag_seconds: 20,
        llm: true,
        llm_rate: 50,
        llm_latency_ms: 1_000,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let value = argv.get(i + 1).and_then(|v| v.parse::<usize>().ok());
        match (argv[i].as_str(), value) {
            ("--events", Some(v)) => a.events = v,
            ("--rate", Some(v)) => a.rate = v,
            ("--lag-seconds", Some(v)) => a.lag_seconds = v as u64,
            ("--llm-rate", Some(v)) => a.llm_rate = v,
            ("--llm-latency-ms", Some(v)) => a.llm_latency_ms = v,
            ("--no-llm", _) => {
                a.llm = false;
                i += 1;
                continue;
            }
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
        // Every bench event yields one line-rate STEF row (LLM-judged rows are another metric).
        "SELECT count() FROM sqlgrade.evaluations WHERE metric = 'stef'",
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
    drop(h);
    if args.llm {
        llm_phase(&args, sustained).await;
    }
}

/// Phase 3: the same backlog with the LLM judge on, on fresh servers.
async fn llm_phase(args: &Args, deterministic: f64) {
    use sqlgrade_testkit::events::stef_reply;
    use sqlgrade_testkit::openai_mock::{MockServer, Scripted};
    let Some(mut h) = Harness::start("daemon_throughput_llm", args.events, 0, false) else {
        return;
    };
    h.batch = (5000, 1000);
    let server = MockServer::start().await;
    let reply = stef_reply("likely_correct", 0.8);
    let latency = Duration::from_millis(args.llm_latency_ms as u64);
    server.respond_with(move |_| Scripted::json(&reply).after(latency));
    // Enough calls in flight for the quota at this latency, with head room.
    let concurrency = (args.llm_rate * args.llm_latency_ms / 1000 * 3 / 2).max(8);
    h.extra_config = format!(
        "[judge]\nkind = \"llm\"\nbase_url = \"{}\"\nmodel = \"bench\"\napi_key_env = \"\"\n\
         max_requests_per_second = {}.0\nmax_concurrency = {concurrency}\nmax_retries = 0\n\
         timeout_ms = 30000\n",
        server.base_url(),
        args.llm_rate
    );
    h.produce(args.events).await;
    let daemon = h.spawn_daemon();
    let pid = daemon.child.as_ref().map(|c| c.id()).unwrap_or(0);
    let start = Instant::now();
    let (lo, hi) = (args.events as u64 / 10, args.events as u64 * 9 / 10);
    let (mut t_lo, mut t_hi) = (None, None);
    loop {
        let n = rows(&h);
        if t_lo.is_none() && n >= lo {
            t_lo = Some((Instant::now(), n, server.request_count(), cpu_seconds(pid)));
        }
        if t_hi.is_none() && n >= hi {
            t_hi = Some((Instant::now(), n, server.request_count(), cpu_seconds(pid)));
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
    let (Some((a, na, ra, ca)), Some((b, nb, rb, cb))) = (t_lo, t_hi) else {
        return;
    };
    let secs = (b - a).as_secs_f64();
    let sustained = (nb - na) as f64 / secs;
    let judge_rate = (rb - ra) as f64 / secs;
    // Keep judging for a while after the backlog: the judge's steady state.
    let before = (Instant::now(), server.request_count());
    tokio::time::sleep(Duration::from_secs(10)).await;
    let steady = (server.request_count() - before.1) as f64 / before.0.elapsed().as_secs_f64();
    let hwm = rss_kib(pid, "VmHWM:").unwrap_or(0);
    println!(
        "daemon_throughput with the LLM judge: {} events, judge {} ms latency, quota {}/s, \
         {concurrency} in flight",
        args.events, args.llm_latency_ms, args.llm_rate
    );
    println!(
        "  sustained line rate (10%→90%): {sustained:.0} events/s = {:.0}% of the \
         deterministic-only {deterministic:.0} events/s",
        100.0 * sustained / deterministic.max(1e-9)
    );
    println!(
        "  judge: {judge_rate:.1} requests/s in that window ({:.0}% of the quota), \
         {steady:.1}/s in the 10 s after it ({:.0}%)",
        100.0 * judge_rate / args.llm_rate as f64,
        100.0 * steady / args.llm_rate as f64
    );
    println!(
        "  daemon CPU in the window: {:.0} µs per event; peak RSS {:.1} MiB",
        (cb - ca) / (nb - na) as f64 * 1e6,
        hwm as f64 / 1024.0
    );
    drop(daemon);
}
