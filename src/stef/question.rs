//! Deterministic question-side spec extraction (Sq, stef.md §2.2) from lexicons and token
//! patterns — no model, no schema.
//!
//! What is read from where:
//! - **Structure** (aggregations, grouping, ordering, top-k, outputs) comes from the user's
//!   question Qu: it is the intent being graded.
//! - **Required filters** come from the enriched question Qe when present (it is the agent's
//!   explicit reading, and carries hints such as BIRD's `label = '-'`), else from Qu.
//! - **SQL literals found in the question text**: a literal of one of the SQL's filters that
//!   appears (as a phrase, or a number token) in Qu or Qe is a required filter with that SQL
//!   filter's left-hand side. This gives dimensions to values the question states in prose.
//!
//! Lexicon:
//! - total/sum → SUM (`total number of` → COUNT), average/mean/avg → AVG, how many/number of/
//!   count → COUNT, distinct/unique (and `how many different`) → DISTINCT on the COUNT;
//!   highest/maximum/most/largest/… → MAX, lowest/minimum/least/fewest/… → MIN (both also set
//!   `explicit_order` and `top_k = 1` unless a number is given); percentage/ratio/proportion/
//!   difference/`how many times` → a computed aggregation (`Other("computed")`).
//! - Ordering: top N, first/last N, N highest…, ranked/sorted/ordered, ascending/descending,
//!   alphabetical, youngest/oldest/earliest/latest/newest/best/worst.
//! - Grouping: `per X`, `for/in/of each|every X`, `grouped/broken down/split by X`, and `by X`
//!   unless `by` follows a participle (`published by`, `sorted by`) or X is a proper noun.
//! - Filters: explicit `lhs op value` (depth 0 only — comparisons inside function calls such as
//!   `AVG(element = 'o')` are conditional aggregations, not filters), `between a and b`,
//!   comparatives before numbers (more than/over/at least/under/…, and `>`-style symbols), years,
//!   dates, other numbers, quoted values, and capitalised entities (runs of capitalised words that
//!   are not sentence-initial stop words, identifiers, SQL keywords, months or weekdays).
//!
//! Values are normalized like sqlspec literals ([`normalize_value`]); column mappings of the
//! profile are applied to every dimension (NL term → physical column).

use crate::sqlspec::{AggFunc, FilterOp, FilterValue, SqlSpec};

use super::text::{
    Token, TokenKind, canonical_number, contains_phrase, lower_collapsed, name_key,
    normalize_value, singular, tokenize,
};
use super::{QuestionAggregation, QuestionFilter, QuestionSpec, RuleProfile};

/// Name of the computed-expression aggregation family (percentage, ratio, difference, …).
pub const COMPUTED: &str = "computed";

/// Extract the question spec of one event.
///
/// `sql` enables the SQL-literal rule (module doc); `profile` supplies column mappings.
pub fn extract(
    question: &str,
    enriched: Option<&str>,
    sql: Option<&SqlSpec>,
    profile: &RuleProfile,
) -> QuestionSpec {
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

    let enriched = enriched.filter(|e| !e.trim().is_empty());
    let qe_tokens;
    let qe_lower;
    let qe_doc;
    let mut qe_used;
    let (filter_doc, filter_used) = match enriched {
        Some(e) => {
            qe_tokens = tokenize(e);
            qe_lower = e.to_ascii_lowercase();
            qe_doc = Doc {
                text: e,
                lower: &qe_lower,
                toks: &qe_tokens,
            };
            qe_used = vec![false; qe_tokens.len()];
            // Numbers that are top-k requests in Qe are not filters either.
            let mut scratch = QuestionSpec::default();
            structure(&qe_doc, &mut scratch, &mut qe_used);
            (&qe_doc, &mut qe_used)
        }
        None => (&qu, &mut qu_used),
    };
    spec.filters = text_filters(filter_doc, filter_used);

    if let Some(sql) = sql {
        sql_literal_filters(
            question,
            enriched,
            &qu,
            enriched.map(|_| filter_doc),
            sql,
            &mut spec.filters,
        );
    }
    apply_mappings(profile, &mut spec);
    dedup_filters(&mut spec.filters);
    spec
}

