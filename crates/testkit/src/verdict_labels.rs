//! People's verdicts of `shared/data/labels` as scored line-rate rows: what the correctness
//! model is fitted and measured on (`examples/verdict_model.rs`) and what the test of the
//! shipped model refits (`tests/in_process/stef/verdict_model.rs`).
//!
//! Each labelled prediction of the two sources (NL2SQL-Bugs, ROSE-VEC) becomes an agent's
//! event — question, enriched question = question + " " + evidence, SQL, dialect SQLite, its
//! `db_id` — scored by the deterministic line-rate path twice: without a schema (`none`) and
//! with BIRD's `tables.json` as the catalogue (`catalogue`). The SQLite files of these
//! databases are not shared, so neither an agent's `result` nor the probe is part of it.
//!
//! The third source, NL2SQL-Bugs on toxicology ([`DATA_SOURCE`]), comes with its database:
//! its items are scored in [`DATA_SETTINGS`] — without a schema, with the catalogue, with the
//! catalogue and what the query returned on the database (the agent's `result`), and with all
//! that and the read-only probe. Running a query and probing need the daemon's read-only
//! executor, which this crate cannot link: the caller hands them in ([`DataHooks`]). A fixed
//! half of its items ([`held_back`], by a hash of the id) is kept out of every fit and every
//! tuning: the figures on data are measured there.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use sqlgrade_core::catalogue::SchemaCatalog;
use sqlgrade_core::evaluation::EvaluationRow;
use sqlgrade_core::event::{Event, Gold};
use sqlgrade_core::judge::deterministic::DeterministicJudge;
use sqlgrade_core::sampling::verdict_fit::{
    FitError, Fitted, TrainingItem, cross_validate, fit, nested_cross_validate, threshold_for,
};
use sqlgrade_core::stef::correctness::{
    Features, HeldOutFigures, LabelSource, MODEL_FORMAT, ModelFile, feature_names,
};
use sqlgrade_core::stef::{self, RuleProfile};

use crate::data::{data_dir, read_jsonl};

/// The label files (stems under `shared/data/labels`).
pub const SOURCES: [&str; 2] = ["nl2sql-bugs-dev", "rose-vec-bird-dev"];

/// The schema settings each item is scored in.
pub const SETTINGS: [&str; 2] = ["none", "catalogue"];

/// The label file whose database is shared (`shared/data/bird/databases/toxicology`).
pub const DATA_SOURCE: &str = "nl2sql-bugs-toxicology";

/// The settings an item of [`DATA_SOURCE`] is scored in: no schema; the catalogue; the
/// catalogue and the query's result on the database (as an agent's trace carries it); all that
/// and the read-only probe.
pub const DATA_SETTINGS: [&str; 4] = ["none", "catalogue", "result", "probe"];

/// Whether item `id` of [`DATA_SOURCE`] is in the held-back half: kept out of every fit and
/// every tuning, where the figures on data are measured. A hash of the id (SHA-256 of
/// `held-back/<id>`, its first byte's low bit), so the halves are the same on every machine.
pub fn held_back(id: u64) -> bool {
    Sha256::digest(format!("held-back/{id}").as_bytes())[0] & 1 == 1
}

/// The probe as [`DataHooks`] hands it in: probe the event's database and add the findings.
pub type ProbeHook<'a> =
    &'a dyn Fn(&Event, &sqlgrade_core::catalogue::DbSchema, &mut stef::Prepared);

/// What scoring with data needs from the daemon: the query's result on the item's database
/// (`None`: the run was cut short by a limit and says nothing), and the probe, which adds its
/// findings to a prepared outcome.
pub struct DataHooks<'a> {
    /// The query's result on its database.
    pub run: &'a dyn Fn(&Event) -> Option<sqlgrade_core::event::QueryResult>,
    /// Probe the event's database and add the findings to `prepared`.
    pub probe: ProbeHook<'a>,
}

