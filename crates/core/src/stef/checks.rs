//! Deterministic checks that explain what is wrong with a query, as [`Finding`]s: the evidence
//! checks, which need no schema, and the catalogue checks, which run when the event's database
//! is in a schema catalogue ([`DbSchema`]). Every check is conservative: it fires on what the
//! SQL *says*, never on what it might mean, and it stays silent where it cannot tell (a derived
//! table whose columns are hidden behind `*`, a definition it cannot read).
//!
//! Evidence checks (definitions of the enriched question whose subject is about Qu — BIRD's
//! evidence, an agent's own hints):
//!
//! | code | fires when | severity |
//! |---|---|---|
//! | `evidence_value_mismatch` | a definition says `col = 'v'`; the SQL compares `col` for equality only with other values | error |
//! | `literal_case_mismatch` | the SQL compares a column with `= 'V'` where a definition says `'v'` (same letters, other case); a warning, not an error, because definitions are not always spelled as the data is (BIRD's `race = 'human'` for stored `Human`) | warning |
//! | `evidence_column_unused` | a definition maps the term to a column (`name refers to superhero_name`) the SQL never names | warning |
//! | `integer_division` | `COUNT(…) / COUNT(…)` (or other integer-valued operands) with no REAL cast or decimal literal, in a dialect where integer division truncates | error |
//! | `percentage_not_scaled` | a percentage is asked for, the SQL divides, and no `100` appears | warning |
//! | `formula_shape_mismatch` | a definition computes a division (`DIVIDE(…)`, `/`) or a difference (`SUBTRACT(…)`); the SQL computes none (AVG counts as a division) | warning |
//! | `question_column_unused` | with a catalogue: the question uses a term the rule profile maps to a column the catalogue has; the SQL never names that column | warning |
//! | `distinct_missing` | "distinct / different / unique" is asked for; no DISTINCT, GROUP BY or set operation | warning |
//! | `unordered_limit` | an ordering (a superlative) is asked for; the SQL has LIMIT without ORDER BY (a bare "list five X" is not an ordering) | error |
//! | `rounding_missing` | the question (or its enriched question) asks for decimal places or a rounded value ("as a percentage with five decimal places", "rounded to two decimals"); the SQL has no ROUND, PRINTF, FORMAT, TO_CHAR, TRUNC or DECIMAL/NUMERIC cast | warning |
//! | `literal_not_in_question` | a filter compares a column with a string literal (three characters or more, with a letter) that neither the question nor the enriched question contains, not even as a spacing, plural or stem variant (`'TR_000_2_5'` for "TR000_2_5", `'Girke'` for "Gerke", `colour = 'Blue'` nobody asked for); filters the rule profile declares benign or ignored are exempt | warning |
//! | `number_not_in_question` | a filter compares a column with a number (ordering, or equality other than a 0/1 flag test) that neither the question nor the enriched question states — as digits, a number word, a percentage's fraction, a decade's bounds, or an ordering's integer neighbour (`height_cm > 0` under an average nobody restricted; `eye_colour_id = 7`) | warning |
//!
//! Catalogue checks (names resolved scope by scope, as SQLite resolves them: aliases, then
//! tables in scope, then enclosing scopes; `rowid` is always a column; a double-quoted name
//! that is no column is a string):
//!
//! | code | fires when | severity |
//! |---|---|---|
//! | `unknown_table` | a FROM table is neither in the catalogue nor a CTE | error |
//! | `unknown_qualifier` | `X.col` where no table or alias `X` is in scope | error |
//! | `column_not_in_table` | `X.col` where `X`'s table has no `col` | error |
//! | `unknown_column` | an unqualified column no table in scope has (and no alias) | error |
//! | `ambiguous_column` | an unqualified column that two tables of the same scope have | error |
//! | `join_off_keys` | `a.x = b.y` where `a.x` is a declared foreign key to another column than `b.y` (joins between undeclared columns say nothing: catalogues often omit keys) | warning |
//! | `join_type_mismatch` | the two sides of such an equality have incompatible types (text vs number) | warning; info in SQLite and MySQL, which convert |
//! | `aggregate_over_text` | SUM or AVG over a text column | warning; info in SQLite and MySQL |
//! | `literal_type_mismatch` | a number column compared with a non-numeric string; a date column compared with a string that is not an ISO date | warning |
//! | `count_fan_out` | COUNT(t.key) without DISTINCT where t is joined to a table whose foreign key references t (each t row may repeat); information only, because a condition on the other table often keeps one row per t row | info |
//! | `id_instead_of_name` | the question asks for names ("name", or starts with "who") and not for ids; every output is an `…id` column although a table in the query has a name column | warning |
//!
//! Probes (with `[stef] probe_databases`: a read-only replica, queried through the daemon's
//! read-only executor with tight limits; [`plan_probes`] → answers → [`probe_findings`]):
//!
//! | code | fires when | severity |
//! |---|---|---|
//! | `query_fails` | the probe database rejects the query (no such column, a syntax error, …) | error |
//! | `empty_result` | the query returns no rows | warning |
//! | `value_not_in_column` | `col = 'v'` where `v` is not a value of the column: error when a case or spacing variant is (named in the evidence), warning when none is | error / warning |
//! | `probe_inconclusive` | a probe timed out or the database was unavailable (nothing concluded) | info |
//!
//! A probe answer that shows the SQL's literal in the data withdraws a `literal_case_mismatch`.

