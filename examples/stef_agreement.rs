//! How far the deterministic (line-rate) STEF verdict agrees with execution accuracy on the
//! shared BIRD runs: three systems × the BIRD dev questions in `shared/data`, EX verdicts of the
//! official evaluator in `shared/data/bird/reference/`.
//!
//! For each system, with the schema catalogue (BIRD's `tables.json`) and without it, prints:
//! Cohen's κ and accuracy of the row's verdict (correct/likely_correct = positive) against EX,
//! the share of EX-correct predictions flagged (the false-alarm rate), the share of EX-wrong ones
//! flagged (what the line-rate score catches), and κ at the best Φ cut-off. Then a table per
//! finding code (`details.findings`): how often it fires on EX-correct and EX-wrong items and its
//! precision as an error signal. `CHANGELOG.md` keeps the latest output.
//!
//! EX is a proxy, not a human label: its own false positives and negatives are in these numbers.
//!
//! With `--results`, it also measures the result checks (`stef/result_checks.rs`): on the
//! items whose SQLite database is in `shared/data` it runs each prediction through the daemon's
//! read-only executor, puts what came back into the event's `result` (as an agent's trace
//! would), and prints κ against EX without and with the result, the share of EX-correct
//! predictions flagged, and each result finding's precision.
//!
//! `cargo run --release --example stef_agreement [-- --results]`; `--show CODE` lists the
//! EX-correct predictions a code fires on, `--show-gold CODE` the gold queries it fires on.

use std::collections::{BTreeMap, HashMap};

use sqlgrade::catalogue::SchemaCatalog;
use sqlgrade::commands::backfill::{BackfillFormat, benchmark_events};
use sqlgrade::evaluation::EvaluationRow;
use sqlgrade::event::Event;
use sqlgrade::judge::deterministic::DeterministicJudge;
use sqlgrade::stef::{self, RuleProfile};
use sqlgrade_testkit::data::{data_dir, read_jsonl};

const SYSTEMS: [&str; 3] = ["SuperSQL", "DAIL-SQL", "CHESS-GPT-4o-mini"];

/// One scored item: EX label, row verdict, Φ, finding codes.
struct Item {
    event_id: String,
    evidence: Vec<String>,
    ex: bool,
    verdict: bool,
    phi: f64,
    findings: Vec<String>,
}

/// How the items of [`score_rows`] get a `result`.
#[derive(Clone, Copy)]
enum Results<'a> {
    /// No result: every item, as today.
    None,
    /// Only items whose database `executor` has; `with` says whether the result is given to
    /// the scorer (false: the same items, scored without it).
    Executed {
        executor: &'a sqlgrade::score::sqlite::executor::SqliteExecutor,
        with: bool,
    },
}

fn score_rows(
    system: &str,
    catalogue: Option<&SchemaCatalog>,
    results: Results<'_>,
) -> Result<Vec<Item>, Box<dyn std::error::Error>> {
    let dir = data_dir().join("bird");
    let joined = benchmark_events(
        BackfillFormat::Bird,
        &dir.join("dev.jsonl"),
        &dir.join("predictions").join(format!("{system}.jsonl")),
        None,
    )?;
    let labels: HashMap<String, bool> =
        read_jsonl(&dir.join("reference").join(format!("ex_{system}.jsonl")))
            .iter()
            .map(|v| (v["question_id"].to_string(), v["ex"].as_i64() == Some(1)))
            .collect();
    let profile = RuleProfile::default();
    let mut items = Vec::new();
    for event in &joined.events {
        let Some(qid) = event.event_id.rsplit('-').next() else {
            continue;
        };
        let Some(&ex) = labels.get(qid) else {
            continue;
        };
        let mut event = event.clone();
        if let Results::Executed { executor, with } = results {
            use sqlgrade::exec::Executor as _;
            let Some(db) = event.db_id.clone().filter(|db| executor.has_database(db)) else {
                continue;
            };
            // A run the limits cut short says nothing about the query.
            let Some(result) = executor.result_sample(&db, &event.sql) else {
                continue;
            };
            if with {
                event.result = Some(result);
            }
        }
        let event = &event;
        let row = stef_row(event, &profile, catalogue);
        let details = row.details.to_value();
        let found = details["findings"].as_array().cloned().unwrap_or_default();
        let findings = found
            .iter()
            .filter_map(|f| f["code"].as_str().map(str::to_string))
            .collect();
        let evidence = found
            .iter()
            .map(|f| format!("{}: {}", f["code"], f["evidence"]))
            .collect();
        items.push(Item {
            event_id: event.event_id.clone(),
            evidence,
            ex,
            verdict: row.verdict.unwrap_or(false),
            phi: row.value,
            findings,
        });
    }
    Ok(items)
}

