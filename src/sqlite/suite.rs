//! `ts_ex` at the edge ([`SuiteChecker`], the core's [`SuiteCheck`]): small databases
//! generated from the schema, distilled against near-miss mutants of the gold query, and both
//! queries executed on them in memory — plus on the real database when there is one.
//!
//! Two kinds of suite ([`SuiteMode`]). **Constrained** (`ts_ex`): every generated database keeps
//! the database's constraints ([`DbConstraints`]) — mined from the real database when there is
//! one ([`super::constraints::mine`], once per database, cached, within a time budget),
//! else the schema's plus what people assume (keys not NULL, foreign keys pointing at existing
//! rows). Values come from the real column (within its observed domain and range), key ↔
//! label columns take real pairs together, a value that must occur in another column is drawn
//! from that column's generated values, then rows whose references dangle are deleted and a
//! candidate that still breaks a constraint is dropped — so every kept database satisfies all
//! of them, and the boundary cases they allow stay: NULLs where a column may hold them, ties
//! and duplicates in columns that are not unique, empty tables. **Strict** (`ts_ex_strict`):
//! the constraint-free generation of before — primary keys unique, foreign keys pointing at a
//! generated parent row when there is one but not enforced, NULLs only in columns whose real
//! data has them (outside keys when there is no real database).
//!
//! Either way: parents before children; values drawn from the real column (a few distinct
//! values, read-only) and — half the time — from the gold query's literals and their
//! neighbours; duplicates and ties from small pools; empty tables. A candidate is kept when the
//! gold query runs on it and it tells the gold query apart from a mutant not yet told apart;
//! the first few on which the gold query returns rows are kept regardless, so a query with no
//! mutants still gets a suite. Suites depend on the schema, the gold query, the mode and the
//! seed only, and are cached per (database, gold query, mode).
//!
//! Safety: generated databases live in memory and are guarded like the executor's connections
//! (query-only, no ATTACH, a read-only authorizer, the time and row limits) before any event
//! SQL runs on them; the real database is only read through the [`SqliteExecutor`].

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rusqlite::Connection;

