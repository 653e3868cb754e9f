//! The evidence checks (the first table of [`super`]): definitions of the enriched question,
//! literals and numbers the question states, divisions, rounding, DISTINCT — no schema needed.

use std::cell::OnceCell;
use std::sync::LazyLock;

use memchr::memmem::Finder;

use crate::catalogue::DbSchema;
use crate::sqlspec::{AggFunc, FilterOp, FilterValue, trimmed};

use super::{
    CheckInput, asks_distinct, clip, contains_without_spaces, contains_word, push,
    truncating_dialect,
};
use crate::stef::question::{evidence_clauses, relevant_definitions, relevant_definitions_lowered};
use crate::stef::text::{
    QuestionTexts, canonical_number, last_dotted_part, lower_collapsed, normalize_value,
};
use crate::stef::{ErrorCategory, Finding, FindingCode, Severity};

/// `col op 'v'` constraints read from a definition's text.
#[derive(Debug, PartialEq)]
pub(super) struct DefinedValue<'t> {
    pub(super) column: &'t str,
    pub(super) value: &'t str,
}

/// The lowercased texts the checks search besides the question texts, each made at most once
/// per event.
struct Lowered<'t> {
    /// The relevant definitions' subjects and texts, `lower_collapsed` (once per event:
    /// `question::relevant_definitions_lowered`).
    definitions: &'t [(String, String)],
    /// The evidence (the enriched question without Qu repeated), `lower_collapsed`, when Qu is
    /// repeated (else it is `QuestionTexts::enriched_lower`).
    evidence: OnceCell<Option<String>>,
    /// The SQL, ASCII-lowercased.
    sql: OnceCell<String>,
}

impl Lowered<'_> {
    fn evidence<'s>(&'s self, input: &'s CheckInput<'_>) -> Option<&'s str> {
        if !input.texts.question_included {
            // The evidence is the whole enriched question, lowercased once per event already.
            return input.texts.enriched_lower.as_deref();
        }
        self.evidence
            .get_or_init(|| input.texts.evidence.map(lower_collapsed))
            .as_deref()
    }

    fn sql(&self, input: &CheckInput<'_>) -> &str {
        self.sql.get_or_init(|| input.sql.to_ascii_lowercase())
    }
}

