//! The probes (the third table of [`super`]): what to ask the read-only replica
//! ([`plan_probes`]) and the findings its answers give ([`probe_findings`]).
//!
//! Values are linked to columns here, with the data: a literal the SQL compares a column with
//! that the column does not hold (nor any case or spacing variant of it) is looked up in the
//! other text columns of the tables the query reads and of the tables the column's own table
//! shares a foreign key with ([`Probe::ValueElsewhere`]) — "which column actually holds
//! 'Alameda'". Found there, the query filters the wrong column (`value_in_other_column`).

use crate::catalogue::{ColumnType, DbSchema};
use crate::sqlspec::{FilterOp, SqlSpec};

use super::catalogue::{Resolved, Resolver};
use super::{clip, push, tables_read};
use crate::stef::{ConfirmedBy, ErrorCategory, Finding, FindingCode, Severity};

/// Most value probes planned for one event (the first comparisons of the query).
pub const MAX_VALUE_PROBES: usize = 8;

/// Most conditions of an empty query asked about one by one ([`predicate_probes`]).
pub const MAX_PREDICATE_PROBES: usize = 4;

/// Most columns one [`Probe::ValueElsewhere`] searches (each a scan of its table, bounded by
/// the probe's time limit like every probe).
pub const MAX_ELSEWHERE_COLUMNS: usize = 12;

/// A read-only question to the probe database (`[stef] probe_databases`), planned from the SQL
/// and the catalogue; the daemon runs it through its read-only executor and hands the answer
/// to [`probe_findings`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Probe {
    /// Does the query return any row? (`SELECT 1 FROM (<sql>) LIMIT 1`)
    QueryRows,
    /// Does `literal` occur in `table.column`?
    ValueExists {
        /// Table, as the catalogue spells it.
        table: String,
        /// Column, as the catalogue spells it.
        column: String,
        /// The literal the SQL compares the column with.
        literal: String,
    },
    /// A value of `table.column` equal to `literal` up to case and surrounding spaces.
    ValueVariant {
        /// Table.
        table: String,
        /// Column.
        column: String,
        /// The literal that was not found.
        literal: String,
    },
    /// Which of `candidates` (other text columns, `(table, column)`) holds `literal` up to case
    /// and surrounding spaces; asked beside [`Probe::ValueVariant`] for a literal that
    /// `table.column` does not hold. The answer's first cell is `table.column` of the first
    /// holder.
    ValueElsewhere {
        /// The table the SQL compares.
        table: String,
        /// The column the SQL compares.
        column: String,
        /// The literal that was not found there.
        literal: String,
        /// The columns searched, in order (at most [`MAX_ELSEWHERE_COLUMNS`]).
        candidates: Vec<(String, String)>,
    },
    /// Does any row of the table a condition of the query reads satisfy that condition on its
    /// own? Asked for a query that returns no rows ([`predicate_probes`]).
    PredicateRows {
        /// The table, as the query's FROM names it (`atom AS T1`).
        table: String,
        /// The condition, as the query writes it.
        condition: String,
        /// The probe's SQL: `SELECT 1 FROM <the table as the query names it> WHERE <condition>
        /// LIMIT 1`.
        sql: String,
    },
    /// Does `COUNT(column)` differ from `COUNT(DISTINCT column)` under the query's FROM, WHERE
    /// and GROUP BY (a row when it does, in some group)?
    CountFanOut {
        /// The counted column, as the SQL writes it.
        column: String,
        /// The probe's SQL, built from the query ([`fan_out_sql`]).
        sql: String,
    },
}

impl Probe {
    /// The probe's SQL (SQLite): identifiers double-quoted, the literal single-quoted, both
    /// escaped; `LIMIT 1` always.
    pub fn sql(&self, query: &str) -> String {
        let ident = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        let text = |s: &str| format!("'{}'", s.replace('\'', "''"));
        match self {
            Probe::QueryRows => format!(
                "SELECT 1 FROM ({}) LIMIT 1",
                query.trim().trim_end_matches(';').trim_end()
            ),
            Probe::ValueExists {
                table,
                column,
                literal,
            } => format!(
                "SELECT 1 FROM {} WHERE {} = {} LIMIT 1",
                ident(table),
                ident(column),
                text(literal)
            ),
            Probe::ValueVariant {
                table,
                column,
                literal,
            } => format!(
                "SELECT {c} FROM {t} WHERE lower(trim(CAST({c} AS TEXT))) = lower(trim({l})) LIMIT 1",
                c = ident(column),
                t = ident(table),
                l = text(literal)
            ),
            Probe::ValueElsewhere {
                literal,
                candidates,
                ..
            } => {
                let arms: Vec<String> = candidates
                    .iter()
                    .map(|(t, c)| {
                        format!(
                            "SELECT * FROM (SELECT {name} FROM {t} WHERE lower(trim(CAST({c} AS TEXT))) = lower(trim({l})) LIMIT 1)",
                            name = text(&format!("{t}.{c}")),
                            c = ident(c),
                            t = ident(t),
                            l = text(literal)
                        )
                    })
                    .collect();
                format!("{} LIMIT 1", arms.join(" UNION ALL "))
            }
            Probe::CountFanOut { sql, .. } | Probe::PredicateRows { sql, .. } => sql.clone(),
        }
    }
}

