//! The grounded checks (the third table of [`super`]): the SQL held to what the question and its
//! evidence *name* in the schema ([`crate::stef::grounding`]) — a column the question names and
//! the SQL never reads, a column a definition writes and the SQL never uses, a joined table that
//! contributes nothing but repeated rows, a code returned where its name is at hand. Each was
//! kept because people's verdicts say it is right far more often than wrong
//! (`examples/stef_labels.rs`; its measured precision is in the findings reference, `docs/reference/findings.md`).

use rustc_hash::FxHashSet;

use crate::catalogue::DbSchema;
use crate::sqlspec::{QueryReferences, RefSourceKind};
use crate::stef::grounding::{Grounding, LinkVia};
use crate::words::text_words;

use super::{CheckInput, clip, contains_word, is_single_key, push, tables_read};
use crate::stef::{ErrorCategory, Finding, FindingCode, Severity};

/// Column names the SQL references, lowercased, and the SQL (a name the reference walk cannot
/// see — inside a construct it leaves opaque — still counts when the text has it; the text is
/// only searched for the few columns a finding would name).
struct Named<'a> {
    refs: &'a QueryReferences,
    sql: &'a str,
    sql_lower: std::cell::OnceCell<String>,
}

impl Named<'_> {
    /// Whether the reference walk saw `column` (a query names a handful of columns: a scan).
    fn referenced(&self, column: &str) -> bool {
        self.refs
            .columns
            .iter()
            .any(|c| c.name.eq_ignore_ascii_case(column))
    }

    /// Whether the SQL names `column` anywhere: referenced, or written in its text.
    fn names(&self, column: &str) -> bool {
        self.referenced(column)
            || contains_word(
                self.sql_lower.get_or_init(|| self.sql.to_ascii_lowercase()),
                &column.to_ascii_lowercase(),
            )
    }
}

pub(super) fn grounded_checks(
    input: &CheckInput<'_>,
    schema: &DbSchema,
    refs: &QueryReferences,
    grounding: &Grounding,
    question_words: &[String],
    out: &mut Vec<Finding>,
) {
    if !grounding.columns.is_empty() {
        let named = Named {
            refs,
            sql: input.sql,
            sql_lower: std::cell::OnceCell::new(),
        };
        let tables_read: FxHashSet<usize> = tables_read(schema, refs).into_iter().collect();
        evidence_columns(schema, grounding, &named, out);
        named_columns(schema, grounding, &named, &tables_read, out);
    }
    if refs.scopes.iter().any(|s| s.sources.len() > 1) && !selects_everything(input) {
        // `COUNT(*)` counts the joined rows themselves: a child joined for that is used.
        let counts_rows = input
            .spec
            .projections
            .iter()
            .any(|p| p.is_aggregate() && counts_all_rows(&p.expr));
        unused_join_tables(
            schema,
            refs,
            question_words,
            input.texts.evidence,
            counts_rows,
            out,
        );
    }
    code_instead_of_name(input, schema, refs, question_words, out);
    attribute_for_entity(input, schema, refs, question_words, out);
}

