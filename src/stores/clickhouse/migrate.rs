//! `sqlgrade migrate`: apply the versioned ClickHouse DDL in `deploy/clickhouse/` once each.
//!
//! The files are compiled into the binary (a container needs no checkout), applied in version
//! order, and recorded in `schema_migrations` (version, name, checksum, applied_at). Running it
//! again applies only what is new, so it is safe to run at every deploy and from several replicas
//! (every statement is `IF NOT EXISTS`, an `ADD COLUMN` is skipped when its column exists, and the
//! steps of a table rebuild carry a `-- migrate: skip if table NAME exists` guard, so a run
//! interrupted half way can simply be repeated). The DDL sticks to what both Debian's ClickHouse
//! 18.16 and current releases accept. With a cluster layout the same files are applied to every
//! node (`super::cluster` rewrites each statement; the history is one replicated table) and the
//! `Distributed` tables are kept in step with the local ones ([`sync_distributed`]).

use std::time::Duration;

use sha2::{Digest, Sha256};

use super::cluster::{self, ClusterLayout};
use super::ddl::valid_identifier;
pub use super::ddl::{Statement, skip_if, split_statements, statements};
use crate::settings::redact_url;
use crate::stores::clickhouse::config::ClickHouseConfig;

/// One versioned DDL file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    /// Version (the file's numeric prefix).
    pub version: u32,
    /// File name.
    pub name: &'static str,
    /// File contents (one or more `;`-terminated statements).
    pub sql: &'static str,
}

macro_rules! migration {
    ($version:expr, $name:literal) => {
        Migration {
            version: $version,
            name: $name,
            sql: include_str!(concat!("../../../deploy/clickhouse/", $name)),
        }
    };
}

/// Every migration, in order. A unit test checks this matches the files on disk.
pub const MIGRATIONS: &[Migration] = &[
    migration!(1, "001_evaluations.sql"),
    migration!(2, "002_dead_letters.sql"),
    migration!(3, "003_alerts.sql"),
    migration!(4, "004_judge_cache.sql"),
    migration!(5, "005_evaluations_hourly.sql"),
    migration!(6, "006_dead_letters_hourly.sql"),
    migration!(7, "007_judge_cache_point_lookups.sql"),
    migration!(8, "008_second_pass.sql"),
    migration!(9, "009_scored_means.sql"),
    migration!(10, "010_run_key.sql"),
    migration!(11, "011_read_key.sql"),
    migration!(12, "012_finding_codes.sql"),
    migration!(13, "013_review.sql"),
    migration!(14, "014_event_inputs_result.sql"),
    migration!(15, "015_judge_identity.sql"),
    migration!(16, "016_p_correct.sql"),
    migration!(17, "017_stef_monitor.sql"),
    migration!(18, "018_stef_breakdown.sql"),
];

/// Name of the bookkeeping table.
pub const MIGRATIONS_TABLE: &str = "schema_migrations";

/// The bookkeeping table's DDL (run before the migrations; portable like them).
pub const CREATE_MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_migrations \
     (version UInt32, name String, checksum String, applied_at DateTime) \
     ENGINE = MergeTree() ORDER BY version";

/// How `migrate` reads what is already applied.
pub const READ_MIGRATIONS: &str =
    "SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version";

/// Why a migration run failed.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// A statement failed on the server.
    #[error("migration {name}: statement {index} failed: {source}")]
    Statement {
        /// Migration file.
        name: String,
        /// 1-based statement number in the file.
        index: usize,
        /// Server or network error.
        #[source]
        source: clickhouse::error::Error,
    },
    /// Bookkeeping (database, migrations table) failed.
    #[error("cannot {what} on {url}: {source}")]
    Bookkeeping {
        /// What was attempted.
        what: &'static str,
        /// Server URL (credentials redacted).
        url: String,
        /// Server or network error.
        #[source]
        source: clickhouse::error::Error,
    },
    /// The cluster name is not a plain identifier.
    #[error("invalid cluster name {0:?} (letters, digits and '_' only)")]
    ClusterName(String),
    /// The database name is not a plain identifier.
    #[error("invalid database name {0:?} (letters, digits and '_' only)")]
    DatabaseName(String),
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigrationReport {
    /// Files applied by this run.
    pub applied: Vec<String>,
    /// Files that were already recorded.
    pub already_applied: Vec<String>,
    /// Files recorded with a different checksum than the compiled-in file (edited after applying).
    pub changed: Vec<String>,
}