/// The probes that settle what the SQL alone leaves open: whether a `COUNT(x)` without DISTINCT
/// counts some `x` more than once on the data ([`Probe::CountFanOut`]) — asked when `x` is its
/// table's single-column key and the query joins (the chlorine atoms of a molecule repeat it,
/// a filter on the other table or not), or when `x` is a foreign key and the question asks
/// "how many <the referenced table's things>" (`COUNT(molecule_id) FROM bond` for "how many
/// molecules"). One probe at most, for the first such count of the outer SELECT. `query` is
/// the event's SQL; `question_lower` its question, lowercased.
pub fn confirmation_probes(
    query: &str,
    question_lower: &str,
    spec: &SqlSpec,
    schema: &DbSchema,
) -> Vec<Probe> {
    let Some(refs) = spec.references.as_ref() else {
        return Vec::new();
    };
    if spec.set_operations {
        return Vec::new();
    }
    let resolver = Resolver { schema, refs };
    let mut scratch = Vec::new();
    let words = schema.words();
    let asked_things = question_lower
        .strip_prefix("how many ")
        .map(crate::words::text_words)
        .and_then(|w| w.into_iter().next());
    for (func, col, distinct) in &refs.aggregates {
        if *func != crate::sqlspec::AggFunc::Count || *distinct {
            continue;
        }
        let Resolved::Column(_, c) = resolver.resolve(*col, &mut scratch) else {
            continue;
        };
        let Some(reference) = refs.columns.get(*col) else {
            continue;
        };
        let joined = refs
            .scopes
            .get(reference.scope)
            .is_some_and(|s| s.sources.len() >= 2);
        let key_over_join = joined && super::is_single_key(schema, c);
        let counts_referenced_things = schema.foreign_keys.iter().any(|&(from, to)| {
            from == c
                && schema.columns.get(to).is_some_and(|r| {
                    words.tables.get(r.table).map(Vec::as_slice)
                        == asked_things.as_ref().map(std::slice::from_ref)
                })
        });
        if !(key_over_join || counts_referenced_things) {
            continue;
        }
        if let Some((column, sql)) = fan_out_sql(query, &reference.name) {
            return vec![Probe::CountFanOut { column, sql }];
        }
    }
    Vec::new()
}

/// `SELECT 1 FROM (SELECT COUNT(x) AS n, COUNT(DISTINCT x) AS d FROM … WHERE … GROUP BY …)
/// WHERE n <> d LIMIT 1` for the first `COUNT(x)` without DISTINCT, `x` a column called
/// `column` (any qualifier, any case), in the projection of `query`'s outer SELECT, with the
/// query's own CTEs, FROM, WHERE and GROUP BY; `None` for anything else (a set operation, no
/// such count, SQL that does not parse).
pub fn fan_out_sql(query: &str, column: &str) -> Option<(String, String)> {
    use sqlparser::ast::{
        DuplicateTreatment, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr,
        SetExpr, Statement, Visit, Visitor,
    };
    use std::ops::ControlFlow;

    struct FirstCount<'c>(&'c str, Option<Expr>);
    impl Visitor for FirstCount<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            if let Expr::Function(f) = expr
                && f.name.to_string().eq_ignore_ascii_case("count")
                && let FunctionArguments::List(list) = &f.args
                && list.duplicate_treatment != Some(DuplicateTreatment::Distinct)
                && let [FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))] = list.args.as_slice()
            {
                let name = match arg {
                    Expr::Identifier(i) => Some(i),
                    Expr::CompoundIdentifier(parts) => parts.last(),
                    _ => None,
                };
                if name.is_some_and(|n| n.value.eq_ignore_ascii_case(self.0)) {
                    self.1 = Some(arg.clone());
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        }
    }

    let dialect = sqlparser::dialect::SQLiteDialect {};
    let statements = sqlparser::parser::Parser::parse_sql(&dialect, query).ok()?;
    let [Statement::Query(q)] = statements.as_slice() else {
        return None;
    };
    let SetExpr::Select(select) = q.body.as_ref() else {
        return None;
    };
    let mut first = FirstCount(column, None);
    let _ = select.projection.visit(&mut first);
    let counted = first.1?;
    if select.from.is_empty() {
        return None;
    }
    let from: Vec<String> = select.from.iter().map(ToString::to_string).collect();
    let mut sql = String::new();
    if let Some(with) = &q.with {
        sql.push_str(&format!("{with} "));
    }
    sql.push_str(&format!(
        "SELECT COUNT({counted}) AS n, COUNT(DISTINCT {counted}) AS d FROM {}",
        from.join(", ")
    ));
    if let Some(selection) = &select.selection {
        sql.push_str(&format!(" WHERE {selection}"));
    }
    if let GroupByExpr::Expressions(exprs, _) = &select.group_by
        && !exprs.is_empty()
    {
        let exprs: Vec<String> = exprs.iter().map(ToString::to_string).collect();
        sql.push_str(&format!(" GROUP BY {}", exprs.join(", ")));
    }
    Some((
        counted.to_string(),
        format!("SELECT 1 FROM ({sql}) WHERE n <> d LIMIT 1"),
    ))
}

