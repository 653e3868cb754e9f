//! Daemon throughput: Kafka (tansu) → `sqlgrade run` → ClickHouse, with the deterministic judge
//! and with the LLM judge's second pass on, side by side.
//!
//!   cargo bench --bench daemon_throughput -- [--events N] [--rate R] [--rounds K]
//!       [--llm-rate Q] [--llm-latency-ms L] [--no-llm] [--state-on-disk]
//!       [--variant LABEL:BINARY[:SINK_KEYS[:SOURCE_KEYS]] ...] [--older-config LABEL]
//!       [--stages-only] [--broker sqlite|memory]
//!
//! With `--variant` (given twice or more) the bench compares builds or sink settings instead of
//! the judges: every variant runs deterministic, in the order A B … then … B A per round (K
//! rounds), each on fresh servers, and the summary prints each variant's mean events/s and
//! daemon CPU per event with its ratio to the first, then its events/s ratio in each round
//! (runs back to back), their range and in how many rounds it was ahead: how sure the
//! comparison is. `BINARY` is a `sqlgrade` executable (e.g.
//! a release build of the base commit in its own target directory), `SINK_KEYS` TOML lines added
//! to `[sink]` and `SOURCE_KEYS` to `[source]` (`;` separates lines), e.g.
//! `--variant before:/tmp/base/sqlgrade --variant after:target/release/sqlgrade
//! --variant after-4:target/release/sqlgrade:inflight_batches=4`; librdkafka properties go in
//! as dotted keys, as the harness writes its own (`after:BIN::kafka_properties."fetch.min.bytes"
//! = "1048576"`). A variant whose daemon exits (e.g. a config it rejects) ends its run with the
//! daemon's log. The configs name the server
//! in `[clickhouse]`, which builds before `a7152d2` do not know (they read it from `[sink]`):
//! `--older-config LABEL` writes that variant's configs the older way. A single `--variant`
//! runs the usual deterministic/LLM rounds with that binary and keys (before 2026-11-29 it was
//! ignored and `target/release/sqlgrade` ran instead).
//!
//! Starts its own ClickHouse and tansu (as the integration tests do; `scripts/services.sh install`
//! first), migrates, and runs the release daemon as a separate process with the batching and
//! back-pressure of deploy/config/production.toml (read from it: today 50,000 rows, 64 MiB or
//! 1 s; 2 batches in flight; 100,000 messages in flight). Each *run* starts fresh servers and
//! measures:
//!
//! 1. **Backlog drain**: N events (default 100,000, from the real BIRD/Spider corpus) are
//!    produced first, then the daemon starts; the sustained line rate is measured between 10 %
//!    and 90 % of the line-rate `stef` rows landing in ClickHouse, with the CPU time of the
//!    daemon, the broker and ClickHouse in that window and the daemon's peak memory (VmHWM).
//! 2. **End-to-end lag at a fixed rate**: events are produced at R/s (default 5,000) for 20 s
//!    while the daemon runs; lag = how long ago the event whose row ClickHouse just got was
//!    produced (sampled every 250 ms; p50 / p99 / max).
//!
//! A run is *deterministic* (`[judge] kind = "deterministic"`) or *LLM* (`kind = "llm"` against
//! a scripted OpenAI-compatible server answering in L ms, default 1,000, quota Q requests/s,
//! default 50, the second pass on its live policy: uniform slice 5 % plus priority slices,
//! in-process queue). LLM runs also report the judge's utilisation (requests/s the server saw
//! in the drain window, and in the 10 s after it, ÷ Q).
//!
//! The servers keep their state on a tmpfs (`/dev/shm`) when there is one; `--state-on-disk`
//! keeps it in the system temp dir instead. On disk, each run inherits the file system's work
//! from the runs before it (on an ext4 mounted with online `discard`, freeing what the previous
//! run wrote): the same 181 `evaluations` inserts cost ClickHouse 3.4, 6.5, 9.1 and 9.9 CPU-s in
//! four consecutive runs of one invocation (fresh servers each time), against 2.9–3.1 s in every
//! run on tmpfs — a drift that made the order of the runs, not the judge, decide comparisons.
//!
//! With `BENCH_LLM_EXTRA` set, its text (`\n` for line breaks) is appended to the LLM run's
//! config, e.g. `'[judge.budget]\nuniform_rate = 0.01\n'` — for experiments.
//!
//! The machine's speed drifts (other tenants, ClickHouse merges), so the runs are interleaved
//! deterministic, LLM, LLM, deterministic (K = 2 rounds, default; K = 1: deterministic, LLM)
//! and the ratio compares the means. `--no-llm` runs the deterministic side only.
//!
//! `--stages-only` leaves every event's SQL unread (`[pipeline] max_sql_bytes = 1`: each event
//! gets its non-scorable `stef` row without being parsed or judged; implies `--no-llm`), so the
//! daemon's CPU per event is what consuming, decoding, batching, encoding and inserting cost
//! without the scoring — the Kafka → ClickHouse path itself, comparable across builds since
//! `max_sql_bytes` exists (before the scaling work, too).
//!
//! The broker keeps its topics in memory (`--broker memory`, the default since 2026-12-02;
//! [`support::BrokerStorage`], a tansu built with `--features libsql,dynostore`, as
//! `scripts/services.sh install` builds it). `--broker sqlite` keeps them in SQLite, as the
//! tests do and as every figure recorded before that date did: tansu then stores and re-reads
//! every record, ~35–40 µs of CPU per event on the 2-core VM, on the cores the daemon is
//! measured on. In memory it costs ~1–2 µs, so events/s show what the daemon and ClickHouse
//! allow, as with a production Kafka on machines of its own. The output names the storage.
//!
//! Results are printed and recorded in benches/README.md ("## daemon throughput").
//!
//! With `SQLGRADE_CLICKHOUSE_LOG_QUERIES=1` the servers log their queries and each run also
//! prints what ClickHouse spent its query CPU on, by query shape.

