//! Loading the configuration a command was given (file, defaults, `SQLGRADE__*` environment).

use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};

use sqlgrade::config::Config;

pub fn load_config(path: Option<&PathBuf>) -> Result<Config> {
    Config::load(path.map(PathBuf::as_path)).with_context(|| match path {
        Some(p) => format!("configuration {}", p.display()),
        None => "configuration (defaults + SQLGRADE__* environment)".to_string(),
    })
}

/// The configuration of a command that works on ClickHouse only (`migrate`, `prune`): refused,
/// saying `why`, when its `[sink]` is another kind.
pub fn load_clickhouse_config(path: &PathBuf, why: &str) -> Result<Config> {
    let config = load_config(Some(path))?;
    let store = config.store();
    if store.clickhouse().is_none() {
        bail!(
            "ClickHouse sink not configured: {}'s store is {}; {why}",
            path.display(),
            store.describe()
        );
    }
    Ok(config)
}