use std::cell::OnceCell;

use crate::catalogue::{ColumnType, DbSchema};
use crate::sqlspec::{AggFunc, FilterOp, FilterValue, QueryReferences, RefSourceKind, SqlSpec};

use super::question::{definition_parts, evidence_clauses, relevant_definitions};
use super::text::{QuestionTexts, canonical_number, lower_collapsed, normalize_value};
use super::{ErrorCategory, Finding, FindingCode, QuestionSpec, RuleProfile, Severity};

/// Everything the checks read about one event.
pub struct CheckInput<'a> {
    /// The user's question and the enriched question (evidence), clipped, with their
    /// lowercased forms.
    pub texts: &'a QuestionTexts<'a>,
    /// The SQL as written.
    pub sql: &'a str,
    /// Its spec (with [`SqlSpec::references`] when the caller collected them).
    pub spec: &'a SqlSpec,
    /// The deterministic question spec.
    pub question_spec: &'a QuestionSpec,
    /// The dialect the event says the SQL is for (decides integer division).
    pub dialect: Option<&'a str>,
    /// The database schema, when the event's database is in a catalogue.
    pub schema: Option<&'a DbSchema>,
    /// The app's rule profile (column mappings; benign and ignored filters).
    pub profile: &'a RuleProfile,
}

/// Run every check that applies; findings in check order.
pub fn run(input: &CheckInput<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    evidence_checks(input, &mut out);
    if let (Some(schema), Some(refs)) = (input.schema, input.spec.references.as_ref()) {
        catalogue_checks(input, schema, refs, &mut out);
    }
    out
}

fn push(
    out: &mut Vec<Finding>,
    code: FindingCode,
    severity: Severity,
    category: ErrorCategory,
    evidence: String,
) {
    if out.iter().any(|f| f.code == code && f.evidence == evidence) {
        return;
    }
    out.push(Finding {
        code,
        severity,
        category,
        evidence,
    });
}

// ------------------------------------------------------------------------ evidence checks

/// `col op 'v'` constraints read from a definition's text.
#[derive(Debug, PartialEq)]
struct DefinedValue<'t> {
    column: &'t str,
    value: &'t str,
}

/// The lowercased texts the checks search besides the question texts, each made at most once
/// per event.
struct Lowered {
    /// The relevant definitions' subjects and texts, `lower_collapsed`.
    definitions: Vec<(String, String)>,
    /// The evidence (the enriched question without Qu repeated), `lower_collapsed`.
    evidence: OnceCell<Option<String>>,
    /// The SQL, ASCII-lowercased.
    sql: OnceCell<String>,
}

impl Lowered {
    fn evidence(&self, input: &CheckInput<'_>) -> Option<&str> {
        self.evidence
            .get_or_init(|| input.texts.evidence.map(lower_collapsed))
            .as_deref()
    }

    fn sql(&self, input: &CheckInput<'_>) -> &str {
        self.sql.get_or_init(|| input.sql.to_ascii_lowercase())
    }
}

