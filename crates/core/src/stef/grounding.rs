//! Question grounding: which of the database's columns the question and its evidence *name*,
//! found at line rate with no model — the schema side of what a person reads when checking
//! that the SQL answers the question.
//!
//! A column is linked when
//!
//! - **the question says its name** ([`LinkVia::NaturalName`], [`LinkVia::WrittenName`]): the
//!   words of the column's natural-language name (`tables.json`'s `column_names`, the simple
//!   catalogue's `description`: "average scores in Reading") or of its written name split into
//!   words (`borderColor` → "border color") occur in the question as one contiguous phrase, in
//!   the comparable form of [`crate::words`] (case, plurals, abbreviations and function words
//!   aside). Only phrases of two words or more link: one word ("name", "date", "type") names
//!   too many columns to say which one is meant;
//! - **a definition of the evidence writes it** ([`LinkVia::Evidence`]): a definition whose
//!   subject the question uses (`question::relevant_definitions`) writes the column's name as an
//!   identifier — in backquotes (`` `Free Meal Count (K-12)` ``), shaped like one (`DOC`,
//!   `fastestLapTime`, `A11`, `team_long_name`), or as the operand of a comparison or function
//!   (`name = 'Coldsnap'`, `AVG(amount)`).
//!
//! Values are not linked here: which column holds 'Alameda' needs the data, and the probes
//! (`checks::plan_probes`) ask it. The schema's words are split once per catalogue load
//! ([`crate::catalogue::DbSchema::words`]); per event the cost is splitting the question and
//! one scan of the columns.

use crate::catalogue::DbSchema;
use crate::words::text_words;

use super::question::relevant_definitions;
use super::text::{QuestionTexts, clip_marked, last_dotted_part};
use super::{SchemaContext, TableContext};

/// How a column came to be linked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkVia {
    /// The question says the column's natural-language name.
    NaturalName,
    /// The question says the column's written name, split into words.
    WrittenName,
    /// A relevant definition of the evidence writes the column's name as an identifier.
    Evidence,
}

/// One column the question or its evidence names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnLink {
    /// Index into [`DbSchema::columns`].
    pub column: usize,
    /// How it was linked.
    pub via: LinkVia,
    /// The phrase as matched (comparable words joined by spaces), or the definition's subject
    /// for [`LinkVia::Evidence`].
    pub phrase: String,
}

/// Everything one event's texts name in its schema.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grounding {
    /// Linked columns, in schema order; a column linked both ways appears once per way.
    pub columns: Vec<ColumnLink>,
}

/// Link the question and its evidence to `schema`'s columns (module docs).
pub fn ground(texts: &QuestionTexts<'_>, schema: &DbSchema) -> Grounding {
    ground_words(texts, &text_words(texts.question), schema)
}

/// [`ground`] with the question's words already split ([`text_words`]).
pub fn ground_words(
    texts: &QuestionTexts<'_>,
    question: &[String],
    schema: &DbSchema,
) -> Grounding {
    let words = schema.words();
    let mut columns = question_links(question, schema);
    if texts.evidence.is_some() {
        for (subject, definition) in relevant_definitions(texts) {
            for name in written_identifiers(definition) {
                let Some(found) = words.by_name.get(&name.to_lowercase()) else {
                    continue;
                };
                for &column in found {
                    if !columns
                        .iter()
                        .any(|l| l.column == column && l.via == LinkVia::Evidence)
                    {
                        columns.push(ColumnLink {
                            column,
                            via: LinkVia::Evidence,
                            phrase: subject.to_string(),
                        });
                    }
                }
            }
        }
    }
    columns.sort_by_key(|l| l.column);
    Grounding { columns }
}

/// The columns whose natural or written name (two words or more) the question's words say
/// (`question`: [`text_words`] of the question), in order found — the question-only part of
/// [`ground_words`].
pub fn question_links(question: &[String], schema: &DbSchema) -> Vec<ColumnLink> {
    let words = schema.words();
    let mut columns: Vec<ColumnLink> = Vec::new();
    for (at, word) in question.iter().enumerate() {
        let Some(candidates) = words.phrases.get(word) else {
            continue;
        };
        for &(column, natural) in candidates {
            let phrase = if natural {
                words.natural.get(column)
            } else {
                words.written.get(column)
            };
            let Some(phrase) = phrase else {
                continue;
            };
            if question.get(at..at + phrase.len()) == Some(phrase.as_slice()) {
                let via = if natural {
                    LinkVia::NaturalName
                } else {
                    LinkVia::WrittenName
                };
                if !columns
                    .iter()
                    .any(|l: &ColumnLink| l.column == column && l.via == via)
                {
                    columns.push(ColumnLink {
                        column,
                        via,
                        phrase: phrase.join(" "),
                    });
                }
            }
        }
    }
    columns
}