pub(super) fn evidence_checks(input: &CheckInput<'_>, out: &mut Vec<Finding>) {
    let texts = input.texts;
    let definitions = relevant_definitions(texts);
    let lowered = Lowered {
        definitions: relevant_definitions_lowered(texts),
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
        formula_operands(input, lowered.sql(input), subject, formula, out);
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

/// Whether the SQL writes `value` somewhere (in a comparison the filters did not read): quoted
/// as a literal; a value of three characters or more also bare. A short value's bare letters
/// are in every SQL (`'c'` in `select`).
fn sql_writes_value(sql: &str, value: &str) -> bool {
    sql.contains(&format!("'{value}'"))
        || sql.contains(&format!("\"{value}\""))
        || (value.trim().chars().count() >= 3 && sql.contains(value))
}

fn value_checks(
    input: &CheckInput<'_>,
    defined: &[(DefinedValue<'_>, &str)],
    out: &mut Vec<Finding>,
) {
    // Mismatch: the SQL compares the defined column for equality, never with a defined value.
    for (dv, subject) in defined {
        let column = last_dotted_part(dv.column).to_ascii_lowercase();
        let all_for_column: Vec<String> = defined
            .iter()
            .filter(|(o, _)| last_dotted_part(o.column).eq_ignore_ascii_case(&column))
            .map(|(o, _)| normalize_value(o.value))
            .collect();
        let eq_values: Vec<String> = input
            .spec
            .filters
            .iter()
            .filter(|f| {
                last_dotted_part(&f.lhs) == column && matches!(f.op, FilterOp::Eq | FilterOp::In)
            })
            .flat_map(|f| filter_texts(&f.rhs))
            .collect();
        if !eq_values.is_empty()
            && !eq_values.iter().any(|v| all_for_column.contains(v))
            && !sql_writes_value(input.sql, dv.value)
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
                && trimmed(dv.value).eq_ignore_ascii_case(trimmed(&lit.text))
                && trimmed(dv.value) != trimmed(&lit.text)
                && last_dotted_part(dv.column).eq_ignore_ascii_case(&cref.name)
                && !defined
                    .iter()
                    .any(|(o, _)| trimmed(o.value) == trimmed(&lit.text))
            {
                // Information only: on people's labels it was right 6 times in 10
                // (`examples/stef_labels.rs`) — definitions are often not spelled as the data
                // is. With a probe, `value_not_in_column` says whether the literal is stored.
                push(
                    out,
                    FindingCode::LiteralCaseMismatch,
                    Severity::Info,
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

fn division_checks(input: &CheckInput<'_>, lowered: &Lowered<'_>, out: &mut Vec<Finding>) {
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
        if rules.is_ignored(&filter.lhs) || crate::stef::align::is_benign(filter, rules) {
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
        if rules.is_ignored(&filter.lhs) || crate::stef::align::is_benign(filter, rules) {
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
                if let Some(n) = crate::stef::question::number_word(word).or(match word {
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
fn rounding_check(input: &CheckInput<'_>, lowered: &Lowered<'_>, out: &mut Vec<Finding>) {
    // Searchers built once: a question and an evidence text are searched for both per event.
    static DECIMAL_ROUND: LazyLock<[Finder<'static>; 2]> =
        LazyLock::new(|| ["decimal", "round"].map(Finder::new));
    let [decimal, round] = &*DECIMAL_ROUND;
    let asks = |lower: &str| {
        (decimal.find(lower.as_bytes()).is_some()
            && (contains_word(lower, "decimal") || contains_word(lower, "decimals")))
            || (round.find(lower.as_bytes()).is_some()
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
            || contains_without_spaces(text, piece)
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
    if crate::stef::text::words_match(a, b) {
        return true;
    }
    let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let shorter = a.chars().count().min(b.chars().count());
    common >= 5 && common * 3 >= shorter * 2
}

/// Searchers for `distinct` and `group by`, built once.
static DISTINCT_GROUP_BY: LazyLock<[Finder<'static>; 2]> =
    LazyLock::new(|| ["distinct", "group by"].map(Finder::new));

fn distinct_check(input: &CheckInput<'_>, lowered: &Lowered<'_>, out: &mut Vec<Finding>) {
    let asks = asks_distinct;
    let asked = asks(&input.texts.question_lower)
        || lowered.definitions.iter().any(|(s, d)| asks(s) || asks(d))
        || lowered.evidence(input).is_some_and(|e| {
            DISTINCT_GROUP_BY[0].find(e.as_bytes()).is_some() && contains_word(e, "distinct")
        });
    if !asked {
        return;
    }
    let spec = input.spec;
    let sql_lower = lowered.sql(input);
    let deduplicates = spec.distinct
        || spec.aggregations.iter().any(|a| a.distinct)
        || !spec.group_by.is_empty()
        || spec.set_operations
        || DISTINCT_GROUP_BY
            .iter()
            .any(|words| words.find(sql_lower.as_bytes()).is_some());
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

/// Whether a lowercased text mentions a percentage.
fn mentions_percentage(lower: &str) -> bool {
    contains_word(lower, "percentage")
        || contains_word(lower, "percent")
        || contains_word(lower, "percentages")
        || lower.contains('%') && !lower.contains("'%") && !lower.contains("%'")
}

/// `col = 'v'` pairs of a definition (quoted values only: a number or a bare word may be part
/// of a formula).
pub(super) fn quoted_equalities(definition: &str) -> Vec<DefinedValue<'_>> {
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

/// The evidence's `DIVIDE(numerator, denominator)` against the SQL's first division:
///
/// - a denominator defined as a plain count of a column (`COUNT(atom_id)`; not a conditional
///   count, `COUNT(gender = 'Female')`, which a WHERE may carry instead) while the SQL divides by
///   a count of columns of another entity (`COUNT(bond.bond_id)`): with a catalogue, no table of
///   the SQL's denominator has the defined column (counting any column of the same table counts
///   the same rows); without one, both are keys (`id`, `…_id`);
/// - a numerator defined as `SUM(<condition>)` whose condition (before any `WHERE` it writes)
///   reads a column the SQL's numerator does not (`SUM(label = '+' AND element = 'h')` computed
///   as `SUM(CASE WHEN label = '+' …)`).
///
/// Only the formula's words that look like columns count: a snake_case or camelCase identifier,
/// or a word the SQL also writes (`COUNT(male clients)` is prose). Information only.
fn formula_operands(
    input: &CheckInput<'_>,
    sql_lower: &str,
    subject: &str,
    formula: &str,
    out: &mut Vec<Finding>,
) {
    let Some(refs) = input.spec.references.as_ref() else {
        return;
    };
    let Some(division) = refs.divisions.first() else {
        return;
    };
    let Some((numerator, denominator)) = divide_operands(formula) else {
        return;
    };
    let sql_columns = |range: &std::ops::Range<usize>| -> Vec<String> {
        refs.columns
            .get(range.clone())
            .unwrap_or_default()
            .iter()
            .map(|c| c.name.to_ascii_lowercase())
            .collect()
    };
    let (sql_numerator, sql_denominator) = (
        sql_columns(&division.numerator_columns),
        sql_columns(&division.denominator_columns),
    );
    let defined_denominator = formula_columns(denominator, sql_lower);
    let is_key = |c: &String| c == "id" || c.ends_with("_id") || (c.len() > 4 && c.ends_with("id"));
    let same_entity = || match input.schema {
        Some(schema) => {
            let resolver = super::catalogue::Resolver { schema, refs };
            let mut scratch = Vec::new();
            division.denominator_columns.clone().any(|i| {
                matches!(resolver.resolve(i, &mut scratch),
                    super::catalogue::Resolved::Column(t, _)
                        if defined_denominator.iter().any(|d| schema.column_index(t, d).is_some()))
            })
        }
        None => !(defined_denominator.iter().all(is_key) && sql_denominator.iter().all(is_key)),
    };
    if !defined_denominator.is_empty()
        && !sql_denominator.is_empty()
        && !has_comparison(&unquoted(denominator).to_ascii_lowercase())
        && !defined_denominator
            .iter()
            .any(|c| sql_denominator.contains(c))
        && !same_entity()
    {
        push(
            out,
            FindingCode::FormulaOperandMismatch,
            Severity::Info,
            ErrorCategory::Function,
            format!(
                "\"{}\" divides by {} ({}); the SQL divides by {}",
                subject.trim(),
                defined_denominator.join(", "),
                clip(denominator.trim(), 60),
                sql_denominator.join(", ")
            ),
        );
    }
    // The summed condition, before any WHERE the formula writes (a filter the SQL may carry in
    // its own WHERE), as written: `formula_columns` reads camelCase.
    let numerator_text = unquoted(numerator);
    let numerator_lower = numerator_text.to_ascii_lowercase();
    let condition = numerator_text
        .get(
            ..numerator_lower
                .find(" where ")
                .unwrap_or(numerator_text.len()),
        )
        .unwrap_or_default();
    if numerator_lower.trim_start().starts_with("sum(")
        && has_comparison(&condition.to_ascii_lowercase())
        && !sql_numerator.is_empty()
        && let Some(missing) = formula_columns(condition, sql_lower)
            .into_iter()
            .find(|c| !sql_numerator.contains(c))
    {
        push(
            out,
            FindingCode::FormulaOperandMismatch,
            Severity::Info,
            ErrorCategory::Function,
            format!(
                "\"{}\" sums {} (reading {missing}); the SQL's numerator never reads {missing}",
                subject.trim(),
                clip(numerator.trim(), 60),
            ),
        );
    }
}

/// Whether an unquoted, lowercased formula text compares (`=`, `<`, `>`, LIKE, IN, BETWEEN).
fn has_comparison(text: &str) -> bool {
    static WORDS: LazyLock<[Finder<'static>; 4]> =
        LazyLock::new(|| [" like ", " in ", " in(", " between "].map(Finder::new));
    let bytes = text.as_bytes();
    memchr::memchr3(b'=', b'<', b'>', bytes).is_some()
        || WORDS.iter().any(|w| w.find(bytes).is_some())
}

/// The two arguments of a formula's first `DIVIDE(…)` (split at its top-level comma or
/// semicolon — BIRD writes both), `None` without one.
pub(super) fn divide_operands(formula: &str) -> Option<(&str, &str)> {
    let at = formula.to_ascii_uppercase().find("DIVIDE")?;
    let rest = formula.get(at + "DIVIDE".len()..)?.trim_start();
    let body = rest.strip_prefix('(')?;
    let mut depth = 0usize;
    let mut comma = None;
    for (i, c) in body.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => {
                let comma = comma?;
                return Some((body.get(..comma)?, body.get(comma + 1..i)?));
            }
            ')' => depth -= 1,
            ',' | ';' if depth == 0 && comma.is_none() => comma = Some(i),
            _ => {}
        }
    }
    None
}

/// The words of a formula's operand that name columns, lowercased: identifiers outside quotes,
/// neither SQL words nor `T1`-style aliases, written snake_case or camelCase or also written in
/// the SQL (`sql_lower`); a qualifier's last part.
fn formula_columns(operand: &str, sql_lower: &str) -> Vec<String> {
    const NOT_COLUMNS: [&str; 30] = [
        "sum", "count", "cound", "divide", "cast", "as", "real", "and", "or", "when", "then",
        "else", "end", "case", "iif", "distinct", "all", "where", "not", "null", "is", "avg",
        "max", "min", "in", "like", "between", "float", "integer", "subtract",
    ];
    let text = unquoted(operand);
    let mut out: Vec<String> = Vec::new();
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')) {
        let name = last_dotted_part(word);
        if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            continue;
        }
        let lower = name.to_ascii_lowercase();
        let alias = lower.len() > 1
            && lower.starts_with('t')
            && lower[1..].bytes().all(|b| b.is_ascii_digit());
        if alias || NOT_COLUMNS.contains(&lower.as_str()) || out.contains(&lower) {
            continue;
        }
        let camel = name
            .as_bytes()
            .windows(2)
            .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
        if name.contains('_') || camel || contains_word(sql_lower, &lower) {
            out.push(lower);
        }
    }
    out
}

/// Formulas of the evidence about the question: `<subject> = <formula>` clauses (BIRD writes
/// `percentage = DIVIDE(…)`) and definitions (`<subject> refers to <formula>`) whose subject's
/// words are the question's, holding `DIVIDE(`, `SUBTRACT(` or `/`.
fn formulas<'e>(input: &CheckInput<'e>, question_lower: &str) -> Vec<(&'e str, &'e str)> {
    let mut out = Vec::new();
    for clause in evidence_clauses(input.texts) {
        if !states_formula(clause.text) {
            continue;
        }
        let (subject, formula) = match clause.definition {
            Some(parts) => parts,
            None => match clause.text.split_once('=') {
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
            && states_formula(formula)
        {
            out.push((subject, formula));
        }
    }
    out
}

/// Whether a text writes a formula: a `DIVIDE(` or `SUBTRACT(` call (any case) or a `/`
/// outside quoted strings. Reads the text in place, with no uppercase or unquoted copy.
pub(super) fn states_formula(text: &str) -> bool {
    let bytes = text.as_bytes();
    // A call is its name right before a `(`: the few parentheses are found by `memchr` and the
    // name compared behind each, instead of comparing a window at every byte.
    let call_before = |paren: usize, name: &[u8]| {
        paren
            .checked_sub(name.len())
            .and_then(|start| bytes.get(start..paren))
            .is_some_and(|w| w.eq_ignore_ascii_case(name))
    };
    if memchr::memchr_iter(b'(', bytes)
        .any(|paren| call_before(paren, b"divide") || call_before(paren, b"subtract"))
    {
        return true;
    }
    memchr::memchr(b'/', bytes).is_some() && unquoted_chars(text).any(|c| c == '/')
}

/// `text` with the contents of quoted strings removed (`'a/b'` says nothing about division):
/// [`unquoted_chars`], copied a run at a time between the quotes `memchr` finds.
pub(super) fn unquoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<u8> = None;
    let mut run_start = 0;
    for at in memchr::memchr2_iter(b'\'', b'"', text.as_bytes()) {
        let byte = text.as_bytes()[at];
        match quote {
            Some(open) if byte == open => {
                quote = None;
                run_start = at + 1;
            }
            Some(_) => {}
            None => {
                // Quotes are ASCII, so these are character boundaries.
                out.push_str(text.get(run_start..at).unwrap_or_default());
                quote = Some(byte);
            }
        }
    }
    if quote.is_none() {
        out.push_str(text.get(run_start..).unwrap_or_default());
    }
    out
}

/// The characters of `text` outside quoted strings: a quote opens at `'` or `"` and closes at
/// the same quote; the quotes themselves are left out too.
pub(super) fn unquoted_chars(text: &str) -> impl Iterator<Item = char> + '_ {
    let mut quote: Option<char> = None;
    text.chars().filter(move |&c| match quote {
        Some(q) if c == q => {
            quote = None;
            false
        }
        Some(_) => false,
        None if c == '\'' || c == '"' => {
            quote = Some(c);
            false
        }
        None => true,
    })
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
        let column_lower = last_dotted_part(column).to_ascii_lowercase();
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
pub(super) fn defined_columns<'d>(definition: &'d str, schema: Option<&DbSchema>) -> Vec<&'d str> {
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
                    .any(|c| c.name.eq_ignore_ascii_case(last_dotted_part(piece)))
            });
        if !is_identifier || !looks_like_column {
            return Vec::new();
        }
        out.push(last_dotted_part(piece));
    }
    out
}