fn evidence_checks(input: &CheckInput<'_>, out: &mut Vec<Finding>) {
    let texts = input.texts;
    let definitions = relevant_definitions(texts);
    let lowered = Lowered {
        definitions: definitions
            .iter()
            .map(|(s, d)| (lower_collapsed(s), lower_collapsed(d)))
            .collect(),
        evidence: OnceCell::new(),
        sql: OnceCell::new(),
    };
    let mut defined_values: Vec<(DefinedValue<'_>, &str)> = Vec::new();
    for (subject, definition) in &definitions {
        for v in quoted_equalities(definition) {
            defined_values.push((v, subject));
        }
        for column in defined_columns(definition, input.schema) {
            if !contains_word(lowered.sql(input), &column.to_ascii_lowercase()) {
                push(
                    out,
                    FindingCode::EvidenceColumnUnused,
                    Severity::Warning,
                    ErrorCategory::Attribute,
                    format!(
                        "\"{}\" refers to {column}; the SQL never names {column}",
                        subject.trim()
                    ),
                );
            }
        }
    }
    let question_lower = texts.question_lower.as_str();
    for (subject, formula) in formulas(input, question_lower) {
        formula_shape(input, subject, formula, out);
    }
    if let Some(schema) = input.schema
        && !input.profile.column_mappings.is_empty()
    {
        mapped_columns(input, schema, question_lower, lowered.sql(input), out);
    }
    value_checks(input, &defined_values, out);
    division_checks(input, &lowered, out);
    distinct_check(input, &lowered, out);
    literal_source_check(input, out);
    number_source_check(input, out);
    rounding_check(input, &lowered, out);
    if input.spec.limit.is_some()
        && input.spec.order_by.is_empty()
        && !input.spec.set_operations
        && input.question_spec.explicit_order
        && !input.spec.projections.iter().all(|p| p.is_aggregate())
        && !input
            .spec
            .aggregations
            .iter()
            .any(|a| matches!(a.func, AggFunc::Max | AggFunc::Min))
    {
        push(
            out,
            FindingCode::UnorderedLimit,
            Severity::Error,
            ErrorCategory::Clause,
            format!(
                "the question asks for a top/superlative; LIMIT {} without ORDER BY returns arbitrary rows",
                input.spec.limit.unwrap_or_default()
            ),
        );
    }
}

fn value_checks(
    input: &CheckInput<'_>,
    defined: &[(DefinedValue<'_>, &str)],
    out: &mut Vec<Finding>,
) {
    // Mismatch: the SQL compares the defined column for equality, never with a defined value.
    for (dv, subject) in defined {
        let column = last_part(dv.column).to_ascii_lowercase();
        let all_for_column: Vec<String> = defined
            .iter()
            .filter(|(o, _)| last_part(o.column).eq_ignore_ascii_case(&column))
            .map(|(o, _)| normalize_value(o.value))
            .collect();
        let eq_values: Vec<String> = input
            .spec
            .filters
            .iter()
            .filter(|f| last_part(&f.lhs) == column && matches!(f.op, FilterOp::Eq | FilterOp::In))
            .flat_map(|f| filter_texts(&f.rhs))
            .collect();
        if !eq_values.is_empty()
            && !eq_values.iter().any(|v| all_for_column.contains(v))
            && !input.sql.contains(dv.value)
        {
            push(
                out,
                FindingCode::EvidenceValueMismatch,
                Severity::Error,
                ErrorCategory::Value,
                format!(
                    "\"{}\" refers to {} = '{}'; the SQL compares {} with {}",
                    subject.trim(),
                    dv.column,
                    dv.value,
                    column,
                    eq_values
                        .iter()
                        .map(|v| format!("'{v}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
    }
    // Case: `= 'V'` where a definition says 'v'.
    let Some(refs) = input.spec.references.as_ref() else {
        return;
    };
    for (col, op, lit) in &refs.comparisons {
        if !lit.quoted || !matches!(op, FilterOp::Eq | FilterOp::NotEq) {
            continue;
        }
        let Some(cref) = refs.columns.get(*col) else {
            continue;
        };
        for (dv, subject) in defined {
            if dv.value != lit.text
                && dv.value.trim().eq_ignore_ascii_case(lit.text.trim())
                && dv.value.trim() != lit.text.trim()
                && last_part(dv.column).eq_ignore_ascii_case(&cref.name)
                && !defined
                    .iter()
                    .any(|(o, _)| o.value.trim() == lit.text.trim())
            {
                push(
                    out,
                    FindingCode::LiteralCaseMismatch,
                    Severity::Warning,
                    ErrorCategory::Value,
                    format!(
                        "\"{}\" refers to {} = '{}'; the SQL compares with '{}' (comparisons are case-sensitive)",
                        subject.trim(),
                        dv.column,
                        dv.value,
                        lit.text
                    ),
                );
            }
        }
    }
}

/// Normalized text values of a filter's right-hand side.
fn filter_texts(rhs: &FilterValue) -> Vec<String> {
    match rhs {
        FilterValue::Text(t) | FilterValue::Number(t) => vec![t.clone()],
        FilterValue::List(items) => items.iter().flat_map(filter_texts).collect(),
        _ => Vec::new(),
    }
}

fn division_checks(input: &CheckInput<'_>, lowered: &Lowered, out: &mut Vec<Finding>) {
    let Some(refs) = input.spec.references.as_ref() else {
        return;
    };
    if truncating_dialect(input.dialect.unwrap_or(&input.spec.dialect)) {
        for d in &refs.divisions {
            if d.both_integer && !d.forces_real {
                push(
                    out,
                    FindingCode::IntegerDivision,
                    Severity::Error,
                    ErrorCategory::Function,
                    format!(
                        "{} divides integers: the result is truncated",
                        clip(&d.text, 160)
                    ),
                );
            }
        }
    }
    if refs.divisions.is_empty() {
        return;
    }
    let asks_percentage = mentions_percentage(&input.texts.question_lower)
        || lowered
            .definitions
            .iter()
            .any(|(subject, _)| mentions_percentage(subject));
    if asks_percentage && !refs.divisions.is_empty() && !input.sql.contains("100") {
        push(
            out,
            FindingCode::PercentageNotScaled,
            Severity::Warning,
            ErrorCategory::Function,
            "a percentage is asked for; the SQL divides but never multiplies by 100".into(),
        );
    }
}

/// `literal_not_in_question`: every string literal a filter compares a column with must come
/// from the question or its enriched question. Numbers and dates are left alone (questions
/// write them in other forms: "9/9/2019", "80%"), and so are literals shorter than three
/// characters (codes such as `'M'` or `'+'` that a definition or the data convention supplies)
/// and flag values (`'yes'`, `'true'`: "channels with high definition TV" is
/// `hight_definition_tv = 'yes'`).
fn literal_source_check(input: &CheckInput<'_>, out: &mut Vec<Finding>) {
    let texts = input.texts;
    let rules = input.profile.compiled();
    for filter in &input.spec.filters {
        // The profile vouches for its benign filters (a tenant guard) and ignored dimensions.
        if rules.is_ignored(&filter.lhs) || super::align::is_benign(filter, rules) {
            continue;
        }
        let wildcards = match filter.op {
            FilterOp::Like | FilterOp::NotLike => true,
            FilterOp::Eq
            | FilterOp::NotEq
            | FilterOp::In
            | FilterOp::NotIn
            | FilterOp::Contains
            | FilterOp::StartsWith
            | FilterOp::EndsWith => false,
            _ => continue,
        };
        for value in text_literals(&filter.rhs) {
            if value.chars().count() < 3
                || !value.chars().any(char::is_alphabetic)
                || matches!(value, "yes" | "true" | "false")
                || literal_in_text(value, wildcards, &texts.question_lower)
                || texts
                    .enriched_lower
                    .as_deref()
                    .is_some_and(|e| literal_in_text(value, wildcards, e))
            {
                continue;
            }
            push(
                out,
                FindingCode::LiteralNotInQuestion,
                Severity::Warning,
                ErrorCategory::Value,
                format!(
                    "the SQL compares {} with '{value}', which neither the question nor its enriched question mentions",
                    filter.lhs
                ),
            );
        }
    }
}

/// `number_not_in_question`: a comparison of a column with a number must take the number from
/// the question or its enriched question — as digits (`1,000`, `$40`, `45th`), a number word
/// ("two", "once", "a single"), a percentage's fraction ("80%" is `0.8` too), a decade's bounds
/// ("1990s") or, for an ordering, an integer neighbour ("at least 3" is `> 2`). What it
/// catches is an invented threshold (`height_cm > 0`, `weight_kg > 0` under an average nobody
/// asked to restrict; `COUNT(DISTINCT element) = 2` for "phosphorus and nitrogen"). Equality with
/// 0 or 1 is a flag test (`is_active = 1`) and left alone, and so are the profile's benign and
/// ignored filters.
fn number_source_check(input: &CheckInput<'_>, out: &mut Vec<Finding>) {
    let rules = input.profile.compiled();
    let mut stated: Option<Vec<String>> = None;
    for filter in &input.spec.filters {
        let FilterValue::Number(number) = &filter.rhs else {
            continue;
        };
        let ordering = match filter.op {
            FilterOp::Eq | FilterOp::NotEq => {
                if matches!(number.as_str(), "0" | "1") {
                    continue;
                }
                false
            }
            FilterOp::Lt | FilterOp::LtEq | FilterOp::Gt | FilterOp::GtEq => true,
            _ => continue,
        };
        if rules.is_ignored(&filter.lhs) || super::align::is_benign(filter, rules) {
            continue;
        }
        let stated = stated.get_or_insert_with(|| stated_numbers(input.texts));
        let unsigned = number.trim_start_matches('-');
        // "at least 3" is `> 2`, "more than 5" `>= 6`: an ordering may use a stated integer's
        // neighbour.
        let integer = unsigned.parse::<i64>().ok().filter(|_| ordering);
        let neighbour = |s: &str| {
            integer
                .zip(s.parse::<i64>().ok())
                .is_some_and(|(a, b)| (a - b).abs() == 1)
        };
        if stated.iter().any(|s| s == unsigned || neighbour(s)) {
            continue;
        }
        push(
            out,
            FindingCode::NumberNotInQuestion,
            Severity::Warning,
            ErrorCategory::Condition,
            format!(
                "the SQL compares {} with {number}, which neither the question nor its enriched question states",
                filter.lhs
            ),
        );
    }
}

/// The numbers the question and the enriched question state, canonical (`1,000` → `1000`,
/// `5.0` → `5`): digit runs, number words, percentages also as fractions, decades as their
/// bounds.
fn stated_numbers(texts: &QuestionTexts<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for text in
        std::iter::once(texts.question_lower.as_str()).chain(texts.enriched_lower.as_deref())
    {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i].is_ascii_digit() {
                let start = i;
                while i < bytes.len()
                    && (bytes[i].is_ascii_digit()
                        || (matches!(bytes[i], b'.' | b',')
                            && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)))
                {
                    i += 1;
                }
                let digits = text[start..i].replace(',', "");
                let Some(n) = canonical_number(&digits) else {
                    continue;
                };
                let after = &text[i..];
                if after.starts_with('%') || after.starts_with(" percent") {
                    if let Some(fraction) = digits
                        .parse::<f64>()
                        .ok()
                        .and_then(|v| canonical_number(&(v / 100.0).to_string()))
                    {
                        out.push(fraction);
                    }
                } else if after.starts_with('s') && n.len() == 4 && n.ends_with('0') {
                    // "the 1990s": 1990 to 1999, or up to 2000 exclusive.
                    if let Ok(year) = n.parse::<u32>() {
                        out.push((year + 9).to_string());
                        out.push((year + 10).to_string());
                    }
                }
                out.push(n);
            } else if bytes[i].is_ascii_alphabetic() {
                let start = i;
                while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
                    i += 1;
                }
                let word = &text[start..i];
                if let Some(n) = super::question::number_word(word).or(match word {
                    // "more than once", "a single document", "multiple times": counts.
                    "once" | "single" | "multiple" | "several" => Some(1),
                    "twice" => Some(2),
                    "thrice" => Some(3),
                    _ => None,
                }) {
                    out.push(n.to_string());
                }
            } else {
                i += 1;
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// `rounding_missing`: a requested precision ("with three decimal places", "rounded to …")
/// that nothing in the SQL produces.
fn rounding_check(input: &CheckInput<'_>, lowered: &Lowered, out: &mut Vec<Finding>) {
    let asks = |lower: &str| {
        (lower.contains("decimal")
            && (contains_word(lower, "decimal") || contains_word(lower, "decimals")))
            || (lower.contains("round")
                && ["rounded", "round to", "round it", "round the"]
                    .iter()
                    .any(|w| contains_word(lower, w)))
    };
    let asked = asks(&input.texts.question_lower) || lowered.evidence(input).is_some_and(asks);
    if !asked {
        return;
    }
    let sql_lower = lowered.sql(input);
    let formats = [
        "round", "printf", "format", "to_char", "trunc", "truncate", "decimal", "numeric",
    ]
    .iter()
    .any(|f| contains_word(sql_lower, f));
    if !formats {
        push(
            out,
            FindingCode::RoundingMissing,
            Severity::Warning,
            ErrorCategory::Function,
            "the question asks for a rounded value (decimal places); the SQL never rounds or formats"
                .into(),
        );
    }
}

/// The string literals of a filter's right-hand side (an IN list's elements).
fn text_literals(rhs: &FilterValue) -> Vec<&str> {
    match rhs {
        FilterValue::Text(t) => vec![t.as_str()],
        FilterValue::List(items) => items.iter().flat_map(text_literals).collect(),
        _ => Vec::new(),
    }
}

/// Whether a (lowercased) literal occurs in a lowercased text: as a substring, with spaces
/// ignored (`'northcarolina'`), or word by word as plural or stem variants (`'fundraising'` for
/// "fundraisers"). A LIKE pattern's pieces between wildcards are looked up one by one.
fn literal_in_text(literal: &str, wildcards: bool, text: &str) -> bool {
    let found = |piece: &str| {
        text.contains(piece)
            || text
                .split(' ')
                .collect::<String>()
                .contains(&piece.split(' ').collect::<String>())
            || piece
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .all(|w| {
                    text.split(|c: char| !c.is_alphanumeric())
                        .any(|t| word_variant(w, t))
                })
    };
    if wildcards {
        literal
            .split(['%', '_'])
            .filter(|p| !p.trim().is_empty())
            .all(|p| found(p.trim()))
    } else {
        found(literal)
    }
}

/// Two words that are the same word for the literal check: equal, singular and plural, or
/// sharing a stem of at least five letters that covers two thirds of the shorter one.
fn word_variant(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    if a.len() < 4 || b.len() < 4 {
        return false;
    }
    if super::text::words_match(a, b) {
        return true;
    }
    let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let shorter = a.chars().count().min(b.chars().count());
    common >= 5 && common * 3 >= shorter * 2
}

/// Whether a lowercased text asks for distinct values ("distinct / different / unique"), not
/// counting what the words do not mean there ("unique id", "different from").
pub(super) fn asks_distinct(lower: &str) -> bool {
    const WORDS: [&str; 3] = ["distinct", "different", "unique"];
    // Most texts have none of the words: one scan each rules them out.
    WORDS.iter().any(|w| {
        lower.contains(w)
            && contains_word(lower, w)
            && ![" id", " identifier", " from", " than"]
                .iter()
                .any(|after| {
                    let mut phrase = String::with_capacity(w.len() + after.len());
                    phrase.push_str(w);
                    phrase.push_str(after);
                    contains_word(lower, &phrase)
                })
    })
}

fn distinct_check(input: &CheckInput<'_>, lowered: &Lowered, out: &mut Vec<Finding>) {
    let asks = asks_distinct;
    let asked = asks(&input.texts.question_lower)
        || lowered.definitions.iter().any(|(s, d)| asks(s) || asks(d))
        || lowered
            .evidence(input)
            .is_some_and(|e| e.contains("distinct") && contains_word(e, "distinct"));
    if !asked {
        return;
    }
    let spec = input.spec;
    let sql_lower = lowered.sql(input);
    let deduplicates = spec.distinct
        || spec.aggregations.iter().any(|a| a.distinct)
        || !spec.group_by.is_empty()
        || spec.set_operations
        || sql_lower.contains("distinct")
        || sql_lower.contains("group by");
    if !deduplicates {
        push(
            out,
            FindingCode::DistinctMissing,
            Severity::Warning,
            ErrorCategory::Clause,
            "distinct values are asked for; the SQL has no DISTINCT, GROUP BY or set operation"
                .into(),
        );
    }
}

/// SQL dialects in which `INTEGER / INTEGER` is integer division.
fn truncating_dialect(dialect: &str) -> bool {
    matches!(
        crate::sqlspec::canonical_dialect(dialect),
        "sqlite" | "postgres" | "mssql" | "redshift" | "ansi"
    )
}

/// SQL dialects that convert between text and numbers in comparisons and aggregates.
fn lenient_types(dialect: &str) -> bool {
    matches!(
        crate::sqlspec::canonical_dialect(dialect),
        "sqlite" | "mysql"
    )
}

/// Whether a lowercased text mentions a percentage.
fn mentions_percentage(lower: &str) -> bool {
    contains_word(lower, "percentage")
        || contains_word(lower, "percent")
        || contains_word(lower, "percentages")
        || lower.contains('%') && !lower.contains("'%") && !lower.contains("%'")
}

/// `col = 'v'` pairs of a definition (quoted values only: a number or a bare word may be part
/// of a formula).
fn quoted_equalities(definition: &str) -> Vec<DefinedValue<'_>> {
    let mut out = Vec::new();
    let bytes = definition.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'=' || (i > 0 && matches!(bytes[i - 1], b'!' | b'<' | b'>')) {
            i += 1;
            continue;
        }
        // Left: an identifier (possibly qualified) right before `=`.
        let left = definition[..i].trim_end();
        let start = left
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '`'))
            .map_or(0, |p| p + 1);
        let column = left[start..].trim_matches('`');
        // Right: a quoted value.
        let right = &definition[i + 1..];
        let trimmed = right.trim_start();
        let offset = right.len() - trimmed.len();
        let quote = trimmed.chars().next();
        if let Some(q @ ('\'' | '"')) = quote
            && let Some(end) = trimmed[1..].find(q)
            && !column.is_empty()
            && column.chars().any(|c| c.is_ascii_alphabetic())
        {
            out.push(DefinedValue {
                column,
                value: &trimmed[1..1 + end],
            });
            i += 1 + offset + end + 2;
            continue;
        }
        i += 1;
    }
    out
}

/// A definition computes a division (`DIVIDE(…)`, `a / b`) or a difference (`SUBTRACT(…)`)
/// that the SQL does not compute at all.
fn formula_shape(input: &CheckInput<'_>, subject: &str, definition: &str, out: &mut Vec<Finding>) {
    let formula = unquoted(definition).to_ascii_uppercase();
    let sql = unquoted(input.sql).to_ascii_uppercase();
    let shapes = [
        (
            formula.contains("DIVIDE(") || formula.contains('/'),
            sql.contains('/') || sql.contains("AVG("),
            "a division",
            "divides nothing",
        ),
        (
            formula.contains("SUBTRACT("),
            sql.contains('-'),
            "a difference",
            "subtracts nothing",
        ),
    ];
    for (defined, computed, what, missing) in shapes {
        if defined && !computed {
            push(
                out,
                FindingCode::FormulaShapeMismatch,
                Severity::Warning,
                ErrorCategory::Function,
                format!(
                    "\"{}\" is defined as {what} ({}); the SQL {missing}",
                    subject.trim(),
                    clip(definition.trim(), 120)
                ),
            );
        }
    }
}

/// Formulas of the evidence about the question: `<subject> = <formula>` clauses (BIRD writes
/// `percentage = DIVIDE(…)`) and definitions (`<subject> refers to <formula>`) whose subject's
/// words are the question's, holding `DIVIDE(`, `SUBTRACT(` or `/`.
fn formulas<'e>(input: &CheckInput<'e>, question_lower: &str) -> Vec<(&'e str, &'e str)> {
    let upper_has = |t: &str| {
        // Most clauses have neither a call nor a slash: one scan rules them out.
        if !t.contains(['(', '/']) {
            return false;
        }
        let u = t.to_ascii_uppercase();
        u.contains("DIVIDE(") || u.contains("SUBTRACT(") || unquoted(t).contains('/')
    };
    let mut out = Vec::new();
    for &clause in evidence_clauses(input.texts) {
        if !upper_has(clause) {
            continue;
        }
        let (subject, formula) = match definition_parts(clause) {
            Some(parts) => parts,
            None => match clause.split_once('=') {
                Some((left, right)) => (left, right),
                None => continue,
            },
        };
        let words: Vec<String> = lower_collapsed(subject)
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() > 2)
            .map(str::to_string)
            .collect();
        if !words.is_empty()
            && words.iter().all(|w| contains_word(question_lower, w))
            && upper_has(formula)
        {
            out.push((subject, formula));
        }
    }
    out
}

/// `text` with the contents of quoted strings removed (`'a/b'` says nothing about division).
fn unquoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None => out.push(c),
        }
    }
    out
}

