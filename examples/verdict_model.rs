//! Fit the shipped correctness model on people's verdicts and measure it on labels it was not
//! fitted on (issue 75).
//!
//! Both label sources of `shared/data/labels` — NL2SQL-Bugs (1,483 BIRD-dev predictions judged
//! by SQL experts) and ROSE-VEC (245 more, other annotators and agents) — are scored as agents'
//! events (question, enriched question = question + evidence, SQL, `db_id`) by the line-rate
//! path, each twice: without a schema and with BIRD's `tables.json` as the catalogue (each
//! setting weighs ½ in a fit, so an item counts once). Then, before (Φ and the four-point
//! verdict) and after (`p_correct`):
//!
//! - **fit on one source, test on the other**, both ways (the threshold chosen on the fitting
//!   source's own held-out predictions);
//! - **pooled, leave one database out** (8 folds: no question of the held-out database is seen
//!   in fitting; the threshold of each fold chosen by an inner leave-one-database-out on the
//!   other seven);
//!
//! each per source and setting: κ at the best cut flagging ≤ 10% of the correct items, the
//! threshold's flag rate among correct items and its κ, calibration error (10 bins), Brier
//! score, mean p beside the share correct. Never a figure on the items a model was fitted on.
//!
//! The shipped model is the fit on every item, its threshold the largest that flags at most
//! the target share of correct items in every source × setting on the pooled held-out
//! predictions. `--write PATH` writes it (`crates/core/models/p_correct.json` is the shipped
//! file; `crates/core/tests/verdict_model_shipped.rs` holds it to this fit).
//!
//! `cargo run --release --example verdict_model [-- --write PATH] [--l2 X] [--target R]
//! [--weights]`

use std::collections::BTreeMap;

use sqlgrade::catalogue::SchemaCatalog;
use sqlgrade::sampling::verdict_fit::{
    fit, held_out_figures, held_out_figures_per_item, threshold_for,
};
use sqlgrade::stef::correctness::{HeldOutFigures, VerdictModel, feature_names};
use sqlgrade_testkit::data::data_dir;
use sqlgrade_testkit::verdict_labels::{
    LabelledItem, SETTINGS, SOURCES, label_items, leave_one_database_out, shipped_fit, training,
};

fn cell(x: Option<f64>, digits: usize) -> String {
    x.map_or("—".into(), |x| format!("{x:.digits$}"))
}

fn pct(x: Option<f64>) -> String {
    x.map_or("—".into(), |x| format!("{:.1} %", 100.0 * x))
}

fn row(name: &str, f: &HeldOutFigures) -> String {
    format!(
        "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |",
        f.n,
        pct(Some(f.correct as f64 / f.n.max(1) as f64)),
        cell(f.kappa_at_target, 3),
        pct(f.flag_rate),
        cell(f.kappa, 3),
        cell(f.calibration_error, 3),
        cell(f.brier, 3),
        pct(f.mean_p),
    )
}

const HEADER: &str = "| set | n | correct | κ at ≤ 10 % of correct flagged | verdict: correct flagged | verdict: κ | calibration error | Brier | mean p |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|";

struct Args {
    write: Option<String>,
    l2: f64,
    target: f64,
    weights: bool,
}

fn args() -> Args {
    let argv: Vec<String> = std::env::args().collect();
    let value = |name: &str| argv.iter().skip_while(|a| *a != name).nth(1).cloned();
    Args {
        write: value("--write"),
        l2: value("--l2").map_or(sqlgrade::sampling::verdict_fit::DEFAULT_L2, |v| {
            v.parse().expect("--l2 is a number")
        }),
        target: value("--target").map_or(0.10, |v| v.parse().expect("--target is a share")),
        weights: argv.iter().any(|a| a == "--weights"),
    }
}

fn select<'a>(
    items: &'a [LabelledItem],
    source: Option<&str>,
    setting: Option<&str>,
) -> Vec<&'a LabelledItem> {
    items
        .iter()
        .filter(|i| i.scorable)
        .filter(|i| source.is_none_or(|s| i.source == s) && setting.is_none_or(|s| i.setting == s))
        .collect()
}

