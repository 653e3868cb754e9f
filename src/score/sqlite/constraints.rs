//! Mining a real database's constraints for `ts_ex` (the core's
//! [`DbConstraints`]): what its schema declares, and what its data shows — columns with no
//! NULL, columns whose values are distinct, small value domains, numeric ranges, text columns
//! of one fixed shape (ISO dates and times, fixed-width codes: [`Rule::Shaped`]) or of digits of
//! varying length ([`Rule::DigitText`]), text columns never NULL nor empty, columns whose
//! values all occur in another column (declared foreign keys checked, undeclared ones found by
//! name), and key ↔ label columns that map one to one (with the real pairs).
//!
//! Bounded: one read-only connection, every query under the time left of one budget (default
//! 2 s per database); what the budget did not reach is not assumed, and `notes` says so. A
//! declared foreign key is kept even where the data breaks it (the schema's word is what people
//! reason with: a bond names a molecule that exists), with a note. Also observed: the rows of a
//! link table (two or more key-like columns) hold each combination of keys once, a table with
//! no primary key holds no duplicate rows, and the tables a database is about (referenced by
//! others, or referencing none) have rows; and, across tables, two join paths from one table's
//! rows that reach the same kind of value and never disagree (a bond's molecule is its atoms'
//! molecule on every `connected` row: [`Rule::PathsAgree`], at most
//! [`MiningLimits::max_path_checks`] candidates); and within a table, a repeating key that
//! determines another column ([`Rule::Determines`]).
//!
//! Each inclusion check is the constraint's own [`Constraint::violation_sql`] run on the real
//! database: a constraint is observed when it has no violation there.

use std::path::Path;
use std::time::{Duration, Instant};

use sqlgrade_core::catalogue::DbSchema;
use sqlgrade_core::exec::{ResultSet, SqlValue};
use sqlgrade_core::metrics::ts_ex::constraints::{
    Constraint, DbConstraints, Origin, Rule, ValuePath, entity_tables, paths_sql, quote_identifier,
    shape_of, table_columns,
};

use super::executor::{ExecLimits, open_guarded};

/// Bounds of mining one database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MiningLimits {
    /// Wall-clock budget for all of a database's queries.
    pub budget: Duration,
    /// Largest number of distinct values a column may hold to count as an enumeration.
    pub max_domain: usize,
    /// Largest table whose key ↔ label pairs are read (lookup tables are small).
    pub max_pair_rows: usize,
    /// Most undeclared inclusion candidates checked.
    pub max_inclusion_checks: usize,
    /// Most pairs of join paths checked for agreement ([`Rule::PathsAgree`]).
    pub max_path_checks: usize,
    /// Most functional dependencies within a table checked ([`Rule::Determines`]).
    pub max_dependency_checks: usize,
}

impl Default for MiningLimits {
    fn default() -> Self {
        MiningLimits {
            budget: Duration::from_secs(2),
            max_domain: 10,
            max_pair_rows: 1_000,
            max_inclusion_checks: 200,
            max_path_checks: 100,
            max_dependency_checks: 100,
        }
    }
}

/// One column's statistics in the real data.
#[derive(Debug, Clone, Default)]
struct ColumnStats {
    column: usize,
    non_null: i64,
    distinct: i64,
    numeric: i64,
    min: Option<f64>,
    max: Option<f64>,
}

/// A table's row count and its columns' statistics.
struct TableStats {
    rows: i64,
    columns: Vec<ColumnStats>,
}

fn int(v: Option<&SqlValue>) -> i64 {
    match v {
        Some(SqlValue::Integer(i)) => *i,
        Some(SqlValue::Real(x)) => *x as i64,
        _ => 0,
    }
}

fn float(v: Option<&SqlValue>) -> Option<f64> {
    match v {
        Some(SqlValue::Integer(i)) => Some(*i as f64),
        Some(SqlValue::Real(x)) => Some(*x),
        _ => None,
    }
}

/// The single number a `SELECT COUNT(*) …` returns (`None`: the query failed or ran out of
/// time).
fn count(run: &dyn Fn(&str) -> Option<ResultSet>, sql: &str) -> Option<i64> {
    run(sql).map(|rs| int(rs.rows.first().and_then(|r| r.first())))
}

