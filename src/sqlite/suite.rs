//! `ts_ex` at the edge ([`SuiteChecker`], the core's [`SuiteCheck`]): small databases
//! generated from the schema, distilled against near-miss mutants of the gold query, and both
//! queries executed on them in memory — plus on the real database when there is one.
//!
//! Generation respects the schema: parents before children, primary keys unique, foreign keys
//! pointing at a generated parent row whenever there is one, values drawn from the real column
//! (a few distinct values, read-only) and — half the time — from the gold query's literals and
//! their neighbours, and boundary cases: NULLs (only in columns whose real data has them, or
//! outside keys when there is no real database), duplicates and ties from small pools, empty
//! tables. Foreign keys are declared but not enforced, as in the real benchmark databases. A
//! candidate is kept when the gold query runs on it and it tells the gold query apart from a
//! mutant not yet told apart; the first few on which the gold query returns rows are kept
//! regardless, so a query with no mutants still gets a suite. Suites depend on the schema, the
//! gold query and the seed only, and are cached per (database, gold query).
//!
//! Safety: generated databases live in memory and are guarded like the executor's connections
//! (query-only, no ATTACH, a read-only authorizer, the time and row limits) before any event
//! SQL runs on them; the real database is only read through the [`SqliteExecutor`].

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rusqlite::Connection;

use super::executor::{ExecLimits, SqliteExecutor, guard};
use super::schema_db::schema_ddl;
use crate::catalogue::{ColumnType, DbSchema};
use crate::exec::{ExecError, Executor, ResultSet, SqlValue};
use crate::metrics::ex::{ExConvention, results_match};
use crate::metrics::ts_ex::{
    Counterexample, Literal, ShownResult, SuiteCheck, TsError, TsOutcome, literals, mutants,
    tables_read,
};

/// How suites are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuiteConfig {
    /// Seed of the generator (suites are deterministic for a seed).
    pub seed: u64,
    /// Candidate databases generated per gold query.
    pub candidates: usize,
    /// Largest suite kept.
    pub max_suite: usize,
    /// Candidates kept regardless of mutants: the first ones on which the gold query returns
    /// rows (so every suite has some databases).
    pub always_keep: usize,
    /// Most rows per table of a generated database.
    pub max_rows: usize,
    /// Most mutants of the gold query.
    pub max_mutants: usize,
    /// Largest counterexample script, in bytes.
    pub max_script_bytes: usize,
}

impl Default for SuiteConfig {
    fn default() -> Self {
        SuiteConfig {
            seed: 7,
            candidates: 150,
            max_suite: 16,
            always_keep: 4,
            max_rows: 5,
            max_mutants: 32,
            max_script_bytes: 8 * 1024,
        }
    }
}

/// One generated database: rows per schema table, parents before children (tables the
/// queries do not read stay empty).
#[derive(Debug, Clone, Default)]
struct GeneratedDb {
    /// (table index, rows: one value per column of the table, in schema order).
    rows: Vec<(usize, Vec<Vec<SqlValue>>)>,
}

impl GeneratedDb {
    fn row_count(&self) -> usize {
        self.rows.iter().map(|(_, r)| r.len()).sum()
    }

    fn rows_of(&self, table: usize) -> Option<&Vec<Vec<SqlValue>>> {
        self.rows.iter().find(|(t, _)| *t == table).map(|(_, r)| r)
    }
}

/// Suite databases do not enforce foreign keys: a dangling reference is a legal state of a
/// schema whose keys are declared, not enforced (as in the real BIRD and Spider databases).
const NO_FOREIGN_KEYS: &str = "PRAGMA foreign_keys = OFF;\n";

/// A gold query's distilled suite.
struct Suite {
    databases: Vec<GeneratedDb>,
    mutants: usize,
    killed: usize,
}

/// Builds, caches and runs suites.
pub struct SuiteChecker {
    config: SuiteConfig,
    limits: ExecLimits,
    real: Option<SqliteExecutor>,
    cache: Mutex<HashMap<(String, String), Arc<Suite>>>,
}

/// Suites kept in memory before the cache starts over.
const CACHE_CAPACITY: usize = 4096;

