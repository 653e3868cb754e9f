//! `ts_ex` on the shared runs: BIRD dev (three systems × 432, real databases, EX verdicts of
//! the official evaluator in `bird/reference/`) and Spider dev (three systems × 1,034; the
//! shared data has the real database of one Spider schema only, so Spider is mostly
//! suite-only).
//!
//! Per system, for `ts_ex` (constrained suites) and `ts_ex_strict` (constraint-free), each with
//! the real database (mined constraints) and schema only (no database: the schema's and
//! people's assumptions): EX = 1 items a counterexample refutes, EX = 0 items the suite alone
//! (generated databases, the real one left out) finds equivalent, the acceptance, and the CPU
//! time per pair of `ts_ex` (median and total; suites are cached per gold query, so later
//! systems reuse them). Mining each database's constraints is timed on its own. On Spider, the
//! pairs the official ETM script accepts that a counterexample refutes (a check on both).
//!
//! `--show N` prints N `ts_ex` refutations of EX = 1 items with their counterexamples and
//! assumptions, for reading by hand; `--show-dropped N`, N EX = 1 items `ts_ex_strict` refutes
//! and `ts_ex` does not (with the constraints the strict counterexample breaks);
//! `--show-missed N`, EX = 0 items the constrained suite alone finds equivalent;
//! `--show-schema N`, N EX = 1 (ETM = 1 on Spider) items the schema-only constrained suite
//! refutes; `--show-suspect N`, N refutations given up because they hinge on a gold condition
//! nobody asked for (EX's verdict kept), with the relaxed gold, for checking by hand.
//!
//! `cargo run --release --example ts_ex_runs [-- --show 5] [-- --bird-only | --spider-only]`

use std::collections::HashMap;
use std::time::Duration;

use sqlgrade::catalogue::SchemaCatalog;
use sqlgrade::metrics::ex::ExConvention;
use sqlgrade::metrics::ts_ex::{SuiteCheck, SuiteMode, TsOutcome};
use sqlgrade::score::sqlite::schema::load_tables_json;
use sqlgrade::score::sqlite::suite::{SuiteChecker, SuiteConfig};
use sqlgrade::score::sqlite::{ExecLimits, SqliteExecutor};
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

fn arg(args: &[String], name: &str) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Counts for one (checker, mode) over a system's pairs.
#[derive(Default)]
struct Tally {
    accepted: usize,
    ex1_refuted: usize,
    etm1_refuted: usize,
    /// Refutations given up because they hinge on a suspect gold condition (EX's verdict kept).
    gold_suspect: usize,
}

