//! The same migrations on a ClickHouse cluster: `sqlgrade migrate --cluster NAME`.
//!
//! A cluster keeps every written table twice over: a local, replicated table on every node
//! (`evaluations_local`, engine `Replicated*MergeTree` with a ZooKeeper path per shard) and a
//! `Distributed` table under the single-node name (`evaluations`) in front of the locals. So the
//! daemon, Grafana, `report` and the judge cache read and write the names they use on one server,
//! and nothing else changes. This module is the pure part: it rewrites each statement of a
//! migration file for the cluster ([`rewrite`]) and says what the `Distributed` table in front of
//! a local table is ([`distributed_ddl`]); `migrate` runs them.
//!
//! The rewrite of one statement:
//!
//! - DDL (`CREATE TABLE`, `CREATE MATERIALIZED VIEW`, `ALTER`, `RENAME`, `DROP`) gets
//!   `ON CLUSTER NAME` and names the local tables (`X` → `db.X_local`, for every table a
//!   migration creates with a MergeTree engine or renames into); every other object is written
//!   `db.name` too, since distributed DDL runs in each node's default database; materialized
//!   views stay per node, reading and writing local tables, so every shard keeps its own rollups;
//! - `Engine(args)` of the MergeTree family becomes `ReplicatedEngine('path', 'replica', args)`
//!   with the configured path and replica templates (`{shard}` and `{replica}` are the servers'
//!   macros; `{database}` and `{table}` are filled here, since 18.16 has no such macros);
//! - plain views and `INSERT … SELECT` keep the single-node names, so they read and write through
//!   the `Distributed` tables: an `INSERT … SELECT` migration copies data on every shard at once
//!   (run with `insert_distributed_sync = 1`, so it returns when every shard has it);
//! - `MODIFY ORDER BY` is dropped from an `ALTER`: 18.16's distributed DDL refuses it on
//!   replicated tables, and the only such statement (010, appending `run_key`) is superseded by
//!   011, which rebuilds `evaluations` with its own key. The column part still applies.
//!
//! Every shard is sharded by a hash of the column that deduplicates its rows
//! ([`sharding_key`]): `cityHash64(event_id)` for the evaluation tables, so every copy of an event
//! lands on one shard and `FINAL` (which deduplicates within a shard) still collapses it.

/// How `migrate` lays a cluster out (`[clickhouse.cluster]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterLayout {
    /// The cluster's name in the servers' `remote_servers`.
    pub name: String,
    /// The database the tables live in.
    pub database: String,
    /// ZooKeeper path of a replicated table; `{database}` and `{table}` are filled in,
    /// `{shard}` is left to the servers' macros.
    pub replica_path: String,
    /// Replica name (the servers' `{replica}` macro by default).
    pub replica_name: String,
}

/// The suffix of the local tables behind the `Distributed` ones.
pub const LOCAL_SUFFIX: &str = "_local";

/// The local table behind `table`.
pub fn local_name(table: &str) -> String {
    format!("{table}{LOCAL_SUFFIX}")
}

/// What a rewritten statement does, which decides how `migrate` runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatementKind {
    /// Distributed DDL (`ON CLUSTER`): runs on every node through the DDL queue.
    Ddl,
    /// A write through the `Distributed` tables (`INSERT … SELECT`): run once, synchronously.
    DistributedWrite,
}

/// One statement as the cluster runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterStatement {
    /// The SQL.
    pub sql: String,
    /// How it runs.
    pub kind: StatementKind,
    /// It reads through the `Distributed` tables (a copy, a plain view), so they must be in
    /// step with the local tables first.
    pub reads_distributed: bool,
}

const MERGE_TREE_ENGINES: [&str; 3] = ["ReplacingMergeTree", "AggregatingMergeTree", "MergeTree"];