use sqlgrade_testkit::servers as support;

use std::time::{Duration, Instant};

use support::Harness;

struct Args {
    events: usize,
    rate: usize,
    lag_seconds: u64,
    rounds: usize,
    llm: bool,
    llm_rate: usize,
    llm_latency_ms: usize,
    state_on_disk: bool,
    /// `--stages-only`: SQL left unread, so no event is parsed or judged.
    stages_only: bool,
    variants: Vec<Variant>,
    /// Labels of variants whose binary predates `a7152d2` (`--older-config LABEL`): their configs
    /// keep the server's keys under `[sink]`.
    older_config: Vec<String>,
    /// `--broker`: where tansu keeps the topics.
    broker: support::BrokerStorage,
}

impl Args {
    /// What a run without the LLM judge is, as the reports name it.
    fn mode(&self) -> &'static str {
        if self.stages_only {
            "stages only (SQL unread)"
        } else {
            "deterministic"
        }
    }
}

/// A build and sink settings to compare (`--variant`).
#[derive(Clone)]
struct Variant {
    label: String,
    binary: std::path::PathBuf,
    sink_config: String,
    source_config: String,
}

fn variant(spec: &str) -> Option<Variant> {
    let mut parts = spec.splitn(4, ':');
    let label = parts.next().filter(|l| !l.is_empty())?.to_string();
    let binary = std::path::PathBuf::from(parts.next().filter(|b| !b.is_empty())?);
    let sink_config = parts.next().unwrap_or("").replace(';', "\n");
    let source_config = parts.next().unwrap_or("").replace(';', "\n");
    Some(Variant {
        label,
        binary,
        sink_config,
        source_config,
    })
}