/// One labelled prediction scored in one setting.
#[derive(Debug, Clone)]
pub struct LabelledItem {
    /// Its label file's stem.
    pub source: &'static str,
    /// Its id in that file.
    pub id: u64,
    /// Its database.
    pub db_id: String,
    /// `none` or `catalogue`.
    pub setting: &'static str,
    /// People called it correct.
    pub correct: bool,
    /// The event it was scored as.
    pub event: Event,
    /// Its line-rate row.
    pub row: EvaluationRow,
    /// The features the correctness model reads (from the outcome, as the scorer computes them;
    /// zero for SQL that could not be scored).
    pub features: Features,
    /// Φ of the row.
    pub phi: f64,
    /// The four-point verdict is `correct` or `likely_correct` (the verdict before issue 75).
    pub semantic_correct: bool,
    /// The row was scored normally (not `parse_error` …).
    pub scorable: bool,
}

impl LabelledItem {
    /// `source/setting`: the groups the shipped threshold must hold in.
    pub fn group(&self) -> String {
        format!("{}/{}", self.source, self.setting)
    }
}

/// The event of one line of label file `source` (its stem): `<source>-<id>`, question,
/// enriched question = question + " " + evidence, SQL, SQLite, `db_id` (also as the gold's,
/// with the evidence). `None` when the line lacks a field.
pub fn label_event(source: &str, v: &serde_json::Value) -> Option<Event> {
    let question = v["question"].as_str()?.to_string();
    let evidence = v["evidence"]
        .as_str()
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_string);
    let db_id = v["db_id"].as_str()?.to_string();
    Some(Event {
        event_id: format!("{source}-{}", v["id"]),
        ts: None,
        app_id: Some(format!("bird-{db_id}")),
        agent_id: Some(source.to_string()),
        agent_version: None,
        model: None,
        enriched_question: evidence.as_ref().map(|e| format!("{question} {e}")),
        question,
        sql: v["sql"].as_str()?.to_string(),
        dialect: Some("sqlite".into()),
        run_id: None,
        db_id: Some(db_id.clone()),
        gold: Some(Gold {
            db_id: Some(db_id),
            evidence,
            ..Default::default()
        }),
        result: None,
        result_ignored: None,
        trace: None,
        extra: Default::default(),
    })
}

/// Each line of label file `source` (its stem) as its event, its label and its id; a line
/// without question, SQL, label or id is a broken data file (a panic naming it).
fn labelled_events(source: &str) -> Vec<(Event, bool, u64)> {
    let path = data_dir().join("labels").join(format!("{source}.jsonl"));
    read_jsonl(&path)
        .iter()
        .map(|v| {
            let (Some(event), Some(correct), Some(id)) = (
                label_event(source, v),
                v["label"].as_bool(),
                v["id"].as_u64(),
            ) else {
                panic!(
                    "{}: a label line without question, sql, label or id",
                    path.display()
                );
            };
            (event, correct, id)
        })
        .collect()
}

/// Every labelled item of both sources, scored in both settings (`catalogue`: BIRD's
/// `tables.json`).
pub fn label_items(catalogue: &SchemaCatalog) -> Vec<LabelledItem> {
    let profile = RuleProfile::default();
    let mut items = Vec::new();
    for source in SOURCES {
        for (event, correct, id) in labelled_events(source) {
            for setting in SETTINGS {
                let schema = match setting {
                    "catalogue" => event.db_id.as_deref().and_then(|db| catalogue.get(db)),
                    _ => None,
                };
                let (row, features, scorable) = score_event(&event, schema, &profile, None);
                let semantic_correct = semantic_correct(&row);
                items.push(LabelledItem {
                    source,
                    id,
                    db_id: event.db_id.clone().unwrap_or_default(),
                    setting,
                    correct,
                    event: event.clone(),
                    phi: row.value,
                    row,
                    features,
                    semantic_correct,
                    scorable,
                });
            }
        }
    }
    items
}

/// The four-point verdict of a row is `correct` or `likely_correct`.
fn semantic_correct(row: &EvaluationRow) -> bool {
    row.stef
        .as_ref()
        .is_some_and(|s| matches!(s.semantic_verdict.as_str(), "correct" | "likely_correct"))
}

