//! What `ts_ex` assumes about a database: the constraints every generated database keeps, each
//! with where it came from — **declared** by the schema (primary keys, `NOT NULL`, `UNIQUE`,
//! foreign keys), **observed** in the real database's data (mined at the edge), or **assumed**
//! because people assume it when there is only a schema (keys are not NULL, foreign keys point
//! at existing rows).
//!
//! Why: a counterexample on data no real database of the schema would hold (a NULL key, a bond
//! whose molecule has no atoms, two superpowers with the same name, `gender_id = 1` meaning
//! "Female") refutes a prediction people call correct. Under these constraints `ts_ex` looks
//! only at databases the schema and its data allow; `ts_ex_strict` keeps the constraint-free
//! behaviour.
//!
//! Pure: plain data, the check of a generated database against the constraints
//! ([`DbConstraints::violations`]), the repair that deletes rows until every reference holds
//! ([`DbConstraints::repair_references`]), and each constraint as a SQL query that counts its
//! violations ([`Constraint::violation_sql`]) — what the edge runs on the real database to mine
//! them, and what tests run on a counterexample's script to check it independently.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde::Serialize;

use crate::catalogue::DbSchema;
use crate::exec::{SqlValue, ValueKey};

pub use super::sql_text::{complete_to_shape, quote_identifier, shape_glob, shape_of, sql_literal};

/// Where a constraint comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The schema says so (DDL or `tables.json`).
    Declared,
    /// The real database's data shows it (every row satisfies it).
    Observed,
    /// Nothing says so, but people assume it (schema only: keys are not NULL).
    Assumed,
}

impl Origin {
    fn as_str(self) -> &'static str {
        match self {
            Origin::Declared => "declared",
            Origin::Observed => "observed",
            Origin::Assumed => "assumed",
        }
    }
}

/// One constraint; columns are indices into [`DbSchema::columns`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Rule {
    /// The column holds no NULL.
    NotNull { column: usize },
    /// The column's non-NULL values are distinct.
    Unique { column: usize },
    /// Every non-NULL value of `from` occurs in `to` (a foreign key, declared or not; `to`
    /// need not be unique: `bond.molecule_id` values all occur in `atom.molecule_id`).
    References { from: usize, to: usize },
    /// The column's non-NULL values are among these (a small enumeration).
    Domain {
        column: usize,
        values: Vec<SqlValue>,
    },
    /// The column's non-NULL values are numbers in `[min, max]`.
    Range { column: usize, min: f64, max: f64 },
    /// The column's non-NULL values are texts of one fixed shape ([`shape_of`]: `9` a digit, `a`
    /// a letter, any other character itself): `2020-03-10T12:00:00` is `9999-99-99a99:99:99`, so
    /// a planted year becomes a date of that year, not a text `strftime` cannot read.
    Shaped { column: usize, shape: String },
    /// The column's non-NULL values are texts of digits only, of varying length (numeric
    /// text: `'00123'`, `'7'`), never empty.
    DigitText { column: usize },
    /// The text column holds no empty string (names, labels: a real one is never `''`).
    NotEmpty { column: usize },
    /// No two rows of one table agree on all these columns (a link table's pair of keys; all
    /// of a table's columns: no duplicate rows).
    UniqueTogether { columns: Vec<usize> },
    /// `value` occurs at most once in the column — as in the real data, where the gold query's
    /// literal names one row (`event_name = 'Women''s Soccer'`) even if other names repeat.
    AtMostOnce { column: usize, value: SqlValue },
    /// The table has at least one row (a table others reference, or one that references
    /// nothing: the entities a database is about; tables that only reference others may be
    /// empty).
    NonEmpty { table: usize },
    /// Two columns of one table map one to one, and every `(key, label)` pair of a row is one
    /// of the real database's (`gender.id` ↔ `gender.gender`: 1 is "Male" there, so it is
    /// "Male" in every generated database).
    KeyLabel {
        key: usize,
        label: usize,
        pairs: Vec<(SqlValue, SqlValue)>,
    },
    /// Rows of one table that agree on `from` agree on `to` (a functional dependency the real
    /// data never breaks: every `budget` row of one event has that event's status). NULLs on
    /// either side are left out.
    Determines { from: usize, to: usize },
    /// Two ways of reaching a value from a row of `table` give the same value on every row
    /// where both reach one (non-NULL): a bond's molecule is the molecule of its atoms —
    /// `atom.molecule_id` through `connected.atom_id` equals `bond.molecule_id` through
    /// `connected.bond_id` on every `connected` row. Mined from the real data only.
    PathsAgree {
        table: usize,
        left: ValuePath,
        right: ValuePath,
    },
}

/// A value reached from a row of some table: its own column, or a column of the row another
/// table's key names (`via = (foreign-key column of the row, key column it matches)`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValuePath {
    /// `(column of the row, column of the other table it equals)`; `None`: the row's own column.
    pub via: Option<(usize, usize)>,
    /// The column whose value is reached (of the row's table, or of the `via` table).
    pub value: usize,
}

/// A constraint and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Constraint {
    pub rule: Rule,
    pub origin: Origin,
}

/// Rows of generated tables: `(table index, rows)`, each row one value per column of
/// [`table_columns`] in that order.
pub type TableRows = [(usize, Vec<Vec<SqlValue>>)];

/// The columns of table `t` as generated databases hold them: schema order, the first of each
/// case-insensitive name (as the schema DDL declares them).
pub fn table_columns(db: &DbSchema, t: usize) -> Vec<usize> {
    let mut seen = BTreeSet::new();
    db.columns_of(t)
        .filter(|(_, c)| seen.insert(c.name.to_lowercase()))
        .map(|(i, _)| i)
        .collect()
}

fn number(v: &SqlValue) -> Option<f64> {
    match v {
        SqlValue::Integer(i) => Some(*i as f64),
        SqlValue::Real(x) => Some(*x),
        _ => None,
    }
}