impl SuiteChecker {
    /// A checker; `real` reads the real databases (values to sample, and the real-database
    /// comparison), `limits` bound every query on a generated database.
    pub fn new(config: SuiteConfig, limits: ExecLimits, real: Option<SqliteExecutor>) -> Self {
        SuiteChecker {
            config,
            limits,
            real,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The gold query's suite: a function of the schema, the gold query and the seed only
    /// (never of a prediction), so it is the same whatever event comes first.
    fn suite(&self, db: &DbSchema, gold: &str) -> Arc<Suite> {
        let key = (db.db_id.clone(), gold.to_string());
        if let Some(s) = self.cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return s;
        }
        let tables = tables_to_fill(db, gold);
        let suite = Arc::new(self.build(db, &tables, gold));
        if let Ok(mut c) = self.cache.lock() {
            if c.len() >= CACHE_CAPACITY {
                c.clear();
            }
            c.insert(key, Arc::clone(&suite));
        }
        suite
    }

    fn build(&self, db: &DbSchema, tables: &[usize], gold: &str) -> Suite {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (&db.db_id, gold).hash(&mut hasher);
        let mut rng = StdRng::seed_from_u64(self.config.seed ^ hasher.finish());
        let pools = self.pools(db, tables, gold);
        let gold_mutants = mutants(gold, self.config.max_mutants);
        let mut alive: Vec<&String> = gold_mutants.iter().collect();
        let mut kept = Vec::new();
        let mut killed = 0;
        for i in 0..self.config.candidates {
            if kept.len() >= self.config.max_suite
                || (alive.is_empty() && kept.len() >= self.config.always_keep)
            {
                break;
            }
            let candidate = generate(db, tables, &pools, &mut rng, self.config.max_rows);
            let Ok(conn) = self.open(db, &candidate) else {
                continue;
            };
            let Ok(gold_rs) = conn.run(gold, self.limits) else {
                continue;
            };
            let before = alive.len();
            alive.retain(|m| match conn.run(m, self.limits) {
                Ok(rs) => results_match(&gold_rs, &rs, ExConvention::SpiderTestSuite, gold),
                Err(_) => true,
            });
            killed += before - alive.len();
            // Kept regardless: the first databases on which the gold query returns rows (an
            // empty gold result tells little apart), or the first candidates if none does.
            let regardless = kept.len() < self.config.always_keep
                && (!gold_rs.rows.is_empty()
                    || i + self.config.always_keep >= self.config.candidates);
            if alive.len() < before || regardless {
                kept.push(candidate);
            }
        }
        Suite {
            databases: kept,
            mutants: gold_mutants.len(),
            killed,
        }
    }

    /// Values per column: the real column's and the gold query's literals (kept apart, so
    /// that a literal is picked half the time however many real values there are).
    fn pools(&self, db: &DbSchema, tables: &[usize], gold: &str) -> Pools {
        let mut planted: Vec<SqlValue> = Vec::new();
        for l in literals(gold) {
            let v = match l {
                Literal::Number(x) if x.fract() == 0.0 && x.abs() < 9e15 => {
                    SqlValue::Integer(x as i64)
                }
                Literal::Number(x) => SqlValue::Real(x),
                Literal::Text(t) => SqlValue::Text(t),
            };
            if !planted.contains(&v) {
                planted.push(v);
            }
        }
        let mut out = HashMap::new();
        for &t in tables {
            let Some(table) = db.tables.get(t) else {
                continue;
            };
            for (c, col) in db.columns_of(t) {
                let mut pool = Vec::new();
                // NULL where the column can plausibly hold one: where the real column does,
                // or, without a real database, outside primary keys.
                let mut nullable = !db.is_primary_key_column(c);
                if let Some(real) = &self.real
                    && real.has_database(&db.db_id)
                {
                    let probe = format!(
                        "SELECT 1 FROM {} WHERE {} IS NULL LIMIT 1",
                        quote(table),
                        quote(&col.name)
                    );
                    nullable = real
                        .execute(&db.db_id, &probe)
                        .is_ok_and(|rs| !rs.rows.is_empty());
                    let sql = format!(
                        "SELECT DISTINCT {} FROM {} WHERE {} IS NOT NULL LIMIT 6",
                        quote(&col.name),
                        quote(table),
                        quote(&col.name)
                    );
                    if let Ok(rs) = real.execute(&db.db_id, &sql) {
                        pool.extend(rs.rows.iter().filter_map(|r| r.first().cloned()));
                    }
                }
                let literal: Vec<SqlValue> = planted
                    .iter()
                    .filter(|v| fits(col.ty, v))
                    .cloned()
                    .collect();
                if pool.is_empty() && literal.is_empty() {
                    pool = fallback(col.ty);
                }
                out.insert(c, (pool, literal, nullable));
            }
        }
        out
    }

    /// The candidate as an in-memory database, guarded before any event SQL runs on it.
    fn open(
        &self,
        db: &DbSchema,
        generated: &GeneratedDb,
    ) -> Result<super::executor::Guarded, ExecError> {
        let conn = Connection::open_in_memory().map_err(|e| ExecError::Open(e.to_string()))?;
        conn.execute_batch(NO_FOREIGN_KEYS)
            .map_err(|e| ExecError::Open(e.to_string()))?;
        for ddl in schema_ddl(db) {
            // A table SQLite refuses is left out, as in the planning database.
            let _ = conn.execute(&ddl, []);
        }
        for (t, rows) in &generated.rows {
            let (Some(table), Some(cols)) = (db.tables.get(*t), columns(db, *t)) else {
                continue;
            };
            let sql = format!(
                "INSERT INTO {} ({}) VALUES ({})",
                quote(table),
                cols.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", "),
                vec!["?"; cols.len()].join(", ")
            );
            let Ok(mut stmt) = conn.prepare(&sql) else {
                continue;
            };
            for row in rows {
                let params: Vec<rusqlite::types::Value> = row.iter().map(to_sqlite).collect();
                // A row the table's constraints refuse is left out.
                let _ = stmt.execute(rusqlite::params_from_iter(params));
            }
        }
        guard(conn)
    }
}

