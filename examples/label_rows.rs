//! Temporary: dump the line-rate rows of both label files, with and without the catalogue.
use sqlgrade::catalogue::SchemaCatalog;
use sqlgrade::event::{Event, Gold};
use sqlgrade::judge::deterministic::DeterministicJudge;
use sqlgrade::stef::{self, RuleProfile};
use sqlgrade_testkit::data::{data_dir, read_jsonl};

fn main() {
    let tables = std::fs::read_to_string(data_dir().join("bird").join("tables.json")).unwrap();
    let catalogue = SchemaCatalog::parse_tables_json(&tables).unwrap();
    let profile = RuleProfile::default();
    for file in ["nl2sql-bugs-dev", "rose-vec-bird-dev"] {
        for v in read_jsonl(&data_dir().join("labels").join(format!("{file}.jsonl"))) {
            let question = v["question"].as_str().unwrap().to_string();
            let evidence = v["evidence"]
                .as_str()
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_string);
            let db_id = v["db_id"].as_str().unwrap().to_string();
            let event = Event {
                event_id: format!("{file}-{}", v["id"]),
                ts: None,
                app_id: Some(format!("bird-{db_id}")),
                agent_id: None,
                agent_version: None,
                model: None,
                enriched_question: evidence.as_ref().map(|e| format!("{question} {e}")),
                question: question.clone(),
                sql: v["sql"].as_str().unwrap().to_string(),
                dialect: Some("sqlite".into()),
                run_id: None,
                db_id: Some(db_id.clone()),
                gold: Some(Gold {
                    db_id: Some(db_id.clone()),
                    evidence,
                    ..Default::default()
                }),
                result: None,
                result_ignored: None,
                extra: Default::default(),
            };
            for setting in ["none", "catalogue"] {
                let schema = if setting == "catalogue" {
                    catalogue.get(&db_id)
                } else {
                    None
                };
                let options = stef::PrepareOptions {
                    max_sql_bytes: 1 << 20,
                    catalogue: schema.map_or(
                        stef::CatalogueSelection::None,
                        stef::CatalogueSelection::Schema,
                    ),
                };
                let row = match stef::prepare_with(&event, &profile, &options) {
                    Ok(p) => {
                        let a = DeterministicJudge.assess_prepared(&p);
                        stef::finish(&p, a, &profile).to_row(&event, "", &profile, 0)
                    }
                    Err(e) => stef::non_scorable_row(&event, "", &e, &profile),
                };
                println!(
                    "{}",
                    serde_json::json!({"source": file, "id": v["id"], "db_id": db_id, "question": question,
                    "sql": event.sql, "label": v["label"], "setting": setting, "row": row})
                );
            }
        }
    }
}