/// Whether the real data breaks `rule` nowhere: its own violation query counts 0 (`None`: the
/// query could not be written or run).
fn holds_in_data(
    db: &DbSchema,
    run: &dyn Fn(&str) -> Option<ResultSet>,
    rule: &Rule,
) -> Option<bool> {
    let sql = Constraint {
        rule: rule.clone(),
        origin: Origin::Observed,
    }
    .violation_sql(db, &[])?;
    count(run, &sql).map(|violations| violations == 0)
}

/// Mine the database at `path` (the real one of `db`), starting from what `db` declares.
pub fn mine(db: &DbSchema, path: &Path, limits: MiningLimits) -> DbConstraints {
    let conn = match open_guarded(path) {
        Ok(c) => c,
        Err(e) => {
            let mut schema_only = DbConstraints::from_schema(db);
            schema_only.notes.push(format!(
                "the real database could not be opened ({e}): schema only"
            ));
            return schema_only;
        }
    };
    let mut out = DbConstraints::declared(db);
    out.mined = true;
    let deadline = Instant::now() + limits.budget;
    let run = |sql: &str| -> Option<ResultSet> {
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|left| !left.is_zero())?;
        let exec = ExecLimits {
            timeout: left,
            max_rows: limits.max_pair_rows + 1,
            ..ExecLimits::default()
        };
        conn.run(sql, exec).ok()
    };
    let mut stats: Vec<Option<TableStats>> = Vec::new();
    for (t, table) in db.tables.iter().enumerate() {
        let columns = table_columns(db, t);
        let mut select = vec!["COUNT(*)".to_string()];
        for &c in &columns {
            let name = quote_identifier(&db.columns[c].name);
            select.push(format!(
                "COUNT({name}), COUNT(DISTINCT {name}), SUM(typeof({name}) IN ('integer', 'real')), MIN({name}), MAX({name})"
            ));
        }
        let sql = format!(
            "SELECT {} FROM {}",
            select.join(", "),
            quote_identifier(table)
        );
        let Some(rs) = run(&sql) else {
            out.notes.push(format!(
                "table {table}: not mined (the time budget of {} ms ran out, or the query failed)",
                limits.budget.as_millis()
            ));
            stats.push(None);
            continue;
        };
        let row = rs.rows.first().cloned().unwrap_or_default();
        let mut table_stats = TableStats {
            rows: int(row.first()),
            columns: Vec::new(),
        };
        for (i, &c) in columns.iter().enumerate() {
            let at = 1 + i * 5;
            let numeric = int(row.get(at + 2));
            table_stats.columns.push(ColumnStats {
                column: c,
                non_null: int(row.get(at)),
                distinct: int(row.get(at + 1)),
                numeric,
                min: float(row.get(at + 3)),
                max: float(row.get(at + 4)),
            });
        }
        observe_columns(db, t, &table_stats, &run, limits, &mut out);
        stats.push(Some(table_stats));
    }
    check_references(db, &stats, &run, limits, &mut out);
    observe_key_labels(db, &stats, &run, limits, &mut out);
    observe_unique_rows(db, &stats, &run, &mut out);
    observe_paths_agree(db, &stats, &run, limits, &mut out);
    observe_dependencies(db, &stats, &run, limits, &mut out);
    for table in entity_tables(db, &out) {
        if stats
            .get(table)
            .and_then(Option::as_ref)
            .is_some_and(|s| s.rows > 0)
        {
            out.add(Rule::NonEmpty { table }, Origin::Observed);
        }
    }
    out
}