use super::constraints::{MiningLimits, mine};
use super::executor::{ExecLimits, SqliteExecutor, guard};
use super::schema_db::schema_ddl;
use crate::catalogue::{ColumnType, DbSchema};
use crate::exec::{ExecError, Executor, ResultSet, SqlValue};
use crate::metrics::ex::{ExConvention, results_match};
use crate::metrics::ts_ex::constraints::{
    DbConstraints, Origin, Rule, quote_identifier, sql_literal, table_columns,
};
use crate::metrics::ts_ex::{
    Counterexample, Literal, ShownResult, SuiteCheck, SuiteMode, TsError, TsOutcome,
    literal_numbers, literals, mutants, tables_read,
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
    /// Bounds of mining a real database's constraints (once per database).
    pub mining: MiningLimits,
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
            mining: MiningLimits::default(),
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

/// Strict suites do not enforce foreign keys: a dangling reference is a legal state of a
/// schema whose keys are declared, not enforced (as in the real BIRD and Spider databases).
const NO_FOREIGN_KEYS: &str = "PRAGMA foreign_keys = OFF;\n";

/// Constrained suites keep every reference; SQLite can check the declared ones when each
/// points at a unique column — at the end of the transaction, as rows of tables that
/// reference each other come in generation order.
const FOREIGN_KEYS: &str = "PRAGMA foreign_keys = ON;\nBEGIN;\nPRAGMA defer_foreign_keys = ON;\n";

/// A gold query's distilled suite.
struct Suite {
    databases: Vec<GeneratedDb>,
    mutants: usize,
    killed: usize,
    /// The tables generated, parents first.
    tables: Vec<usize>,
    /// What every database of the suite keeps (none when strict).
    constraints: Arc<DbConstraints>,
    /// What it keeps for this gold query only: the values the gold query names occur at most
    /// as often as in the real data (none when strict or without a real database).
    local: DbConstraints,
    /// The gold query's numbers (and neighbours), admitted in every range.
    planted: Vec<f64>,
}

type SuiteKey = (String, String, SuiteMode);

/// Builds, caches and runs suites.
pub struct SuiteChecker {
    config: SuiteConfig,
    limits: ExecLimits,
    real: Option<SqliteExecutor>,
    cache: Mutex<HashMap<SuiteKey, Arc<Suite>>>,
    constraints: Mutex<HashMap<String, Arc<DbConstraints>>>,
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
            constraints: Mutex::new(HashMap::new()),
        }
    }

    /// The constraints constrained suites keep for `db`: mined from the real database when
    /// there is one (once per database, then cached), else the schema's and people's
    /// assumptions.
    pub fn constraints(&self, db: &DbSchema) -> Arc<DbConstraints> {
        if let Some(c) = self
            .constraints
            .lock()
            .ok()
            .and_then(|m| m.get(&db.db_id).cloned())
        {
            return c;
        }
        let path = self
            .real
            .as_ref()
            .and_then(|real| real.database_path(&db.db_id));
        let mined = Arc::new(match path {
            Some(path) => mine(db, &path, self.config.mining),
            None => DbConstraints::from_schema(db),
        });
        if let Ok(mut m) = self.constraints.lock() {
            m.insert(db.db_id.clone(), Arc::clone(&mined));
        }
        mined
    }

    fn constraints_for(&self, db: &DbSchema, mode: SuiteMode) -> Arc<DbConstraints> {
        match mode {
            SuiteMode::Constrained => self.constraints(db),
            SuiteMode::Strict => Arc::new(DbConstraints::none()),
        }
    }

    /// The gold query's suite: a function of the schema, the gold query, the mode and the seed
    /// only (never of a prediction), so it is the same whatever event comes first.
    fn suite(&self, db: &DbSchema, gold: &str, mode: SuiteMode) -> Arc<Suite> {
        let key = (db.db_id.clone(), gold.to_string(), mode);
        if let Some(s) = self.cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return s;
        }
        let constraints = self.constraints_for(db, mode);
        let links = Links::new(db, &constraints, mode);
        let tables = tables_to_fill(db, gold, &links);
        let suite = Arc::new(self.build(db, tables, gold, constraints, &links));
        if let Ok(mut c) = self.cache.lock() {
            if c.len() >= CACHE_CAPACITY {
                c.clear();
            }
            c.insert(key, Arc::clone(&suite));
        }
        suite
    }

    fn build(
        &self,
        db: &DbSchema,
        tables: Vec<usize>,
        gold: &str,
        constraints: Arc<DbConstraints>,
        links: &Links,
    ) -> Suite {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (&db.db_id, gold).hash(&mut hasher);
        let mut rng = StdRng::seed_from_u64(self.config.seed ^ hasher.finish());
        let pools = self.pools(db, &tables, gold, &constraints);
        let planted = literal_numbers(gold);
        let local = if constraints.mined {
            self.named_once(db, &tables, gold)
        } else {
            DbConstraints::none()
        };
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
            let draw = Draw {
                db,
                pools: &pools,
                constraints: &constraints,
                local: &local,
                links,
                planted: &planted,
            };
            let mut candidate = generate(&draw, &tables, &mut rng, self.config.max_rows);
            if !constraints.constraints.is_empty() {
                constraints.repair_references(db, &mut candidate.rows);
                if !constraints
                    .violations(db, &candidate.rows, &planted)
                    .is_empty()
                    || !local.violations(db, &candidate.rows, &planted).is_empty()
                {
                    continue;
                }
            }
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
            tables,
            constraints,
            local,
            planted,
        }
    }

    /// For each text literal of the gold query and each text column of the filled tables
    /// where the real data holds that value exactly once: it occurs at most once in every
    /// generated database too. One scan per (table, literal), each under the time limit.
    fn named_once(&self, db: &DbSchema, tables: &[usize], gold: &str) -> DbConstraints {
        let mut out = DbConstraints::none();
        let Some(real) = &self.real else {
            return out;
        };
        let texts: Vec<String> = literals(gold)
            .into_iter()
            .filter_map(|l| match l {
                Literal::Text(t) if !t.contains('%') => Some(t),
                _ => None,
            })
            .collect();
        for &t in tables {
            let columns: Vec<usize> = table_columns(db, t)
                .into_iter()
                .filter(|&c| matches!(db.columns[c].ty, ColumnType::Text | ColumnType::Unknown))
                .collect();
            if columns.is_empty() {
                continue;
            }
            for text in &texts {
                let value = SqlValue::Text(text.clone());
                let counts: Vec<String> = columns
                    .iter()
                    .map(|&c| {
                        format!(
                            "COALESCE(SUM({} = {}), 0)",
                            quote_identifier(&db.columns[c].name),
                            sql_literal(&value)
                        )
                    })
                    .collect();
                let sql = format!(
                    "SELECT {} FROM {}",
                    counts.join(", "),
                    quote_identifier(&db.tables[t])
                );
                let Ok(rs) = real.execute(&db.db_id, &sql) else {
                    continue;
                };
                let Some(row) = rs.rows.first() else {
                    continue;
                };
                for (&c, n) in columns.iter().zip(row) {
                    if *n == SqlValue::Integer(1) {
                        out.add(
                            Rule::AtMostOnce {
                                column: c,
                                value: value.clone(),
                            },
                            Origin::Observed,
                        );
                    }
                }
            }
        }
        out
    }

    /// Values per column: the real column's and the gold query's literals (kept apart, so
    /// that a literal is picked half the time however many real values there are), both
    /// within the column's constraints; and per key ↔ label constraint, the real pairs, those
    /// holding a literal of the gold query first.
    fn pools(
        &self,
        db: &DbSchema,
        tables: &[usize],
        gold: &str,
        constraints: &DbConstraints,
    ) -> Pools {
        let mut planted: Vec<SqlValue> = Vec::new();
        for l in literals(gold) {
            let v = match l {
                Literal::Number(x) => number_value(x),
                Literal::Text(t) => SqlValue::Text(t),
            };
            if !planted.contains(&v) {
                planted.push(v);
            }
        }
        let numbers = literal_numbers(gold);
        let mut out = Pools::default();
        for constraint in &constraints.constraints {
            let Rule::KeyLabel { key, label, pairs } = &constraint.rule else {
                continue;
            };
            // Pairs holding a literal, then a few others: the suite needs the pairs the gold
            // query names, and small tables.
            let names_literal = |(k, l): &&(SqlValue, SqlValue)| {
                planted
                    .iter()
                    .any(|p| p.key() == k.key() || p.key() == l.key())
            };
            let mut chosen: Vec<(SqlValue, SqlValue)> = pairs
                .iter()
                .filter(names_literal)
                .take(6)
                .cloned()
                .collect();
            for pair in pairs.iter().filter(|p| !names_literal(p)).take(6) {
                chosen.push(pair.clone());
            }
            out.pairs.insert((*key, *label), chosen);
        }
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
                        quote_identifier(table),
                        quote_identifier(&col.name)
                    );
                    nullable = real
                        .execute(&db.db_id, &probe)
                        .is_ok_and(|rs| !rs.rows.is_empty());
                    let sql = format!(
                        "SELECT DISTINCT {} FROM {} WHERE {} IS NOT NULL LIMIT 6",
                        quote_identifier(&col.name),
                        quote_identifier(table),
                        quote_identifier(&col.name)
                    );
                    if let Ok(rs) = real.execute(&db.db_id, &sql) {
                        pool.extend(rs.rows.iter().filter_map(|r| r.first().cloned()));
                    }
                    // A referenced column also offers the values its referrers really use
                    // (a zip code members live in, not just the first codes of the table).
                    for from in referrers(constraints, c) {
                        let (Some(fcol), Some(ftable)) = (
                            db.columns.get(from),
                            db.columns.get(from).and_then(|f| db.tables.get(f.table)),
                        ) else {
                            continue;
                        };
                        let sql = format!(
                            "SELECT DISTINCT {name} FROM {} WHERE {name} IS NOT NULL LIMIT 6",
                            quote_identifier(ftable),
                            name = quote_identifier(&fcol.name)
                        );
                        if let Ok(rs) = real.execute(&db.db_id, &sql) {
                            for v in rs.rows.iter().filter_map(|r| r.first()) {
                                if !pool.iter().any(|p: &SqlValue| p.key() == v.key()) {
                                    pool.push(v.clone());
                                }
                            }
                        }
                    }
                    pool.retain(|v| constraints.admits(c, v, &numbers));
                }
                let literal: Vec<SqlValue> = planted
                    .iter()
                    .filter(|v| fits(col.ty, v) && constraints.admits(c, v, &numbers))
                    .cloned()
                    .collect();
                if pool.is_empty() && literal.is_empty() {
                    pool = fallback(col.ty);
                    pool.retain(|v| constraints.admits(c, v, &numbers));
                    if pool.is_empty() {
                        pool = admitted_values(constraints, c);
                    }
                }
                let nullable = nullable && !constraints.not_null(c);
                out.columns.insert(c, (pool, literal, nullable));
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
                quote_identifier(table),
                cols.iter()
                    .map(|c| quote_identifier(c))
                    .collect::<Vec<_>>()
                    .join(", "),
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

