//! Deterministic question-side spec extraction (Sq, stef.md §2.2) from lexicons and token
//! patterns — no model, no schema.
//!
//! What is read from where:
//! - **Structure** (aggregations, grouping, ordering, top-k, outputs) comes from the user's
//!   question Qu: it is the intent being graded.
//! - **Required filters** come from the enriched question Qe when present (it is the agent's
//!   explicit reading, and carries hints such as BIRD's `label = '-'`), else from Qu. Qe is read
//!   clause by clause (`;`, newlines, sentence ends, and commas between chained definitions):
//!   - a *definition* (`<subject> refers to | means | stands for | indicates | … <definition>`,
//!     either order, or `<multi-word subject> = <formula>`) contributes its definition side only
//!     when its subject is made of Qu's words (≥ ⅔ of the content words; `carcinogenic` does not
//!     match `non-carcinogenic`). Glossary entries about terms Qu does not use are ignored. A
//!     value-only filter for a term a kept definition explains is dropped (the definition's
//!     constraint stands for it), and aggregations/superlatives/top-k that Qu states with that
//!     term are replaced by the definition's functions (a formula with several functions or a
//!     division is one computation, `Other("computed")`);
//!   - a *declaration* `<value> is a|an|the <description>` ("'Vice President' is a position of
//!     Student Club") contributes only the value, and only when Qu mentions it;
//!   - any other clause contributes everything it states.
//! - **SQL literals found in the question text**: a literal of one of the SQL's filters that
//!   appears (as a phrase, or a number token) in Qu or in the required part of Qe is a required
//!   filter with that SQL filter's left-hand side. This gives dimensions to values the question
//!   states in prose.
//! - **Yes/no and "whether" questions** ("Is molecule TR151 carcinogenic?"): a filter on a
//!   column the SQL returns, with a value Qu does not state, is answered by returning the column
//!   and is not required.
//!
//! Lexicon:
//! - total/sum → SUM (`total number of` → COUNT; `total <plural noun>` → SUM or COUNT,
//!   `Other("total")`), average/mean/avg → AVG, how many/number of/count → COUNT (not `phone
//!   number of`), distinct/unique (and `how many different`; also a DISTINCT instruction in Qe)
//!   → DISTINCT on the COUNT; highest/maximum/most/largest/… → MAX, lowest/minimum/least/fewest/…
//!   → MIN (both also set `explicit_order` and `top_k = 1` unless a number is given);
//!   percentage/ratio/proportion/difference/`how many times` → a computed aggregation
//!   (`Other("computed")`).
//! - Ordering: top N, first/last N, N highest…, `list (at least) N`, ranked/sorted/ordered,
//!   ascending/descending, alphabetical, youngest/oldest/earliest/latest/newest/best/worst, and
//!   `the <word>est` (direction unknown: ordering only).
//! - Grouping: `per X`, `for/in/of each|every X`, `grouped/broken down/split by X`, and `by X`
//!   unless `by` follows a participle (`published by`, `sorted by`) or X is a proper noun.
//! - Filters: explicit `lhs op value` (depth 0 only — comparisons inside function calls such as
//!   `AVG(element = 'o')` are conditional aggregations, not filters; `a = other_column` is a join),
//!   `[lhs] between a and b`, `from a to b`, comparatives before numbers (more than/over/at
//!   least/under/…, and `>`-style symbols), years, dates, quoted values, and capitalised entities
//!   (runs of capitalised words that are not sentence-initial stop words, identifiers, table
//!   qualifiers, SQL keywords, months or weekdays). A bare number that is not compared and not a
//!   year ("atom 2", "3 powers") is not required on its own: the SQL-literal rule picks it up when
//!   the SQL uses it.
//!
//! Values are normalized like sqlspec literals ([`normalize_value`]; quoted text stays text:
//! `'09'` is not `9`); column mappings of the profile are applied to every dimension (NL term →
//! physical column).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::LazyLock;

use crate::sqlspec::{AggFunc, FilterOp, FilterValue, SqlSpec};

use super::text::{
    MAX_TEXT_BYTES, Token, TokenKind, canonical_number, clip, contains_phrase, lower_collapsed,
    name_key, normalize_value, singular, tokenize,
};
use super::{QuestionAggregation, QuestionFilter, QuestionSpec, RuleProfile};

/// Name of the computed-expression aggregation family (percentage, ratio, difference, …).
pub const COMPUTED: &str = "computed";

/// Name of the "total" family: `total <plural noun>` is a SUM or a COUNT.
pub const TOTAL: &str = "total";

/// Extract the question spec of one event.
///
/// `sql` enables the SQL-literal rule (module doc); `profile` supplies column mappings.
pub fn extract(
    question: &str,
    enriched: Option<&str>,
    sql: Option<&SqlSpec>,
    profile: &RuleProfile,
) -> QuestionSpec {
    let question = clip(question, MAX_TEXT_BYTES);
    let enriched = enriched.map(|e| clip(e, MAX_TEXT_BYTES));
    let qu_tokens = tokenize(question);
    let qu_lower = question.to_ascii_lowercase();
    let qu = Doc {
        text: question,
        lower: &qu_lower,
        toks: &qu_tokens,
    };
    let mut spec = QuestionSpec::default();
    let mut qu_used = vec![false; qu_tokens.len()];
    structure(&qu, &mut spec, &mut qu_used);
    spec.outputs = outputs(&qu);

    let enriched = enriched.filter(|e| !e.trim().is_empty());
    let mut defined: Vec<(String, String)> = Vec::new();
    let req_text: String;
    let req_tokens;
    let req_lower;
    let req_doc;
    let mut req_used;
    let (filter_doc, filter_used) = match enriched {
        Some(e) => {
            req_text = required_text(e, &qu, &mut defined);
            req_tokens = tokenize(&req_text);
            req_lower = req_text.to_ascii_lowercase();
            req_doc = Doc {
                text: &req_text,
                lower: &req_lower,
                toks: &req_tokens,
            };
            req_used = vec![false; req_tokens.len()];
            // Top-k numbers in Qe are not filters either; a DISTINCT instruction counts.
            let mut scratch = QuestionSpec::default();
            structure(&req_doc, &mut scratch, &mut req_used);
            if (0..req_tokens.len()).any(|i| is_in(DISTINCT_WORDS, req_doc.w(i))) {
                for a in &mut spec.aggregations {
                    if a.func == AggFunc::Count {
                        a.distinct = true;
                    }
                }
            }
            (&req_doc, &mut req_used)
        }
        None => (&qu, &mut qu_used),
    };
    spec.filters = text_filters(filter_doc, filter_used);
    // A term a kept definition explains ("hydrogen refers to element = 'h'") is not itself a
    // value filter: the definition's constraint stands for it.
    if !defined.is_empty() {
        spec.filters.retain(|f| {
            f.lhs.is_some() || !defined.iter().any(|(d, _)| contains_phrase(d, &f.value))
        });
        redefine_structure(&mut spec, &defined);
    }

    if let Some(sql) = sql {
        sql_literal_filters(
            question,
            enriched.map(|_| filter_doc.text),
            &qu,
            enriched.map(|_| filter_doc),
            sql,
            &mut spec.filters,
        );
    }
    if let Some(sql) = sql {
        drop_schema_terms(sql, &mut spec.filters);
    }
    if let Some(sql) = sql
        && asks_whether(&qu)
    {
        // "Is molecule TR151 carcinogenic?": the predicate is what the user wants to see. A
        // filter on a column the SQL returns, with a value Qu does not state, is answered by
        // returning that column rather than by filtering on it.
        let qu_l = lower_collapsed(question);
        spec.filters.retain(|f| {
            let projected = f.lhs.as_deref().is_some_and(|l| {
                let key = name_key(l);
                sql.projections
                    .iter()
                    .any(|p| p.columns.iter().any(|c| name_key(c) == key))
            });
            !projected || phrase_in(&qu, &qu_l, &f.value)
        });
    }
    apply_mappings(profile, &mut spec);
    dedup_filters(&mut spec.filters);
    spec
}

/// A capitalised "entity" that names a table or column of the SQL ("TV Channel", "Package
/// Option") is schema vocabulary, not a value.
fn drop_schema_terms(sql: &SqlSpec, filters: &mut Vec<QuestionFilter>) {
    if !filters
        .iter()
        .any(|f| f.lhs.is_none() && f.op == FilterOp::Eq)
    {
        return;
    }
    let mut names: Vec<&str> = Vec::new();
    names.extend(sql.tables.iter().map(String::as_str));
    for p in &sql.projections {
        names.extend(p.columns.iter().map(String::as_str));
        names.extend(p.alias.as_deref());
    }
    names.extend(sql.filters.iter().map(|f| f.lhs.as_str()));
    names.extend(sql.group_by.iter().map(String::as_str));
    names.extend(sql.order_by.iter().map(|o| o.expr.as_str()));
    names.extend(sql.aggregations.iter().filter_map(|a| a.column.as_deref()));
    let keys: Vec<String> = names.iter().map(|n| name_key(n)).collect();
    // Words of all schema names, computed only if a key comparison does not decide.
    let words_cell: std::cell::OnceCell<Vec<String>> = std::cell::OnceCell::new();
    filters.retain(|f| {
        if f.lhs.is_some() || f.op != FilterOp::Eq || f.value.contains(|c: char| c.is_ascii_digit())
        {
            return true;
        }
        let key = name_key(&f.value);
        let singular_key = name_key(&singular(&f.value));
        if keys.iter().any(|k| *k == key || *k == singular_key) {
            return false;
        }
        // Every content word of the "entity" is a word of some schema name ("TV" of TV_series,
        // "Package Option of TV Channel").
        let words: Vec<String> = crate::stef::text::name_words(&f.value)
            .into_iter()
            .filter(|w| !is_in(PHRASE_STOP, w))
            .collect();
        if words.is_empty() {
            return true;
        }
        let schema_words = words_cell.get_or_init(|| {
            names
                .iter()
                .flat_map(|n| crate::stef::text::name_words(n))
                .collect()
        });
        !words.iter().all(|w| schema_words.iter().any(|s| s == w))
    });
}

/// Yes/no and "whether" questions: "Is …?", "Does …?", "… whether …", "… or not".
fn asks_whether(doc: &Doc<'_>) -> bool {
    let first = doc.w(0);
    matches!(
        first,
        "is" | "are" | "was" | "were" | "does" | "do" | "did" | "has" | "have" | "can"
    ) || (0..doc.toks.len()).any(|i| {
        let w = doc.w(i);
        w == "whether"
            || (w == "or" && matches!(doc.w(i + 1), "not" | "non"))
            || (w == "if" && matches!(doc.w(i + 1), "it" | "they" | "he" | "she" | "this"))
    })
}