impl Rule {
    /// The columns the rule constrains.
    pub fn columns(&self) -> Vec<usize> {
        match self {
            Rule::NotNull { column }
            | Rule::Unique { column }
            | Rule::Domain { column, .. }
            | Rule::Range { column, .. }
            | Rule::Shaped { column, .. }
            | Rule::DigitText { column }
            | Rule::NotEmpty { column }
            | Rule::AtMostOnce { column, .. } => vec![*column],
            Rule::References { from, to } | Rule::Determines { from, to } => vec![*from, *to],
            Rule::KeyLabel { key, label, .. } => vec![*key, *label],
            Rule::UniqueTogether { columns } => columns.clone(),
            Rule::NonEmpty { .. } => Vec::new(),
            Rule::PathsAgree { left, right, .. } => {
                let mut out = Vec::new();
                for path in [left, right] {
                    if let Some((from, to)) = path.via {
                        out.extend([from, to]);
                    }
                    out.push(path.value);
                }
                out
            }
        }
    }

    /// The tables the rule constrains.
    pub fn tables(&self, db: &DbSchema) -> Vec<usize> {
        match self {
            Rule::NonEmpty { table } => vec![*table],
            _ => {
                let mut out: Vec<usize> = self
                    .columns()
                    .iter()
                    .filter_map(|c| db.columns.get(*c).map(|col| col.table))
                    .collect();
                out.sort_unstable();
                out.dedup();
                out
            }
        }
    }