#[derive(Debug, clickhouse::Row, serde::Serialize, serde::Deserialize)]
struct AppliedRecord {
    version: u32,
    name: String,
    checksum: String,
    applied_at: u32,
}

/// SHA-256 (hex) of a migration's text.
pub fn checksum(sql: &str) -> String {
    hex::encode(Sha256::digest(sql.as_bytes()))
}

/// The bookkeeping table on a cluster: one replicated table that every node of every shard
/// shares (the shard part of the path is `all`), so `migrate` sees the same history wherever it
/// connects.
pub fn cluster_migrations_table(layout: &ClusterLayout) -> String {
    let path = layout
        .replica_path
        .replace("{database}", &layout.database)
        .replace("{table}", MIGRATIONS_TABLE)
        .replace("{shard}", "all");
    format!(
        "CREATE TABLE IF NOT EXISTS {database}.{MIGRATIONS_TABLE} ON CLUSTER {cluster} \
         (version UInt32, name String, checksum String, applied_at DateTime) \
         ENGINE = ReplicatedMergeTree('{path}', '{{shard}}-{replica}') ORDER BY version",
        cluster = layout.name,
        database = layout.database,
        replica = layout.replica_name,
    )
}

/// Apply every migration not yet recorded in `settings.database`, creating the database first.
/// With `cluster`, on every node of that cluster (see [`super::cluster`]): local replicated
/// tables, `Distributed` tables in front of them, the history in a replicated table.
pub async fn migrate(
    settings: &ClickHouseConfig,
    cluster: Option<&ClusterLayout>,
) -> Result<MigrationReport, MigrateError> {
    migrate_to(settings, cluster, u32::MAX).await
}

/// Create the database, the first contact: a server (or a cluster's DDL queue) that is still
/// starting may drop the connection, so this idempotent statement is retried a few times on
/// transient failures.
async fn create_database(
    settings: &ClickHouseConfig,
    on_cluster: &str,
    url: &str,
) -> Result<(), MigrateError> {
    let server = super::server_client(settings);
    let create_database = format!(
        "CREATE DATABASE IF NOT EXISTS {}{on_cluster}",
        settings.database
    );
    let mut backoff = super::Backoff::new(Duration::from_millis(200), Duration::from_secs(2));
    let mut attempts = 0;
    loop {
        match server.query(&create_database).execute().await {
            Ok(()) => return Ok(()),
            Err(e) if attempts < 5 && super::classify(&e) == super::FailureKind::Transient => {
                attempts += 1;
                tracing::warn!(error = %e, attempts, "cannot create the database yet; retrying");
                tokio::time::sleep(backoff.next_delay()).await;
            }
            Err(source) => {
                return Err(MigrateError::Bookkeeping {
                    what: "create the database",
                    url: url.to_string(),
                    source,
                });
            }
        }
    }
}

