//! The catalogue checks (the second table of [`super`]): names resolved scope by scope against
//! the event's schema, joins off keys, type mismatches, fan-out, ids instead of names.

use crate::catalogue::{ColumnType, DbSchema};
use crate::sqlspec::{AggFunc, FilterOp, QueryReferences, RefSourceKind};

use super::{CheckInput, contains_word, is_single_key, lenient_types, push};
use crate::stef::{ErrorCategory, Finding, FindingCode, Severity};

/// What a column reference resolved to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Resolved {
    /// A column of the database: (table index, column index).
    Column(usize, usize),
    /// Something the catalogue cannot check (a derived column, an alias, `rowid`, a string).
    Opaque,
    /// Nothing: already reported.
    Missing,
}

/// Implicit columns every SQLite table has.
const IMPLICIT_COLUMNS: [&str; 3] = ["rowid", "oid", "_rowid_"];

pub(crate) struct Resolver<'a> {
    pub(crate) schema: &'a DbSchema,
    pub(crate) refs: &'a QueryReferences,
}

impl Resolver<'_> {
    /// Scopes from `scope` outwards.
    fn chain(&self, scope: usize) -> Vec<usize> {
        let mut out = vec![scope];
        let mut cur = scope;
        while let Some(p) = self.refs.scopes.get(cur).and_then(|s| s.parent) {
            if out.contains(&p) || out.len() > 64 {
                break;
            }
            out.push(p);
            cur = p;
        }
        out
    }

    pub(crate) fn resolve(&self, idx: usize, out: &mut Vec<Finding>) -> Resolved {
        let Some(c) = self.refs.columns.get(idx) else {
            return Resolved::Opaque;
        };
        if IMPLICIT_COLUMNS
            .iter()
            .any(|i| c.name.eq_ignore_ascii_case(i))
        {
            return Resolved::Opaque;
        }
        let chain = self.chain(c.scope);
        if let Some(q) = &c.qualifier {
            for &s in &chain {
                let Some(scope) = self.refs.scopes.get(s) else {
                    continue;
                };
                let Some(source) = scope
                    .sources
                    .iter()
                    .find(|src| src.binding.eq_ignore_ascii_case(q))
                else {
                    continue;
                };
                return match &source.kind {
                    RefSourceKind::Table(name) => match self.schema.table_index(name) {
                        None => Resolved::Missing, // reported as unknown_table
                        Some(t) => match self.schema.column_index(t, &c.name) {
                            Some(col) => Resolved::Column(t, col),
                            None => {
                                push(
                                    out,
                                    FindingCode::ColumnNotInTable,
                                    Severity::Error,
                                    ErrorCategory::Attribute,
                                    format!(
                                        "{q}.{} — table {} has no column {}{}",
                                        c.name,
                                        self.schema.tables.get(t).map_or("?", String::as_str),
                                        c.name,
                                        self.holders_hint(&c.name)
                                    ),
                                );
                                Resolved::Missing
                            }
                        },
                    },
                    RefSourceKind::Derived(_) => Resolved::Opaque,
                };
            }
            // A qualifier that is a table name of the database but not in scope, or nothing.
            push(
                out,
                FindingCode::UnknownQualifier,
                Severity::Error,
                ErrorCategory::Table,
                format!("{q}.{} — no table or alias {q} in scope", c.name),
            );
            return Resolved::Missing;
        }
        let mut opaque_possible = false;
        for &s in &chain {
            let Some(scope) = self.refs.scopes.get(s) else {
                continue;
            };
            let mut hits: Vec<(usize, usize)> = Vec::new();
            let mut derived_hit = false;
            for src in &scope.sources {
                match &src.kind {
                    RefSourceKind::Table(name) => {
                        if let Some(t) = self.schema.table_index(name) {
                            if let Some(col) = self.schema.column_index(t, &c.name)
                                && !hits.iter().any(|&(ht, _)| ht == t)
                            {
                                hits.push((t, col));
                            }
                        } else {
                            opaque_possible = true; // unknown table: reported on its own
                        }
                    }
                    RefSourceKind::Derived(Some(cols)) => {
                        if cols.iter().any(|n| n.eq_ignore_ascii_case(&c.name)) {
                            derived_hit = true;
                        }
                    }
                    RefSourceKind::Derived(None) => opaque_possible = true,
                }
            }
            if hits.len() > 1 && !derived_hit {
                let names: Vec<&str> = hits
                    .iter()
                    .filter_map(|&(t, _)| self.schema.tables.get(t).map(String::as_str))
                    .collect();
                push(
                    out,
                    FindingCode::AmbiguousColumn,
                    Severity::Error,
                    ErrorCategory::Attribute,
                    format!(
                        "{} is a column of {}: ambiguous without a qualifier",
                        c.name,
                        names.join(" and ")
                    ),
                );
                return Resolved::Missing;
            }
            if let [(t, col)] = hits.as_slice() {
                return Resolved::Column(*t, *col);
            }
            if derived_hit
                || scope
                    .aliases
                    .iter()
                    .any(|a| a.eq_ignore_ascii_case(&c.name))
            {
                return Resolved::Opaque;
            }
        }
        if opaque_possible || c.double_quoted {
            return Resolved::Opaque;
        }
        // An alias of an outer SELECT (ORDER BY of a set operation, a lateral reference).
        if self
            .refs
            .scopes
            .iter()
            .any(|s| s.aliases.iter().any(|a| a.eq_ignore_ascii_case(&c.name)))
        {
            return Resolved::Opaque;
        }
        push(
            out,
            FindingCode::UnknownColumn,
            Severity::Error,
            ErrorCategory::Attribute,
            format!(
                "{} — no table in scope has this column{}",
                c.name,
                self.holders_hint(&c.name)
            ),
        );
        Resolved::Missing
    }

    /// ` (t1, t2 has)`: the tables that do have `column`, for the evidence; empty when none.
    fn holders_hint(&self, column: &str) -> String {
        let mut holders: Vec<&str> = self
            .schema
            .columns
            .iter()
            .filter(|c| c.name.eq_ignore_ascii_case(column))
            .filter_map(|c| self.schema.tables.get(c.table).map(String::as_str))
            .collect();
        holders.dedup();
        if holders.is_empty() {
            String::new()
        } else {
            format!(" ({} has)", holders.join(", "))
        }
    }

    fn column_label(&self, t: usize, c: usize) -> String {
        format!(
            "{}.{}",
            self.schema.tables.get(t).map_or("?", String::as_str),
            self.schema.columns.get(c).map_or("?", |c| c.name.as_str())
        )
    }
}