    /// Whether `v` may stand in `column` as far as this rule alone says (NULL aside). The
    /// `planted` numbers (the gold query's literals and their neighbours) are admitted in every
    /// range: a number the question compares with is one people expect there, and without it
    /// a dropped `age > 30` would pass wherever the real ages all exceed 30.
    pub fn admits(&self, column: usize, v: &SqlValue, planted: &[f64]) -> bool {
        match self {
            Rule::Domain { column: c, values } if *c == column => {
                values.iter().any(|d| d.key() == v.key())
            }
            Rule::Range {
                column: c,
                min,
                max,
            } if *c == column => {
                number(v).is_some_and(|x| (x >= *min && x <= *max) || planted.contains(&x))
            }
            Rule::Shaped { column: c, shape } if *c == column => {
                matches!(v, SqlValue::Text(t) if shape_of(t) == *shape)
            }
            Rule::DigitText { column: c } if *c == column => {
                matches!(v, SqlValue::Text(t) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            }
            Rule::NotEmpty { column: c } if *c == column => {
                !matches!(v, SqlValue::Text(t) if t.is_empty())
            }
            _ => true,
        }
    }
}

impl Constraint {
    /// For people: `superhero.gender_id → gender.id (declared)`.
    pub fn describe(&self, db: &DbSchema) -> String {
        let name = |c: usize| {
            let col = db.columns.get(c);
            let table = col.and_then(|col| db.tables.get(col.table));
            match (table, col) {
                (Some(t), Some(col)) => format!("{t}.{}", col.name),
                _ => format!("column #{c}"),
            }
        };
        let list = |values: &[SqlValue]| {
            values
                .iter()
                .map(sql_literal)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let what = match &self.rule {
            Rule::NotNull { column } => format!("{} NOT NULL", name(*column)),
            Rule::Unique { column } => format!("{} UNIQUE", name(*column)),
            Rule::References { from, to } => format!("{} → {}", name(*from), name(*to)),
            Rule::Determines { from, to } => {
                format!("{} determines {}", name(*from), name(*to))
            }
            Rule::Domain { column, values } => format!("{} IN ({})", name(*column), list(values)),
            Rule::Range { column, min, max } => {
                format!("{} BETWEEN {min} AND {max}", name(*column))
            }
            Rule::Shaped { column, shape } => {
                format!("{} shaped {shape} (9 digit, a letter)", name(*column))
            }
            Rule::DigitText { column } => format!("{} is text of digits", name(*column)),
            Rule::NotEmpty { column } => format!("{} is never ''", name(*column)),
            Rule::KeyLabel { key, label, pairs } => format!(
                "{} ↔ {} ({} real pairs)",
                name(*key),
                name(*label),
                pairs.len()
            ),
            Rule::UniqueTogether { columns } => format!(
                "UNIQUE ({})",
                columns
                    .iter()
                    .map(|c| name(*c))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Rule::AtMostOnce { column, value } => {
                format!("{} = {} at most once", name(*column), sql_literal(value))
            }
            Rule::NonEmpty { table } => format!(
                "{} has rows",
                db.tables.get(*table).map_or("?", String::as_str)
            ),
            Rule::PathsAgree { table, left, right } => {
                let path = |p: &ValuePath| match p.via {
                    Some((from, _)) => format!("{} via {}", name(p.value), name(from)),
                    None => name(p.value),
                };
                format!(
                    "on every {} row, {} = {}",
                    db.tables.get(*table).map_or("?", String::as_str),
                    path(left),
                    path(right)
                )
            }
        };
        format!("{what} ({})", self.origin.as_str())
    }

    /// A query returning the number of rows that violate the constraint (0 when it holds),
    /// on any database with the schema's tables, with the `planted` numbers admitted in
    /// ranges as [`Rule::admits`] does. `None` when a column is unknown.
    pub fn violation_sql(&self, db: &DbSchema, planted: &[f64]) -> Option<String> {
        let col = |c: usize| {
            let col = db.columns.get(c)?;
            Some((
                quote_identifier(db.tables.get(col.table)?),
                quote_identifier(&col.name),
            ))
        };
        Some(match &self.rule {
            Rule::NotNull { column } => {
                let (t, c) = col(*column)?;
                format!("SELECT COUNT(*) FROM {t} WHERE {c} IS NULL")
            }
            Rule::Unique { column } => {
                let (t, c) = col(*column)?;
                format!(
                    "SELECT COUNT(*) FROM (SELECT {c} FROM {t} WHERE {c} IS NOT NULL GROUP BY {c} HAVING COUNT(*) > 1)"
                )
            }
            Rule::References { from, to } => {
                let ((ft, fc), (tt, tc)) = (col(*from)?, col(*to)?);
                format!(
                    "SELECT COUNT(*) FROM {ft} WHERE {fc} IS NOT NULL AND {fc} NOT IN (SELECT {tc} FROM {tt} WHERE {tc} IS NOT NULL)"
                )
            }
            Rule::Domain { column, values } => {
                let (t, c) = col(*column)?;
                let values: Vec<String> = values.iter().map(sql_literal).collect();
                format!(
                    "SELECT COUNT(*) FROM {t} WHERE {c} IS NOT NULL AND {c} NOT IN ({})",
                    values.join(", ")
                )
            }
            Rule::Range { column, min, max } => {
                let (t, c) = col(*column)?;
                range_violation_sql(&t, &c, *min, *max, planted)
            }
            Rule::Determines { from, to } => {
                let ((t, f), (_, d)) = (col(*from)?, col(*to)?);
                format!(
                    "SELECT COUNT(*) FROM (SELECT {f} FROM {t} WHERE {f} IS NOT NULL AND {d} IS NOT NULL GROUP BY {f} HAVING COUNT(DISTINCT {d}) > 1)"
                )
            }
            Rule::Shaped { column, shape } => {
                let (t, c) = col(*column)?;
                format!(
                    "SELECT COUNT(*) FROM {t} WHERE {c} IS NOT NULL AND (typeof({c}) <> 'text' OR {c} NOT GLOB '{}')",
                    shape_glob(shape).replace('\'', "''")
                )
            }
            Rule::DigitText { column } => {
                let (t, c) = col(*column)?;
                format!(
                    "SELECT COUNT(*) FROM {t} WHERE {c} IS NOT NULL AND (typeof({c}) <> 'text' OR {c} = '' OR {c} GLOB '*[^0-9]*')"
                )
            }
            Rule::NotEmpty { column } => {
                let (t, c) = col(*column)?;
                format!("SELECT COUNT(*) FROM {t} WHERE {c} = ''")
            }
            Rule::UniqueTogether { columns } => {
                let cols: Vec<(String, String)> =
                    columns.iter().map(|c| col(*c)).collect::<Option<_>>()?;
                let t = &cols.first()?.0;
                let list: Vec<&str> = cols.iter().map(|(_, c)| c.as_str()).collect();
                format!(
                    "SELECT COUNT(*) FROM (SELECT 1 FROM {t} GROUP BY {} HAVING COUNT(*) > 1)",
                    list.join(", ")
                )
            }
            Rule::NonEmpty { table } => {
                let t = quote_identifier(db.tables.get(*table)?);
                format!("SELECT NOT EXISTS (SELECT 1 FROM {t})")
            }
            Rule::AtMostOnce { column, value } => {
                let (t, c) = col(*column)?;
                format!(
                    "SELECT MAX(COUNT(*) - 1, 0) FROM {t} WHERE {c} = {}",
                    sql_literal(value)
                )
            }
            Rule::PathsAgree { table, left, right } => paths_sql(db, *table, left, right, true)?,
            Rule::KeyLabel { key, label, pairs } => {
                let ((t, k), (_, l)) = (col(*key)?, col(*label)?);
                key_label_violation_sql(&t, &k, &l, pairs)
            }
        })
    }
}

/// [`Rule::Range`]'s violations in table `t`, column `c` (both quoted): non-numbers and
/// numbers outside `min..=max`, except the `planted` numbers.
fn range_violation_sql(t: &str, c: &str, min: f64, max: f64, planted: &[f64]) -> String {
    let admitted = if planted.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = planted.iter().map(|x| format!("{x:?}")).collect();
        format!(" AND {c} NOT IN ({})", list.join(", "))
    };
    format!(
        "SELECT COUNT(*) FROM {t} WHERE {c} IS NOT NULL AND (typeof({c}) NOT IN ('integer', 'real') OR {c} < {min:?} OR {c} > {max:?}){admitted}"
    )
}

/// [`Rule::KeyLabel`]'s violations in table `t` (key column `k`, label column `l`, quoted):
/// rows whose pair is not one of `pairs` (every row when there are none).
fn key_label_violation_sql(t: &str, k: &str, l: &str, pairs: &[(SqlValue, SqlValue)]) -> String {
    if pairs.is_empty() {
        format!("SELECT COUNT(*) FROM {t}")
    } else {
        let values: Vec<String> = pairs
            .iter()
            .map(|(a, b)| format!("({}, {})", sql_literal(a), sql_literal(b)))
            .collect();
        format!(
            "SELECT COUNT(*) FROM {t} WHERE ({k}, {l}) NOT IN (VALUES {})",
            values.join(", ")
        )
    }
}

/// `SELECT COUNT(*)` of the rows of `table` where both paths reach a value — only those where
/// the two differ when `differ` (a [`Rule::PathsAgree`]'s violations), else all of them (its
/// support in the data). `None` when a column is unknown.
pub fn paths_sql(
    db: &DbSchema,
    table: usize,
    left: &ValuePath,
    right: &ValuePath,
    differ: bool,
) -> Option<String> {
    let col = |c: usize| {
        let col = db.columns.get(c)?;
        Some((
            quote_identifier(db.tables.get(col.table)?),
            quote_identifier(&col.name),
        ))
    };
    let row = quote_identifier(db.tables.get(table)?);
    let mut joins = String::new();
    let mut reach = |alias: &str, path: &ValuePath| -> Option<String> {
        let (_, v) = col(path.value)?;
        Some(match path.via {
            None => format!("r.{v}"),
            Some((from, to)) => {
                let ((_, f), (target, k)) = (col(from)?, col(to)?);
                joins.push_str(&format!(" JOIN {target} AS {alias} ON {alias}.{k} = r.{f}"));
                format!("{alias}.{v}")
            }
        })
    };
    let (l, r) = (reach("a", left)?, reach("b", right)?);
    let differ = if differ {
        format!(" AND {l} <> {r}")
    } else {
        String::new()
    };
    Some(format!(
        "SELECT COUNT(*) FROM {row} AS r{joins} WHERE {l} IS NOT NULL AND {r} IS NOT NULL{differ}"
    ))
}

/// Every constraint `ts_ex` keeps for one database.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DbConstraints {
    pub constraints: Vec<Constraint>,
    /// Whether the real database's data was mined (else the schema's and people's
    /// assumptions only).
    pub mined: bool,
    /// What mining left out, and why (a time limit reached, a table too large).
    pub notes: Vec<String>,
}

impl DbConstraints {
    /// No constraint at all (`ts_ex_strict`).
    pub fn none() -> DbConstraints {
        DbConstraints::default()
    }