/// Run one migration's statements, each unless it already ran (a statement's own check) or,
/// on a cluster, has nothing to do there.
async fn apply_statements(
    client: &clickhouse::Client,
    m: &Migration,
    cluster: Option<&ClusterLayout>,
    names: &cluster::Names<'_>,
    table_name: &impl Fn(&str) -> String,
    url: &str,
) -> Result<(), MigrateError> {
    for (i, statement) in statements(m.sql).iter().enumerate() {
        if let Some(check) = statement.skip_query(table_name) {
            let present: u64 = client.query(&check).fetch_one().await.map_err(|source| {
                MigrateError::Bookkeeping {
                    what: "check whether a statement already ran",
                    url: url.to_string(),
                    source,
                }
            })?;
            if present > 0 {
                tracing::info!(
                    migration = m.name,
                    statement = i + 1,
                    "already applied; skipped"
                );
                continue;
            }
        }
        let failed = |source| MigrateError::Statement {
            name: m.name.to_string(),
            index: i + 1,
            source,
        };
        match cluster {
            None => client
                .query(&statement.sql)
                .execute()
                .await
                .map_err(failed)?,
            Some(layout) => {
                let Some(rewritten) = cluster::rewrite(&statement.sql, names, layout) else {
                    tracing::info!(
                        migration = m.name,
                        statement = i + 1,
                        "nothing to do on a cluster; skipped"
                    );
                    continue;
                };
                if rewritten.reads_distributed {
                    sync_distributed(client, layout).await.map_err(|source| {
                        MigrateError::Bookkeeping {
                            what: "create the Distributed tables",
                            url: url.to_string(),
                            source,
                        }
                    })?;
                }
                client
                    .query(&rewritten.sql)
                    .with_setting("insert_distributed_sync", "1")
                    .execute()
                    .await
                    .map_err(failed)?;
            }
        }
    }
    Ok(())
}

/// Record an applied migration in the migrations table.
async fn record_migration(
    client: &clickhouse::Client,
    m: &Migration,
    checksum: String,
    url: &str,
) -> Result<(), MigrateError> {
    let failed = |source| MigrateError::Bookkeeping {
        what: "record a migration",
        url: url.to_string(),
        source,
    };
    let record = AppliedRecord {
        version: m.version,
        name: m.name.to_string(),
        checksum,
        applied_at: chrono::Utc::now().timestamp().clamp(0, i64::from(u32::MAX)) as u32,
    };
    let mut insert = client
        .insert::<AppliedRecord>(MIGRATIONS_TABLE)
        .await
        .map_err(failed)?;
    insert.write(&record).await.map_err(failed)?;
    insert.end().await.map_err(failed)
}

/// [`migrate`], applying only the migrations up to version `last` (to stage an upgrade, or to
/// set up the schema an older release had).
pub async fn migrate_to(
    settings: &ClickHouseConfig,
    cluster: Option<&ClusterLayout>,
    last: u32,
) -> Result<MigrationReport, MigrateError> {
    let url = redact_url(super::url(settings));
    // The error of a bookkeeping step (`what`) against this server.
    let bookkeeping = |what: &'static str| {
        let url = url.clone();
        move |source| MigrateError::Bookkeeping { what, url, source }
    };
    if !valid_identifier(&settings.database) {
        return Err(MigrateError::DatabaseName(settings.database.clone()));
    }
    if let Some(layout) = cluster
        && !valid_identifier(&layout.name)
    {
        return Err(MigrateError::ClusterName(layout.name.clone()));
    }
    let on_cluster = cluster.map_or(String::new(), |c| format!(" ON CLUSTER {}", c.name));
    create_database(settings, &on_cluster, &url).await?;
    let client = super::client(settings);
    let create_history = cluster.map_or(
        CREATE_MIGRATIONS_TABLE.to_string(),
        cluster_migrations_table,
    );
    client
        .query(&create_history)
        .execute()
        .await
        .map_err(bookkeeping("create the migrations table"))?;
    let recorded: Vec<AppliedRecord> = client
        .query(READ_MIGRATIONS)
        .fetch_all()
        .await
        .map_err(bookkeeping("read the migrations table"))?;

    let files: Vec<&str> = MIGRATIONS.iter().map(|m| m.sql).collect();
    let data_tables = cluster::data_tables(&files);
    let objects = cluster::objects(&files);
    let names = cluster::Names {
        tables: &data_tables,
        objects: &objects,
    };
    let table_name = |name: &str| match cluster {
        Some(_) if data_tables.iter().any(|t| t == name) => cluster::local_name(name),
        _ => name.to_string(),
    };
    let mut report = MigrationReport::default();
    for m in MIGRATIONS.iter().filter(|m| m.version <= last) {
        let sum = checksum(m.sql);
        if let Some(r) = recorded.iter().find(|r| r.version == m.version) {
            if r.checksum != sum {
                tracing::warn!(
                    migration = m.name,
                    "migration file changed after it was applied; not re-applying it (add a new migration instead)"
                );
                report.changed.push(m.name.to_string());
            }
            report.already_applied.push(m.name.to_string());
            continue;
        }
        apply_statements(&client, m, cluster, &names, &table_name, &url).await?;
        record_migration(&client, m, sum, &url).await?;
        tracing::info!(migration = m.name, database = %settings.database, "applied");
        report.applied.push(m.name.to_string());
    }
    if let Some(layout) = cluster {
        sync_distributed(&client, layout)
            .await
            .map_err(bookkeeping("create the Distributed tables"))?;
    }
    Ok(report)
}

