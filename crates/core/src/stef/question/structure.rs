//! Structure from the user's question: aggregations, grouping, ordering, top-k and outputs;
//! and the structure a definition's formula implies.

use crate::sqlspec::AggFunc;
use crate::stef::text::{
    TokenKind, contains_phrase, match_starts, singular, strip_possessive, tokenize,
};
use crate::stef::{QuestionAggregation, QuestionSpec};

use super::doc::Doc;
use super::lexicon::{
    AVG_WORDS, COLUMN_SKIP, COMPUTED_WORDS, DISTINCT_WORDS, LIST_VERBS, MAX_WORDS, MIN_WORDS,
    NOT_SUPERLATIVE, NUMBER_ATTRIBUTES, ORDER_SUPERLATIVES, ORDER_WORDS, PARTICIPLE_BY,
    PHRASE_STOP, is_in, lex,
};

/// Name of the computed-expression aggregation family (percentage, ratio, difference, …).
pub const COMPUTED: &str = "computed";

/// Name of the "total" family: `total <plural noun>` is a SUM or a COUNT.
pub const TOTAL: &str = "total";

/// Aggregations, superlatives and top-k requests that Qu states with a term a kept definition
/// explains are replaced by what the definition says: "total number of budget amount refers to
/// SUM(amount)" turns COUNT into SUM; "fastest refers to attribute_value = 100" drops MAX;
/// "first 100 molecules refers to molecule_id between …" drops top-k 100.
pub(super) fn redefine_structure(spec: &mut QuestionSpec, defined: &[(String, String)]) {
    for (subject, definition) in defined {
        let sub = text_structure(subject);
        if sub.aggregations.is_empty() && sub.top_k.is_none() {
            continue;
        }
        let mut def_funcs = function_calls(definition);
        // `MAX(COUNT(x))` is an argmax ("the most common bond type"): the row with the largest
        // count, an ordering with a top 1 however the SQL writes it (ORDER BY COUNT(…) DESC
        // LIMIT 1, a MAX over a grouped subquery) — not a computed formula.
        let argmax = nested_extreme(definition);
        if let Some(extreme) = &argmax {
            def_funcs = vec![extreme.clone()];
        } else if def_funcs.len() > 1 || definition.contains("divide") || definition.contains('/') {
            // A formula (`DIVIDE(SUM(cost), COUNT(event_id))`) is one computation; any
            // equivalent SQL (AVG, a ratio of aggregates) implements it.
            def_funcs = vec![AggFunc::Other(COMPUTED.into())];
        }
        let ordered = argmax.is_some()
            || [
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

/// MAX or MIN applied directly to another aggregate in a (lowercase) formula:
/// `max(count(bond_type))`, `min( sum(cost) )`.
fn nested_extreme(formula: &str) -> Option<AggFunc> {
    let compact: String = formula.split_whitespace().collect();
    let inner = |rest: &str| {
        ["count(", "sum(", "avg("]
            .iter()
            .any(|f| rest.starts_with(f))
    };
    for (name, func) in [("max(", AggFunc::Max), ("min(", AggFunc::Min)] {
        let found = match_starts(&compact, name).any(|pos| {
            compact[..pos]
                .chars()
                .next_back()
                .is_none_or(|c| !c.is_alphanumeric() && c != '_')
                && inner(&compact[pos + name.len()..])
        });
        if found {
            return Some(func);
        }
    }
    None
}

/// Structure (aggregations, top-k) of a short text.
pub(super) fn text_structure(text: &str) -> QuestionSpec {
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
pub(super) fn function_calls(formula: &str) -> Vec<AggFunc> {
    let mut out = Vec::new();
    for (name, func) in [
        ("sum(", AggFunc::Sum),
        ("avg(", AggFunc::Avg),
        ("count(", AggFunc::Count),
        ("max(", AggFunc::Max),
        ("min(", AggFunc::Min),
    ] {
        let found = match_starts(formula, name).any(|pos| {
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

/// Aggregations, ordering, top-k, grouping and outputs of one text. Marks top-k number tokens
/// in `used` so the filter pass skips them.
pub(super) fn structure(doc: &Doc<'_>, spec: &mut QuestionSpec, used: &mut [bool]) {
    let n = doc.toks.len();
    let mut distinct = false;
    let mut the_number: Option<(usize, u64)> = None;
    let mut i = 0usize;
    while i < n {
        let w = doc.w(i);
        let f = lex(w);
        if w.is_empty() {
            // Numbers directly before a superlative: "3 tallest", "5 highest", "3 most populated".
            // The next word first: it is a lexicon lookup, the number a parse.
            if is_in(MAX_WORDS | MIN_WORDS | ORDER_SUPERLATIVES, doc.w(i + 1))
                && let Some(k) = doc.number(i).and_then(|v| v.parse::<u64>().ok())
            {
                spec.top_k = Some(k);
                spec.explicit_order = true;
                mark(used, i);
            } else if i > 0
                && doc.w(i - 1) == "the"
                && let Some(k) = doc.number(i).and_then(|v| v.parse::<u64>().ok())
                // "the 2009 Spanish Grand Prix" names a year, not a number of rows.
                && !(1000..=2999).contains(&k)
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
pub(super) fn generic_superlative(doc: &Doc<'_>, i: usize) -> bool {
    let w = doc.w(i);
    w.len() >= 6
        && w.ends_with("est")
        && i > 0
        && doc.w(i - 1) == "the"
        && !is_in(
            NOT_SUPERLATIVE | MAX_WORDS | MIN_WORDS | ORDER_SUPERLATIVES,
            w,
        )
}

pub(super) fn mark(used: &mut [bool], i: usize) {
    if let Some(u) = used.get_mut(i) {
        *u = true;
    }
}

pub(super) fn has_func(spec: &QuestionSpec, func: &AggFunc) -> bool {
    spec.aggregations.iter().any(|a| &a.func == func)
}

pub(super) fn push_agg(
    spec: &mut QuestionSpec,
    func: AggFunc,
    column: Option<String>,
    distinct: bool,
) {
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
pub(super) fn column_after(doc: &Doc<'_>, mut i: usize) -> Option<String> {
    while is_in(COLUMN_SKIP, doc.w(i)) {
        i += 1;
    }
    phrase_at(doc, i, 2)
}

/// Up to `max` consecutive content words starting at `i`, lowercased, last word singular.
pub(super) fn phrase_at(doc: &Doc<'_>, i: usize, max: usize) -> Option<String> {
    // The phrase is the tokens `i..end`: counted first, then written once.
    let mut end = i;
    while end - i < max {
        let w = doc.w(end);
        if w.is_empty()
            || is_in(PHRASE_STOP | MAX_WORDS | MIN_WORDS, w)
            || doc.is_punct(end + 1, "(")
        {
            break;
        }
        end += 1;
    }
    let last = end.checked_sub(1).filter(|&last| last >= i)?;
    let last_word = singular(strip_possessive(doc.w(last)));
    let rest_len: usize = (i..last).map(|k| doc.w(k).len() + 1).sum();
    let mut out = String::with_capacity(rest_len + last_word.len());
    for k in i..last {
        out.push_str(doc.w(k));
        out.push(' ');
    }
    out.push_str(&last_word);
    Some(out)
}

/// Record the grouping dimension starting at `i`; its tokens are dimension names, not values.
pub(super) fn push_group(doc: &Doc<'_>, spec: &mut QuestionSpec, used: &mut [bool], mut i: usize) {
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
pub(super) fn outputs(doc: &Doc<'_>) -> Vec<String> {
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
            // One lexicon lookup for the five word lists.
            let first_lex = lex(first);
            let aggregate_like = first.is_empty()
                || first_lex & COLUMN_SKIP != 0 && first != "value"
                || first_lex & (AVG_WORDS | COMPUTED_WORDS | MAX_WORDS | MIN_WORDS) != 0
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
