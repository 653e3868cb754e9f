//! Throughput of the deterministic STEF path per core, on real traffic: every BIRD and Spider
//! prediction of every system in `shared/data` (3 × 432 + 3 × 1034 events; BIRD evidence is the
//! enriched question, as the backfill builds it).
//!
//! - `stef_path`: SQL text → sqlspec extraction → question spec, enrichment, alignment and
//!   normalization rules (`stef::prepare`) → deterministic judge → `stef::finish` (Φ) →
//!   `to_row` (the evaluation row with its details JSON). Target: ≥ 25,000 events/s per core.
//! - `stef_path_with_catalogue`: the same with each event's schema from the datasets'
//!   `tables.json` (the catalogue checks run; `details.catalogue` is recorded). Target: the
//!   same ≥ 25,000 events/s per core. It includes question grounding and the grounded checks;
//!   the bench also prints the grounding index's memory per 100 tables (built once per
//!   catalogue load).
//! - `stef_without_extraction`: the same minus sqlparser (SQL specs extracted beforehand), to
//!   show what the STEF-specific part costs.
//!
//! Both are measured twice: in wall time (`deterministic_stef`) and in CPU time of the
//! benchmarking thread (`deterministic_stef_cpu`) — the latter is the per-core rate and stays
//! meaningful on a machine shared with other work.
//!
//! - `result_checks/sample_100_rows`: the result checks (`stef::result_checks::run`) on a
//!   100-row, 3-column result for every event of the corpus (question texts and spec prepared
//!   beforehand, as the STEF path has them). Target: ≤ 3 µs of CPU per event.
//!
//! Run with `cargo bench --bench stef`; numbers are recorded in `benches/README.md`.

use std::time::Duration;

use criterion::measurement::Measurement;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::Value;
use sqlgrade::event::Event;
use sqlgrade::judge::deterministic::DeterministicJudge;
use sqlgrade::stef::{self, RuleProfile};
use sqlgrade_testkit::data::data_dir;