#[derive(Debug, clickhouse::Row, serde::Deserialize)]
struct TableRecord {
    name: String,
    engine: String,
    engine_full: String,
}

#[derive(Debug, clickhouse::Row, serde::Deserialize)]
struct ColumnRecord {
    table: String,
    name: String,
    #[serde(rename = "type")]
    column_type: String,
}

/// Make the `Distributed` tables match the local ones: one in front of every local replicated
/// table (same columns, pointing at it, sharded by [`cluster::sharding_key`]); one whose local
/// table is gone, or whose columns differ (a migration added some), is dropped and recreated.
/// `ALTER … ON CLUSTER` cannot change a `Distributed` table on 18.16 when the cluster's shards
/// are replicated, so recreating is the portable way; a `Distributed` table holds no data of its
/// own (the sink writes through it synchronously, see `[clickhouse.cluster] insert_sync`).
pub async fn sync_distributed(
    client: &clickhouse::Client,
    layout: &ClusterLayout,
) -> clickhouse::error::Result<()> {
    let tables: Vec<TableRecord> = client
        .query("SELECT name, engine, engine_full FROM system.tables WHERE database = currentDatabase()")
        .fetch_all()
        .await?;
    let columns: Vec<ColumnRecord> = client
        .query("SELECT table, name, type FROM system.columns WHERE database = currentDatabase()")
        .fetch_all()
        .await?;
    let columns_of = |table: &str| {
        let mut cols: Vec<(String, String)> = columns
            .iter()
            .filter(|c| c.table == table)
            .map(|c| (c.name.clone(), c.column_type.clone()))
            .collect();
        cols.sort();
        cols
    };
    let on_cluster = format!("ON CLUSTER {}", layout.name);
    for local in tables
        .iter()
        .filter(|t| t.engine.starts_with("Replicated") && t.name.ends_with(cluster::LOCAL_SUFFIX))
    {
        if local.name == MIGRATIONS_TABLE {
            continue;
        }
        let front = local
            .name
            .trim_end_matches(cluster::LOCAL_SUFFIX)
            .to_string();
        let points_here = format!(
            "Distributed({}, {}, {}, ",
            layout.name, layout.database, local.name
        );
        let existing = tables.iter().find(|t| t.name == front);
        let up_to_date = existing.is_some_and(|t| {
            t.engine == "Distributed"
                && t.engine_full.contains(&points_here)
                && columns_of(&front) == columns_of(&local.name)
        });
        if up_to_date {
            continue;
        }
        if existing.is_some() {
            client
                .query(&format!(
                    "DROP TABLE IF EXISTS {}.{front} {on_cluster}",
                    layout.database
                ))
                .execute()
                .await?;
        }
        let names: Vec<String> = columns_of(&local.name)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        client
            .query(&cluster::distributed_ddl(&front, &names, layout))
            .execute()
            .await?;
        tracing::info!(table = %front, local = %local.name, "Distributed table (re)created");
    }
    for stale in tables.iter().filter(|t| t.engine == "Distributed") {
        let local = cluster::local_name(&stale.name);
        if !tables.iter().any(|t| t.name == local) {
            client
                .query(&format!(
                    "DROP TABLE IF EXISTS {}.{} {on_cluster}",
                    layout.database, stale.name
                ))
                .execute()
                .await?;
            tracing::info!(table = %stale.name, "Distributed table without its local table dropped");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_column_statements_are_guarded() {
        let check =
            skip_if("ALTER TABLE evaluations\n    ADD COLUMN selection String DEFAULT ''").unwrap();
        assert!(
            check.contains("table = 'evaluations' AND name = 'selection'"),
            "{check}"
        );
        assert_eq!(skip_if("CREATE TABLE IF NOT EXISTS t (a UInt8)"), None);
        assert_eq!(
            skip_if("ALTER TABLE t ADD COLUMN a UInt8, ADD COLUMN b UInt8"),
            None,
            "one column per guarded statement"
        );
        assert_eq!(skip_if("ALTER TABLE t ADD COLUMN a'b UInt8"), None);
    }

    #[test]
    fn compiled_in_list_matches_the_files() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/clickhouse");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sql") && n.as_bytes().first().is_some_and(u8::is_ascii_digit))
            .collect();
        on_disk.sort();
        let listed: Vec<String> = MIGRATIONS.iter().map(|m| m.name.to_string()).collect();
        assert_eq!(on_disk, listed);
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version as usize, i + 1);
            assert!(m.name.starts_with(&format!("{:03}_", m.version)));
        }
    }

    #[test]
    fn statements_split_on_semicolons_outside_quotes_and_comments() {
        let sql = "-- a comment; with a semicolon\nCREATE TABLE a (x String DEFAULT ';') ENGINE = Memory;\n\n\
                   SELECT splitByChar(':', 'a;b')[1] -- trailing; comment\n;\n  ;";
        let got = split_statements(sql);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].starts_with("CREATE TABLE a (x String DEFAULT ';')"));
        assert!(got[1].starts_with("SELECT splitByChar(':', 'a;b')[1]"));
        assert!(!got[1].contains("trailing"));
    }

    #[test]
    fn a_guard_line_guards_only_the_statement_after_it() {
        let sql = "-- a plain comment\nCREATE TABLE a (x UInt8) ENGINE = Memory;\n\
                   -- migrate: skip if table a_old exists\nRENAME TABLE a TO a_old;\n\
                   DROP TABLE IF EXISTS b;\n\
                   -- migrate: skip if table bad name exists\nSELECT 1";
        let got = statements(sql);
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[0].skip_when_table_exists, None);
        assert_eq!(got[1].skip_when_table_exists.as_deref(), Some("a_old"));
        assert_eq!(got[2].skip_when_table_exists, None);
        assert_eq!(got[3].skip_when_table_exists, None, "not an identifier");
        let check = got[1].skip_query(|t| format!("{t}_local")).unwrap();
        assert!(check.ends_with("name = 'a_old_local'"), "{check}");
        let add = &statements("ALTER TABLE evaluations ADD COLUMN c UInt8")[0];
        let check = add.skip_query(|t| format!("{t}_local")).unwrap();
        assert!(
            check.contains("table = 'evaluations_local' AND name = 'c'"),
            "{check}"
        );
    }

    #[test]
    fn every_file_has_statements_and_no_unportable_syntax() {
        for m in MIGRATIONS {
            let stmts = split_statements(m.sql);
            assert!(!stmts.is_empty(), "{}", m.name);
            let upper = stmts.join(" ").to_uppercase();
            for banned in ["LOWCARDINALITY", "CODEC(", "DATETIME64", " TTL ", " BOOL"] {
                assert!(!upper.contains(banned), "{} uses {banned}", m.name);
            }
        }
    }
}
