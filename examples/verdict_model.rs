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
//! The third source, NL2SQL-Bugs on toxicology (218 items, whose database is shared), is scored
//! with the data too (settings `none`, `catalogue`, `result`: its run on the database as the
//! agent's `result`, `probe`: that and the read-only probe; ¼ each). Its **held-back half**
//! (`verdict_labels::held_back`, a hash of the id) enters no fit and no tuning: the figures on
//! data come from it —
//!
//! - the model currently built in (`VerdictModel::shipped()`, what this binary was compiled
//!   with) and the new fit, per setting, on that half;
//! - **a deployment's refit** (`calibrate --fit`'s own code, anchored on the new fit): that
//!   half in two parts by a hash of the event id, refit on one part's `probe` rows and applied
//!   to the other, and the other way round; κ and calibration pooled over the half, against
//!   the new fit on the same items (and a refit from zero beside it);
//! - each finding's fires on wrong / correct items, per source and setting (toxicology: its
//!   fitting half; `--held` shows the held-back half).
//!
//! The shipped model is the fit on every item (toxicology: its fitting half), its threshold the
//! largest that flags at most the target share of correct items in every source × setting on
//! the pooled held-out predictions. `--write PATH` writes it (`crates/core/models/p_correct.json` is the shipped
//! file; `crates/core/tests/verdict_model_shipped.rs` holds it to this fit).
//!
//! `cargo run --release --example verdict_model [-- --write PATH] [--l2 X] [--target R]
//! [--weights] [--held] [--min-per-class N]`

#[path = "../tests/support/data_labels.rs"]
mod data_labels;

use std::collections::BTreeMap;

