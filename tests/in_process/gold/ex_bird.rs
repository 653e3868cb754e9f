//! EX on the 432 BIRD items of the three shipped systems must reproduce every reference verdict.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;
use sqlgrade::exec::Executor;
use sqlgrade::metrics::ex::{ExConvention, results_match};
use sqlgrade::score::sqlite::{ExecLimits, SqliteExecutor};

use sqlgrade_testkit::data::read_jsonl;

#[test]
fn bird_ex_reproduces_every_reference_verdict() {
    let data = sqlgrade_testkit::data::data_dir().join("bird");
    let exec = SqliteExecutor::new(
        data.join("databases"),
        ExecLimits {
            timeout: Duration::from_secs(60),
            ..ExecLimits::default()
        },
    );
    let dev: HashMap<i64, Value> = read_jsonl(&data.join("dev.jsonl"))
        .into_iter()
        .map(|v| (v["question_id"].as_i64().unwrap(), v))
        .collect();
    for (system, expected_pct) in [
        ("DAIL-SQL", 63.43),
        ("SuperSQL", 71.30),
        ("CHESS-GPT-4o-mini", 67.13),
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
        let reference = read_jsonl(&data.join(format!("reference/ex_{system}.jsonl")));
        assert_eq!(reference.len(), 432);
        let mut mismatches = Vec::new();
        let mut correct = 0usize;
        for r in &reference {
            let qid = r["question_id"].as_i64().unwrap();
            let item = &dev[&qid];
            let db = item["db_id"].as_str().unwrap();
            let gold = exec
                .execute(db, item["gold_sql"].as_str().unwrap())
                .expect("every BIRD gold query executes");
            let pred = exec.execute(db, &preds[&qid]);
            let ex = match &pred {
                Ok(p) => results_match(&gold, p, ExConvention::Bird, ""),
                Err(_) => false,
            };
            let want = r["ex"].as_i64().unwrap() == 1;
            if ex {
                correct += 1;
            }
            let want_err = r["pred_error"].as_str();
            let got_err = pred.as_ref().err().map(|e| e.to_string());
            if ex != want || want_err.is_some() != got_err.is_some() {
                mismatches.push((qid, want, ex, want_err.map(str::to_string), got_err.clone()));
            }
            if let (Some(w), Some(g)) = (want_err, &got_err) {
                assert_eq!(w, g, "error message for {system} q{qid}");
            }
        }
        let pct = 100.0 * correct as f64 / 432.0;
        println!(
            "{system}: EX {pct:.2}% ({correct}/432), mismatches {}",
            mismatches.len()
        );
        assert!(mismatches.is_empty(), "{system}: {mismatches:#?}");
        assert!((pct - expected_pct).abs() < 0.005, "{system}: {pct}");
    }
}