/// `attribute_for_entity`: the question asks for the things a table holds — its first content
/// word after "which / what / list / name …" is the table's own one-word name ("what atoms
/// comprise TR186?", "which molecules …") — and the SQL returns only other columns of that
/// table: not its key, not a name, title or id, not a column whose name carries the table's
/// word, and none the question itself names ("what atoms" answered by `atom.element`).
fn attribute_for_entity(
    input: &CheckInput<'_>,
    schema: &DbSchema,
    refs: &QueryReferences,
    question_words: &[String],
    out: &mut Vec<Finding>,
) {
    const OPENINGS: [&str; 9] = [
        "which ",
        "what ",
        "list ",
        "name ",
        "identify ",
        "give ",
        "show ",
        "find ",
        "enumerate ",
    ];
    let q = input.texts.question_lower.as_str();
    let Some(rest) = OPENINGS.iter().find_map(|o| q.strip_prefix(o)) else {
        return;
    };
    let spec = input.spec;
    if spec.projections.is_empty()
        || spec
            .projections
            .iter()
            .any(|p| p.is_aggregate() || p.columns.len() != 1 || p.expr.contains('('))
    {
        return;
    }
    let Some(top) = refs.scopes.first() else {
        return;
    };
    let words = schema.words();
    // The tables of the outer query whose name is one word: without one, nothing to compare.
    let one_word_tables: Vec<(usize, &String)> = top
        .sources
        .iter()
        .filter_map(|src| {
            let RefSourceKind::Table(name) = &src.kind else {
                return None;
            };
            let t = schema.table_index(name)?;
            match words.tables.get(t)?.as_slice() {
                [word] => Some((t, word)),
                _ => None,
            }
        })
        .collect();
    if one_word_tables.is_empty() {
        return;
    }
    // The first content word after the opening (function words dropped, plural folded).
    let Some(target) = rest
        .split_whitespace()
        .take(4)
        .find_map(|token| text_words(token).into_iter().next())
    else {
        return;
    };
    let Some(t) = one_word_tables
        .iter()
        .find(|(_, word)| **word == target)
        .map(|(t, _)| *t)
    else {
        return;
    };
    let target = &target;
    let mut returned = Vec::new();
    for p in &spec.projections {
        let Some(c) = p
            .columns
            .first()
            .and_then(|name| column_of(schema, t, name))
        else {
            // A column of another table: the query returns more than this table's attributes.
            return;
        };
        let written = words.written.get(c).map(Vec::as_slice).unwrap_or_default();
        let identifies = schema.is_primary_key_column(c)
            || written.iter().any(|w| {
                w == target || matches!(w.as_str(), "name" | "title" | "id" | "code" | "number")
            });
        let asked = !written.is_empty() && written.iter().all(|w| question_words.contains(w));
        if identifies || asked {
            return;
        }
        returned.push(schema.columns.get(c).map_or("?", |c| c.name.as_str()));
    }
    push(
        out,
        FindingCode::AttributeForEntity,
        Severity::Info,
        ErrorCategory::Attribute,
        format!(
            "the question asks for {} themselves; the SQL returns only {}.{}",
            schema.tables.get(t).map_or("?", String::as_str),
            schema.tables.get(t).map_or("?", String::as_str),
            returned.join(", ")
        ),
    );
}

/// `evidence_column_unused`, with the catalogue: a relevant definition writes a column of the
/// database (in a formula, a condition, a function's argument); the SQL never names it. A
/// table's single-column key is exempt (`COUNT(ID)` and `COUNT(*)` say the same).
fn evidence_columns(
    schema: &DbSchema,
    grounding: &Grounding,
    named: &Named<'_>,
    out: &mut Vec<Finding>,
) {
    for link in grounding
        .columns
        .iter()
        .filter(|l| l.via == LinkVia::Evidence)
    {
        let Some(column) = schema.columns.get(link.column) else {
            continue;
        };
        let single_key = is_single_key(schema, link.column);
        // Another column of the same name that the SQL does name (the definition may mean it).
        if single_key || named.names(&column.name) {
            continue;
        }
        let table = schema.tables.get(column.table).map_or("?", String::as_str);
        push(
            out,
            FindingCode::EvidenceColumnUnused,
            Severity::Warning,
            ErrorCategory::Attribute,
            format!(
                "the definition of \"{}\" uses {table}.{}; the SQL never names {}",
                clip(link.phrase.trim(), 80),
                column.name,
                column.name
            ),
        );
    }
}