/// The part of Qe that states requirements: every clause that is not a definition, plus the
/// constraint side of definitions whose subject is (mostly) made of Qu's words. Glossary
/// definitions about things Qu does not mention (`label = '+' means carcinogenic` for a question
/// about bond types) are dropped. Subjects of kept definitions are collected in `defined`.
pub(crate) fn required_text(
    enriched: &str,
    qu: &Doc<'_>,
    defined: &mut Vec<(String, String)>,
) -> String {
    // Qu's words are only needed when Qe holds a definition.
    let qu_words_cell: std::cell::OnceCell<Vec<String>> = std::cell::OnceCell::new();
    let mut out = String::with_capacity(enriched.len());
    for clause in split_clauses(enriched) {
        let piece = match definition_parts(clause) {
            None => match declared_value(clause) {
                // A declaration about a value Qu does not mention is glossary, too.
                Some(value) => {
                    let qu_words = qu_words_cell.get_or_init(|| word_set(qu));
                    if !subject_matches(value, qu_words) {
                        continue;
                    }
                    value
                }
                None => clause,
            },
            Some((subject, definition)) => {
                let qu_words = qu_words_cell.get_or_init(|| word_set(qu));
                if !subject_matches(subject, qu_words) {
                    continue;
                }
                defined.push((lower_collapsed(subject), lower_collapsed(definition)));
                definition
            }
        };
        if !out.is_empty() {
            out.push_str(" ; ");
        }
        out.push_str(piece.trim());
    }
    out
}

/// `<value> is a|an|the <description>` ("'Vice President' is a position of Student Club",
/// "TR000 is the molecule id"): only the value is a requirement, the description names its
/// column. Returns the value part.
fn declared_value(clause: &str) -> Option<&str> {
    let lower = clause.to_ascii_lowercase();
    for m in [
        " is a ",
        " is an ",
        " is the ",
        " are the ",
        " are a ",
        " are ",
    ] {
        if let Some(pos) = lower.find(m) {
            let value = clause.get(..pos)?.trim();
            // Only short value-like subjects ('President', TR000, Women's Soccer), never prose
            // ("What is the …", "In how many atoms is …").
            let first = value
                .split_whitespace()
                .next()
                .map(|w| {
                    w.trim_matches(|c: char| !c.is_alphanumeric())
                        .to_ascii_lowercase()
                })
                .unwrap_or_default();
            let value_like = value
                .chars()
                .any(|c| c == '\'' || c == '"' || c.is_ascii_digit() || c.is_uppercase());
            let short = (1..=4).contains(&value.split_whitespace().count());
            if short && value_like && !has_constraint(value) && !is_in(ENTITY_STOP, &first) {
                return Some(value);
            }
            return None;
        }
    }
    None
}

/// Split text into clauses at `;`, newlines and sentence ends (`.`, `?`, `!` before whitespace
/// or the end), outside parentheses.
pub(crate) fn split_clauses(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        let end_here = match b {
            b'(' => {
                depth += 1;
                false
            }
            b')' => {
                depth -= 1;
                false
            }
            b';' | b'\n' => depth <= 0,
            b'.' | b'?' | b'!' => {
                let next_word = bytes[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
                depth <= 0
                    && bytes.get(i + 1).is_none_or(|c| c.is_ascii_whitespace())
                    // `element ! = 'br'` is an operator, not a sentence end.
                    && !(b == b'!' && next_word == Some(&b'='))
            }
            _ => false,
        };
        if end_here {
            if let Some(piece) = text.get(start..i)
                && !piece.trim().is_empty()
            {
                out.push(piece);
            }
            start = i + 1;
            depth = 0;
        }
    }
    if let Some(piece) = text.get(start..)
        && !piece.trim().is_empty()
    {
        out.push(piece);
    }
    // "element = 'o' means Oxygen, element = 's' means Sulfur": chained definitions in one
    // clause are split at their commas.
    let mut split = Vec::with_capacity(out.len());
    for clause in out {
        if !has_two_markers(clause) {
            split.push(clause);
            continue;
        }
        let mut depth = 0i32;
        let mut from = 0usize;
        for (i, b) in clause.bytes().enumerate() {
            match b {
                b'(' => depth += 1,
                b')' => depth -= 1,
                b',' if depth <= 0 => {
                    if let Some(piece) = clause.get(from..i)
                        && !piece.trim().is_empty()
                    {
                        split.push(piece);
                    }
                    from = i + 1;
                }
                _ => {}
            }
        }
        if let Some(piece) = clause.get(from..)
            && !piece.trim().is_empty()
        {
            split.push(piece);
        }
    }
    split
}

/// Aggregations, superlatives and top-k requests that Qu states with a term a kept definition
/// explains are replaced by what the definition says: "total number of budget amount refers to
/// SUM(amount)" turns COUNT into SUM; "fastest refers to attribute_value = 100" drops MAX;
/// "first 100 molecules refers to molecule_id between …" drops top-k 100.
fn redefine_structure(spec: &mut QuestionSpec, defined: &[(String, String)]) {
    for (subject, definition) in defined {
        let sub = text_structure(subject);
        if sub.aggregations.is_empty() && sub.top_k.is_none() {
            continue;
        }
        let mut def_funcs = function_calls(definition);
        // A formula (`DIVIDE(SUM(cost), COUNT(event_id))`) is one computation; any equivalent
        // SQL (AVG, a ratio of aggregates) implements it.
        if def_funcs.len() > 1 || definition.contains("divide") || definition.contains('/') {
            def_funcs = vec![AggFunc::Other(COMPUTED.into())];
        }
        let ordered = [
            "order by", "limit", "top", "desc", "asc", "highest", "lowest",
        ]
        .iter()
        .any(|w| contains_phrase(definition, w));
        for a in &sub.aggregations {
            if !def_funcs.contains(&a.func) {
                spec.aggregations.retain(|x| x.func != a.func);
            }
        }
        for f in def_funcs {
            push_agg(spec, f, None, false);
        }
        if sub.top_k.is_some() && sub.top_k == spec.top_k && !ordered {
            let max_min = spec
                .aggregations
                .iter()
                .any(|a| matches!(a.func, AggFunc::Max | AggFunc::Min));
            if !max_min {
                spec.top_k = None;
                spec.explicit_order = false;
            }
        }
    }
}

/// Structure (aggregations, top-k) of a short text.
fn text_structure(text: &str) -> QuestionSpec {
    let toks = tokenize(text);
    let lower = text.to_ascii_lowercase();
    let doc = Doc {
        text,
        lower: &lower,
        toks: &toks,
    };
    let mut spec = QuestionSpec::default();
    let mut used = vec![false; toks.len()];
    structure(&doc, &mut spec, &mut used);
    spec
}

/// Aggregate functions called in a (lowercase) formula: `max(count(bond_type))` → MAX, COUNT.
fn function_calls(formula: &str) -> Vec<AggFunc> {
    let mut out = Vec::new();
    for (name, func) in [
        ("sum(", AggFunc::Sum),
        ("avg(", AggFunc::Avg),
        ("count(", AggFunc::Count),
        ("max(", AggFunc::Max),
        ("min(", AggFunc::Min),
    ] {
        let found = formula.match_indices(name).any(|(pos, _)| {
            formula[..pos]
                .chars()
                .next_back()
                .is_none_or(|c| !c.is_alphanumeric() && c != '_')
        });
        if found && !out.contains(&func) {
            out.push(func);
        }
    }
    out
}

/// Definition verbs (longest first where one is a prefix of another), matched as whole words.
const DEFINITION_MARKERS: &[&str] = &[
    "refers to",
    "refer to",
    "refers",
    "refer",
    "means",
    "mean",
    "stands for",
    "is defined as",
    "indicates",
    "represents",
    "denotes",
];

/// Byte range (leading and trailing space included) of the first definition marker, scanning
/// word starts once (ASCII case-insensitive, no allocation).
fn find_marker(text: &str) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    for i in 1..b.len() {
        if b[i - 1] != b' ' || !b[i].is_ascii_alphabetic() {
            continue;
        }
        let first = b[i].to_ascii_lowercase();
        if !matches!(first, b'r' | b'm' | b's' | b'i' | b'd') {
            continue;
        }
        for m in DEFINITION_MARKERS {
            let end = i + m.len();
            if end < b.len() && b[end] == b' ' && b[i..end].eq_ignore_ascii_case(m.as_bytes()) {
                return Some((i - 1, m.len() + 2));
            }
        }
    }
    None
}

fn has_two_markers(text: &str) -> bool {
    let Some((pos, len)) = find_marker(text) else {
        return false;
    };
    text.get(pos + len - 1..)
        .is_some_and(|rest| find_marker(rest).is_some())
}

/// Whether a piece of a clause states a constraint or a formula (comparison, function call).
fn has_constraint(s: &str) -> bool {
    s.contains(['=', '<', '>', '('])
        || s.split_ascii_whitespace().any(|w| {
            w.eq_ignore_ascii_case("like")
                || w.eq_ignore_ascii_case("in")
                || w.eq_ignore_ascii_case("between")
        })
}

/// Split a definition clause into (subject, definition): `<subject> refers to <definition>`,
/// `<definition> means <subject>`, `<multi-word subject> = <formula>`. `None` for clauses that
/// are not definitions.
pub(crate) fn definition_parts(clause: &str) -> Option<(&str, &str)> {
    if let Some((pos, len)) = find_marker(clause) {
        let left = clause.get(..pos)?;
        let right = clause.get(pos + len..)?;
        return if has_constraint(right) || !has_constraint(left) {
            Some((left, right))
        } else {
            Some((right, left))
        };
    }
    // `average number of oxygen atoms = AVG(...)`: a multi-word NL subject before `=`.
    let pos = clause.find('=')?;
    let left = clause.get(..pos)?.trim_end_matches(['!', '<', '>']);
    let words = left
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphabetic))
        .count();
    let identifier_like = left.contains(['_', '.', '(', '\'', '"']);
    if words >= 2 && !identifier_like && !has_constraint(left) {
        return Some((left, clause.get(pos + 1..)?));
    }
    None
}

/// Lowercase singular words of Qu's word tokens (hyphenated words kept whole).
pub(crate) fn word_set(doc: &Doc<'_>) -> Vec<String> {
    let mut words: Vec<String> = Vec::with_capacity(doc.toks.len() + 4);
    for i in 0..doc.toks.len() {
        let w = doc.w(i);
        if w.is_empty() {
            continue;
        }
        words.push(stem(w));
        if let Some((head, _)) = w.split_once('-') {
            // "double-bond" also says "double" and "bond"; "non-carcinogenic" says neither
            // "carcinogenic" nor anything positive.
            if !matches!(head, "non" | "un" | "anti" | "not" | "in" | "dis") {
                words.extend(w.split('-').filter(|p| !p.is_empty()).map(stem));
            }
        } else if matches!(w, "not" | "non" | "no") {
            // "not carcinogenic" is "non-carcinogenic".
            let next = doc.w(i + 1);
            if !next.is_empty() {
                words.push(stem(&format!("non-{next}")));
            }
        }
    }
    words.sort();
    words.dedup();
    words
}

