//! Deterministic STEF scoring throughput over the shared-data corpus (every BIRD and Spider
//! prediction of every system: 3 × 432 + 3 × 1034 events).
//!
//! `full_event` is the whole per-event path of the daemon minus I/O, through [`Scorer`]: decode
//! the JSON payload, prepare (SQL spec + deterministic question spec), deterministic judge,
//! finish (Φ), row, and serialize the row as a JSONL line. `score_only` skips decode and
//! serialization. Group `scorer_event` is wall time, `scorer_event_cpu` the benchmarking
//! thread's CPU time (the per-core rate; read this one on a shared machine). Run with `cargo bench --bench score`; the numbers are recorded in
//! `benches/README.md` ("## deterministic STEF scoring"). Pipeline throughput including file
//! source, channels and the JSONL sink is measured by `cargo run --release --example throughput`.

use std::path::Path;
use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sqlgrade::backfill::{BackfillFormat, benchmark_events};
use sqlgrade::event::Event;
use sqlgrade::scorer::Scorer;
use sqlgrade::testdata::data_dir;

/// Every prediction file of the shared data as encoded events.
fn corpus() -> Vec<Vec<u8>> {
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
            out.extend(
                joined
                    .events
                    .iter()
                    .map(|e| serde_json::to_vec(e).expect("encode")),
            );
        }
    }
    out
}

/// CPU time consumed by the calling thread (CLOCK_THREAD_CPUTIME_ID).
fn thread_cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Criterion measurement in thread CPU time: the per-core cost, insensitive to other processes
/// on a shared machine. The current-thread runtime polls the scorer on the benchmarking thread.
struct ThreadCpuTime;

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

fn bench_wall(c: &mut Criterion) {
    run_group(c, "scorer_event");
}

fn bench_cpu(c: &mut Criterion<ThreadCpuTime>) {
    run_group(c, "scorer_event_cpu");
}

fn run_group<M: Measurement>(c: &mut Criterion<M>, name: &str) {
    let payloads = corpus();
    let scorer = Scorer::deterministic();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let ts = "2026-11-21T10:00:00.000Z";

    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(payloads.len() as u64));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("full_event", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut bytes = 0usize;
                let mut line = Vec::with_capacity(4096);
                for payload in &payloads {
                    let Ok(event) = Event::decode(payload) else {
                        continue;
                    };
                    for row in scorer.score_at(&event, ts).await {
                        line.clear();
                        serde_json::to_writer(&mut line, &row).expect("serialize");
                        bytes += line.len();
                    }
                }
                bytes
            })
        })
    });
    let events: Vec<Event> = payloads
        .iter()
        .filter_map(|p| Event::decode(p).ok())
        .collect();
    group.bench_function("score_only", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut n = 0usize;
                for event in &events {
                    n += scorer.score_at(event, ts).await.len();
                }
                n
            })
        })
    });
    group.finish();
}

criterion_group!(benches, bench_wall);
criterion_group! {
    name = benches_cpu;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = bench_cpu
}
criterion_main!(benches, benches_cpu);