/// `named_column_unused`: the question says a column's name (two words or more) and the SQL
/// reads its table but never that column — and no column the SQL does name has the phrase in
/// its own name ("fastest lap" is answered by `fastestLapTime`).
fn named_columns(
    schema: &DbSchema,
    grounding: &Grounding,
    named: &Named<'_>,
    tables_read: &FxHashSet<usize>,
    out: &mut Vec<Finding>,
) {
    let words = schema.words();
    let mut used: Option<Vec<usize>> = None;
    let mut reported: FxHashSet<usize> = FxHashSet::default();
    for link in &grounding.columns {
        if link.via == LinkVia::Evidence || reported.contains(&link.column) {
            continue;
        }
        let Some(column) = schema.columns.get(link.column) else {
            continue;
        };
        if !tables_read.contains(&column.table) || named.names(&column.name) {
            continue;
        }
        let phrase: Vec<String> = link.phrase.split(' ').map(str::to_string).collect();
        // The columns of the tables read that the SQL references (made once, when needed).
        let used = used.get_or_insert_with(|| {
            named
                .refs
                .columns
                .iter()
                .flat_map(|c| {
                    words
                        .by_name
                        .get(&c.name.to_lowercase())
                        .into_iter()
                        .flatten()
                })
                .copied()
                .filter(|&c| {
                    schema
                        .columns
                        .get(c)
                        .is_some_and(|col| tables_read.contains(&col.table))
                })
                .collect()
        });
        let answered = used.iter().any(|&u| {
            [words.written.get(u), words.natural.get(u)]
                .into_iter()
                .flatten()
                .any(|w| crate::words::find_phrase(w, &phrase).is_some())
        });
        if answered {
            continue;
        }
        reported.insert(link.column);
        let table = schema.tables.get(column.table).map_or("?", String::as_str);
        push(
            out,
            FindingCode::NamedColumnUnused,
            Severity::Warning,
            ErrorCategory::Attribute,
            format!(
                "the question says \"{}\" ({table}.{}); the SQL reads {table} but never names {}",
                link.phrase, column.name, column.name
            ),
        );
    }
}

/// Words too generic in a table's name to say the question means the table.
const GENERIC_TABLE_WORDS: [&str; 10] = [
    "has",
    "info",
    "information",
    "data",
    "detail",
    "list",
    "type",
    "record",
    "table",
    "map",
];

/// Whether `words` (a question's, an evidence's) say a word of table `t`'s name (three letters
/// or more, not a generic one).
pub(super) fn names_table(schema: &DbSchema, t: usize, words: &[String]) -> bool {
    schema.words().tables.get(t).is_some_and(|name| {
        name.iter().any(|w| {
            w.len() >= 3 && !GENERIC_TABLE_WORDS.contains(&w.as_str()) && words.contains(w)
        })
    })
}

/// Whether the SQL returns whole rows (`*`, `t.*`): then every table's columns are used.
///
/// Reads the text as its whitespace-collapsed lowercase would: `select *`, `select distinct *`
/// (any run of whitespace between the words) or `.*` anywhere, without building that copy.
fn selects_everything(input: &CheckInput<'_>) -> bool {
    if input
        .spec
        .projections
        .iter()
        .any(|p| p.expr == "*" || p.expr.ends_with(".*"))
    {
        return true;
    }
    sql_selects_everything(input.sql)
}

/// Whether `expr` without its spaces contains `count(*)` (no copy of it without them).
fn counts_all_rows(expr: &str) -> bool {
    super::contains_without_spaces(expr, "count(*)")
}

/// The text half of [`selects_everything`].
fn sql_selects_everything(sql: &str) -> bool {
    if crate::stef::text::find_bytes(sql.as_bytes(), b".*").is_some() {
        return true;
    }
    // After `word`, a run of whitespace (as `split_whitespace` sees it), then what follows.
    fn after_spaced(rest: &str) -> Option<&str> {
        let after = rest.trim_start();
        (after.len() < rest.len()).then_some(after)
    }
    // Built once: this runs for every query with a join.
    static SELECT: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new("select"));
    let lower = sql.to_ascii_lowercase();
    SELECT.find_iter(lower.as_bytes()).any(|pos| {
        let Some(after) = lower.get(pos + "select".len()..).and_then(after_spaced) else {
            return false;
        };
        after.starts_with('*')
            || after
                .strip_prefix("distinct")
                .and_then(after_spaced)
                .is_some_and(|a| a.starts_with('*'))
    })
}

/// The catalogue table of every FROM source, scope by scope (`None`: derived, or unknown).
fn source_tables(schema: &DbSchema, refs: &QueryReferences) -> Vec<Vec<Option<usize>>> {
    refs.scopes
        .iter()
        .map(|scope| {
            scope
                .sources
                .iter()
                .map(|src| match &src.kind {
                    RefSourceKind::Table(name) => schema.table_index(name),
                    RefSourceKind::Derived(_) => None,
                })
                .collect()
        })
        .collect()
}

/// The column `name` of table `t`, through the name index (no scan of every column).
fn column_of(schema: &DbSchema, t: usize, name: &str) -> Option<usize> {
    let by_name = &schema.words().by_name;
    let found = if name.chars().any(char::is_uppercase) {
        by_name.get(&name.to_lowercase())?
    } else {
        by_name.get(name)?
    };
    found
        .iter()
        .copied()
        .find(|&c| schema.columns.get(c).is_some_and(|col| col.table == t))
}

