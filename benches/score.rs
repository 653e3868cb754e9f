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

use std::time::Duration;

use criterion::measurement::Measurement;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sqlgrade::event::Event;
use sqlgrade::score::Scorer;

mod support;

use support::ThreadCpuTime;

/// Every prediction file of the shared data as encoded events.
fn corpus() -> Vec<Vec<u8>> {
    support::prediction_events()
        .iter()
        .map(|e| serde_json::to_vec(e).expect("encode"))
        .collect()
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
