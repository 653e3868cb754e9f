//! Original Spider ESM over the 1034 Spider-dev pairs of three systems must agree with the
//! official evaluator's per-item verdicts on at least 99% of items.

use std::collections::HashMap;

use serde_json::Value;
use sqlgrade::metrics::esm::{SpiderEvalOptions, SpiderSchema, esm};

use sqlgrade_testkit::data::read_jsonl;

#[test]
fn spider_esm_agrees_with_the_official_evaluator() {
    let data = sqlgrade_testkit::data::data_dir().join("spider");
    let catalog =
        sqlgrade::score::sqlite::schema::load_tables_json(&data.join("tables.json")).unwrap();
    let mut schemas: HashMap<String, SpiderSchema> = HashMap::new();
    let dev: HashMap<i64, Value> = read_jsonl(&data.join("dev.jsonl"))
        .into_iter()
        .map(|v| (v["question_id"].as_i64().unwrap(), v))
        .collect();
    let verbose = std::env::var_os("ESM_VERBOSE").is_some();
    for (system, expected_pct) in [
        ("DAIL-SQL-GPT-4", 70.02),
        ("SuperSQL", 72.15),
        ("TA-ACL", 44.29),
    ] {
        let preds: HashMap<i64, String> =
            read_jsonl(&data.join(format!("predictions/{system}.jsonl")))
                .into_iter()
                .map(|v| {
                    (
                        v["question_id"].as_i64().unwrap(),
                        v["predicted_sql"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
        let reference = read_jsonl(&data.join(format!("reference/esm_{system}.jsonl")));
        assert_eq!(reference.len(), 1034);
        let (mut agree, mut correct, mut hard_agree, mut parsed_agree) =
            (0usize, 0usize, 0usize, 0usize);
        let mut diffs = Vec::new();
        for r in &reference {
            let qid = r["question_id"].as_i64().unwrap();
            let item = &dev[&qid];
            let db = item["db_id"].as_str().unwrap();
            let schema = schemas
                .entry(db.to_string())
                .or_insert_with(|| SpiderSchema::new(catalog.get(db).unwrap()));
            let gold = item["gold_sql"].as_str().unwrap();
            let pred = &preds[&qid];
            let out = esm(schema, gold, pred, SpiderEvalOptions::default()).unwrap();
            let want = r["esm"].as_i64().unwrap() == 1;
            correct += usize::from(out.verdict);
            hard_agree += usize::from(r["hardness"].as_str() == Some(out.hardness));
            parsed_agree += usize::from(r["pred_parsed"].as_bool() == Some(out.pred_parsed));
            if out.verdict == want {
                agree += 1;
            } else {
                diffs.push((
                    qid,
                    want,
                    out.verdict,
                    r["pred_parsed"].as_bool(),
                    out.pred_parsed,
                    out.failed_components.clone(),
                    out.pred_parse_error.clone(),
                ));
                if verbose {
                    println!(
                        "--- {system} q{qid} want {want} got {} (ref parsed {:?}, ours {}: {:?}) failed {:?}\n  gold: {gold}\n  pred: {pred}",
                        out.verdict,
                        r["pred_parsed"],
                        out.pred_parsed,
                        out.pred_parse_error,
                        out.failed_components
                    );
                }
            }
        }
        let pct = 100.0 * correct as f64 / 1034.0;
        let agreement = 100.0 * agree as f64 / 1034.0;
        println!(
            "{system}: ESM {pct:.2}% (reference {expected_pct}%), agreement {agreement:.2}% ({agree}/1034), hardness agreement {hard_agree}/1034, parse-status agreement {parsed_agree}/1034, differing items {:?}",
            diffs.iter().map(|d| d.0).collect::<Vec<_>>()
        );
        assert!(agreement >= 99.0, "{system}: {diffs:#?}");
        assert!((pct - expected_pct).abs() < 0.1, "{system}: {pct}");
        assert_eq!(hard_agree, 1034, "{system}: hardness buckets");
        assert_eq!(parsed_agree, 1034, "{system}: prediction parse status");
    }
}

#[test]
fn spider_esm_plus_runs_over_every_pair() {
    use sqlgrade::metrics::esm::ir::PlusSchema;
    use sqlgrade::metrics::esm::plus::{EsmPlusOptions, esm_plus};
    let data = sqlgrade_testkit::data::data_dir().join("spider");
    let mut catalog =
        sqlgrade::score::sqlite::schema::load_tables_json(&data.join("tables.json")).unwrap();
    sqlgrade::score::sqlite::schema::introspect_sqlite_dir(&mut catalog, &data.join("databases"))
        .unwrap();
    let mut schemas: HashMap<String, PlusSchema> = HashMap::new();
    let dev: Vec<Value> = read_jsonl(&data.join("dev.jsonl"));
    let verbose = std::env::var_os("ESM_VERBOSE").is_some();
    let mut gold_failures = Vec::new();
    for system in ["DAIL-SQL-GPT-4", "SuperSQL", "TA-ACL"] {
        let preds: HashMap<i64, String> =
            read_jsonl(&data.join(format!("predictions/{system}.jsonl")))
                .into_iter()
                .map(|v| {
                    (
                        v["question_id"].as_i64().unwrap(),
                        v["predicted_sql"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
        let (mut matched, mut unparsed, mut esm_agree) = (0usize, 0usize, 0usize);
        for item in &dev {
            let qid = item["question_id"].as_i64().unwrap();
            let db = item["db_id"].as_str().unwrap();
            let schema = schemas
                .entry(db.to_string())
                .or_insert_with(|| PlusSchema::new(catalog.get(db).unwrap()));
            let gold = item["gold_sql"].as_str().unwrap();
            match esm_plus(schema, gold, &preds[&qid], EsmPlusOptions::default()) {
                Ok(out) => {
                    matched += usize::from(out.verdict);
                    unparsed += usize::from(!out.pred_parsed);
                    let sp = SpiderSchema::new(catalog.get(db).unwrap());
                    let e = esm(&sp, gold, &preds[&qid], SpiderEvalOptions::default()).unwrap();
                    esm_agree += usize::from(e.verdict == out.verdict);
                    if verbose && e.verdict != out.verdict {
                        println!(
                            "--- {system} q{qid} ESM {} ESM+ {} {:?} {:?}\n  gold: {gold}\n  pred: {}",
                            e.verdict,
                            out.verdict,
                            out.mismatched,
                            out.pred_parse_error,
                            preds[&qid]
                        );
                    }
                }
                Err(e) => gold_failures.push((qid, e.to_string())),
            }
        }
        println!(
            "{system}: ESM+ {:.2}% ({matched}/1034), prediction unparseable {unparsed}, same verdict as ESM {esm_agree}/1034",
            100.0 * matched as f64 / 1034.0
        );
    }
    gold_failures.sort();
    gold_failures.dedup();
    println!("gold queries ESM+ cannot parse: {gold_failures:?}");
    assert!(gold_failures.is_empty());
}