fn read_jsonl(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("shared data file")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

fn corpus() -> Vec<Event> {
    let mut events = Vec::new();
    for dataset in ["bird", "spider"] {
        let dir = data_dir().join(dataset);
        let questions: std::collections::HashMap<i64, Value> = read_jsonl(&dir.join("dev.jsonl"))
            .into_iter()
            .filter_map(|q| Some((q["question_id"].as_i64()?, q)))
            .collect();
        let mut files: Vec<_> = std::fs::read_dir(dir.join("predictions"))
            .expect("predictions dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        files.sort();
        for file in files {
            for p in read_jsonl(&file) {
                let Some(q) = p["question_id"].as_i64().and_then(|id| questions.get(&id)) else {
                    continue;
                };
                let question = q["question"].as_str().unwrap_or_default();
                let evidence = q["evidence"].as_str().unwrap_or("").trim();
                let enriched = (!evidence.is_empty()).then(|| format!("{question} {evidence}"));
                let event = Event::from_value(serde_json::json!({
                    "event_id": format!("{}-{}", dataset, p["question_id"]),
                    "question": question,
                    "enriched_question": enriched,
                    "sql": p["predicted_sql"].as_str().unwrap_or_default(),
                    "dialect": "sqlite",
                    "db_id": q["db_id"],
                }));
                if let Ok(e) = event {
                    events.push(e);
                }
            }
        }
    }
    events
}

mod support;

use support::ThreadCpuTime;

fn bench_stef(c: &mut Criterion) {
    run_group(c, "deterministic_stef");
}

fn bench_stef_cpu(c: &mut Criterion<ThreadCpuTime>) {
    run_group(c, "deterministic_stef_cpu");
}

fn run_group<M: Measurement>(c: &mut Criterion<M>, name: &str) {
    let events = corpus();
    let profile = RuleProfile::default();
    let judge = DeterministicJudge;
    let ts = "2026-11-21T10:00:00Z";
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(events.len() as u64));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("stef_path", |b| {
        b.iter(|| {
            let mut total = 0.0;
            for event in &events {
                total += support::stef_row(event, &profile, ts).value;
            }
            total
        })
    });
    let mut catalogue = sqlgrade::catalogue::SchemaCatalog::new();
    for dataset in ["bird", "spider"] {
        let text = std::fs::read_to_string(data_dir().join(dataset).join("tables.json"))
            .expect("tables.json");
        catalogue.extend(
            sqlgrade::catalogue::SchemaCatalog::parse_tables_json(&text).expect("tables.json"),
        );
    }
    // The grounding index (the names as comparable words) is built once per catalogue load:
    // what it holds, per 100 tables.
    let (mut tables, mut bytes, mut columns) = (0usize, 0usize, 0usize);
    for db in catalogue.db_ids() {
        if let Some(schema) = catalogue.get(db) {
            tables += schema.tables.len();
            columns += schema.columns.len();
            bytes += schema.words().heap_bytes();
        }
    }
    println!(
        "grounding index: {tables} tables, {columns} columns, {:.1} KiB in all = {:.1} KiB per 100 tables",
        bytes as f64 / 1024.0,
        bytes as f64 / 1024.0 * 100.0 / tables.max(1) as f64
    );
    let schemas: Vec<_> = events
        .iter()
        .map(|e| e.db_id.as_deref().and_then(|db| catalogue.get(db)))
        .collect();
    assert!(
        schemas.iter().all(Option::is_some),
        "every event has its schema"
    );
    group.bench_function("stef_path_with_catalogue", |b| {
        b.iter(|| {
            let mut total = 0.0;
            for (event, schema) in events.iter().zip(&schemas) {
                let selection = schema.map_or(
                    stef::CatalogueSelection::None,
                    stef::CatalogueSelection::Schema,
                );
                total += support::stef_row_with(event, &profile, ts, selection).value;
            }
            total
        })
    });
    let specs: Vec<_> = events
        .iter()
        .map(|e| sqlgrade::sqlspec::extract(&e.sql, e.dialect.as_deref()))
        .collect();
    group.bench_function("stef_without_extraction", |b| {
        b.iter(|| {
            let mut total = 0.0;
            for (event, spec) in events.iter().zip(&specs) {
                if let Ok(spec) = spec {
                    let prepared = stef::prepare_with_spec(event, &profile, spec.clone());
                    let assessment = judge.assess_prepared(&prepared);
                    total += stef::finish(&prepared, assessment, &profile)
                        .to_row(event, ts, &profile, 0)
                        .value;
                }
            }
            total
        })
    });
    group.finish();
}

/// The result checks on a 100-row sample (module documentation).
fn bench_result_checks(c: &mut Criterion<ThreadCpuTime>) {
    use sqlgrade::stef::result_checks::{ResultCheckInput, ResultSource, run};
    let events = corpus();
    let profile = RuleProfile::default();
    let prepared: Vec<_> = events
        .iter()
        .filter_map(|e| stef::prepare(e, &profile).ok().map(|p| (e, p)))
        .collect();
    let texts: Vec<_> = prepared
        .iter()
        .map(|(e, _)| stef::text::QuestionTexts::new(&e.question, e.enriched_question.as_deref()))
        .collect();
    let result = sqlgrade::event::QueryResult {
        row_count: Some(100),
        columns: vec!["name".into(), "n".into(), "share".into()],
        rows: (0..100)
            .map(|i| {
                vec![
                    Value::from(format!("item {}", i % 90)),
                    Value::from(i),
                    Value::from(0.5),
                ]
            })
            .collect(),
        ..Default::default()
    };
    let mut group = c.benchmark_group("result_checks");
    group.throughput(Throughput::Elements(prepared.len() as u64));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("sample_100_rows", |b| {
        b.iter(|| {
            let mut found = 0;
            for ((_, p), texts) in prepared.iter().zip(&texts) {
                found += run(&ResultCheckInput {
                    texts,
                    question_spec: &p.question_spec,
                    result: &result,
                    source: ResultSource::Event,
                })
                .len();
            }
            found
        })
    });
    group.finish();
}

criterion_group!(benches, bench_stef);
criterion_group! {
    name = benches_cpu;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = bench_stef_cpu, bench_result_checks
}
criterion_main!(benches, benches_cpu);