/// Crude stem for definition-subject matching: singular, minus `-ed`/`-ing` on long words.
fn stem(w: &str) -> String {
    let w = w.trim_end_matches("'s");
    let base = if w.len() > 5 {
        w.strip_suffix("ing")
            .or_else(|| w.strip_suffix("ed"))
            .unwrap_or(w)
    } else {
        w
    };
    singular(base)
}

/// Whether at least two thirds of a subject's content words are words of Qu (a hyphenated
/// subject word also matches when all of its parts are in Qu; Qu's `double-bond` also counts as
/// `double` and `bond`, but `non-carcinogenic` is never `carcinogenic`, and `not carcinogenic`
/// counts as `non-carcinogenic`). For `<noun> are|is <predicate>` subjects only the predicate is
/// compared.
pub(crate) fn subject_matches(subject: &str, qu_words: &[String]) -> bool {
    // "molecules are carcinogenic": the predicate is the distinctive part.
    let lower = subject.to_ascii_lowercase();
    let subject = [" are ", " is "]
        .iter()
        .find_map(|m| lower.find(m).map(|pos| &subject[pos + m.len()..]))
        .filter(|rest| !rest.trim().is_empty())
        .unwrap_or(subject);
    let toks = tokenize(subject);
    let mut total = 0usize;
    let mut found = 0usize;
    for t in &toks {
        if t.kind != TokenKind::Word {
            continue;
        }
        let w = t.text.to_ascii_lowercase();
        if w.len() < 2 || is_in(PHRASE_STOP, &w) || is_in(SUBJECT_STOP, &w) {
            continue;
        }
        total += 1;
        let s = stem(&w);
        let hit = qu_words.binary_search(&s).is_ok()
            || (w.contains('-')
                && w.split('-')
                    .filter(|p| !p.is_empty())
                    .all(|p| qu_words.binary_search(&stem(p)).is_ok()));
        if hit {
            found += 1;
        }
    }
    total > 0 && found * 3 >= total * 2
}

const SUBJECT_STOP: u32 = 1 << 15;
const SUBJECT_STOP_LIST: &[&str] = &["type", "types", "value", "values", "name", "names"];

/// The constraints one text states on its own (no SQL, no mappings): used by enrichment
/// validation to compare Qu with Qe.
pub fn text_constraints(text: &str) -> QuestionSpec {
    let text = clip(text, MAX_TEXT_BYTES);
    let toks = tokenize(text);
    let lower = text.to_ascii_lowercase();
    let doc = Doc {
        text,
        lower: &lower,
        toks: &toks,
    };
    let mut spec = QuestionSpec::default();
    let mut used = vec![false; toks.len()];
    structure(&doc, &mut spec, &mut used);
    spec.filters = text_filters(&doc, &mut used);
    dedup_filters(&mut spec.filters);
    spec
}

/// A tokenized text with an ASCII-lowercased copy (same byte offsets).
pub(crate) struct Doc<'a> {
    pub(crate) text: &'a str,
    pub(crate) lower: &'a str,
    pub(crate) toks: &'a [Token<'a>],
}

impl<'a> Doc<'a> {
    /// Lowercase text of token `i` if it is a word, else "".
    fn w(&self, i: usize) -> &'a str {
        match self.toks.get(i) {
            Some(t) if t.kind == TokenKind::Word => self
                .lower
                .get(t.start..t.start + t.text.len())
                .unwrap_or(""),
            _ => "",
        }
    }

    fn tok(&self, i: usize) -> Option<&Token<'a>> {
        self.toks.get(i)
    }

    fn is_punct(&self, i: usize, p: &str) -> bool {
        self.toks
            .get(i)
            .is_some_and(|t| t.kind == TokenKind::Punct && t.text == p)
    }

    fn number(&self, i: usize) -> Option<String> {
        let t = self.toks.get(i)?;
        match t.kind {
            TokenKind::Number => canonical_number(&t.text.replace(',', "")),
            TokenKind::Word => number_word(self.w(i)).map(|n| n.to_string()),
            _ => None,
        }
    }
}

const MAX_WORDS: u32 = 1 << 7;
const MAX_WORDS_LIST: &[&str] = &[
    "highest",
    "maximum",
    "max",
    "most",
    "largest",
    "biggest",
    "greatest",
    "tallest",
    "heaviest",
    "longest",
    "top",
    "richest",
    "strongest",
    "fastest",
    "oldest_age",
];
const MIN_WORDS: u32 = 1 << 8;
const MIN_WORDS_LIST: &[&str] = &[
    "lowest", "minimum", "min", "least", "smallest", "fewest", "shortest", "lightest", "weakest",
    "slowest", "cheapest",
];
const ORDER_SUPERLATIVES: u32 = 1 << 11;
const ORDER_SUPERLATIVES_LIST: &[&str] = &[
    "youngest", "oldest", "earliest", "latest", "newest", "best", "worst", "recent",
];
const ORDER_WORDS: u32 = 1 << 12;
const ORDER_WORDS_LIST: &[&str] = &[
    "ranked",
    "rank",
    "ranking",
    "sorted",
    "sort",
    "ordered",
    "descending",
    "ascending",
    "alphabetical",
    "alphabetically",
    "chronological",
    "chronologically",
    "desc",
    "asc",
];
const COMPUTED_WORDS: u32 = 1 << 2;
const COMPUTED_WORDS_LIST: &[&str] = &[
    "percentage",
    "percent",
    "ratio",
    "proportion",
    "difference",
    "divide",
    "divided",
    "rate",
];
const DISTINCT_WORDS: u32 = 1 << 3;
const DISTINCT_WORDS_LIST: &[&str] = &["distinct", "unique"];
const AVG_WORDS: u32 = 1 << 0;
const AVG_WORDS_LIST: &[&str] = &["average", "mean", "avg"];
const LIST_VERBS: u32 = 1 << 6;
const LIST_VERBS_LIST: &[&str] = &[
    "list",
    "name",
    "give",
    "show",
    "find",
    "provide",
    "state",
    "tell",
    "identify",
    "display",
    "return",
    "mention",
    "indicate",
    "describe",
    "enumerate",
];
/// Words that end a noun phrase (outputs, grouping dimensions, aggregation columns).
const PHRASE_STOP: u32 = 1 << 14;
const PHRASE_STOP_LIST: &[&str] = &[
    "otherwise",
    "namely",
    "of",
    "for",
    "from",
    "with",
    "in",
    "who",
    "that",
    "which",
    "whose",
    "where",
    "when",
    "by",
    "on",
    "at",
    "among",
    "if",
    "whether",
    "and",
    "or",
    "than",
    "is",
    "are",
    "was",
    "were",
    "has",
    "have",
    "had",
    "do",
    "does",
    "did",
    "to",
    "as",
    "per",
    "each",
    "every",
    "the",
    "a",
    "an",
    "there",
    "be",
    "been",
    "being",
    "can",
    "could",
    "will",
    "would",
    "should",
    "what",
    "how",
    "whom",
    "why",
    "it",
    "its",
    "their",
    "they",
    "them",
    "this",
    "these",
    "those",
    "all",
    "any",
    "not",
    "no",
    "into",
    "over",
    "under",
    "between",
    "after",
    "before",
    "during",
    "within",
    "refers",
    "refer",
    "means",
    "including",
    "along",
    "respectively",
    "please",
    "also",
    "only",
    "both",
    "whereas",
    "while",
    "but",
    "so",
    "such",
    "belong",
    "belongs",
    "got",
    "get",
];
/// Words skipped before an aggregation's column.
const COLUMN_SKIP: u32 = 1 << 1;
const COLUMN_SKIP_LIST: &[&str] = &[
    "of",
    "the",
    "a",
    "an",
    "number",
    "amount",
    "different",
    "distinct",
    "unique",
    "common",
    "frequent",
    "many",
    "much",
    "total",
    "count",
    "value",
    "values",
    "all",
    "overall",
];
/// Capitalised words that are never entities.
const ENTITY_STOP: u32 = 1 << 4;
const ENTITY_STOP_LIST: &[&str] = &[
    "what",
    "which",
    "who",
    "whom",
    "whose",
    "when",
    "where",
    "why",
    "how",
    "is",
    "are",
    "was",
    "were",
    "do",
    "does",
    "did",
    "has",
    "have",
    "had",
    "list",
    "name",
    "give",
    "show",
    "find",
    "provide",
    "state",
    "tell",
    "identify",
    "indicate",
    "mention",
    "describe",
    "count",
    "compute",
    "calculate",
    "determine",
    "return",
    "write",
    "display",
    "among",
    "for",
    "in",
    "of",
    "the",
    "a",
    "an",
    "and",
    "or",
    "if",
    "then",
    "also",
    "only",
    "all",
    "each",
    "every",
    "between",
    "from",
    "to",
    "with",
    "by",
    "on",
    "at",
    "as",
    "that",
    "this",
    "these",
    "those",
    "it",
    "its",
    "they",
    "their",
    "there",
    "here",
    "i",
    "id",
    "ids",
    "sql",
    "yes",
    "no",
    "true",
    "false",
    "null",
    "refers",
    "refer",
    "means",
    "please",
    "evidence",
    "hint",
    "hints",
    "note",
    "question",
    "answer",
    "select",
    "sum",
    "avg",
    "max",
    "min",
    "divide",
    "multiply",
    "subtract",
    "add",
    "cast",
    "real",
    "iif",
    "case",
    "when",
    "else",
    "end",
    "not",
    "distinct",
    "where",
    "group",
    "order",
    "limit",
    "like",
    "substr",
    "strftime",
    "year",
    "date",
    "asc",
    "desc",
    "percentage",
    "ratio",
    "total",
    "average",
    "number",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "enumerate",
    "based",
    "according",
    "consider",
    "considering",
    "excluding",
    "including",
    "top",
    "most",
    "least",
    "highest",
    "lowest",
    "other",
    "others",
    "mr",
    "mrs",
    "ms",
    "dr",
    "st",
    "after",
    "before",
    "during",
    "since",
    "until",
    "per",
    "via",
    "using",
    "any",
    "both",
    "either",
    "neither",
    "over",
    "under",
];
const PARTICIPLE_BY: u32 = 1 << 13;
const PARTICIPLE_BY_LIST: &[&str] = &[
    "made",
    "written",
    "drawn",
    "held",
    "led",
    "run",
    "paid",
    "spent",
    "bought",
    "sold",
    "known",
    "taken",
    "given",
    "done",
    "seen",
    "won",
    "lost",
    "built",
    "caused",
    "owned",
    "driven",
    "ridden",
    "created",
    "multiply",
    "divide",
    "times",
    "rank",
    "sort",
    "order",
    "group",
    "followed",
    "accompanied",
    "represented",
    "identified",
];
/// Nouns that make "<noun> number of X" an attribute, not a count ("phone number of").
const NUMBER_ATTRIBUTES: u32 = 1 << 10;
const NUMBER_ATTRIBUTES_LIST: &[&str] = &[
    "phone",
    "contact",
    "telephone",
    "mobile",
    "serial",
    "id",
    "identification",
    "card",
    "account",
    "reference",
    "version",
    "model",
    "zip",
    "house",
    "street",
    "room",
    "jersey",
    "part",
    "order",
    "case",
    "file",
    "line",
    "page",
    "flight",
    "tracking",
    "registration",
    "policy",
    "license",
    "licence",
    "passport",
    "fax",
    "cell",
    "social",
    "security",
    "member",
    "student",
    "employee",
    "customer",
    "unit",
    "seat",
    "ticket",
    "invoice",
    "postal",
];

