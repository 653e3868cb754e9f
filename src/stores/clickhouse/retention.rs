//! Retention: `sqlgrade prune --older-than DURATION` drops whole monthly partitions.
//!
//! Every time-keyed table is partitioned by `toYYYYMM(<time>)` ([`PARTITIONED_TABLES`]), so the
//! cheapest exact way to forget old data is `ALTER TABLE … DROP PARTITION`: a metadata operation
//! that works on every ClickHouse release (18.16 has no TTL). A partition is dropped only when
//! *all* of its month is older than the cut-off (`now − older_than`): the month's end — the first
//! instant of the next month — is at or before it. The partition ids come from `system.parts`
//! (active parts); ids that are not a `YYYYMM` month are left alone and reported.
//!
//! On a cluster (`prune --cluster NAME` or `[clickhouse.cluster] name`) every replica is asked in turn
//! (`remote('host:port', system.…)` through the server `prune` connects to, the replicas listed by
//! `system.clusters`) and a table's months are dropped from the local replicated tables
//! `ON CLUSTER` only when no replica lags:
//!
//! 1. each replica's replication queue for the local table holds no fetch
//!    (`system.replicas.inserts_in_queue = 0`) — waited for up to `replica_wait`; a replica that
//!    still lags (or cannot be reached) then leaves the table untouched and reported, since a
//!    part it has not fetched yet is a month `prune` would not see;
//! 2. the months are the union of every replica's active parts (one replica per shard, as the
//!    `Distributed` table reads, could hide a month a lagging peer holds);
//! 3. after the drop, every replica is checked (again up to `replica_wait`) to hold no part of a
//!    dropped month; one that still does is reported, and `prune` exits non-zero so a scheduler
//!    retries it instead of leaving a month behind until the next run.
//!
//! On releases with TTL a table can forget rows by itself instead
//! (`ALTER TABLE evaluations MODIFY TTL ts + INTERVAL 90 DAY`, see `deploy/clickhouse/README.md`);
//! `prune` stays the portable tool and the only one that also works on 18.16.

use std::time::Duration;

use chrono::{DateTime, Datelike, TimeZone, Utc};

use super::cluster::ClusterLayout;
use crate::settings::redact_url;
use crate::stores::clickhouse::config::ClickHouseConfig;

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
    /// `system.clusters` names a host that cannot be written into `remote('…')`.
    #[error("cluster {cluster}: replica address {address:?} is not a plain host:port")]
    ReplicaAddress {
        /// The cluster.
        cluster: String,
        /// The address as `system.clusters` gives it.
        address: String,
    },
    /// `system.clusters` has no replica of the cluster on the server `prune` connects to.
    #[error("cluster {0:?} is not in system.clusters of the server prune connects to")]
    NoReplicas(String),
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
    /// `(table, why)`: tables left untouched because a replica still lagged (or could not be
    /// reached) after the wait.
    pub lagging: Vec<(String, String)>,
    /// `(table, partition, replica)`: a dropped month a replica still held after the wait.
    pub still_held: Vec<(String, String, String)>,
}

impl PruneReport {
    /// Whether every chosen table was pruned on every replica.
    pub fn complete(&self) -> bool {
        self.lagging.is_empty() && self.still_held.is_empty()
    }
}

/// What to prune.
#[derive(Debug, Clone)]
pub struct PruneRequest {
    /// Months wholly older than `now − older_than` go.
    pub older_than: Duration,
    /// Only these tables (all of [`PARTITIONED_TABLES`] when empty).
    pub tables: Vec<String>,
    /// The clock.
    pub now: DateTime<Utc>,
    /// Only report what would go.
    pub dry_run: bool,
    /// On a cluster: how long to wait for a lagging replica, before a table's drop and again for
    /// the drop to reach every replica.
    pub replica_wait: Duration,
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

/// Whether `address` (from `system.clusters`) can be spliced into `remote('…')`.
fn plain_address(address: &str) -> bool {
    !address.is_empty()
        && address
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']'))
}

/// One replica of the cluster, asked through the connected server with `remote()`.
#[derive(Debug, Clone)]
struct Replica {
    /// `shard N replica M (host:port)`.
    label: String,
    /// `host:port` (checked by [`plain_address`]).
    address: String,
}