    /// What the schema declares: primary keys (NOT NULL, and UNIQUE when single-column),
    /// declared NOT NULL and single-column UNIQUE, and foreign keys (references).
    pub fn declared(db: &DbSchema) -> DbConstraints {
        let mut out = DbConstraints::default();
        for key in &db.primary_keys {
            for &c in key {
                out.add(Rule::NotNull { column: c }, Origin::Declared);
            }
            if let [c] = key[..] {
                out.add(Rule::Unique { column: c }, Origin::Declared);
            }
        }
        for (c, _) in db.columns.iter().enumerate() {
            let Some(key) = db.column_key(c) else {
                continue;
            };
            if db.not_null.contains(&key) {
                out.add(Rule::NotNull { column: c }, Origin::Declared);
            }
            if db.unique.contains(&key) {
                out.add(Rule::Unique { column: c }, Origin::Declared);
            }
        }
        for &(from, to) in &db.foreign_keys {
            out.add(Rule::References { from, to }, Origin::Declared);
        }
        out
    }

    /// Schema only (no real database): what is declared, and what people assume — foreign-key
    /// columns are not NULL (a key whose value is missing is not a key).
    pub fn from_schema(db: &DbSchema) -> DbConstraints {
        let mut out = DbConstraints::declared(db);
        for &(from, _) in &db.foreign_keys {
            out.add(Rule::NotNull { column: from }, Origin::Assumed);
        }
        for t in 0..db.tables.len() {
            let columns = table_columns(db, t);
            let key = db.primary_keys.iter().find(|k| {
                k.first()
                    .and_then(|c| db.columns.get(*c))
                    .is_some_and(|c| c.table == t)
            });
            // A lookup table — a key and one text — names each thing once: the text is there
            // and unique (`alignment(id, alignment)`, `gender(id, gender)`).
            if let (Some([k]), [a, b]) = (key.map(Vec::as_slice), columns.as_slice()) {
                let label = if a == k { *b } else { *a };
                if db.columns[label].ty == crate::catalogue::ColumnType::Text {
                    out.add(Rule::NotNull { column: label }, Origin::Assumed);
                    out.add(Rule::Unique { column: label }, Origin::Assumed);
                }
            }
            // A link table — no key of its own, two or more foreign keys — holds each link once.
            let links: Vec<usize> = columns
                .iter()
                .copied()
                .filter(|c| db.foreign_keys.iter().any(|(from, _)| from == c))
                .collect();
            if key.is_none() && links.len() >= 2 {
                out.add(Rule::UniqueTogether { columns: links }, Origin::Assumed);
            }
        }
        for table in entity_tables(db, &out) {
            out.add(Rule::NonEmpty { table }, Origin::Assumed);
        }
        out
    }

    /// Add a constraint unless one with the same rule is there already.
    pub fn add(&mut self, rule: Rule, origin: Origin) {
        if !self.constraints.iter().any(|c| c.rule == rule) {
            self.constraints.push(Constraint { rule, origin });
        }
    }

    /// Whether a NOT NULL constraint holds for `column`.
    pub fn not_null(&self, column: usize) -> bool {
        self.constraints
            .iter()
            .any(|c| c.rule == Rule::NotNull { column })
    }

    /// Whether a UNIQUE constraint holds for `column`.
    pub fn unique(&self, column: usize) -> bool {
        self.constraints
            .iter()
            .any(|c| c.rule == Rule::Unique { column })
    }

    /// The columns `column`'s values must occur in.
    pub fn references_from(&self, column: usize) -> impl Iterator<Item = usize> + '_ {
        self.constraints.iter().filter_map(move |c| match c.rule {
            Rule::References { from, to } if from == column => Some(to),
            _ => None,
        })
    }

    /// Whether `v` may stand in `column` (domains and ranges, with the `planted` numbers
    /// admitted in ranges; NULL is a matter of [`DbConstraints::not_null`]).
    pub fn admits(&self, column: usize, v: &SqlValue, planted: &[f64]) -> bool {
        matches!(v, SqlValue::Null)
            || self
                .constraints
                .iter()
                .all(|c| c.rule.admits(column, v, planted))
    }

    /// The key ↔ label constraints of table `t`.
    pub fn key_labels(&self, db: &DbSchema, t: usize) -> Vec<&Constraint> {
        self.constraints
            .iter()
            .filter(|c| {
                matches!(&c.rule, Rule::KeyLabel { key, .. }
                    if db.columns.get(*key).is_some_and(|k| k.table == t))
            })
            .collect()
    }

    /// The constraints that touch any of `tables`, described for people.
    pub fn describe_for(&self, db: &DbSchema, tables: &[usize]) -> Vec<String> {
        self.constraints
            .iter()
            .filter(|c| c.rule.tables(db).iter().any(|t| tables.contains(t)))
            .map(|c| c.describe(db))
            .collect()
    }

    /// The constraints the rows break (indices into `constraints`), with the `planted`
    /// numbers admitted in ranges ([`Rule::admits`]). A table absent from `rows` is empty,
    /// except that [`Rule::NonEmpty`] binds only the tables in `rows`.
    pub fn violations(&self, db: &DbSchema, rows: &TableRows, planted: &[f64]) -> Vec<usize> {
        let data = ColumnData::new(db, rows);
        (0..self.constraints.len())
            .filter(|&i| !data.satisfies(&self.constraints[i].rule, planted))
            .collect()
    }

