//! The whole process against the scoring core, file → JSONL, deterministic judge:
//!
//!   cargo bench --bench process -- [--events N] [--scaling [--workers 1,2,…] [--sinks jsonl,clickhouse]
//!                                   [--catalogue | --probe | --stages-only]] [--keep DIR]
//!
//! 1. **Core**: the STEF path alone (`stef::prepare` → deterministic judge → `stef::finish` →
//!    row), on this thread, over the same events: CPU µs per event.
//! 2. **Process**: N events (default 100,000: the shared BIRD and Spider predictions of every
//!    system, cycled with fresh `event_id`s, no gold data) written to a JSONL file, then the
//!    release `sqlgrade run` as a child process, file source → JSONL sink, default workers
//!    (the machine's cores); and again pinned to one core (`taskset -c 0`, one worker) when
//!    `taskset` exists. For each: wall time, events/s, the child's CPU (user + system) per event
//!    and its peak RSS, both from `wait4` on that child alone. The binary is the one cargo built
//!    beside the bench, or `SQLGRADE_BIN=/path/to/sqlgrade` (an A/B of two builds; the
//!    `binary:` line names the one that ran).
//!
//! With `--scaling`: the process with `pipeline.workers` = 1, 2, 4, … up to the machine's cores
//! (and the cores themselves; `--workers 1,8,16` picks others), file → JSONL and file →
//! ClickHouse (its own server, migrated, production batching; `--sinks jsonl` or `clickhouse`
//! for one), printed as tables of events/s and CPU per event of `sqlgrade` (and of ClickHouse) —
//! how throughput grows with cores and where it stops (the scaling issue). `--catalogue` adds
//! the catalogue checks (both benchmarks' `tables.json`), `--probe` the probe as well (every
//! shared SQLite database). `--stages-only` leaves the SQL unread (`[pipeline] max_sql_bytes =
//! 1`: every event gets its row, status `sql_too_large`, without parsing or STEF): what is left
//! is the pipeline itself — reading, decoding, hand-overs, batching, encoding, writing — so its
//! events/s is the ceiling the stages every event crosses put on any number of cores.
//! `benches/scaling-binary.sh` runs the file → JSONL table with a built binary alone (no cargo,
//! no `shared/`), for a borrowed many-core machine.
//!
//! The ratio process CPU / core CPU is the overhead the process adds around the core (decode,
//! tasks and channels, the row's details JSON, the JSONL encoder, allocation): the line-rate
//! issue's target is ≤ 40 µs per event end to end. Results are recorded in `benches/README.md`
//! ("whole process").

mod support;

use std::process::Command;
use std::time::Instant;

use sqlgrade::stef::RuleProfile;

/// The value after `flag` on the command line.
fn arg_value(flag: &str) -> Option<String> {
    let argv: Vec<String> = std::env::args().collect();
    argv.iter()
        .position(|a| a == flag)
        .and_then(|i| argv.get(i + 1))
        .cloned()
}

