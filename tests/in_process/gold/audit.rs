//! `sqlgrade audit` end to end on the shared BIRD data: three real systems backfilled (EX on the
//! real databases), then the audit over their rows. Checks the evidence against an independent
//! execution of the SQL (the systems said to agree really return the same set of rows, which is
//! not the gold's), the plain EX against the official evaluator's verdicts, the corrected EX
//! against the suspected items, and the JSONL and HTML outputs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use rusqlite::types::Value as Sql;
use sqlgrade_testkit::cli::sqlgrade;
use sqlgrade_testkit::data::{data_dir, read_jsonl as lines};

const SYSTEMS: [&str; 3] = ["CHESS-GPT-4o-mini", "DAIL-SQL", "SuperSQL"];

/// The rows of `sql` on `db` as a set of printable tuples (BIRD's set equality; integral reals
/// as integers, as Python compares them).
fn result_set(db: &Path, sql: &str) -> Option<BTreeSet<Vec<String>>> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut stmt = conn.prepare(sql).ok()?;
    let width = stmt.column_count();
    let rows = stmt
        .query_map([], |r| {
            (0..width)
                .map(|i| {
                    r.get::<_, Sql>(i).map(|v| match v {
                        Sql::Null => "NULL".to_string(),
                        Sql::Integer(i) => format!("i{i}"),
                        Sql::Real(f) if f.fract() == 0.0 && f.abs() < 9e15 => {
                            format!("i{}", f as i64)
                        }
                        Sql::Real(f) => format!("r{f:?}"),
                        Sql::Text(t) => format!("t{t}"),
                        Sql::Blob(b) => format!("b{b:?}"),
                    })
                })
                .collect::<Result<Vec<String>, _>>()
        })
        .ok()?;
    rows.collect::<Result<BTreeSet<_>, _>>().ok()
}

