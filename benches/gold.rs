//! Gold-metric benchmarks: ESM, ESM+ and ETM over the 1034 Spider-dev pairs (one core), and EX over
//! the 432 BIRD items of one system, against executing the same queries serially in SQLite.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use sqlgrade::event::Event;
use sqlgrade::exec::Executor;
use sqlgrade::metrics::esm::ir::PlusSchema;
use sqlgrade::metrics::esm::plus::{EsmPlusOptions, esm_plus};
use sqlgrade::metrics::esm::{SpiderEvalOptions, SpiderSchema, esm};
use sqlgrade::metrics::gold::{GoldOptions, GoldScorer};
use sqlgrade::score::sqlite::{ExecLimits, SqliteExecutor};

fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("data file")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

fn spider_pairs() -> Vec<(String, String, String)> {
    let data = sqlgrade_testkit::data::data_dir().join("spider");
    let preds: HashMap<i64, String> = read_jsonl(&data.join("predictions/DAIL-SQL-GPT-4.jsonl"))
        .into_iter()
        .map(|v| {
            (
                v["question_id"].as_i64().unwrap_or_default(),
                v["predicted_sql"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    read_jsonl(&data.join("dev.jsonl"))
        .into_iter()
        .map(|d| {
            let qid = d["question_id"].as_i64().unwrap_or_default();
            (
                d["db_id"].as_str().unwrap_or_default().to_string(),
                d["gold_sql"].as_str().unwrap_or_default().to_string(),
                preds.get(&qid).cloned().unwrap_or_default(),
            )
        })
        .collect()
}

fn bench_esm(c: &mut Criterion) {
    let data = sqlgrade_testkit::data::data_dir().join("spider");
    let mut catalog = sqlgrade::score::sqlite::schema::load_tables_json(&data.join("tables.json"))
        .expect("tables");
    sqlgrade::score::sqlite::schema::introspect_sqlite_dir(&mut catalog, &data.join("databases"))
        .expect("introspect");
    let pairs = spider_pairs();
    let mut spider: HashMap<String, SpiderSchema> = HashMap::new();
    let mut plus: HashMap<String, PlusSchema> = HashMap::new();
    for (db, ..) in &pairs {
        let s = catalog.get(db).expect("schema");
        spider
            .entry(db.clone())
            .or_insert_with(|| SpiderSchema::new(s));
        plus.entry(db.clone()).or_insert_with(|| PlusSchema::new(s));
    }
    let mut g = c.benchmark_group("spider_1034_pairs");
    g.sample_size(20);
    g.bench_function("esm", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for (db, gold, pred) in &pairs {
                let out = esm(&spider[db], gold, pred, SpiderEvalOptions::default());
                n += usize::from(out.is_ok_and(|o| o.verdict));
            }
            n
        })
    });
    g.bench_function("sqlparser_parse_only", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for (_, gold, pred) in &pairs {
                for sql in [gold, pred] {
                    let d = sqlparser::dialect::SQLiteDialect {};
                    n += sqlparser::parser::Parser::parse_sql(&d, sql).map_or(0, |v| v.len());
                }
            }
            n
        })
    });
    let run_plus = || {
        let mut n = 0usize;
        for (db, gold, pred) in &pairs {
            let out = esm_plus(&plus[db], gold, pred, EsmPlusOptions::default());
            n += usize::from(out.is_ok_and(|o| o.verdict));
        }
        n
    };
    g.bench_function("esm_plus", |b| b.iter(run_plus));
    // The same work measured in CPU time of the benchmark thread: time spent descheduled
    // (other processes on a shared machine) is not counted. "One core" of the target.
    g.bench_function("esm_plus_thread_cpu_time", |b| {
        b.iter_custom(|iters| {
            let start = cpu_time::ThreadTime::now();
            for _ in 0..iters {
                std::hint::black_box(run_plus());
            }
            start.elapsed()
        })
    });
    // ETM: preprocessing, the planning check on in-memory schema databases (built once, on
    // the first pass), parse, every rule to a fixpoint, compare.
    let planner = sqlgrade::score::sqlite::schema_db::SchemaPlanner::new();
    let etm_schemas: HashMap<String, sqlgrade::metrics::etm::EtmSchema> = pairs
        .iter()
        .map(|(db, ..)| {
            let s = catalog.get(db).expect("schema");
            (db.clone(), sqlgrade::metrics::etm::EtmSchema::from_db(s))
        })
        .collect();
    let run_etm = || {
        let mut n = 0usize;
        for (db, gold, pred) in &pairs {
            let s = catalog.get(db).expect("schema");
            let out = sqlgrade::metrics::etm::etm(s, &etm_schemas[db], &planner, gold, pred);
            n += usize::from(out.is_ok_and(|o| o.verdict));
        }
        n
    };
    g.bench_function("etm", |b| b.iter(run_etm));
    g.bench_function("etm_thread_cpu_time", |b| {
        b.iter_custom(|iters| {
            let start = cpu_time::ThreadTime::now();
            for _ in 0..iters {
                std::hint::black_box(run_etm());
            }
            start.elapsed()
        })
    });
    g.finish();
}