/// For a query that returns no rows: which of its outer WHERE's conditions (the operands of its
/// top-level ANDs) no row satisfies on its own — one [`Probe::PredicateRows`] per condition that
/// reads columns of one plain table of the FROM (by its alias or name; unqualified columns only
/// when the FROM has one table), has no subquery, and is not `column = 'text'` (the value probes
/// ask that one). At most [`MAX_PREDICATE_PROBES`]; none for SQL that does not parse, a set
/// operation or a query with CTEs.
pub fn predicate_probes(query: &str) -> Vec<Probe> {
    use sqlparser::ast::{
        BinaryOperator, Expr, ObjectNamePart, SetExpr, Statement, TableFactor, Value, Visit,
        Visitor,
    };
    use std::ops::ControlFlow;

    /// The qualifiers a condition's columns carry (`None` for an unqualified one), and whether
    /// it holds a subquery.
    #[derive(Default)]
    struct Reads {
        qualifiers: Vec<Option<String>>,
        subquery: bool,
    }
    impl Visitor for Reads {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            match expr {
                Expr::Identifier(_) => self.qualifiers.push(None),
                Expr::CompoundIdentifier(parts) if parts.len() >= 2 => self.qualifiers.push(
                    parts
                        .get(parts.len() - 2)
                        .map(|q| q.value.to_ascii_lowercase()),
                ),
                Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => {
                    self.subquery = true;
                    return ControlFlow::Break(());
                }
                _ => {}
            }
            ControlFlow::Continue(())
        }
    }

    fn conjuncts<'e>(expr: &'e Expr, out: &mut Vec<&'e Expr>) {
        match expr {
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => {
                conjuncts(left, out);
                conjuncts(right, out);
            }
            Expr::Nested(inner)
                if matches!(
                    inner.as_ref(),
                    Expr::BinaryOp {
                        op: BinaryOperator::And,
                        ..
                    }
                ) =>
            {
                conjuncts(inner, out)
            }
            other => out.push(other),
        }
    }

    let dialect = sqlparser::dialect::SQLiteDialect {};
    let Ok(statements) = sqlparser::parser::Parser::parse_sql(&dialect, query) else {
        return Vec::new();
    };
    let [Statement::Query(q)] = statements.as_slice() else {
        return Vec::new();
    };
    let (SetExpr::Select(select), None) = (q.body.as_ref(), &q.with) else {
        return Vec::new();
    };
    let Some(selection) = &select.selection else {
        return Vec::new();
    };
    // The plain tables of the FROM: (what a column's qualifier calls it, how the FROM names it).
    let mut tables: Vec<(String, String)> = Vec::new();
    let mut relations = 0usize;
    for from in &select.from {
        for factor in std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation))
        {
            relations += 1;
            if let TableFactor::Table {
                name,
                alias,
                args: None,
                ..
            } = factor
            {
                let binding = match alias {
                    Some(alias) => alias.name.value.to_ascii_lowercase(),
                    None => match name.0.last() {
                        Some(ObjectNamePart::Identifier(i)) => i.value.to_ascii_lowercase(),
                        _ => continue,
                    },
                };
                tables.push((binding, factor.to_string()));
            }
        }
    }
    let mut parts = Vec::new();
    conjuncts(selection, &mut parts);
    let mut out = Vec::new();
    for condition in parts {
        if out.len() >= MAX_PREDICATE_PROBES {
            break;
        }
        if let Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } = condition
            && [left, right].iter().any(|side| {
                matches!(side.as_ref(), Expr::Value(v) if matches!(v.value, Value::SingleQuotedString(_)))
            })
            && [left, right].iter().any(|side| {
                matches!(side.as_ref(), Expr::Identifier(_) | Expr::CompoundIdentifier(_))
            })
        {
            continue;
        }
        let mut reads = Reads::default();
        let _ = condition.visit(&mut reads);
        if reads.subquery || reads.qualifiers.is_empty() {
            continue;
        }
        let table = if reads.qualifiers.iter().all(Option::is_none) {
            match tables.as_slice() {
                [only] if relations == 1 => Some(only),
                _ => None,
            }
        } else {
            let first = reads.qualifiers.first().cloned().flatten();
            if reads.qualifiers.iter().all(|q| *q == first) {
                tables
                    .iter()
                    .find(|(binding, _)| Some(binding) == first.as_ref())
            } else {
                None
            }
        };
        let Some((_, from)) = table else {
            continue;
        };
        let probe = Probe::PredicateRows {
            table: from.clone(),
            condition: condition.to_string(),
            sql: format!("SELECT 1 FROM {from} WHERE {condition} LIMIT 1"),
        };
        if !out.contains(&probe) {
            out.push(probe);
        }
    }
    out
}

/// Whether a literal is worth looking for in other columns: three characters or more with a
/// letter (a one-letter code or a number occurs in many columns by chance).
fn linkable_literal(literal: &str) -> bool {
    literal.trim().chars().count() >= 3 && literal.chars().any(char::is_alphabetic)
}