    /// Delete rows whose value is missing from a column it must reference, until every
    /// reference holds (a fixpoint: a deletion can only break another reference to the deleted
    /// row's table, and rows only go). Deletion keeps every other kind of constraint.
    pub fn repair_references(&self, db: &DbSchema, rows: &mut [(usize, Vec<Vec<SqlValue>>)]) {
        let refs: Vec<(usize, usize)> = self
            .constraints
            .iter()
            .filter_map(|c| match c.rule {
                Rule::References { from, to } => Some((from, to)),
                _ => None,
            })
            .collect();
        let position = |c: usize| -> Option<(usize, usize)> {
            let table = db.columns.get(c)?.table;
            let slot = rows.iter().position(|(t, _)| *t == table)?;
            let at = table_columns(db, table).iter().position(|&x| x == c)?;
            Some((slot, at))
        };
        let located: Vec<_> = refs
            .iter()
            .map(|&(from, to)| (position(from), position(to), from))
            .collect();
        loop {
            let mut changed = false;
            for (from, to, from_column) in &located {
                let Some((fslot, fat)) = *from else {
                    continue;
                };
                // A referenced table that is not generated is empty: no value may reference it.
                let targets: HashSet<ValueKey> = match to {
                    Some((tslot, tat)) => rows[*tslot]
                        .1
                        .iter()
                        .filter_map(|r| r.get(*tat))
                        .filter(|v| !matches!(v, SqlValue::Null))
                        .map(SqlValue::key)
                        .collect(),
                    None if db.columns.get(*from_column).is_some() => HashSet::new(),
                    None => continue,
                };
                let before = rows[fslot].1.len();
                rows[fslot].1.retain(|r| {
                    r.get(fat)
                        .is_none_or(|v| matches!(v, SqlValue::Null) || targets.contains(&v.key()))
                });
                changed |= rows[fslot].1.len() != before;
            }
            if !changed {
                break;
            }
        }
    }

    /// Make generated rows keep every constraint repair can reach: [`Self::repair_references`],
    /// then [`Self::repair_paths`], until neither changes anything (a few rounds at most; what
    /// is still broken then is caught by [`Self::violations`]).
    pub fn repair(&self, db: &DbSchema, rows: &mut [(usize, Vec<Vec<SqlValue>>)]) {
        for _ in 0..4 {
            self.repair_references(db, rows);
            let determined = self.repair_determines(db, rows);
            if !self.repair_paths(db, rows) && !determined {
                return;
            }
        }
        self.repair_references(db, rows);
    }

    /// Make every [`Rule::Determines`] hold: a row whose `from` value an earlier row holds takes
    /// that row's `to` value (NULLs left alone). Returns whether anything changed.
    pub fn repair_determines(
        &self,
        db: &DbSchema,
        rows: &mut [(usize, Vec<Vec<SqlValue>>)],
    ) -> bool {
        let mut changed = false;
        for constraint in &self.constraints {
            let Rule::Determines { from, to } = constraint.rule else {
                continue;
            };
            let Some(table) = db.columns.get(from).map(|c| c.table) else {
                continue;
            };
            let columns = table_columns(db, table);
            let (Some(f), Some(d), Some(slot)) = (
                columns.iter().position(|&c| c == from),
                columns.iter().position(|&c| c == to),
                rows.iter().position(|(t, _)| *t == table),
            ) else {
                continue;
            };
            let mut first: HashMap<ValueKey, SqlValue> = HashMap::new();
            for row in rows[slot].1.iter_mut() {
                let (Some(a), Some(b)) = (row.get(f), row.get(d)) else {
                    continue;
                };
                if matches!(a, SqlValue::Null) || matches!(b, SqlValue::Null) {
                    continue;
                }
                let want = first.entry(a.key()).or_insert_with(|| b.clone()).clone();
                if want.key() != b.key() {
                    row[d] = want;
                    changed = true;
                }
            }
        }
        changed
    }

    /// Make every [`Rule::PathsAgree`] hold: a row whose two paths reach different values is
    /// re-pointed — its `via` column (the right path's, else the left's) set to the key of a row
    /// of the other table that holds the value the other path reaches (spread over the matches
    /// by the row's position, so the repair stays deterministic) — or deleted when no such row
    /// exists. Returns whether anything changed; a deletion can leave references dangling,
    /// which [`Self::repair`] repairs next.
    pub fn repair_paths(&self, db: &DbSchema, rows: &mut [(usize, Vec<Vec<SqlValue>>)]) -> bool {
        let mut changed = false;
        for constraint in &self.constraints {
            let Rule::PathsAgree { table, left, right } = &constraint.rule else {
                continue;
            };
            let Some(slot) = rows.iter().position(|(t, _)| t == table) else {
                continue;
            };
            let (moved, kept) = match (right.via, left.via) {
                (Some(_), _) => (right, left),
                (None, Some(_)) => (left, right),
                (None, None) => continue,
            };
            let Some((from, to)) = moved.via else {
                continue;
            };
            let Some(from_at) = table_columns(db, *table).iter().position(|&c| c == from) else {
                continue;
            };
            // `Some(None)`: delete the row; `Some(Some(key))`: re-point it.
            let plan: Vec<Option<Option<SqlValue>>> = {
                let data = ColumnData::new(db, rows);
                let (Some(&(targets, to_at)), Some(&(_, value_at))) =
                    (data.columns.get(&to), data.columns.get(&moved.value))
                else {
                    continue;
                };
                rows[slot]
                    .1
                    .iter()
                    .enumerate()
                    .map(|(i, row)| {
                        let (a, b) = (data.reached(row, moved), data.reached(row, kept));
                        if a.iter().all(|x| b.iter().all(|y| x == y)) {
                            return None;
                        }
                        let want = b.first()?;
                        let matches: Vec<&SqlValue> = targets
                            .iter()
                            .filter(|t| t.get(value_at).is_some_and(|v| v.key() == *want))
                            .filter_map(|t| t.get(to_at))
                            .filter(|k| !matches!(k, SqlValue::Null))
                            .collect();
                        Some(match matches.len() {
                            0 => None,
                            n => Some(matches[i % n].clone()),
                        })
                    })
                    .collect()
            };
            if plan.iter().all(Option::is_none) {
                continue;
            }
            changed = true;
            let mut i = 0;
            rows[slot].1.retain_mut(|row| {
                let step = plan.get(i).cloned().flatten();
                i += 1;
                match step {
                    None => true,
                    Some(None) => false,
                    Some(Some(key)) => {
                        if let Some(cell) = row.get_mut(from_at) {
                            *cell = key;
                        }
                        true
                    }
                }
            });
        }
        changed
    }
}