///
/// Returns each reference resolved (index by index), which naming the query's elements reuses.
pub(super) fn catalogue_checks(
    input: &CheckInput<'_>,
    schema: &DbSchema,
    refs: &QueryReferences,
    out: &mut Vec<Finding>,
) -> Vec<Resolved> {
    for scope in &refs.scopes {
        for src in &scope.sources {
            if let RefSourceKind::Table(name) = &src.kind
                && schema.table_index(name).is_none()
            {
                push(
                    out,
                    FindingCode::UnknownTable,
                    Severity::Error,
                    ErrorCategory::Table,
                    format!("table {name} is not in database {}", schema.db_id),
                );
            }
        }
    }
    let resolver = Resolver { schema, refs };
    let resolved: Vec<Resolved> = (0..refs.columns.len())
        .map(|i| resolver.resolve(i, out))
        .collect();
    let column = |i: usize| match resolved.get(i) {
        Some(Resolved::Column(t, c)) => Some((*t, *c)),
        _ => None,
    };
    let ty = |c: usize| schema.columns.get(c).map_or(ColumnType::Unknown, |c| c.ty);
    // SQLite and MySQL convert text and numbers for comparisons and aggregates (numeric text
    // works), so a type mismatch there is information; strict engines reject or mis-sort.
    let lenient_severity = if lenient_types(input.dialect.unwrap_or(&input.spec.dialect)) {
        Severity::Info
    } else {
        Severity::Warning
    };

    for &(a, b) in &refs.equalities {
        let (Some((ta, ca)), Some((tb, cb))) = (column(a), column(b)) else {
            continue;
        };
        if ta == tb {
            continue;
        }
        // A key used against another column than the one it references. (Catalogues often
        // leave keys undeclared, so a join between undeclared columns says nothing.)
        if !schema.is_foreign_key_pair(ca, cb) {
            let misused = [(ca, ta, cb, tb), (cb, tb, ca, ta)].into_iter().find_map(
                |(from, t_from, other, t_other)| {
                    let to = schema
                        .foreign_keys
                        .iter()
                        .find(|&&(f, _)| f == from)
                        .map(|&(_, to)| to)?;
                    let t_to = schema.columns.get(to)?.table;
                    // Two keys to the same column (siblings joined through their parent's key)
                    // are a join along the keys.
                    let sibling = schema
                        .foreign_keys
                        .iter()
                        .any(|&(f, t)| f == other && t == to);
                    if sibling {
                        return None;
                    }
                    Some(format!(
                        "{} references {}, not {}",
                        resolver.column_label(t_from, from),
                        resolver.column_label(t_to, to),
                        resolver.column_label(t_other, other)
                    ))
                },
            );
            if let Some(evidence) = misused {
                push(
                    out,
                    FindingCode::JoinOffKeys,
                    Severity::Warning,
                    ErrorCategory::Table,
                    evidence,
                );
            }
        }
        if let Some(evidence) = unrelated_keys(schema, &resolver, (ta, ca), (tb, cb)) {
            push(
                out,
                FindingCode::JoinOffKeys,
                Severity::Warning,
                ErrorCategory::Table,
                evidence,
            );
        }
        if let Some(evidence) = skipped_link(input, schema, &resolver, (ta, ca), (tb, cb)) {
            push(
                out,
                FindingCode::JoinSkipsLinkTable,
                Severity::Warning,
                ErrorCategory::Table,
                evidence,
            );
        }
        let (x, y) = (ty(ca), ty(cb));
        if matches!(
            (x, y),
            (ColumnType::Text, ColumnType::Number) | (ColumnType::Number, ColumnType::Text)
        ) {
            push(
                out,
                FindingCode::JoinTypeMismatch,
                lenient_severity,
                ErrorCategory::Condition,
                format!(
                    "{} ({}) = {} ({})",
                    resolver.column_label(ta, ca),
                    x.as_str(),
                    resolver.column_label(tb, cb),
                    y.as_str()
                ),
            );
        }
    }

    for (func, col, distinct) in &refs.aggregates {
        let Some((t, c)) = column(*col) else {
            continue;
        };
        match func {
            AggFunc::Sum | AggFunc::Avg if ty(c) == ColumnType::Text => push(
                out,
                FindingCode::AggregateOverText,
                lenient_severity,
                ErrorCategory::Function,
                format!(
                    "{}({}) — the column is text",
                    if *func == AggFunc::Sum { "SUM" } else { "AVG" },
                    resolver.column_label(t, c)
                ),
            ),
            AggFunc::Count if !distinct => {
                let scope = refs.columns.get(*col).map(|r| r.scope);
                if let Some(scope) = scope
                    && is_single_key(schema, c)
                    && let Some(many) =
                        fan_out_table(schema, refs, &input.spec.filters, scope, t, c)
                {
                    push(
                        out,
                        FindingCode::CountFanOut,
                        Severity::Info,
                        ErrorCategory::Function,
                        format!(
                            "COUNT({}) without DISTINCT over a join with {}, which has many rows per {} row",
                            resolver.column_label(t, c),
                            many,
                            schema.tables.get(t).map_or("?", String::as_str)
                        ),
                    );
                }
            }
            _ => {}
        }
    }

    for (col, op, lit) in &refs.comparisons {
        let Some((t, c)) = column(*col) else {
            continue;
        };
        if !lit.quoted || matches!(op, FilterOp::Like | FilterOp::Contains) {
            continue;
        }
        let text = lit.text.trim();
        let bad = match ty(c) {
            ColumnType::Number => !text.is_empty() && text.parse::<f64>().is_err(),
            ColumnType::Date => !text.is_empty() && !is_iso_date_prefix(text),
            _ => false,
        };
        if bad {
            push(
                out,
                FindingCode::LiteralTypeMismatch,
                Severity::Warning,
                ErrorCategory::Value,
                format!(
                    "{} is a {} column; compared with '{}'",
                    resolver.column_label(t, c),
                    ty(c).as_str(),
                    lit.text
                ),
            );
        }
    }

    id_instead_of_name(input, schema, refs, out);
    resolved
}