const NUMBER_WORDS: &[(&str, u64)] = &[
    ("one", 1),
    ("two", 2),
    ("three", 3),
    ("four", 4),
    ("five", 5),
    ("six", 6),
    ("seven", 7),
    ("eight", 8),
    ("nine", 9),
    ("ten", 10),
    ("twenty", 20),
];

fn number_word(w: &str) -> Option<u64> {
    NUMBER_WORDS.iter().find(|(n, _)| *n == w).map(|(_, v)| *v)
}

/// Every lexicon in one FNV-hashed map: word → bit set of the lists it belongs to, so a token's
/// memberships cost one lookup (SipHash lookups per list dominated the first profile).
static LEXICON: LazyLock<HashMap<&'static str, u32, BuildHasherDefault<Fnv1a>>> =
    LazyLock::new(|| {
        let mut map: HashMap<&'static str, u32, BuildHasherDefault<Fnv1a>> = HashMap::default();
        for (list, bit) in [
            (AVG_WORDS_LIST, AVG_WORDS),
            (COLUMN_SKIP_LIST, COLUMN_SKIP),
            (COMPUTED_WORDS_LIST, COMPUTED_WORDS),
            (DISTINCT_WORDS_LIST, DISTINCT_WORDS),
            (ENTITY_STOP_LIST, ENTITY_STOP),
            (LESS_WORDS_LIST, LESS_WORDS),
            (LIST_VERBS_LIST, LIST_VERBS),
            (MAX_WORDS_LIST, MAX_WORDS),
            (MIN_WORDS_LIST, MIN_WORDS),
            (NOT_SUPERLATIVE_LIST, NOT_SUPERLATIVE),
            (NUMBER_ATTRIBUTES_LIST, NUMBER_ATTRIBUTES),
            (ORDER_SUPERLATIVES_LIST, ORDER_SUPERLATIVES),
            (ORDER_WORDS_LIST, ORDER_WORDS),
            (PARTICIPLE_BY_LIST, PARTICIPLE_BY),
            (PHRASE_STOP_LIST, PHRASE_STOP),
            (SUBJECT_STOP_LIST, SUBJECT_STOP),
        ] {
            for w in list {
                *map.entry(w).or_insert(0) |= bit;
            }
        }
        map
    });

/// The lexicon bits of a (lowercase) word.
fn lex(w: &str) -> u32 {
    if w.is_empty() || w.len() > 24 {
        return 0;
    }
    LEXICON.get(w).copied().unwrap_or(0)
}

fn is_in(list: u32, w: &str) -> bool {
    lex(w) & list != 0
}

/// FNV-1a, for short static keys (not exposed to untrusted key sets: the lexicons are fixed).
#[derive(Default)]
struct Fnv1a(u64);

