//! Retention: `sqlgrade prune --older-than DURATION` drops whole monthly partitions.
//!
//! Every time-keyed table is partitioned by `toYYYYMM(<time>)` ([`PARTITIONED_TABLES`]), so the
//! cheapest exact way to forget old data is `ALTER TABLE … DROP PARTITION`: a metadata operation
//! that works on every ClickHouse release (18.16 has no TTL). A partition is dropped only when
//! *all* of its month is older than the cut-off (`now − older_than`): the month's end — the first
//! instant of the next month — is at or before it. The partition ids come from `system.parts`
//! (active parts); ids that are not a `YYYYMM` month are left alone and reported.
//!
//! On a cluster (`prune --cluster NAME` or `[sink.cluster] name`) the months are listed through
//! the `Distributed` tables and dropped from the local replicated tables `ON CLUSTER`.
//!
//! On releases with TTL a table can forget rows by itself instead
//! (`ALTER TABLE evaluations MODIFY TTL ts + INTERVAL 90 DAY`, see `deploy/clickhouse/README.md`);
//! `prune` stays the portable tool and the only one that also works on 18.16.

use std::time::Duration;

use chrono::{DateTime, Datelike, TimeZone, Utc};

use super::cluster::ClusterLayout;
use crate::settings::redact_url;
use crate::sink::config::SinkConfig;

/// The tables partitioned by month, with the column they are partitioned on.
pub const PARTITIONED_TABLES: [(&str, &str); 7] = [
    ("evaluations", "ts"),
    ("event_inputs", "ts"),
    ("dead_letters", "received_at"),
    ("alerts", "fired_at"),
    ("evaluations_hourly", "hour"),
    ("dead_letters_hourly", "hour"),
    ("evaluations_scored_hourly", "hour"),
];

/// Why pruning failed.
#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    /// A table that is not one of [`PARTITIONED_TABLES`] was named.
    #[error("{0:?} is not a partitioned sqlgrade table (known: {known})", known = known_tables())]
    UnknownTable(String),
    /// The cut-off is before the Unix epoch or otherwise not representable.
    #[error("--older-than {0:?} reaches before 1970")]
    CutOff(Duration),
    /// A query failed.
    #[error("{what} on {url}: {source}")]
    Query {
        /// What was attempted.
        what: String,
        /// Server URL (credentials redacted).
        url: String,
        /// Server or network error.
        #[source]
        source: clickhouse::error::Error,
    },
}