/// The tables the query reads ([`tables_read`]; none without references).
fn query_tables(spec: &SqlSpec, schema: &DbSchema) -> Vec<usize> {
    spec.references
        .as_deref()
        .map_or_else(Vec::new, |refs| tables_read(schema, refs))
}

/// Where else a literal that `table.column` lacks may be: the text columns of that table, of
/// the other tables the query reads, then of the tables a foreign key relates to that table —
/// at most [`MAX_ELSEWHERE_COLUMNS`], the compared column left out.
fn elsewhere_candidates(
    spec: &SqlSpec,
    schema: &DbSchema,
    table: &str,
    column: &str,
) -> Vec<(String, String)> {
    let Some(home) = schema.table_index(table) else {
        return Vec::new();
    };
    let mut tables = vec![home];
    for t in query_tables(spec, schema) {
        if !tables.contains(&t) {
            tables.push(t);
        }
    }
    for &(a, b) in &schema.foreign_keys {
        let (Some(ca), Some(cb)) = (schema.columns.get(a), schema.columns.get(b)) else {
            continue;
        };
        for (this, other) in [(ca.table, cb.table), (cb.table, ca.table)] {
            if this == home && other < schema.tables.len() && !tables.contains(&other) {
                tables.push(other);
            }
        }
    }
    let mut out = Vec::new();
    for t in tables {
        for (_, c) in schema.columns_of(t) {
            if out.len() >= MAX_ELSEWHERE_COLUMNS {
                return out;
            }
            if !matches!(c.ty, ColumnType::Text | ColumnType::Unknown)
                || (t == home && c.name.eq_ignore_ascii_case(column))
            {
                continue;
            }
            out.push((schema.tables[t].clone(), c.name.clone()));
        }
    }
    out
}

/// What a probe returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeAnswer {
    /// At least one row; the first column of the first row as text (when it has one).
    Row(Option<String>),
    /// No row.
    Empty,
    /// The probe database rejected the SQL (its message).
    Failed(String),
    /// The probe hit its time limit or the probe database was unavailable: no conclusion.
    Inconclusive(String),
}

/// The first probes of an event: whether the query returns rows, and whether each literal it
/// compares a catalogue column with (`col = 'v'`, first [`MAX_VALUE_PROBES`]) occurs there.
pub fn plan_probes(spec: &SqlSpec, schema: &DbSchema) -> Vec<Probe> {
    let mut out = vec![Probe::QueryRows];
    let Some(refs) = spec.references.as_ref() else {
        return out;
    };
    let resolver = Resolver { schema, refs };
    let mut scratch = Vec::new();
    for (col, op, lit) in &refs.comparisons {
        if out.len() > MAX_VALUE_PROBES {
            break;
        }
        if !lit.quoted || *op != FilterOp::Eq {
            continue;
        }
        if let Resolved::Column(t, c) = resolver.resolve(*col, &mut scratch) {
            let probe = Probe::ValueExists {
                table: schema.tables.get(t).cloned().unwrap_or_default(),
                column: schema
                    .columns
                    .get(c)
                    .map(|c| c.name.clone())
                    .unwrap_or_default(),
                literal: lit.text.clone(),
            };
            if !out.contains(&probe) {
                out.push(probe);
            }
        }
    }
    out
}