/// Which FROM source of which scope a column reference reads: `None` when it cannot be told
/// (a derived table, an alias, a name no source has or several have).
fn source_of(
    schema: &DbSchema,
    refs: &QueryReferences,
    tables: &[Vec<Option<usize>>],
    idx: usize,
) -> Option<(usize, usize)> {
    let c = refs.columns.get(idx)?;
    let mut scope = Some(c.scope);
    let mut hops = 0;
    while let Some(s) = scope {
        let sc = refs.scopes.get(s)?;
        if let Some(q) = &c.qualifier {
            if let Some(i) = sc
                .sources
                .iter()
                .position(|src| src.binding.eq_ignore_ascii_case(q))
            {
                return Some((s, i));
            }
        } else {
            let mut holder = None;
            for (i, src) in sc.sources.iter().enumerate() {
                let holds = match (
                    &src.kind,
                    tables.get(s).and_then(|t| t.get(i)).copied().flatten(),
                ) {
                    (RefSourceKind::Table(_), Some(t)) => column_of(schema, t, &c.name).is_some(),
                    (RefSourceKind::Table(_), None) => false,
                    (RefSourceKind::Derived(_), _) => true,
                };
                if holds {
                    if holder.is_some() {
                        return None;
                    }
                    holder = Some(i);
                }
            }
            if let Some(i) = holder {
                return Some((s, i));
            }
            if sc.aliases.iter().any(|a| a.eq_ignore_ascii_case(&c.name)) {
                return None;
            }
        }
        scope = sc.parent;
        hops += 1;
        if hops > 64 {
            return None;
        }
    }
    None
}

/// `unused_join_table`: a table joined to exactly one other table, whose columns the query uses
/// only in that join — unless it is the parent the other table's foreign key references (a join
/// to the referenced row only drops orphans). A joined child repeats the other table's rows;
/// a joined table that is neither only restricts the rows, which the question rarely asks for
/// without saying so. With `counts_rows` (the query returns `COUNT(*)`) a joined child is what
/// is counted, and is left alone.
fn unused_join_tables(
    schema: &DbSchema,
    refs: &QueryReferences,
    question_words: &[String],
    evidence: Option<&str>,
    counts_rows: bool,
    out: &mut Vec<Finding>,
) {
    let evidence_words = std::cell::OnceCell::new();
    let tables = source_tables(schema, refs);
    let sources: Vec<Option<(usize, usize)>> = (0..refs.columns.len())
        .map(|i| source_of(schema, refs, &tables, i))
        .collect();
    let in_join: FxHashSet<usize> = refs.equalities.iter().flat_map(|&(a, b)| [a, b]).collect();
    for (s, scope) in refs.scopes.iter().enumerate() {
        if scope.sources.len() < 2 {
            continue;
        }
        // Every reference of this scope must be placed, or nothing can be concluded.
        let unplaced = refs
            .columns
            .iter()
            .enumerate()
            .any(|(i, c)| c.scope == s && sources.get(i).copied().flatten().is_none());
        if unplaced {
            continue;
        }
        for (si, src) in scope.sources.iter().enumerate() {
            let RefSourceKind::Table(name) = &src.kind else {
                continue;
            };
            let Some(t) = tables.get(s).and_then(|ts| ts.get(si)).copied().flatten() else {
                continue;
            };
            let mine: Vec<usize> = (0..refs.columns.len())
                .filter(|&i| sources.get(i).copied().flatten() == Some((s, si)))
                .collect();
            if mine.is_empty() || mine.iter().any(|i| !in_join.contains(i)) {
                continue;
            }
            let Some((me, other)) = sole_join_partner(refs, &sources, &mine) else {
                continue;
            };
            let column = |i: usize| -> Option<usize> {
                let (ps, psi) = sources.get(i).copied().flatten()?;
                let ti = tables.get(ps)?.get(psi).copied().flatten()?;
                column_of(schema, ti, &refs.columns.get(i)?.name)
            };
            let (Some(mc), Some(oc)) = (column(me), column(other)) else {
                continue;
            };
            let single_key = |c: usize| is_single_key(schema, c);
            // The parent the other side's key references: joining it only drops orphans.
            if single_key(mc) && !single_key(oc) {
                continue;
            }
            // A child whose rows `COUNT(*)` counts.
            if counts_rows && single_key(oc) && !single_key(mc) {
                continue;
            }
            // A table the question or its evidence names is asked for ("students who have
            // pets" joins has_pet for nothing but the join, on purpose).
            let evidence_words =
                evidence_words.get_or_init(|| evidence.map(text_words).unwrap_or_default());
            if names_table(schema, t, question_words) || names_table(schema, t, evidence_words) {
                continue;
            }
            let other_table = schema
                .columns
                .get(oc)
                .and_then(|c| schema.tables.get(c.table))
                .map_or("?", String::as_str);
            let why = if single_key(oc) && !single_key(mc) {
                format!("it has many rows per {other_table} row, so they repeat")
            } else {
                "it only restricts the rows".to_string()
            };
            push(
                out,
                FindingCode::UnusedJoinTable,
                Severity::Warning,
                ErrorCategory::Table,
                format!(
                    "{} is joined to {other_table} but nothing from it is used: {why}",
                    schema.tables.get(t).map_or(name.as_str(), String::as_str)
                ),
            );
        }
    }
}