/// Link tables' key combinations, and whole rows of tables without a primary key, distinct in
/// the data.
fn observe_unique_rows(
    db: &DbSchema,
    stats: &[Option<TableStats>],
    run: &dyn Fn(&str) -> Option<ResultSet>,
    out: &mut DbConstraints,
) {
    for (t, ts) in stats.iter().enumerate() {
        if ts.as_ref().is_none_or(|s| s.rows < 2) {
            continue;
        }
        let columns = table_columns(db, t);
        let has_key = db.primary_keys.iter().any(|k| {
            k.first()
                .and_then(|c| db.columns.get(*c))
                .is_some_and(|c| c.table == t)
        });
        let keys: Vec<usize> = columns
            .iter()
            .copied()
            .filter(|c| {
                db.foreign_keys.iter().any(|(from, _)| from == c)
                    || out
                        .constraints
                        .iter()
                        .any(|k| matches!(k.rule, Rule::References { from, .. } if from == *c))
            })
            .collect();
        let mut candidates = Vec::new();
        if keys.len() >= 2 {
            candidates.push(keys);
        }
        if !has_key && columns.len() >= 2 {
            candidates.push(columns);
        }
        for columns in candidates {
            let rule = Rule::UniqueTogether { columns };
            if holds_in_data(db, run, &rule) == Some(true) {
                out.add(rule, Origin::Observed);
            }
        }
    }
}

/// NOT NULL, UNIQUE, domains and ranges of one table's columns.
fn observe_columns(
    db: &DbSchema,
    t: usize,
    stats: &TableStats,
    run: &dyn Fn(&str) -> Option<ResultSet>,
    limits: MiningLimits,
    out: &mut DbConstraints,
) {
    if stats.rows == 0 {
        return;
    }
    let table = &db.tables[t];
    for s in &stats.columns {
        let c = s.column;
        if s.non_null == stats.rows {
            out.add(Rule::NotNull { column: c }, Origin::Observed);
        }
        if s.non_null >= 2 && s.distinct == s.non_null {
            out.add(Rule::Unique { column: c }, Origin::Observed);
        }
        if s.distinct >= 1 && s.distinct <= limits.max_domain as i64 && s.non_null >= 3 * s.distinct
        {
            let name = quote_identifier(&db.columns[c].name);
            let sql = format!(
                "SELECT DISTINCT {name} FROM {} WHERE {name} IS NOT NULL ORDER BY 1",
                quote_identifier(table)
            );
            if let Some(rs) = run(&sql) {
                let values: Vec<SqlValue> = rs
                    .rows
                    .into_iter()
                    .filter_map(|r| r.into_iter().next())
                    .collect();
                if !values.is_empty() && values.len() <= limits.max_domain {
                    out.add(Rule::Domain { column: c, values }, Origin::Observed);
                }
            }
        }
        if s.non_null > 0 && s.numeric == 0 {
            observe_shape(db, t, c, run, out);
            // A text column with values that are never empty (names, labels).
            let rule = Rule::NotEmpty { column: c };
            if s.non_null == stats.rows && holds_in_data(db, run, &rule) == Some(true) {
                out.add(rule, Origin::Observed);
            }
        }
        if s.non_null > 0
            && s.numeric == s.non_null
            && let (Some(min), Some(max)) = (s.min, s.max)
        {
            out.add(
                Rule::Range {
                    column: c,
                    min,
                    max,
                },
                Origin::Observed,
            );
        }
    }
}