/// The line-rate STEF row of one event (deterministic judge), with the event's schema when a
/// catalogue is given.
fn stef_row(
    event: &Event,
    profile: &RuleProfile,
    catalogue: Option<&SchemaCatalog>,
) -> EvaluationRow {
    let schema = catalogue.and_then(|c| {
        event
            .gold
            .as_ref()
            .and_then(|g| g.db_id.as_deref())
            .and_then(|db| c.get(db))
    });
    let options = stef::PrepareOptions {
        max_sql_bytes: sqlgrade::sqlspec::DEFAULT_MAX_SQL_BYTES,
        catalogue: schema.map_or(
            stef::CatalogueSelection::None,
            stef::CatalogueSelection::Schema,
        ),
    };
    match stef::prepare_with(event, profile, &options) {
        Ok(prepared) => {
            let assessment = DeterministicJudge.assess_prepared(&prepared);
            stef::finish(&prepared, assessment, profile).to_row(event, "", profile, 0)
        }
        Err(e) => stef::non_scorable_row(event, "", &e, profile),
    }
}

/// False alarms on gold SQL, which should raise nothing: for every BIRD and Spider dev question
/// the gold query is scored as if an agent had written it, with the dataset's `tables.json` and
/// without; prints how many gold queries the verdict flags and which codes fire.
fn gold_false_alarms() -> Result<(), Box<dyn std::error::Error>> {
    println!();
    println!("| gold SQL of | catalogue | n | verdict flags | findings (code: gold queries) |");
    println!("|---|---|---:|---:|---|");
    let profile = RuleProfile::default();
    for (format, name, predictions) in [
        (BackfillFormat::Bird, "bird", "SuperSQL"),
        (BackfillFormat::Spider, "spider", "SuperSQL"),
    ] {
        let dir = data_dir().join(name);
        let catalogue =
            SchemaCatalog::parse_tables_json(&std::fs::read_to_string(dir.join("tables.json"))?)?;
        let joined = benchmark_events(
            format,
            &dir.join("dev.jsonl"),
            &dir.join("predictions").join(format!("{predictions}.jsonl")),
            None,
        )?;
        let gold: Vec<Event> = joined
            .events
            .iter()
            .filter_map(|e| {
                let sql = e.gold.as_ref()?.sql.clone()?;
                Some(Event { sql, ..e.clone() })
            })
            .collect();
        for with_catalogue in [false, true] {
            let mut flagged = 0;
            let mut codes: BTreeMap<String, usize> = BTreeMap::new();
            for event in &gold {
                let row = stef_row(event, &profile, with_catalogue.then_some(&catalogue));
                let details = row.details.to_value();
                if !row.verdict.unwrap_or(false) {
                    flagged += 1;
                }
                let mut fired: Vec<String> = details["findings"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|f| f["severity"] != "info")
                    .filter_map(|f| f["code"].as_str().map(str::to_string))
                    .collect();
                fired.sort();
                fired.dedup();
                if let Some(code) = std::env::args().skip_while(|a| a != "--show-gold").nth(1)
                    && with_catalogue
                    && fired.contains(&code)
                {
                    eprintln!(
                        "{name} {}: {}\n    Q: {}\n    findings: {}",
                        event.event_id, event.sql, event.question, details["findings"]
                    );
                }
                for code in fired {
                    *codes.entry(code).or_default() += 1;
                }
            }
            let listed: Vec<String> = codes.iter().map(|(c, n)| format!("`{c}`: {n}")).collect();
            println!(
                "| {name} | {} | {} | {flagged} ({:.1} %) | {} |",
                if with_catalogue { "yes" } else { "no" },
                gold.len(),
                100.0 * flagged as f64 / gold.len().max(1) as f64,
                if listed.is_empty() {
                    "—".to_string()
                } else {
                    listed.join(", ")
                },
            );
        }
    }
    Ok(())
}