fn known_tables() -> String {
    PARTITIONED_TABLES
        .iter()
        .map(|(t, _)| *t)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a prune did (or, with `dry_run`, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// The cut-off (RFC 3339): months ending at or before it are dropped.
    pub cut_off: String,
    /// `(table, partition)` dropped.
    pub dropped: Vec<(String, String)>,
    /// `(table, partition)` kept (some of the month is newer than the cut-off).
    pub kept: Vec<(String, String)>,
    /// `(table, partition)` whose id is not a `YYYYMM` month (left alone).
    pub unrecognised: Vec<(String, String)>,
}

/// The first instant after month `yyyymm` (`None` when the id is not a month).
pub fn month_end(partition: &str) -> Option<DateTime<Utc>> {
    let id = partition.trim_matches('\'');
    if id.len() != 6 || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let year: i32 = id.get(..4)?.parse().ok()?;
    let month: u32 = id.get(4..)?.parse().ok()?;
    if !(1..=12).contains(&month) {
        return None;
    }
    let (y, m) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    Utc.with_ymd_and_hms(y, m, 1, 0, 0, 0).single()
}

/// Whether partition `id` lies wholly before `cut_off` (`None`: not a month id).
pub fn droppable(id: &str, cut_off: DateTime<Utc>) -> Option<bool> {
    month_end(id).map(|end| end <= cut_off)
}

/// Drop the monthly partitions of `tables` (all of [`PARTITIONED_TABLES`] when empty) that are
/// wholly older than `now − older_than`; with `dry_run`, only report what would go.
///
/// On a cluster (`cluster`, as laid out by `migrate --cluster`) the months are read through the
/// `Distributed` tables (every shard's) and each is dropped from the local tables with
/// `ALTER TABLE … ON CLUSTER … DROP PARTITION` (one replica per shard runs it; replication
/// drops it on the others).
pub async fn prune(
    settings: &SinkConfig,
    older_than: Duration,
    tables: &[String],
    now: DateTime<Utc>,
    dry_run: bool,
    cluster: Option<&ClusterLayout>,
) -> Result<PruneReport, PruneError> {
    let chosen: Vec<(&str, &str)> = if tables.is_empty() {
        PARTITIONED_TABLES.to_vec()
    } else {
        let mut chosen = Vec::new();
        for t in tables {
            match PARTITIONED_TABLES.iter().find(|(name, _)| name == t) {
                Some(entry) => chosen.push(*entry),
                None => return Err(PruneError::UnknownTable(t.clone())),
            }
        }
        chosen
    };
    let cut_off = chrono::Duration::from_std(older_than)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .filter(|c| c.year() >= 1970)
        .ok_or(PruneError::CutOff(older_than))?;
    let url = redact_url(super::url(settings));
    let client = super::client(settings);
    let mut report = PruneReport {
        cut_off: cut_off.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        ..PruneReport::default()
    };
    for (table, time_column) in chosen {
        let listing = match cluster {
            None => client
                .query(
                    "SELECT DISTINCT partition FROM system.parts \
                     WHERE database = ? AND table = ? AND active ORDER BY partition",
                )
                .bind(settings.database.as_str())
                .bind(table),
            // The names come from PARTITIONED_TABLES: safe to splice.
            Some(_) => client.query(&format!(
                "SELECT DISTINCT toString(toYYYYMM({time_column})) AS partition FROM {table} \
                 ORDER BY partition"
            )),
        };
        let partitions: Vec<String> =
            listing
                .fetch_all()
                .await
                .map_err(|source| PruneError::Query {
                    what: format!("list the partitions of {table}"),
                    url: url.clone(),
                    source,
                })?;
        for partition in partitions {
            let entry = (table.to_string(), partition.clone());
            match droppable(&partition, cut_off) {
                None => report.unrecognised.push(entry),
                Some(false) => report.kept.push(entry),
                Some(true) => {
                    if !dry_run {
                        // The id was checked to be six digits: safe to splice.
                        let id = partition.trim_matches('\'');
                        let statement = match cluster {
                            None => format!("ALTER TABLE {table} DROP PARTITION {id}"),
                            Some(c) => format!(
                                "ALTER TABLE {}.{} ON CLUSTER {} DROP PARTITION {id}",
                                c.database,
                                super::cluster::local_name(table),
                                c.name
                            ),
                        };
                        client.query(&statement).execute().await.map_err(|source| {
                            PruneError::Query {
                                what: format!("drop partition {id} of {table}"),
                                url: url.clone(),
                                source,
                            }
                        })?;
                        tracing::info!(table, partition = id, "partition dropped");
                    }
                    report.dropped.push(entry);
                }
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_month_goes_only_when_all_of_it_is_older_than_the_cut_off() {
        let cut = Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap();
        assert_eq!(
            droppable("202602", cut),
            Some(true),
            "ends exactly at the cut-off"
        );
        assert_eq!(droppable("202603", cut), Some(false));
        let mid = Utc.with_ymd_and_hms(2026, 3, 15, 12, 0, 0).unwrap();
        assert_eq!(
            droppable("202603", mid),
            Some(false),
            "half of March is newer"
        );
        assert_eq!(droppable("202512", mid), Some(true));
        assert_eq!(
            month_end("202512"),
            Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).single()
        );
        for odd in ["tuple()", "2026", "202613", "20261", "'202602'x", ""] {
            assert_eq!(droppable(odd, cut), None, "{odd}");
        }
        assert_eq!(droppable("'202602'", cut), Some(true), "quoted ids too");
    }
}
