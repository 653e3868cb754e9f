//! The ClickHouse store's reader: evaluation rows read back as [`StoredRow`]s (deduplicated
//! with `FINAL`, through the access paths of [`super::queries`]) — one run's rows, the most
//! recent rows, one event's or several events' rows — and the `JSONEachRow` fetch every other
//! ClickHouse read of the review store goes through.

use serde::de::DeserializeOwned;

use super::queries::{ROW_COLUMNS, RUN_ROWS};
use crate::stores::StoredRow;
use crate::stores::clickhouse::config::ClickHouseConfig;

/// A ClickHouse read failed.
#[derive(Debug, thiserror::Error)]
#[error("clickhouse: {what}: {source}")]
pub struct ReadError {
    /// What was being read.
    pub what: &'static str,
    /// The client's error.
    #[source]
    pub source: clickhouse::error::Error,
}

/// Run `query` and read its `JSONEachRow` lines as `T`s; a line that does not parse is skipped
/// and logged.
pub async fn fetch_json<T: DeserializeOwned>(
    what: &'static str,
    query: clickhouse::query::Query,
) -> Result<Vec<T>, ReadError> {
    let mut cursor = query
        .fetch_bytes("JSONEachRow")
        .map_err(|source| ReadError { what, source })?;
    let bytes = cursor
        .collect()
        .await
        .map_err(|source| ReadError { what, source })?;
    let text = String::from_utf8_lossy(&bytes);
    Ok(text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| match serde_json::from_str(l) {
            Ok(v) => Some(v),
            Err(error) => {
                tracing::warn!(what, %error, "unreadable ClickHouse row skipped");
                None
            }
        })
        .collect())
}

/// `?, ?, …` for `n` values (18.16 takes no array on the right of `IN`).
pub fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// Bind every id, in order.
pub fn bind_all(mut query: clickhouse::query::Query, ids: &[String]) -> clickhouse::query::Query {
    for id in ids {
        query = query.bind(id.as_str());
    }
    query
}

/// Reads evaluation rows from the `[clickhouse]` server.
#[derive(Clone)]
pub struct RowReader {
    client: clickhouse::Client,
}

impl RowReader {
    /// A reader on the `[clickhouse]` server.
    pub fn new(settings: &ClickHouseConfig) -> RowReader {
        RowReader {
            client: super::client(settings),
        }
    }

    /// The client (for the review store's other tables).
    pub fn client(&self) -> &clickhouse::Client {
        &self.client
    }

    /// Every row of one run.
    pub async fn of_run(&self, run_id: &str) -> Result<Vec<StoredRow>, ReadError> {
        fetch_json(
            "read a run's rows",
            self.client.query(RUN_ROWS).bind(run_id),
        )
        .await
    }

    /// The `max_rows` most recent rows, newest first, without `details` except on `ts_ex`
    /// rows (the overview and the queue need only their counterexamples) and, on line-rate
    /// `stef` rows, `reads` and `question_type` (the queue's `element` filter).
    pub async fn recent(&self, max_rows: usize) -> Result<Vec<StoredRow>, ReadError> {
        let columns = ROW_COLUMNS.replace(
            "status, details,",
            "status, multiIf(metric = 'ts_ex', details, metric = 'stef', \
             concat('{', arrayStringConcat(arrayFilter(x -> x != '', \
             [extract(details, '\"reads\":\\\\{[^}]*\\\\}'), \
             extract(details, '\"question_type\":\"[^\"]*\"')]), ','), '}'), '{}') AS details,",
        );
        let sql =
            format!("SELECT {columns} FROM evaluations FINAL ORDER BY ts DESC LIMIT {max_rows}");
        fetch_json("read recent rows", self.client.query(&sql)).await
    }

    /// Every row of one event, through `evaluations_by_event` to its sorting-key prefixes.
    pub async fn of_event(&self, event_id: &str) -> Result<Vec<StoredRow>, ReadError> {
        let sql = format!(
            "SELECT {ROW_COLUMNS} FROM evaluations FINAL WHERE event_id = ? AND \
             (run_key, app_key, agent_key, version_key) IN (SELECT run_key, app_key, agent_key, \
             version_key FROM evaluations_by_event WHERE event_id = ?) \
             SETTINGS distributed_product_mode = 'local'"
        );
        fetch_json(
            "read an event's rows",
            self.client.query(&sql).bind(event_id).bind(event_id),
        )
        .await
    }

    /// Every row of these events (as [`RowReader::of_event`]: a few granules per event instead
    /// of a scan of `evaluations`).
    pub async fn of_events(&self, ids: &[String]) -> Result<Vec<StoredRow>, ReadError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let marks = placeholders(ids.len());
        let sql = format!(
            "SELECT {ROW_COLUMNS} FROM evaluations FINAL WHERE event_id IN ({marks}) AND \
             (run_key, app_key, agent_key, version_key) IN (SELECT run_key, app_key, agent_key, \
             version_key FROM evaluations_by_event WHERE event_id IN ({marks})) \
             SETTINGS distributed_product_mode = 'local'"
        );
        let query = bind_all(bind_all(self.client.query(&sql), ids), ids);
        fetch_json("read labelled events' rows", query).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bulk_read_leaves_details_out() {
        assert!(
            ROW_COLUMNS.contains("status, details,"),
            "the bulk read rewrites this"
        );
    }
}
