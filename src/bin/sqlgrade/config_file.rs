//! Loading the configuration a command was given (file, defaults, `SQLGRADE__*` environment).

use std::path::PathBuf;

use anyhow::{Context as _, Result};

use sqlgrade::config::Config;

pub fn load_config(path: Option<&PathBuf>) -> Result<Config> {
    Config::load(path.map(PathBuf::as_path)).with_context(|| match path {
        Some(p) => format!("configuration {}", p.display()),
        None => "configuration (defaults + SQLGRADE__* environment)".to_string(),
    })
}
