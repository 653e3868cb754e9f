//! Real events from `shared/data` (questions, predictions of real systems) and valid judge
//! replies, for tests and benches.

use std::collections::{BTreeMap, HashSet};
use std::io::BufRead;

use serde_json::{Value, json};
use sqlgrade_core::event::Event;
use sqlgrade_core::stef::{Prepared, RuleProfile};

/// `(question_id → record)` of a JSONL file under `shared/data`.
fn read_jsonl(relative: &str) -> BTreeMap<i64, Value> {
    let path = crate::data::data_dir().join(relative);
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::io::BufReader::new(file)
        .lines()
        .map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap())
        .map(|v| (v["question_id"].as_i64().unwrap(), v))
        .collect()
}

/// Events for a benchmark's questions and one system's predictions: question, predicted SQL,
/// and (for BIRD) the evidence folded into an enriched question.
pub fn benchmark_events(dataset: &str, system: &str) -> Vec<Event> {
    let questions = read_jsonl(&format!("{dataset}/dev.jsonl"));
    let predictions = read_jsonl(&format!("{dataset}/predictions/{system}.jsonl"));
    predictions
        .iter()
        .filter_map(|(id, p)| {
            let q = questions.get(id)?;
            let mut event = json!({
                "event_id": format!("{dataset}-{system}-{id}"),
                "app_id": dataset,
                "agent_id": system,
                "question": q["question"],
                "sql": p["predicted_sql"],
                "dialect": "sqlite",
            });
            if let Some(evidence) = q.get("evidence").and_then(Value::as_str)
                && !evidence.trim().is_empty()
            {
                event["enriched_question"] = json!(format!(
                    "{} (knowledge: {evidence})",
                    q["question"].as_str()?
                ));
            }
            Event::from_value(event).ok()
        })
        .collect()
}

/// `n` events with pairwise distinct (question, enriched question, SQL), from Spider's and
/// BIRD's prediction files.
pub fn distinct_events(n: usize) -> Vec<Event> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (dataset, system) in [
        ("spider", "SuperSQL"),
        ("spider", "DAIL-SQL-GPT-4"),
        ("spider", "TA-ACL"),
        ("bird", "SuperSQL"),
    ] {
        for e in benchmark_events(dataset, system) {
            let key = (
                e.question.clone(),
                e.enriched_question.clone(),
                e.sql.clone(),
            );
            if seen.insert(key) {
                out.push(e);
                if out.len() == n {
                    return out;
                }
            }
        }
    }
    panic!("only {} distinct events available", out.len());
}

/// The deterministic preparation of an event (SQL spec, lexicon question spec, alignment).
pub fn prepare(event: &Event, profile: &RuleProfile) -> Prepared {
    sqlgrade_core::stef::prepare(event, profile).expect("benchmark SQL parses")
}

/// A rule profile like an app would have.
pub fn profile() -> RuleProfile {
    RuleProfile {
        benign_filters: vec!["status = 'active'".into()],
        ignore_filters: vec!["tenant_id".into()],
        notes: Some("Dates are stored as ISO-8601 text.".into()),
        version: "test-profile-1".into(),
        ..RuleProfile::default()
    }
}

/// A valid STEF reply with the given verdict and confidence.
pub fn stef_reply(verdict: &str, confidence: f64) -> Value {
    json!({
        "question_spec": {
            "outputs": ["bond type"],
            "aggregations": [{"func": "count", "column": "bond_id", "distinct": false}],
            "filters": [{"lhs": "label", "op": "eq", "value": "'-'"}],
            "group_by": [],
            "explicit_order": true,
            "top_k": 1
        },
        "enrichment": {"status": "faithful", "added": [], "dropped": []},
        "filter_status": "fully_applied",
        "verdict": verdict,
        "confidence": confidence,
        "rationale": format!("Scripted verdict: {verdict}.")
    })
}