/// The names a definition writes as identifiers (module docs): backquoted spans, identifier-
/// shaped words (an underscore, a capital after the first letter, a digit after a letter), and
/// plain words that are the operand of a comparison or a function call. `table.column` yields
/// `column`.
pub fn written_identifiers(definition: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = definition.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'`' {
            let Some(end) = definition.get(i + 1..).and_then(|r| r.find('`')) else {
                break;
            };
            if let Some(name) = definition.get(i + 1..i + 1 + end) {
                out.push(last_dotted_part(name.trim()));
            }
            i += end + 2;
            continue;
        }
        if b == b'\'' || b == b'"' {
            // A literal: skip to its end.
            let quote = b;
            i += 1;
            while i < bytes.len() && bytes[i] != quote {
                i += 1;
            }
            i += 1;
            continue;
        }
        if b.is_ascii_alphabetic() || b == b'_' {
            let start = i;
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || matches!(bytes[i], b'_' | b'.'))
            {
                i += 1;
            }
            let Some(word) = definition.get(start..i) else {
                break;
            };
            let word = word.trim_end_matches('.');
            let name = last_dotted_part(word);
            let rest = definition.get(i..).unwrap_or("").trim_start();
            let before = definition.get(..start).unwrap_or("").trim_end();
            let shaped = name.contains('_')
                || name.chars().skip(1).any(|c| c.is_ascii_uppercase())
                || (name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                    && name.chars().skip(1).any(|c| c.is_ascii_digit()))
                || word.contains('.');
            // A function's name (`AVG(`, `DIVIDE(`) is no column.
            let call = rest.starts_with('(');
            let operand = rest.starts_with(['=', '<', '>', '!', ')'])
                || before.ends_with(['(', '=', '<', '>']);
            if !call && (shaped || operand) {
                out.push(name);
            }
            continue;
        }
        i += 1;
    }
    out
}

/// Most tables a [`SchemaContext`] shows.
pub const CONTEXT_MAX_TABLES: usize = 8;
/// Most columns it shows per table (the ones the SQL or the question names first).
pub const CONTEXT_MAX_COLUMNS: usize = 40;
/// Longest natural-language column name it shows, in bytes.
const CONTEXT_MAX_NATURAL: usize = 120;