/// The tables the migrations create with a MergeTree engine or rename into: on a cluster each
/// is a local replicated table behind a `Distributed` one.
pub fn data_tables(files: &[&str]) -> Vec<String> {
    let mut tables = Vec::new();
    for sql in files {
        for statement in super::ddl::split_statements(sql) {
            let words: Vec<&str> = statement.split_whitespace().collect();
            let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
            let starts = |prefix: &[&str]| {
                prefix.len() <= upper.len() && prefix.iter().zip(&upper).all(|(p, u)| p == u)
            };
            if starts(&["CREATE", "TABLE", "IF", "NOT", "EXISTS"])
                && statement.contains("MergeTree")
                && let Some(name) = words.get(5)
            {
                tables.push(name.trim_matches('(').to_string());
            }
            if starts(&["RENAME", "TABLE"]) {
                // RENAME TABLE a TO b, c TO d
                for pair in words[2..].join(" ").split(',') {
                    if let Some((_, to)) = pair.split_once(" TO ") {
                        tables.push(to.trim().to_string());
                    }
                }
            }
        }
    }
    tables.sort();
    tables.dedup();
    tables
}

/// Every object the migrations name: the data tables, the views and materialized views. On a
/// cluster each is written with its database (`db.name`): distributed DDL runs on every node in
/// that node's default database otherwise.
pub fn objects(files: &[&str]) -> Vec<String> {
    let mut names = data_tables(files);
    for sql in files {
        for statement in super::ddl::split_statements(sql) {
            let words: Vec<&str> = statement.split_whitespace().collect();
            let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
            let at = match upper.get(1).map(String::as_str) {
                Some("MATERIALIZED") => 6,
                Some("VIEW") => 5,
                _ => continue,
            };
            if upper[0] == "CREATE"
                && let Some(name) = words.get(at)
            {
                names.push((*name).to_string());
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

fn is_identifier_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Qualify whole-word occurrences of the migrations' objects with the database, outside quotes;
/// with `local`, data tables also become their local tables.
fn qualify(sql: &str, names: &Names<'_>, database: &str, local: bool) -> String {
    let mut out = String::with_capacity(sql.len() + 32);
    let mut chars = sql.char_indices().peekable();
    let mut quote: Option<char> = None;
    while let Some((i, c)) = chars.next() {
        if let Some(q) = quote {
            out.push(c);
            if c == '\\' {
                if let Some((_, next)) = chars.next() {
                    out.push(next);
                }
            } else if c == q {
                quote = None;
            }
            continue;
        }
        if c == '\'' {
            quote = Some(c);
            out.push(c);
            continue;
        }
        if is_identifier_char(c) {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if !is_identifier_char(d) {
                    break;
                }
                end = j + d.len_utf8();
                chars.next();
            }
            let word = &sql[i..end];
            let qualified = out.ends_with('.');
            if !qualified && local && names.tables.iter().any(|t| t == word) {
                out.push_str(&format!("{database}.{}", local_name(word)));
            } else if !qualified && names.objects.iter().any(|t| t == word) {
                out.push_str(&format!("{database}.{word}"));
            } else {
                out.push_str(word);
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The position right after the object name that follows `prefix` words (case-insensitive),
/// e.g. after `evaluations` in `CREATE TABLE IF NOT EXISTS evaluations (…`.
fn after_name(sql: &str, prefix_words: usize) -> Option<usize> {
    let mut idx = 0;
    let bytes = sql.as_bytes();
    for _ in 0..=prefix_words {
        while idx < bytes.len() && bytes[idx].is_ascii_whitespace() {
            idx += 1;
        }
        while idx < bytes.len() && (is_identifier_char(bytes[idx] as char) || bytes[idx] == b'.') {
            idx += 1;
        }
    }
    (idx > 0).then_some(idx)
}

fn insert_at(sql: &str, at: usize, text: &str) -> String {
    format!("{} {text}{}", &sql[..at], &sql[at..])
}

/// `Engine(args)` → `ReplicatedEngine('path', 'replica', args)` for the MergeTree family.
fn replicate_engine(sql: &str, table: &str, layout: &ClusterLayout) -> String {
    let Some(engine_at) = sql.find("ENGINE") else {
        return sql.to_string();
    };
    let rest = &sql[engine_at..];
    for engine in MERGE_TREE_ENGINES {
        let Some(offset) = rest.find(engine) else {
            continue;
        };
        let name_at = engine_at + offset;
        let open = name_at + engine.len();
        if sql.as_bytes().get(open) != Some(&b'(') {
            continue;
        }
        let Some(close) = sql[open..].find(')').map(|c| open + c) else {
            continue;
        };
        let args = sql[open + 1..close].trim();
        let path = layout
            .replica_path
            .replace("{database}", &layout.database)
            .replace("{table}", table);
        let mut replicated = format!(
            "Replicated{engine}('{}', '{}'",
            path.replace('\'', "\\'"),
            layout.replica_name.replace('\'', "\\'")
        );
        if !args.is_empty() {
            replicated.push_str(", ");
            replicated.push_str(args);
        }
        replicated.push(')');
        return format!("{}{replicated}{}", &sql[..name_at], &sql[close + 1..]);
    }
    sql.to_string()
}

/// Drop `, MODIFY ORDER BY (…)` (or a lone `MODIFY ORDER BY`) from an ALTER; `None` when nothing
/// is left to run.
fn without_order_by(sql: &str) -> Option<String> {
    let upper = sql.to_ascii_uppercase();
    let Some(at) = upper.find("MODIFY ORDER BY") else {
        return Some(sql.to_string());
    };
    let open = sql[at..].find('(').map(|o| at + o)?;
    let mut depth = 0usize;
    let mut close = None;
    for (i, c) in sql[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close?;
    let before = sql[..at].trim_end();
    let before = before.strip_suffix(',').unwrap_or(before).trim_end();
    let after = sql[close + 1..].trim();
    let after = after.strip_prefix(',').unwrap_or(after).trim();
    let mut kept = before.to_string();
    if !after.is_empty() {
        kept.push_str(", ");
        kept.push_str(after);
    }
    let words = kept.split_whitespace().count();
    // `ALTER TABLE name` alone does nothing.
    (words > 3).then_some(kept)
}

/// The names a rewrite knows: [`data_tables`] and [`objects`] of the migrations.
#[derive(Debug, Clone, Copy)]
pub struct Names<'a> {
    /// Tables that are local + `Distributed` on a cluster.
    pub tables: &'a [String],
    /// Every object (tables included), qualified with the database.
    pub objects: &'a [String],
}

/// The statement as the cluster runs it; `None` when it has nothing to do there.
pub fn rewrite(
    statement: &str,
    names: &Names<'_>,
    layout: &ClusterLayout,
) -> Option<ClusterStatement> {
    let db = layout.database.as_str();
    let local = |sql: &str| qualify(sql, names, db, true);
    let words: Vec<String> = statement
        .split_whitespace()
        .take(6)
        .map(str::to_ascii_uppercase)
        .collect();
    let w = |i: usize| words.get(i).map_or("", String::as_str);
    let on_cluster = format!("ON CLUSTER {}", layout.name);
    let ddl = |sql: String| {
        Some(ClusterStatement {
            sql,
            kind: StatementKind::Ddl,
            reads_distributed: false,
        })
    };
    match (w(0), w(1)) {
        ("INSERT", _) => Some(ClusterStatement {
            sql: statement.to_string(),
            kind: StatementKind::DistributedWrite,
            reads_distributed: true,
        }),
        ("CREATE", "TABLE") => {
            let local = local(statement);
            let name = local
                .split_whitespace()
                .nth(5)?
                .trim_matches('(')
                .to_string();
            let name = name.rsplit('.').next().unwrap_or(&name).to_string();
            let at = after_name(&local, 5)?;
            let sql = insert_at(&local, at, &on_cluster);
            ddl(replicate_engine(&sql, &name, layout))
        }
        ("CREATE", "MATERIALIZED") => {
            let local = local(statement);
            ddl(insert_at(&local, after_name(&local, 6)?, &on_cluster))
        }
        ("CREATE", "VIEW") => {
            let plain = qualify(statement, names, db, false);
            Some(ClusterStatement {
                sql: insert_at(&plain, after_name(&plain, 5)?, &on_cluster),
                kind: StatementKind::Ddl,
                reads_distributed: true,
            })
        }
        ("DROP", "TABLE") => {
            let local = local(statement);
            let prefix = if w(2) == "IF" { 4 } else { 2 };
            ddl(insert_at(&local, after_name(&local, prefix)?, &on_cluster))
        }
        ("ALTER", "TABLE") => {
            let local = without_order_by(&local(statement))?;
            ddl(insert_at(&local, after_name(&local, 2)?, &on_cluster))
        }
        ("RENAME", "TABLE") => {
            let local = local(statement);
            ddl(format!("{} {on_cluster}", local.trim_end()))
        }
        _ => ddl(local(statement)),
    }
}

/// The column whose hash shards a table: the one its rows deduplicate on, so that every copy
/// of a row lands on the same shard; `rand()` for tables whose rows merge across shards anyway
/// (the rollups' aggregate states).
pub fn sharding_key(columns: &[String]) -> String {
    for key in ["event_id", "alert_id", "key", "source"] {
        if columns.iter().any(|c| c == key) {
            return format!("cityHash64({key})");
        }
    }
    "rand()".to_string()
}

/// `CREATE TABLE db.table ON CLUSTER … AS db.table_local ENGINE = Distributed(…)`.
pub fn distributed_ddl(table: &str, columns: &[String], layout: &ClusterLayout) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {database}.{table} ON CLUSTER {cluster} AS {database}.{local} \
         ENGINE = Distributed({cluster}, {database}, {local}, {key})",
        cluster = layout.name,
        local = local_name(table),
        database = layout.database,
        key = sharding_key(columns),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> ClusterLayout {
        ClusterLayout {
            name: "c1".into(),
            database: "sqlgrade".into(),
            replica_path: "/clickhouse/tables/{shard}/{database}/{table}".into(),
            replica_name: "{replica}".into(),
        }
    }

    fn files() -> Vec<&'static str> {
        super::super::migrate::MIGRATIONS
            .iter()
            .map(|m| m.sql)
            .collect()
    }

    fn tables() -> Vec<String> {
        data_tables(&files())
    }

    fn rw(sql: &str) -> Option<ClusterStatement> {
        let (tables, objects) = (tables(), objects(&files()));
        rewrite(
            sql,
            &Names {
                tables: &tables,
                objects: &objects,
            },
            &layout(),
        )
    }

    #[test]
    fn data_tables_are_the_merge_tree_tables_and_rename_targets() {
        assert_eq!(
            tables(),
            [
                "alerts",
                "dead_letters",
                "dead_letters_hourly",
                "evaluations",
                "evaluations_before_011",
                "evaluations_by_event",
                "evaluations_hourly",
                "evaluations_keyed",
                "evaluations_scored_hourly",
                "event_inputs",
                "judge_cache",
                "judge_identities",
                "labels",
                "stef_breakdown_findings_hourly",
                "stef_breakdown_hourly",
                "stef_monitor_hourly",
            ]
        );
    }

    #[test]
    fn create_table_is_replicated_on_the_cluster() {
        let sql = "CREATE TABLE IF NOT EXISTS evaluations\n(\n    event_id String\n)\nENGINE = ReplacingMergeTree(scored_at)\nORDER BY (event_id)";
        let got = rw(sql).unwrap();
        assert_eq!(got.kind, StatementKind::Ddl);
        assert!(
            got.sql.starts_with(
                "CREATE TABLE IF NOT EXISTS sqlgrade.evaluations_local ON CLUSTER c1\n("
            ),
            "{}",
            got.sql
        );
        assert!(
            got.sql.contains(
                "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/sqlgrade/evaluations_local', '{replica}', scored_at)"
            ),
            "{}",
            got.sql
        );
        let agg = rw("CREATE TABLE IF NOT EXISTS evaluations_hourly (hour DateTime) ENGINE = AggregatingMergeTree() ORDER BY hour")
        .unwrap();
        assert!(agg.sql.contains("ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/sqlgrade/evaluations_hourly_local', '{replica}')"), "{}", agg.sql);
    }

    #[test]
    fn views_and_writes_keep_their_reading_names() {
        let mv = rw("CREATE MATERIALIZED VIEW IF NOT EXISTS evaluations_hourly_mv TO evaluations_hourly AS\nSELECT metric, 'evaluations' AS s FROM evaluations GROUP BY metric")
        .unwrap();
        assert_eq!(
            mv.sql,
            "CREATE MATERIALIZED VIEW IF NOT EXISTS sqlgrade.evaluations_hourly_mv ON CLUSTER c1 TO sqlgrade.evaluations_hourly_local AS\nSELECT metric, 'evaluations' AS s FROM sqlgrade.evaluations_local GROUP BY metric"
        );
        let view = rw(
            "CREATE VIEW IF NOT EXISTS stef_estimates_hourly AS SELECT 1 FROM evaluations FINAL",
        )
        .unwrap();
        assert_eq!(
            view.sql,
            "CREATE VIEW IF NOT EXISTS sqlgrade.stef_estimates_hourly ON CLUSTER c1 AS SELECT 1 FROM sqlgrade.evaluations FINAL"
        );
        let insert = rw("INSERT INTO evaluations_keyed SELECT * FROM evaluations").unwrap();
        assert_eq!(insert.kind, StatementKind::DistributedWrite);
        assert_eq!(
            insert.sql, "INSERT INTO evaluations_keyed SELECT * FROM evaluations",
            "through the Distributed tables"
        );
    }

    #[test]
    fn alters_renames_and_drops_target_the_local_tables() {
        assert_eq!(
            rw("ALTER TABLE evaluations ADD COLUMN selection String DEFAULT ''")
                .unwrap()
                .sql,
            "ALTER TABLE sqlgrade.evaluations_local ON CLUSTER c1 ADD COLUMN selection String DEFAULT ''"
        );
        assert_eq!(
            rw("ALTER TABLE evaluations ADD COLUMN run_key String, MODIFY ORDER BY (event_id, metric, run_key)")
            .unwrap()
            .sql,
            "ALTER TABLE sqlgrade.evaluations_local ON CLUSTER c1 ADD COLUMN run_key String"
        );
        assert_eq!(rw("ALTER TABLE evaluations MODIFY ORDER BY (a, b)"), None);
        assert_eq!(
            rw("RENAME TABLE evaluations TO evaluations_before_011, evaluations_keyed TO evaluations").unwrap().sql,
            "RENAME TABLE sqlgrade.evaluations_local TO sqlgrade.evaluations_before_011_local, sqlgrade.evaluations_keyed_local TO sqlgrade.evaluations_local ON CLUSTER c1"
        );
        assert_eq!(
            rw("DROP TABLE IF EXISTS judge_cache").unwrap().sql,
            "DROP TABLE IF EXISTS sqlgrade.judge_cache_local ON CLUSTER c1"
        );
        assert_eq!(
            rw("DROP TABLE IF EXISTS evaluations_hourly_mv")
                .unwrap()
                .sql,
            "DROP TABLE IF EXISTS sqlgrade.evaluations_hourly_mv ON CLUSTER c1"
        );
    }

    #[test]
    fn every_migration_statement_has_a_cluster_form_and_no_column_is_named_like_a_table() {
        let t = objects(&files());
        for m in super::super::migrate::MIGRATIONS {
            for s in super::super::ddl::split_statements(m.sql) {
                if let Some(r) = rw(&s) {
                    if r.kind == StatementKind::Ddl {
                        assert!(r.sql.contains("ON CLUSTER c1"), "{}: {}", m.name, r.sql);
                    }
                    assert!(!r.sql.contains(" MergeTree("), "{}: {}", m.name, r.sql);
                }
                // A column named like a data table would be renamed with it.
                for line in s.lines() {
                    let first = line.split_whitespace().next().unwrap_or("");
                    let is_column = line.starts_with("    ") && line.contains(" String")
                        || line.contains(" DateTime")
                        || line.contains("Float64");
                    if is_column {
                        assert!(!t.iter().any(|x| x == first), "{}: column {first}", m.name);
                    }
                }
            }
        }
    }

    #[test]
    fn sharding_follows_the_deduplicating_column() {
        let cols = |c: &[&str]| c.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            sharding_key(&cols(&["ts", "event_id"])),
            "cityHash64(event_id)"
        );
        assert_eq!(sharding_key(&cols(&["key", "value"])), "cityHash64(key)");
        assert_eq!(sharding_key(&cols(&["hour", "events"])), "rand()");
        assert_eq!(
            distributed_ddl("evaluations", &cols(&["event_id"]), &layout()),
            "CREATE TABLE IF NOT EXISTS sqlgrade.evaluations ON CLUSTER c1 AS sqlgrade.evaluations_local \
             ENGINE = Distributed(c1, sqlgrade, evaluations_local, cityHash64(event_id))"
        );
    }
}