/// Cohen's κ and accuracy of `pred` against `truth`.
fn kappa(pairs: &[(bool, bool)]) -> (f64, f64) {
    let n = pairs.len() as f64;
    if n == 0.0 {
        return (f64::NAN, f64::NAN);
    }
    let agree = pairs.iter().filter(|(t, p)| t == p).count() as f64 / n;
    let t1 = pairs.iter().filter(|(t, _)| *t).count() as f64 / n;
    let p1 = pairs.iter().filter(|(_, p)| *p).count() as f64 / n;
    let expected = t1 * p1 + (1.0 - t1) * (1.0 - p1);
    let k = if expected >= 1.0 {
        0.0
    } else {
        (agree - expected) / (1.0 - expected)
    };
    (k, agree)
}

fn best_cutoff(items: &[Item]) -> (f64, f64) {
    let mut best = (f64::NEG_INFINITY, 0.0);
    for cut in 0..=100 {
        let c = f64::from(cut);
        let pairs: Vec<(bool, bool)> = items.iter().map(|i| (i.ex, i.phi >= c)).collect();
        let (k, _) = kappa(&pairs);
        if k > best.0 {
            best = (k, c);
        }
    }
    best
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `--show CODE`: list the EX-correct items a finding code fires on (its false alarms).
    let show: Option<String> = std::env::args().skip_while(|a| a != "--show").nth(1);
    let tables = std::fs::read_to_string(data_dir().join("bird").join("tables.json"))?;
    let catalogue = SchemaCatalog::parse_tables_json(&tables)?;
    println!(
        "| system | catalogue | n | EX-correct | κ (verdict) | accuracy | flagged of EX-correct | flagged of EX-wrong | κ at best Φ cut-off |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut by_code: BTreeMap<(bool, String), (usize, usize)> = BTreeMap::new();
    let mut totals: BTreeMap<bool, (usize, usize)> = BTreeMap::new();
    for with_catalogue in [false, true] {
        let mut all = Vec::new();
        for system in SYSTEMS {
            let items = score_rows(system, with_catalogue.then_some(&catalogue), Results::None)?;
            if let Some(code) = &show
                && with_catalogue
            {
                for item in items.iter().filter(|i| i.ex && i.findings.contains(code)) {
                    eprintln!("{} {:?}", item.event_id, item.evidence);
                }
            }
            report_line(system, with_catalogue, &items);

            all.extend(items);
        }
        report_line("all three", with_catalogue, &all);
        let total = totals.entry(with_catalogue).or_default();
        for item in &all {
            if item.ex {
                total.0 += 1;
            } else {
                total.1 += 1;
            }
            let mut codes = item.findings.clone();
            codes.sort();
            codes.dedup();
            for code in codes {
                let e = by_code.entry((with_catalogue, code)).or_default();
                if item.ex {
                    e.0 += 1;
                } else {
                    e.1 += 1;
                }
            }
        }
    }
    println!();
    println!(
        "| finding | catalogue | fires on EX-correct | fires on EX-wrong | precision (EX-wrong share) |"
    );
    println!("|---|---|---:|---:|---:|");
    for ((with_catalogue, code), (ok, wrong)) in &by_code {
        let (n_ok, n_wrong) = totals.get(with_catalogue).copied().unwrap_or((0, 0));
        println!(
            "| `{code}` | {} | {ok} ({:.1} %) | {wrong} ({:.1} %) | {:.2} |",
            if *with_catalogue { "yes" } else { "no" },
            100.0 * *ok as f64 / n_ok.max(1) as f64,
            100.0 * *wrong as f64 / n_wrong.max(1) as f64,
            *wrong as f64 / (ok + wrong).max(1) as f64,
        );
    }
    gold_false_alarms()?;
    if std::env::args().any(|a| a == "--results") {
        result_agreement(&catalogue)?;
    }
    Ok(())
}

/// The result checks' effect (module documentation, `--results`).
fn result_agreement(catalogue: &SchemaCatalog) -> Result<(), Box<dyn std::error::Error>> {
    let executor = sqlgrade::score::sqlite::executor::SqliteExecutor::new(
        data_dir().join("bird").join("databases"),
        sqlgrade::score::sqlite::executor::ExecLimits {
            timeout: std::time::Duration::from_secs(10),
            ..Default::default()
        },
    );
    const RESULT_CODES: [&str; 7] = [
        "query_fails",
        "empty_result",
        "null_result",
        "row_count_mismatch",
        "ratio_not_percentage",
        "duplicate_rows",
        "zero_count",
    ];
    println!();
    println!(
        "| catalogue | result | n | EX-correct | κ (verdict) | accuracy | flagged of EX-correct | flagged of EX-wrong |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    let mut by_code: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for with_catalogue in [false, true] {
        for with in [false, true] {
            let mut all = Vec::new();
            for system in SYSTEMS {
                all.extend(score_rows(
                    system,
                    with_catalogue.then_some(catalogue),
                    Results::Executed {
                        executor: &executor,
                        with,
                    },
                )?);
            }
            let pairs: Vec<(bool, bool)> = all.iter().map(|i| (i.ex, i.verdict)).collect();
            let (k, acc) = kappa(&pairs);
            let ok = all.iter().filter(|i| i.ex).count();
            let wrong = all.len() - ok;
            println!(
                "| {} | {} | {} | {ok} | {k:.3} | {:.1} % | {:.1} % | {:.1} % |",
                if with_catalogue { "yes" } else { "no" },
                if with { "yes" } else { "no" },
                all.len(),
                100.0 * acc,
                100.0 * all.iter().filter(|i| i.ex && !i.verdict).count() as f64 / ok.max(1) as f64,
                100.0 * all.iter().filter(|i| !i.ex && !i.verdict).count() as f64
                    / wrong.max(1) as f64,
            );
            if with && !with_catalogue {
                for item in &all {
                    let mut codes: Vec<&String> = item
                        .findings
                        .iter()
                        .filter(|c| RESULT_CODES.contains(&c.as_str()))
                        .collect();
                    codes.sort();
                    codes.dedup();
                    for code in codes {
                        let e = by_code.entry(code.clone()).or_default();
                        if item.ex {
                            e.0 += 1;
                            if std::env::args().any(|a| a == "--show-result") {
                                eprintln!("{} {:?}", item.event_id, item.evidence);
                            }
                        } else {
                            e.1 += 1;
                        }
                    }
                }
            }
        }
    }
    println!();
    println!(
        "| result finding | fires on EX-correct | fires on EX-wrong | precision (EX-wrong share) |"
    );
    println!("|---|---:|---:|---:|");
    for (code, (ok, wrong)) in &by_code {
        println!(
            "| `{code}` | {ok} | {wrong} | {:.2} |",
            *wrong as f64 / (ok + wrong).max(1) as f64
        );
    }
    Ok(())
}

fn report_line(system: &str, with_catalogue: bool, items: &[Item]) {
    let pairs: Vec<(bool, bool)> = items.iter().map(|i| (i.ex, i.verdict)).collect();
    let (k, acc) = kappa(&pairs);
    let ok: Vec<&Item> = items.iter().filter(|i| i.ex).collect();
    let wrong: Vec<&Item> = items.iter().filter(|i| !i.ex).collect();
    let flagged_ok = ok.iter().filter(|i| !i.verdict).count();
    let flagged_wrong = wrong.iter().filter(|i| !i.verdict).count();
    let (best_k, cut) = best_cutoff(items);
    let flagged_ok_at_cut = ok.iter().filter(|i| i.phi < cut).count();
    println!(
        "| {system} | {} | {} | {} | {k:.3} | {:.1} % | {:.1} % | {:.1} % | {best_k:.3} (Φ ≥ {cut}; {:.1} % of EX-correct below) |",
        if with_catalogue { "yes" } else { "no" },
        items.len(),
        ok.len(),
        100.0 * acc,
        100.0 * flagged_ok as f64 / ok.len().max(1) as f64,
        100.0 * flagged_wrong as f64 / wrong.len().max(1) as f64,
        100.0 * flagged_ok_at_cut as f64 / ok.len().max(1) as f64,
    );
}