/// The tables a database is about: those another table references, and those that reference
/// none; the others (tables that only reference others: links, events, details) may be empty.
pub fn entity_tables(db: &DbSchema, constraints: &DbConstraints) -> Vec<usize> {
    let edges: Vec<(usize, usize)> = constraints
        .constraints
        .iter()
        .filter_map(|c| match c.rule {
            Rule::References { from, to } => {
                Some((db.columns.get(from)?.table, db.columns.get(to)?.table))
            }
            _ => None,
        })
        .filter(|(a, b)| a != b)
        .collect();
    (0..db.tables.len())
        .filter(|t| {
            !table_columns(db, *t).is_empty()
                && (edges.iter().any(|(_, to)| to == t) || !edges.iter().any(|(from, _)| from == t))
        })
        .collect()
}

/// Column values of generated rows, by column index.
struct ColumnData<'a> {
    /// Column → (its table's rows, its position in them).
    columns: HashMap<usize, (&'a [Vec<SqlValue>], usize)>,
    /// Table → its rows.
    tables: HashMap<usize, &'a [Vec<SqlValue>]>,
}

impl<'a> ColumnData<'a> {
    fn new(db: &DbSchema, rows: &'a TableRows) -> ColumnData<'a> {
        let mut columns = HashMap::new();
        let mut tables = HashMap::new();
        for (t, table_rows) in rows {
            tables.insert(*t, table_rows.as_slice());
            for (at, c) in table_columns(db, *t).into_iter().enumerate() {
                columns.insert(c, (table_rows.as_slice(), at));
            }
        }
        ColumnData { columns, tables }
    }

    /// The non-NULL values of column `c` (none when its table is not generated).
    fn non_null(&self, c: usize) -> Vec<&'a SqlValue> {
        let Some(&(rows, at)) = self.columns.get(&c) else {
            return Vec::new();
        };
        rows.iter()
            .filter_map(|r| r.get(at))
            .filter(|v| !matches!(v, SqlValue::Null))
            .collect()
    }

    /// The non-NULL values `path` reaches from `row` (a row of its table, in [`table_columns`]
    /// order): its own column's, or those of the rows of the `via` table whose key matches.
    fn reached(&self, row: &[SqlValue], path: &ValuePath) -> Vec<ValueKey> {
        let present = |v: &&SqlValue| !matches!(v, SqlValue::Null);
        match path.via {
            None => self
                .columns
                .get(&path.value)
                .and_then(|&(_, at)| row.get(at))
                .filter(present)
                .map(SqlValue::key)
                .into_iter()
                .collect(),
            Some((from, to)) => {
                let (Some(&(_, fat)), Some(&(targets, tat)), Some(&(_, vat))) = (
                    self.columns.get(&from),
                    self.columns.get(&to),
                    self.columns.get(&path.value),
                ) else {
                    return Vec::new();
                };
                let Some(key) = row.get(fat).filter(present).map(SqlValue::key) else {
                    return Vec::new();
                };
                targets
                    .iter()
                    .filter(|t| t.get(tat).is_some_and(|k| k.key() == key))
                    .filter_map(|t| t.get(vat).filter(present).map(SqlValue::key))
                    .collect()
            }
        }
    }

