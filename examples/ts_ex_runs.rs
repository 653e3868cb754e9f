//! `ts_ex` on the shared runs: BIRD dev (three systems × 432, real databases, EX verdicts of
//! the official evaluator in `bird/reference/`) and Spider dev (three systems × 1,034; the
//! shared data has the real database of one Spider schema only, so Spider is mostly
//! suite-only).
//!
//! Per system: EX = 1 items a counterexample refutes, EX = 0 items the suite alone (generated
//! databases, the real one left out) finds equivalent, the `ts_ex` acceptance, and the CPU time
//! per pair (median and total; suites are cached per gold query, so later systems reuse them).
//! On Spider, the pairs the official ETM script accepts that a counterexample refutes (a check
//! on both). `--show N` prints N refutations with their counterexamples for reading by hand;
//! `--show-missed N`, EX = 0 items the suite alone finds equivalent.
//!
//! `cargo run --release --example ts_ex_runs [-- --show 5] [-- --bird-only | --spider-only]`

use std::collections::HashMap;
use std::time::Duration;

use sqlgrade::catalogue::SchemaCatalog;
use sqlgrade::metrics::ex::ExConvention;
use sqlgrade::metrics::ts_ex::{SuiteCheck, TsOutcome};
use sqlgrade::sqlite::schema::load_tables_json;
use sqlgrade::sqlite::suite::{SuiteChecker, SuiteConfig};
use sqlgrade::sqlite::{ExecLimits, SqliteExecutor};
use sqlgrade_testkit::data::{data_dir, read_jsonl};

/// `field` by question id; empty when the file does not exist (Spider has no EX reference,
/// BIRD no ETM one).
fn by_qid(path: &std::path::Path, field: &str) -> HashMap<i64, serde_json::Value> {
    if !path.is_file() {
        return HashMap::new();
    }
    read_jsonl(path)
        .into_iter()
        .map(|v| {
            (
                v["question_id"].as_i64().unwrap_or_default(),
                v[field].clone(),
            )
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let show: usize = args
        .iter()
        .position(|a| a == "--show")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let bird_only = args.iter().any(|a| a == "--bird-only");
    let spider_only = args.iter().any(|a| a == "--spider-only");
    let show_missed: usize = args
        .iter()
        .position(|a| a == "--show-missed")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let limits = ExecLimits {
        timeout: Duration::from_millis(2_000),
        max_rows: 100_000,
        ..ExecLimits::default()
    };
    for (dataset, systems, convention) in [
        (
            "bird",
            ["SuperSQL", "DAIL-SQL", "CHESS-GPT-4o-mini"],
            ExConvention::Bird,
        ),
        (
            "spider",
            ["DAIL-SQL-GPT-4", "SuperSQL", "TA-ACL"],
            ExConvention::SpiderTestSuite,
        ),
    ] {
        if (bird_only && dataset == "spider") || (spider_only && dataset == "bird") {
            continue;
        }
        let root = data_dir().join(dataset);
        let catalog: SchemaCatalog = load_tables_json(&root.join("tables.json")).expect("tables");
        let real = SqliteExecutor::new(root.join("databases"), limits);
        let with_real = SuiteChecker::new(SuiteConfig::default(), limits, Some(real.clone()));
        let dev = read_jsonl(&root.join("dev.jsonl"));
        for system in systems {
            let preds = by_qid(
                &root.join(format!("predictions/{system}.jsonl")),
                "predicted_sql",
            );
            let ex_ref = by_qid(&root.join(format!("reference/ex_{system}.jsonl")), "ex");
            let etm_ref = by_qid(&root.join(format!("reference/etm_{system}.jsonl")), "etm");
            let (mut etm1, mut etm1_refuted) = (0usize, 0usize);
            let (mut n, mut accepted, mut gold_errors) = (0usize, 0usize, 0usize);
            let (mut ex1, mut ex1_refuted, mut ex0, mut ex0_suite_equivalent) = (0, 0, 0, 0);
            let mut times: Vec<Duration> = Vec::new();
            let mut shown = 0;
            let mut missed = 0;
            for item in &dev {
                let qid = item["question_id"].as_i64().unwrap_or_default();
                let Some(pred) = preds.get(&qid).and_then(|v| v.as_str()) else {
                    continue;
                };
                let db_id = item["db_id"].as_str().unwrap_or_default();
                let gold = item["gold_sql"].as_str().unwrap_or_default();
                let Some(db) = catalog.get(db_id) else {
                    continue;
                };
                n += 1;
                let started = cpu_time::ThreadTime::now();
                let out = with_real.check(db, gold, pred, convention);
                times.push(started.elapsed());
                let Ok(out) = out else {
                    gold_errors += 1;
                    continue;
                };
                accepted += usize::from(out.verdict);
                if etm_ref.get(&qid).and_then(serde_json::Value::as_bool) == Some(true) {
                    etm1 += 1;
                    if out.counterexample.is_some() {
                        etm1_refuted += 1;
                        if shown < show {
                            shown += 1;
                            print_refutation(qid, "ETM = 1", gold, pred, &out);
                        }
                    }
                }
                let ex = ex_ref.get(&qid).and_then(serde_json::Value::as_i64);
                match ex {
                    Some(1) => {
                        ex1 += 1;
                        if out.counterexample.is_some() {
                            ex1_refuted += 1;
                            if shown < show && dataset == "bird" {
                                shown += 1;
                                print_refutation(qid, "EX = 1", gold, pred, &out);
                            }
                        }
                    }
                    Some(_) => {
                        ex0 += 1;
                        // The suite alone: is the real database the only one telling them apart?
                        if out.differs_on == Some("real") && out.pred_error.is_none() {
                            let alone = with_real.check_suite_only(db, gold, pred, convention);
                            if let Some(alone) = alone.ok().filter(|o| o.verdict) {
                                ex0_suite_equivalent += 1;
                                if missed < show_missed {
                                    missed += 1;
                                    println!(
                                        "--- q{qid}: EX = 0, equivalent on the suite ({} databases, {}/{} mutants told apart)\ngold: {gold}\npred: {pred}",
                                        alone.suite_size, alone.mutants_killed, alone.mutants
                                    );
                                }
                            }
                        }
                    }
                    None => {}
                }
            }
            times.sort();
            let median = times.get(times.len() / 2).copied().unwrap_or_default();
            let total: Duration = times.iter().sum();
            println!(
                "{dataset} {system}: {n} pairs, ts_ex accepts {accepted} ({:.1}%), gold errors {gold_errors}; \
                 EX=1 refuted by a counterexample {ex1_refuted}/{ex1}; EX=0 equivalent on the whole suite {ex0_suite_equivalent}/{ex0}; \
                 official ETM accepts, a counterexample refutes {etm1_refuted}/{etm1}; \
                 CPU per pair median {:.1} ms, total {:.1} s",
                100.0 * accepted as f64 / n.max(1) as f64,
                median.as_secs_f64() * 1e3,
                total.as_secs_f64()
            );
        }
        real.shutdown();
    }
}

fn print_refutation(qid: i64, what: &str, gold: &str, pred: &str, out: &TsOutcome) {
    let Some(cx) = &out.counterexample else {
        return;
    };
    println!("--- q{qid}: {what}, refuted on a {}-row database", cx.rows);
    println!("gold: {gold}\npred: {pred}");
    print!("{}", cx.script);
    println!("gold result: {:?}", cx.gold);
    println!("pred result: {:?}", cx.pred);
}