impl Tally {
    fn add(&mut self, out: &TsOutcome, ex: Option<i64>, etm: bool) {
        self.accepted += usize::from(out.verdict);
        let refuted = out.counterexample.is_some() && !out.verdict;
        self.gold_suspect += usize::from(out.gold_suspect.is_some());
        self.ex1_refuted += usize::from(ex == Some(1) && refuted);
        self.etm1_refuted += usize::from(etm && refuted);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let show = arg(&args, "--show");
    let show_dropped = arg(&args, "--show-dropped");
    let show_missed = arg(&args, "--show-missed");
    let show_schema = arg(&args, "--show-schema");
    let show_suspect = arg(&args, "--show-suspect");
    let bird_only = args.iter().any(|a| a == "--bird-only");
    let spider_only = args.iter().any(|a| a == "--spider-only");
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
        let schema_only = SuiteChecker::new(SuiteConfig::default(), limits, None);
        // Mining, timed on its own (once per database; the checks below reuse it).
        for db_id in catalog.db_ids() {
            if real.database_path(db_id).is_none() {
                continue;
            }
            let Some(db) = catalog.get(db_id) else {
                continue;
            };
            let started = std::time::Instant::now();
            let cpu = cpu_time::ThreadTime::now();
            let mined = with_real.constraints(db);
            println!(
                "{dataset} {db_id}: mined {} constraints in {:.0} ms wall, {:.0} ms CPU{}",
                mined.constraints.len(),
                started.elapsed().as_secs_f64() * 1e3,
                cpu.elapsed().as_secs_f64() * 1e3,
                if mined.notes.is_empty() {
                    String::new()
                } else {
                    format!("; notes: {}", mined.notes.join(" | "))
                }
            );
        }
        let dev = read_jsonl(&root.join("dev.jsonl"));
        for system in systems {
            let preds = by_qid(
                &root.join(format!("predictions/{system}.jsonl")),
                "predicted_sql",
            );
            let ex_ref = by_qid(&root.join(format!("reference/ex_{system}.jsonl")), "ex");
            let etm_ref = by_qid(&root.join(format!("reference/etm_{system}.jsonl")), "etm");
            let (mut n, mut gold_errors, mut ex1, mut ex0, mut etm1) = (0usize, 0usize, 0, 0, 0);
            let mut ex0_suite_equivalent = 0;
            let (mut constrained, mut strict) = (Tally::default(), Tally::default());
            let (mut schema_constrained, mut schema_strict) = (Tally::default(), Tally::default());
            let mut times: Vec<Duration> = Vec::new();
            let (mut shown, mut dropped, mut missed, mut schema_shown) = (0, 0, 0, 0);
            let mut suspects_shown = 0;
            for item in &dev {
                let qid = item["question_id"].as_i64().unwrap_or_default();
                let Some(pred) = preds.get(&qid).and_then(|v| v.as_str()) else {
                    continue;
                };
                let db_id = item["db_id"].as_str().unwrap_or_default();
                let gold = item["gold_sql"].as_str().unwrap_or_default();
                let asked = format!(
                    "{}\n{}",
                    item["question"].as_str().unwrap_or_default(),
                    item["evidence"].as_str().unwrap_or_default()
                );
                let Some(db) = catalog.get(db_id) else {
                    continue;
                };
                n += 1;
                let started = cpu_time::ThreadTime::now();
                let out =
                    with_real.check(db, gold, pred, &asked, convention, SuiteMode::Constrained);
                times.push(started.elapsed());
                let Ok(out) = out else {
                    gold_errors += 1;
                    continue;
                };
                let ex = ex_ref.get(&qid).and_then(serde_json::Value::as_i64);
                let etm = etm_ref.get(&qid).and_then(serde_json::Value::as_bool) == Some(true);
                ex1 += usize::from(ex == Some(1));
                ex0 += usize::from(ex == Some(0));
                etm1 += usize::from(etm);
                constrained.add(&out, ex, etm);
                let strict_out =
                    with_real.check(db, gold, pred, &asked, convention, SuiteMode::Strict);
                if let Ok(o) = &strict_out {
                    strict.add(o, ex, etm);
                }
                // Schema only: the suite alone decides (no real database to compare on).
                for (tally, mode) in [
                    (&mut schema_constrained, SuiteMode::Constrained),
                    (&mut schema_strict, SuiteMode::Strict),
                ] {
                    if let Ok(o) = schema_only.check(db, gold, pred, &asked, convention, mode) {
                        tally.add(&o, ex, etm);
                        if mode == SuiteMode::Constrained
                            && (ex == Some(1) || etm)
                            && o.counterexample.is_some()
                            && schema_shown < show_schema
                        {
                            schema_shown += 1;
                            print_refutation(qid, "schema only, EX/ETM = 1", gold, pred, &o);
                        }
                    }
                }
                if let Some(suspect) = &out.gold_suspect
                    && suspects_shown < show_suspect
                {
                    suspects_shown += 1;
                    println!(
                        "--- q{qid}: gold suspect ({}), EX {ex:?}, verdict {}: {}\nquestion: {asked}\nrelaxed gold: {}",
                        suspect.kind, out.verdict, suspect.reason, suspect.relaxed
                    );
                    print_refutation(qid, "the refutation given up", gold, pred, &out);
                }
                if (ex == Some(1) || etm)
                    && !out.verdict
                    && out.counterexample.is_some()
                    && shown < show
                {
                    shown += 1;
                    let what = if ex == Some(1) { "EX = 1" } else { "ETM = 1" };
                    print_refutation(qid, what, gold, pred, &out);
                }
                if ex == Some(1)
                    && out.counterexample.is_none()
                    && dropped < show_dropped
                    && let Ok(o) = &strict_out
                    && o.counterexample.is_some()
                {
                    dropped += 1;
                    print_refutation(qid, "EX = 1, refuted only by ts_ex_strict", gold, pred, o);
                }
                // The suite alone: is the real database the only one telling them apart?
                if ex == Some(0) && out.differs_on == Some("real") && out.pred_error.is_none() {
                    let alone = with_real.check_suite_only(
                        db,
                        gold,
                        pred,
                        &asked,
                        convention,
                        SuiteMode::Constrained,
                    );
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
            times.sort();
            let median = times.get(times.len() / 2).copied().unwrap_or_default();
            let total: Duration = times.iter().sum();
            let pct = |k: usize| 100.0 * k as f64 / n.max(1) as f64;
            println!(
                "{dataset} {system}: {n} pairs, gold errors {gold_errors}; ts_ex CPU per pair median {:.1} ms, total {:.1} s\n\
                 \x20 ts_ex (constraints):      accepts {} ({:.1}%), EX=1 refuted {}/{ex1}, ETM=1 refuted {}/{etm1}; EX=0 equivalent on the suite alone {ex0_suite_equivalent}/{ex0}; refutations given up for a suspect gold {}\n\
                 \x20 ts_ex_strict:             accepts {} ({:.1}%), EX=1 refuted {}/{ex1}, ETM=1 refuted {}/{etm1}\n\
                 \x20 schema only, constraints: accepts {} ({:.1}%), EX=1 refuted {}/{ex1}, ETM=1 refuted {}/{etm1}\n\
                 \x20 schema only, strict:      accepts {} ({:.1}%), EX=1 refuted {}/{ex1}, ETM=1 refuted {}/{etm1}",
                median.as_secs_f64() * 1e3,
                total.as_secs_f64(),
                constrained.accepted,
                pct(constrained.accepted),
                constrained.ex1_refuted,
                constrained.etm1_refuted,
                constrained.gold_suspect,
                strict.accepted,
                pct(strict.accepted),
                strict.ex1_refuted,
                strict.etm1_refuted,
                schema_constrained.accepted,
                pct(schema_constrained.accepted),
                schema_constrained.ex1_refuted,
                schema_constrained.etm1_refuted,
                schema_strict.accepted,
                pct(schema_strict.accepted),
                schema_strict.ex1_refuted,
                schema_strict.etm1_refuted,
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
    if !cx.assumed.is_empty() {
        println!("assumed: {}", cx.assumed.join("; "));
    }
    if !cx.violates.is_empty() {
        println!("breaks: {}", cx.violates.join("; "));
    }
}
