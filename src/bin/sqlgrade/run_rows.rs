//! One run's stored rows for `report` and `audit`: from an `evaluations.jsonl` file
//! (`--input`) or from the ClickHouse of `--config`, through the one reader of each store.

use std::path::Path;

use anyhow::Result;

use sqlgrade::config::Config;
use sqlgrade::stored::StoredRow;

/// Where a command reads its rows.
pub enum RowsFrom<'a> {
    /// The JSONL sink's `evaluations.jsonl`.
    File(&'a Path),
    /// ClickHouse `evaluations FINAL` on the config's `[sink]`.
    ClickHouse(&'a Config),
}

impl RowsFrom<'_> {
    /// The rows of `run_id`.
    pub async fn run(&self, run_id: &str) -> Result<Vec<StoredRow>> {
        Ok(match self {
            RowsFrom::File(path) => sqlgrade::stored::jsonl::rows_of_run(path, run_id)?,
            RowsFrom::ClickHouse(config) => {
                sqlgrade::clickhouse::rows::RowReader::new(&config.sink)
                    .of_run(run_id)
                    .await?
            }
        })
    }
}