/// The columns whose values must occur in `c`.
fn referrers(constraints: &DbConstraints, c: usize) -> Vec<usize> {
    constraints
        .constraints
        .iter()
        .filter_map(|k| match k.rule {
            Rule::References { from, to } if to == c => Some(from),
            _ => None,
        })
        .collect()
}

/// Column names of a table, first occurrence of each name (as [`schema_ddl`] declares them).
fn columns(db: &DbSchema, t: usize) -> Option<Vec<String>> {
    let cols: Vec<String> = table_columns(db, t)
        .into_iter()
        .map(|c| db.columns[c].name.clone())
        .collect();
    (!cols.is_empty()).then_some(cols)
}

/// Values a domain or range constraint allows in `c` (its domain; a range's ends).
fn admitted_values(constraints: &DbConstraints, c: usize) -> Vec<SqlValue> {
    for constraint in &constraints.constraints {
        match &constraint.rule {
            Rule::Domain { column, values } if *column == c => return values.clone(),
            Rule::Range { column, min, max } if *column == c => {
                return vec![number_value(*min), number_value(*max)];
            }
            _ => {}
        }
    }
    Vec::new()
}

/// A number as SQLite stores it: INTEGER when integral (and exact in an i64), else REAL.
fn number_value(x: f64) -> SqlValue {
    if x.fract() == 0.0 && x.abs() < 9e15 {
        SqlValue::Integer(x as i64)
    } else {
        SqlValue::Real(x)
    }
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

/// The columns a column's values are drawn from: under constraints, every column it must
/// reference (declared or observed); strict, its declared foreign keys (followed when a parent
/// row exists, never enforced).
struct Links {
    from: BTreeMap<usize, Vec<usize>>,
    /// (table, referenced table) of the declared foreign keys: the order generation prefers
    /// when references go round in a cycle.
    declared: Vec<(usize, usize)>,
}

impl Links {
    fn new(db: &DbSchema, constraints: &DbConstraints, mode: SuiteMode) -> Links {
        let pairs: Vec<(usize, usize)> = match mode {
            SuiteMode::Constrained => constraints
                .constraints
                .iter()
                .filter_map(|c| match c.rule {
                    Rule::References { from, to } => Some((from, to)),
                    _ => None,
                })
                .collect(),
            SuiteMode::Strict => db.foreign_keys.clone(),
        };
        let mut from: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (a, b) in pairs {
            if db.columns.get(a).is_some() && db.columns.get(b).is_some() {
                from.entry(a).or_default().push(b);
            }
        }
        let declared = db
            .foreign_keys
            .iter()
            .filter_map(|&(a, b)| Some((db.columns.get(a)?.table, db.columns.get(b)?.table)))
            .collect();
        Links { from, declared }
    }

    fn of(&self, c: usize) -> &[usize] {
        self.from.get(&c).map(Vec::as_slice).unwrap_or_default()
    }

    /// (table, referenced table) for every link.
    fn table_edges<'a>(&'a self, db: &'a DbSchema) -> impl Iterator<Item = (usize, usize)> + 'a {
        self.from.iter().flat_map(move |(a, bs)| {
            bs.iter()
                .map(move |b| (db.columns[*a].table, db.columns[*b].table))
        })
    }
}

/// Tables the generator fills: those the gold query reads, and the tables they reference,
/// transitively, parents first. (A table only the prediction reads stays empty in the suite.)
fn tables_to_fill(db: &DbSchema, gold: &str, links: &Links) -> Vec<usize> {
    let mut wanted: Vec<usize> = tables_read(gold)
        .into_iter()
        .filter_map(|name| db.table_index(&name))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    wanted.retain(|t| seen.insert(*t));
    let edges: Vec<(usize, usize)> = links.table_edges(db).collect();
    let mut i = 0;
    while i < wanted.len() {
        let t = wanted[i];
        for &(f, r) in &edges {
            if f == t && !wanted.contains(&r) {
                wanted.push(r);
            }
        }
        i += 1;
    }
    // Parents first: a table comes after every table it references; in a cycle, after the
    // tables its declared foreign keys name (observed references can go both ways: every
    // molecule has atoms, every atom a molecule), else in the order found.
    let mut ordered: Vec<usize> = Vec::new();
    let mut remaining = wanted.clone();
    let ready_by = |edges: &[(usize, usize)], remaining: &[usize]| {
        remaining.iter().position(|&t| {
            edges
                .iter()
                .all(|&(f, r)| f != t || r == t || !remaining.contains(&r))
        })
    };
    while !remaining.is_empty() {
        let ready = ready_by(&edges, &remaining).or_else(|| ready_by(&links.declared, &remaining));
        let next = remaining.remove(ready.unwrap_or(0));
        ordered.push(next);
    }
    ordered
}

/// What generation draws from.
#[derive(Default)]
struct Pools {
    /// Per column: (real or fallback values, the gold query's literals that fit its type,
    /// whether it may be NULL).
    columns: HashMap<usize, (Vec<SqlValue>, Vec<SqlValue>, bool)>,
    /// Per key ↔ label constraint `(key, label)`: the real pairs to draw from (ordered: the
    /// suite must not depend on a hash seed).
    pairs: BTreeMap<(usize, usize), Vec<(SqlValue, SqlValue)>>,
}

/// What one generated database is drawn from.
#[derive(Clone, Copy)]
struct Draw<'a> {
    db: &'a DbSchema,
    pools: &'a Pools,
    constraints: &'a DbConstraints,
    links: &'a Links,
    /// The gold query's own constraints ([`Suite::local`]).
    local: &'a DbConstraints,
    /// The gold query's numbers, admitted in every range.
    planted: &'a [f64],
}

