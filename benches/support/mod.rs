//! Shared benchmark helpers: the real-traffic corpus and a thread-CPU-time measurement.
//! Included by the bench targets as `mod support;`.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use sqlgrade::commands::backfill::{BackfillFormat, benchmark_events};
use sqlgrade::event::Event;
use sqlgrade_testkit::data::data_dir;

/// The daemon's allocator (`src/bin/sqlgrade/main.rs`), so that per-core figures measure what `sqlgrade run`
/// runs: under glibc malloc the STEF path spent ~20 % of its samples in malloc/free.
#[global_allocator]
static GLOBAL: sqlgrade::pipeline::allocator::Allocator = sqlgrade::pipeline::allocator::Allocator;

/// Every prediction of every system in `shared/data` as events, joined the way
/// `sqlgrade backfill --format bird|spider` joins them (BIRD evidence is the enriched question).
pub fn prediction_events() -> Vec<Event> {
    let mut out = Vec::new();
    for (format, name) in [
        (BackfillFormat::Bird, "bird"),
        (BackfillFormat::Spider, "spider"),
    ] {
        let dir = data_dir().join(name);
        let mut files: Vec<_> = std::fs::read_dir(dir.join("predictions"))
            .expect("shared data predictions")
            .map(|e| e.expect("dir entry").path())
            .collect();
        files.sort();
        for predictions in files {
            let joined = benchmark_events(
                format,
                &dir.join("dev.jsonl"),
                Path::new(&predictions),
                None,
            )
            .expect("benchmark join");
            out.extend(joined.events);
        }
    }
    out
}

/// One event through the deterministic STEF path, SQL text to row: `stef::prepare` → the
/// deterministic judge → `stef::finish` → `to_row` (non-scorable SQL: `non_scorable_row`).
pub fn stef_row(
    event: &Event,
    profile: &sqlgrade::stef::RuleProfile,
    ts: &str,
) -> sqlgrade::evaluation::EvaluationRow {
    stef_row_with(event, profile, ts, sqlgrade::stef::CatalogueSelection::None)
}

/// [`stef_row`] with the event's catalogue schema (the catalogue checks run).
pub fn stef_row_with(
    event: &Event,
    profile: &sqlgrade::stef::RuleProfile,
    ts: &str,
    catalogue: sqlgrade::stef::CatalogueSelection<'_>,
) -> sqlgrade::evaluation::EvaluationRow {
    use sqlgrade::stef;
    let options = stef::PrepareOptions {
        max_sql_bytes: sqlgrade::sqlspec::DEFAULT_MAX_SQL_BYTES,
        catalogue,
    };
    match stef::prepare_with(event, profile, &options) {
        Ok(prepared) => {
            let assessment =
                sqlgrade::judge::deterministic::DeterministicJudge.assess_prepared(&prepared);
            stef::finish(&prepared, assessment, profile).to_row(event, ts, profile, 0)
        }
        Err(err) => stef::non_scorable_row(event, ts, &err, profile),
    }
}

/// CPU time consumed by the calling thread (CLOCK_THREAD_CPUTIME_ID).
pub fn thread_cpu_now() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time consumed by the whole process, every thread (CLOCK_PROCESS_CPUTIME_ID).
pub fn process_cpu_now() -> Duration {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Criterion measurement in thread CPU time (per-core cost, insensitive to other processes).
pub struct ThreadCpuTime;

static WALL: WallTime = WallTime;

impl Measurement for ThreadCpuTime {
    type Intermediate = Duration;
    type Value = Duration;

    fn start(&self) -> Duration {
        thread_cpu_now()
    }

    fn end(&self, start: Duration) -> Duration {
        thread_cpu_now().saturating_sub(start)
    }

    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }

    fn zero(&self) -> Duration {
        Duration::ZERO
    }

    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        WALL.formatter()
    }
}

/// What one child process used: its own CPU time (user + system) and peak RSS.
pub struct ChildRun {
    pub status: std::process::ExitStatus,
    pub cpu: Duration,
    pub max_rss_kib: i64,
}

/// Run `cmd` to its end, its standard output and error appended to `log`, and measure that child
/// alone with `wait4` (`RUSAGE_CHILDREN` sums the CPU of every child so far and keeps the largest
/// RSS of them all, so a second run's peak RSS could never be below the first's).
pub fn run_child(cmd: &mut std::process::Command, log: &Path) -> std::io::Result<ChildRun> {
    use std::os::unix::process::ExitStatusExt;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let child = cmd.stdout(file.try_clone()?).stderr(file).spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: `usage` is a valid, writable rusage and `status` a valid int; `pid` is our own
    // child, not yet waited for (`child` is dropped without `wait`, which does not reap it).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = loop {
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if rc == -1 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        break rc;
    };
    drop(child);
    if rc == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(ChildRun {
        status: std::process::ExitStatus::from_raw(status),
        cpu: cpu_time(&usage),
        max_rss_kib: usage.ru_maxrss,
    })
}

/// User + system CPU time of a `rusage`.
fn cpu_time(usage: &libc::rusage) -> Duration {
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1_000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// CPU time (user + system) and peak RSS (KiB) of the waited-for children so far.
pub fn children_usage() -> (Duration, i64) {
    // SAFETY: `usage` is a valid, writable rusage; RUSAGE_CHILDREN is a constant the kernel knows.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    if rc != 0 {
        return (Duration::ZERO, 0);
    }
    (cpu_time(&usage), usage.ru_maxrss)
}
