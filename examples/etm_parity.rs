//! ETM against the official script's verdicts on Spider dev (three systems × 1,034 pairs,
//! `shared/data/spider/reference/etm_*.jsonl`, produced on schema-only databases built from
//! `tables.json` — the same thing [`SchemaPlanner`] builds).
//!
//! Prints, per system: agreement item by item, accepted counts (ours and the script's), the
//! CPU time for all pairs, and every disagreement with both queries and why ours decided as
//! it did. A pair whose gold query does not plan counts as not accepted, as in the script.
//!
//! `--outcomes` adds, per system, how many pairs ended how (matched, trees differ, prediction
//! does not plan, …) and a few accepted pairs written differently.
//!
//! `cargo run --release --example etm_parity [-- --quiet] [-- --outcomes]`

use std::collections::HashMap;
use std::time::Instant;

use sqlgrade::metrics::etm::{EtmSchema, etm};
use sqlgrade::score::sqlite::schema::load_tables_json;
use sqlgrade::score::sqlite::schema_db::SchemaPlanner;
use sqlgrade_testkit::data::{data_dir, read_jsonl};

fn main() {
    let quiet = std::env::args().any(|a| a == "--quiet");
    let show_outcomes = std::env::args().any(|a| a == "--outcomes");
    let data = data_dir().join("spider");
    let catalog = load_tables_json(&data.join("tables.json")).expect("tables.json");
    let dev: HashMap<i64, (String, String)> = read_jsonl(&data.join("dev.jsonl"))
        .into_iter()
        .map(|v| {
            (
                v["question_id"].as_i64().unwrap_or_default(),
                (
                    v["db_id"].as_str().unwrap_or_default().to_string(),
                    v["gold_sql"].as_str().unwrap_or_default().to_string(),
                ),
            )
        })
        .collect();
    let planner = SchemaPlanner::new();
    let mut schemas: HashMap<String, EtmSchema> = HashMap::new();
    for system in ["DAIL-SQL-GPT-4", "SuperSQL", "TA-ACL"] {
        let preds: HashMap<i64, String> =
            read_jsonl(&data.join(format!("predictions/{system}.jsonl")))
                .into_iter()
                .map(|v| {
                    (
                        v["question_id"].as_i64().unwrap_or_default(),
                        v["predicted_sql"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect();
        let reference = read_jsonl(&data.join(format!("reference/etm_{system}.jsonl")));
        let (mut agree, mut ours, mut theirs) = (0usize, 0usize, 0usize);
        let mut disagreements = Vec::new();
        let started = Instant::now();
        let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
        let mut shown = 0;
        for r in &reference {
            let qid = r["question_id"].as_i64().unwrap_or_default();
            let want = r["etm"].as_bool().unwrap_or(false);
            let (db_id, gold) = &dev[&qid];
            let db = catalog.get(db_id).expect("schema");
            let schema = schemas
                .entry(db_id.clone())
                .or_insert_with(|| EtmSchema::from_db(db));
            let pred = &preds[&qid];
            let (got, why) = match etm(db, schema, &planner, gold, pred) {
                Ok(out) => (
                    out.verdict,
                    format!("{:?} {}", out.miss, out.reason.unwrap_or_default()),
                ),
                Err(e) => (false, format!("gold: {e}")),
            };
            if show_outcomes {
                let kind = why.split(' ').next().unwrap_or_default().to_string();
                *kinds.entry(kind).or_insert(0usize) += 1;
                if got
                    && gold.to_lowercase().split_whitespace().collect::<Vec<_>>()
                        != pred.to_lowercase().split_whitespace().collect::<Vec<_>>()
                    && shown < 6
                {
                    shown += 1;
                    println!("  accepted, written differently: {gold}  ||  {pred}");
                }
            }
            ours += usize::from(got);
            theirs += usize::from(want);
            if got == want {
                agree += 1;
            } else {
                disagreements.push((qid, want, got, gold.clone(), pred.clone(), why));
            }
        }
        let elapsed = started.elapsed();
        println!(
            "{system}: agreement {agree}/{} ({:.2}%), accepted ours {ours} / script {theirs}, {:.0} ms for all pairs",
            reference.len(),
            100.0 * agree as f64 / reference.len().max(1) as f64,
            elapsed.as_secs_f64() * 1000.0
        );
        if !kinds.is_empty() {
            println!("  {kinds:?}");
        }
        if !quiet {
            for (qid, want, got, gold, pred, why) in disagreements {
                println!(
                    "  q{qid}: script {want}, ours {got} ({why})\n    gold: {gold}\n    pred: {pred}"
                );
            }
        }
    }
}