/// Column names of a table, first occurrence of each name (as [`schema_ddl`] declares them).
fn columns(db: &DbSchema, t: usize) -> Option<Vec<String>> {
    let mut seen = std::collections::BTreeSet::new();
    let cols: Vec<String> = db
        .columns_of(t)
        .filter(|(_, c)| seen.insert(c.name.to_lowercase()))
        .map(|(_, c)| c.name.clone())
        .collect();
    (!cols.is_empty()).then_some(cols)
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

fn fits(ty: ColumnType, v: &SqlValue) -> bool {
    match (ty, v) {
        (ColumnType::Number | ColumnType::Boolean, SqlValue::Integer(_) | SqlValue::Real(_)) => {
            true
        }
        (ColumnType::Number | ColumnType::Boolean, _) => false,
        (ColumnType::Text | ColumnType::Date, SqlValue::Text(_)) => true,
        (ColumnType::Text | ColumnType::Date, _) => false,
        _ => true,
    }
}

fn fallback(ty: ColumnType) -> Vec<SqlValue> {
    match ty {
        ColumnType::Number | ColumnType::Boolean => (0..4).map(SqlValue::Integer).collect(),
        ColumnType::Date => ["2000-01-01", "2010-06-15", "2020-12-31"]
            .iter()
            .map(|s| SqlValue::Text((*s).into()))
            .collect(),
        _ => ["a", "b", "c"]
            .iter()
            .map(|s| SqlValue::Text((*s).into()))
            .collect(),
    }
}

fn to_sqlite(v: &SqlValue) -> rusqlite::types::Value {
    match v {
        SqlValue::Null => rusqlite::types::Value::Null,
        SqlValue::Integer(i) => rusqlite::types::Value::Integer(*i),
        SqlValue::Real(f) => rusqlite::types::Value::Real(*f),
        SqlValue::Text(t) => rusqlite::types::Value::Text(t.clone()),
        SqlValue::Blob(b) => rusqlite::types::Value::Blob(b.clone()),
    }
}

fn literal(v: &SqlValue) -> String {
    match v {
        SqlValue::Null => "NULL".into(),
        SqlValue::Integer(i) => i.to_string(),
        SqlValue::Real(f) => format!("{f:?}"),
        SqlValue::Text(t) => format!("'{}'", t.replace('\'', "''")),
        SqlValue::Blob(b) => {
            let mut s = String::from("X'");
            for byte in b {
                let _ = write!(s, "{byte:02X}");
            }
            s.push('\'');
            s
        }
    }
}

/// Tables the generator fills: those the gold query reads, and their foreign-key parents,
/// parents first. (A table only the prediction reads stays empty in the suite.)
fn tables_to_fill(db: &DbSchema, gold: &str) -> Vec<usize> {
    let mut wanted: Vec<usize> = tables_read(gold)
        .into_iter()
        .filter_map(|name| db.table_index(&name))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    wanted.retain(|t| seen.insert(*t));
    let mut i = 0;
    while i < wanted.len() {
        let t = wanted[i];
        for (from, to) in &db.foreign_keys {
            let (Some(f), Some(r)) = (db.columns.get(*from), db.columns.get(*to)) else {
                continue;
            };
            if f.table == t && !wanted.contains(&r.table) {
                wanted.push(r.table);
            }
        }
        i += 1;
    }
    // Parents first: a table comes after every table it references (cycles keep their order).
    let mut ordered: Vec<usize> = Vec::new();
    let mut remaining = wanted.clone();
    while !remaining.is_empty() {
        let ready = remaining.iter().position(|&t| {
            db.foreign_keys.iter().all(|(from, to)| {
                let (Some(f), Some(r)) = (db.columns.get(*from), db.columns.get(*to)) else {
                    return true;
                };
                f.table != t || r.table == t || !remaining.contains(&r.table)
            })
        });
        let next = remaining.remove(ready.unwrap_or(0));
        ordered.push(next);
    }
    ordered
}

/// Per column: (real or fallback values, the gold query's literals that fit its type, whether
/// it may be NULL).
type Pools = HashMap<usize, (Vec<SqlValue>, Vec<SqlValue>, bool)>;

fn generate(
    db: &DbSchema,
    tables: &[usize],
    pools: &Pools,
    rng: &mut StdRng,
    max_rows: usize,
) -> GeneratedDb {
    let mut out = GeneratedDb::default();
    for &t in tables {
        let cols: Vec<(usize, &crate::catalogue::Column)> = {
            let mut seen = std::collections::BTreeSet::new();
            db.columns_of(t)
                .filter(|(_, c)| seen.insert(c.name.to_lowercase()))
                .collect()
        };
        let key = super::schema_db::primary_key(db, t);
        // An empty table one time in eight; otherwise 1..=max_rows rows.
        let n = if rng.random_range(0..8) == 0 {
            0
        } else {
            rng.random_range(1..=max_rows.max(1))
        };
        let mut rows: Vec<Vec<SqlValue>> = Vec::new();
        let mut keys_seen: Vec<Vec<SqlValue>> = Vec::new();
        for _ in 0..n {
            for _attempt in 0..6 {
                let mut row = Vec::with_capacity(cols.len());
                for &(c, _) in &cols {
                    row.push(value_for(db, &out, pools, rng, c, key.contains(&c)));
                }
                let key_values: Vec<SqlValue> = cols
                    .iter()
                    .zip(&row)
                    .filter(|((c, _), _)| key.contains(c))
                    .map(|(_, v)| v.clone())
                    .collect();
                if !key.is_empty()
                    && (keys_seen.contains(&key_values) || key_values.contains(&SqlValue::Null))
                {
                    continue;
                }
                keys_seen.push(key_values);
                rows.push(row);
                break;
            }
        }
        out.rows.push((t, rows));
    }
    out
}

fn value_for(
    db: &DbSchema,
    so_far: &GeneratedDb,
    pools: &Pools,
    rng: &mut StdRng,
    c: usize,
    in_key: bool,
) -> SqlValue {
    let nullable = pools.get(&c).is_some_and(|(_, _, n)| *n);
    if nullable && !in_key && rng.random_range(0..10) == 0 {
        return SqlValue::Null;
    }
    // A foreign key points at a generated parent row when there is one (a dangling reference
    // is legal but tells apart only queries that differ on broken data).
    if let Some((_, to)) = db.foreign_keys.iter().find(|(from, _)| *from == c)
        && let Some(parent) = db.columns.get(*to)
        && let Some(parent_rows) = so_far.rows_of(parent.table)
        && !parent_rows.is_empty()
    {
        let position = columns(db, parent.table).and_then(|cols| {
            cols.iter()
                .position(|n| n.eq_ignore_ascii_case(&parent.name))
        });
        if let Some(p) = position {
            let row = &parent_rows[rng.random_range(0..parent_rows.len())];
            if let Some(v) = row.get(p) {
                return v.clone();
            }
        }
    }
    let Some((real, literal, _)) = pools.get(&c) else {
        return SqlValue::Integer(rng.random_range(0..4));
    };
    let pool = if literal.is_empty() || (!real.is_empty() && rng.random_bool(0.5)) {
        real
    } else {
        literal
    };
    match pool.len() {
        0 => SqlValue::Integer(rng.random_range(0..4)),
        n => pool[rng.random_range(0..n)].clone(),
    }
}

impl SuiteChecker {
    fn script(&self, db: &DbSchema, generated: &GeneratedDb) -> (String, bool) {
        let mut out = String::from(NO_FOREIGN_KEYS);
        let mut truncated = false;
        'tables: for (t, rows) in &generated.rows {
            let (Some(table), Some(cols)) = (db.tables.get(*t), columns(db, *t)) else {
                continue;
            };
            for row in rows {
                let line = format!(
                    "INSERT INTO {} ({}) VALUES ({});\n",
                    quote(table),
                    cols.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", "),
                    row.iter().map(literal).collect::<Vec<_>>().join(", ")
                );
                if out.len() + line.len() > self.config.max_script_bytes {
                    truncated = true;
                    break 'tables;
                }
                out.push_str(&line);
            }
        }
        (out, truncated)
    }
}