impl Replica {
    /// `system.<table>` on this replica.
    fn system(&self, table: &str) -> String {
        format!("remote('{}', system.{table})", self.address)
    }
}

/// The connection and what it prunes, shared by the steps.
struct Pruner<'a> {
    client: clickhouse::Client,
    url: String,
    database: &'a str,
}

impl Pruner<'_> {
    fn failed(&self, what: String) -> impl FnOnce(clickhouse::error::Error) -> PruneError + '_ {
        move |source| PruneError::Query {
            what,
            url: self.url.clone(),
            source,
        }
    }

    async fn replicas(&self, cluster: &str) -> Result<Vec<Replica>, PruneError> {
        let rows: Vec<(u32, u32, String)> = self
            .client
            .query(
                "SELECT toUInt32(shard_num), toUInt32(replica_num), \
                 concat(host_name, ':', toString(port)) FROM system.clusters \
                 WHERE cluster = ? ORDER BY shard_num, replica_num",
            )
            .bind(cluster)
            .fetch_all()
            .await
            .map_err(self.failed(format!("list the replicas of cluster {cluster}")))?;
        if rows.is_empty() {
            return Err(PruneError::NoReplicas(cluster.to_string()));
        }
        rows.into_iter()
            .map(|(shard, replica, address)| {
                if !plain_address(&address) {
                    return Err(PruneError::ReplicaAddress {
                        cluster: cluster.to_string(),
                        address,
                    });
                }
                Ok(Replica {
                    label: format!("shard {shard} replica {replica} ({address})"),
                    address,
                })
            })
            .collect()
    }

    /// The active partitions of `table` on one server (`system` = its `system.parts`).
    async fn partitions(&self, parts: &str, table: &str) -> Result<Vec<String>, PruneError> {
        // `parts` is `system.parts` or a checked `remote('host:port', system.parts)`.
        self.client
            .query(&format!(
                "SELECT DISTINCT partition FROM {parts} \
                 WHERE database = ? AND table = ? AND active ORDER BY partition"
            ))
            .bind(self.database)
            .bind(table)
            .fetch_all()
            .await
            .map_err(self.failed(format!("list the partitions of {table} in {parts}")))
    }

    /// Replicas whose queue for `table` still holds fetches (or that cannot be asked), with why.
    async fn lagging(&self, replicas: &[Replica], table: &str) -> Vec<String> {
        let mut lagging = Vec::new();
        for replica in replicas {
            let asked: Result<Vec<u64>, _> = self
                .client
                .query(&format!(
                    "SELECT toUInt64(inserts_in_queue) FROM {} WHERE database = ? AND table = ?",
                    replica.system("replicas")
                ))
                .bind(self.database)
                .bind(table)
                .fetch_all()
                .await;
            match asked.as_deref() {
                Ok([0]) => {}
                Ok([n]) => lagging.push(format!("{}: {n} part(s) not fetched yet", replica.label)),
                Ok(_) => lagging.push(format!("{}: no replicated table {table}", replica.label)),
                Err(e) => lagging.push(format!("{}: cannot be asked ({e})", replica.label)),
            }
        }
        lagging
    }

    /// `(partition, replica)` among `dropped` that a replica still holds (or cannot be asked of).
    async fn still_held(
        &self,
        replicas: &[Replica],
        table: &str,
        dropped: &[String],
    ) -> Vec<(String, String)> {
        let mut held = Vec::new();
        for replica in replicas {
            match self.partitions(&replica.system("parts"), table).await {
                Ok(parts) => held.extend(
                    parts
                        .into_iter()
                        .filter(|p| dropped.contains(p))
                        .map(|p| (p, replica.label.clone())),
                ),
                Err(e) => held.extend(dropped.iter().map(|p| {
                    (
                        p.clone(),
                        format!("{} (cannot be asked: {e})", replica.label),
                    )
                })),
            }
        }
        held
    }
}