/// The constraints one text states on its own (no SQL, no mappings): used by enrichment
/// validation to compare Qu with Qe.
pub fn text_constraints(text: &str) -> QuestionSpec {
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

const MAX_WORDS: &[&str] = &[
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
const MIN_WORDS: &[&str] = &[
    "lowest", "minimum", "min", "least", "smallest", "fewest", "shortest", "lightest", "weakest",
    "slowest", "cheapest",
];
const ORDER_SUPERLATIVES: &[&str] = &[
    "youngest", "oldest", "earliest", "latest", "newest", "best", "worst", "recent",
];
const ORDER_WORDS: &[&str] = &[
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
const COMPUTED_WORDS: &[&str] = &[
    "percentage",
    "percent",
    "ratio",
    "proportion",
    "difference",
    "divide",
    "divided",
    "rate",
];
const DISTINCT_WORDS: &[&str] = &["distinct", "unique"];
const AVG_WORDS: &[&str] = &["average", "mean", "avg"];
const LIST_VERBS: &[&str] = &[
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
const PHRASE_STOP: &[&str] = &[
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
const COLUMN_SKIP: &[&str] = &[
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
const ENTITY_STOP: &[&str] = &[
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
const PARTICIPLE_BY: &[&str] = &[
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

fn is_in(list: &[&str], w: &str) -> bool {
    !w.is_empty() && list.contains(&w)
}

/// Aggregations, ordering, top-k, grouping and outputs of one text. Marks top-k number tokens
/// in `used` so the filter pass skips them.
fn structure(doc: &Doc<'_>, spec: &mut QuestionSpec, used: &mut [bool]) {
    let n = doc.toks.len();
    let mut distinct = false;
    let mut i = 0usize;
    while i < n {
        let w = doc.w(i);
        if w.is_empty() {
            // Numbers directly before a superlative: "3 tallest", "5 highest".
            if let Some(k) = doc.number(i).and_then(|v| v.parse::<u64>().ok())
                && (is_in(MAX_WORDS, doc.w(i + 1))
                    || is_in(MIN_WORDS, doc.w(i + 1))
                    || is_in(ORDER_SUPERLATIVES, doc.w(i + 1)))
                && doc.w(i + 1) != "most"
                && doc.w(i + 1) != "least"
            {
                spec.top_k = Some(k);
                spec.explicit_order = true;
                mark(used, i);
            }
            i += 1;
            continue;
        }
        match w {
            "how" if doc.w(i + 1) == "many" => {
                let next = doc.w(i + 2);
                if next == "times" || next == "percent" {
                    push_agg(spec, AggFunc::Other(COMPUTED.into()), None, false);
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
                if !is_in(AVG_WORDS, prev) {
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
                let counting = next == "number" || next == "count";
                let in_total = prev == "in";
                if !(counting || in_total && has_func(spec, &AggFunc::Count)) {
                    let col = column_after(doc, i + 1);
                    push_agg(spec, AggFunc::Sum, col, false);
                }
            }
            _ if is_in(AVG_WORDS, w) => {
                let col = column_after(doc, i + 1);
                push_agg(spec, AggFunc::Avg, col, false);
            }
            _ if is_in(DISTINCT_WORDS, w) => distinct = true,
            _ if is_in(COMPUTED_WORDS, w) => {
                push_agg(spec, AggFunc::Other(COMPUTED.into()), None, false);
            }
            "top" | "first" | "last" => {
                if let Some(k) = doc.number(i + 1).and_then(|v| v.parse::<u64>().ok()) {
                    spec.top_k = Some(k);
                    spec.explicit_order = true;
                    mark(used, i + 1);
                    i += 2;
                    continue;
                }
                if w == "top" {
                    spec.explicit_order = true;
                    spec.top_k.get_or_insert(1);
                    push_agg(spec, AggFunc::Max, column_after(doc, i + 1), false);
                }
            }
            _ if is_in(MAX_WORDS, w) || is_in(MIN_WORDS, w) => {
                let prev = if i > 0 { doc.w(i - 1) } else { "" };
                // "at most 3" / "at least 3" are comparisons, handled by the filter pass.
                let comparative = (w == "most" || w == "least") && prev == "at";
                if !comparative {
                    let func = if is_in(MAX_WORDS, w) {
                        AggFunc::Max
                    } else {
                        AggFunc::Min
                    };
                    push_agg(spec, func, column_after(doc, i + 1), false);
                    spec.explicit_order = true;
                    spec.top_k.get_or_insert(1);
                }
            }
            _ if is_in(ORDER_SUPERLATIVES, w) => {
                spec.explicit_order = true;
                spec.top_k.get_or_insert(1);
            }
            _ if is_in(ORDER_WORDS, w) => spec.explicit_order = true,
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
    if distinct {
        for agg in &mut spec.aggregations {
            if agg.func == AggFunc::Count {
                agg.distinct = true;
            }
        }
    }
    spec.outputs = outputs(doc);
}

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
                if matches!(doc.w(j), "me" | "out") {
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
fn comparative_before(doc: &Doc<'_>, i: usize) -> Option<FilterOp> {
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
        (_, "at", "least")
        | (_, "no", "less")
        | ("no", "less", "than")
        | ("not", "less", "than") => Some(FilterOp::GtEq),
        (_, "at", "most") | (_, "up", "to") | ("no", "more", "than") | ("not", "more", "than") => {
            Some(FilterOp::LtEq)
        }
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

const LESS_WORDS: &[&str] = &[
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
    if is_in(
        &[
            "and", "or", "not", "is", "where", "than", "if", "when", "then", "else",
        ],
        w,
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
                // `a = b.c` or `a = f(…)` are joins/expressions, not value filters.
                if doc.is_punct(v + 1, ".") || doc.is_punct(v + 1, "(") {
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
        filters.push(QuestionFilter {
            lhs: Some(lhs.to_string()),
            op,
            value: normalize_value(value_text),
        });
        for k in i - 1..=v {
            mark(used, k);
        }
    }
    // Pass 2: between a and b.
    for i in 0..n {
        if used[i] || doc.w(i) != "between" || doc.tok(i).is_some_and(|t| t.depth > 0) {
            continue;
        }
        if let (Some(a), "and", Some(b)) = (doc.number(i + 1), doc.w(i + 2), doc.number(i + 3)) {
            let a = date_or_number(doc, i + 1, a, used);
            let b = date_or_number(doc, i + 3, b, used);
            for (op, value) in [(FilterOp::GtEq, a), (FilterOp::LtEq, b)] {
                filters.push(QuestionFilter {
                    lhs: None,
                    op,
                    value,
                });
            }
            for k in i..=i + 3 {
                mark(used, k);
            }
        }
    }
    // Pass 3: numbers, quoted values, entities.
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
                    let op = comparative_before(doc, i)
                        .or_else(|| comparative_after(doc, i))
                        .unwrap_or(FilterOp::Eq);
                    let value = date_or_number(doc, i, num, used);
                    filters.push(QuestionFilter {
                        lhs: None,
                        op,
                        value,
                    });
                }
                mark(used, i);
                i += 1;
            }
            TokenKind::Quoted => {
                let (op, inner) = like_op(t.text);
                let value = normalize_value(inner);
                if !value.is_empty() {
                    filters.push(QuestionFilter {
                        lhs: None,
                        op,
                        value,
                    });
                }
                mark(used, i);
                i += 1;
            }
            TokenKind::Word => {
                let end = entity_end(doc, i, used);
                if end > i {
                    let mut value = String::new();
                    for k in i..end {
                        let Some(tk) = doc.tok(k) else { break };
                        if !value.is_empty() {
                            value.push(' ');
                        }
                        value.push_str(tk.text.trim_end_matches("'s").trim_end_matches("’s"));
                        mark(used, k);
                    }
                    filters.push(QuestionFilter {
                        lhs: None,
                        op: FilterOp::Eq,
                        value: normalize_value(&value),
                    });
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
    for f in &sql.filters {
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
    doc.toks
        .iter()
        .any(|t| t.kind == TokenKind::Quoted && normalize_value(t.text) == value)
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

/// Remove duplicates and value-only filters subsumed by a filter with a dimension (same value,
/// or the value is part of the other's value: entity `marvel` vs `publisher = 'marvel comics'`).
fn dedup_filters(filters: &mut Vec<QuestionFilter>) {
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
                    || (a.value.len() >= 3 && contains_phrase(&b.value, &a.value))
                    || (b.value.len() >= 3 && contains_phrase(&a.value, &b.value)));
            if duplicate || subsumed {
                keep[i] = false;
                break;
            }
        }
    }
    let mut k = 0;
    filters.retain(|_| {
        let r = keep[k];
        k += 1;
        r
    });
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
}