/// The findings of answered probes, and the follow-up probes they call for (for each literal
/// not found: a variant probe, and beside it a search of the other text columns). `findings`
/// are the event's findings so far: a `literal_case_mismatch` is withdrawn when the data holds
/// the SQL's spelling. `spec` and `schema` are the ones [`plan_probes`] planned from.
pub fn probe_findings(
    answers: &[(Probe, ProbeAnswer)],
    spec: &SqlSpec,
    schema: &DbSchema,
    findings: &mut Vec<Finding>,
) -> Vec<Probe> {
    let mut follow_up = Vec::new();
    let mut inconclusive = Vec::new();
    for (probe, answer) in answers {
        match (probe, answer) {
            (_, ProbeAnswer::Inconclusive(why)) => inconclusive.push(why.clone()),
            (Probe::QueryRows, ProbeAnswer::Empty) => push(
                findings,
                FindingCode::EmptyResult,
                Severity::Warning,
                ErrorCategory::Condition,
                "the query returns no rows on the probe database".into(),
            ),
            (Probe::QueryRows, ProbeAnswer::Failed(message)) => push(
                findings,
                FindingCode::QueryFails,
                Severity::Error,
                ErrorCategory::Other,
                format!(
                    "the query fails on the probe database: {}",
                    clip(message, 200)
                ),
            ),
            (Probe::ValueExists { literal, .. }, ProbeAnswer::Row(_)) => {
                // The data holds the SQL's spelling: a definition spelled otherwise is wrong.
                findings.retain(|f| {
                    !(f.code == FindingCode::LiteralCaseMismatch
                        && f.evidence.contains(&format!("compares with '{literal}'")))
                });
            }
            (
                Probe::ValueExists {
                    table,
                    column,
                    literal,
                },
                ProbeAnswer::Empty,
            ) => {
                follow_up.push(Probe::ValueVariant {
                    table: table.clone(),
                    column: column.clone(),
                    literal: literal.clone(),
                });
                let candidates = if linkable_literal(literal) {
                    elsewhere_candidates(spec, schema, table, column)
                } else {
                    Vec::new()
                };
                if !candidates.is_empty() {
                    follow_up.push(Probe::ValueElsewhere {
                        table: table.clone(),
                        column: column.clone(),
                        literal: literal.clone(),
                        candidates,
                    });
                }
            }
            (
                Probe::ValueVariant {
                    table,
                    column,
                    literal,
                },
                ProbeAnswer::Row(found),
            ) => push(
                findings,
                FindingCode::ValueNotInColumn,
                Severity::Error,
                ErrorCategory::Value,
                format!(
                    "'{literal}' is not a value of {table}.{column}; '{}' is",
                    found.as_deref().unwrap_or("?")
                ),
            ),
            (
                Probe::ValueVariant {
                    table,
                    column,
                    literal,
                },
                ProbeAnswer::Empty,
            ) => match holder(answers, table, column, literal) {
                Some(place) => {
                    // Another column of a table the query reads: the wrong column; of a table
                    // it does not read: the wrong (or a missing) table.
                    let read = query_tables(spec, schema);
                    let in_query = place
                        .split_once('.')
                        .and_then(|(t, _)| schema.table_index(t))
                        .is_some_and(|t| read.contains(&t));
                    push(
                        findings,
                        FindingCode::ValueInOtherColumn,
                        Severity::Error,
                        if in_query {
                            ErrorCategory::Attribute
                        } else {
                            ErrorCategory::Table
                        },
                        format!(
                            "'{literal}' is not a value of {table}.{column} (nor any case variant); {place} holds it"
                        ),
                    )
                }
                None => push(
                    findings,
                    FindingCode::ValueNotInColumn,
                    Severity::Warning,
                    ErrorCategory::Value,
                    format!(
                        "'{literal}' is not a value of {table}.{column} (nor any case variant)"
                    ),
                ),
            },
            (Probe::CountFanOut { column, .. }, ProbeAnswer::Row(_)) => {
                let evidence = format!(
                    "COUNT({column}) without DISTINCT counts some {column} more than once on the data (under the query's own joins and filters)"
                );
                findings.retain(|f| f.code != FindingCode::CountFanOut);
                findings.push(Finding {
                    code: FindingCode::CountFanOut,
                    severity: Severity::Warning,
                    category: ErrorCategory::Function,
                    evidence,
                    confirmed_by: Some(ConfirmedBy::Probe),
                    elements: Default::default(),
                });
            }
            (
                Probe::PredicateRows {
                    table, condition, ..
                },
                ProbeAnswer::Empty,
            ) => {
                findings.push(Finding {
                    code: FindingCode::PredicateMatchesNothing,
                    severity: Severity::Warning,
                    category: ErrorCategory::Condition,
                    evidence: format!(
                        "no row of {table} satisfies {} on its own",
                        clip(condition, 160)
                    ),
                    confirmed_by: Some(ConfirmedBy::Probe),
                    elements: Default::default(),
                });
            }
            (Probe::CountFanOut { .. }, ProbeAnswer::Empty) => {
                // The filter keeps one row per key: the count is right.
                findings.retain(|f| f.code != FindingCode::CountFanOut);
            }
            _ => {}
        }
    }
    if !inconclusive.is_empty() {
        inconclusive.sort();
        inconclusive.dedup();
        push(
            findings,
            FindingCode::ProbeInconclusive,
            Severity::Info,
            ErrorCategory::Other,
            format!(
                "{} probe(s) without an answer: {}",
                answers
                    .iter()
                    .filter(|(_, a)| matches!(a, ProbeAnswer::Inconclusive(_)))
                    .count(),
                clip(&inconclusive.join("; "), 200)
            ),
        );
    }
    // What the probe's answers said, the data said.
    for f in findings.iter_mut().filter(|f| {
        f.confirmed_by.is_none()
            && matches!(
                f.code,
                FindingCode::EmptyResult
                    | FindingCode::QueryFails
                    | FindingCode::ValueNotInColumn
                    | FindingCode::ValueInOtherColumn
            )
    }) {
        f.confirmed_by = Some(ConfirmedBy::Probe);
    }
    follow_up
}