impl Hasher for Fnv1a {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// Aggregations, ordering, top-k, grouping and outputs of one text. Marks top-k number tokens
/// in `used` so the filter pass skips them.
fn structure(doc: &Doc<'_>, spec: &mut QuestionSpec, used: &mut [bool]) {
    let n = doc.toks.len();
    let mut distinct = false;
    let mut the_number: Option<(usize, u64)> = None;
    let mut i = 0usize;
    while i < n {
        let w = doc.w(i);
        let f = lex(w);
        if w.is_empty() {
            // Numbers directly before a superlative: "3 tallest", "5 highest", "3 most populated".
            if let Some(k) = doc.number(i).and_then(|v| v.parse::<u64>().ok())
                && (is_in(MAX_WORDS, doc.w(i + 1))
                    || is_in(MIN_WORDS, doc.w(i + 1))
                    || is_in(ORDER_SUPERLATIVES, doc.w(i + 1)))
            {
                spec.top_k = Some(k);
                spec.explicit_order = true;
                mark(used, i);
            } else if i > 0
                && doc.w(i - 1) == "the"
                && let Some(k) = doc.number(i).and_then(|v| v.parse::<u64>().ok())
                && doc.tok(i + 1).is_some_and(|t| t.kind == TokenKind::Word)
            {
                // "the 3 countries with the fewest people": k rows, if a superlative follows.
                the_number = Some((i, k));
            }
            i += 1;
            continue;
        }
        match w {
            "how" if doc.w(i + 1) == "many" => {
                let next = doc.w(i + 2);
                if next == "times" || next == "percent" {
                    push_agg(spec, AggFunc::Other(COMPUTED.into()), None, false);
                } else if next == "total" {
                    // "how many total tours": a sum of a count column, or a count.
                    let col = column_after(doc, i + 3);
                    push_agg(spec, AggFunc::Other(TOTAL.into()), col, false);
                    i += 3;
                    continue;
                } else {
                    if next == "different" {
                        distinct = true;
                    }
                    let col = column_after(doc, i + 2);
                    push_agg(spec, AggFunc::Count, col, false);
                }
                i += 2;
                continue;
            }
            "number" if doc.w(i + 1) == "of" => {
                let prev = if i > 0 { doc.w(i - 1) } else { "" };
                if !is_in(AVG_WORDS, prev) && !is_in(NUMBER_ATTRIBUTES, prev) {
                    if doc.w(i + 2) == "different" {
                        distinct = true;
                    }
                    let col = column_after(doc, i + 2);
                    push_agg(spec, AggFunc::Count, col, false);
                }
            }
            "count" | "counts" => {
                let col = column_after(doc, i + 1);
                push_agg(spec, AggFunc::Count, col, false);
            }
            "total" | "sum" => {
                let next = doc.w(i + 1);
                let prev = if i > 0 { doc.w(i - 1) } else { "" };
                let counting = next == "number" || next == "count" || is_in(AVG_WORDS, next);
                let in_total = prev == "in";
                if !(counting || in_total && has_func(spec, &AggFunc::Count)) {
                    // "total atoms" counts, "total spend" sums: a plural noun after "total"
                    // accepts either (`Other("total")`).
                    let plural = w == "total" && {
                        let mut j = i + 1;
                        while is_in(COLUMN_SKIP, doc.w(j)) {
                            j += 1;
                        }
                        (j..j + 2).any(|k| {
                            let noun = doc.w(k);
                            noun.len() > 3 && !is_in(PHRASE_STOP, noun) && singular(noun) != noun
                        })
                    };
                    let col = column_after(doc, i + 1);
                    let func = if plural {
                        AggFunc::Other(TOTAL.into())
                    } else {
                        AggFunc::Sum
                    };
                    push_agg(spec, func, col, false);
                }
            }
            _ if f & (MAX_WORDS | MIN_WORDS | ORDER_SUPERLATIVES | NOT_SUPERLATIVE) == 0
                && generic_superlative(doc, i) =>
            {
                spec.explicit_order = true;
                spec.top_k.get_or_insert(1);
            }
            _ if f & AVG_WORDS != 0 => {
                let col = column_after(doc, i + 1);
                push_agg(spec, AggFunc::Avg, col, false);
            }
            _ if f & DISTINCT_WORDS != 0 => distinct = true,
            _ if f & COMPUTED_WORDS != 0 => {
                push_agg(spec, AggFunc::Other(COMPUTED.into()), None, false);
            }
            _ if f & LIST_VERBS != 0 => {
                // "List (down) (at least) five …": a requested number of rows.
                let mut j = i + 1;
                while matches!(doc.w(j), "me" | "out" | "down" | "any" | "only" | "just") {
                    j += 1;
                }
                if doc.w(j) == "at" && matches!(doc.w(j + 1), "least" | "most") {
                    j += 2;
                }
                if let Some(k) = doc.number(j).and_then(|v| v.parse::<u64>().ok()) {
                    spec.top_k = Some(k);
                    mark(used, j);
                }
            }
            "top" | "first" | "last" => {
                if let Some(k) = doc.number(i + 1).and_then(|v| v.parse::<u64>().ok()) {
                    spec.top_k = Some(k);
                    spec.explicit_order = true;
                    mark(used, i + 1);
                    i += 2;
                    continue;
                }
                // "the first student to register", "the last transcript" (not "first name").
                let ordinal = w != "top"
                    && i > 0
                    && doc.w(i - 1) == "the"
                    && !doc.w(i + 1).is_empty()
                    && !matches!(doc.w(i + 1), "name" | "names" | "and" | "or" | "of");
                if ordinal {
                    spec.explicit_order = true;
                    spec.top_k.get_or_insert(1);
                }
                if w == "top" {
                    spec.explicit_order = true;
                    spec.top_k.get_or_insert(1);
                    push_agg(spec, AggFunc::Max, column_after(doc, i + 1), false);
                }
            }
            _ if f & (MAX_WORDS | MIN_WORDS) != 0 => {
                let prev = if i > 0 { doc.w(i - 1) } else { "" };
                // "at most 3" / "at least 3" are comparisons, handled by the filter pass.
                let comparative = (w == "most" || w == "least") && prev == "at";
                if !comparative {
                    let func = if f & MAX_WORDS != 0 {
                        AggFunc::Max
                    } else {
                        AggFunc::Min
                    };
                    push_agg(spec, func, column_after(doc, i + 1), false);
                    spec.explicit_order = true;
                    spec.top_k.get_or_insert(1);
                }
            }
            _ if f & ORDER_SUPERLATIVES != 0 => {
                spec.explicit_order = true;
                spec.top_k.get_or_insert(1);
            }
            _ if f & ORDER_WORDS != 0 => spec.explicit_order = true,
            "order" if matches!(doc.w(i + 1), "by" | "of") || doc.w(i.wrapping_sub(1)) == "in" => {
                spec.explicit_order = true;
            }
            "per" => push_group(doc, spec, used, i + 1),
            "each" | "every" if i > 0 && matches!(doc.w(i - 1), "for" | "in" | "of" | "per") => {
                push_group(doc, spec, used, i + 1);
            }
            "by" => {
                let prev = if i > 0 { doc.w(i - 1) } else { "" };
                let explicit_group = matches!(prev, "grouped" | "group" | "split" | "breakdown")
                    || (prev == "down" && i > 1 && doc.w(i - 2) == "broken");
                let ordering = matches!(prev, "ranked" | "sorted" | "ordered" | "order" | "sort");
                let participle =
                    prev.ends_with("ed") || prev.ends_with("en") || is_in(PARTICIPLE_BY, prev);
                let next_is_proper = doc
                    .tok(i + 1)
                    .is_some_and(|t| t.kind != TokenKind::Word || t.is_capitalized());
                if explicit_group || (!ordering && !participle && !next_is_proper) {
                    push_group(doc, spec, used, i + 1);
                }
                if ordering {
                    spec.explicit_order = true;
                }
            }
            _ => {}
        }
        i += 1;
    }
    if let Some((at, k)) = the_number
        && spec.top_k == Some(1)
        && spec.explicit_order
    {
        spec.top_k = Some(k);
        mark(used, at);
    }
    if distinct {
        for agg in &mut spec.aggregations {
            if agg.func == AggFunc::Count {
                agg.distinct = true;
            }
        }
    }
}

/// `the <word>est` (dumbest, richest, …) that is not in the explicit lists: an ordering with an
/// unknown direction.
fn generic_superlative(doc: &Doc<'_>, i: usize) -> bool {
    let w = doc.w(i);
    w.len() >= 6
        && w.ends_with("est")
        && i > 0
        && doc.w(i - 1) == "the"
        && !is_in(NOT_SUPERLATIVE, w)
        && !is_in(MAX_WORDS, w)
        && !is_in(MIN_WORDS, w)
        && !is_in(ORDER_SUPERLATIVES, w)
}

const NOT_SUPERLATIVE: u32 = 1 << 9;
const NOT_SUPERLATIVE_LIST: &[&str] = &[
    "interest", "forest", "contest", "request", "protest", "harvest", "conquest", "manifest",
    "priest", "honest", "modest", "digest", "suggest", "invest", "latest", "earnest", "arrest",
    "behest", "bequest", "tempest", "inquest",
];

fn mark(used: &mut [bool], i: usize) {
    if let Some(u) = used.get_mut(i) {
        *u = true;
    }
}

fn has_func(spec: &QuestionSpec, func: &AggFunc) -> bool {
    spec.aggregations.iter().any(|a| &a.func == func)
}

fn push_agg(spec: &mut QuestionSpec, func: AggFunc, column: Option<String>, distinct: bool) {
    if spec
        .aggregations
        .iter()
        .any(|a| a.func == func && (a.column == column || column.is_none()))
    {
        return;
    }
    spec.aggregations.push(QuestionAggregation {
        func,
        column,
        distinct,
    });
}

/// The noun phrase (≤ 2 content words) after token `i`, skipping articles and quantity words.
fn column_after(doc: &Doc<'_>, mut i: usize) -> Option<String> {
    while is_in(COLUMN_SKIP, doc.w(i)) {
        i += 1;
    }
    phrase_at(doc, i, 2)
}

/// Up to `max` consecutive content words starting at `i`, lowercased, last word singular.
fn phrase_at(doc: &Doc<'_>, i: usize, max: usize) -> Option<String> {
    let mut words: Vec<&str> = Vec::with_capacity(max);
    let mut j = i;
    while words.len() < max {
        let w = doc.w(j);
        if w.is_empty()
            || is_in(PHRASE_STOP, w)
            || is_in(MAX_WORDS, w)
            || is_in(MIN_WORDS, w)
            || doc.is_punct(j + 1, "(")
        {
            break;
        }
        words.push(w);
        j += 1;
    }
    let (last, rest) = words.split_last()?;
    let mut out = String::new();
    for w in rest {
        out.push_str(w);
        out.push(' ');
    }
    out.push_str(&singular(last.trim_end_matches("'s")));
    Some(out)
}

/// Record the grouping dimension starting at `i`; its tokens are dimension names, not values.
fn push_group(doc: &Doc<'_>, spec: &mut QuestionSpec, used: &mut [bool], mut i: usize) {
    if matches!(doc.w(i), "the" | "a" | "an") {
        i += 1;
    }
    if let Some(dim) = phrase_at(doc, i, 2) {
        for k in i..i + dim.split(' ').count() {
            mark(used, k);
        }
        if !spec.group_by.contains(&dim) {
            spec.group_by.push(dim);
        }
    }
}

/// Requested outputs: the noun phrase after `what is/are the`, `which`, or a list verb.
fn outputs(doc: &Doc<'_>) -> Vec<String> {
    let n = doc.toks.len();
    let mut out = Vec::new();
    for i in 0..n {
        let w = doc.w(i);
        let start = match w {
            "what" | "which" => {
                let mut j = i + 1;
                if matches!(doc.w(j), "is" | "are" | "was" | "were") {
                    j += 1;
                }
                j
            }
            _ if is_in(LIST_VERBS, w) && doc.tok(i).is_some_and(|t| t.sentence_start || i <= 1) => {
                let mut j = i + 1;
                if matches!(doc.w(j), "me" | "out" | "down") {
                    j += 1;
                }
                if doc.w(j) == "all" {
                    j += 1;
                }
                j
            }
            _ => continue,
        };
        let mut j = start;
        loop {
            while matches!(
                doc.w(j),
                "the" | "a" | "an" | "all" | "its" | "their" | "his" | "her"
            ) {
                j += 1;
            }
            // Possessives name the owner, not the output: "Abomination's superpower",
            // "the atoms' elements".
            loop {
                let owner = doc.w(j);
                if owner.ends_with("'s") || owner.ends_with("’s") {
                    j += 1;
                } else if !owner.is_empty() && doc.is_punct(j + 1, "'") && !doc.w(j + 2).is_empty()
                {
                    j += 2;
                } else {
                    break;
                }
            }
            let first = doc.w(j);
            let aggregate_like = first.is_empty()
                || is_in(COLUMN_SKIP, first) && first != "value"
                || is_in(AVG_WORDS, first)
                || is_in(COMPUTED_WORDS, first)
                || is_in(MAX_WORDS, first)
                || is_in(MIN_WORDS, first)
                || first == "sum"
                || first == "many";
            let mut len = 0usize;
            while len < 3 {
                let wj = doc.w(j + len);
                if wj.is_empty() || is_in(PHRASE_STOP, wj) || doc.is_punct(j + len + 1, "(") {
                    break;
                }
                len += 1;
            }
            if !aggregate_like
                && len > 0
                && let Some(p) = phrase_at(doc, j, len)
                && !out.contains(&p)
            {
                out.push(p);
            }
            j += len.max(1);
            // "X and Y", "X, Y": continue the list.
            if doc.w(j) == "and" || doc.is_punct(j, ",") {
                j += 1;
                if out.len() < 4 {
                    continue;
                }
            }
            break;
        }
        if !out.is_empty() {
            break;
        }
    }
    out
}

/// Comparison words before a number, as (words, op); longest match first.
fn comparative_before(doc: &Doc<'_>, mut i: usize) -> Option<FilterOp> {
    // "after the year 2008", "before year 2000".
    for _ in 0..2 {
        if i > 0 && matches!(doc.w(i - 1), "the" | "year" | "years" | "of") {
            i -= 1;
        }
    }
    if i == 0 {
        return None;
    }
    let p1 = doc.tok(i - 1)?;
    if p1.kind == TokenKind::Punct {
        return match p1.text {
            ">" => Some(FilterOp::Gt),
            ">=" => Some(FilterOp::GtEq),
            "<" => Some(FilterOp::Lt),
            "<=" => Some(FilterOp::LtEq),
            "=" | "==" => Some(FilterOp::Eq),
            "!=" | "<>" => Some(FilterOp::NotEq),
            _ => None,
        };
    }
    let w1 = doc.w(i - 1);
    let w2 = if i >= 2 { doc.w(i - 2) } else { "" };
    let w3 = if i >= 3 { doc.w(i - 3) } else { "" };
    match (w3, w2, w1) {
        (_, "at", "least") | (_, "no", "less") => Some(FilterOp::GtEq),
        (_, "at", "most") | (_, "up", "to") => Some(FilterOp::LtEq),
        // "not higher than 4", "no fewer than 3".
        ("not" | "no", less, "than") if is_in(LESS_WORDS, less) => Some(FilterOp::GtEq),
        ("not" | "no", more, "than") if !more.is_empty() => Some(FilterOp::LtEq),
        // "do not have more than 3": the negation one word further back.
        (_, less, "than") if is_in(LESS_WORDS, less) && negation_at(doc, i, 4) => {
            Some(FilterOp::GtEq)
        }
        (_, more, "than") if !more.is_empty() && negation_at(doc, i, 4) => Some(FilterOp::LtEq),
        (_, less, "than") if is_in(LESS_WORDS, less) => Some(FilterOp::Lt),
        (_, more, "than") if !more.is_empty() => Some(FilterOp::Gt),
        (_, _, "over" | "above" | "exceeding" | "exceeds" | "exceed" | "after") => {
            Some(FilterOp::Gt)
        }
        (_, _, "under" | "below" | "before") => Some(FilterOp::Lt),
        (_, _, "since") => Some(FilterOp::GtEq),
        (_, _, "until" | "till" | "through") => Some(FilterOp::LtEq),
        _ => None,
    }
}

fn negation_at(doc: &Doc<'_>, i: usize, back: usize) -> bool {
    i >= back && matches!(doc.w(i - back), "not" | "never" | "no")
}

const LESS_WORDS: u32 = 1 << 5;
const LESS_WORDS_LIST: &[&str] = &[
    "less", "fewer", "lower", "smaller", "shorter", "younger", "lighter", "cheaper", "earlier",
    "lesser", "worse", "below",
];

fn comparative_after(doc: &Doc<'_>, i: usize) -> Option<FilterOp> {
    match (doc.w(i + 1), doc.w(i + 2)) {
        ("or", "more" | "above" | "greater" | "higher" | "over") => Some(FilterOp::GtEq),
        ("or", "less" | "fewer" | "below" | "lower" | "under") => Some(FilterOp::LtEq),
        _ => None,
    }
}

fn like_op(raw: &str) -> (FilterOp, &str) {
    let starts = raw.starts_with('%');
    let ends = raw.ends_with('%') && raw.len() > 1;
    let inner = raw.trim_matches('%');
    if inner.contains('%') {
        return (FilterOp::Like, raw);
    }
    match (starts, ends) {
        (true, true) => (FilterOp::Contains, inner),
        (false, true) => (FilterOp::StartsWith, inner),
        (true, false) => (FilterOp::EndsWith, inner),
        (false, false) => (FilterOp::Eq, inner),
    }
}

fn op_token(doc: &Doc<'_>, i: usize) -> Option<(FilterOp, usize)> {
    let t = doc.tok(i)?;
    match t.kind {
        TokenKind::Punct => {
            let op = match t.text {
                "=" | "==" => FilterOp::Eq,
                "!=" | "<>" => FilterOp::NotEq,
                ">" => FilterOp::Gt,
                ">=" => FilterOp::GtEq,
                "<" => FilterOp::Lt,
                "<=" => FilterOp::LtEq,
                // `! =` written with a space.
                "!" if doc.is_punct(i + 1, "=") => return Some((FilterOp::NotEq, 2)),
                _ => return None,
            };
            Some((op, 1))
        }
        TokenKind::Word => match doc.w(i) {
            "like" | "ilike" => Some((FilterOp::Like, 1)),
            "not" if matches!(doc.w(i + 1), "like" | "ilike") => Some((FilterOp::NotLike, 2)),
            _ => None,
        },
        _ => None,
    }
}

/// Whether token `i` is an identifier that can be the left-hand side of an explicit comparison.
fn lhs_ident<'a>(doc: &Doc<'a>, i: usize) -> Option<&'a str> {
    let t = doc.tok(i)?;
    if t.kind != TokenKind::Word || t.depth > 0 {
        return None;
    }
    let w = doc.w(i);
    if matches!(
        w,
        "and" | "or" | "not" | "is" | "where" | "than" | "if" | "when" | "then" | "else"
    ) {
        return None;
    }
    Some(t.text)
}

