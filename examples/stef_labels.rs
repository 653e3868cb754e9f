//! How far the line-rate STEF verdict agrees with **people**: the 1,483 BIRD-dev predictions
//! that SQL experts judged (`shared/data/labels/nl2sql-bugs-dev.jsonl`, NL2SQL-Bugs), scored as
//! an agent's events (question, enriched question = question + evidence, SQL, `db_id`) by the
//! deterministic judge, without a schema and with BIRD's `tables.json` as the catalogue.
//!
//! This is the development measurement a check is kept or dropped by (not EX: EX over BIRD's
//! gold disagrees with experts on about one item in five). It prints, per setting:
//!
//! - Cohen's κ of the verdict (`correct`/`likely_correct` = positive) against the experts, with
//!   its 95% interval (`sampling::agreement::Confusion`: the large-sample interval), accuracy
//!   with its Wilson interval, the share of correct queries flagged and of wrong ones caught;
//! - the same at the Φ cut-off 60 (Φ < 60 = flagged) and at the best cut-off that flags at most
//!   10% of the correct queries (the acceptance rule);
//! - κ per database half (a check tuned on one half should hold on the other);
//! - recall per expert error category (a wrong item counts under each category it carries);
//! - every finding code: its severity, how often it fired (items), on how many correct and wrong
//!   items, its precision as an error signal with a Wilson interval, and whether it meets the
//!   bar (≥ 90% at error severity, ≥ 75% at warning; info findings do not change the verdict).
//!
//! The databases' SQLite files are not in `shared/`, so neither the agent's `result` nor the
//! probe can be measured here; `stef_agreement --results` measures those against EX on the three
//! databases that are shipped.
//!
//! `cargo run --release --example stef_labels [-- --show CODE] [-- --missed CATEGORY]`:
//! `--show` lists the correct items a code fires on (its false alarms) and the wrong ones,
//! `--missed` the wrong items of a category nothing flags, `--rule TEXT` the items whose
//! deterministic rationale contains TEXT (all with the catalogue).

use std::collections::BTreeMap;

use sqlgrade::catalogue::SchemaCatalog;
use sqlgrade::evaluation::EvaluationRow;
use sqlgrade::event::Event;
use sqlgrade::judge::deterministic::DeterministicJudge;
use sqlgrade::sampling::agreement::Confusion;
use sqlgrade::sampling::estimate::wilson_interval;
use sqlgrade::stef::{self, RuleProfile};
use sqlgrade_testkit::data::{data_dir, read_jsonl};
use sqlgrade_testkit::verdict_labels::label_event;

/// The Φ cut-off of the measurements (Φ below it = flagged).
const CUT: f64 = 60.0;
/// The largest share of correct queries a cut-off may flag in the acceptance rule.
const MAX_FLAGGED_CORRECT: f64 = 0.10;
/// The precision a finding must reach on people's labels at each severity.
const BAR_ERROR: f64 = 0.90;
const BAR_WARNING: f64 = 0.75;

/// One labelled prediction with what the line-rate score made of it.
struct Item {
    id: String,
    db_id: String,
    sql: String,
    question: String,
    label: bool,
    categories: Vec<String>,
    /// The four-point verdict is `correct` or `likely_correct`.
    verdict: bool,
    /// The four-point verdict (`correct` … `incorrect`).
    semantic: String,
    phi: f64,
    /// The deterministic judge's rule (`rule 3`) and what it names.
    rationale: String,
    /// (code, severity, evidence)
    findings: Vec<(String, String, String)>,
}

/// The expert category's short name: "Attribute-Related Errors" → "attribute".
fn category(error_type: &str) -> String {
    let first = error_type.split(['-', ' ']).next().unwrap_or(error_type);
    match first {
        "Other" => "other".into(),
        s => s.to_ascii_lowercase(),
    }
}

fn events() -> Vec<(Event, bool, Vec<String>)> {
    let path = data_dir().join("labels").join("nl2sql-bugs-dev.jsonl");
    read_jsonl(&path)
        .into_iter()
        .filter_map(|v| {
            let mut categories: Vec<String> = v["error_types"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["error_type"].as_str().map(category))
                .collect();
            categories.sort();
            categories.dedup();
            let event = label_event("nl2sql-bugs-dev", &v)?;
            Some((event, v["label"].as_bool()?, categories))
        })
        .collect()
}

