//! Locating the shared benchmark data (`shared/data`) for tests, benches and examples.
//!
//! Resolution order: `$SQLGRADE_SHARED_DIR`, then `<crate root>/../shared`, then `/work/shared`.

use std::path::PathBuf;

/// The `shared/` directory beside the repository (holds `data/`, `specs/`, `seeds/`).
pub fn shared_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SQLGRADE_SHARED_DIR") {
        return PathBuf::from(dir);
    }
    let beside = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if beside.join("data").is_dir() {
        return beside;
    }
    PathBuf::from("/work/shared")
}

/// `shared/data`.
pub fn data_dir() -> PathBuf {
    shared_dir().join("data")
}
