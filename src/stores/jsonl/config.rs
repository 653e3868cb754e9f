//! `[sink] kind = "jsonl"`'s own key ([`JsonlSinkConfig`]: the output directory), declared
//! beside the JSONL store's writer and reader; read by `[sink]`'s reader (`stores::config`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[sink] kind = "jsonl"`: its own key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct JsonlSinkConfig {
    /// Output directory.
    pub dir: PathBuf,
}

impl Default for JsonlSinkConfig {
    fn default() -> Self {
        JsonlSinkConfig {
            dir: PathBuf::from(DEFAULT_DIR),
        }
    }
}

impl JsonlSinkConfig {
    /// What is wrong with these keys.
    pub fn problems(&self) -> Vec<String> {
        if self.dir.as_os_str().is_empty() {
            vec!["sink.dir is required for sink.kind = \"jsonl\"".to_string()]
        } else {
            Vec::new()
        }
    }
}

/// The JSONL sink's directory when `sink.dir` is not given.
pub const DEFAULT_DIR: &str = "sqlgrade-out";
