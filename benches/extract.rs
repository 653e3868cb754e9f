//! Throughput of SQL-side spec extraction over the whole shared corpus (BIRD dev gold + 3 BIRD
//! prediction files, Spider dev gold + 3 Spider prediction files, ≈5,900 queries), beside plain
//! sqlparser parse-only throughput for comparison.
//!
//! `cargo bench --bench extract`; criterion reports elements/s = queries/s on one thread.
//! The `*_cpu` variants time with the thread's CPU clock instead of the wall clock, so they
//! report queries per CPU-second (per core) even on a machine busy with other work.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sqlgrade::sqlspec::{ExtractOptions, extract_with};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;

const FILES: &[(&str, &str)] = &[
    ("bird/dev.jsonl", "gold_sql"),
    ("bird/predictions/CHESS-GPT-4o-mini.jsonl", "predicted_sql"),
    ("bird/predictions/DAIL-SQL.jsonl", "predicted_sql"),
    ("bird/predictions/SuperSQL.jsonl", "predicted_sql"),
    ("spider/dev.jsonl", "gold_sql"),
    ("spider/predictions/DAIL-SQL-GPT-4.jsonl", "predicted_sql"),
    ("spider/predictions/SuperSQL.jsonl", "predicted_sql"),
    ("spider/predictions/TA-ACL.jsonl", "predicted_sql"),
];

fn corpus() -> Vec<String> {
    let data = sqlgrade_testkit::data::data_dir();
    let mut queries = Vec::new();
    for (file, field) in FILES {
        let text = std::fs::read_to_string(data.join(file)).expect("corpus file");
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let row: serde_json::Value = serde_json::from_str(line).expect("json line");
            if let Some(sql) = row[*field].as_str() {
                queries.push(sql.to_string());
            }
        }
    }
    queries
}

/// CPU time consumed by the calling thread.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is always supported
    // on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Run `f` `iters` times and return the thread CPU time it took.
fn cpu_timed(iters: u64, mut f: impl FnMut() -> usize) -> Duration {
    let start = thread_cpu_time();
    for _ in 0..iters {
        black_box(f());
    }
    thread_cpu_time() - start
}

fn bench_extract(c: &mut Criterion) {
    let queries = corpus();
    let opts = ExtractOptions::for_dialect(Some("sqlite"));
    let mut group = c.benchmark_group("corpus");
    group.throughput(Throughput::Elements(queries.len() as u64));
    group.sample_size(20);
    group.bench_function("sqlspec_extract", |b| {
        b.iter(|| {
            let mut ok = 0usize;
            for sql in &queries {
                if extract_with(black_box(sql), &opts).is_ok() {
                    ok += 1;
                }
            }
            ok
        })
    });
    group.bench_function("sqlparser_parse_only", |b| {
        let dialect = SQLiteDialect {};
        b.iter(|| {
            let mut ok = 0usize;
            for sql in &queries {
                if Parser::parse_sql(&dialect, black_box(sql)).is_ok() {
                    ok += 1;
                }
            }
            ok
        })
    });
    group.bench_function("sqlspec_extract_cpu", |b| {
        b.iter_custom(|iters| {
            cpu_timed(iters, || {
                queries
                    .iter()
                    .filter(|sql| extract_with(black_box(sql), &opts).is_ok())
                    .count()
            })
        })
    });
    group.bench_function("sqlparser_parse_only_cpu", |b| {
        let dialect = SQLiteDialect {};
        b.iter_custom(|iters| {
            cpu_timed(iters, || {
                queries
                    .iter()
                    .filter(|sql| Parser::parse_sql(&dialect, black_box(sql)).is_ok())
                    .count()
            })
        })
    });
    group.finish();
}

criterion_group!(benches, bench_extract);
criterion_main!(benches);
