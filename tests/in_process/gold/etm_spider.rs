//! ETM over the 1,034 Spider-dev pairs of three systems must agree with the official script's
//! per-item verdicts (`reference/etm_*.jsonl`) on at least 99% of items, with the script's
//! accepted count, on the schema-only databases the script was run on.

use std::collections::HashMap;

use sqlgrade::metrics::etm::{EtmSchema, etm};
use sqlgrade::score::sqlite::schema::load_tables_json;
use sqlgrade::score::sqlite::schema_db::SchemaPlanner;
use sqlgrade_testkit::data::{data_dir, read_jsonl};

#[test]
fn etm_agrees_with_the_official_script() {
    let data = data_dir().join("spider");
    let catalog = load_tables_json(&data.join("tables.json")).unwrap();
    let dev: HashMap<i64, (String, String)> = read_jsonl(&data.join("dev.jsonl"))
        .into_iter()
        .map(|v| {
            let qid = v["question_id"].as_i64().unwrap();
            let db = v["db_id"].as_str().unwrap().to_string();
            (qid, (db, v["gold_sql"].as_str().unwrap().to_string()))
        })
        .collect();
    let planner = SchemaPlanner::new();
    let mut schemas: HashMap<String, EtmSchema> = HashMap::new();
    for (system, official_accepted) in [("DAIL-SQL-GPT-4", 740), ("SuperSQL", 779), ("TA-ACL", 704)]
    {
        let preds: HashMap<i64, String> =
            read_jsonl(&data.join(format!("predictions/{system}.jsonl")))
                .into_iter()
                .map(|v| {
                    let qid = v["question_id"].as_i64().unwrap();
                    (qid, v["predicted_sql"].as_str().unwrap().to_string())
                })
                .collect();
        let reference = read_jsonl(&data.join(format!("reference/etm_{system}.jsonl")));
        assert_eq!(reference.len(), 1034);
        let (mut agree, mut accepted) = (0usize, 0usize);
        let mut diffs = Vec::new();
        for r in &reference {
            let qid = r["question_id"].as_i64().unwrap();
            let (db_id, gold) = &dev[&qid];
            let db = catalog.get(db_id).unwrap();
            let schema = schemas
                .entry(db_id.clone())
                .or_insert_with(|| EtmSchema::from_db(db));
            let got = etm(db, schema, &planner, gold, &preds[&qid]).is_ok_and(|o| o.verdict);
            accepted += usize::from(got);
            if got == r["etm"].as_bool().unwrap() {
                agree += 1;
            } else {
                diffs.push(qid);
            }
        }
        let pct = 100.0 * agree as f64 / reference.len() as f64;
        eprintln!(
            "{system}: {agree}/1034 ({pct:.2}%), accepted {accepted} (script {official_accepted}), differing {diffs:?}"
        );
        assert!(
            pct >= 99.0,
            "{system}: agreement {pct:.2}% < 99%; differing {diffs:?}"
        );
        assert!(
            accepted.abs_diff(official_accepted) <= 10,
            "{system}: accepted {accepted}, the script {official_accepted}"
        );
    }
}
