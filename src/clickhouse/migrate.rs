//! `sqlgrade migrate`: apply the versioned ClickHouse DDL in `deploy/clickhouse/` once each.
//!
//! The files are compiled into the binary (a container needs no checkout), applied in version
//! order, and recorded in `schema_migrations` (version, name, checksum, applied_at). Running it
//! again applies only what is new, so it is safe to run at every deploy and from several replicas
//! (every statement is `IF NOT EXISTS`). The DDL sticks to what both Debian's ClickHouse 18.16 and
//! current releases accept.

use sha2::{Digest, Sha256};

use crate::config::{SinkConfig, redact_url};

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
            sql: include_str!(concat!("../../deploy/clickhouse/", $name)),
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

/// The query that says whether `statement` is already applied, for DDL that has no
/// `IF NOT EXISTS` on every release: an `ALTER TABLE t ADD COLUMN c …` (one column per
/// statement; 18.16 has no `ADD COLUMN IF NOT EXISTS`) is skipped when `t` already has `c`. The
/// query returns a count; non-zero means skip.
pub fn skip_if(statement: &str) -> Option<String> {
    let words: Vec<&str> = statement.split_whitespace().collect();
    let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    let is = |i: usize, w: &str| upper.get(i).is_some_and(|u| u == w);
    if !(is(0, "ALTER") && is(1, "TABLE") && is(3, "ADD") && is(4, "COLUMN")) {
        return None;
    }
    let table = words.get(2)?.trim_matches('`');
    let column = words.get(5)?.trim_matches('`');
    let plain = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !(plain(table) && plain(column)) || statement.matches("ADD COLUMN").count() > 1 {
        return None;
    }
    Some(format!(
        "SELECT count() FROM system.columns WHERE database = currentDatabase() \
         AND table = '{table}' AND name = '{column}'"
    ))
}

/// Split a DDL file into statements: `;` ends a statement unless inside quotes; `--` line
/// comments are removed; empty statements are dropped.
pub fn split_statements(sql: &str) -> Vec<String> {
    let mut statements = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                current.push(c);
                if c == '\\' {
                    if let Some(next) = chars.next() {
                        current.push(next);
                    }
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' | '`' => {
                    quote = Some(c);
                    current.push(c);
                }
                '-' if chars.peek() == Some(&'-') => {
                    for skipped in chars.by_ref() {
                        if skipped == '\n' {
                            current.push('\n');
                            break;
                        }
                    }
                }
                ';' => {
                    let stmt = current.trim();
                    if !stmt.is_empty() {
                        statements.push(stmt.to_string());
                    }
                    current.clear();
                }
                _ => current.push(c),
            },
        }
    }
    let stmt = current.trim();
    if !stmt.is_empty() {
        statements.push(stmt.to_string());
    }
    statements
}

fn valid_identifier(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Apply every migration not yet recorded in `settings.database`, creating the database first.
pub async fn migrate(settings: &SinkConfig) -> Result<MigrationReport, MigrateError> {
    let url = redact_url(super::url(settings));
    // The error of a bookkeeping step (`what`) against this server.
    let bookkeeping = |what: &'static str| {
        let url = url.clone();
        move |source| MigrateError::Bookkeeping { what, url, source }
    };
    if !valid_identifier(&settings.database) {
        return Err(MigrateError::DatabaseName(settings.database.clone()));
    }
    let server = super::server_client(settings);
    server
        .query(&format!(
            "CREATE DATABASE IF NOT EXISTS {}",
            settings.database
        ))
        .execute()
        .await
        .map_err(bookkeeping("create the database"))?;
    let client = super::client(settings);
    client
        .query(CREATE_MIGRATIONS_TABLE)
        .execute()
        .await
        .map_err(bookkeeping("create the migrations table"))?;
    let recorded: Vec<AppliedRecord> = client
        .query(READ_MIGRATIONS)
        .fetch_all()
        .await
        .map_err(bookkeeping("read the migrations table"))?;

    let mut report = MigrationReport::default();
    for m in MIGRATIONS {
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
        for (i, statement) in split_statements(m.sql).iter().enumerate() {
            if let Some(check) = skip_if(statement) {
                let present: u64 = client
                    .query(&check)
                    .fetch_one()
                    .await
                    .map_err(bookkeeping("check whether a column exists"))?;
                if present > 0 {
                    tracing::info!(
                        migration = m.name,
                        statement = i + 1,
                        "already applied; skipped"
                    );
                    continue;
                }
            }
            client
                .query(statement)
                .execute()
                .await
                .map_err(|source| MigrateError::Statement {
                    name: m.name.to_string(),
                    index: i + 1,
                    source,
                })?;
        }
        let record = AppliedRecord {
            version: m.version,
            name: m.name.to_string(),
            checksum: sum,
            applied_at: chrono::Utc::now().timestamp().clamp(0, i64::from(u32::MAX)) as u32,
        };
        let mut insert = client
            .insert::<AppliedRecord>(MIGRATIONS_TABLE)
            .await
            .map_err(bookkeeping("record a migration"))?;
        insert
            .write(&record)
            .await
            .map_err(bookkeeping("record a migration"))?;
        insert
            .end()
            .await
            .map_err(bookkeeping("record a migration"))?;
        tracing::info!(migration = m.name, database = %settings.database, "applied");
        report.applied.push(m.name.to_string());
    }
    Ok(report)
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