/// Filters a text states: explicit comparisons, between, comparatives, numbers, years, dates,
/// quoted values and capitalised entities (module doc).
fn text_filters(doc: &Doc<'_>, used: &mut [bool]) -> Vec<QuestionFilter> {
    let n = doc.toks.len();
    let mut filters: Vec<QuestionFilter> = Vec::new();
    // Pass 1: explicit `lhs op value` and `lhs is [not] null`.
    for i in 1..n {
        let Some(t) = doc.tok(i) else { break };
        if t.depth > 0 || used[i] {
            continue;
        }
        if doc.w(i) == "is" {
            let (neg, at) = if doc.w(i + 1) == "not" {
                (true, i + 2)
            } else {
                (false, i + 1)
            };
            if doc.w(at) == "null"
                && let Some(lhs) = lhs_ident(doc, i - 1)
            {
                filters.push(QuestionFilter {
                    lhs: Some(lhs.to_string()),
                    op: if neg {
                        FilterOp::IsNotNull
                    } else {
                        FilterOp::IsNull
                    },
                    value: String::new(),
                });
                for k in i - 1..=at {
                    mark(used, k);
                }
            }
            continue;
        }
        let Some((op, op_len)) = op_token(doc, i) else {
            continue;
        };
        let Some(lhs) = lhs_ident(doc, i - 1) else {
            continue;
        };
        let v = i + op_len;
        let Some(vt) = doc.tok(v) else { continue };
        let (value, mut op) = match vt.kind {
            TokenKind::Quoted => (vt.text.to_string(), op),
            TokenKind::Number => match canonical_number(&vt.text.replace(',', "")) {
                Some(num) => (date_or_number(doc, v, num, used), op),
                None => continue,
            },
            TokenKind::Punct
                if vt.text == "-"
                    && doc.tok(v + 1).is_some_and(|t| t.kind == TokenKind::Number) =>
            {
                let Some(num) = doc.tok(v + 1).and_then(|t| canonical_number(t.text)) else {
                    continue;
                };
                mark(used, v + 1);
                (format!("-{num}"), op)
            }
            TokenKind::Word => {
                // `a = b.c`, `a = f(…)`, `a = other_column` are joins/expressions, not value
                // filters.
                if doc.is_punct(v + 1, ".") || doc.is_punct(v + 1, "(") || vt.text.contains('_') {
                    continue;
                }
                let w = doc.w(v);
                if w == "null" {
                    let op = if op == FilterOp::NotEq {
                        FilterOp::IsNotNull
                    } else {
                        FilterOp::IsNull
                    };
                    (String::new(), op)
                } else {
                    (vt.text.to_string(), op)
                }
            }
            _ => continue,
        };
        let mut value_text = value.as_str();
        if matches!(op, FilterOp::Like | FilterOp::NotLike) {
            let (like, inner) = like_op(value_text);
            if op == FilterOp::Like {
                op = like;
            }
            value_text = inner;
        }
        let value = if vt.kind == TokenKind::Quoted {
            crate::sqlspec::normalize_text_value(value_text)
        } else {
            normalize_value(value_text)
        };
        filters.push(QuestionFilter {
            lhs: Some(lhs.to_string()),
            op,
            value,
        });
        for k in i - 1..=v {
            mark(used, k);
        }
    }
    // Pass 2: `[lhs] between a and b`, `from a to b` (numbers, dates, quoted values, codes).
    for i in 0..n {
        let opener = doc.w(i);
        if used[i]
            || !matches!(opener, "between" | "from")
            || doc.tok(i).is_some_and(|t| t.depth > 0)
        {
            continue;
        }
        let joiner = if opener == "between" { "and" } else { "to" };
        let (Some(a), true, Some(b)) = (
            range_value(doc, i + 1, used),
            doc.w(i + 2) == joiner,
            range_value(doc, i + 3, used),
        ) else {
            continue;
        };
        let lhs = if i > 0 && !used[i - 1] {
            lhs_ident(doc, i - 1)
                .filter(|w| w.contains('_') || doc.is_punct(i - 2, "."))
                .map(str::to_string)
        } else {
            None
        };
        if lhs.is_some() {
            mark(used, i - 1);
        }
        for (op, value) in [(FilterOp::GtEq, a), (FilterOp::LtEq, b)] {
            filters.push(QuestionFilter {
                lhs: lhs.clone(),
                op,
                value,
            });
        }
        for k in i..=i + 3 {
            mark(used, k);
        }
    }
    // Pass 3: numbers, quoted values, entities.
    // A capitalised label right before a quoted value names its dimension: City 'Aberdeen'.
    let mut label_for_quote: Option<(usize, String)> = None;
    let mut i = 0usize;
    while i < n {
        let Some(t) = doc.tok(i) else { break };
        if used[i] || t.depth > 0 {
            i += 1;
            continue;
        }
        match t.kind {
            TokenKind::Number => {
                let arithmetic = (i > 0 && (doc.is_punct(i - 1, "*") || doc.is_punct(i - 1, "/")))
                    || doc.is_punct(i + 1, "*")
                    || doc.is_punct(i + 1, "/");
                if !arithmetic && let Some(num) = canonical_number(&t.text.replace(',', "")) {
                    let op = comparative_before(doc, i).or_else(|| comparative_after(doc, i));
                    let value = date_or_number(doc, i, num, used);
                    // A bare number is a requirement only when compared ("over 15"), or when it
                    // is a year or a date; other numbers ("atom 2", "3 powers") are left to the
                    // SQL-literal rule, which finds them when the SQL uses them.
                    let year_or_date = value.contains('-') && value.len() > 4 || is_year(&value);
                    if op.is_some() || year_or_date {
                        filters.push(QuestionFilter {
                            lhs: None,
                            op: op.unwrap_or(FilterOp::Eq),
                            value,
                        });
                    }
                }
                mark(used, i);
                i += 1;
            }
            TokenKind::Quoted => {
                let (mut op, inner) = like_op(t.text);
                // Quoted text stays text ('09' is not 9), as sqlspec keeps string literals.
                let value = crate::sqlspec::normalize_text_value(inner);
                if negated_before(doc, i) {
                    op = if op == FilterOp::Eq {
                        FilterOp::NotEq
                    } else {
                        FilterOp::NotLike
                    };
                }
                let lhs = match label_for_quote.take() {
                    Some((at, label)) if at == i => Some(label),
                    _ => None,
                };
                if !value.is_empty() {
                    filters.push(QuestionFilter { lhs, op, value });
                }
                mark(used, i);
                i += 1;
            }
            TokenKind::Word => {
                let end = entity_end(doc, i, used);
                if end > i && doc.tok(end).is_some_and(|q| q.kind == TokenKind::Quoted) {
                    let mut label = String::new();
                    for k in i..end {
                        if let Some(tk) = doc.tok(k) {
                            if !label.is_empty() {
                                label.push(' ');
                            }
                            label.push_str(&tk.text.to_lowercase());
                        }
                        mark(used, k);
                    }
                    label_for_quote = Some((end, label));
                    i = end;
                    continue;
                }
                if end > i {
                    let mut value = String::new();
                    for k in i..end {
                        let Some(tk) = doc.tok(k) else { break };
                        if !value.is_empty() {
                            value.push(' ');
                        }
                        // A possessive ends the name ("Abomination's powers"); inside a name
                        // it belongs to it ("Women's Soccer").
                        if k + 1 == end {
                            value.push_str(tk.text.trim_end_matches("'s").trim_end_matches("’s"));
                        } else {
                            value.push_str(tk.text);
                        }
                        mark(used, k);
                    }
                    let value = normalize_value(&value);
                    if value.chars().count() >= 2 {
                        let op = if negated_before(doc, i) {
                            FilterOp::NotEq
                        } else {
                            FilterOp::Eq
                        };
                        filters.push(QuestionFilter {
                            lhs: None,
                            op,
                            value,
                        });
                    }
                    i = end;
                } else {
                    i += 1;
                }
            }
            TokenKind::Punct => i += 1,
        }
    }
    filters
}

fn is_year(v: &str) -> bool {
    v.len() == 4 && v.parse::<u32>().is_ok_and(|y| (1800..=2100).contains(&y))
}

/// Whether the value at token `i` is negated: "not 'Boril'", "is not X", "other than X",
/// "except X", "excluding X", "without X", "isn't X" (quote punctuation is skipped).
fn negated_before(doc: &Doc<'_>, i: usize) -> bool {
    // Up to four words back, within the clause: "do not have the nationality 'USA'",
    // "who are not from Russia", "other than 'Member'".
    let mut j = i;
    let mut words = 0;
    while j > 0 && words < 4 {
        j -= 1;
        let Some(t) = doc.tok(j) else { return false };
        match t.kind {
            TokenKind::Punct if matches!(t.text, "`" | "'" | "\"" | "“" | "‘") => continue,
            TokenKind::Word => {}
            _ => return false,
        }
        let w = doc.w(j);
        if matches!(w, "not" | "except" | "excluding" | "without" | "never") || w.ends_with("n't") {
            return true;
        }
        if w == "than" && j > 0 && doc.w(j - 1) == "other" {
            return true;
        }
        if matches!(
            w,
            "and" | "or" | "but" | "that" | "which" | "who" | "whose" | "where" | "with"
        ) {
            return false;
        }
        words += 1;
    }
    false
}

/// A bound of `between a and b`: a number/date or a quoted value.
fn range_value(doc: &Doc<'_>, i: usize, used: &mut [bool]) -> Option<String> {
    let t = doc.tok(i)?;
    match t.kind {
        TokenKind::Quoted => Some(crate::sqlspec::normalize_text_value(t.text)),
        // Codes such as TR000.
        TokenKind::Word if t.text.chars().any(|c| c.is_ascii_digit()) => {
            Some(normalize_value(t.text))
        }
        _ => {
            let n = doc.number(i)?;
            Some(date_or_number(doc, i, n, used))
        }
    }
}

