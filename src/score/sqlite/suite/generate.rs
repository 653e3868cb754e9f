//! Drawing one database of a suite: the tables to fill, the values each column may take (the
//! real column's domain, the schema's type, the gold query's planted numbers), key links and
//! real key ↔ label pairs, rows parents first.

use std::collections::{BTreeMap, HashMap};

use rand::Rng;
use rand::rngs::StdRng;

use crate::catalogue::{ColumnType, DbSchema};
use crate::exec::SqlValue;
use crate::metrics::ts_ex::constraints::{DbConstraints, Rule, table_columns};
use crate::metrics::ts_ex::{SuiteMode, tables_read};

/// One generated database: rows per schema table, parents before children (tables the
/// queries do not read stay empty).
#[derive(Debug, Clone, Default)]
pub(super) struct GeneratedDb {
    /// (table index, rows: one value per column of the table, in schema order).
    pub(super) rows: Vec<(usize, Vec<Vec<SqlValue>>)>,
}

impl GeneratedDb {
    pub(super) fn row_count(&self) -> usize {
        self.rows.iter().map(|(_, r)| r.len()).sum()
    }

    pub(super) fn rows_of(&self, table: usize) -> Option<&Vec<Vec<SqlValue>>> {
        self.rows.iter().find(|(t, _)| *t == table).map(|(_, r)| r)
    }
}

/// Strict suites do not enforce foreign keys: a dangling reference is a legal state of a
/// schema whose keys are declared, not enforced (as in the real BIRD and Spider databases).
pub(super) const NO_FOREIGN_KEYS: &str = "PRAGMA foreign_keys = OFF;\n";

/// Constrained suites keep every reference; SQLite can check the declared ones when each
/// points at a unique column — at the end of the transaction, as rows of tables that
/// reference each other come in generation order.
pub(super) const FOREIGN_KEYS: &str =
    "PRAGMA foreign_keys = ON;\nBEGIN;\nPRAGMA defer_foreign_keys = ON;\n";

/// The columns whose values must occur in `c`.
pub(super) fn referrers(constraints: &DbConstraints, c: usize) -> Vec<usize> {
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
pub(super) fn columns(db: &DbSchema, t: usize) -> Option<Vec<String>> {
    let cols: Vec<String> = table_columns(db, t)
        .into_iter()
        .map(|c| db.columns[c].name.clone())
        .collect();
    (!cols.is_empty()).then_some(cols)
}

/// Values a domain or range constraint allows in `c` (its domain; a range's ends).
pub(super) fn admitted_values(constraints: &DbConstraints, c: usize) -> Vec<SqlValue> {
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
pub(super) fn number_value(x: f64) -> SqlValue {
    if x.fract() == 0.0 && x.abs() < 9e15 {
        SqlValue::Integer(x as i64)
    } else {
        SqlValue::Real(x)
    }
}

pub(super) fn fits(ty: ColumnType, v: &SqlValue) -> bool {
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

pub(super) fn fallback(ty: ColumnType) -> Vec<SqlValue> {
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

pub(super) fn to_sqlite(v: &SqlValue) -> rusqlite::types::Value {
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
pub(super) struct Links {
    pub(super) from: BTreeMap<usize, Vec<usize>>,
    /// (table, referenced table) of the declared foreign keys: the order generation prefers
    /// when references go round in a cycle.
    pub(super) declared: Vec<(usize, usize)>,
}

impl Links {
    pub(super) fn new(db: &DbSchema, constraints: &DbConstraints, mode: SuiteMode) -> Links {
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

    pub(super) fn of(&self, c: usize) -> &[usize] {
        self.from.get(&c).map(Vec::as_slice).unwrap_or_default()
    }

    /// (table, referenced table) for every link.
    pub(super) fn table_edges<'a>(
        &'a self,
        db: &'a DbSchema,
    ) -> impl Iterator<Item = (usize, usize)> + 'a {
        self.from.iter().flat_map(move |(a, bs)| {
            bs.iter()
                .map(move |b| (db.columns[*a].table, db.columns[*b].table))
        })
    }
}

/// Tables the generator fills: those the gold query reads, and the tables they reference,
/// transitively, parents first. (A table only the prediction reads stays empty in the suite.)
pub(super) fn tables_to_fill(db: &DbSchema, gold: &str, links: &Links) -> Vec<usize> {
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
pub(super) struct Pools {
    /// Per column: (real or fallback values, the gold query's literals that fit its type,
    /// whether it may be NULL).
    pub(super) columns: HashMap<usize, (Vec<SqlValue>, Vec<SqlValue>, bool)>,
    /// Per key ↔ label constraint `(key, label)`: the real pairs to draw from (ordered: the
    /// suite must not depend on a hash seed).
    pub(super) pairs: BTreeMap<(usize, usize), Vec<(SqlValue, SqlValue)>>,
}

/// What one generated database is drawn from.
#[derive(Clone, Copy)]
pub(super) struct Draw<'a> {
    pub(super) db: &'a DbSchema,
    pub(super) pools: &'a Pools,
    pub(super) constraints: &'a DbConstraints,
    pub(super) links: &'a Links,
    /// The gold query's own constraints ([`Suite::local`]).
    pub(super) local: &'a DbConstraints,
    /// The gold query's numbers, admitted in every range.
    pub(super) planted: &'a [f64],
}

pub(super) fn generate(
    draw: &Draw,
    tables: &[usize],
    rng: &mut StdRng,
    max_rows: usize,
) -> GeneratedDb {
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
        let key = crate::score::sqlite::schema_db::primary_key(db, t);
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
        let together = unique_together_positions(constraints, &cols);
        let once = at_most_once_positions(local, &cols);
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

/// Each `UniqueTogether` constraint whose columns are all in `cols`, as their positions there.
fn unique_together_positions(constraints: &DbConstraints, cols: &[usize]) -> Vec<Vec<usize>> {
    constraints
        .constraints
        .iter()
        .filter_map(|k| match &k.rule {
            Rule::UniqueTogether { columns } => columns
                .iter()
                .map(|c| cols.iter().position(|x| x == c))
                .collect::<Option<Vec<usize>>>(),
            _ => None,
        })
        .collect()
}

/// Each `AtMostOnce` constraint on a column of `cols`: its position there and the value that
/// may appear at most once.
fn at_most_once_positions<'a>(
    local: &'a DbConstraints,
    cols: &[usize],
) -> Vec<(usize, &'a SqlValue)> {
    local
        .constraints
        .iter()
        .filter_map(|k| match &k.rule {
            Rule::AtMostOnce { column, value } => {
                Some((cols.iter().position(|c| c == column)?, value))
            }
            _ => None,
        })
        .collect()
}

/// A key ↔ label constraint's positions in a row `(key, label)` and the real pairs to draw.
pub(super) type PairsAt<'a> = (usize, usize, &'a Vec<(SqlValue, SqlValue)>);

/// Set each key ↔ label pair of the row to a real pair: the first pair of a key drawn at
/// random, the labels of other constraints on the same key looked up for it. False when a
/// key has no pair for such a label (the row is drawn again).
pub(super) fn take_real_pairs(row: &mut [SqlValue], pairs: &[PairsAt], rng: &mut StdRng) -> bool {
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
pub(super) fn generated_values(
    db: &DbSchema,
    so_far: &GeneratedDb,
    c: usize,
) -> Option<Vec<SqlValue>> {
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

pub(super) fn value_for(
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