/// The column the [`Probe::ValueElsewhere`] answer among `answers` names as holding `literal`
/// (asked for `table.column`), if that probe ran and found one.
fn holder(
    answers: &[(Probe, ProbeAnswer)],
    table: &str,
    column: &str,
    literal: &str,
) -> Option<String> {
    answers
        .iter()
        .find_map(|(probe, answer)| match (probe, answer) {
            (
                Probe::ValueElsewhere {
                    table: t,
                    column: c,
                    literal: l,
                    ..
                },
                ProbeAnswer::Row(Some(place)),
            ) if t == table && c == column && l == literal => Some(place.clone()),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::SchemaCatalog;
    use crate::sqlspec::{ExtractOptions, extract_with};

    /// student_club's `member` and `major` (BIRD), cut down.
    fn club() -> SchemaCatalog {
        SchemaCatalog::parse_tables_json(
            r#"[{"db_id": "club",
                "table_names_original": ["member", "major", "zip_code"],
                "table_names": ["member", "major", "zip code"],
                "column_names_original": [[-1, "*"], [0, "member_id"], [0, "first_name"],
                    [0, "last_name"], [0, "link_to_major"], [0, "zip"], [1, "major_id"],
                    [1, "major_name"], [1, "department"], [2, "zip_code"], [2, "city"],
                    [2, "county"], [0, "t_shirt_size"]],
                "column_names": [[-1, "*"], [0, "member id"], [0, "first name"],
                    [0, "last name"], [0, "link to major"], [0, "zip"], [1, "major id"],
                    [1, "major name"], [1, "department"], [2, "zip code"], [2, "city"],
                    [2, "county"], [0, "t shirt size"]],
                "column_types": ["text", "text", "text", "text", "text", "integer", "text",
                    "text", "text", "integer", "text", "text", "text"],
                "primary_keys": [1, 6, 9], "foreign_keys": [[4, 6], [5, 9]]}]"#,
        )
        .expect("parses")
    }

    fn spec(sql: &str) -> SqlSpec {
        let opts = ExtractOptions {
            collect_references: true,
            ..ExtractOptions::for_dialect(Some("sqlite"))
        };
        extract_with(sql, &opts).expect("parses")
    }

    fn exists(table: &str, column: &str, literal: &str) -> Probe {
        Probe::ValueExists {
            table: table.into(),
            column: column.into(),
            literal: literal.into(),
        }
    }

    #[test]
    fn a_missing_literal_is_looked_for_in_the_other_text_columns() {
        let catalogue = club();
        let schema = catalogue.get("club").expect("schema");
        let spec = spec(
            "SELECT T2.major_name FROM member AS T1 JOIN major AS T2 ON T1.link_to_major = T2.major_id WHERE T1.member_id = 'Phillip'",
        );
        let planned = plan_probes(&spec, schema);
        assert_eq!(planned[1], exists("member", "member_id", "Phillip"));
        let mut findings = Vec::new();
        let follow_up = probe_findings(
            &[(planned[1].clone(), ProbeAnswer::Empty)],
            &spec,
            schema,
            &mut findings,
        );
        assert!(findings.is_empty());
        assert_eq!(follow_up.len(), 2, "{follow_up:?}");
        let Probe::ValueElsewhere { candidates, .. } = &follow_up[1] else {
            panic!("{follow_up:?}")
        };
        let names: Vec<String> = candidates.iter().map(|(t, c)| format!("{t}.{c}")).collect();
        // Its own table first (not the compared column), then the query's other table, then
        // the table a foreign key relates it to; numbers are left out.
        assert_eq!(
            names,
            [
                "member.first_name",
                "member.last_name",
                "member.link_to_major",
                "member.t_shirt_size",
                "major.major_id",
                "major.major_name",
                "major.department",
                "zip_code.city",
                "zip_code.county",
            ]
        );
        let sql = follow_up[1].sql("");
        assert!(sql.starts_with("SELECT * FROM (SELECT 'member.first_name' FROM \"member\" WHERE lower(trim(CAST(\"first_name\" AS TEXT))) = lower(trim('Phillip')) LIMIT 1) UNION ALL "), "{sql}");
        assert!(sql.ends_with(" LIMIT 1"), "{sql}");

        // Found in first_name: the wrong column, an error.
        let answers = [
            (follow_up[0].clone(), ProbeAnswer::Empty),
            (
                follow_up[1].clone(),
                ProbeAnswer::Row(Some("member.first_name".into())),
            ),
        ];
        assert!(probe_findings(&answers, &spec, schema, &mut findings).is_empty());
        assert_eq!(findings.len(), 1, "{findings:?}");
        let f = &findings[0];
        assert_eq!(
            (f.code, f.severity, f.category),
            (
                FindingCode::ValueInOtherColumn,
                Severity::Error,
                ErrorCategory::Attribute
            )
        );
        assert_eq!(
            f.evidence,
            "'Phillip' is not a value of member.member_id (nor any case variant); member.first_name holds it"
        );

        // Found in a table the query does not read: the table is wrong or missing.
        let mut findings = Vec::new();
        let answers = [
            (follow_up[0].clone(), ProbeAnswer::Empty),
            (
                follow_up[1].clone(),
                ProbeAnswer::Row(Some("zip_code.county".into())),
            ),
        ];
        probe_findings(&answers, &spec, schema, &mut findings);
        assert_eq!(findings[0].category, ErrorCategory::Table);

        // Nowhere (or the search had no answer): the value is simply not there, a warning.
        for elsewhere in [
            ProbeAnswer::Empty,
            ProbeAnswer::Inconclusive("time limit".into()),
        ] {
            let mut findings = Vec::new();
            let answers = [
                (follow_up[0].clone(), ProbeAnswer::Empty),
                (follow_up[1].clone(), elsewhere),
            ];
            probe_findings(&answers, &spec, schema, &mut findings);
            let f = findings
                .iter()
                .find(|f| f.code == FindingCode::ValueNotInColumn)
                .expect("value_not_in_column");
            assert_eq!(f.severity, Severity::Warning);
            assert!(
                !findings
                    .iter()
                    .any(|f| f.code == FindingCode::ValueInOtherColumn)
            );
        }

        // A case variant in the column itself wins over any other column.
        let mut findings = Vec::new();
        let answers = [
            (
                follow_up[0].clone(),
                ProbeAnswer::Row(Some("PHILLIP".into())),
            ),
            (
                follow_up[1].clone(),
                ProbeAnswer::Row(Some("member.first_name".into())),
            ),
        ];
        probe_findings(&answers, &spec, schema, &mut findings);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(
            (findings[0].code, findings[0].severity),
            (FindingCode::ValueNotInColumn, Severity::Error)
        );
    }

    #[test]
    fn short_codes_and_numbers_are_not_looked_for_elsewhere() {
        let catalogue = club();
        let schema = catalogue.get("club").expect("schema");
        for literal in ["M", "XL", "2019"] {
            let sql = format!("SELECT first_name FROM member WHERE t_shirt_size = '{literal}'");
            let spec = spec(&sql);
            let mut findings = Vec::new();
            let follow_up = probe_findings(
                &[(
                    exists("member", "t_shirt_size", literal),
                    ProbeAnswer::Empty,
                )],
                &spec,
                schema,
                &mut findings,
            );
            assert_eq!(follow_up.len(), 1, "{literal}: {follow_up:?}");
            assert!(matches!(follow_up[0], Probe::ValueVariant { .. }));
        }
    }

    #[test]
    fn the_search_is_capped() {
        let columns: Vec<String> = (0..40).map(|i| format!("[0, \"c{i}\"]")).collect();
        let types: Vec<&str> = (0..41).map(|_| "\"text\"").collect();
        let catalogue = SchemaCatalog::parse_tables_json(&format!(
            r#"[{{"db_id": "wide", "table_names_original": ["t"], "table_names": ["t"],
                "column_names_original": [[-1, "*"], {cols}], "column_names": [[-1, "*"], {cols}],
                "column_types": [{types}], "primary_keys": [], "foreign_keys": []}}]"#,
            cols = columns.join(", "),
            types = types.join(", ")
        ))
        .expect("parses");
        let schema = catalogue.get("wide").expect("schema");
        let spec = spec("SELECT c1 FROM t WHERE c0 = 'Alameda'");
        let follow_up = probe_findings(
            &[(exists("t", "c0", "Alameda"), ProbeAnswer::Empty)],
            &spec,
            schema,
            &mut Vec::new(),
        );
        let Probe::ValueElsewhere { candidates, .. } = &follow_up[1] else {
            panic!("{follow_up:?}")
        };
        assert_eq!(candidates.len(), MAX_ELSEWHERE_COLUMNS);
        assert_eq!(candidates[0], ("t".to_string(), "c1".to_string()));
    }

    #[test]
    fn a_fan_out_is_asked_of_the_data_under_the_querys_own_joins_filters_and_groups() {
        let (column, sql) = fan_out_sql(
            "select count(molecule.molecule_id) from molecule inner join atom on molecule.molecule_id = atom.molecule_id where atom.element = 'cl' and molecule.label = '-'",
            "molecule_id",
        )
        .expect("a plain SELECT");
        assert_eq!(column, "molecule.molecule_id");
        assert_eq!(
            sql,
            "SELECT 1 FROM (SELECT COUNT(molecule.molecule_id) AS n, COUNT(DISTINCT molecule.molecule_id) AS d FROM molecule INNER JOIN atom ON molecule.molecule_id = atom.molecule_id WHERE atom.element = 'cl' AND molecule.label = '-') WHERE n <> d LIMIT 1"
        );
        // Inside an expression, with GROUP BY and a CTE.
        let (_, sql) = fan_out_sql(
            "WITH m AS (SELECT * FROM molecule) SELECT label, CAST(COUNT(T1.atom_id) AS REAL) * 100 FROM atom T1 JOIN m ON m.molecule_id = T1.molecule_id GROUP BY label ORDER BY 2 LIMIT 1",
            "ATOM_ID",
        )
        .expect("a plain SELECT");
        assert!(
            sql.starts_with(
                "SELECT 1 FROM (WITH m AS (SELECT * FROM molecule) SELECT COUNT(T1.atom_id) AS n"
            ),
            "{sql}"
        );
        assert!(
            sql.ends_with("GROUP BY label) WHERE n <> d LIMIT 1"),
            "{sql}"
        );
        // Nothing to ask: DISTINCT already, COUNT(*), a set operation, no SQL.
        assert!(
            fan_out_sql("SELECT COUNT(DISTINCT a.x) FROM a JOIN b ON a.x = b.x", "x").is_none()
        );
        assert!(fan_out_sql("SELECT COUNT(*) FROM a JOIN b ON a.x = b.x", "x").is_none());
        assert!(fan_out_sql("SELECT COUNT(a.y) FROM a JOIN b ON a.x = b.x", "x").is_none());
        assert!(fan_out_sql("SELECT COUNT(x) FROM a UNION SELECT 1", "x").is_none());
        assert!(fan_out_sql("not sql", "x").is_none());
        // Hostile SQL: nesting past sqlparser's recursion limit is refused, not a crash.
        let deep = format!(
            "SELECT COUNT(x) FROM a JOIN b ON a.x = b.x WHERE {}1{}",
            "(".repeat(5_000),
            ")".repeat(5_000)
        );
        assert!(fan_out_sql(&deep, "x").is_none());
    }

    #[test]
    fn a_fan_out_the_data_shows_is_a_warning_and_one_it_does_not_is_withdrawn() {
        let catalogue = club();
        let schema = catalogue.get("club").expect("schema");
        // A major's key counted over its members (whatever the filter).
        let sql = "SELECT COUNT(major.major_id) FROM major JOIN member ON member.link_to_major = major.major_id WHERE member.zip = 1";
        let one_spec_fn = spec;
        let spec = one_spec_fn(sql);
        let probes = confirmation_probes(sql, "how many majors?", &spec, schema);
        let [probe @ Probe::CountFanOut { .. }] = probes.as_slice() else {
            panic!("{probes:?}")
        };
        // No join, no key: nothing to ask. A foreign key counted for "how many <its table>".
        let one_table = "SELECT COUNT(link_to_major) FROM member";
        let one_spec = one_spec_fn(one_table);
        assert!(confirmation_probes(one_table, "how many members?", &one_spec, schema).is_empty());
        assert_eq!(
            confirmation_probes(
                one_table,
                "how many majors have members?",
                &one_spec,
                schema
            )
            .len(),
            1
        );
        let suspicion = Finding {
            code: FindingCode::CountFanOut,
            severity: Severity::Info,
            category: ErrorCategory::Function,
            evidence: "COUNT(major.major_id) without DISTINCT".into(),
            confirmed_by: None,
            elements: Default::default(),
        };
        for before in [vec![], vec![suspicion.clone()]] {
            let mut confirmed = before;
            probe_findings(
                &[(probe.clone(), ProbeAnswer::Row(Some("1".into())))],
                &spec,
                schema,
                &mut confirmed,
            );
            let [f] = confirmed.as_slice() else {
                panic!("{confirmed:?}")
            };
            assert_eq!(
                (f.code, f.severity),
                (FindingCode::CountFanOut, Severity::Warning)
            );
            assert_eq!(f.confirmed_by, Some(ConfirmedBy::Probe));
        }
        let mut withdrawn = vec![suspicion.clone()];
        probe_findings(
            &[(probe.clone(), ProbeAnswer::Empty)],
            &spec,
            schema,
            &mut withdrawn,
        );
        assert!(withdrawn.is_empty());
        // No answer: the suspicion stays as it was.
        let mut kept = vec![suspicion.clone()];
        probe_findings(
            &[(probe.clone(), ProbeAnswer::Failed("no such column".into()))],
            &spec,
            schema,
            &mut kept,
        );
        assert_eq!(kept, [suspicion]);
    }

    #[test]
    fn an_empty_querys_conditions_are_asked_one_by_one() {
        let probes = predicate_probes(
            "SELECT COUNT(*) FROM atom AS T1 JOIN molecule AS T2 ON T1.molecule_id = T2.molecule_id \
             WHERE strftime('%m', T2.d) = '9' AND T1.element = 'cl' AND (T2.w > 5 AND T1.x < T2.y) \
             AND T1.z IN (SELECT 1)",
        );
        let sqls: Vec<String> = probes.iter().map(|p| p.sql("")).collect();
        assert_eq!(
            sqls,
            vec![
                "SELECT 1 FROM molecule AS T2 WHERE strftime('%m', T2.d) = '9' LIMIT 1",
                "SELECT 1 FROM molecule AS T2 WHERE T2.w > 5 LIMIT 1",
            ],
            "`col = 'text'` is the value probes', two tables' and subqueries' are not asked"
        );
        assert_eq!(
            predicate_probes("SELECT a FROM t WHERE b > 3 AND c LIKE 'x%'")
                .iter()
                .map(|p| p.sql(""))
                .collect::<Vec<_>>(),
            vec![
                "SELECT 1 FROM t WHERE b > 3 LIMIT 1",
                "SELECT 1 FROM t WHERE c LIKE 'x%' LIMIT 1"
            ]
        );
        assert!(predicate_probes("SELECT a FROM t JOIN u ON t.k = u.k WHERE b > 3").is_empty());
        assert!(predicate_probes("WITH c AS (SELECT 1) SELECT * FROM c WHERE x > 1").is_empty());
        assert!(predicate_probes("not sql").is_empty());

        // No row: a warning that names the condition, confirmed by the probe.
        let spec =
            crate::sqlspec::extract("SELECT a FROM t WHERE b > 3", Some("sqlite")).expect("parses");
        let catalog = club();
        let schema = catalog.get("club").expect("club");
        let mut findings = Vec::new();
        let answers: Vec<(Probe, ProbeAnswer)> = predicate_probes("SELECT a FROM t WHERE b > 3")
            .into_iter()
            .map(|p| (p, ProbeAnswer::Empty))
            .collect();
        assert!(probe_findings(&answers, &spec, schema, &mut findings).is_empty());
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].code, FindingCode::PredicateMatchesNothing);
        assert_eq!(findings[0].severity, Severity::Warning);
        assert_eq!(findings[0].confirmed_by, Some(ConfirmedBy::Probe));
        assert_eq!(
            findings[0].evidence,
            "no row of t satisfies b > 3 on its own"
        );
    }
}