/// The first equality joining one of `mine` (a table's references) to another reference,
/// as (my reference, the other), when every such equality joins the table to one and the same
/// placed source; `None` when it is joined to several sources or to an unplaced one.
fn sole_join_partner(
    refs: &QueryReferences,
    sources: &[Option<(usize, usize)>],
    mine: &[usize],
) -> Option<(usize, usize)> {
    // Its join partners: the other sides of its equalities.
    let mut partners: Vec<(usize, usize)> = Vec::new(); // (my ref, other ref)
    for &(a, b) in &refs.equalities {
        for (me, other) in [(a, b), (b, a)] {
            if mine.contains(&me) {
                partners.push((me, other));
            }
        }
    }
    let partner_sources: FxHashSet<Option<(usize, usize)>> = partners
        .iter()
        .map(|&(_, o)| sources.get(o).copied().flatten())
        .collect();
    if partner_sources.len() != 1 || partner_sources.contains(&None) {
        return None;
    }
    partners.first().copied()
}

/// `id_instead_of_name`, the code form: the SQL returns a code column (`EdOpsCode`,
/// `DistrictId`) of a table that also has the thing's name (`EdOpsName`, `DistrictType`), and
/// the question asks for no code, id or number.
fn code_instead_of_name(
    input: &CheckInput<'_>,
    schema: &DbSchema,
    refs: &QueryReferences,
    q: &[String],
    out: &mut Vec<Finding>,
) {
    if q.iter().any(|w| {
        matches!(
            w.as_str(),
            "code" | "id" | "ids" | "number" | "no" | "identifier"
        )
    }) {
        return;
    }
    let words = schema.words();
    let Some(top) = refs.scopes.first() else {
        return;
    };
    for p in &input.spec.projections {
        if p.is_aggregate() {
            continue;
        }
        let [name] = p.columns.as_slice() else {
            continue;
        };
        // Cheap first: only a name ending like a code can be one.
        let lower = name.to_ascii_lowercase();
        if !["code", "id", "num", "number", "nbr", "no"]
            .iter()
            .any(|s| lower.ends_with(s))
        {
            continue;
        }
        // The projection is the bare column (maybe qualified), nothing computed.
        if !p.expr.eq_ignore_ascii_case(name)
            && !p
                .expr
                .to_ascii_lowercase()
                .ends_with(&format!(".{}", name.to_ascii_lowercase()))
        {
            continue;
        }
        for src in &top.sources {
            let RefSourceKind::Table(table) = &src.kind else {
                continue;
            };
            let Some(t) = schema.table_index(table) else {
                continue;
            };
            let Some(c) = column_of(schema, t, name) else {
                continue;
            };
            let Some(written) = words.written.get(c) else {
                continue;
            };
            let Some((last, stem)) = written.split_last() else {
                continue;
            };
            if stem.is_empty() || !matches!(last.as_str(), "code" | "id" | "number") {
                continue;
            }
            let sibling = schema.columns_of(t).find(|(i, _)| {
                words.written.get(*i).is_some_and(|w| {
                    w.len() == stem.len() + 1
                        && w.starts_with(stem)
                        && w.last().is_some_and(|l| {
                            matches!(l.as_str(), "name" | "type" | "description" | "title")
                        })
                })
            });
            // A table's own key beside its type: the id is the thing itself (a bond's id
            // is the bond; its type is an attribute, not what the id stands for).
            let own_key_beside_type = schema.is_primary_key_column(c)
                && sibling.is_some_and(|(i, _)| {
                    words
                        .written
                        .get(i)
                        .and_then(|w| w.last())
                        .is_some_and(|l| l == "type")
                });
            if own_key_beside_type {
                continue;
            }
            if let Some((_, sibling)) = sibling {
                push(
                    out,
                    FindingCode::IdInsteadOfName,
                    Severity::Warning,
                    ErrorCategory::Attribute,
                    format!(
                        "the SQL returns the code {}.{}; the question asks for no code, and {}.{} holds what it stands for",
                        schema.tables.get(t).map_or("?", String::as_str),
                        schema.columns.get(c).map_or("?", |c| c.name.as_str()),
                        schema.tables.get(t).map_or("?", String::as_str),
                        sibling.name
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{counts_all_rows, sql_selects_everything};

    /// What [`sql_selects_everything`] stands for: the collapsed lowercase text searched.
    fn collapsed_selects_everything(sql: &str) -> bool {
        let collapsed = sql
            .to_ascii_lowercase()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        collapsed.contains("select *")
            || collapsed.contains("select distinct *")
            || collapsed.contains(".*")
    }

    #[test]
    fn whole_rows_are_found_as_in_the_collapsed_text() {
        let mut texts = crate::shared_data::texts(
            &[
                "bird/dev.jsonl",
                "spider/dev.jsonl",
                "bird/predictions/CHESS-GPT-4o-mini.jsonl",
                "bird/predictions/DAIL-SQL.jsonl",
                "spider/predictions/DAIL-SQL-GPT-4.jsonl",
            ],
            &["gold_sql", "predicted_sql"],
        );
        texts.extend(
            [
                "SELECT * FROM t",
                "select\n\t *",
                "SELECT DISTINCT   * FROM t",
                "select distinct\u{a0}*",
                "select\u{2003}*",
                "select*",
                "select distinct*",
                "selectdistinct *",
                "SELECT t . * FROM t",
                "SELECT t.* FROM t",
                "xselect * y",
                "select select *",
                "select é *",
                "SELECT DISTINCTé *",
                "select",
                "select ",
                "select distinct",
                "select distinct ",
                "",
                ". *",
            ]
            .map(str::to_string),
        );
        let alphabet = [
            "select", "distinct", "*", ".", " ", "\n", "\u{a0}", "x", "SeLeCt", "é",
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..20_000 {
            let mut t = String::new();
            for _ in 0..(state % 7) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                t.push_str(alphabet[(state % alphabet.len() as u64) as usize]);
            }
            texts.push(t);
        }
        let found = crate::shared_data::agree_on(
            &texts,
            sql_selects_everything,
            collapsed_selects_everything,
        );
        assert!(found > 10, "only {found} texts select everything");
    }

    /// `counts_all_rows` is `replace(' ', "").contains("count(*)")` on every projection-like
    /// text: the shared data's SQL, edge cases, and random texts over the needle's pieces.
    #[test]
    fn count_star_is_found_as_without_spaces() {
        let mut texts =
            crate::shared_data::texts(&["bird/dev.jsonl", "spider/dev.jsonl"], &["gold_sql"]);
        texts.iter_mut().for_each(|t| t.make_ascii_lowercase());
        texts.extend(
            [
                "count(*)",
                "count ( * )",
                "c o u n t ( * )",
                "count(\t*)",
                "ccount(*)",
                "count(*",
                "count (distinct *)",
                "coun t(*) + 1",
                "",
                "c",
            ]
            .map(str::to_string),
        );
        texts.extend(crate::shared_data::random_texts(
            b"count(*) ",
            20_000,
            14,
            0x5eed,
        ));
        let found = crate::shared_data::agree_on(&texts, counts_all_rows, |t| {
            t.replace(' ', "").contains("count(*)")
        });
        assert!(found > 100, "only {found} texts count all rows");
    }
}
