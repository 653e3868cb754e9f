//! Where things are: the repository root, and the shared benchmark data (`shared/data`) beside
//! it.
//!
//! `shared/` is found at `$SQLGRADE_SHARED_DIR` when set, else beside the repository
//! (`<repo>/../shared`). There is no machine-specific fallback: a checkout without the data
//! fails loudly, naming both places it looked.

use std::path::PathBuf;

/// The repository root (the workspace that holds this crate under `crates/testkit`).
pub fn repo_root() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The `shared/` directory beside the repository (holds `data/`, `specs/`, `seeds/`).
///
/// # Panics
/// When neither `$SQLGRADE_SHARED_DIR` nor `<repo>/../shared` holds a `data/` directory (test
/// support: the tests cannot run without the data).
pub fn shared_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SQLGRADE_SHARED_DIR") {
        return PathBuf::from(dir);
    }
    let beside = repo_root().join("../shared");
    let beside = beside.canonicalize().unwrap_or(beside);
    assert!(
        beside.join("data").is_dir(),
        "the shared benchmark data is not at {} (set SQLGRADE_SHARED_DIR to the directory that \
         holds data/)",
        beside.display()
    );
    beside
}

/// `shared/data`.
pub fn data_dir() -> PathBuf {
    shared_dir().join("data")
}

/// Every non-blank line of a JSONL file as JSON.
///
/// # Panics
/// When the file cannot be read or a line is not JSON (test support: the data is ours).
pub fn read_jsonl(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}