/// A text column whose values all have one fixed shape with digits in it (dates, times, codes
/// like `2020-03-10T12:00:00` or `A-123`): sampled, then checked on every row by the rule's own
/// query.
fn observe_shape(
    db: &DbSchema,
    t: usize,
    c: usize,
    run: &dyn Fn(&str) -> Option<ResultSet>,
    out: &mut DbConstraints,
) {
    let name = quote_identifier(&db.columns[c].name);
    let sample = format!(
        "SELECT DISTINCT {name} FROM {} WHERE {name} IS NOT NULL LIMIT 20",
        quote_identifier(&db.tables[t])
    );
    let Some(rs) = run(&sample) else {
        return;
    };
    let mut shapes = rs.rows.iter().map(|r| match r.first() {
        Some(SqlValue::Text(text)) => Some(shape_of(text)),
        _ => None,
    });
    let texts: Vec<&str> = rs
        .rows
        .iter()
        .filter_map(|r| match r.first() {
            Some(SqlValue::Text(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    // Numeric text of varying length (fixed widths are shapes).
    if texts.len() == rs.rows.len()
        && texts.len() >= 2
        && texts
            .iter()
            .all(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
        && texts.iter().any(|t| t.len() != texts[0].len())
    {
        let rule = Rule::DigitText { column: c };
        if holds_in_data(db, run, &rule) == Some(true) {
            out.add(rule, Origin::Observed);
        }
        return;
    }
    let Some(Some(shape)) = shapes.next() else {
        return;
    };
    if shape.chars().count() < 4
        || !shape.contains('9')
        || !shapes.all(|other| other.as_deref() == Some(shape.as_str()))
    {
        return;
    }
    let rule = Rule::Shaped { column: c, shape };
    if holds_in_data(db, run, &rule) == Some(true) {
        out.add(rule, Origin::Observed);
    }
}

/// Whether a column name looks like a key (`molecule_id`, `link_to_member`, `size_code`).
fn key_like(name: &str) -> bool {
    let n = name.to_lowercase();
    n != "id"
        && (n.ends_with("id")
            || n.ends_with("_code")
            || n.ends_with("key")
            || n.starts_with("link_to_"))
}

/// Declared foreign keys checked against the data; undeclared inclusions found by name.
fn check_references(
    db: &DbSchema,
    stats: &[Option<TableStats>],
    run: &dyn Fn(&str) -> Option<ResultSet>,
    limits: MiningLimits,
    out: &mut DbConstraints,
) {
    let column_stats = |c: usize| -> Option<(&TableStats, &ColumnStats)> {
        let t = db.columns.get(c)?.table;
        let ts = stats.get(t)?.as_ref()?;
        Some((ts, ts.columns.iter().find(|s| s.column == c)?))
    };
    let holds = |rule: &Rule| holds_in_data(db, run, rule);
    // Declared: kept whatever the data says (the schema's word is what people reason with),
    // noted when the data breaks them.
    for &(from, to) in &db.foreign_keys {
        let rule = Rule::References { from, to };
        if holds(&rule) == Some(false) {
            out.notes.push(format!(
                "{}: rows of the real database break this declared foreign key; assumed anyway",
                Constraint {
                    rule,
                    origin: Origin::Declared
                }
                .describe(db)
            ));
        }
    }
    // Undeclared: a key-like column whose values all occur in a column of another table with
    // the same name (`bond.molecule_id` in `atom.molecule_id`), or in the key of the table it
    // names (`member.link_to_major` in `major.major_id`).
    let mut candidates: Vec<(usize, usize)> = Vec::new();
    for (a, ca) in db.columns.iter().enumerate() {
        if ca.table == usize::MAX || !key_like(&ca.name) {
            continue;
        }
        for (b, cb) in db.columns.iter().enumerate() {
            if cb.table == usize::MAX || cb.table == ca.table {
                continue;
            }
            let same_name = ca.name.eq_ignore_ascii_case(&cb.name);
            let names_table = db.is_single_pk(&db.column_key(b).unwrap_or_default())
                && db.tables.get(cb.table).is_some_and(|t| {
                    let n = ca.name.to_lowercase();
                    let t = t.to_lowercase();
                    n == format!("{t}_id") || n == format!("link_to_{t}") || n == format!("{t}id")
                });
            if (same_name || names_table) && !db.foreign_keys.contains(&(a, b)) {
                candidates.push((a, b));
            }
        }
    }
    let mut checked = 0;
    for (from, to) in candidates {
        let (Some((_, fs)), Some((_, ts))) = (column_stats(from), column_stats(to)) else {
            continue;
        };
        // Both hold values, of one kind (numbers with numbers, text with text).
        if fs.non_null == 0
            || ts.non_null == 0
            || (fs.numeric == fs.non_null) != (ts.numeric == ts.non_null)
        {
            continue;
        }
        if checked >= limits.max_inclusion_checks {
            out.notes.push(format!(
                "undeclared references: only the first {} candidates were checked",
                limits.max_inclusion_checks
            ));
            break;
        }
        checked += 1;
        let rule = Rule::References { from, to };
        if holds(&rule) == Some(true) {
            out.add(rule, Origin::Observed);
        }
    }
}

/// Key ↔ label pairs of small tables: a key (the primary key, or a number column with no NULL
/// and no duplicate) and a text column with no NULL and no duplicate map one to one.
fn observe_key_labels(
    db: &DbSchema,
    stats: &[Option<TableStats>],
    run: &dyn Fn(&str) -> Option<ResultSet>,
    limits: MiningLimits,
    out: &mut DbConstraints,
) {
    for (t, ts) in stats.iter().enumerate() {
        let Some(ts) = ts else {
            continue;
        };
        if ts.rows < 2 || ts.rows > limits.max_pair_rows as i64 {
            continue;
        }
        let unique_full = |s: &&ColumnStats| s.non_null == ts.rows && s.distinct == ts.rows;
        let key = ts.columns.iter().filter(unique_full).find(|s| {
            s.numeric == s.non_null
                && (db.is_primary_key_column(s.column)
                    || key_like(&db.columns[s.column].name)
                    || db.columns[s.column].name.eq_ignore_ascii_case("id"))
        });
        let Some(key) = key else {
            continue;
        };
        for label in ts.columns.iter().filter(unique_full) {
            if label.column == key.column || label.numeric != 0 {
                continue;
            }
            let (k, l) = (
                quote_identifier(&db.columns[key.column].name),
                quote_identifier(&db.columns[label.column].name),
            );
            let sql = format!(
                "SELECT {k}, {l} FROM {} ORDER BY 1",
                quote_identifier(&db.tables[t])
            );
            let Some(rs) = run(&sql) else {
                continue;
            };
            let pairs: Vec<(SqlValue, SqlValue)> = rs
                .rows
                .into_iter()
                .filter_map(|r| {
                    let mut r = r.into_iter();
                    Some((r.next()?, r.next()?))
                })
                .collect();
            if pairs.len() as i64 == ts.rows {
                out.add(
                    Rule::KeyLabel {
                        key: key.column,
                        label: label.column,
                        pairs,
                    },
                    Origin::Observed,
                );
            }
        }
    }
}

/// Whether two columns hold the same kind of thing: the same name (`atom.molecule_id`,
/// `bond.molecule_id`), or both referencing one column.
fn same_thing(db: &DbSchema, out: &DbConstraints, a: usize, b: usize) -> bool {
    let (Some(ca), Some(cb)) = (db.columns.get(a), db.columns.get(b)) else {
        return false;
    };
    if ca.name.eq_ignore_ascii_case(&cb.name) {
        return true;
    }
    let targets = |c: usize| -> Vec<usize> { out.references_from(c).collect() };
    let (ta, tb) = (targets(a), targets(b));
    ta.iter().any(|t| tb.contains(t)) || ta.contains(&b) || tb.contains(&a)
}

/// Cross-table consistency: for each table with rows, the values reachable from a row — its own
/// columns, and the columns of the rows its references name — taken in pairs that hold the
/// same kind of thing ([`same_thing`]) over two different routes; a pair is observed when the
/// real rows never disagree (its [`Constraint::violation_sql`] counts 0) and at least one row
/// reaches both values. A bond's molecule equals its atoms' molecule on every `connected` row:
/// a generated database that breaks it would refute `bond.molecule_id` against the gold's path
/// through `connected` and `atom`, which the real data never tells apart.
fn observe_paths_agree(
    db: &DbSchema,
    stats: &[Option<TableStats>],
    run: &dyn Fn(&str) -> Option<ResultSet>,
    limits: MiningLimits,
    out: &mut DbConstraints,
) {
    let references: Vec<(usize, usize)> = out
        .constraints
        .iter()
        .filter_map(|k| match k.rule {
            Rule::References { from, to } => Some((from, to)),
            _ => None,
        })
        .collect();
    let mut candidates: Vec<(usize, ValuePath, ValuePath)> = Vec::new();
    for (t, ts) in stats.iter().enumerate() {
        if ts.as_ref().is_none_or(|s| s.rows == 0) {
            continue;
        }
        let own = table_columns(db, t);
        let mut paths: Vec<ValuePath> = own
            .iter()
            .map(|&value| ValuePath { via: None, value })
            .collect();
        for &(from, to) in &references {
            let target = db.columns[to].table;
            if db.columns[from].table != t || target == t {
                continue;
            }
            for value in table_columns(db, target) {
                if value != to {
                    paths.push(ValuePath {
                        via: Some((from, to)),
                        value,
                    });
                }
            }
        }
        for (i, left) in paths.iter().enumerate() {
            for right in &paths[i + 1..] {
                // Two routes: not both the row's own columns, nor one hop read twice; and not a
                // reference against the column it follows (`r.fk` = the key it matches).
                let hop_of = |p: &ValuePath| p.via.map(|(from, _)| from);
                let trivial = match (hop_of(left), hop_of(right)) {
                    (None, None) => true,
                    (Some(a), Some(b)) => a == b,
                    (Some(a), None) => right.value == a,
                    (None, Some(b)) => left.value == b,
                };
                if !trivial && same_thing(db, out, left.value, right.value) {
                    candidates.push((t, left.clone(), right.clone()));
                }
            }
        }
    }
    if candidates.len() > limits.max_path_checks {
        out.notes.push(format!(
            "path agreements: only the first {} of {} candidates were checked",
            limits.max_path_checks,
            candidates.len()
        ));
        candidates.truncate(limits.max_path_checks);
    }
    for (table, left, right) in candidates {
        // Some row must reach both values: a vacuous agreement says nothing.
        let support = paths_sql(db, table, &left, &right, false);
        let rule = Rule::PathsAgree { table, left, right };
        if holds_in_data(db, run, &rule) == Some(true)
            && support
                .and_then(|sql| count(run, &sql))
                .is_some_and(|n| n > 0)
        {
            out.add(rule, Origin::Observed);
        }
    }
}

/// Functional dependencies within a table: a key-like or referencing column whose values repeat
/// (`budget.link_to_event`) determines another repeating column (`budget.event_status`) when no
/// two real rows with one value of it disagree on the other. At most
/// [`MiningLimits::max_dependency_checks`] candidates, each checked by the rule's own query.
fn observe_dependencies(
    db: &DbSchema,
    stats: &[Option<TableStats>],
    run: &dyn Fn(&str) -> Option<ResultSet>,
    limits: MiningLimits,
    out: &mut DbConstraints,
) {
    let mut candidates: Vec<(usize, usize)> = Vec::new();
    for ts in stats.iter().flatten() {
        let repeats = |s: &&ColumnStats| s.distinct >= 2 && s.distinct < s.non_null;
        for from in ts.columns.iter().filter(repeats) {
            let keyish = key_like(&db.columns[from.column].name)
                || out.references_from(from.column).next().is_some();
            if !keyish {
                continue;
            }
            for to in ts.columns.iter().filter(repeats) {
                if to.column != from.column {
                    candidates.push((from.column, to.column));
                }
            }
        }
    }
    if candidates.len() > limits.max_dependency_checks {
        out.notes.push(format!(
            "dependencies within tables: only the first {} of {} candidates were checked",
            limits.max_dependency_checks,
            candidates.len()
        ));
        candidates.truncate(limits.max_dependency_checks);
    }
    for (from, to) in candidates {
        let rule = Rule::Determines { from, to };
        if holds_in_data(db, run, &rule) != Some(true) {
            continue;
        }
        // Enough repeats that agreement is no accident of a small table: at least
        // MIN_DEPENDENCY_GROUPS values of `from` on two rows or more (a member's two incomes of
        // one amount are not a rule; fifteen events' budgets of one status each are).
        let (f, d) = (
            quote_identifier(&db.columns[from].name),
            quote_identifier(&db.columns[to].name),
        );
        let support = format!(
            "SELECT COUNT(*) FROM (SELECT {f} FROM {} WHERE {f} IS NOT NULL AND {d} IS NOT NULL GROUP BY {f} HAVING COUNT(*) > 1)",
            quote_identifier(&db.tables[db.columns[from].table])
        );
        if count(run, &support).is_some_and(|groups| groups >= MIN_DEPENDENCY_GROUPS) {
            out.add(rule, Origin::Observed);
        }
    }
}

/// Values of a determining column that must repeat before a dependency is observed.
const MIN_DEPENDENCY_GROUPS: i64 = 10;