fn stef_row(
    event: &Event,
    profile: &RuleProfile,
    catalogue: Option<&SchemaCatalog>,
) -> EvaluationRow {
    let schema = catalogue.and_then(|c| event.db_id.as_deref().and_then(|db| c.get(db)));
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

fn score(catalogue: Option<&SchemaCatalog>) -> Vec<Item> {
    let profile = RuleProfile::default();
    events()
        .into_iter()
        .map(|(event, label, categories)| {
            let row = stef_row(&event, &profile, catalogue);
            let details = row.details.to_value();
            let findings = details["findings"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|f| {
                    let s = |k: &str| f[k].as_str().unwrap_or_default().to_string();
                    (s("code"), s("severity"), s("evidence"))
                })
                .collect();
            Item {
                rationale: details["rationale"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                id: event.event_id.clone(),
                db_id: event.db_id.clone().unwrap_or_default(),
                sql: event.sql.clone(),
                question: event
                    .enriched_question
                    .clone()
                    .unwrap_or(event.question.clone()),
                label,
                categories,
                // The checks' own call: the four-point verdict (`correct` / `likely_correct`), not
                // the row's learned verdict, whose model was fitted on these very labels
                // (`examples/verdict_model.rs` measures that one held out).
                verdict: row.stef.as_ref().is_some_and(|s| {
                    sqlgrade::evaluation::four_point_counts_as_correct(&s.semantic_verdict)
                }),
                semantic: row
                    .stef
                    .as_ref()
                    .map_or("not scored".into(), |s| s.semantic_verdict.to_string()),
                phi: row.value,
                findings,
            }
        })
        .collect()
}

/// What a rationale's first reason is, as a kind: a finding's code, or the alignment's words
/// (`partially applied filters`, `missing aggregations count`, `unanswered outputs`, …).
fn rule_reason(rest: &str) -> String {
    const KINDS: [&str; 14] = [
        "no required filter applied",
        "partially applied filters",
        "missing aggregations count",
        "missing aggregations",
        "unanswered outputs",
        "columns nobody asked for",
        "extra filters",
        "grouping missing",
        "unrequested grouping",
        "enrichment adds constraints",
        "enrichment",
        "nothing in the question could be checked",
        "LIMIT",
        "unexplained ORDER BY",
    ];
    let first = rest.trim().split(';').next().unwrap_or_default().trim();
    if let Some(kind) = KINDS.iter().find(|k| first.starts_with(*k)) {
        return (*kind).to_string();
    }
    match first.split_once(':') {
        Some((code, _)) if code.contains('_') && !code.contains(' ') => code.to_string(),
        _ => first
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    }
}

fn confusion(items: &[&Item], positive: impl Fn(&Item) -> bool) -> Confusion {
    let mut c = Confusion::default();
    for item in items {
        c.add(positive(item), item.label);
    }
    c
}

fn pct(x: Option<f64>) -> String {
    x.map_or("—".into(), |x| format!("{:.1} %", 100.0 * x))
}

fn interval(x: Option<(f64, f64)>, scale: f64) -> String {
    x.map_or("—".into(), |(lo, hi)| {
        format!("[{:.2}, {:.2}]", lo * scale, hi * scale)
    })
}

/// κ [interval], accuracy, flagged of correct, caught of wrong for one flag rule.
fn agreement_cells(items: &[&Item], positive: impl Fn(&Item) -> bool) -> String {
    let c = confusion(items, positive);
    let correct = (c.tp + c.fn_).max(1) as f64;
    let wrong = (c.fp + c.tn).max(1) as f64;
    format!(
        "{:.3} {} | {} | {:.1} % | {:.1} %",
        c.kappa().unwrap_or(f64::NAN),
        interval(c.kappa_interval(), 1.0),
        pct(c.accuracy()),
        100.0 * c.fn_ as f64 / correct,
        100.0 * c.tn as f64 / wrong,
    )
}

/// The cut-off with the best κ among those flagging at most 10% of the correct queries.
fn acceptance_cut(items: &[&Item]) -> (f64, f64) {
    let correct = items.iter().filter(|i| i.label).count().max(1) as f64;
    let mut best = (f64::NEG_INFINITY, 0.0);
    for cut in 0..=100 {
        let c = f64::from(cut);
        let flagged_correct = items.iter().filter(|i| i.label && i.phi < c).count() as f64;
        if flagged_correct / correct > MAX_FLAGGED_CORRECT {
            continue;
        }
        let k = confusion(items, |i| i.phi >= c).kappa().unwrap_or(f64::NAN);
        if k > best.0 {
            best = (k, c);
        }
    }
    best
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| args.iter().skip_while(|a| *a != name).nth(1).cloned();
    let show = arg("--show");
    let missed = arg("--missed");
    let rule = arg("--rule");
    let tables = std::fs::read_to_string(data_dir().join("bird").join("tables.json"))
        .expect("shared/data/bird/tables.json");
    let catalogue = SchemaCatalog::parse_tables_json(&tables).expect("tables.json parses");

    let settings: [(&str, Option<&SchemaCatalog>); 2] =
        [("none", None), ("catalogue", Some(&catalogue))];
    let scored: Vec<(&str, Vec<Item>)> = settings
        .iter()
        .map(|(name, cat)| (*name, score(*cat)))
        .collect();

    println!("## Agreement with the experts (n = items; positive = judged correct)");
    println!();
    println!(
        "| schema | flag | n | correct | κ [95% interval] | accuracy | flagged of correct | caught of wrong |"
    );
    println!("|---|---|---:|---:|---|---:|---:|---:|");
    for (name, items) in &scored {
        let all: Vec<&Item> = items.iter().collect();
        let correct = all.iter().filter(|i| i.label).count();
        let (_, best) = acceptance_cut(&all);
        for (flag, cells) in [
            ("verdict".to_string(), agreement_cells(&all, |i| i.verdict)),
            (
                format!("Φ < {CUT}"),
                agreement_cells(&all, |i| i.phi >= CUT),
            ),
            (
                format!("Φ < {best} (best with ≤ 10 % of correct flagged)"),
                agreement_cells(&all, |i| i.phi >= best),
            ),
        ] {
            println!("| {name} | {flag} | {} | {correct} | {cells} |", all.len());
        }
    }

    println!();
    println!("## κ (verdict) by database half (a check tuned on one should hold on the other)");
    println!();
    println!(
        "| schema | databases | n | κ [95% interval] | accuracy | flagged of correct | caught of wrong |"
    );
    println!("|---|---|---:|---|---:|---:|---:|");
    const FIRST_HALF: [&str; 4] = [
        "california_schools",
        "card_games",
        "codebase_community",
        "debit_card_specializing",
    ];
    for (name, items) in &scored {
        for (half, first) in [
            (
                "california_schools, card_games, codebase_community, debit_card_specializing",
                true,
            ),
            (
                "european_football_2, financial, formula_1, thrombosis_prediction",
                false,
            ),
        ] {
            let part: Vec<&Item> = items
                .iter()
                .filter(|i| FIRST_HALF.contains(&i.db_id.as_str()) == first)
                .collect();
            println!(
                "| {name} | {half} | {} | {} |",
                part.len(),
                agreement_cells(&part, |i| i.verdict)
            );
        }
    }

    println!();
    println!("## Share judged correct by the experts, per four-point verdict (is it ordinal?)");
    println!();
    println!("| schema | correct | likely_correct | potentially_incorrect | incorrect |");
    println!("|---|---:|---:|---:|---:|");
    for (name, items) in &scored {
        print!("| {name} |");
        for v in [
            "correct",
            "likely_correct",
            "potentially_incorrect",
            "incorrect",
        ] {
            let of: Vec<&Item> = items.iter().filter(|i| i.semantic == v).collect();
            let ok = of.iter().filter(|i| i.label).count();
            print!(
                " {:.2} ({ok}/{}) |",
                ok as f64 / of.len().max(1) as f64,
                of.len()
            );
        }
        println!();
    }

    println!();
    println!("## Recall per expert error category (wrong items flagged by the verdict)");
    println!();
    print!("| category | wrong items |");
    for (name, _) in &scored {
        print!(" caught, {name} |");
    }
    println!();
    println!("|---|---:|{}", "---:|".repeat(scored.len()));
    let mut categories: BTreeMap<&str, usize> = BTreeMap::new();
    for item in &scored[0].1 {
        for c in &item.categories {
            *categories.entry(c.as_str()).or_default() += 1;
        }
    }
    for (cat, n) in &categories {
        print!("| {cat} | {n} |");
        for (_, items) in &scored {
            let caught = items
                .iter()
                .filter(|i| i.categories.iter().any(|c| c == cat) && !i.verdict)
                .count();
            print!(
                " {caught} ({:.0} %) |",
                100.0 * caught as f64 / (*n).max(1) as f64
            );
        }
        println!();
    }

    println!();
    println!(
        "## Findings on people's labels (items; precision = share of wrong items among those it fires on)"
    );
    println!();
    println!(
        "| finding | severity | schema | fired | on correct | on wrong | precision [95% interval] | bar |"
    );
    println!("|---|---|---|---:|---:|---:|---|---|");
    for (name, items) in &scored {
        // (code, severity) → (on correct, on wrong)
        let mut by_code: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
        for item in items {
            let mut fired: Vec<(String, String)> = item
                .findings
                .iter()
                .map(|(c, s, _)| (c.clone(), s.clone()))
                .collect();
            fired.sort();
            fired.dedup();
            for key in fired {
                let e = by_code.entry(key).or_default();
                if item.label {
                    e.0 += 1;
                } else {
                    e.1 += 1;
                }
            }
        }
        for ((code, severity), (ok, wrong)) in &by_code {
            let fired = ok + wrong;
            let precision = *wrong as f64 / fired.max(1) as f64;
            let bar = match severity.as_str() {
                "error" => Some(BAR_ERROR),
                "warning" => Some(BAR_WARNING),
                _ => None,
            };
            let meets = match bar {
                Some(b) if precision >= b => format!("meets ≥ {:.0} %", 100.0 * b),
                Some(b) => format!("**below {:.0} %**", 100.0 * b),
                None => "info: no effect on the verdict".into(),
            };
            println!(
                "| `{code}` | {severity} | {name} | {fired} | {ok} | {wrong} | {:.1} % {} | {meets} |",
                100.0 * precision,
                interval(wilson_interval(*wrong, fired), 100.0),
            );
        }
    }

    println!();
    println!("## Φ distribution with the catalogue (where a cut-off can go)");
    println!();
    println!(
        "| Φ | correct | wrong | correct flagged below the next Φ | wrong caught below the next Φ |"
    );
    println!("|---:|---:|---:|---:|---:|");
    let mut by_phi: BTreeMap<i64, (usize, usize)> = BTreeMap::new();
    for item in &scored[1].1 {
        let e = by_phi.entry((item.phi * 100.0).round() as i64).or_default();
        if item.label {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
    }
    let (n_ok, n_wrong) =
        scored[1].1.iter().fold(
            (0, 0),
            |(a, b), i| {
                if i.label { (a + 1, b) } else { (a, b + 1) }
            },
        );
    let (mut cum_ok, mut cum_wrong) = (0, 0);
    for (phi, (ok, wrong)) in &by_phi {
        cum_ok += ok;
        cum_wrong += wrong;
        println!(
            "| {:.2} | {ok} | {wrong} | {:.1} % | {:.1} % |",
            *phi as f64 / 100.0,
            100.0 * cum_ok as f64 / f64::from(n_ok.max(1)),
            100.0 * cum_wrong as f64 / f64::from(n_wrong.max(1)),
        );
    }

    println!();
    println!("## Which rule of the deterministic judge decided (with the catalogue)");
    println!();
    println!("| rule | reason | correct | wrong | precision of a flag |");
    println!("|---|---|---:|---:|---:|");
    let mut by_rule: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
    for item in &scored[1].1 {
        let rule = item
            .rationale
            .split(':')
            .next()
            .unwrap_or_default()
            .to_string();
        let rest = item.rationale.split_once(':').map_or("", |(_, r)| r);
        let reason = rule_reason(rest);
        let e = by_rule.entry((rule, reason)).or_default();
        if item.label {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
    }
    for ((rule, reason), (ok, wrong)) in &by_rule {
        println!(
            "| {rule} | {reason} | {ok} | {wrong} | {:.1} % |",
            100.0 * *wrong as f64 / (ok + wrong).max(1) as f64
        );
    }

    let with_catalogue = &scored[1].1;
    if let Some(code) = show {
        for item in with_catalogue {
            for (c, s, evidence) in &item.findings {
                if *c == code {
                    eprintln!(
                        "{} [{}] {} {s}: {evidence}\n    Q: {}\n    SQL: {}",
                        if item.label { "CORRECT" } else { "wrong  " },
                        item.id,
                        item.categories.join(","),
                        item.question,
                        item.sql
                    );
                }
            }
        }
    }
    if let Some(rule) = rule {
        for item in with_catalogue
            .iter()
            .filter(|i| i.rationale.contains(&rule))
        {
            eprintln!(
                "{} [{}] Φ {} {}\n    Q: {}\n    SQL: {}",
                if item.label { "CORRECT" } else { "wrong  " },
                item.id,
                item.phi,
                item.rationale,
                item.question,
                item.sql
            );
        }
    }
    if let Some(cat) = missed {
        for item in with_catalogue
            .iter()
            .filter(|i| !i.label && i.verdict)
            .filter(|i| i.categories.contains(&cat))
        {
            eprintln!(
                "[{}] {} Φ {}\n    Q: {}\n    SQL: {}\n    findings: {:?}",
                item.id,
                item.categories.join(","),
                item.phi,
                item.question,
                item.sql,
                item.findings
            );
        }
    }
}