fn generate(draw: &Draw, tables: &[usize], rng: &mut StdRng, max_rows: usize) -> GeneratedDb {
    let Draw {
        db,
        pools,
        constraints,
        local,
        ..
    } = *draw;
    let mut out = GeneratedDb::default();
    for &t in tables {
        let cols = table_columns(db, t);
        let key = super::schema_db::primary_key(db, t);
        // Unique columns other than a single-column primary key (checked below with the key).
        let unique: Vec<usize> = (0..cols.len())
            .filter(|&i| constraints.unique(cols[i]) && key != [cols[i]])
            .collect();
        let pairs: Vec<PairsAt> = pools
            .pairs
            .iter()
            .filter_map(|((k, l), pairs)| {
                let kp = cols.iter().position(|c| c == k)?;
                let lp = cols.iter().position(|c| c == l)?;
                Some((kp, lp, pairs))
            })
            .collect();
        let together: Vec<Vec<usize>> = constraints
            .constraints
            .iter()
            .filter_map(|k| match &k.rule {
                Rule::UniqueTogether { columns } => columns
                    .iter()
                    .map(|c| cols.iter().position(|x| x == c))
                    .collect::<Option<Vec<usize>>>(),
                _ => None,
            })
            .collect();
        let once: Vec<(usize, &SqlValue)> = local
            .constraints
            .iter()
            .filter_map(|k| match &k.rule {
                Rule::AtMostOnce { column, value } => {
                    Some((cols.iter().position(|c| c == column)?, value))
                }
                _ => None,
            })
            .collect();
        let may_be_empty = !constraints
            .constraints
            .iter()
            .any(|k| k.rule == Rule::NonEmpty { table: t });
        // An empty table one time in eight (where it may be empty); otherwise 1..=max_rows rows.
        let n = if rng.random_range(0..8) == 0 && may_be_empty {
            0
        } else {
            rng.random_range(1..=max_rows.max(1))
        };
        let mut rows: Vec<Vec<SqlValue>> = Vec::new();
        let mut keys_seen: Vec<Vec<SqlValue>> = Vec::new();
        for _ in 0..n {
            for _attempt in 0..6 {
                let mut row = Vec::with_capacity(cols.len());
                for &c in &cols {
                    row.push(value_for(draw, &out, rng, c, key.contains(&c)));
                }
                if !take_real_pairs(&mut row, &pairs, rng) {
                    continue;
                }
                let key_values: Vec<SqlValue> = cols
                    .iter()
                    .zip(&row)
                    .filter(|(c, _)| key.contains(c))
                    .map(|(_, v)| v.clone())
                    .collect();
                if !key.is_empty()
                    && (keys_seen.contains(&key_values) || key_values.contains(&SqlValue::Null))
                {
                    continue;
                }
                let repeats = unique.iter().any(|&u| {
                    !matches!(row[u], SqlValue::Null)
                        && rows.iter().any(|r| r[u].key() == row[u].key())
                });
                let repeats_together = together.iter().any(|positions| {
                    rows.iter()
                        .any(|r| positions.iter().all(|&p| r[p].key() == row[p].key()))
                });
                let repeats_named = once.iter().any(|&(p, value)| {
                    row[p].key() == value.key() && rows.iter().any(|r| r[p].key() == value.key())
                });
                if repeats || repeats_together || repeats_named {
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

/// A key ↔ label constraint's positions in a row `(key, label)` and the real pairs to draw.
type PairsAt<'a> = (usize, usize, &'a Vec<(SqlValue, SqlValue)>);

/// Set each key ↔ label pair of the row to a real pair: the first pair of a key drawn at
/// random, the labels of other constraints on the same key looked up for it. False when a
/// key has no pair for such a label (the row is drawn again).
fn take_real_pairs(row: &mut [SqlValue], pairs: &[PairsAt], rng: &mut StdRng) -> bool {
    let mut keyed: Vec<usize> = Vec::new();
    for &(k, l, real) in pairs {
        if keyed.contains(&k) {
            let Some((_, label)) = real.iter().find(|(key, _)| key.key() == row[k].key()) else {
                return false;
            };
            row[l] = label.clone();
        } else {
            if real.is_empty() {
                return false;
            }
            let (key, label) = &real[rng.random_range(0..real.len())];
            row[k] = key.clone();
            row[l] = label.clone();
            keyed.push(k);
        }
    }
    true
}

/// The non-NULL values of column `c` in the tables generated so far; `None` when its table
/// is not generated (yet).
fn generated_values(db: &DbSchema, so_far: &GeneratedDb, c: usize) -> Option<Vec<SqlValue>> {
    let table = db.columns.get(c)?.table;
    let rows = so_far.rows_of(table)?;
    let at = table_columns(db, table).iter().position(|&x| x == c)?;
    Some(
        rows.iter()
            .filter_map(|r| r.get(at))
            .filter(|v| !matches!(v, SqlValue::Null))
            .cloned()
            .collect(),
    )
}

fn value_for(
    draw: &Draw,
    so_far: &GeneratedDb,
    rng: &mut StdRng,
    c: usize,
    in_key: bool,
) -> SqlValue {
    let Draw {
        db,
        pools,
        constraints,
        links,
        planted,
        ..
    } = *draw;
    let nullable = pools.columns.get(&c).is_some_and(|(_, _, n)| *n);
    if nullable && !in_key && rng.random_range(0..10) == 0 {
        return SqlValue::Null;
    }
    // A value that references other columns is one they hold (all of them, under
    // constraints), when the generated rows have one: strict suites do not need it (a
    // dangling reference is legal there) but it tells apart only queries that differ on broken
    // data otherwise; constrained suites delete the rows left dangling afterwards.
    let mut candidates: Option<Vec<SqlValue>> = None;
    for &to in links.of(c) {
        let Some(values) = generated_values(db, so_far, to) else {
            continue;
        };
        candidates = Some(match candidates {
            None => values,
            Some(previous) => previous
                .into_iter()
                .filter(|v| values.iter().any(|w| w.key() == v.key()))
                .collect(),
        });
    }
    if let Some(mut candidates) = candidates {
        candidates.retain(|v| constraints.admits(c, v, planted));
        if !candidates.is_empty() {
            return candidates[rng.random_range(0..candidates.len())].clone();
        }
    }
    let Some((real, literal, _)) = pools.columns.get(&c) else {
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
    fn script(&self, db: &DbSchema, generated: &GeneratedDb, mode: SuiteMode) -> (String, bool) {
        let mut out = String::from(match mode {
            SuiteMode::Constrained if foreign_keys_checkable(db) => FOREIGN_KEYS,
            SuiteMode::Constrained => {
                "-- every reference holds; SQLite cannot check them: a declared foreign key names a column that is not unique\nPRAGMA foreign_keys = OFF;\n"
            }
            SuiteMode::Strict => NO_FOREIGN_KEYS,
        });
        let mut truncated = false;
        'tables: for (t, rows) in &generated.rows {
            let (Some(table), Some(cols)) = (db.tables.get(*t), columns(db, *t)) else {
                continue;
            };
            for row in rows {
                let line = format!(
                    "INSERT INTO {} ({}) VALUES ({});\n",
                    quote_identifier(table),
                    cols.iter()
                        .map(|c| quote_identifier(c))
                        .collect::<Vec<_>>()
                        .join(", "),
                    row.iter().map(sql_literal).collect::<Vec<_>>().join(", ")
                );
                if out.len() + line.len() > self.config.max_script_bytes {
                    truncated = true;
                    break 'tables;
                }
                out.push_str(&line);
            }
        }
        if out.starts_with(FOREIGN_KEYS) {
            out.push_str("COMMIT;\n");
        }
        (out, truncated)
    }
}

/// Whether SQLite can enforce every declared foreign key of `db`: each names its table's
/// single-column primary key or a declared UNIQUE column (otherwise inserting a child row
/// fails with "foreign key mismatch").
fn foreign_keys_checkable(db: &DbSchema) -> bool {
    db.foreign_keys.iter().all(|&(_, to)| {
        db.column_key(to)
            .is_some_and(|key| db.is_single_pk(&key) || db.unique.contains(&key))
    })
}

/// Most assumptions listed in a row's details.
const LISTED_ASSUMPTIONS: usize = 40;

fn capped(mut list: Vec<String>) -> Vec<String> {
    if list.len() > LISTED_ASSUMPTIONS {
        let more = list.len() - LISTED_ASSUMPTIONS;
        list.truncate(LISTED_ASSUMPTIONS);
        list.push(format!("… and {more} more"));
    }
    list
}

impl SuiteCheck for SuiteChecker {
    fn check(
        &self,
        db: &DbSchema,
        gold: &str,
        pred: &str,
        convention: ExConvention,
        mode: SuiteMode,
    ) -> Result<TsOutcome, TsError> {
        self.run(db, gold, pred, convention, mode, true)
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
        mode: SuiteMode,
    ) -> Result<TsOutcome, TsError> {
        self.run(db, gold, pred, convention, mode, false)
    }

    fn run(
        &self,
        db: &DbSchema,
        gold: &str,
        pred: &str,
        convention: ExConvention,
        mode: SuiteMode,
        compare_real: bool,
    ) -> Result<TsOutcome, TsError> {
        if tables_read(gold)
            .iter()
            .all(|name| db.table_index(name).is_none())
        {
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
            mode,
            assumptions: Vec::new(),
            constraints_mined: false,
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
        let suite = self.suite(db, gold, mode);
        if suite.databases.is_empty() && !outcome.real_database {
            // Nothing was compared: not a verdict.
            return Err(TsError::Unavailable(format!(
                "no generated database both keeps the {} constraints and runs the gold query",
                mode.as_str()
            )));
        }
        outcome.suite_size = suite.databases.len();
        outcome.mutants = suite.mutants;
        outcome.mutants_killed = suite.killed;
        outcome.constraints_mined = suite.constraints.mined;
        // What bears on the tables the gold query reads (their parents' constraints hold too,
        // and the counterexample lists those on every table it fills).
        let read: Vec<usize> = tables_read(gold)
            .iter()
            .filter_map(|name| db.table_index(name))
            .collect();
        let mut assumptions = suite.constraints.describe_for(db, &read);
        assumptions.extend(suite.local.describe_for(db, &read));
        outcome.assumptions = capped(assumptions);
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
            let (script, truncated) = self.script(db, generated, mode);
            let with_rows: Vec<usize> = generated
                .rows
                .iter()
                .filter(|(_, r)| !r.is_empty())
                .map(|(t, _)| *t)
                .collect();
            let (assumed, violates) = match mode {
                SuiteMode::Constrained => {
                    let mut assumed = suite.constraints.describe_for(db, &with_rows);
                    assumed.extend(suite.local.describe_for(db, &with_rows));
                    (capped(assumed), Vec::new())
                }
                // What the strict counterexample gives up: the constraints a constrained suite
                // would have kept.
                SuiteMode::Strict => {
                    let kept = self.constraints(db);
                    let local = if kept.mined {
                        self.named_once(db, &suite.tables, gold)
                    } else {
                        DbConstraints::none()
                    };
                    let mut broken = Vec::new();
                    for set in [kept.as_ref(), &local] {
                        broken.extend(
                            set.violations(db, &generated.rows, &suite.planted)
                                .into_iter()
                                .map(|i| set.constraints[i].describe(db)),
                        );
                    }
                    (Vec::new(), capped(broken))
                }
            };
            outcome.verdict = false;
            outcome.differs_on = Some("suite");
            outcome.counterexample = Some(Counterexample {
                script,
                truncated,
                rows,
                gold: ShownResult::of(&gold_rs),
                pred: pred_rs.map(|p| ShownResult::of(&p)),
                assumed,
                violates,
            });
        }
        Ok(outcome)
    }
}