#[test]
fn audit_of_three_bird_systems_points_at_items_they_agree_against() {
    let dir = tempfile::tempdir().unwrap();
    let bird = data_dir().join("bird");
    let out_dir = dir.path().join("out");
    for system in SYSTEMS {
        let out = sqlgrade(dir.path())
            .args(["backfill", "--format", "bird", "--input"])
            .arg(bird.join("dev.jsonl"))
            .arg("--predictions")
            .arg(bird.join(format!("predictions/{system}.jsonl")))
            .env("SQLGRADE__SINK__DIR", &out_dir)
            .env("SQLGRADE__GOLD__METRICS", "ex")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "backfill {system}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let jsonl = dir.path().join("audit.jsonl");
    let html = dir.path().join("audit.html");
    let mut cmd = sqlgrade(dir.path());
    cmd.arg("audit");
    for system in SYSTEMS {
        cmd.args(["--run-id", system]);
        cmd.arg("--predictions")
            .arg(bird.join(format!("predictions/{system}.jsonl")));
    }
    let out = cmd
        .arg("--input")
        .arg(out_dir.join("evaluations.jsonl"))
        .arg("--dataset")
        .arg(bird.join("dev.jsonl"))
        .arg("--jsonl")
        .arg(&jsonl)
        .arg("--out")
        .arg(&html)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "audit: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Gold audit: 3 runs"), "{stdout}");
    assert!(stdout.contains("Suspicion is not proof"), "{stdout}");
    assert!(stdout.contains("EX corrected"), "{stdout}");

    let items = lines(&jsonl);
    assert!(!items.is_empty());
    let ranks: Vec<u64> = items.iter().map(|i| i["rank"].as_u64().unwrap()).collect();
    assert_eq!(ranks, (1..=items.len() as u64).collect::<Vec<_>>());
    let strengths: Vec<f64> = items
        .iter()
        .map(|i| i["strength"].as_f64().unwrap())
        .collect();
    assert!(
        strengths.windows(2).all(|w| w[0] >= w[1]),
        "ranked by strength"
    );

    // Independent check of every consensus: the agreeing systems' SQL returns one set of rows
    // on the real database, and it is not the gold's; the runs said to match the gold do.
    let predictions: HashMap<&str, HashMap<String, String>> = SYSTEMS
        .iter()
        .map(|s| {
            let map = lines(&bird.join(format!("predictions/{s}.jsonl")))
                .into_iter()
                .map(|v| {
                    (
                        v["question_id"].to_string(),
                        v["predicted_sql"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            (*s, map)
        })
        .collect();
    let mut consensus_items = 0;
    for item in &items {
        let id = item["event_id"].as_str().unwrap();
        let db_id = item["db_id"].as_str().expect("dataset text joined");
        let db = bird.join(format!("databases/{db_id}/{db_id}.sqlite"));
        let gold = result_set(&db, item["gold_sql"].as_str().unwrap()).expect("gold runs");
        for evidence in item["evidence"].as_array().unwrap() {
            if evidence["kind"] != "consensus_against_gold" {
                continue;
            }
            consensus_items += 1;
            let runs: Vec<&str> = evidence["runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_str().unwrap())
                .collect();
            assert!(runs.len() >= 2, "{item}");
            let sets: Vec<BTreeSet<Vec<String>>> = runs
                .iter()
                .map(|r| {
                    let sql = &predictions[r][id];
                    assert_eq!(item["predictions"][*r].as_str(), Some(sql.as_str()));
                    result_set(&db, sql).expect("agreeing prediction runs")
                })
                .collect();
            assert!(
                sets.windows(2).all(|w| w[0] == w[1]),
                "item {id}: {runs:?} do not return the same rows"
            );
            assert_ne!(
                sets[0], gold,
                "item {id}: the consensus is the gold's answer"
            );
            for r in evidence["matching_gold"].as_array().unwrap() {
                let sql = &predictions[r.as_str().unwrap()][id];
                assert_eq!(result_set(&db, sql).as_ref(), Some(&gold), "item {id}");
            }
        }
    }
    assert!(
        consensus_items >= 5,
        "three real systems agree against the gold on some items ({consensus_items})"
    );

    // Plain EX is the official evaluator's; the corrected EX leaves out exactly the suspected
    // items.
    let suspected: BTreeSet<&str> = items
        .iter()
        .filter(|i| i["suspected"] == true)
        .map(|i| i["event_id"].as_str().unwrap())
        .collect();
    assert!(!suspected.is_empty());
    for system in SYSTEMS {
        let reference: BTreeMap<String, bool> =
            lines(&bird.join(format!("reference/ex_{system}.jsonl")))
                .into_iter()
                .map(|v| (v["question_id"].to_string(), v["ex"] == 1))
                .collect();
        let plain = reference.values().filter(|v| **v).count();
        let kept: Vec<bool> = reference
            .iter()
            .filter(|(id, _)| !suspected.contains(id.as_str()))
            .map(|(_, v)| *v)
            .collect();
        let corrected = kept.iter().filter(|v| **v).count();
        let line = stdout
            .lines()
            .find(|l| l.starts_with(system))
            .unwrap_or_else(|| panic!("{system} missing: {stdout}"));
        let want_plain = format!("{:.3} [", plain as f64 / 432.0);
        let want_corrected = format!("{:.3} [", corrected as f64 / kept.len() as f64);
        assert!(line.contains(&want_plain), "{line} vs {want_plain}");
        assert!(line.contains("n=432"), "{line}");
        assert!(
            line.contains(&format!("n={}", kept.len())),
            "{line} vs {}",
            kept.len()
        );
        assert!(line.contains(&want_corrected), "{line} vs {want_corrected}");
    }

    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Suspicion is not proof"));
    let top = items[0]["event_id"].as_str().unwrap();
    assert!(page.contains(&format!("id=\"item-{top}\"")));
    assert!(!page.contains("<script"), "no scripts in the page");

    // Fewer than two runs is a usage error.
    let one = sqlgrade(dir.path())
        .args(["audit", "--run-id", "SuperSQL", "--input"])
        .arg(out_dir.join("evaluations.jsonl"))
        .output()
        .unwrap();
    assert!(!one.status.success());
    assert!(String::from_utf8_lossy(&one.stderr).contains("at least two"));
}