fn bird_items() -> Vec<(String, String, String, Value)> {
    let data = sqlgrade_testkit::data::data_dir().join("bird");
    let preds: HashMap<i64, String> = read_jsonl(&data.join("predictions/SuperSQL.jsonl"))
        .into_iter()
        .map(|v| {
            (
                v["question_id"].as_i64().unwrap_or_default(),
                v["predicted_sql"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    read_jsonl(&data.join("dev.jsonl"))
        .into_iter()
        .map(|d| {
            let qid = d["question_id"].as_i64().unwrap_or_default();
            (
                d["db_id"].as_str().unwrap_or_default().to_string(),
                d["gold_sql"].as_str().unwrap_or_default().to_string(),
                preds.get(&qid).cloned().unwrap_or_default(),
                d,
            )
        })
        .collect()
}

/// Baseline: every gold and predicted query executed one after the other on plain
/// connections, rows fetched, nothing compared.
fn serial_sqlite(root: &Path, items: &[(String, String, String, Value)]) -> usize {
    let mut conns: HashMap<&str, rusqlite::Connection> = HashMap::new();
    let mut rows = 0usize;
    for (db, gold, pred, _) in items {
        let conn = conns.entry(db.as_str()).or_insert_with(|| {
            rusqlite::Connection::open_with_flags(
                root.join(db).join(format!("{db}.sqlite")),
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .expect("open")
        });
        for sql in [gold, pred] {
            let Ok(mut stmt) = conn.prepare(sql) else {
                continue;
            };
            let width = stmt.column_count();
            let Ok(mut r) = stmt.query([]) else { continue };
            while let Ok(Some(row)) = r.next() {
                for i in 0..width {
                    let _ = row.get_ref(i);
                }
                rows += 1;
            }
        }
    }
    rows
}

fn bench_ex(c: &mut Criterion) {
    let data = sqlgrade_testkit::data::data_dir();
    let root = data.join("bird/databases");
    let items = bird_items();
    let events: Vec<Event> = items
        .iter()
        .map(|(db, gold, pred, d)| {
            Event::from_value(json!({
                "event_id": d["question_id"].to_string(), "question": d["question"], "sql": pred,
                "gold": {"sql": gold, "db_id": db}
            }))
            .expect("event")
        })
        .collect();
    let scorer = GoldScorer::new(
        sqlgrade::score::sqlite::schema::load_tables_json(&data.join("bird/tables.json"))
            .expect("tables"),
    );
    let opts = GoldOptions {
        metrics: [sqlgrade::evaluation::Metric::Ex].into_iter().collect(),
        ..GoldOptions::default()
    };
    let mut g = c.benchmark_group("bird_432_items");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(30));
    g.bench_function("sqlite_serial_baseline", |b| {
        b.iter(|| serial_sqlite(&root, &items))
    });
    // CPU time of the whole process (all threads): the work done, independent of how much of
    // the machine other processes take.
    g.bench_function("sqlite_serial_baseline_process_cpu", |b| {
        b.iter_custom(|iters| {
            let start = cpu_time::ProcessTime::now();
            for _ in 0..iters {
                std::hint::black_box(serial_sqlite(&root, &items));
            }
            start.elapsed()
        })
    });
    g.bench_function("executor_serial_1_worker_uncached", |b| {
        b.iter_with_setup(
            || {
                SqliteExecutor::new(
                    &root,
                    ExecLimits {
                        workers: 1,
                        cache_bytes: 0,
                        ..ExecLimits::default()
                    },
                )
            },
            |exec| {
                let mut rows = 0usize;
                for (db, gold, pred, _) in &items {
                    for sql in [gold, pred] {
                        rows += exec.execute(db, sql).map_or(0, |r| r.rows.len());
                    }
                }
                rows
            },
        )
    });
    let new_exec = || {
        // A fresh executor per run: the per-run cache starts empty.
        SqliteExecutor::new(
            &root,
            ExecLimits {
                workers: 2,
                ..ExecLimits::default()
            },
        )
    };
    let run_ex = |exec: &SqliteExecutor| {
        // Several scorer threads pull events from a shared index, as the pipeline's scorer
        // pool would; the executor runs at most two queries at a time.
        let next = AtomicUsize::new(0);
        std::thread::scope(|sc| {
            let worker = || {
                let mut sum = 0.0;
                while let Some(e) = events.get(next.fetch_add(1, Ordering::Relaxed)) {
                    sum += scorer.score_at(e, exec, &opts, "t")[0].value;
                }
                sum
            };
            let handles: Vec<_> = (0..4).map(|_| sc.spawn(worker)).collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .sum::<f64>()
        })
    };
    g.bench_function("ex_2_workers_4_callers_uncached", |b| {
        b.iter_with_setup(new_exec, |exec| run_ex(&exec))
    });
    g.bench_function("ex_2_workers_4_callers_uncached_process_cpu", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let exec = new_exec();
                let start = cpu_time::ProcessTime::now();
                std::hint::black_box(run_ex(&exec));
                total += start.elapsed();
            }
            total
        })
    });
    g.finish();
}

criterion_group!(benches, bench_esm, bench_ex);
criterion_main!(benches);