fn args() -> Args {
    let mut a = Args {
        events: 100_000,
        rate: 5_000,
        lag_seconds: 20,
        rounds: 2,
        llm: true,
        llm_rate: 50,
        llm_latency_ms: 1_000,
        state_on_disk: false,
        stages_only: false,
        variants: Vec::new(),
        older_config: Vec::new(),
        broker: support::BrokerStorage::Memory,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let value = argv.get(i + 1).and_then(|v| v.parse::<usize>().ok());
        match (argv[i].as_str(), value) {
            ("--events", Some(v)) => a.events = v,
            ("--rate", Some(v)) => a.rate = v,
            ("--lag-seconds", Some(v)) => a.lag_seconds = v as u64,
            ("--rounds", Some(v)) => a.rounds = v.max(1),
            ("--llm-rate", Some(v)) => a.llm_rate = v,
            ("--llm-latency-ms", Some(v)) => a.llm_latency_ms = v,
            ("--no-llm", _) => {
                a.llm = false;
                i += 1;
                continue;
            }
            ("--variant", _) => match argv.get(i + 1).and_then(|spec| variant(spec)) {
                Some(v) => a.variants.push(v),
                None => eprintln!(
                    "daemon_throughput: --variant wants LABEL:BINARY[:SINK_KEYS[:SOURCE_KEYS]]"
                ),
            },
            ("--older-config", _) => match argv.get(i + 1) {
                Some(label) => a.older_config.push(label.clone()),
                None => eprintln!("daemon_throughput: --older-config wants a variant's LABEL"),
            },
            ("--broker", _) => {
                match argv
                    .get(i + 1)
                    .and_then(|name| support::BrokerStorage::parse(name))
                {
                    Some(storage) => a.broker = storage,
                    None => {
                        eprintln!("daemon_throughput: --broker wants sqlite or memory");
                        std::process::exit(2);
                    }
                }
            }
            ("--state-on-disk", _) => {
                a.state_on_disk = true;
                i += 1;
                continue;
            }
            ("--stages-only", _) => {
                a.stages_only = true;
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

/// CPU seconds of (daemon, broker, clickhouse).
fn cpu_all(daemon: u32, h: &Harness) -> [f64; 3] {
    [
        support::cpu_seconds(daemon),
        h.servers.kafka.pid().map_or(0.0, support::cpu_seconds),
        h.servers.clickhouse.pid().map_or(0.0, support::cpu_seconds),
    ]
}

fn rows(h: &Harness) -> u64 {
    count(h, "stef")
}

fn count(h: &Harness, metric: &str) -> u64 {
    support::http_post(
        h.servers.clickhouse.http_port,
        "/",
        // Every bench event yields one line-rate STEF row (LLM-judged rows are another metric).
        &format!("SELECT count() FROM sqlgrade.evaluations WHERE metric = '{metric}'"),
    )
    .ok()
    .and_then(|b| b.trim().parse().ok())
    .unwrap_or(0)
}

/// With `SQLGRADE_CLICKHOUSE_LOG_QUERIES=1`: what ClickHouse spent its query CPU on during the
/// run, by query shape (numbers and string literals folded), heaviest first, and the parts it
/// wrote and merged per table (`system.part_log`; merges are background work, wall time only).
fn query_cpu_report(h: &Harness) {
    let sql = "SYSTEM FLUSH LOGS";
    let _ = support::http_post(h.servers.clickhouse.http_port, "/", sql);
    let sql = "SELECT count() AS n, \
               round(sum(arraySum(arrayFilter((v, k) -> k IN ('UserTimeMicroseconds', \
               'SystemTimeMicroseconds'), ProfileEvents.Values, ProfileEvents.Names))) / 1e6, 2) AS cpu_s, \
               round(sum(query_duration_ms) / 1e3, 2) AS wall_s, sum(read_rows) AS read_rows, \
               substring(replaceRegexpAll(replaceRegexpAll(query, '\\'[^\\']*\\'', '?'), \
               '[0-9]+', 'N'), 1, 110) AS shape \
               FROM system.query_log WHERE type = 2 AND query NOT LIKE '%query_log%' \
               GROUP BY shape ORDER BY cpu_s DESC, wall_s DESC LIMIT 12 FORMAT TSV";
    match support::http_post(h.servers.clickhouse.http_port, "/", sql) {
        Ok(text) => {
            eprintln!("  ClickHouse queries of the run (count, CPU s, wall s, rows read, shape):");
            for line in text.lines() {
                eprintln!("    {line}");
            }
        }
        Err(e) => eprintln!("  (no query log: {e})"),
    }
    let sql = "SELECT table, event_type, count() AS n, round(sum(duration_ms) / 1e3, 2) AS wall_s, \
               sum(rows) AS rows_written, sum(read_rows) AS rows_read, \
               round(sum(read_bytes) / 1048576, 1) AS read_mib \
               FROM system.part_log WHERE database = 'sqlgrade' \
               GROUP BY table, event_type ORDER BY wall_s DESC, n DESC LIMIT 20 FORMAT TSV";
    match support::http_post(h.servers.clickhouse.http_port, "/", sql) {
        Ok(text) => {
            eprintln!(
                "  ClickHouse parts of the run (table, event type, count, wall s, rows written, \
                 rows read, MiB read):"
            );
            for line in text.lines() {
                eprintln!("    {line}");
            }
        }
        Err(e) => eprintln!("  (no part log: {e})"),
    }
}

/// deploy/config/production.toml as the daemon reads it (without the process environment).
fn shipped_config() -> sqlgrade::config::Config {
    let path = sqlgrade_testkit::data::repo_root().join("deploy/config/production.toml");
    sqlgrade::config::Config::load_with_env(Some(&path), Some(Default::default()))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// What one run measured.
struct Run {
    /// The `--variant` this run measured.
    label: Option<String>,
    llm: bool,
    sustained: f64,
    window_events: f64,
    /// CPU seconds of (daemon, broker, clickhouse) in the drain window.
    cpu: [f64; 3],
    hwm_mib: f64,
    load: String,
    /// LLM runs: requests/s the server saw in the drain window and in the 10 s after it.
    judge: Option<(f64, f64)>,
    lag: Lag,
}

struct Lag {
    sent: usize,
    offered: f64,
    p50: f64,
    p99: f64,
    max: f64,
    samples: usize,
    drained: bool,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_string()
}

/// One run on fresh servers (module documentation); `None` when the servers are unavailable
/// or the daemon stalls (the reason is printed).
async fn run(args: &Args, llm: bool, variant: Option<&Variant>) -> Option<Run> {
    use sqlgrade_testkit::events::stef_reply;
    use sqlgrade_testkit::openai_mock::{MockServer, Scripted};
    let lag_events = args.rate * args.lag_seconds as usize;
    let name = if llm {
        "daemon_throughput_llm"
    } else {
        "daemon_throughput"
    };
    let mut h = Harness::start_with_broker(name, args.events + lag_events, args.broker)?;
    // The batching and back-pressure that ship (deploy/config/production.toml); a variant's
    // keys replace them.
    let shipped = shipped_config();
    h.batch = (shipped.sink.batch_rows, shipped.sink.flush_interval_ms);
    if let Some(kafka) = shipped.source.kafka() {
        h.max_in_flight = kafka.max_in_flight.get();
    }
    h.sink_config = support::keys_with_defaults(
        variant.map_or("", |v| v.sink_config.as_str()),
        &[
            ("batch_bytes", shipped.sink.batch_bytes.to_string()),
            (
                "inflight_batches",
                shipped.sink.inflight_batches.to_string(),
            ),
        ],
    );
    if let Some(v) = variant {
        h.binary = Some(v.binary.clone());
        h.source_config = v.source_config.clone();
        h.older_config = args.older_config.contains(&v.label);
    }
    let server = if llm {
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
        if let Ok(extra) = std::env::var("BENCH_LLM_EXTRA") {
            h.extra_config.push_str(&extra.replace("\\n", "\n"));
        }
        Some(server)
    } else {
        None
    };
    if args.stages_only {
        h.extra_config.push_str("\n[pipeline]\nmax_sql_bytes = 1\n");
    }
    let requests = || server.as_ref().map_or(0, |s| s.request_count());
    h.produce(args.events).await;

    // 1. Backlog drain.
    let mut daemon = h.spawn_daemon();
    let pid = daemon.child.as_ref().map(|c| c.id()).unwrap_or(0);
    let start = Instant::now();
    let (lo, hi) = (args.events as u64 / 10, args.events as u64 * 9 / 10);
    let (mut t_lo, mut t_hi) = (None, None);
    loop {
        let n = rows(&h);
        if t_lo.is_none() && n >= lo {
            t_lo = Some((Instant::now(), n, cpu_all(pid, &h), requests()));
        }
        if t_hi.is_none() && n >= hi {
            t_hi = Some((Instant::now(), n, cpu_all(pid, &h), requests()));
        }
        if n >= args.events as u64 {
            break;
        }
        if let Some(status) = daemon.exited() {
            eprintln!(
                "the daemon exited ({status}) at {n} rows\n{}",
                daemon.log_text()
            );
            return None;
        }
        if start.elapsed() > Duration::from_secs(900) {
            eprintln!("timed out at {n} rows\n{}", daemon.log_text());
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (Some((a, na, cpu_a, ra)), Some((b, nb, cpu_b, rb))) = (t_lo, t_hi) else {
        return None;
    };
    let secs = (b - a).as_secs_f64();
    let load = loadavg();
    let judge_window = (rb - ra) as f64 / secs;

    // 2. Lag at a fixed production rate (the LLM judge keeps working meanwhile: its steady
    // state is measured over the first 10 s).
    let judged_before = (Instant::now(), requests());
    let lag = lag(&mut h, args, lag_events).await;
    let judge_steady =
        (requests() - judged_before.1) as f64 / judged_before.0.elapsed().as_secs_f64().max(1e-9);
    let hwm_mib = rss_kib(pid, "VmHWM:").unwrap_or(0) as f64 / 1024.0;
    if support::log_queries() {
        query_cpu_report(&h);
    }
    if llm {
        eprintln!("  (judged rows written: {})", count(&h, "stef_judged"));
    }
    drop(daemon);
    Some(Run {
        label: variant.map(|v| v.label.clone()),
        llm,
        sustained: (nb - na) as f64 / secs,
        window_events: (nb - na) as f64,
        cpu: [0, 1, 2].map(|i| cpu_b[i] - cpu_a[i]),
        hwm_mib,
        load,
        judge: llm.then_some((judge_window, judge_steady)),
        lag,
    })
}

async fn lag(h: &mut Harness, args: &Args, lag_events: usize) -> Lag {
    let base = rows(h);
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
            let stored = rows(h).saturating_sub(base);
            // When was the `stored`-th lag event produced?
            if let Some((when, _)) = produced_at.iter().find(|(_, n)| *n >= stored)
                && stored > 0
            {
                lags.push(when.elapsed().as_secs_f64());
            }
        }
    }
    let offered = sent as f64 / begin.elapsed().as_secs_f64();
    let deadline = Instant::now() + Duration::from_secs(120);
    while rows(h) < base + sent as u64 && Instant::now() < deadline {
        let stored = rows(h).saturating_sub(base);
        if let Some((when, _)) = produced_at.iter().find(|(_, n)| *n >= stored) {
            lags.push(when.elapsed().as_secs_f64());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let drained = rows(h) >= base + sent as u64;
    lags.sort_by(|a, b| a.total_cmp(b));
    Lag {
        sent,
        offered,
        p50: percentile(&lags, 0.5),
        p99: percentile(&lags, 0.99),
        max: lags.last().copied().unwrap_or(f64::NAN),
        samples: lags.len(),
        drained,
    }
}

fn report(args: &Args, r: &Run) {
    let mode = args.mode();
    let kind = if let Some(label) = &r.label {
        format!("{mode} [{label}]")
    } else if r.llm {
        format!(
            "LLM judge ({} ms, quota {}/s)",
            args.llm_latency_ms, args.llm_rate
        )
    } else {
        mode.to_string()
    };
    let total_cpu: f64 = r.cpu.iter().sum();
    println!("daemon_throughput {kind}: {} events", args.events);
    println!(
        "  sustained line rate (10%→90%): {:.0} events/s",
        r.sustained
    );
    println!(
        "  CPU in the window: daemon {:.1} s, broker {:.1} s, clickhouse {:.1} s \
         ({:.0} µs of daemon CPU per event; whole stack on 2 uncontended cores {:.0} events/s)",
        r.cpu[0],
        r.cpu[1],
        r.cpu[2],
        r.cpu[0] / r.window_events * 1e6,
        2.0 * r.window_events / total_cpu.max(1e-9)
    );
    if let Some((window, steady)) = r.judge {
        println!(
            "  judge: {window:.1} requests/s in the window ({:.1}% of the quota), {steady:.1}/s \
             in the 10 s after it ({:.1}%)",
            100.0 * window / args.llm_rate as f64,
            100.0 * steady / args.llm_rate as f64
        );
    }
    let l = &r.lag;
    println!(
        "  lag at {:.0}/s offered ({} events): p50 {:.2} s, p99 {:.2} s, max {:.2} s ({} samples){}",
        l.offered,
        l.sent,
        l.p50,
        l.p99,
        l.max,
        l.samples,
        if l.drained {
            ""
        } else {
            " — NOT fully drained"
        }
    );
    println!(
        "  peak RSS (VmHWM) {:.1} MiB; 1-min loadavg at the end of the window {}",
        r.hwm_mib, r.load
    );
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
    let shm = std::path::Path::new("/dev/shm");
    if !args.state_on_disk && shm.is_dir() {
        support::set_state_root(shm.to_path_buf());
        println!(
            "daemon_throughput: server state on tmpfs ({})",
            shm.display()
        );
    } else {
        println!("daemon_throughput: server state in the system temp dir");
    }
    println!(
        "daemon_throughput: broker topics in {} (--broker)",
        args.broker.name()
    );
    if args.variants.len() > 1 {
        compare_variants(&args).await;
        return;
    }
    // Deterministic, LLM, LLM, deterministic, … (module documentation).
    let mut order = Vec::new();
    for round in 0..args.rounds {
        let pair = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        order.extend(pair.into_iter().filter(|&llm| !llm || args.llm));
    }
    let mut runs = Vec::new();
    // One `--variant`: its binary and keys (two or more are compared above).
    let variant = args.variants.first();
    for llm in order {
        match run(&args, llm, variant).await {
            Some(r) => {
                report(&args, &r);
                runs.push(r);
            }
            None => {
                eprintln!("daemon_throughput: servers unavailable; nothing measured");
                return;
            }
        }
    }
    let mean = |llm: bool, f: &dyn Fn(&Run) -> f64| {
        let v: Vec<f64> = runs.iter().filter(|r| r.llm == llm).map(f).collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let det = mean(false, &|r| r.sustained);
    println!(
        "daemon_throughput summary ({} events per run, {} round(s)):",
        args.events, args.rounds
    );
    println!(
        "  {}: {det:.0} events/s (mean of {}), {:.0} µs daemon CPU per event",
        args.mode(),
        runs.iter().filter(|r| !r.llm).count(),
        mean(false, &|r| r.cpu[0] / r.window_events * 1e6)
    );
    if args.llm {
        let llm = mean(true, &|r| r.sustained);
        println!(
            "  LLM judge on: {llm:.0} events/s = {:.1}% of deterministic, {:.0} µs daemon CPU per \
             event; judge {:.1}% of the quota in the window, {:.1}% after it",
            100.0 * llm / det.max(1e-9),
            mean(true, &|r| r.cpu[0] / r.window_events * 1e6),
            mean(true, &|r| r.judge.map_or(0.0, |j| j.0)) * 100.0 / args.llm_rate as f64,
            mean(true, &|r| r.judge.map_or(0.0, |j| j.1)) * 100.0 / args.llm_rate as f64,
        );
    }
}

/// `--variant` mode: every variant deterministic, A B … per even round and … B A per odd one,
/// then each variant's means and its ratio to the first.
async fn compare_variants(args: &Args) {
    let mut runs: Vec<Run> = Vec::new();
    for round in 0..args.rounds {
        let mut order: Vec<&Variant> = args.variants.iter().collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for variant in order {
            match run(args, false, Some(variant)).await {
                Some(r) => {
                    report(args, &r);
                    runs.push(r);
                }
                None => {
                    eprintln!("daemon_throughput: servers unavailable; nothing measured");
                    return;
                }
            }
        }
    }
    let means = |label: &str| {
        let of: Vec<&Run> = runs
            .iter()
            .filter(|r| r.label.as_deref() == Some(label))
            .collect();
        let n = of.len().max(1) as f64;
        let rate = of.iter().map(|r| r.sustained).sum::<f64>() / n;
        let cpu = of
            .iter()
            .map(|r| r.cpu[0] / r.window_events * 1e6)
            .sum::<f64>()
            / n;
        let stack = of
            .iter()
            .map(|r| r.cpu.iter().sum::<f64>() / r.window_events * 1e6)
            .sum::<f64>()
            / n;
        let rates: Vec<String> = of.iter().map(|r| format!("{:.0}", r.sustained)).collect();
        (rate, cpu, stack, rates.join(", "))
    };
    println!(
        "daemon_throughput variants ({} events per run, {} round(s), {}):",
        args.events,
        args.rounds,
        args.mode()
    );
    let (base_rate, base_cpu, ..) = means(&args.variants[0].label);
    for v in &args.variants {
        let (rate, cpu, stack, rates) = means(&v.label);
        println!(
            "  {:<16} {rate:>7.0} events/s ({rates}) = {:>5.1}%, daemon {cpu:.1} µs CPU per event \
             = {:>5.1}%, whole stack {stack:.1} µs",
            v.label,
            100.0 * rate / base_rate.max(1e-9),
            100.0 * cpu / base_cpu.max(1e-9),
        );
    }
    // How sure the comparison is: each round runs every variant back to back, so a round's
    // ratio compares runs minutes apart; their spread is what one more round could show.
    let base_label = args.variants[0].label.as_str();
    for v in args.variants.iter().skip(1) {
        let ratios = round_ratios(&runs, args.variants.len(), base_label, &v.label);
        if ratios.is_empty() {
            continue;
        }
        let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.1}%")).collect();
        let ahead = ratios.iter().filter(|&&r| r > 100.0).count();
        let (low, high) = ratios
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        println!(
            "  {} ÷ {base_label} by round: {} (range {low:.1}–{high:.1}%; ahead in {ahead} of {})",
            v.label,
            shown.join(", "),
            ratios.len()
        );
    }
}

/// Events/s of `label` over `base`'s in each round (`runs` holds `per_round` runs a round, in
/// the order they ran), in percent; rounds missing either are left out.
fn round_ratios(runs: &[Run], per_round: usize, base: &str, label: &str) -> Vec<f64> {
    runs.chunks(per_round.max(1))
        .filter_map(|round| {
            let rate = |l: &str| {
                round
                    .iter()
                    .find(|r| r.label.as_deref() == Some(l))
                    .map(|r| r.sustained)
            };
            let (b, x) = (rate(base)?, rate(label)?);
            (b > 0.0).then(|| 100.0 * x / b)
        })
        .collect()
}