impl SuiteCheck for SuiteChecker {
    fn check(
        &self,
        db: &DbSchema,
        gold: &str,
        pred: &str,
        convention: ExConvention,
    ) -> Result<TsOutcome, TsError> {
        self.run(db, gold, pred, convention, true)
    }
}

impl SuiteChecker {
    /// [`SuiteCheck::check`] on the generated databases only, the real one left out (what the
    /// suite alone would conclude; for measuring it).
    pub fn check_suite_only(
        &self,
        db: &DbSchema,
        gold: &str,
        pred: &str,
        convention: ExConvention,
    ) -> Result<TsOutcome, TsError> {
        self.run(db, gold, pred, convention, false)
    }

    fn run(
        &self,
        db: &DbSchema,
        gold: &str,
        pred: &str,
        convention: ExConvention,
        compare_real: bool,
    ) -> Result<TsOutcome, TsError> {
        if tables_to_fill(db, gold).is_empty() {
            return Err(TsError::Unavailable(
                "the gold query reads no table of the schema".into(),
            ));
        }
        let mut outcome = TsOutcome {
            verdict: true,
            suite_size: 0,
            mutants: 0,
            mutants_killed: 0,
            real_database: false,
            counterexample: None,
            differs_on: None,
            pred_error: None,
        };
        if let Some(real) = &self.real
            && compare_real
            && real.has_database(&db.db_id)
        {
            outcome.real_database = true;
            let gold_rs = real
                .execute(&db.db_id, gold)
                .map_err(|e| TsError::Gold(e.to_string()))?;
            let same = match real.execute(&db.db_id, pred) {
                Ok(p) => results_match(&gold_rs, &p, convention, gold),
                Err(e) => {
                    outcome.pred_error = Some(e.to_string());
                    false
                }
            };
            if !same {
                outcome.verdict = false;
                outcome.differs_on = Some("real");
                return Ok(outcome);
            }
        }
        let suite = self.suite(db, gold);
        outcome.suite_size = suite.databases.len();
        outcome.mutants = suite.mutants;
        outcome.mutants_killed = suite.killed;
        let mut smallest: Option<(usize, &GeneratedDb, ResultSet, Result<ResultSet, String>)> =
            None;
        for generated in &suite.databases {
            let Ok(conn) = self.open(db, generated) else {
                continue;
            };
            let Ok(gold_rs) = conn.run(gold, self.limits) else {
                continue;
            };
            let pred_rs = conn.run(pred, self.limits).map_err(|e| e.to_string());
            let same = pred_rs
                .as_ref()
                .is_ok_and(|p| results_match(&gold_rs, p, convention, gold));
            if !same {
                let rows = generated.row_count();
                if smallest.as_ref().is_none_or(|(r, ..)| rows < *r) {
                    smallest = Some((rows, generated, gold_rs, pred_rs));
                }
            }
        }
        if let Some((rows, generated, gold_rs, pred_rs)) = smallest {
            let (script, truncated) = self.script(db, generated);
            outcome.verdict = false;
            outcome.differs_on = Some("suite");
            outcome.counterexample = Some(Counterexample {
                script,
                truncated,
                rows,
                gold: ShownResult::of(&gold_rs),
                pred: pred_rs.map(|p| ShownResult::of(&p)),
            });
        }
        Ok(outcome)
    }
}
