//! Filters from text: explicit comparisons, ranges, years and dates, quoted values,
//! capitalised entities; SQL literals found in the question; mappings, deduplication and
//! schema terms; yes/no questions.

use std::borrow::Cow;

use crate::sqlspec::{FilterOp, FilterValue, SqlSpec};
use crate::stef::text::{
    TokenKind, canonical_number, contains_phrase, lower_collapsed, name_key, normalize_value,
    singular, strip_possessive,
};
use crate::stef::{QuestionFilter, QuestionSpec, RuleProfile};

use super::doc::Doc;
use super::lexicon::{ENTITY_STOP, LESS_WORDS, PHRASE_STOP, is_in};
use super::structure::mark;

/// A capitalised "entity" that names a table or column of the SQL ("TV Channel", "Package
/// Option") is schema vocabulary, not a value.
pub(super) fn drop_schema_terms(sql: &SqlSpec, filters: &mut Vec<QuestionFilter>) {
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
pub(super) fn asks_whether(doc: &Doc<'_>) -> bool {
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

/// Comparison words before a number, as (words, op); longest match first.
pub(super) fn comparative_before(doc: &Doc<'_>, mut i: usize) -> Option<FilterOp> {
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

pub(super) fn negation_at(doc: &Doc<'_>, i: usize, back: usize) -> bool {
    i >= back && matches!(doc.w(i - back), "not" | "never" | "no")
}

pub(super) fn comparative_after(doc: &Doc<'_>, i: usize) -> Option<FilterOp> {
    match (doc.w(i + 1), doc.w(i + 2)) {
        ("or", "more" | "above" | "greater" | "higher" | "over") => Some(FilterOp::GtEq),
        ("or", "less" | "fewer" | "below" | "lower" | "under") => Some(FilterOp::LtEq),
        _ => None,
    }
}

pub(super) fn like_op(raw: &str) -> (FilterOp, &str) {
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

pub(super) fn op_token(doc: &Doc<'_>, i: usize) -> Option<(FilterOp, usize)> {
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
pub(super) fn lhs_ident<'a>(doc: &Doc<'a>, i: usize) -> Option<&'a str> {
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

/// `text` without its commas (`1,000` → `1000`), borrowed when it has none.
fn without_commas(text: &str) -> Cow<'_, str> {
    if memchr::memchr(b',', text.as_bytes()).is_some() {
        Cow::Owned(text.replace(',', ""))
    } else {
        Cow::Borrowed(text)
    }
}

/// `word` without the possessive endings it ends with (`'s` as often as it is repeated, then
/// `’s`): `trim_end_matches` by suffix comparisons, with no searcher built per word.
fn without_possessives(word: &str) -> &str {
    let mut word = strip_possessive(word);
    while let Some(stem) = word.strip_suffix("’s") {
        word = stem;
    }
    word
}

/// Filters a text states: explicit comparisons, between, comparatives, numbers, years, dates,
/// quoted values and capitalised entities (module doc).
pub(super) fn text_filters(doc: &Doc<'_>, used: &mut [bool]) -> Vec<QuestionFilter> {
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
            TokenKind::Number => match canonical_number(&without_commas(vt.text)) {
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
                .filter(|w| {
                    w.contains('_') || i.checked_sub(2).is_some_and(|j| doc.is_punct(j, "."))
                })
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
                if !arithmetic && let Some(num) = canonical_number(&without_commas(t.text)) {
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
                            value.push_str(without_possessives(tk.text));
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

pub(super) fn is_year(v: &str) -> bool {
    v.len() == 4 && v.parse::<u32>().is_ok_and(|y| (1800..=2100).contains(&y))
}

/// Whether the value at token `i` is negated: "not 'Boril'", "is not X", "other than X",
/// "except X", "excluding X", "without X", "isn't X" (quote punctuation is skipped).
pub(super) fn negated_before(doc: &Doc<'_>, i: usize) -> bool {
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
pub(super) fn range_value(doc: &Doc<'_>, i: usize, used: &mut [bool]) -> Option<String> {
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
pub(super) fn date_or_number(doc: &Doc<'_>, i: usize, num: String, used: &mut [bool]) -> String {
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
pub(super) fn entity_end(doc: &Doc<'_>, i: usize, used: &[bool]) -> usize {
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

pub(super) fn entity_word(doc: &Doc<'_>, i: usize, used: &[bool]) -> bool {
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
    let text = strip_possessive(t.text);
    let all_caps = text.chars().all(|c| !c.is_lowercase());
    let inner_caps = text.chars().skip(1).any(char::is_uppercase);
    if text.contains('_') || (inner_caps && !all_caps) {
        return false;
    }
    true
}

/// Add required filters for SQL literals that the question text states (module doc).
pub(super) fn sql_literal_filters(
    question_lower: &str,
    enriched: Option<&str>,
    qu: &Doc<'_>,
    qe: Option<&Doc<'_>>,
    sql: &SqlSpec,
    filters: &mut Vec<QuestionFilter>,
) {
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
                let in_qu = phrase_in(qu, question_lower, text);
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

pub(super) fn number_in(doc: &Doc<'_>, value: &str) -> bool {
    doc.toks.iter().enumerate().any(|(i, t)| {
        t.kind == TokenKind::Number
            && canonical_number(&without_commas(t.text)).as_deref() == Some(value)
            // Top-k numbers ("top 5") are not filter values.
            && !(i > 0 && matches!(doc.w(i - 1), "top" | "first" | "last"))
    })
}

/// Whether a (normalized) text literal is stated in the text: as a phrase for literals of two
/// or more characters, or as a quoted token for shorter ones (`'-'`, `'o'`).
pub(super) fn phrase_in(doc: &Doc<'_>, lower: &str, value: &str) -> bool {
    if value.chars().count() >= 2 && value.chars().any(char::is_alphanumeric) {
        return contains_phrase(lower, value);
    }
    doc.toks.iter().any(|t| {
        t.kind == TokenKind::Quoted && crate::sqlspec::normalize_text_value(t.text) == value
    })
}

/// Replace NL terms by physical columns through the profile's column mappings.
pub(super) fn apply_mappings(profile: &RuleProfile, spec: &mut QuestionSpec) {
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
pub(super) const MAX_FILTERS: usize = 64;

/// Remove duplicates and value-only filters subsumed by a filter with a dimension (same value,
/// or the value is part of the other's value: entity `marvel` vs `publisher = 'marvel comics'`).
pub(super) fn dedup_filters(filters: &mut Vec<QuestionFilter>) {
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
