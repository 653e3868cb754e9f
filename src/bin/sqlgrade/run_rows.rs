//! One run's stored rows for `report` and `audit`: from an `evaluations.jsonl` file
//! (`--input`) or from the ClickHouse of `--config`, through the one reader of each store.

use std::path::PathBuf;

use anyhow::{Result, bail};

use sqlgrade::config::Config;
use sqlgrade::stores::StoredRow;

use crate::config_file::load_config;

/// Where a command reads its rows.
pub enum RowsFrom {
    /// The JSONL sink's `evaluations.jsonl`.
    File(PathBuf),
    /// ClickHouse `evaluations FINAL` on the config's `[sink]`.
    ClickHouse(Box<Config>),
}

impl RowsFrom {
    /// `--input` when given, else the ClickHouse of `--config` (loaded); `command` names the
    /// command in the error when neither is given.
    pub fn from_args(
        input: Option<&PathBuf>,
        config: Option<&PathBuf>,
        command: &str,
    ) -> Result<RowsFrom> {
        Ok(match (input, config) {
            (Some(path), _) => RowsFrom::File(path.clone()),
            (None, Some(path)) => RowsFrom::ClickHouse(Box::new(load_config(Some(path))?)),
            (None, None) => {
                bail!("{command} needs --input FILE or --config FILE (ClickHouse)")
            }
        })
    }

    /// The loaded configuration, when the rows come from ClickHouse.
    pub fn config(&self) -> Option<&Config> {
        match self {
            RowsFrom::File(_) => None,
            RowsFrom::ClickHouse(config) => Some(config),
        }
    }

    /// The rows of `run_id`.
    pub async fn run(&self, run_id: &str) -> Result<Vec<StoredRow>> {
        Ok(match self {
            RowsFrom::File(path) => sqlgrade::stores::jsonl::rows::rows_of_run(path, run_id)?,
            RowsFrom::ClickHouse(config) => {
                let Some(store) = config.store().reader(config.server.review_max_rows) else {
                    bail!("the config's store (stdout) keeps no rows to read back");
                };
                store.rows_of_run(run_id).await?
            }
        })
    }
}