/// A date glued to a year token (`2012-01-05`, `2012/1/5`) becomes one value; otherwise the
/// number itself.
fn date_or_number(doc: &Doc<'_>, i: usize, num: String, used: &mut [bool]) -> String {
    let Some(t) = doc.tok(i) else { return num };
    if t.text.len() != 4 {
        return num;
    }
    let end = t.start + t.text.len();
    let rest = doc.text.get(end..).unwrap_or("");
    let bytes = rest.as_bytes();
    let sep = match bytes.first() {
        Some(b'-') => b'-',
        Some(b'/') => b'/',
        _ => return num,
    };
    let mut len = 0usize;
    let mut parts = 0;
    let mut k = 0usize;
    while k < bytes.len() && parts < 2 {
        if bytes[k] != sep {
            break;
        }
        let digits = bytes[k + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 || digits > 2 {
            break;
        }
        k += 1 + digits;
        parts += 1;
        len = k;
    }
    if parts == 0 {
        return num;
    }
    let date = format!("{}{}", t.text, &rest[..len]).replace('/', "-");
    // Mark the tokens the date spans.
    let date_end = end + len;
    let mut j = i + 1;
    while let Some(tj) = doc.tok(j) {
        if tj.start >= date_end {
            break;
        }
        mark(used, j);
        j += 1;
    }
    date
}

/// End (exclusive) of a capitalised entity starting at `i`, or `i` when none starts there.
fn entity_end(doc: &Doc<'_>, i: usize, used: &[bool]) -> usize {
    if !entity_word(doc, i, used) {
        return i;
    }
    let mut end = i + 1;
    loop {
        if entity_word(doc, end, used) {
            end += 1;
        } else if (matches!(doc.w(end), "of" | "de") || doc.is_punct(end, "&"))
            && entity_word(doc, end + 1, used)
        {
            end += 2;
        } else {
            break;
        }
    }
    let first_is_sentence_start = doc.tok(i).is_some_and(|t| t.sentence_start);
    if first_is_sentence_start && end == i + 1 {
        // A lone capitalised sentence-initial word is just capitalisation.
        return i;
    }
    end
}

fn entity_word(doc: &Doc<'_>, i: usize, used: &[bool]) -> bool {
    let Some(t) = doc.tok(i) else { return false };
    if t.kind != TokenKind::Word || t.depth > 0 || used.get(i).copied().unwrap_or(true) {
        return false;
    }
    if !t.is_capitalized() || is_in(ENTITY_STOP, doc.w(i)) || doc.is_punct(i + 1, "(") {
        return false;
    }
    // `T1.weight_kg`: a table qualifier.
    let after = doc.text.get(t.start + t.text.len()..).unwrap_or("");
    if after.starts_with('.') && after[1..].starts_with(|c: char| c.is_alphanumeric() || c == '_') {
        return false;
    }
    // Identifiers (TotalSpendUSD, eye_colour_id, h2o) are not entities; ALLCAPS words are
    // acronyms (USA, DC) and kept.
    let text = t.text.trim_end_matches("'s");
    let all_caps = text.chars().all(|c| !c.is_lowercase());
    let inner_caps = text.chars().skip(1).any(char::is_uppercase);
    if text.contains('_') || (inner_caps && !all_caps) {
        return false;
    }
    true
}

/// Add required filters for SQL literals that the question text states (module doc).
fn sql_literal_filters(
    question: &str,
    enriched: Option<&str>,
    qu: &Doc<'_>,
    qe: Option<&Doc<'_>>,
    sql: &SqlSpec,
    filters: &mut Vec<QuestionFilter>,
) {
    let mut qu_lower: Option<String> = None;
    let mut qe_lower: Option<String> = None;
    // Bounded: a pathological SQL with thousands of predicates is not searched exhaustively.
    for f in sql.filters.iter().take(256) {
        let values: &[FilterValue] = match &f.rhs {
            FilterValue::List(items) => items,
            other => std::slice::from_ref(other),
        };
        for v in values {
            let (text, is_number) = match v {
                FilterValue::Text(s) => (s.as_str(), false),
                FilterValue::Number(s) => (s.as_str(), true),
                _ => continue,
            };
            if text.is_empty() {
                continue;
            }
            let found = if is_number {
                number_in(qu, text) || qe.is_some_and(|d| number_in(d, text))
            } else {
                let qu_l = qu_lower.get_or_insert_with(|| lower_collapsed(question));
                let in_qu = phrase_in(qu, qu_l, text);
                in_qu
                    || match (qe, enriched) {
                        (Some(d), Some(e)) => {
                            let qe_l = qe_lower.get_or_insert_with(|| lower_collapsed(e));
                            phrase_in(d, qe_l, text)
                        }
                        _ => false,
                    }
            };
            if !found {
                continue;
            }
            let op = match f.op {
                FilterOp::Contains
                | FilterOp::StartsWith
                | FilterOp::EndsWith
                | FilterOp::Like
                | FilterOp::In => FilterOp::Eq,
                FilterOp::NotLike | FilterOp::NotIn => FilterOp::NotEq,
                other => other,
            };
            let lhs_key = name_key(&f.lhs);
            if let Some(existing) = filters.iter_mut().find(|q| q.value == text) {
                match &existing.lhs {
                    None => existing.lhs = Some(f.lhs.clone()),
                    Some(l) if name_key(l) == lhs_key => {}
                    Some(_) => continue,
                }
                continue;
            }
            filters.push(QuestionFilter {
                lhs: Some(f.lhs.clone()),
                op,
                value: text.to_string(),
            });
        }
    }
}

fn number_in(doc: &Doc<'_>, value: &str) -> bool {
    doc.toks.iter().enumerate().any(|(i, t)| {
        t.kind == TokenKind::Number
            && canonical_number(&t.text.replace(',', "")).as_deref() == Some(value)
            // Top-k numbers ("top 5") are not filter values.
            && !(i > 0 && matches!(doc.w(i - 1), "top" | "first" | "last"))
    })
}

/// Whether a (normalized) text literal is stated in the text: as a phrase for literals of two
/// or more characters, or as a quoted token for shorter ones (`'-'`, `'o'`).
fn phrase_in(doc: &Doc<'_>, lower: &str, value: &str) -> bool {
    if value.chars().count() >= 2 && value.chars().any(char::is_alphanumeric) {
        return contains_phrase(lower, value);
    }
    doc.toks.iter().any(|t| {
        t.kind == TokenKind::Quoted && crate::sqlspec::normalize_text_value(t.text) == value
    })
}

/// Replace NL terms by physical columns through the profile's column mappings.
fn apply_mappings(profile: &RuleProfile, spec: &mut QuestionSpec) {
    if profile.column_mappings.is_empty() {
        return;
    }
    let map = |term: &str| -> Option<String> {
        let key = name_key(term);
        profile
            .column_mappings
            .iter()
            .find(|(k, _)| name_key(k) == key)
            .map(|(_, v)| v.to_ascii_lowercase())
    };
    for f in &mut spec.filters {
        if let Some(lhs) = &f.lhs
            && let Some(m) = map(lhs)
        {
            f.lhs = Some(m);
        }
    }
    for g in &mut spec.group_by {
        if let Some(m) = map(g) {
            *g = m;
        }
    }
    for o in &mut spec.outputs {
        if let Some(m) = map(o) {
            *o = m;
        }
    }
    for a in &mut spec.aggregations {
        if let Some(c) = &a.column
            && let Some(m) = map(c)
        {
            a.column = Some(m);
        }
    }
}

/// At most this many required filters are kept per question (dedup is quadratic).
const MAX_FILTERS: usize = 64;

/// Remove duplicates and value-only filters subsumed by a filter with a dimension (same value,
/// or the value is part of the other's value: entity `marvel` vs `publisher = 'marvel comics'`).
fn dedup_filters(filters: &mut Vec<QuestionFilter>) {
    filters.truncate(MAX_FILTERS * 2);
    let mut keep = vec![true; filters.len()];
    for i in 0..filters.len() {
        for j in 0..filters.len() {
            if i == j || !keep[j] {
                continue;
            }
            let (a, b) = (&filters[i], &filters[j]);
            if a.value.is_empty() {
                continue;
            }
            let same_value = a.value == b.value;
            let duplicate = same_value && a.lhs == b.lhs && a.op == b.op && j < i;
            let subsumed = a.lhs.is_none()
                && b.lhs.is_some()
                && (same_value
                    || (a.value.len() >= 2 && contains_phrase(&b.value, &a.value))
                    || (b.value.len() >= 3 && contains_phrase(&a.value, &b.value)));
            if duplicate || subsumed {
                keep[i] = false;
                break;
            }
        }
    }
    let mut k = 0;
    filters.retain(|_| {
        let r = keep.get(k).copied().unwrap_or(false);
        k += 1;
        r
    });
    filters.truncate(MAX_FILTERS);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(q: &str) -> QuestionSpec {
        extract(q, None, None, &RuleProfile::default())
    }

    fn values(s: &QuestionSpec) -> Vec<(Option<&str>, FilterOp, &str)> {
        s.filters
            .iter()
            .map(|f| (f.lhs.as_deref(), f.op, f.value.as_str()))
            .collect()
    }

    #[test]
    fn total_spend_in_china_per_year() {
        let s = spec("Total spend in China per year");
        assert_eq!(s.aggregations.len(), 1);
        assert_eq!(s.aggregations[0].func, AggFunc::Sum);
        assert_eq!(s.aggregations[0].column.as_deref(), Some("spend"));
        assert_eq!(s.group_by, vec!["year"]);
        assert_eq!(values(&s), vec![(None, FilterOp::Eq, "china")]);
        assert!(!s.explicit_order);
        assert_eq!(s.top_k, None);
    }

    #[test]
    fn aggregation_words() {
        let s = spec("How many distinct heroes have an average height above 180.0?");
        let funcs: Vec<_> = s
            .aggregations
            .iter()
            .map(|a| (&a.func, a.distinct))
            .collect();
        assert_eq!(funcs, vec![(&AggFunc::Count, true), (&AggFunc::Avg, false)]);
        assert_eq!(values(&s), vec![(None, FilterOp::Gt, "180")]);
        let s = spec("What is the total number of powers?");
        assert_eq!(s.aggregations[0].func, AggFunc::Count);
        assert_eq!(s.aggregations.len(), 1);
        let s = spec("What is the percentage of female heroes?");
        assert_eq!(s.aggregations[0].func, AggFunc::Other(COMPUTED.into()));
        let s = spec("Which publisher has the lowest number of heroes?");
        assert_eq!(s.aggregations[0].func, AggFunc::Min);
        assert!(s.explicit_order);
        assert_eq!(s.top_k, Some(1));
        assert_eq!(s.outputs, vec!["publisher"]);
    }

    #[test]
    fn top_k_and_ordering() {
        let s = spec("List the top 5 heroes ranked by strength.");
        assert_eq!(s.top_k, Some(5));
        assert!(s.explicit_order);
        assert!(s.filters.is_empty(), "{:?}", s.filters);
        assert!(s.group_by.is_empty(), "ranked by is not grouping");
        let s = spec("Show the 3 tallest heroes");
        assert_eq!(s.top_k, Some(3));
        let s = spec("List heroes in descending order of weight");
        assert!(s.explicit_order);
        assert_eq!(s.top_k, None);
        let s = spec("List heroes with at most 3 powers");
        assert!(!s.explicit_order);
        assert_eq!(values(&s), vec![(None, FilterOp::LtEq, "3")]);
    }

    #[test]
    fn grouping_phrases() {
        assert_eq!(
            spec("Count heroes for each publisher").group_by,
            vec!["publisher"]
        );
        assert_eq!(
            spec("Average weight by eye colour").group_by,
            vec!["eye colour"]
        );
        assert!(
            spec("Heroes published by Marvel Comics")
                .group_by
                .is_empty()
        );
        assert!(spec("Heroes sorted by name").group_by.is_empty());
    }

    #[test]
    fn quoted_entities_years_and_explicit_filters() {
        let s = spec("How many superheroes have the super power of 'Super Strength' since 2010?");
        assert_eq!(
            values(&s),
            vec![
                (None, FilterOp::Eq, "super strength"),
                (None, FilterOp::GtEq, "2010")
            ]
        );
        let s = spec("Among the superheroes from Marvel Comics, how many have blue eyes?");
        assert_eq!(values(&s), vec![(None, FilterOp::Eq, "marvel comics")]);
        let s = extract(
            "How many heroes from Marvel Comics?",
            Some(
                "How many heroes from Marvel Comics? Marvel Comics refers to publisher_name = 'Marvel Comics'; average = AVG(weight_kg > 0)",
            ),
            None,
            &RuleProfile::default(),
        );
        assert_eq!(
            values(&s),
            vec![(Some("publisher_name"), FilterOp::Eq, "marvel comics")]
        );
        let s = spec("Orders placed on 2012-01-05 by TotalSpendUSD");
        assert_eq!(values(&s), vec![(None, FilterOp::Eq, "2012-01-05")]);
        let s = spec("Names containing name LIKE '%man%' between 1990 and 2000");
        assert_eq!(
            values(&s),
            vec![
                (Some("name"), FilterOp::Contains, "man"),
                (None, FilterOp::GtEq, "1990"),
                (None, FilterOp::LtEq, "2000")
            ]
        );
    }

    #[test]
    fn possessives_name_the_owner_not_the_output() {
        assert_eq!(
            spec("What is Abomination's superpower?").outputs,
            vec!["superpower"]
        );
        assert_eq!(
            spec("Name the atoms' elements of bond X.").outputs,
            vec!["element"]
        );
        assert_eq!(
            spec("Name the superhero, otherwise known as Charles Chandler.").outputs,
            vec!["superhero"]
        );
    }

    #[test]
    fn sentence_initial_and_stop_words_are_not_entities() {
        let s = spec("What is the eye colour of Abomination? Please list it.");
        assert_eq!(values(&s), vec![(None, FilterOp::Eq, "abomination")]);
        assert_eq!(s.outputs, vec!["eye colour"]);
        let s = spec("Calculate the average height. Among them, who is tallest?");
        assert!(s.filters.is_empty(), "{:?}", s.filters);
    }

    #[test]
    fn sql_literals_in_the_question_become_required_filters() {
        use crate::sqlspec::{Clause, Filter};
        let sql = SqlSpec {
            filters: vec![
                Filter {
                    lhs: "colour".into(),
                    op: FilterOp::Eq,
                    rhs: FilterValue::Text("blue".into()),
                    clause: Clause::Where,
                    in_disjunction: false,
                    depth: 0,
                },
                Filter {
                    lhs: "publisher_name".into(),
                    op: FilterOp::Contains,
                    rhs: FilterValue::Text("marvel".into()),
                    clause: Clause::Where,
                    in_disjunction: false,
                    depth: 1,
                },
            ],
            ..SqlSpec::default()
        };
        let s = extract(
            "Among the superheroes from Marvel Comics, how many have blue eyes?",
            None,
            Some(&sql),
            &RuleProfile::default(),
        );
        assert_eq!(
            values(&s),
            vec![
                (Some("colour"), FilterOp::Eq, "blue"),
                (Some("publisher_name"), FilterOp::Eq, "marvel"),
            ]
        );
    }

    #[test]
    fn column_mappings_apply_to_dimensions() {
        let mut profile = RuleProfile::default();
        profile
            .column_mappings
            .insert("region".into(), "RegionName".into());
        let s = extract(
            "Revenue by region where region = 'APAC'",
            None,
            None,
            &profile,
        );
        assert_eq!(s.group_by, vec!["regionname"]);
        assert_eq!(s.filters[0].lhs.as_deref(), Some("regionname"));
    }

    fn with_qe(q: &str, e: &str) -> QuestionSpec {
        extract(q, Some(&format!("{q} {e}")), None, &RuleProfile::default())
    }

    #[test]
    fn definitions_count_only_when_their_subject_is_in_the_question() {
        // Glossary entries about terms the question does not use are not requirements.
        let s = with_qe(
            "What is the bond type of TR007_4_19?",
            "double bond refers to bond_type = ' = '; single bond refers to bond_type = '-'; \
             label = '+' mean molecules are carcinogenic",
        );
        assert!(s.filters.is_empty(), "{:?}", s.filters);
        // A definition whose subject is in Qu is; both orders; `! =` with a space.
        let s = with_qe(
            "In how many carcinogenic molecules is there no bromine?",
            "no bromine refers to element ! = 'br'; label = '+' mean molecules are carcinogenic",
        );
        assert_eq!(
            values(&s),
            vec![
                (Some("element"), FilterOp::NotEq, "br"),
                (Some("label"), FilterOp::Eq, "+")
            ]
        );
        // `non-carcinogenic` does not match the subject `carcinogenic`.
        let s = with_qe(
            "How many non-carcinogenic molecules are there?",
            "label = '+' mean molecules are carcinogenic; label = '-' means molecules are non-carcinogenic",
        );
        assert_eq!(values(&s), vec![(Some("label"), FilterOp::Eq, "-")]);
        // Chained definitions separated by commas.
        let s = with_qe(
            "Which atoms are Oxygen?",
            "element = 'cl' means Chlorine, element = 'o' means Oxygen, element = 's' means Sulfur",
        );
        assert_eq!(values(&s), vec![(Some("element"), FilterOp::Eq, "o")]);
    }

    #[test]
    fn definitions_replace_the_structure_they_explain() {
        // "fastest" is defined as a value, not an ordering.
        let s = with_qe(
            "Count the fastest superheroes.",
            "fastest refers to attribute_value = 100 WHERE attribute_name = 'Speed';",
        );
        assert!(
            !s.aggregations.iter().any(|a| a.func == AggFunc::Max),
            "{s:?}"
        );
        assert_eq!(s.top_k, None);
        // "total number of … refers to SUM(amount)": SUM, not COUNT.
        let s = with_qe(
            "Provide the total number of the budget amount for the event.",
            "total number of budget amount refers to SUM(amount)",
        );
        let funcs: Vec<_> = s.aggregations.iter().map(|a| a.func.clone()).collect();
        assert_eq!(funcs, vec![AggFunc::Sum]);
    }

    #[test]
    fn declarations_ranges_and_yes_no_questions() {
        let s = with_qe(
            "How many students attended the event Women's Soccer?",
            "Women's Soccer is an event name; 'President' is a position of Student Club",
        );
        assert_eq!(values(&s), vec![(None, FilterOp::Eq, "women's soccer")]);
        let s = spec(
            "How many molecules from TR000 to TR030 have molecule_id between 'TR010' and 'TR020'?",
        );
        assert_eq!(
            values(&s),
            vec![
                (None, FilterOp::GtEq, "tr000"),
                (None, FilterOp::LtEq, "tr030"),
                (Some("molecule_id"), FilterOp::GtEq, "tr010"),
                (Some("molecule_id"), FilterOp::LtEq, "tr020"),
            ]
        );
        // A bare number is not a requirement; a compared one is.
        assert!(spec("What are the bonds of atom 2?").filters.is_empty());
        // Yes/no: a filter on the returned column is the answer, not a requirement.
        use crate::sqlspec::{Clause, Filter, Projection};
        let sql = SqlSpec {
            projections: vec![Projection {
                expr: "label".into(),
                alias: None,
                aggregate: None,
                columns: vec!["label".into()],
            }],
            filters: vec![Filter {
                lhs: "molecule_id".into(),
                op: FilterOp::Eq,
                rhs: FilterValue::Text("tr151".into()),
                clause: Clause::Where,
                in_disjunction: false,
                depth: 0,
            }],
            ..SqlSpec::default()
        };
        let q = "Is molecule TR151 carcinogenic?";
        let s = extract(
            q,
            Some(&format!("{q} label = '+' mean molecules are carcinogenic")),
            Some(&sql),
            &RuleProfile::default(),
        );
        assert_eq!(
            values(&s),
            vec![(Some("molecule_id"), FilterOp::Eq, "tr151")]
        );
    }

    /// Hostile text never panics: every prefix of awkward inputs, unbalanced quotes and
    /// parentheses, non-ASCII, control characters.
    #[test]
    fn hostile_text_never_panics() {
        let samples = [
            "What's the 'total\" spend (in (China)) per year?? `` Little Lever '' ! = 'x",
            "Ünïcödé Ärger über „Zitate“ — ‘quoted’ 名前 = '東京' AND x >= 1,000.5%",
            "\u{0}\u{1b}[31m DROP TABLE; -- refers to refers to = = = '' \"\" ()()(((",
            "9999999999999999999999999999 top 18446744073709551616 between 'a' and",
            "first 3-D 2012/13/45 2012-1- .5. ... from TR to ; ; ; is a is the",
        ];
        let profile = RuleProfile::default();
        for sample in samples {
            for (end, _) in sample
                .char_indices()
                .chain(std::iter::once((sample.len(), ' ')))
            {
                let prefix = &sample[..end];
                let _ = extract(prefix, Some(sample), None, &profile);
                let _ = extract(sample, Some(prefix), None, &profile);
                let _ = text_constraints(prefix);
                let _ = crate::stef::enrichment::validate(sample, Some(prefix), &profile);
            }
        }
        let long = "Which hero from 'Marvel' has the highest power? ".repeat(2000);
        let s = extract(&long, Some(&long), None, &profile);
        assert!(!s.filters.is_empty());
        // Megabytes of distinct quoted values: clipped and capped, not quadratic.
        let huge: String = (0..400_000).map(|i| format!("'v{i}' ")).collect();
        assert!(huge.len() > 3_000_000);
        let s = extract(&huge, Some(&huge), None, &profile);
        assert!(!s.filters.is_empty() && s.filters.len() <= MAX_FILTERS);
        let e = crate::stef::enrichment::validate(&huge, Some(&huge[1..]), &profile);
        assert!(e.added.len() <= 2 * MAX_FILTERS);
    }
}