/// `a.key = b.key`: each side is its own table's single-column primary key, the catalogue
/// declares foreign keys, and none relates the two tables (neither key references the other, nor
/// do both reference one column). Two tables' row ids equated by accident (`client.client_id =
/// card.card_id`).
fn unrelated_keys(
    schema: &DbSchema,
    resolver: &Resolver<'_>,
    (ta, ca): (usize, usize),
    (tb, cb): (usize, usize),
) -> Option<String> {
    if schema.foreign_keys.is_empty() || !is_single_key(schema, ca) || !is_single_key(schema, cb) {
        return None;
    }
    let table_of = |c: usize| schema.columns.get(c).map(|col| col.table);
    // Both tables must take part in some declared key, or the catalogue simply left their
    // relation out (Spider's `flights.Airline` → `airlines.uid` is undeclared).
    let keyed = |t: usize| {
        schema
            .foreign_keys
            .iter()
            .any(|&(f, to)| table_of(f) == Some(t) || table_of(to) == Some(t))
    };
    if !keyed(ta) || !keyed(tb) {
        return None;
    }
    let related = schema.foreign_keys.iter().any(|&(f, t)| {
        let (tf, tt) = (table_of(f), table_of(t));
        (tf == Some(ta) && tt == Some(tb)) || (tf == Some(tb) && tt == Some(ta))
    });
    let same_target = schema
        .foreign_keys
        .iter()
        .any(|&(f, t)| f == ca && schema.foreign_keys.iter().any(|&(g, u)| g == cb && u == t));
    if related || same_target {
        return None;
    }
    Some(format!(
        "{} = {}: each is its own table's key and no foreign key relates {} and {}",
        resolver.column_label(ta, ca),
        resolver.column_label(tb, cb),
        schema.tables.get(ta).map_or("?", String::as_str),
        schema.tables.get(tb).map_or("?", String::as_str),
    ))
}