    fn satisfies(&self, rule: &Rule, planted: &[f64]) -> bool {
        match rule {
            Rule::NotNull { column } => self.columns.get(column).is_none_or(|&(rows, at)| {
                rows.iter()
                    .all(|r| !matches!(r.get(at), Some(SqlValue::Null)))
            }),
            Rule::Unique { column } => {
                let mut seen = HashSet::new();
                self.non_null(*column).iter().all(|v| seen.insert(v.key()))
            }
            Rule::References { from, to } => {
                let targets: HashSet<ValueKey> =
                    self.non_null(*to).iter().map(|v| v.key()).collect();
                self.non_null(*from)
                    .iter()
                    .all(|v| targets.contains(&v.key()))
            }
            Rule::Domain { column, .. }
            | Rule::Range { column, .. }
            | Rule::Shaped { column, .. }
            | Rule::DigitText { column }
            | Rule::NotEmpty { column } => self
                .non_null(*column)
                .iter()
                .all(|v| rule.admits(*column, v, planted)),
            Rule::UniqueTogether { columns } => {
                let positions: Vec<usize> = columns
                    .iter()
                    .filter_map(|c| self.columns.get(c).map(|&(_, at)| at))
                    .collect();
                let Some(&(rows, _)) = columns.first().and_then(|c| self.columns.get(c)) else {
                    return true;
                };
                let mut seen = HashSet::new();
                rows.iter().all(|r| {
                    let key: Vec<ValueKey> = positions
                        .iter()
                        .filter_map(|&p| r.get(p))
                        .map(SqlValue::key)
                        .collect();
                    seen.insert(key)
                })
            }
            Rule::AtMostOnce { column, value } => {
                self.non_null(*column)
                    .iter()
                    .filter(|v| v.key() == value.key())
                    .count()
                    <= 1
            }
            // Binds the tables generated; the others are not part of the database at all.
            Rule::NonEmpty { table } => self.tables.get(table).is_none_or(|rows| !rows.is_empty()),
            Rule::Determines { from, to } => {
                let (Some(&(rows, f)), Some(&(_, d))) =
                    (self.columns.get(from), self.columns.get(to))
                else {
                    return true;
                };
                let mut seen: HashMap<ValueKey, ValueKey> = HashMap::new();
                rows.iter().all(|r| match (r.get(f), r.get(d)) {
                    (Some(a), Some(b))
                        if !matches!(a, SqlValue::Null) && !matches!(b, SqlValue::Null) =>
                    {
                        *seen.entry(a.key()).or_insert_with(|| b.key()) == b.key()
                    }
                    _ => true,
                })
            }
            Rule::PathsAgree { table, left, right } => {
                let Some(rows) = self.tables.get(table) else {
                    return true;
                };
                rows.iter().all(|row| {
                    let (a, b) = (self.reached(row, left), self.reached(row, right));
                    a.iter().all(|x| b.iter().all(|y| x == y))
                })
            }
            Rule::KeyLabel { key, label, pairs } => {
                let (Some(&(rows, k)), Some(&(_, l))) =
                    (self.columns.get(key), self.columns.get(label))
                else {
                    return true;
                };
                let allowed: HashSet<(ValueKey, ValueKey)> =
                    pairs.iter().map(|(a, b)| (a.key(), b.key())).collect();
                rows.iter().all(|r| match (r.get(k), r.get(l)) {
                    (Some(a), Some(b)) => allowed.contains(&(a.key(), b.key())),
                    _ => true,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::SchemaCatalog;

    fn shop() -> DbSchema {
        SchemaCatalog::parse_simple(
            r#"{"db_id": "shop", "tables": [
                {"name": "kind", "primary_key": ["id"], "columns": [
                    {"name": "id", "type": "integer"}, {"name": "label", "type": "text"}]},
                {"name": "item", "primary_key": ["id"], "columns": [
                    {"name": "id", "type": "integer"},
                    {"name": "kind_id", "type": "integer", "references": "kind.id"},
                    {"name": "price", "type": "real"}]}
            ]}"#,
            true,
        )
        .unwrap()
        .get("shop")
        .unwrap()
        .clone()
    }

    fn col(db: &DbSchema, table: &str, name: &str) -> usize {
        let t = db.table_index(table).unwrap();
        db.column_index(t, name).unwrap()
    }

    #[test]
    fn schema_only_assumes_what_people_assume() {
        let db = shop();
        let c = DbConstraints::from_schema(&db);
        let described: Vec<String> = c.constraints.iter().map(|k| k.describe(&db)).collect();
        for want in [
            "kind.id NOT NULL (declared)",
            "kind.id UNIQUE (declared)",
            "item.kind_id → kind.id (declared)",
            "item.kind_id NOT NULL (assumed)",
            "kind.label UNIQUE (assumed)",
            "kind has rows (assumed)",
        ] {
            assert!(
                described.iter().any(|d| d == want),
                "{want}: {described:#?}"
            );
        }
        // `item` only references: it may be empty.
        assert!(!described.iter().any(|d| d == "item has rows (assumed)"));
        assert!(!c.mined);
        assert!(DbConstraints::none().constraints.is_empty());
    }

    #[test]
    fn violations_repair_and_the_sql_agree() {
        let db = shop();
        let c = DbConstraints::from_schema(&db);
        let (kind, item) = (
            db.table_index("kind").unwrap(),
            db.table_index("item").unwrap(),
        );
        let i = SqlValue::Integer;
        let t = |s: &str| SqlValue::Text(s.into());
        let mut rows = vec![
            (kind, vec![vec![i(1), t("a")], vec![i(2), t("b")]]),
            (
                item,
                vec![
                    vec![i(10), i(1), SqlValue::Real(2.5)],
                    vec![i(11), i(3), SqlValue::Null],
                ],
            ),
        ];
        let broken: Vec<String> = c
            .violations(&db, &rows, &[])
            .into_iter()
            .map(|k| c.constraints[k].describe(&db))
            .collect();
        assert_eq!(broken, ["item.kind_id → kind.id (declared)"]);
        c.repair_references(&db, &mut rows);
        assert_eq!(rows[1].1.len(), 1);
        assert!(c.violations(&db, &rows, &[]).is_empty());
        // A duplicate label and an emptied entity table are caught too.
        let dup = vec![(kind, vec![vec![i(1), t("a")], vec![i(2), t("a")]])];
        assert_eq!(c.violations(&db, &dup, &[]).len(), 1);
        let empty = vec![(kind, vec![])];
        assert!(!c.violations(&db, &empty, &[]).is_empty());
        // Ranges admit the planted numbers.
        let price = col(&db, "item", "price");
        let range = Rule::Range {
            column: price,
            min: 1.0,
            max: 5.0,
        };
        assert!(!range.admits(price, &SqlValue::Real(7.0), &[]));
        assert!(range.admits(price, &SqlValue::Real(7.0), &[7.0]));
        let sql = Constraint {
            rule: range,
            origin: Origin::Observed,
        }
        .violation_sql(&db, &[7.0])
        .unwrap();
        assert!(sql.contains("\"price\" NOT IN (7.0)"), "{sql}");
        // Key ↔ label pairs come from the real data.
        let kl = Rule::KeyLabel {
            key: col(&db, "kind", "id"),
            label: col(&db, "kind", "label"),
            pairs: vec![(i(1), t("a")), (i(2), t("b"))],
        };
        let kl = DbConstraints {
            constraints: vec![Constraint {
                rule: kl,
                origin: Origin::Observed,
            }],
            ..DbConstraints::default()
        };
        let swapped = vec![(kind, vec![vec![i(1), t("b")]])];
        assert_eq!(kl.violations(&db, &swapped, &[]), [0]);
        assert!(
            kl.constraints[0]
                .violation_sql(&db, &[])
                .unwrap()
                .contains("NOT IN (VALUES (1, 'a'), (2, 'b'))")
        );
    }

    #[test]
    fn paths_that_reach_one_thing_agree_after_repair() {
        let db = SchemaCatalog::parse_simple(
            r#"{"db_id": "chem", "tables": [
                {"name": "atom", "primary_key": ["atom_id"], "columns": [
                    {"name": "atom_id", "type": "text"}, {"name": "molecule_id", "type": "text"}]},
                {"name": "bond", "primary_key": ["bond_id"], "columns": [
                    {"name": "bond_id", "type": "text"}, {"name": "molecule_id", "type": "text"}]},
                {"name": "connected", "primary_key": [], "columns": [
                    {"name": "atom_id", "type": "text", "references": "atom.atom_id"},
                    {"name": "bond_id", "type": "text", "references": "bond.bond_id"}]}
            ]}"#,
            true,
        )
        .unwrap()
        .get("chem")
        .unwrap()
        .clone();
        let (atom, bond, connected) = (
            db.table_index("atom").unwrap(),
            db.table_index("bond").unwrap(),
            db.table_index("connected").unwrap(),
        );
        let rule = Rule::PathsAgree {
            table: connected,
            left: ValuePath {
                via: Some((
                    col(&db, "connected", "atom_id"),
                    col(&db, "atom", "atom_id"),
                )),
                value: col(&db, "atom", "molecule_id"),
            },
            right: ValuePath {
                via: Some((
                    col(&db, "connected", "bond_id"),
                    col(&db, "bond", "bond_id"),
                )),
                value: col(&db, "bond", "molecule_id"),
            },
        };
        let c = DbConstraints {
            constraints: vec![Constraint {
                rule,
                origin: Origin::Observed,
            }],
            ..DbConstraints::default()
        };
        assert_eq!(
            c.constraints[0].describe(&db),
            "on every connected row, atom.molecule_id via connected.atom_id = bond.molecule_id via connected.bond_id (observed)"
        );
        let t = |s: &str| SqlValue::Text(s.into());
        let mut rows = vec![
            (atom, vec![vec![t("a1"), t("m1")], vec![t("a2"), t("m2")]]),
            (bond, vec![vec![t("b1"), t("m1")], vec![t("b2"), t("m2")]]),
            (
                connected,
                vec![
                    vec![t("a1"), t("b1")], // agrees
                    vec![t("a2"), t("b1")], // m2 against m1: re-pointed to b2
                    vec![t("a9"), t("b2")], // reaches no atom: nothing to compare
                ],
            ),
        ];
        assert_eq!(c.violations(&db, &rows, &[]), [0]);
        assert!(c.repair_paths(&db, &mut rows));
        assert_eq!(rows[2].1[1], vec![t("a2"), t("b2")]);
        assert_eq!(rows[2].1.len(), 3);
        assert!(c.violations(&db, &rows, &[]).is_empty());
        assert!(!c.repair_paths(&db, &mut rows), "nothing left to repair");
        // A molecule no bond is in: the row goes.
        rows[0].1.push(vec![t("a3"), t("m3")]);
        rows[2].1.push(vec![t("a3"), t("b1")]);
        assert!(c.repair_paths(&db, &mut rows));
        assert_eq!(rows[2].1.len(), 3);
        // The SQL counts the same violations, and the support query the rows reaching both.
        let sql = c.constraints[0].violation_sql(&db, &[]).unwrap();
        assert_eq!(
            sql,
            "SELECT COUNT(*) FROM \"connected\" AS r JOIN \"atom\" AS a ON a.\"atom_id\" = r.\"atom_id\" JOIN \"bond\" AS b ON b.\"bond_id\" = r.\"bond_id\" WHERE a.\"molecule_id\" IS NOT NULL AND b.\"molecule_id\" IS NOT NULL AND a.\"molecule_id\" <> b.\"molecule_id\""
        );
    }

    #[test]
    fn shapes_glob_and_complete_a_planted_literal() {
        assert_eq!(shape_of("2020-03-10T12:00:00"), "9999-99-99a99:99:99");
        assert_eq!(shape_of("TR001_10"), "aa999_99");
        assert_eq!(shape_glob("a9*"), "[A-Za-z][0-9][*]");
        assert_eq!(
            complete_to_shape("2020", "9999-99-99", "2018-05-01").as_deref(),
            Some("2020-05-01")
        );
        assert_eq!(complete_to_shape("May", "9999-99-99", "2018-05-01"), None);
        assert_eq!(complete_to_shape("2020", "9999-99-99", "oops"), None);
        let rule = Rule::Shaped {
            column: 0,
            shape: "9999-99-99".into(),
        };
        assert!(rule.admits(0, &SqlValue::Text("2020-05-01".into()), &[]));
        assert!(!rule.admits(0, &SqlValue::Text("2020".into()), &[]));
        assert!(!rule.admits(0, &SqlValue::Integer(2020), &[]));
        let digits = Rule::DigitText { column: 0 };
        assert!(digits.admits(0, &SqlValue::Text("00123".into()), &[]));
        assert!(!digits.admits(0, &SqlValue::Text("12a".into()), &[]));
        assert!(!digits.admits(0, &SqlValue::Text(String::new()), &[]));
        let filled = Rule::NotEmpty { column: 0 };
        assert!(filled.admits(0, &SqlValue::Text("x".into()), &[]));
        assert!(!filled.admits(0, &SqlValue::Text(String::new()), &[]));
        let db = shop();
        let label = col(&db, "kind", "label");
        let sql = |rule: Rule| {
            Constraint {
                rule,
                origin: Origin::Observed,
            }
            .violation_sql(&db, &[])
            .unwrap()
        };
        assert!(sql(Rule::DigitText { column: label }).contains("GLOB '*[^0-9]*'"));
        assert!(sql(Rule::NotEmpty { column: label }).ends_with("WHERE \"label\" = ''"));
    }

    #[test]
    fn a_determined_column_is_copied_from_the_first_row_of_its_key() {
        let db = shop();
        let (kind, item) = (
            db.table_index("kind").unwrap(),
            db.table_index("item").unwrap(),
        );
        let rule = Rule::Determines {
            from: col(&db, "item", "kind_id"),
            to: col(&db, "item", "price"),
        };
        let c = DbConstraints {
            constraints: vec![Constraint {
                rule,
                origin: Origin::Observed,
            }],
            ..DbConstraints::default()
        };
        let (i, r) = (SqlValue::Integer, SqlValue::Real);
        let mut rows = vec![
            (kind, vec![vec![i(1), SqlValue::Text("a".into())]]),
            (
                item,
                vec![
                    vec![i(10), i(1), r(2.5)],
                    vec![i(11), i(1), r(3.0)],
                    vec![i(12), i(1), SqlValue::Null],
                    vec![i(13), i(2), r(9.0)],
                ],
            ),
        ];
        assert_eq!(c.violations(&db, &rows, &[]), [0]);
        assert!(c.repair_determines(&db, &mut rows));
        assert_eq!(rows[1].1[1][2], r(2.5));
        assert_eq!(rows[1].1[2][2], SqlValue::Null, "NULL left alone");
        assert!(c.violations(&db, &rows, &[]).is_empty());
        assert_eq!(
            c.constraints[0].describe(&db),
            "item.kind_id determines item.price (observed)"
        );
        assert!(
            c.constraints[0]
                .violation_sql(&db, &[])
                .unwrap()
                .contains("GROUP BY \"kind_id\" HAVING COUNT(DISTINCT \"price\") > 1")
        );
    }
}