/// One event scored by the line-rate path: with `schema` as its catalogue entry (if any), and
/// `probe` run between preparing and finishing (if given). The row, its features (zero for SQL
/// that could not be scored) and whether it was scored normally.
fn score_event(
    event: &Event,
    schema: Option<&sqlgrade_core::catalogue::DbSchema>,
    profile: &RuleProfile,
    probe: Option<ProbeHook<'_>>,
) -> (EvaluationRow, Features, bool) {
    let options = stef::PrepareOptions {
        max_sql_bytes: sqlgrade_core::sqlspec::DEFAULT_MAX_SQL_BYTES,
        catalogue: schema.map_or(
            stef::CatalogueSelection::None,
            stef::CatalogueSelection::Schema,
        ),
    };
    match stef::prepare_with(event, profile, &options) {
        Ok(mut prepared) => {
            if let (Some(probe), Some(schema)) = (probe, schema) {
                probe(event, schema, &mut prepared);
            }
            let assessment = DeterministicJudge.assess_prepared(&prepared);
            let outcome = stef::finish(&prepared, assessment, profile);
            let features = outcome.feature_input().features();
            (outcome.to_row(event, "", profile, 0), features, true)
        }
        Err(e) => (
            stef::non_scorable_row(event, "", &e, profile),
            [0.0; sqlgrade_core::stef::correctness::FEATURE_COUNT],
            false,
        ),
    }
}

/// Every item of [`DATA_SOURCE`], scored in each of [`DATA_SETTINGS`] (the catalogue:
/// `catalogue`'s entry for toxicology, BIRD's `tables.json`). An item whose run on the database
/// was cut short by a limit is scored without a result in the `result` and `probe` settings.
pub fn data_items(catalogue: &SchemaCatalog, hooks: &DataHooks<'_>) -> Vec<LabelledItem> {
    let profile = RuleProfile::default();
    let mut items = Vec::new();
    for (event, correct, id) in labelled_events(DATA_SOURCE) {
        let schema = event.db_id.as_deref().and_then(|db| catalogue.get(db));
        let result = (hooks.run)(&event);
        for setting in DATA_SETTINGS {
            let mut event = event.clone();
            if matches!(setting, "result" | "probe") {
                event.result = result.clone();
            }
            let (schema, probe) = match setting {
                "none" => (None, None),
                "probe" => (schema, Some(hooks.probe)),
                _ => (schema, None),
            };
            let (row, features, scorable) = score_event(&event, schema, &profile, probe);
            items.push(LabelledItem {
                source: DATA_SOURCE,
                id,
                db_id: event.db_id.clone().unwrap_or_default(),
                setting,
                correct,
                semantic_correct: semantic_correct(&row),
                phi: row.value,
                event,
                row,
                features,
                scorable,
            });
        }
    }
    items
}

/// How many settings an item of `source` is scored in.
fn settings_of(source: &str) -> usize {
    if source == DATA_SOURCE {
        DATA_SETTINGS.len()
    } else {
        SETTINGS.len()
    }
}

/// How much one item of [`DATA_SOURCE`] weighs in the shipped fit against one item of the
/// files without data: the only labels whose findings on the data (the result, the probe) can
/// be learned, 109 items against 1,728 (chosen on the fitting half alone:
/// `examples/verdict_model.rs --tune`).
pub const DATA_ITEM_WEIGHT: f64 = 1.0;

/// The items as training items: the settings of an item share its weight (½ each for the
/// files without data, ¼ each for [`DATA_SOURCE`]), and an item of [`DATA_SOURCE`] weighs
/// [`DATA_ITEM_WEIGHT`] items.
pub fn training(items: &[&LabelledItem]) -> Vec<TrainingItem> {
    training_with(items, DATA_ITEM_WEIGHT)
}

/// [`training`] with an item of [`DATA_SOURCE`] weighing `data_item_weight` items.
pub fn training_with(items: &[&LabelledItem], data_item_weight: f64) -> Vec<TrainingItem> {
    items
        .iter()
        .map(|i| TrainingItem {
            features: i.features,
            correct: i.correct,
            weight: if i.source == DATA_SOURCE {
                data_item_weight
            } else {
                1.0
            } / settings_of(i.source) as f64,
        })
        .collect()
}