/// The profile's column mappings (NL term → column) whose term the question uses, when the
/// catalogue has the column and the SQL never names it.
fn mapped_columns(
    input: &CheckInput<'_>,
    schema: &DbSchema,
    question_lower: &str,
    sql_lower: &str,
    out: &mut Vec<Finding>,
) {
    for (term, column) in &input.profile.column_mappings {
        let term_lower = lower_collapsed(term);
        let column_lower = last_part(column).to_ascii_lowercase();
        if contains_word(question_lower, &term_lower)
            && schema
                .columns
                .iter()
                .any(|c| c.name.eq_ignore_ascii_case(&column_lower))
            && !contains_word(sql_lower, &column_lower)
        {
            push(
                out,
                FindingCode::QuestionColumnUnused,
                Severity::Warning,
                ErrorCategory::Attribute,
                format!(
                    "the question says \"{term}\", which is column {column} (rule profile); the SQL never names it"
                ),
            );
        }
    }
}

/// Columns a definition maps its term to: the whole definition is one identifier or a list of
/// them (`superhero_name`; `first_name, last_name`). Without a schema only names that look like
/// columns (an underscore, a dot or camel case) count — a plain word may be prose; with one, a
/// plain word that is a column of the database counts too.
fn defined_columns<'d>(definition: &'d str, schema: Option<&DbSchema>) -> Vec<&'d str> {
    let text = definition.trim().trim_end_matches(['.', ';']);
    if text.is_empty() || text.contains(['=', '<', '>', '(', '\'', '"']) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for piece in text.split(',').flat_map(|p| p.split(" and ")) {
        let piece = piece.trim().trim_matches('`');
        if piece.is_empty() {
            continue;
        }
        let is_identifier = piece
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        let looks_like_column = piece.contains(['_', '.'])
            || piece.chars().skip(1).any(|c| c.is_ascii_uppercase())
            || schema.is_some_and(|db| {
                db.columns
                    .iter()
                    .any(|c| c.name.eq_ignore_ascii_case(last_part(piece)))
            });
        if !is_identifier || !looks_like_column {
            return Vec::new();
        }
        out.push(last_part(piece));
    }
    out
}