/// `a.fk = b.fk` where both reference the same parent column (siblings joined through their
/// parent's key) while a third table links `a` and `b` directly (it has foreign keys to both
/// tables' keys): the join pairs every `a` row with every `b` row of the same parent, where the
/// linking table says which belong together (`client.district_id = account.district_id`
/// instead of going through `disp`) — unless the question names the parent, whose rows it is
/// about.
fn skipped_link(
    input: &CheckInput<'_>,
    schema: &DbSchema,
    resolver: &Resolver<'_>,
    (ta, ca): (usize, usize),
    (tb, cb): (usize, usize),
) -> Option<String> {
    let target = |c: usize| {
        schema
            .foreign_keys
            .iter()
            .find(|&&(f, _)| f == c)
            .map(|&(_, t)| t)
    };
    let (Some(pa), Some(pb)) = (target(ca), target(cb)) else {
        return None;
    };
    if pa != pb {
        return None;
    }
    let table_of = |c: usize| schema.columns.get(c).map(|col| col.table);
    let references = |from_table: usize, to_table: usize| {
        schema.foreign_keys.iter().any(|&(f, t)| {
            table_of(f) == Some(from_table)
                && table_of(t) == Some(to_table)
                && is_single_key(schema, t)
        })
    };
    let link = (0..schema.tables.len())
        .find(|&l| l != ta && l != tb && references(l, ta) && references(l, tb))?;
    // A question about the parent itself ("atoms in double-bonded molecules") means the join
    // through it.
    let parent = table_of(pa)?;
    if super::grounded::names_table(schema, parent, input.texts.words()) {
        return None;
    }
    Some(format!(
        "{} = {} joins {} and {} through their shared parent; {} links them",
        resolver.column_label(ta, ca),
        resolver.column_label(tb, cb),
        schema.tables.get(ta).map_or("?", String::as_str),
        schema.tables.get(tb).map_or("?", String::as_str),
        schema.tables.get(link).map_or("?", String::as_str),
    ))
}

