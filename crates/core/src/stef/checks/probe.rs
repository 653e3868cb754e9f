//! The probes (the third table of [`super`]): what to ask the read-only replica
//! ([`plan_probes`]) and the findings its answers give ([`probe_findings`]).

use crate::catalogue::DbSchema;
use crate::sqlspec::{FilterOp, SqlSpec};

use super::catalogue::{Resolved, Resolver};
use super::*;
use crate::stef::{ErrorCategory, Finding, FindingCode, Severity};

/// Most value probes planned for one event (the first comparisons of the query).
pub const MAX_VALUE_PROBES: usize = 8;

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
        }
    }
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

/// The findings of answered probes, and the follow-up probes they call for (a variant probe
/// for each literal not found). `findings` are the event's findings so far: a
/// `literal_case_mismatch` is withdrawn when the data holds the SQL's spelling.
pub fn probe_findings(answers: &[(Probe, ProbeAnswer)], findings: &mut Vec<Finding>) -> Vec<Probe> {
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
            ) => follow_up.push(Probe::ValueVariant {
                table: table.clone(),
                column: column.clone(),
                literal: literal.clone(),
            }),
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
            ) => push(
                findings,
                FindingCode::ValueNotInColumn,
                Severity::Warning,
                ErrorCategory::Value,
                format!("'{literal}' is not a value of {table}.{column} (nor any case variant)"),
            ),
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
    follow_up
}