fn main() {
    let args = args();
    let tables = std::fs::read_to_string(data_dir().join("bird").join("tables.json"))
        .expect("shared/data/bird/tables.json");
    let catalogue = SchemaCatalog::parse_tables_json(&tables).expect("tables.json parses");
    let items = label_items(&catalogue);
    let target = args.target;

    println!("## Before: Φ and the four-point verdict (correct / likely_correct = correct)");
    println!();
    println!("{HEADER}");
    for source in SOURCES {
        for setting in SETTINGS {
            let set = select(&items, Some(source), Some(setting));
            let phi: Vec<Option<f64>> = set.iter().map(|i| Some(i.phi / 100.0)).collect();
            let old: Vec<f64> = set
                .iter()
                .map(|i| if i.semantic_correct { 1.0 } else { 0.0 })
                .collect();
            let correct: Vec<bool> = set.iter().map(|i| i.correct).collect();
            let mut f = held_out_figures(&phi, &correct, 0.5, target);
            let verdict = held_out_figures(
                &old.iter().map(|x| Some(*x)).collect::<Vec<_>>(),
                &correct,
                0.5,
                target,
            );
            f.flag_rate = verdict.flag_rate;
            f.kappa = verdict.kappa;
            println!("{}", row(&format!("{source}, {setting} (Φ / 100)"), &f));
        }
    }

    println!();
    println!("## After: fit on one source, test on the other");
    println!();
    println!("{HEADER}");
    let mut cross = BTreeMap::new();
    for (from, to) in [(SOURCES[0], SOURCES[1]), (SOURCES[1], SOURCES[0])] {
        let train_items = select(&items, Some(from), None);
        let fitted =
            fit(&training(&train_items).iter().collect::<Vec<_>>(), args.l2).expect("fits");
        let (inner_p, _) = leave_one_database_out(&train_items, args.l2, target);
        let correct: Vec<bool> = train_items.iter().map(|i| i.correct).collect();
        let groups: Vec<String> = train_items.iter().map(|i| i.group()).collect();
        let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
        let threshold = threshold_for(&inner_p, &correct, &groups, target);
        for setting in SETTINGS {
            let test = select(&items, Some(to), Some(setting));
            let p: Vec<Option<f64>> = test.iter().map(|i| Some(fitted.p(&i.features))).collect();
            let correct: Vec<bool> = test.iter().map(|i| i.correct).collect();
            let f = held_out_figures(&p, &correct, threshold, target);
            println!("{}", row(&format!("{from} → {to}, {setting}"), &f));
            cross.insert(format!("{from}_to_{to}_{setting}"), f);
        }
    }

    println!();
    println!(
        "## After: both sources pooled, leave one database out (8 folds, thresholds by an inner leave-one-database-out)"
    );
    println!();
    println!("{HEADER}");
    // SQL that cannot be scored has p_correct 0 by contract: it enters no fit (none of the
    // labelled items is such SQL today).
    let all: Vec<&LabelledItem> = select(&items, None, None);
    let (pooled_p, pooled_t) = leave_one_database_out(&all, args.l2, target);
    let mut held_out = BTreeMap::new();
    for source in SOURCES {
        for setting in SETTINGS {
            let idx: Vec<usize> = (0..all.len())
                .filter(|i| all[*i].source == source && all[*i].setting == setting)
                .collect();
            let set: Vec<&LabelledItem> = idx.iter().map(|i| all[*i]).collect();
            let p: Vec<Option<f64>> = idx.iter().map(|i| pooled_p[*i]).collect();
            let t: Vec<f64> = idx.iter().map(|i| pooled_t[*i]).collect();
            let correct: Vec<bool> = set.iter().map(|i| i.correct).collect();
            let f = held_out_figures_per_item(&p, &correct, &t, target);
            println!("{}", row(&format!("{source}, {setting}"), &f));
            held_out.insert(format!("leave_one_database_out_{source}_{setting}"), f);
        }
    }
    let correct: Vec<bool> = all.iter().map(|i| i.correct).collect();
    let f = held_out_figures_per_item(&pooled_p, &correct, &pooled_t, target);
    println!("{}", row("all", &f));
    held_out.insert("leave_one_database_out_all".into(), f);
    held_out.extend(cross);

    // The shipped model: every item, the threshold from the pooled held-out predictions.
    let (fitted, threshold) = shipped_fit(&all, args.l2, target).expect("fits");
    let mut model =
        sqlgrade_testkit::verdict_labels::model_file(&fitted, threshold, target, args.l2, held_out);
    model.fitted = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let model = VerdictModel::from_file(model).expect("the fit is a valid model");
    println!();
    println!(
        "Shipped fit: {} ({} Newton steps, λ = {}), threshold {:.4} (flags ≤ {:.0} % of the correct items of every source × setting on the pooled held-out predictions).",
        model.version(),
        fitted.iterations,
        args.l2,
        threshold,
        100.0 * target
    );
    if args.weights {
        let names = feature_names();
        let mut w: Vec<(f64, &str)> = fitted
            .weights
            .iter()
            .zip(names)
            .filter(|(w, _)| **w != 0.0)
            .map(|(w, n)| (*w, n.as_str()))
            .collect();
        w.sort_by(|a, b| a.0.total_cmp(&b.0));
        println!();
        println!("| feature | weight |");
        println!("|---|---:|");
        println!("| (intercept) | {:+.3} |", fitted.intercept);
        for (w, n) in w {
            println!("| `{n}` | {w:+.3} |");
        }
    }
    if let Some(path) = args.write {
        let text = serde_json::to_string_pretty(model.file()).expect("serialises") + "\n";
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{path}: {e}"));
        println!("wrote {path}");
    }
}