fn last_part(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

/// Whether `word` occurs in `text` delimited by non-identifier characters.
pub(super) fn contains_word(text: &str, word: &str) -> bool {
    if word.is_empty() {
        return false;
    }
    let is_ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(pos) = text.get(from..).and_then(|t| t.find(word)) {
        let at = from + pos;
        let end = at + word.len();
        let before = at == 0 || !is_ident(bytes[at - 1]);
        let after = end >= bytes.len() || !is_ident(bytes[end]);
        if before && after {
            return true;
        }
        from = at + 1;
        while from < text.len() && !text.is_char_boundary(from) {
            from += 1;
        }
    }
    false
}

pub(super) fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

// ------------------------------------------------------------------------ catalogue checks

/// What a column reference resolved to.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Resolved {
    /// A column of the database: (table index, column index).
    Column(usize, usize),
    /// Something the catalogue cannot check (a derived column, an alias, `rowid`, a string).
    Opaque,
    /// Nothing: already reported.
    Missing,
}

/// Implicit columns every SQLite table has.
const IMPLICIT_COLUMNS: [&str; 3] = ["rowid", "oid", "_rowid_"];

struct Resolver<'a> {
    schema: &'a DbSchema,
    refs: &'a QueryReferences,
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

    fn resolve(&self, idx: usize, out: &mut Vec<Finding>) -> Resolved {
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

fn catalogue_checks(
    input: &CheckInput<'_>,
    schema: &DbSchema,
    refs: &QueryReferences,
    out: &mut Vec<Finding>,
) {
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
                    && let Some(many) = fan_out_table(schema, refs, scope, t, c)
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
}

fn is_single_key(schema: &DbSchema, c: usize) -> bool {
    schema
        .primary_keys
        .iter()
        .any(|pk| pk.len() == 1 && pk.first() == Some(&c))
}

/// A table of `scope` (other than `t`) with a foreign key referencing `t`'s key column `c`.
fn fan_out_table(
    schema: &DbSchema,
    refs: &QueryReferences,
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
        references_key.then(|| schema.tables.get(u).cloned().unwrap_or_default())
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
        push(
            out,
            FindingCode::IdInsteadOfName,
            Severity::Warning,
            ErrorCategory::Attribute,
            format!("the question asks for names; the SQL returns only ids ({name_column} exists)"),
        );
    }
}

