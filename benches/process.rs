//! The whole process against the scoring core, file → JSONL, deterministic judge:
//!
//!   cargo bench --bench process -- [--events N] [--scaling]
//!
//! 1. **Core**: the STEF path alone (`stef::prepare` → deterministic judge → `stef::finish` →
//!    row), on this thread, over the same events: CPU µs per event.
//! 2. **Process**: N events (default 100,000: the shared BIRD and Spider predictions of every
//!    system, cycled with fresh `event_id`s, no gold data) written to a JSONL file, then the
//!    release `sqlgrade run` as a child process, file source → JSONL sink, default workers
//!    (the machine's cores); and again pinned to one core (`taskset -c 0`, one worker) when
//!    `taskset` exists. For each: wall time, events/s, the child's CPU (user + system, from
//!    `getrusage(RUSAGE_CHILDREN)`) per event, and its peak RSS.
//!
//! With `--scaling`: the process (file → JSONL) with `pipeline.workers` = 1, 2, 4, … up to the
//! machine's cores (and the cores themselves), printed as a table of events/s and CPU per event —
//! how throughput grows with cores and where it stops (the scaling issue).
//!
//! The ratio process CPU / core CPU is the overhead the process adds around the core (decode,
//! tasks and channels, the row's details JSON, the JSONL encoder, allocation): the line-rate
//! issue's target is ≤ 40 µs per event end to end. Results are recorded in `benches/README.md`
//! ("whole process").

mod support;

use std::process::Command;
use std::time::Instant;

use sqlgrade::stef::RuleProfile;

fn events_arg() -> usize {
    let argv: Vec<String> = std::env::args().collect();
    argv.iter()
        .position(|a| a == "--events")
        .and_then(|i| argv.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test --all-targets` runs bench binaries without `--bench`.
        println!("process: skipped outside `cargo bench`");
        return;
    }
    let n = events_arg();
    let corpus = support::prediction_events();
    assert!(!corpus.is_empty(), "no shared data");

    // 1. The core, on this thread.
    let profile = RuleProfile::default();
    let ts = "2026-11-21T10:00:00Z";
    let start = support::thread_cpu_now();
    let mut total = 0.0;
    for i in 0..n {
        total += support::stef_row(&corpus[i % corpus.len()], &profile, ts).value;
    }
    let core = support::thread_cpu_now() - start;
    let core_us = core.as_secs_f64() * 1e6 / n as f64;
    println!(
        "process bench: {n} events ({} distinct from shared/data); mean Φ {:.2}",
        corpus.len(),
        total / n as f64
    );
    println!(
        "  core (STEF path, one thread): {core_us:.1} µs CPU per event = {:.0} events/s per core",
        1e6 / core_us
    );

    // 2. The process.
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("events.jsonl");
    let mut text = String::with_capacity(n * 600);
    for i in 0..n {
        let mut event = corpus[i % corpus.len()].clone();
        event.event_id = format!("ev-{i:06}");
        event.gold = None;
        text.push_str(&serde_json::to_string(&event).expect("event JSON"));
        text.push('\n');
    }
    std::fs::write(&input, text).expect("write events");
    let binary = sqlgrade_testkit::bin::sqlgrade();
    let pinned = Command::new("taskset").arg("--version").output().is_ok();
    if std::env::args().any(|a| a == "--scaling") {
        scaling(&binary, &input, dir.path(), n);
        return;
    }
    let mut runs = vec![("default workers", false)];
    if pinned {
        runs.push(("pinned to one core, 1 worker", true));
    }
    for (label, pin) in runs {
        let out_dir = dir.path().join(if pin { "out-pinned" } else { "out" });
        let mut cmd = if pin {
            let mut c = Command::new("taskset");
            c.args(["-c", "0"]).arg(&binary);
            c.env("SQLGRADE__PIPELINE__WORKERS", "1");
            c
        } else {
            Command::new(&binary)
        };
        cmd.arg("run")
            .env("SQLGRADE__SOURCE__PATH", &input)
            .env("SQLGRADE__SINK__DIR", &out_dir)
            .env("RUST_LOG", "warn")
            .current_dir(dir.path());
        let (cpu_before, _) = support::children_usage();
        let started = Instant::now();
        let output = cmd.output().expect("run sqlgrade");
        let wall = started.elapsed();
        let (cpu_after, max_rss_kib) = support::children_usage();
        assert!(
            output.status.success(),
            "sqlgrade run failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let rows = std::fs::read_to_string(out_dir.join("evaluations.jsonl"))
            .map(|t| t.lines().count())
            .unwrap_or(0);
        assert_eq!(rows, n, "one STEF row per event");
        let cpu = cpu_after - cpu_before;
        let cpu_us = cpu.as_secs_f64() * 1e6 / n as f64;
        println!(
            "  process ({label}): {:.2} s wall = {:.0} events/s; {cpu_us:.1} µs CPU per event \
             ({:.2}× the core); peak RSS {:.1} MiB",
            wall.as_secs_f64(),
            n as f64 / wall.as_secs_f64(),
            cpu_us / core_us,
            max_rss_kib as f64 / 1024.0
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "  load average at the end: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
}

/// The process with 1, 2, 4, … workers up to the cores: events/s and CPU per event.
fn scaling(binary: &std::path::Path, input: &std::path::Path, dir: &std::path::Path, n: usize) {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let mut counts: Vec<usize> = std::iter::successors(Some(1usize), |w| Some(w * 2))
        .take_while(|w| *w < cores)
        .collect();
    counts.push(cores);
    println!("| workers | events/s | CPU µs / event | × one worker |");
    println!("|---|---|---|---|");
    let mut first = None;
    for workers in counts {
        let out_dir = dir.join(format!("out-{workers}"));
        let (cpu_before, _) = support::children_usage();
        let started = Instant::now();
        let output = Command::new(binary)
            .arg("run")
            .env("SQLGRADE__SOURCE__PATH", input)
            .env("SQLGRADE__SINK__DIR", &out_dir)
            .env("SQLGRADE__PIPELINE__WORKERS", workers.to_string())
            .env("RUST_LOG", "warn")
            .current_dir(dir)
            .output()
            .expect("run sqlgrade");
        let wall = started.elapsed();
        let (cpu_after, _) = support::children_usage();
        assert!(
            output.status.success(),
            "sqlgrade run failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let rate = n as f64 / wall.as_secs_f64();
        let cpu_us = (cpu_after - cpu_before).as_secs_f64() * 1e6 / n as f64;
        let base = *first.get_or_insert(rate);
        println!(
            "| {workers} | {rate:.0} | {cpu_us:.1} | {:.2} |",
            rate / base
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at the end: {}", load.trim());
}