/// The [`SchemaContext`] of one event: `tables_read` are the catalogue's table indices the SQL
/// reads; the question's links add the tables of the columns it names.
pub fn schema_context(
    schema: &DbSchema,
    tables_read: &[usize],
    grounding: &Grounding,
    sql_lower: &str,
) -> SchemaContext {
    let mut order: Vec<(usize, bool)> = Vec::new();
    for &t in tables_read {
        if !order.iter().any(|(o, _)| *o == t) {
            order.push((t, true));
        }
    }
    for link in &grounding.columns {
        if let Some(c) = schema.columns.get(link.column)
            && !order.iter().any(|(o, _)| *o == c.table)
        {
            order.push((c.table, false));
        }
    }
    let tables_omitted = order.len().saturating_sub(CONTEXT_MAX_TABLES);
    order.truncate(CONTEXT_MAX_TABLES);
    let linked: Vec<usize> = grounding.columns.iter().map(|l| l.column).collect();
    let tables = order
        .into_iter()
        .filter_map(|(t, read_by_sql)| {
            let name = schema.tables.get(t)?.clone();
            let mut columns: Vec<(bool, String)> = schema
                .columns_of(t)
                .map(|(i, c)| {
                    let mut line = format!("{} {}", c.name, c.ty.as_str());
                    if schema.is_primary_key_column(i) {
                        line.push_str(" PK");
                    }
                    if let Some(&(_, to)) = schema.foreign_keys.iter().find(|&&(f, _)| f == i)
                        && let Some(target) = schema.columns.get(to)
                    {
                        let table = schema.tables.get(target.table).map_or("?", String::as_str);
                        line.push_str(&format!(" -> {table}.{}", target.name));
                    }
                    if let Some(natural) = &c.natural {
                        line.push_str(" -- ");
                        line.push_str(&clip_marked(natural, CONTEXT_MAX_NATURAL));
                    }
                    let named =
                        linked.contains(&i) || sql_lower.contains(&c.name.to_ascii_lowercase());
                    (named, line)
                })
                .collect();
            // Named columns first, so a cap drops the others.
            columns.sort_by_key(|(named, _)| !*named);
            let columns_omitted = columns.len().saturating_sub(CONTEXT_MAX_COLUMNS);
            columns.truncate(CONTEXT_MAX_COLUMNS);
            Some(TableContext {
                name,
                read_by_sql,
                columns: columns.into_iter().map(|(_, l)| l).collect(),
                columns_omitted,
            })
        })
        .collect();
    SchemaContext {
        db_id: schema.db_id.clone(),
        tables,
        tables_omitted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::SchemaCatalog;

    fn schools() -> SchemaCatalog {
        SchemaCatalog::parse_tables_json(
            r#"[{"db_id": "schools",
                "table_names_original": ["schools", "frpm"], "table_names": ["schools", "frpm"],
                "column_names_original": [[-1, "*"], [0, "CDSCode"], [0, "MailStreet"], [0, "MailStrAbr"],
                    [0, "EdOpsCode"], [0, "EdOpsName"], [1, "CDSCode"], [1, "Free Meal Count (K-12)"],
                    [1, "FRPM Count (K-12)"], [0, "DOC"]],
                "column_names": [[-1, "*"], [0, "CDSCode"], [0, "MailStreet"], [0, "mailing street address"],
                    [0, "Education Option Code"], [0, "Educational Option Name"], [1, "CDSCode"],
                    [1, "Free Meal Count (K-12)"], [1, "FRPM Count (K-12)"], [0, "District Ownership Code"]],
                "column_types": ["text", "text", "text", "text", "text", "text", "text", "real", "real", "integer"],
                "primary_keys": [1, 6], "foreign_keys": [[6, 1]]}]"#,
        )
        .expect("parses")
    }

    fn linked(question: &str, evidence: Option<&str>) -> Vec<(String, LinkVia)> {
        let catalogue = schools();
        let schema = catalogue.get("schools").expect("schema");
        let enriched = evidence.map(|e| format!("{question} {e}"));
        let texts = QuestionTexts::new(question, enriched.as_deref());
        ground(&texts, schema)
            .columns
            .iter()
            .map(|l| (schema.columns[l.column].name.clone(), l.via))
            .collect()
    }

    #[test]
    fn the_question_names_columns_by_their_natural_and_written_names() {
        assert_eq!(
            linked("What is the mailing street address of the school?", None),
            [("MailStrAbr".to_string(), LinkVia::NaturalName)]
        );
        assert_eq!(
            linked("List the free meal counts (K-12) of schools", None),
            [("Free Meal Count (K-12)".to_string(), LinkVia::WrittenName)]
        );
        // One word names too many columns to link.
        assert!(linked("What is the code of the school?", None).is_empty());
    }

    #[test]
    fn relevant_definitions_write_identifiers() {
        let links = linked(
            "How many schools are run by the Elementary School District?",
            Some("Elementary School District refers to DOC = 52"),
        );
        assert_eq!(links, [("DOC".to_string(), LinkVia::Evidence)]);
        // A definition of something the question never mentions links nothing.
        let links = linked(
            "How many schools are there?",
            Some("Elementary School District refers to DOC = 52"),
        );
        assert!(links.is_empty());
    }

    #[test]
    fn identifiers_in_definitions() {
        assert_eq!(
            written_identifiers("`Free Meal Count (K-12)` / `Enrollment (K-12)`"),
            ["Free Meal Count (K-12)", "Enrollment (K-12)"]
        );
        assert_eq!(
            written_identifiers(
                "AVG(fastestLapTime) where name = 'Coldsnap' and T1.team_long_name"
            ),
            ["fastestLapTime", "name", "team_long_name"]
        );
        assert_eq!(written_identifiers("A11 refers to average salary"), ["A11"]);
        assert!(written_identifiers("the average salary of the district").is_empty());
    }

    #[test]
    fn the_context_shows_tables_read_and_named_capped() {
        let catalogue = schools();
        let schema = catalogue.get("schools").expect("schema");
        let texts = QuestionTexts::new("List the free meal counts (K-12) of schools", None);
        let grounding = ground(&texts, schema);
        let context = schema_context(schema, &[0], &grounding, "select mailstreet from schools");
        assert_eq!(context.tables.len(), 2);
        assert!(context.tables[0].read_by_sql && !context.tables[1].read_by_sql);
        assert_eq!(context.tables[1].name, "frpm");
        // Named columns first; keys and natural names shown.
        assert_eq!(context.tables[0].columns[0], "MailStreet text");
        assert!(
            context.tables[0]
                .columns
                .iter()
                .any(|c| c == "CDSCode text PK")
        );
        assert!(
            context.tables[0]
                .columns
                .iter()
                .any(|c| c == "MailStrAbr text -- mailing street address")
        );
        assert!(
            context.tables[1]
                .columns
                .iter()
                .any(|c| c == "CDSCode text PK -> schools.CDSCode")
        );
    }
}