fn events_arg() -> usize {
    arg_value("--events")
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
    // `--keep DIR`: the events, configs and outputs are written there and kept (to profile a
    // run by hand: `sqlgrade run --config DIR/scaling-jsonl-2.toml`).
    let temp = tempfile::tempdir().expect("temp dir");
    let kept = arg_value("--keep").map(std::path::PathBuf::from);
    if let Some(kept) = &kept {
        std::fs::create_dir_all(kept).expect("create the --keep directory");
    }
    let dir = kept.as_deref().unwrap_or(temp.path());
    let input = dir.join("events.jsonl");
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
    println!("  binary: {}", binary.display());
    let pinned = Command::new("taskset").arg("--version").output().is_ok();
    if std::env::args().any(|a| a == "--scaling") {
        scaling(&binary, &input, dir, n);
        return;
    }
    let mut runs = vec![("default workers", false)];
    if pinned {
        runs.push(("pinned to one core, 1 worker", true));
    }
    for (label, pin) in runs {
        let out_dir = dir.join(if pin { "out-pinned" } else { "out" });
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
            .current_dir(dir);
        let log = dir.join(if pin { "run-pinned.log" } else { "run.log" });
        let started = Instant::now();
        let run = support::run_child(&mut cmd, &log).expect("run sqlgrade");
        let wall = started.elapsed();
        assert!(
            run.status.success(),
            "sqlgrade run failed: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        let rows = std::fs::read_to_string(out_dir.join("evaluations.jsonl"))
            .map(|t| t.lines().count())
            .unwrap_or(0);
        assert_eq!(rows, n, "one STEF row per event");
        let cpu_us = run.cpu.as_secs_f64() * 1e6 / n as f64;
        println!(
            "  process ({label}): {:.2} s wall = {:.0} events/s; {cpu_us:.1} µs CPU per event \
             ({:.2}× the core); peak RSS {:.1} MiB",
            wall.as_secs_f64(),
            n as f64 / wall.as_secs_f64(),
            cpu_us / core_us,
            run.max_rss_kib as f64 / 1024.0
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

/// What `--scaling` runs: the sinks, the worker counts and the STEF settings.
struct Scaling {
    sinks: Vec<String>,
    workers: Vec<usize>,
    catalogue: bool,
    probe: bool,
    /// SQL left unread: the pipeline's own ceiling.
    stages_only: bool,
}

impl Scaling {
    fn from_args() -> Scaling {
        let argv: Vec<String> = std::env::args().collect();
        let value = arg_value;
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        let mut workers: Vec<usize> = std::iter::successors(Some(1usize), |w| Some(w * 2))
            .take_while(|w| *w < cores)
            .collect();
        workers.push(cores);
        if let Some(list) = value("--workers") {
            workers = list
                .split(',')
                .filter_map(|w| w.trim().parse().ok())
                .collect();
        }
        let sinks = value("--sinks").map_or_else(
            || vec!["jsonl".to_string(), "clickhouse".to_string()],
            |list| list.split(',').map(|s| s.trim().to_string()).collect(),
        );
        let probe = argv.iter().any(|a| a == "--probe");
        Scaling {
            sinks,
            workers,
            catalogue: probe || argv.iter().any(|a| a == "--catalogue"),
            probe,
            stages_only: argv.iter().any(|a| a == "--stages-only"),
        }
    }

    /// The `[stef]` section: both benchmarks' `tables.json`, and the probe over every shared
    /// SQLite database (linked into one `<db_id>/<db_id>.sqlite` directory).
    fn stef_section(&self, dir: &std::path::Path) -> String {
        if !self.catalogue {
            return String::new();
        }
        let data = sqlgrade_testkit::data::data_dir();
        let mut text = format!(
            "[stef]\ncatalogues = [{:?}, {:?}]\n",
            data.join("bird/tables.json"),
            data.join("spider/tables.json")
        );
        if self.probe {
            let probe_dir = dir.join("probe-databases");
            for bench in ["bird", "spider"] {
                let Ok(entries) = std::fs::read_dir(data.join(bench).join("databases")) else {
                    continue;
                };
                for db in entries.flatten() {
                    let id = db.file_name().to_string_lossy().into_owned();
                    let file = db.path().join(format!("{id}.sqlite"));
                    let linked = probe_dir.join(&id);
                    if file.is_file() && std::fs::create_dir_all(&linked).is_ok() {
                        let _ =
                            std::os::unix::fs::symlink(&file, linked.join(format!("{id}.sqlite")));
                    }
                }
            }
            text.push_str(&format!("probe_databases = {:?}\n", probe_dir));
        }
        text
    }
}

/// A ClickHouse server for the `clickhouse` sink's runs (state on tmpfs when there is one),
/// migrated; `Err` says why there is none.
fn scaling_clickhouse(
    binary: &std::path::Path,
) -> Result<(tempfile::TempDir, sqlgrade_testkit::servers::ClickHouse), String> {
    let shm = std::path::Path::new("/dev/shm");
    let state = if shm.is_dir() {
        tempfile::Builder::new()
            .prefix("sqlgrade-scaling-")
            .tempdir_in(shm)
    } else {
        tempfile::Builder::new()
            .prefix("sqlgrade-scaling-")
            .tempdir()
    }
    .map_err(|e| e.to_string())?;
    let clickhouse = sqlgrade_testkit::servers::ClickHouse::start_in(state.path())?;
    let config = state.path().join("migrate.toml");
    std::fs::write(
        &config,
        format!(
            "[sink]\nkind = \"clickhouse\"\n\n[clickhouse]\nurl = \"{}\"\ndatabase = \"sqlgrade\"\n",
            clickhouse.url()
        ),
    )
    .map_err(|e| e.to_string())?;
    let out = Command::new(binary)
        .args(["migrate", "--config"])
        .arg(&config)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "migrate failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok((state, clickhouse))
}

/// The process with 1, 2, 4, … workers up to the cores (or `--workers 1,2,…`), file → JSONL
/// and file → ClickHouse (`--sinks`), optionally with the catalogue checks (`--catalogue`) or
/// the probe (`--probe`): events/s and CPU per event, as tables.
fn scaling(binary: &std::path::Path, input: &std::path::Path, dir: &std::path::Path, n: usize) {
    let plan = Scaling::from_args();
    let stef = plan.stef_section(dir);
    let settings = match (plan.stages_only, plan.catalogue, plan.probe) {
        (true, ..) => "SQL left unread (`max_sql_bytes = 1`): the stages alone",
        (false, _, true) => "catalogue checks and the probe",
        (false, true, false) => "catalogue checks",
        _ => "schema-free STEF",
    };
    let unread = if plan.stages_only {
        "max_sql_bytes = 1\n"
    } else {
        ""
    };
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    for sink in &plan.sinks {
        let clickhouse = if sink == "clickhouse" {
            match scaling_clickhouse(binary) {
                Ok(server) => Some(server),
                Err(why) => {
                    println!("\nfile → ClickHouse: SKIPPED, no ClickHouse server: {why}");
                    continue;
                }
            }
        } else {
            None
        };
        println!("\nfile → {sink}, {n} events, {settings}, deterministic judge, {cores} cores:\n");
        match &clickhouse {
            Some(_) => {
                println!(
                    "| workers | events/s | × one worker | sqlgrade CPU µs / event | ClickHouse CPU µs / event |"
                );
                println!("|---|---|---|---|---|");
            }
            None => {
                println!("| workers | events/s | × one worker | sqlgrade CPU µs / event |");
                println!("|---|---|---|---|");
            }
        }
        let mut first = None;
        for &workers in &plan.workers {
            let config = dir.join(format!("scaling-{sink}-{workers}.toml"));
            let sink_section = match &clickhouse {
                Some((_, server)) => {
                    // Each run starts from an empty table, so its rows can be counted. The
                    // batching is the default, which is production.toml's.
                    server.query("TRUNCATE TABLE sqlgrade.evaluations");
                    format!(
                        "[sink]\nkind = \"clickhouse\"\n\n\
                         [clickhouse]\nurl = \"{}\"\ndatabase = \"sqlgrade\"\n",
                        server.url()
                    )
                }
                None => format!(
                    "[sink]\nkind = \"jsonl\"\ndir = {:?}\n",
                    dir.join(format!("out-{workers}"))
                ),
            };
            let text = format!(
                "[source]\nkind = \"file\"\npath = {input:?}\n\n{sink_section}\n\
                 [pipeline]\nworkers = {workers}\n{unread}\n{stef}"
            );
            std::fs::write(&config, text).expect("write the run's config");
            let server_cpu = || {
                clickhouse
                    .as_ref()
                    .and_then(|(_, s)| s.pid())
                    .map_or(0.0, sqlgrade_testkit::servers::cpu_seconds)
            };
            let (cpu_before, _) = support::children_usage();
            let server_before = server_cpu();
            let started = Instant::now();
            let output = Command::new(binary)
                .args(["run", "--config"])
                .arg(&config)
                .env("RUST_LOG", "warn")
                .current_dir(dir)
                .output()
                .expect("run sqlgrade");
            let wall = started.elapsed();
            let server_used = server_cpu() - server_before;
            let (cpu_after, _) = support::children_usage();
            assert!(
                output.status.success(),
                "sqlgrade run failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            let rows = match &clickhouse {
                Some((_, server)) => server
                    .count("SELECT count() FROM sqlgrade.evaluations WHERE metric = 'stef'")
                    as usize,
                None => {
                    std::fs::read_to_string(dir.join(format!("out-{workers}/evaluations.jsonl")))
                        .map(|t| t.lines().count())
                        .unwrap_or(0)
                }
            };
            assert_eq!(rows, n, "one STEF row per event");
            let rate = n as f64 / wall.as_secs_f64();
            let cpu_us = (cpu_after - cpu_before).as_secs_f64() * 1e6 / n as f64;
            let base = *first.get_or_insert(rate);
            match clickhouse {
                Some(_) => println!(
                    "| {workers} | {rate:.0} | {:.2} | {cpu_us:.1} | {:.1} |",
                    rate / base,
                    server_used * 1e6 / n as f64
                ),
                None => println!(
                    "| {workers} | {rate:.0} | {:.2} | {cpu_us:.1} |",
                    rate / base
                ),
            }
        }
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!("\nload average at the end: {}", load.trim());
    }
}