use sqlgrade::catalogue::SchemaCatalog;
use sqlgrade::commands::calibrate::fit::{
    FitDecision, FitOptions, LabelledFeatures, fit_and_compare,
};
use sqlgrade::sampling::verdict_fit::{
    fit, held_out_figures, held_out_figures_per_item, threshold_for,
};
use sqlgrade::stef::correctness::{HeldOutFigures, LabelSource, VerdictModel, feature_names};
use sqlgrade_testkit::data::data_dir;
use sqlgrade_testkit::verdict_labels::{
    DATA_SETTINGS, DATA_SOURCE, LabelledItem, SETTINGS, SOURCES, held_back, label_items,
    leave_one_database_out, shipped_fit, training, training_with,
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

#[derive(Clone)]
struct Args {
    write: Option<String>,
    l2: f64,
    target: f64,
    weights: bool,
    held: bool,
    min_per_class: usize,
    show: Option<String>,
    tune: bool,
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
        held: argv.iter().any(|a| a == "--held"),
        show: value("--show"),
        tune: argv.iter().any(|a| a == "--tune"),
        min_per_class: value("--min-per-class")
            .map_or(20, |v| v.parse().expect("--min-per-class is a count")),
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

/// Each label source with the settings its items are scored in.
fn sources_and_settings() -> Vec<(&'static str, &'static [&'static str])> {
    SOURCES
        .iter()
        .map(|s| (*s, &SETTINGS[..]))
        .chain(std::iter::once((DATA_SOURCE, &DATA_SETTINGS[..])))
        .collect()
}

/// The held-back half of the toxicology items, per setting: Φ, the model built in, the new fit.
fn held_back_figures(held: &[LabelledItem], new: &VerdictModel, target: f64) {
    println!();
    println!(
        "## {DATA_SOURCE}, held-back half ({} items; in no fit, no tuning)",
        held.len() / DATA_SETTINGS.len()
    );
    println!();
    println!("{HEADER}");
    let built_in = VerdictModel::shipped();
    for setting in DATA_SETTINGS {
        let set: Vec<&LabelledItem> = held
            .iter()
            .filter(|i| i.setting == setting && i.scorable)
            .collect();
        let correct: Vec<bool> = set.iter().map(|i| i.correct).collect();
        let phi: Vec<Option<f64>> = set.iter().map(|i| Some(i.phi / 100.0)).collect();
        println!(
            "{}",
            row(
                &format!("{setting}: Φ / 100"),
                &held_out_figures(&phi, &correct, 0.5, target)
            )
        );
        for (name, model) in [
            (format!("built in {}", built_in.version()), built_in),
            (format!("new fit {}", new.version()), new),
        ] {
            let p: Vec<Option<f64>> = set
                .iter()
                .map(|i| Some(model.p_correct(&i.features)))
                .collect();
            let f = held_out_figures(&p, &correct, model.threshold(), target);
            println!("{}", row(&format!("{setting}: {name}"), &f));
        }
    }
}

/// A deployment's refit on the held-back half: two parts by a hash of the event id; refit
/// (`calibrate --fit`'s code) on one part's `setting` rows, applied to the other part, and the
/// other way round; pooled over both parts against `shipped` on the same items.
fn deployment_refit(
    held: &[LabelledItem],
    shipped: &VerdictModel,
    setting: &str,
    args: &Args,
    anchored: bool,
) {
    let set: Vec<&LabelledItem> = held
        .iter()
        .filter(|i| i.setting == setting && i.scorable)
        .collect();
    let part = |i: &LabelledItem| {
        sqlgrade::sampling::uniform_draw("deployment-halves", &i.event.event_id) < 0.5
    };
    let mut refit_p = vec![None; set.len()];
    let mut refit_t = vec![0.0; set.len()];
    let mut written = Vec::new();
    for side in [true, false] {
        let train: Vec<LabelledFeatures> = set
            .iter()
            .filter(|i| part(i) == side)
            .map(|i| LabelledFeatures {
                event_id: i.event.event_id.clone(),
                features: i.features,
                correct: i.correct,
            })
            .collect();
        let options = FitOptions {
            target_flag_rate: args.target,
            l2: args.l2,
            folds: 5,
            min_per_class: args.min_per_class,
            anchored,
        };
        let report = fit_and_compare(
            &train,
            Default::default(),
            shipped,
            &options,
            LabelSource {
                name: format!(
                    "{DATA_SOURCE} held-back part {}",
                    if side { "A" } else { "B" }
                ),
                sha256: String::new(),
                bytes: 0,
                items: train.len() as u64,
                correct: train.iter().filter(|t| t.correct).count() as u64,
            },
        );
        let model = match (&report.decision, &report.model) {
            (FitDecision::Better, Some(file)) => {
                VerdictModel::from_file(file.clone()).expect("a refit is a valid model")
            }
            _ => shipped.clone(),
        };
        written.push(format!(
            "part {} ({} labels): {}",
            if side { "A" } else { "B" },
            train.len(),
            serde_json::to_string(&report.decision).unwrap_or_default()
        ));
        for (k, item) in set.iter().enumerate() {
            if part(item) != side {
                refit_p[k] = Some(model.p_correct(&item.features));
                refit_t[k] = model.threshold();
            }
        }
    }
    let correct: Vec<bool> = set.iter().map(|i| i.correct).collect();
    let shipped_p: Vec<Option<f64>> = set
        .iter()
        .map(|i| Some(shipped.p_correct(&i.features)))
        .collect();
    println!(
        "{}",
        row(
            &format!("{setting}: the shipped model"),
            &held_out_figures(&shipped_p, &correct, shipped.threshold(), args.target)
        )
    );
    println!(
        "{}",
        row(
            &format!(
                "{setting}: refit on the other part ({})",
                if anchored { "anchored" } else { "from zero" }
            ),
            &held_out_figures_per_item(&refit_p, &correct, &refit_t, args.target)
        )
    );
    for w in written {
        println!("  - {w}");
    }
}

/// Each finding's fires on wrong / correct items, per source and setting (toxicology: the
/// fitting half, or the held-back half with `--held`).
fn findings_table(items: &[LabelledItem], held: &[LabelledItem], show_held: bool) {
    let columns: Vec<(&str, &str)> = sources_and_settings()
        .into_iter()
        .flat_map(|(source, settings)| settings.iter().map(move |s| (source, *s)))
        .collect();
    // Per code, per (source, setting): fires on (wrong, correct) items.
    type Fires<'a> = BTreeMap<(&'a str, &'a str), (u32, u32)>;
    let mut counts: BTreeMap<String, Fires<'_>> = BTreeMap::new();
    let data: Vec<&LabelledItem> = if show_held {
        held.iter().collect()
    } else {
        items.iter().filter(|i| i.source == DATA_SOURCE).collect()
    };
    let others = items.iter().filter(|i| i.source != DATA_SOURCE);
    for item in others.chain(data) {
        let details = item.row.details.to_value();
        let mut codes: Vec<String> = details["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["code"].as_str().map(str::to_string))
            .collect();
        codes.sort();
        codes.dedup();
        for code in codes {
            let c = counts
                .entry(code)
                .or_default()
                .entry((item.source, item.setting))
                .or_default();
            if item.correct {
                c.1 += 1;
            } else {
                c.0 += 1;
            }
        }
    }
    println!();
    println!(
        "## Findings: fires on wrong / correct items ({DATA_SOURCE}: {} half)",
        if show_held { "held-back" } else { "fitting" }
    );
    println!();
    let head: Vec<String> = columns
        .iter()
        .map(|(s, t)| {
            let short = match *s {
                "nl2sql-bugs-dev" => "NL2SQL-Bugs",
                "rose-vec-bird-dev" => "ROSE-VEC",
                _ => "toxicology",
            };
            format!("{short} {t}")
        })
        .collect();
    println!("| finding | {} |", head.join(" | "));
    println!("|---|{}", "---:|".repeat(columns.len()));
    for (code, per) in counts {
        let cells: Vec<String> = columns
            .iter()
            .map(|k| per.get(k).map_or("".into(), |(w, c)| format!("{w} / {c}")))
            .collect();
        println!("| `{code}` | {} |", cells.join(" | "));
    }
}

/// Where `code` fires (`--show CODE`): each item of every source (toxicology: its fitting half)
/// in its richest setting, with the finding's evidence.
fn show(items: &[LabelledItem], code: &str) {
    println!();
    println!("## Where `{code}` fires (richest setting of each item)");
    for item in items.iter().filter(|i| {
        matches!(
            (i.source == DATA_SOURCE, i.setting),
            (true, "probe") | (false, "catalogue")
        )
    }) {
        let details = item.row.details.to_value();
        for f in details["findings"].as_array().into_iter().flatten() {
            if f["code"] == code {
                println!(
                    "- {} {} [{}] {}\n  Q: {}\n  SQL: {}\n  {}",
                    if item.correct { "CORRECT" } else { "wrong" },
                    item.source,
                    item.id,
                    f["severity"],
                    item.event.question,
                    item.event.sql,
                    f["evidence"]
                );
            }
        }
    }
}

/// The shipped fit (weights and threshold) on every item but those of `source`.
fn fitted_without(all: &[&LabelledItem], source: &str, args: &Args) -> VerdictModel {
    let rest: Vec<&LabelledItem> = all.iter().copied().filter(|i| i.source != source).collect();
    let (fitted, threshold) = shipped_fit(&rest, args.l2, args.target).expect("fits");
    VerdictModel::from_file(sqlgrade_testkit::verdict_labels::model_file(
        &fitted,
        threshold,
        args.target,
        args.l2,
        BTreeMap::new(),
    ))
    .expect("a valid model")
}

/// `--tune`: how much a toxicology item should weigh, chosen on the **fitting half** alone —
/// it in two parts by a hash of the id; fit on every other item and one part, measured on the
/// other part (and the other way round), per data setting, for several weights. The held-back
/// half is not read.
fn tune(items: &[LabelledItem], args: &Args) {
    println!();
    println!("## Tuning the weight of a toxicology item (fitting half only, two parts)");
    println!();
    println!("| weight | setting | κ at ≤ 10 % flagged | calibration error | Brier |");
    println!("|---:|---|---:|---:|---:|");
    let part = |i: &LabelledItem| sqlgrade::sampling::uniform_draw("tune", &i.id.to_string()) < 0.5;
    for weight in [0.5, 1.0, 2.0, 4.0, 8.0] {
        let mut p: Vec<(usize, f64)> = Vec::new();
        let data: Vec<&LabelledItem> = items
            .iter()
            .filter(|i| i.source == DATA_SOURCE && i.scorable)
            .collect();
        for side in [true, false] {
            let train: Vec<&LabelledItem> = items
                .iter()
                .filter(|i| i.scorable && (i.source != DATA_SOURCE || part(i) == side))
                .collect();
            let fitted = fit(
                &training_with(&train, weight).iter().collect::<Vec<_>>(),
                args.l2,
            )
            .expect("fits");
            for (k, i) in data.iter().enumerate() {
                if part(i) != side {
                    p.push((k, fitted.p(&i.features)));
                }
            }
        }
        p.sort_by_key(|(k, _)| *k);
        for setting in DATA_SETTINGS {
            let idx: Vec<usize> = (0..data.len())
                .filter(|k| data[*k].setting == setting)
                .collect();
            let pr: Vec<Option<f64>> = idx.iter().map(|k| Some(p[*k].1)).collect();
            let correct: Vec<bool> = idx.iter().map(|k| data[*k].correct).collect();
            let f = held_out_figures(&pr, &correct, 0.5, args.target);
            println!(
                "| {weight} | {setting} | {} | {} | {} |",
                cell(f.kappa_at_target, 3),
                cell(f.calibration_error, 3),
                cell(f.brier, 3)
            );
        }
    }
}

fn main() {
    let args = args();
    let tables = std::fs::read_to_string(data_dir().join("bird").join("tables.json"))
        .expect("shared/data/bird/tables.json");
    let catalogue = SchemaCatalog::parse_tables_json(&tables).expect("tables.json parses");
    let mut items = label_items(&catalogue);
    let data = data_labels::scored_data_items(&catalogue);
    let (held, fitting): (Vec<LabelledItem>, Vec<LabelledItem>) =
        data.into_iter().partition(|i| held_back(i.id));
    items.extend(fitting.iter().cloned());
    let target = args.target;

    println!("## Before: Φ and the four-point verdict (correct / likely_correct = correct)");
    println!();
    println!("{HEADER}");
    for (source, settings) in sources_and_settings() {
        for &setting in settings {
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
    for (source, settings) in sources_and_settings() {
        for &setting in settings {
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
    held_back_figures(&held, &model, target);
    println!();
    println!(
        "## A deployment's refit on the held-back half (`calibrate --fit`'s code, min {} labels of each kind; two parts by a hash of the event id, each refit applied to the other part)",
        args.min_per_class
    );
    println!();
    println!("{HEADER}");
    for setting in ["catalogue", "probe"] {
        deployment_refit(&held, &model, setting, &args, true);
        deployment_refit(&held, &model, setting, &args, false);
    }
    // A database the shipped model never saw (the usual deployment): the same, from a model
    // fitted on the two files without data only.
    let unseen = fitted_without(&all, DATA_SOURCE, &args);
    println!();
    println!(
        "### The same from a model fitted without any toxicology item ({}): a database it never saw",
        unseen.version()
    );
    println!();
    println!("{HEADER}");
    for setting in ["catalogue", "probe"] {
        deployment_refit(&held, &unseen, setting, &args, true);
        deployment_refit(&held, &unseen, setting, &args, false);
    }
    // Another style of labels the model never saw: ROSE-VEC (65 % correct; other annotators,
    // other agents) as a deployment's reviewed events, against a model fitted without it.
    let no_rose = fitted_without(&all, SOURCES[1], &args);
    let rose: Vec<LabelledItem> = all
        .iter()
        .filter(|i| i.source == SOURCES[1])
        .map(|i| (*i).clone())
        .collect();
    println!();
    println!(
        "### {} as a deployment's labels, from a model fitted without them ({}; min 30 labels of each kind)",
        SOURCES[1],
        no_rose.version()
    );
    println!();
    println!("{HEADER}");
    let rose_args = Args {
        min_per_class: 30,
        ..args.clone()
    };
    for anchored in [true, false] {
        deployment_refit(&rose, &no_rose, "catalogue", &rose_args, anchored);
    }
    findings_table(&items, &held, args.held);
    if args.tune {
        tune(&items, &args);
    }
    if let Some(code) = &args.show {
        show(&items, code);
    }
    if let Some(path) = args.write {
        let text = serde_json::to_string_pretty(model.file()).expect("serialises") + "\n";
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{path}: {e}"));
        println!("wrote {path}");
    }
}