// ------------------------------------------------------------------------ probes

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_are_read_into_values_and_columns() {
        assert_eq!(
            quoted_equalities("T1.element = 'cl' and bond_type = ' = '"),
            vec![
                DefinedValue {
                    column: "T1.element",
                    value: "cl"
                },
                DefinedValue {
                    column: "bond_type",
                    value: " = "
                }
            ]
        );
        assert_eq!(
            defined_columns("first_name, last_name", None),
            vec!["first_name", "last_name"]
        );
        assert_eq!(
            defined_columns("superhero_name", None),
            vec!["superhero_name"]
        );
        assert!(defined_columns("the name of the hero", None).is_empty());
        assert!(defined_columns("label = '+'", None).is_empty());
        assert!(
            defined_columns("weight", None).is_empty(),
            "a plain word may be prose"
        );
        assert_eq!(unquoted("a = 'x/y' / \"b\""), "a =  / ");
    }

    #[test]
    fn words_are_matched_whole() {
        assert!(contains_word(
            "select superhero_name from t",
            "superhero_name"
        ));
        assert!(!contains_word(
            "select full_superhero_name from t",
            "superhero_name"
        ));
        assert!(!contains_word("", "x"));
    }

    /// The codes `run` finds for a question, enriched question and SQLite query (no catalogue).
    fn codes_for(question: &str, enriched: Option<&str>, sql: &str) -> Vec<FindingCode> {
        let spec = crate::sqlspec::extract(sql, Some("sqlite")).expect("test SQL parses");
        let question_spec = QuestionSpec::default();
        let profile = RuleProfile::default();
        run(&CheckInput {
            texts: &QuestionTexts::new(question, enriched),
            sql,
            spec: &spec,
            question_spec: &question_spec,
            dialect: Some("sqlite"),
            schema: None,
            profile: &profile,
        })
        .into_iter()
        .map(|f| f.code)
        .collect()
    }

    #[test]
    fn literals_must_come_from_the_question_or_its_enrichment() {
        let fires = |q: &str, e: Option<&str>, sql: &str| {
            codes_for(q, e, sql).contains(&FindingCode::LiteralNotInQuestion)
        };
        // BIRD 223 (SuperSQL): the id misspelt; 1468: the name misspelt.
        let q = "What are the atom IDs of the bond TR000_2_5?";
        let e = format!("{q} TR000_2_5 is the bond id");
        assert!(fires(
            q,
            Some(&e),
            "SELECT atom_id FROM connected WHERE bond_id = 'TR_000_2_5'"
        ));
        assert!(!fires(
            q,
            Some(&e),
            "SELECT atom_id FROM connected WHERE bond_id = 'TR000_2_5'"
        ));
        let q = "Where is the hometown of Garrett Gerke?";
        assert!(fires(
            q,
            None,
            "SELECT city FROM member WHERE first_name = 'Garrett' AND last_name = 'Girke'"
        ));
        assert!(!fires(
            q,
            None,
            "SELECT city FROM member WHERE first_name = 'Garrett' AND last_name = 'Gerke'"
        ));
        // A value only the enrichment names; other case; IN lists and LIKE patterns piece by piece.
        let q = "List the heroes with blue eyes.";
        let e = format!("{q} blue eyes refers to colour.colour = 'Blue'");
        assert!(!fires(
            q,
            Some(&e),
            "SELECT name FROM hero WHERE colour = 'BLUE'"
        ));
        assert!(!fires(
            q,
            Some(&e),
            "SELECT name FROM hero WHERE colour IN ('Blue')"
        ));
        assert!(fires(
            q,
            Some(&e),
            "SELECT name FROM hero WHERE colour IN ('Blue', 'Green')"
        ));
        assert!(!fires(
            q,
            Some(&e),
            "SELECT name FROM hero WHERE colour LIKE '%blu%'"
        ));
        // Spacing, plural and stem variants (Spider 1007, BIRD 1323).
        assert!(!fires(
            "Which students live in North Carolina?",
            None,
            "SELECT name FROM students WHERE state = 'NorthCarolina'"
        ));
        assert!(!fires(
            "Which events were not fundraisers?",
            None,
            "SELECT name FROM event WHERE type != 'Fundraising'"
        ));
        // Left alone: numbers and dates, codes under three characters, flag values, non-filters.
        let q = "Who received funds on 9/9/2019 with a medium t-shirt in HD?";
        for sql in [
            "SELECT name FROM income WHERE date_received = '2019-09-09'",
            "SELECT name FROM member WHERE size = 'M'",
            "SELECT name FROM channel WHERE hd = 'yes'",
            "SELECT CASE WHEN size = 'Large' THEN 'x' END FROM member",
        ] {
            assert!(!fires(q, None, sql), "{sql}");
        }
    }

    #[test]
    fn compared_numbers_must_be_stated() {
        let fires = |q: &str, e: Option<&str>, sql: &str| {
            codes_for(q, e, sql).contains(&FindingCode::NumberNotInQuestion)
        };
        // BIRD 729 (CHESS-GPT-4o-mini): an invented threshold under an average.
        let q = "What is the average height of the superheroes from Marvel Comics?";
        let e = format!(
            "{q} superheroes from Marvel Comics refers to publisher_name = 'Marvel Comics'; \
             average height of the superheroes refers to AVG(height_cm)"
        );
        let gold = "SELECT AVG(T1.height_cm) FROM superhero AS T1 INNER JOIN publisher AS T2 \
                    ON T1.publisher_id = T2.id WHERE T2.publisher_name = 'Marvel Comics'";
        assert!(!fires(q, Some(&e), gold));
        assert!(fires(q, Some(&e), &format!("{gold} AND T1.height_cm > 0")));
        // Digits, thousands separators, money, number words, once/single, percentages as
        // fractions, decades, and an ordering's integer neighbour ("at least 3" is `> 2`).
        for (q, sql) in [
            (
                "Which student was able to generate income more than $40?",
                "SELECT m FROM income WHERE amount > 40",
            ),
            (
                "Cities with over 1,000 people?",
                "SELECT c FROM city WHERE population > 1000",
            ),
            (
                "Countries that speak at least 3 languages.",
                "SELECT c FROM cl GROUP BY c HAVING COUNT(*) > 2",
            ),
            (
                "Templates used in more than a single document?",
                "SELECT t FROM d GROUP BY t HAVING count(*) > 1",
            ),
            (
                "Visitors who came more than once.",
                "SELECT v FROM visit GROUP BY v HAVING count(*) > 1",
            ),
            (
                "Players with two or more goals.",
                "SELECT p FROM g GROUP BY p HAVING count(*) >= 2",
            ),
            (
                "Schools with an eligible rate above 80%?",
                "SELECT s FROM frpm WHERE rate > 0.8",
            ),
            (
                "Films of the 1990s.",
                "SELECT f FROM film WHERE year >= 1990 AND year < 2000",
            ),
            // Equality with 0 or 1 is a flag test.
            (
                "Which members are active?",
                "SELECT m FROM member WHERE is_active = 1",
            ),
        ] {
            assert!(!fires(q, None, sql), "{q} / {sql}");
        }
        // An id taken from nowhere.
        assert!(fires(
            "Which superheroes have blue eyes?",
            None,
            "SELECT superhero_name FROM superhero WHERE eye_colour_id = 7"
        ));
    }

    #[test]
    fn requested_rounding_needs_a_rounding_function() {
        // BIRD 226: "… as a percentage with five decimal places".
        let q = "What is the percentage of double bonds in the molecule TR008? Please provide your answer as a percentage with five decimal places.";
        let fires = |sql: &str| codes_for(q, None, sql).contains(&FindingCode::RoundingMissing);
        assert!(fires(
            "SELECT CAST(SUM(CASE WHEN bond_type = '=' THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(bond_id) FROM bond WHERE molecule_id = 'TR008'"
        ));
        assert!(!fires(
            "SELECT ROUND(CAST(SUM(CASE WHEN bond_type = '=' THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(bond_id), 5) FROM bond WHERE molecule_id = 'TR008'"
        ));
        assert!(!fires(
            "SELECT printf('%.5f', 100.0 * SUM(bond_type = '=') / COUNT(*)) FROM bond"
        ));
        assert!(
            !codes_for(
                "What is the percentage of double bonds?",
                None,
                "SELECT 100.0 * SUM(bond_type = '=') / COUNT(*) FROM bond"
            )
            .contains(&FindingCode::RoundingMissing),
            "no precision asked for"
        );
    }
}
