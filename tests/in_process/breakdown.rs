//! `sqlgrade breakdown` on real data: BIRD dev's gold SQL on its three local databases as
//! version "1.0" of an agent, and the same with `superhero_name` projected as the hero's id
//! (`superhero.id`) as version "1.1" — 27 queries changed, the rest as they were — scored with
//! the catalogue through `sqlgrade run`. Against 1.0, 1.1's rise in flagged events is on the
//! `superhero` table, its changed events' findings name `superhero.id`, and the question types
//! (read from the questions alone) are the same in both versions.

use std::path::Path;

use serde_json::Value;
use sqlgrade_testkit::data::{data_dir, read_jsonl};

use crate::support::cli::sqlgrade;

/// The gold query with its projected `superhero_name` replaced by the hero's id (`None` when
/// it does not project it first).
fn with_id_for_name(sql: &str) -> Option<String> {
    let re = regex::Regex::new(r"(?i)^SELECT\s+(DISTINCT\s+)?(\w+\.)?superhero_name\b").unwrap();
    let caps = re.captures(sql)?;
    let qualifier = match caps.get(2) {
        Some(q) => q.as_str().to_string(),
        None => {
            let alias = regex::Regex::new(r"(?i)\bsuperhero\s+AS\s+(\w+)").unwrap();
            alias
                .captures(sql)
                .map_or("superhero.".to_string(), |a| format!("{}.", &a[1]))
        }
    };
    let distinct = caps.get(1).map_or("", |d| d.as_str());
    Some(format!(
        "SELECT {distinct}{qualifier}id{}",
        &sql[caps.get(0).unwrap().end()..]
    ))
}

fn breakdown(dir: &Path, args: &[&str]) -> Vec<Value> {
    let output = sqlgrade(dir).arg("breakdown").args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_version_that_projects_ids_for_names_rises_on_the_superhero_table() {
    let dir = tempfile::tempdir().unwrap();
    let bird = data_dir().join("bird");
    let mut events = Vec::new();
    let mut changed = Vec::new();
    for item in read_jsonl(&bird.join("dev.jsonl")) {
        let gold = item["gold_sql"].as_str().unwrap();
        let id = item["question_id"].as_u64().unwrap();
        for version in ["1.0", "1.1"] {
            let sql = match version {
                "1.1" => with_id_for_name(gold).inspect(|_| changed.push(format!("1.1-{id}"))),
                _ => None,
            }
            .unwrap_or_else(|| gold.to_string());
            events.push(serde_json::json!({
                "event_id": format!("{version}-{id}"),
                "ts": "2026-12-01T10:00:00Z",
                "app_id": "bird",
                "agent_id": "gold",
                "agent_version": version,
                "db_id": item["db_id"],
                "question": item["question"],
                "enriched_question": format!("{} {}", item["question"].as_str().unwrap(), item["evidence"].as_str().unwrap_or("")),
                "sql": sql,
                "dialect": "sqlite",
            }));
        }
    }
    assert_eq!(
        changed.len(),
        27,
        "the 27 gold queries that project superhero_name"
    );
    let input = dir.path().join("events.jsonl");
    let text: Vec<String> = events.iter().map(Value::to_string).collect();
    std::fs::write(&input, text.join("\n") + "\n").unwrap();
    let out = dir.path().join("out");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[source]\nkind = \"file\"\npath = \"{}\"\n[sink]\nkind = \"jsonl\"\ndir = \"{}\"\n[stef]\ncatalogues = [\"{}\"]\n",
            input.display(),
            out.display(),
            bird.join("tables.json").display()
        ),
    )
    .unwrap();
    let run = sqlgrade(dir.path())
        .args(["run", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );

    // The changed events' findings name the hero's id.
    let rows: Vec<Value> = read_jsonl(&out.join("evaluations.jsonl"))
        .into_iter()
        .filter(|r| r["metric"] == "stef")
        .collect();
    // Every changed event whose finding says it returns ids for names names the id.
    let mut id_findings = 0;
    for row in rows
        .iter()
        .filter(|r| changed.iter().any(|c| r["event_id"] == c.as_str()))
    {
        for f in row["details"]["findings"].as_array().into_iter().flatten() {
            if f["code"] == "id_instead_of_name" {
                id_findings += 1;
                let columns = f["elements"]["columns"].as_array().unwrap();
                assert!(columns.iter().any(|c| c == "superhero.id"), "{f}");
                assert!(
                    columns.iter().any(|c| c == "superhero.superhero_name"),
                    "{f}"
                );
            }
        }
    }
    assert!(id_findings >= 15, "{id_findings} of 27 changed events");

    let dir_arg = out.to_str().unwrap();
    let lines = breakdown(
        dir.path(),
        &[
            "--by",
            "table",
            "--dir",
            dir_arg,
            "--version",
            "1.1",
            "--against-version",
            "1.0",
            "--json",
            "--limit",
            "0",
        ],
    );
    let first = &lines[0];
    assert_eq!(first["element"], "superhero", "{lines:#?}");
    assert_eq!(first["against_version"], "1.0");
    let rise = first["flagged"].as_i64().unwrap() - first["against"]["flagged"].as_i64().unwrap();
    assert!(rise >= 10, "{first}");
    assert!(
        first["difference"]["lower"].as_f64().unwrap() > 0.0,
        "{first}"
    );
    for key in ["events", "flagged", "share_flagged", "mean_p_correct"] {
        assert!(first.get(key).is_some(), "{key}: {first}");
    }
    assert!(
        first["top_findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "id_instead_of_name"),
        "{first}"
    );
    // Every other table: the same events in both versions.
    for line in &lines[1..] {
        assert_eq!(line["events"], line["against"]["events"], "{line}");
    }
    // Columns: the id's rise is where the name fell.
    let columns = breakdown(
        dir.path(),
        &[
            "--by",
            "column",
            "--dir",
            dir_arg,
            "--version",
            "1.1",
            "--against-version",
            "1.0",
            "--json",
        ],
    );
    assert_eq!(columns[0]["element"], "superhero.id", "{columns:#?}");
    // Question types come from the question alone: each has the same events in both versions.
    let types = breakdown(
        dir.path(),
        &[
            "--by",
            "question_type",
            "--dir",
            dir_arg,
            "--version",
            "1.1",
            "--against-version",
            "1.0",
            "--json",
            "--limit",
            "0",
        ],
    );
    assert!(types.len() > 10, "{types:#?}");
    for t in &types {
        assert_eq!(t["events"], t["against"]["events"], "{t}");
        assert!(
            t["label"].as_str().unwrap().contains(" · ")
                || !t["element"].as_str().unwrap().contains(':'),
            "{t}"
        );
    }
    // The table form runs.
    let output = sqlgrade(dir.path())
        .args([
            "breakdown",
            "--by",
            "join",
            "--dir",
            dir_arg,
            "--since",
            "1h",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("join "));
}