/// A table of `scope` (other than `t`) with a foreign key referencing `t`'s key column `c`.
fn fan_out_table(
    schema: &DbSchema,
    refs: &QueryReferences,
    filters: &[crate::sqlspec::Filter],
    scope: usize,
    t: usize,
    c: usize,
) -> Option<String> {
    let sources = &refs.scopes.get(scope)?.sources;
    sources.iter().find_map(|src| {
        let RefSourceKind::Table(name) = &src.kind else {
            return None;
        };
        let u = schema.table_index(name)?;
        if u == t {
            return None;
        }
        let references_key = schema.foreign_keys.iter().any(|&(from, to)| {
            to == c && schema.columns.get(from).is_some_and(|col| col.table == u)
        });
        // A condition on the other table (`badges.name = 'Supporter'`) usually keeps one row
        // per `t` row, and people accept the count then: only a join used for nothing else
        // surely repeats rows.
        let conditioned = filters.iter().any(|f| {
            let name = crate::stef::text::last_dotted_part(&f.lhs);
            schema.column_index(u, name).is_some()
        });
        (references_key && !conditioned).then(|| schema.tables.get(u).cloned().unwrap_or_default())
    })
}

fn is_iso_date_prefix(text: &str) -> bool {
    let b = text.as_bytes();
    // YYYY, YYYY-MM, YYYY-MM-DD…, or a time `HH:MM`.
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    (digits(0..4) && (b.len() == 4 || b.get(4) == Some(&b'-')))
        || (digits(0..2) && b.get(2) == Some(&b':'))
        || text.contains('%')
}

fn id_instead_of_name(
    input: &CheckInput<'_>,
    schema: &DbSchema,
    refs: &QueryReferences,
    out: &mut Vec<Finding>,
) {
    let q = input.texts.question_lower.as_str();
    let asks_name = (["name", "names"].iter().any(|w| contains_word(q, w))
        || q.starts_with("who "))
        && !["id", "ids"].iter().any(|w| contains_word(q, w));
    if !asks_name || input.spec.projections.is_empty() {
        return;
    }
    let all_ids = input.spec.projections.iter().all(|p| {
        !p.is_aggregate()
            && p.columns.len() == 1
            && p.columns.first().is_some_and(|c| {
                let c = c.to_ascii_lowercase();
                c == "id" || c.ends_with("_id") || c.ends_with("id") && c.len() > 2
            })
    });
    if !all_ids {
        return;
    }
    let Some(top) = refs.scopes.first() else {
        return;
    };
    let name_column = top.sources.iter().find_map(|src| {
        let RefSourceKind::Table(name) = &src.kind else {
            return None;
        };
        let t = schema.table_index(name)?;
        schema
            .columns_of(t)
            .find(|(_, c)| c.name.to_ascii_lowercase().contains("name"))
            .map(|(_, c)| {
                format!(
                    "{}.{}",
                    schema.tables.get(t).map_or("?", String::as_str),
                    c.name
                )
            })
    });
    if let Some(name_column) = name_column {
        let returned: Vec<&str> = input
            .spec
            .projections
            .iter()
            .map(|p| p.expr.as_str())
            .collect();
        push(
            out,
            FindingCode::IdInsteadOfName,
            Severity::Warning,
            ErrorCategory::Attribute,
            format!(
                "the question asks for names; the SQL returns only ids ({}) where {name_column} exists",
                returned.join(", ")
            ),
        );
    }
}
