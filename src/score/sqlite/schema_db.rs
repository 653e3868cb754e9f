//! Schema-only SQLite databases in memory, built from a catalogue's [`DbSchema`], and the
//! planning check ETM runs on them ([`SchemaPlanner`], the edge side of the core's
//! [`PlanCheck`]): `EXPLAIN QUERY PLAN` prepares and plans a query without executing it.
//!
//! Hostile SQL is harmless here by construction — the database is in memory and empty, nothing
//! is executed — and the same guards as the executor's apply anyway once the tables exist:
//! `query_only`, no ATTACH, and an authorizer that allows reading only.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use rusqlite::limits::Limit;

use crate::catalogue::DbSchema;
use crate::metrics::etm::{PlanCheck, PlanError};

/// `CREATE TABLE` statements for a schema: declared types, the primary key, and the foreign
/// keys in file order. Duplicate column names (case-insensitive) keep their first occurrence.
pub fn schema_ddl(db: &DbSchema) -> Vec<String> {
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let mut out = Vec::new();
    for (t, table) in db.tables.iter().enumerate() {
        let mut seen = BTreeSet::new();
        let mut parts = Vec::new();
        for (_, col) in db.columns_of(t) {
            if seen.insert(col.name.to_lowercase()) {
                parts.push(format!("{} {}", quote(&col.name), col.ty.as_str()));
            }
        }
        if parts.is_empty() {
            continue;
        }
        let key: Vec<String> = primary_key(db, t)
            .iter()
            .filter_map(|c| db.columns.get(*c))
            .map(|c| quote(&c.name))
            .collect();
        if !key.is_empty() {
            parts.push(format!("PRIMARY KEY ({})", key.join(", ")));
        }
        for (from, to) in &db.foreign_keys {
            let (Some(f), Some(r)) = (db.columns.get(*from), db.columns.get(*to)) else {
                continue;
            };
            if f.table != t {
                continue;
            }
            let Some(target) = db.tables.get(r.table) else {
                continue;
            };
            parts.push(format!(
                "FOREIGN KEY ({}) REFERENCES {} ({})",
                quote(&f.name),
                quote(target),
                quote(&r.name)
            ));
        }
        out.push(format!(
            "CREATE TABLE {} ({})",
            quote(table),
            parts.join(", ")
        ));
    }
    out
}

/// An in-memory database with the schema's tables and no rows, guarded for reading only.
/// A table whose DDL SQLite refuses is left out (queries naming it then fail to plan).
pub fn open_schema_db(db: &DbSchema) -> rusqlite::Result<Connection> {
    super::configure();
    let mut conn = Connection::open_in_memory()?;
    for ddl in schema_ddl(db) {
        if let Err(error) = conn.execute(&ddl, []) {
            tracing::debug!(db_id = %db.db_id, %error, "a table of the schema could not be created");
        }
    }
    conn.pragma_update(None, "query_only", 1)?;
    conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)?;
    conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, super::MAX_VALUE_BYTES)?;
    conn.set_limit(Limit::SQLITE_LIMIT_SQL_LENGTH, super::MAX_SQL_BYTES)?;
    conn.authorizer(Some(super::executor::authorize))?;
    Ok(conn)
}

/// The column indices of table `t`'s primary key (empty when it has none).
pub(crate) fn primary_key(db: &DbSchema, t: usize) -> Vec<usize> {
    db.primary_keys
        .iter()
        .find(|k| {
            k.first()
                .and_then(|c| db.columns.get(*c))
                .is_some_and(|c| c.table == t)
        })
        .cloned()
        .unwrap_or_default()
}

/// ETM's validity check: `EXPLAIN QUERY PLAN` on a schema-only database, one per `db_id`,
/// built on first use and kept.
#[derive(Default)]
pub struct SchemaPlanner {
    databases: Mutex<HashMap<String, Arc<Mutex<Connection>>>>,
}

impl SchemaPlanner {
    /// A planner with no database built yet.
    pub fn new() -> SchemaPlanner {
        SchemaPlanner::default()
    }

    fn database(&self, db: &DbSchema) -> Result<Arc<Mutex<Connection>>, PlanError> {
        let mut map = self
            .databases
            .lock()
            .map_err(|_| PlanError::new("schema database cache poisoned"))?;
        if let Some(conn) = map.get(&db.db_id) {
            return Ok(Arc::clone(conn));
        }
        let conn = Arc::new(Mutex::new(open_schema_db(db).map_err(PlanError::new)?));
        map.insert(db.db_id.clone(), Arc::clone(&conn));
        Ok(conn)
    }
}

impl PlanCheck for SchemaPlanner {
    fn plan(&self, schema: &DbSchema, sql: &str) -> Result<(), PlanError> {
        let conn = self.database(schema)?;
        let conn = conn
            .lock()
            .map_err(|_| PlanError::new("schema database poisoned"))?;
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .map_err(PlanError::new)?;
        let mut rows = stmt.query([]).map_err(PlanError::new)?;
        rows.next().map_err(PlanError::new)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::SchemaCatalog;

    fn catalogue() -> SchemaCatalog {
        SchemaCatalog::parse_simple(
            r#"{"db_id": "shop", "tables": [
                {"name": "customer", "columns": [{"name": "id", "type": "integer"}, {"name": "name", "type": "text"}], "primary_key": ["id"]},
                {"name": "orders", "columns": [{"name": "id", "type": "integer"}, {"name": "customer_id", "type": "integer", "references": "customer.id"}], "primary_key": ["id"]}
            ]}"#,
            true,
        )
        .unwrap()
    }

    #[test]
    fn queries_plan_against_the_schema_and_nothing_runs() {
        let catalog = catalogue();
        let db = catalog.get("shop").unwrap();
        let planner = SchemaPlanner::new();
        planner
            .plan(
                db,
                "SELECT c.name FROM customer AS c JOIN orders AS o ON c.id = o.customer_id",
            )
            .unwrap();
        let missing = planner
            .plan(db, "SELECT nope FROM customer")
            .unwrap_err()
            .to_string();
        assert!(missing.contains("no such column"), "{missing}");
        assert!(planner.plan(db, "SELECT 1; SELECT 2").is_err());
        // Writes, DDL and ATTACH are refused; the planner's database stays empty.
        assert!(planner.plan(db, "DELETE FROM customer").is_err());
        assert!(
            planner
                .plan(db, "ATTACH DATABASE '/tmp/x.db' AS x")
                .is_err()
        );
        let conn = planner.database(db).unwrap();
        let tables: i64 = conn
            .lock()
            .unwrap()
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables, 2);
    }

    #[test]
    fn the_ddl_declares_keys() {
        let catalog = catalogue();
        let ddl = schema_ddl(catalog.get("shop").unwrap());
        assert_eq!(ddl.len(), 2);
        assert!(
            ddl[1].contains(r#"FOREIGN KEY ("customer_id") REFERENCES "customer" ("id")"#),
            "{}",
            ddl[1]
        );
        assert!(ddl[0].contains(r#"PRIMARY KEY ("id")"#));
    }
}