/// The fold of each item: its database (8 folds; no question of a held-out database is seen
/// in fitting).
pub fn database_folds(items: &[&LabelledItem]) -> Vec<usize> {
    let mut databases: Vec<&str> = items.iter().map(|i| i.db_id.as_str()).collect();
    databases.sort_unstable();
    databases.dedup();
    items
        .iter()
        .map(|i| databases.iter().position(|d| *d == i.db_id).unwrap_or(0))
        .collect()
}

/// Leave-one-database-out predictions of every item, and the threshold each fold's training
/// items choose by an inner leave-one-database-out (so a flag rate measured on a fold was not
/// tuned on it).
pub fn leave_one_database_out(
    items: &[&LabelledItem],
    l2: f64,
    target: f64,
) -> (Vec<Option<f64>>, Vec<f64>) {
    let groups: Vec<String> = items.iter().map(|i| i.group()).collect();
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    nested_cross_validate(
        &training(items),
        &database_folds(items),
        &groups,
        l2,
        target,
    )
}

/// The shipped fit: every item, penalty `l2`, and the largest threshold that flags at most
/// `target` of the correct items of every source × setting on the leave-one-database-out
/// predictions.
pub fn shipped_fit(
    items: &[&LabelledItem],
    l2: f64,
    target: f64,
) -> Result<(Fitted, f64), FitError> {
    let all = training(items);
    let predictions = cross_validate(&all, &database_folds(items), l2);
    let correct: Vec<bool> = items.iter().map(|i| i.correct).collect();
    let groups: Vec<String> = items.iter().map(|i| i.group()).collect();
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    let threshold = threshold_for(&predictions, &correct, &groups, target);
    let fitted = fit(&all.iter().collect::<Vec<_>>(), l2)?;
    Ok((fitted, threshold))
}

/// What the label files are: name, SHA-256, size, items fitted on and how many of them people
/// called correct ([`DATA_SOURCE`]: its fitting half only, the held-back half is not).
pub fn label_sources() -> Vec<LabelSource> {
    SOURCES
        .iter()
        .chain(&[DATA_SOURCE])
        .map(|source| {
            let name = format!("{source}.jsonl");
            let path = data_dir().join("labels").join(&name);
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let lines: Vec<serde_json::Value> = read_jsonl(&path)
                .into_iter()
                .filter(|v| *source != DATA_SOURCE || !v["id"].as_u64().is_some_and(held_back))
                .collect();
            LabelSource {
                name,
                sha256: hex::encode(Sha256::digest(&bytes)),
                bytes: bytes.len() as u64,
                items: lines.len() as u64,
                correct: lines
                    .iter()
                    .filter(|v| v["label"].as_bool() == Some(true))
                    .count() as u64,
            }
        })
        .collect()
}

/// The model file of a fit on both label files.
pub fn model_file(
    fitted: &Fitted,
    threshold: f64,
    target: f64,
    l2: f64,
    held_out: BTreeMap<String, HeldOutFigures>,
) -> ModelFile {
    let weights = feature_names()
        .iter()
        .zip(&fitted.weights)
        .filter(|(_, w)| **w != 0.0)
        .map(|(n, w)| (n.clone(), round(*w)))
        .collect();
    ModelFile {
        format: MODEL_FORMAT,
        description: "sqlgrade's shipped correctness model: logistic regression on the label \
                      files of shared/data/labels — NL2SQL-Bugs and ROSE-VEC, each item without a \
                      schema and with BIRD's tables.json (½ each), and the fitting half of \
                      NL2SQL-Bugs on toxicology, each item without a schema, with the catalogue, \
                      with its result on the database and with the probe too (¼ each); an item \
                      counts once. Refit with `cargo run --release --example verdict_model -- \
                      --write crates/core/models/p_correct.json`"
            .into(),
        fitted: String::new(),
        sqlgrade: sqlgrade_core::stef::assessment::SQLGRADE_VERSION.into(),
        target_flag_rate: target,
        threshold: round(threshold),
        l2,
        intercept: round(fitted.intercept),
        weights,
        sources: label_sources(),
        held_out,
    }
}

/// Six significant decimals: the file reads well and a refit reproduces it exactly.
fn round(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}
