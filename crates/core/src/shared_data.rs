//! Test support inside the core: the texts of the shared benchmark data (`shared/data`), for the
//! tests that hold a fast path to its reference on every real question and query.
//!
//! The data is at `$SQLGRADE_SHARED_DIR/data` when that is set, else `shared/data` beside the
//! repository — where `sqlgrade-testkit` finds it for the other crates; the testkit depends on
//! this crate, so the core's own tests read it here. A file that is not there is skipped.

use std::path::PathBuf;

/// `shared/data`.
fn data_dir() -> PathBuf {
    std::env::var_os("SQLGRADE_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
        .join("data")
}

/// Every string value of `keys` on every JSON line of `files` (paths under `shared/data`), in
/// file and line order.
pub(crate) fn texts(files: &[&str], keys: &[&str]) -> Vec<String> {
    let dir = data_dir();
    let mut texts = Vec::new();
    for file in files {
        let Ok(body) = std::fs::read_to_string(dir.join(file)) else {
            continue;
        };
        for line in body.lines() {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
                for key in keys {
                    if let Some(t) = v[*key].as_str() {
                        texts.push(t.to_string());
                    }
                }
            }
        }
    }
    texts
}

/// Holds a fast path to the form it stands for on every text (a mismatch fails with the text),
/// and returns how many texts both say yes to: the caller asserts enough of them do, so a
/// check that never fires cannot pass for one that agrees.
pub(crate) fn agree_on(
    texts: &[String],
    fast: impl Fn(&str) -> bool,
    reference: impl Fn(&str) -> bool,
) -> usize {
    let mut yes = 0;
    for text in texts {
        let expected = reference(text);
        assert_eq!(fast(text), expected, "{text:?}");
        yes += usize::from(expected);
    }
    yes
}

/// `count` random texts, each of fewer than `max_len` characters drawn from `alphabet` (a
/// xorshift sequence from `seed`: the same texts on every run), for the tests that hold a fast
/// path to its reference beyond the shared data.
pub(crate) fn random_texts(alphabet: &[u8], count: usize, max_len: u64, seed: u64) -> Vec<String> {
    let mut state = seed;
    let mut texts = Vec::with_capacity(count);
    for _ in 0..count {
        let len = state % max_len;
        let mut text = String::new();
        for _ in 0..len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            text.push(char::from(
                alphabet[(state % alphabet.len() as u64) as usize],
            ));
        }
        texts.push(text);
    }
    texts
}

/// Every JSON document under `shared/data`: each line of every `.jsonl` file and every `.json`
/// file whole (the `tables.json` schemas, the reference verdicts), in path order.
pub(crate) fn json_documents() -> Vec<serde_json::Value> {
    let mut paths = Vec::new();
    let mut dirs = vec![data_dir()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path
                .extension()
                .is_some_and(|e| e == "json" || e == "jsonl")
            {
                paths.push(path);
            }
        }
    }
    paths.sort();
    let mut documents = Vec::new();
    for path in paths {
        let Ok(body) = std::fs::read_to_string(&path) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "jsonl") {
            documents.extend(
                body.lines()
                    .filter_map(|line| serde_json::from_str(line).ok()),
            );
        } else if let Ok(document) = serde_json::from_str(&body) {
            documents.push(document);
        }
    }
    documents
}
