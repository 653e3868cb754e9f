//! The event corpus of the daemon tests: real BIRD and Spider questions with predicted SQL,
//! and malformed payloads.

use std::path::PathBuf;

/// `n` valid events built from the real corpus (BIRD + Spider questions with predicted SQL),
/// each with a unique `event_id` (`ev-00000`, …), cycling over the corpus.
pub fn corpus_events(n: usize) -> Vec<(String, Vec<u8>)> {
    let base = corpus();
    assert!(!base.is_empty(), "no events found in the shared data");
    (0..n)
        .map(|i| {
            let mut e = base[i % base.len()].clone();
            let id = format!("ev-{i:05}");
            e["event_id"] = serde_json::Value::String(id.clone());
            e["agent_version"] = serde_json::Value::String(format!("v{}", i % 3));
            (id, serde_json::to_vec(&e).unwrap())
        })
        .collect()
}

/// The base corpus: examples/events.jsonl when present, else events built from shared/data.
/// Loaded once per test binary.
pub fn corpus() -> &'static [serde_json::Value] {
    static CORPUS: std::sync::OnceLock<Vec<serde_json::Value>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(load_corpus)
}

fn load_corpus() -> Vec<serde_json::Value> {
    let examples = crate::data::repo_root().join("examples/events.jsonl");
    if let Ok(text) = std::fs::read_to_string(&examples) {
        let events: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v.get("question").is_some() && v.get("sql").is_some())
            .collect();
        if events.len() >= 20 {
            return events;
        }
    }
    events_from_shared_data()
}

fn events_from_shared_data() -> Vec<serde_json::Value> {
    // BIRD and Spider dev questions joined with the real systems' predicted SQL: one event per
    // (question, system). No gold block: these exercise the live (STEF) path.
    let data = crate::data::data_dir();
    let mut out = Vec::new();
    for bench in ["bird", "spider"] {
        let Ok(dev) = std::fs::read_to_string(data.join(bench).join("dev.jsonl")) else {
            continue;
        };
        let questions: std::collections::HashMap<i64, serde_json::Value> = dev
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| Some((v.get("question_id")?.as_i64()?, v)))
            .collect();
        let Ok(entries) = std::fs::read_dir(data.join(bench).join("predictions")) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for file in files {
            let system = file
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            for line in text.lines() {
                let Ok(p) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                let Some(q) = p
                    .get("question_id")
                    .and_then(|v| v.as_i64())
                    .and_then(|id| questions.get(&id))
                else {
                    continue;
                };
                let (Some(question), Some(sql)) = (q.get("question"), p.get("predicted_sql"))
                else {
                    continue;
                };
                out.push(serde_json::json!({
                    "ts": "2026-11-21T10:00:00Z",
                    "app_id": q.get("db_id").cloned().unwrap_or_default(),
                    "agent_id": system,
                    "model": bench,
                    "question": question,
                    "sql": sql,
                    "dialect": "sqlite",
                }));
            }
        }
    }
    out
}

/// Malformed payloads of several kinds (each dead-lettered with a distinct reason class).
pub fn malformed(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| match i % 4 {
            0 => format!("{{not json {i}").into_bytes(),
            1 => format!(r#"{{"event_id":"bad-{i}","sql":"SELECT 1"}}"#).into_bytes(),
            2 => format!("[{i}]").into_bytes(),
            _ => {
                let mut b = format!("bad-{i}-").into_bytes();
                b.extend_from_slice(b"\xff\xfe");
                b
            }
        })
        .collect()
}