/// Poll `check` (empty = done) every half second until it is empty or `wait` has passed; the
/// last answer.
async fn waited<T, F, Fut>(wait: Duration, mut check: F) -> Vec<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Vec<T>>,
{
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = check().await;
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The tables to prune: those named (each must be a partitioned table), else all of them.
fn chosen_tables(tables: &[String]) -> Result<Vec<(&'static str, &'static str)>, PruneError> {
    if tables.is_empty() {
        Ok(PARTITIONED_TABLES.to_vec())
    } else {
        let mut chosen = Vec::new();
        for t in tables {
            match PARTITIONED_TABLES.iter().find(|(name, _)| name == t) {
                Some(entry) => chosen.push(*entry),
                None => return Err(PruneError::UnknownTable(t.clone())),
            }
        }
        Ok(chosen)
    }
}

/// Drop the monthly partitions of the chosen tables (all of [`PARTITIONED_TABLES`] when none
/// are named) that are wholly older than `now − older_than`; with `dry_run`, only report what
/// would go.
///
/// On a cluster (`cluster`, as laid out by `migrate --cluster`) the months are the union of every
/// replica's local table, and each is dropped with `ALTER TABLE … ON CLUSTER … DROP PARTITION`
/// (one replica per shard runs it; replication drops it on the others) — only once no replica
/// lags, and checked on every replica afterwards (the module doc).
pub async fn prune(
    settings: &ClickHouseConfig,
    request: &PruneRequest,
    cluster: Option<&ClusterLayout>,
) -> Result<PruneReport, PruneError> {
    let chosen = chosen_tables(&request.tables)?;
    let older_than = request.older_than;
    let cut_off = chrono::Duration::from_std(older_than)
        .ok()
        .and_then(|d| request.now.checked_sub_signed(d))
        .filter(|c| c.year() >= 1970)
        .ok_or(PruneError::CutOff(older_than))?;
    let pruner = Pruner {
        client: super::client(settings),
        url: redact_url(super::url(settings)),
        database: &settings.database,
    };
    let replicas = match cluster {
        Some(c) => pruner.replicas(&c.name).await?,
        None => Vec::new(),
    };
    let mut report = PruneReport {
        cut_off: cut_off.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        ..PruneReport::default()
    };
    for (table, _) in chosen {
        // The names come from PARTITIONED_TABLES: safe to splice.
        let local = match cluster {
            Some(_) => super::cluster::local_name(table),
            None => table.to_string(),
        };
        let partitions: Vec<String> = match cluster {
            None => pruner.partitions("system.parts", table).await?,
            Some(_) => {
                let lagging =
                    waited(request.replica_wait, || pruner.lagging(&replicas, &local)).await;
                if !lagging.is_empty() {
                    report.lagging.push((table.to_string(), lagging.join("; ")));
                    continue;
                }
                let mut union = std::collections::BTreeSet::new();
                for replica in &replicas {
                    union.extend(pruner.partitions(&replica.system("parts"), &local).await?);
                }
                union.into_iter().collect()
            }
        };
        let mut dropped = Vec::new();
        for partition in partitions {
            let entry = (table.to_string(), partition.clone());
            match droppable(&partition, cut_off) {
                None => report.unrecognised.push(entry),
                Some(false) => report.kept.push(entry),
                Some(true) => {
                    if !request.dry_run {
                        // The id was checked to be six digits: safe to splice.
                        let id = partition.trim_matches('\'');
                        let statement = match cluster {
                            None => format!("ALTER TABLE {table} DROP PARTITION {id}"),
                            Some(c) => format!(
                                "ALTER TABLE {}.{local} ON CLUSTER {} DROP PARTITION {id}",
                                c.database, c.name
                            ),
                        };
                        pruner
                            .client
                            .query(&statement)
                            .execute()
                            .await
                            .map_err(pruner.failed(format!("drop partition {id} of {table}")))?;
                        tracing::info!(table, partition = id, "partition dropped");
                        dropped.push(partition);
                    }
                    report.dropped.push(entry);
                }
            }
        }
        if cluster.is_some() && !dropped.is_empty() {
            let held = waited(request.replica_wait, || {
                pruner.still_held(&replicas, &local, &dropped)
            })
            .await;
            report.still_held.extend(
                held.into_iter()
                    .map(|(partition, replica)| (table.to_string(), partition, replica)),
            );
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

    #[test]
    fn only_plain_replica_addresses_are_spliced_into_remote() {
        for ok in [
            "127.0.0.1:9000",
            "ch-1.example.net:9440",
            "[::1]:9000",
            "node_2:9000",
        ] {
            assert!(plain_address(ok), "{ok}");
        }
        for bad in ["", "h:9000', system.one) --", "h 9000", "h:9000\n"] {
            assert!(!plain_address(bad), "{bad:?}");
        }
    }
}
