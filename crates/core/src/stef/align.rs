//! Alignment of a question spec Sq with an SQL spec Ssql (stef.md §2.4) under a rule profile.
//!
//! Order of operations:
//! 1. The production normalization rules run on the untouched SQL spec ([`super::normalize`]).
//! 2. `ignore_filters`: filters whose dimension (raw or mapped) is ignored are removed from both
//!    sides and listed in `ignored`.
//! 3. Each required (question) filter is matched to an SQL filter:
//!    - with a dimension: the dimensions must agree ([`name_key`] after column mappings; a year
//!      idiom `year(d)` also answers for `d`), and op and value must be compatible; when no SQL
//!      filter on that dimension is compatible, a compatible SQL filter on another dimension with
//!      the same value still matches (the question's dimension is an NL guess);
//!    - without a dimension: any SQL filter with a compatible op and value matches.
//!    - op compatibility: `=` matches `=`, `IN` lists containing the value, and the LIKE family
//!      (`contains`/`starts_with`/`ends_with`, where the SQL pattern may be a part of the question
//!      value: `ILIKE '%Marvel%'` answers "Marvel Comics"); `>`/`>=` match each other only with
//!      the same value and op (an off-by-one bound is a mismatch); negations match negations.
//!    - A filter with the right dimension (or the right value) but a wrong op/value is
//!      *mismatched*; one with no counterpart is *missing*.
//! 4. Extras: SQL filters that matched nothing, excluding
//!    - join-like predicates (`a.x = b.y`: rhs is a column) and `x IN (subquery)` shells — the
//!      subquery's own filters are listed separately and judged individually;
//!    - alternatives of a matched filter under the same OR on the same dimension.
//!
//!   Filters at every nesting depth count (a literal restriction inside a subquery restricts the
//!   answer just as much); a subquery filter that implements a required filter is simply matched.
//!   An extra is benign when it equals a `benign_filters` entry (normalized `lhs op rhs`).
//! 5. Status exactly as stef.md §2.4, with mismatched filters counting as not matched.
//! 6. Binary matches: projections (every requested output shares a word with some projection and
//!    every projection answers an output, a requested grouping dimension, a requested aggregation,
//!    or is a constant; `*` matches all; no outputs recognised → match), aggregations (every requested function is
//!    present — COUNT also as a conditional SUM, AVG also as SUM with COUNT or a division, MAX/MIN
//!    also as ORDER BY DESC/ASC, DISTINCT counts need a DISTINCT or a grouping; computed
//!    percentages/ratios accept anything), grouping (every requested dimension grouped, and every
//!    GROUP BY column justified by the question, rule 1, rule 2, a HAVING condition, or an argmax
//!    pattern: GROUP BY with ORDER BY an aggregate when the question asks for a superlative/top-k).

use crate::sqlspec::{AggFunc, Filter, FilterOp, FilterValue, SortDir, SqlSpec};

use super::normalize::{self, Normalization};
use super::profile::CompiledRules;
use super::question::{COMPUTED, TOTAL};
use super::text::{
    contains_phrase, name_key, name_words, render_filter, render_question_filter, singular,
    value_text, words_match,
};
use super::{Alignment, ExtraFilter, FilterStatus, QuestionFilter, QuestionSpec, RuleProfile};

/// Align `question` with `sql` under `profile`.
pub fn align(question: &QuestionSpec, sql: &SqlSpec, profile: &RuleProfile) -> Alignment {
    let rules = profile.compiled();
    let norm = normalize::apply(sql, question, profile);
    let mut out = Alignment::default();

    // Ignore filters on both sides.
    let mut required: Vec<&QuestionFilter> = Vec::with_capacity(question.filters.len());
    for f in &question.filters {
        match &f.lhs {
            Some(lhs) if rules.is_ignored(lhs) => out.ignored.push(render_question_filter(f)),
            _ => required.push(f),
        }
    }
    let mut sql_filters: Vec<&Filter> = Vec::with_capacity(sql.filters.len());
    for f in &sql.filters {
        if rules.is_ignored(&f.lhs) {
            out.ignored.push(render_filter(f));
        } else {
            sql_filters.push(f);
        }
    }
    let sql_keys: Vec<String> = sql_filters
        .iter()
        .map(|f| rules.dimension_key(&f.lhs))
        .collect();

    // Match required filters.
    let mut used = vec![false; sql_filters.len()];
    let mut matched = 0usize;
    for q in &required {
        let q_key = q.lhs.as_deref().map(|l| rules.dimension_key(l));
        let mut hit: Option<usize> = None;
        let mut near: Option<usize> = None;
        if let Some(qk) = &q_key {
            for (i, f) in sql_filters.iter().enumerate() {
                if dims_agree(qk, &sql_keys[i]) {
                    if compatible(q, f) {
                        hit = Some(i);
                        break;
                    }
                    near.get_or_insert(i);
                }
            }
        }
        if hit.is_none() {
            hit = sql_filters.iter().position(|f| compatible(q, f));
        }
        if hit.is_none() && near.is_none() && !q.value.is_empty() {
            near = sql_filters
                .iter()
                .position(|f| value_text(&f.rhs).is_some_and(|v| v == q.value));
        }
        if hit.is_none()
            && let Some(expr) = conditional_aggregation(q, sql, rules)
        {
            matched += 1;
            let mut line = render_question_filter(q);
            line.push_str(" ~ conditional aggregation ");
            line.push_str(expr);
            out.matched.push(line);
            continue;
        }
        match (hit, near) {
            (Some(i), _) => {
                used[i] = true;
                matched += 1;
                let mut line = render_question_filter(q);
                line.push_str(" ~ ");
                line.push_str(&render_filter(sql_filters[i]));
                out.matched.push(line);
            }
            (None, Some(i)) => {
                let mut line = render_question_filter(q);
                line.push_str(" vs ");
                line.push_str(&render_filter(sql_filters[i]));
                out.mismatched.push(line);
            }
            (None, None) => out.missing.push(render_question_filter(q)),
        }
    }

    // Extras.
    for (i, f) in sql_filters.iter().enumerate() {
        if used[i] || matches!(f.rhs, FilterValue::Column(_) | FilterValue::Subquery) {
            continue;
        }
        let alternative_of_matched = f.in_disjunction
            && sql_filters.iter().enumerate().any(|(j, g)| {
                used[j] && g.in_disjunction && sql_keys[j] == sql_keys[i] && g.depth == f.depth
            });
        if alternative_of_matched {
            continue;
        }
        out.extras.push(ExtraFilter {
            filter: render_filter(f),
            benign: is_benign_keyed(f, &sql_keys[i], rules),
        });
    }

    let n_required = required.len();
    let status = if n_required == 0 || matched == n_required {
        if out.extras.is_empty() {
            FilterStatus::FullyApplied
        } else {
            FilterStatus::FullyAppliedWithExtras
        }
    } else if matched == 0 {
        FilterStatus::NotApplied
    } else {
        FilterStatus::PartiallyApplied
    };
    out.filter_status = Some(status);
    out.required_filters = n_required;

    let (unmatched, extra) = projection_alignment(question, sql, rules);
    out.unmatched_outputs = unmatched;
    out.extra_projections = extra;
    out.projections_match = out.unmatched_outputs.is_empty() && out.extra_projections.is_empty();
    out.missing_aggregations = missing_aggregations(question, sql);
    out.aggregations_match = out.missing_aggregations.is_empty();
    let (missing_groups, unexplained_groups) = grouping(question, sql, &norm, rules);
    out.grouping_match = missing_groups.is_empty() && unexplained_groups.is_empty();
    out.missing_group_by = missing_groups;
    out.unexplained_group_by = unexplained_groups;
    out.top_k_mismatch = top_k_mismatch(question, sql);

    out.rules_fired = norm.rules_fired;
    out.suspicious_limit = norm.suspicious_limit;
    out.unexplained_order = norm.unexplained_order;
    out
}

/// An equality requirement implemented inside an aggregate (`SUM(CASE WHEN element = 'cl' …)`,
/// `SUM(IIF(label = '+', 1, 0))`, `COUNT(CASE WHEN …)`): the aggregate argument compares the
/// required dimension (when known) with the required value.
fn conditional_aggregation<'s>(
    q: &QuestionFilter,
    sql: &'s SqlSpec,
    rules: &CompiledRules,
) -> Option<&'s str> {
    if q.value.is_empty() {
        return None;
    }
    let symbol = match q.op {
        FilterOp::Eq
        | FilterOp::Contains
        | FilterOp::StartsWith
        | FilterOp::EndsWith
        | FilterOp::Like => "=",
        FilterOp::Gt => ">",
        FilterOp::GtEq => ">=",
        FilterOp::Lt => "<",
        FilterOp::LtEq => "<=",
        _ => return None,
    };
    let lhs_key = q.lhs.as_deref().map(|l| rules.dimension_key(l));
    sql.aggregations.iter().map(|a| a.arg.as_str()).find(|arg| {
        let comparison = if symbol == "=" {
            arg.contains('=') || arg.contains(" like ") || arg.contains(" in ")
        } else {
            arg.contains(symbol)
        };
        let has_lhs = lhs_key.as_deref().is_none_or(|k| {
            arg.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|w| dims_agree(k, &rules.dimension_key(w)))
        });
        comparison && has_lhs && contains_phrase(arg, &q.value)
    })
}

/// Dimensions agree when keys are equal or one is the year idiom over the other
/// (`yearorderdate` vs `orderdate`).
fn dims_agree(q: &str, s: &str) -> bool {
    q == s
        || s.strip_prefix("year").is_some_and(|rest| rest == q)
        || q.strip_prefix("year").is_some_and(|rest| rest == s)
}

/// Whether `text` starts with `head` followed by `tail` (`2019-09` is `2019` then `-`), without
/// building the prefix.
fn prefixed(text: &str, head: &str, tail: &str) -> bool {
    text.strip_prefix(head)
        .is_some_and(|rest| rest.starts_with(tail))
}

/// Whether an SQL filter satisfies a required filter's op and value.
fn compatible(q: &QuestionFilter, f: &Filter) -> bool {
    // The operators' variants, matched by name in this function only.
    use FilterOp::*;
    match q.op {
        IsNull | IsNotNull => f.op == q.op,
        Eq | Contains | StartsWith | EndsWith | Like => match (&f.op, &f.rhs) {
            // Also a year answered by a finer date (`strftime('%Y-%m', d) = '2019-09'`).
            (Eq, rhs) => value_text(rhs).is_some_and(|v| {
                values_equal(v, &q.value) || (is_year(&q.value) && prefixed(v, &q.value, "-"))
            }),
            (In, FilterValue::List(items)) => items
                .iter()
                .any(|it| value_text(it).is_some_and(|v| values_equal(v, &q.value))),
            (Contains | StartsWith | EndsWith | Like, rhs) => value_text(rhs).is_some_and(|v| {
                values_equal(v, &q.value)
                    || (v.chars().count() >= 3 && contains_phrase(&q.value, v))
                    || (q.op != Eq && contains_phrase(v, &q.value))
                    // A date/year prefix: LIKE '2012%' answers 2012, LIKE '2012-01%' answers 2012-01.
                    || (f.op == StartsWith && q.value.starts_with(v))
            }),
            // A year as a date range: `d >= '2012-01-01'` (the paired upper bound is the other half).
            (GtEq, rhs) if is_year(&q.value) => {
                value_text(rhs).is_some_and(|v| v == q.value || prefixed(v, &q.value, "-01-01"))
            }
            _ => false,
        },
        NotEq | NotLike | NotIn => match (&f.op, &f.rhs) {
            (NotEq | NotLike, rhs) => {
                value_text(rhs).is_some_and(|v| v == q.value || contains_phrase(v, &q.value))
            }
            (NotIn, FilterValue::List(items)) => items
                .iter()
                .any(|it| value_text(it).is_some_and(|v| v == q.value)),
            _ => false,
        },
        Gt | GtEq | Lt | LtEq => {
            // A date range answered by a coarser equality: `d BETWEEN '2019-09-01' AND
            // '2019-09-30'` ~ `strftime('%Y-%m', d) = '2019-09'`.
            if matches!(q.op, GtEq | LtEq)
                && matches!(f.op, Eq | StartsWith)
                && value_text(&f.rhs).is_some_and(|v| {
                    v.len() >= 4 && q.value.starts_with(v) && q.value.len() > v.len()
                })
            {
                return true;
            }
            let same_op = f.op == q.op;
            // A date bound against a year: `> 2010` ~ `>= '2011-01-01'` is not attempted; only the
            // same value and op match.
            same_op
                && value_text(&f.rhs).is_some_and(|v| v == q.value || prefixed(v, &q.value, "-"))
        }
        In => match &f.rhs {
            FilterValue::List(items) => items
                .iter()
                .any(|it| value_text(it).is_some_and(|v| v == q.value)),
            rhs => f.op == Eq && value_text(rhs).is_some_and(|v| v == q.value),
        },
    }
}

/// Equal normalized values: same text, the same number written differently (`'09'` = `9`), or the same noun in singular and plural (`posters`/`poster`).
fn values_equal(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    if let (Some(x), Some(y)) = (
        crate::sqlspec::canonical_number(a),
        crate::sqlspec::canonical_number(b),
    ) {
        // Numbers compare by value: '09' (a month as text) = 9.
        return x == y;
    }
    if a.len() > 3
        && b.len() > 3
        && a.chars().any(char::is_alphabetic)
        && singular(a) == singular(b)
    {
        return true;
    }
    // Demonyms and adjectives of single-word names: asian/asia, chinese/china, german/germany.
    let single = |s: &str| s.chars().all(char::is_alphabetic);
    if single(a) && single(b) {
        let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
        let shorter = a.chars().count().min(b.chars().count());
        return common >= 4 && common * 4 >= shorter * 3;
    }
    false
}

fn is_year(v: &str) -> bool {
    v.len() == 4 && v.bytes().all(|b| b.is_ascii_digit())
}

/// Whether an SQL filter equals one of the profile's `benign_filters`.
pub(super) fn is_benign(f: &Filter, rules: &CompiledRules) -> bool {
    !rules.benign.is_empty() && is_benign_keyed(f, &rules.dimension_key(&f.lhs), rules)
}

fn is_benign_keyed(f: &Filter, key: &str, rules: &CompiledRules) -> bool {
    rules.benign.iter().any(|b| {
        b.lhs_key == key
            && b.op == f.op
            && match f.op {
                FilterOp::IsNull | FilterOp::IsNotNull => true,
                _ => value_text(&f.rhs).is_some_and(|v| v == b.value),
            }
    })
}

/// (requested outputs no projection answers, projections nothing asked for). Only checked when
/// outputs were recognised; `SELECT *` answers everything and explains itself.
fn projection_alignment(
    question: &QuestionSpec,
    sql: &SqlSpec,
    rules: &CompiledRules,
) -> (Vec<String>, Vec<String>) {
    if question.outputs.is_empty()
        || sql
            .projections
            .iter()
            .any(|p| p.expr.ends_with('*') && p.aggregate.is_none())
    {
        return (Vec::new(), Vec::new());
    }
    let words_of = |p: &crate::sqlspec::Projection| -> Vec<String> {
        let mut words = name_words(&p.expr);
        if let Some(a) = &p.alias {
            words.extend(name_words(a));
        }
        for c in &p.columns {
            // A bare column projection's words are already there (only membership is asked).
            if *c != p.expr {
                words.extend(name_words(c));
            }
            // A mapped column adds the words of its target.
            if !rules.mappings.is_empty() {
                let mapped = rules.dimension_key(c);
                if mapped != name_key(c) {
                    words.extend(name_words(&mapped));
                }
            }
        }
        words
    };
    let proj_words: Vec<Vec<String>> = sql.projections.iter().map(words_of).collect();
    let output_words: Vec<(String, Vec<String>)> = question
        .outputs
        .iter()
        .map(|o| (rules.dimension_key(o), name_words(o)))
        .collect();
    let answers = |pw: &[String], (mapped, ow): &(String, Vec<String>)| {
        ow.iter().any(|w| pw.iter().any(|p| words_match(w, p))) || pw.contains(mapped)
    };
    let unmatched = question
        .outputs
        .iter()
        .zip(&output_words)
        .filter(|(_, o)| !proj_words.iter().any(|pw| answers(pw, o)))
        .map(|(o, _)| o.clone())
        .collect();
    let group_words: Vec<Vec<String>> = question.group_by.iter().map(|g| name_words(g)).collect();
    let extra = sql
        .projections
        .iter()
        .zip(&proj_words)
        .filter(|(p, pw)| {
            let explained = output_words.iter().any(|o| answers(pw, o))
                // An aggregate when the question asks for one (or a computation).
                || (p.is_aggregate() && !question.aggregations.is_empty())
                // A grouping dimension shown next to its aggregate.
                || group_words
                    .iter()
                    .any(|g| g.iter().all(|w| pw.iter().any(|p| words_match(w, p))))
                // Constants and CASE labels (`'yes'`) carry no column.
                || p.columns.is_empty();
            !explained
        })
        .map(|(p, _)| p.expr.clone())
        .collect();
    (unmatched, extra)
}

/// "the number of final tables" vs MAX(Final_Table_Made), ORDER BY Year_of_Work: a count
/// whose term names a numeric column the SQL aggregates, orders or groups by.
fn counted_by_a_numeric_column(qa: &super::QuestionAggregation, sql: &SqlSpec) -> bool {
    qa.func == AggFunc::Count
        && qa.column.as_deref().is_some_and(|c| {
            let cw = name_words(c);
            let numeric_uses = sql
                .aggregations
                .iter()
                .filter(|a| a.func != AggFunc::Count)
                .filter_map(|a| a.column.as_deref())
                .chain(sql.order_by.iter().map(|o| o.expr.as_str()))
                .chain(sql.group_by.iter().map(String::as_str));
            numeric_uses.into_iter().any(|u| {
                let uw = name_words(u);
                cw.iter().any(|w| uw.iter().any(|x| words_match(w, x)))
            })
        })
}

/// "How many views / comments did it get?" answered by a stored count the SQL returns as is
/// (`ViewCount`, `CommentCount`, `baseSetSize`, `views`): people accept it.
fn answered_by_a_stored_count(qa: &super::QuestionAggregation, sql: &SqlSpec) -> bool {
    qa.func == AggFunc::Count
        && sql.aggregations.is_empty()
        && sql.projections.iter().any(|p| {
            !p.is_aggregate()
                && p.columns.iter().any(|c| {
                    let c = c.to_ascii_lowercase();
                    ["count", "number", "size", "views", "total"]
                        .iter()
                        .any(|w| c.contains(w))
                        || qa.column.as_deref().is_some_and(|term| {
                            let term = crate::words::singular(term.trim());
                            term.len() >= 4 && c.contains(term.as_ref())
                        })
                })
        })
}

fn missing_aggregations(question: &QuestionSpec, sql: &SqlSpec) -> Vec<String> {
    let has = |func: &AggFunc| sql.aggregations.iter().any(|a| &a.func == func);
    let ordered = |dir: SortDir| sql.order_by.iter().any(|o| o.dir == dir);
    let division = sql.projections.iter().any(|p| p.expr.contains('/'));
    // Spider-style schemas name columns after aggregates ("Average", "Number_products",
    // "num_of_staff"): a column carrying the aggregate's word is what the question refers to.
    let column_named = |words: &[&str]| {
        let cols = sql
            .projections
            .iter()
            .flat_map(|p| p.columns.iter())
            .chain(sql.filters.iter().map(|f| &f.lhs))
            .chain(sql.order_by.iter().map(|o| &o.expr))
            .chain(sql.aggregations.iter().filter_map(|a| a.column.as_ref()));
        cols.into_iter().any(|c| {
            // The words are ASCII and none ends in `y`, so one that a word of the name equals
            // (lowercased, singular: a prefix of the word) is spelled inside the name: most
            // names are ruled out without splitting them.
            (!c.is_ascii() || words.iter().any(|w| contains_ignore_ascii_case(c, w)))
                && name_words(c).iter().any(|w| words.contains(&w.as_str()))
        })
    };
    let mut missing = Vec::new();
    for qa in &question.aggregations {
        let counted_column = counted_by_a_numeric_column(qa, sql);
        let stored_count = answered_by_a_stored_count(qa, sql);
        let named = counted_column
            || stored_count
            || match &qa.func {
                AggFunc::Count => column_named(&["number", "num", "count", "cnt"]),
                AggFunc::Avg => column_named(&["average", "avg", "mean"]),
                AggFunc::Sum => column_named(&["total", "sum"]),
                AggFunc::Max => column_named(&["max", "maximum", "highest"]),
                AggFunc::Min => column_named(&["min", "minimum", "lowest"]),
                AggFunc::Other(_) => false,
            };
        if named {
            continue;
        }
        let ok = match &qa.func {
            AggFunc::Count => {
                let present = has(&AggFunc::Count)
                    || sql
                        .aggregations
                        .iter()
                        .any(|a| a.func == AggFunc::Sum && a.column.is_none());
                let distinct_ok = !qa.distinct
                    || sql.distinct
                    || sql.aggregations.iter().any(|a| a.distinct)
                    || !sql.group_by.is_empty()
                    || sql.subqueries > 0;
                present && distinct_ok
            }
            AggFunc::Sum => has(&AggFunc::Sum),
            // An average written as a ratio of aggregates (`SUM(x) / COUNT(*)`,
            // `COUNT(a) * 1.0 / COUNT(DISTINCT b)`).
            AggFunc::Avg => {
                has(&AggFunc::Avg)
                    || (has(&AggFunc::Sum) && has(&AggFunc::Count))
                    || (division && !sql.aggregations.is_empty())
            }
            // Superlatives: the aggregate, an ordering, a window, or a subquery (`x = (SELECT
            // MAX(x) …)`, `(SELECT … ORDER BY x DESC LIMIT 1)`) whose inner ordering is not
            // part of the outer spec.
            AggFunc::Max => {
                has(&AggFunc::Max)
                    || ordered(SortDir::Desc)
                    || sql.window_functions
                    || sql.subqueries > 0
            }
            AggFunc::Min => {
                has(&AggFunc::Min)
                    || ordered(SortDir::Asc)
                    || sql.window_functions
                    || sql.subqueries > 0
            }
            AggFunc::Other(name) if name == COMPUTED => true,
            AggFunc::Other(name) if name == TOTAL => has(&AggFunc::Sum) || has(&AggFunc::Count),
            other => has(other),
        };
        if !ok {
            missing.push(question_aggregation_label(qa));
        }
    }
    missing
}

/// How a question-side aggregation reads in `details`: `count distinct(hero)`, `avg`.
pub fn question_aggregation_label(qa: &super::QuestionAggregation) -> String {
    let mut label = agg_name(&qa.func).to_string();
    if qa.distinct {
        label.push_str(" distinct");
    }
    if let Some(c) = &qa.column {
        label.push('(');
        label.push_str(c);
        label.push(')');
    }
    label
}

/// Lowercase name of an aggregate family.
pub fn agg_name(func: &AggFunc) -> &str {
    match func {
        AggFunc::Sum => "sum",
        AggFunc::Avg => "avg",
        AggFunc::Count => "count",
        AggFunc::Min => "min",
        AggFunc::Max => "max",
        AggFunc::Other(s) => s.as_str(),
    }
}

fn grouping(
    question: &QuestionSpec,
    sql: &SqlSpec,
    norm: &Normalization,
    rules: &CompiledRules,
) -> (Vec<String>, Vec<String>) {
    let group_keys: Vec<String> = sql
        .group_by
        .iter()
        .map(|g| rules.dimension_key(g))
        .collect();
    let dim_hits = |dim: &str, key: &str, raw: &str| -> bool {
        let dkey = rules.dimension_key(dim);
        if dkey.is_empty() {
            return false;
        }
        if key == dkey || key.contains(&dkey) {
            return true;
        }
        if matches!(dkey.as_str(), "year" | "month" | "day" | "week" | "quarter")
            && (raw.contains("strftime")
                || raw.contains("extract")
                || raw.contains("date_trunc")
                || raw.contains("date_part"))
        {
            return true;
        }
        let dw = name_words(dim);
        let gw = name_words(raw);
        dw.iter().all(|w| gw.iter().any(|g| words_match(w, g)))
    };
    let missing: Vec<String> = question
        .group_by
        .iter()
        .filter(|dim| {
            !sql.group_by
                .iter()
                .zip(&group_keys)
                .any(|(raw, key)| dim_hits(dim, key, raw))
        })
        .cloned()
        .collect();
    let argmax = (question.explicit_order || question.top_k.is_some())
        && sql.order_by.iter().any(|o| o.aggregate.is_some());
    // GROUP BY … HAVING: a per-group condition ("heroes with over 15 powers") needs the grouping.
    let having = sql
        .filters
        .iter()
        .any(|f| f.clause == crate::sqlspec::Clause::Having && f.depth == 0);
    let non_agg_keys: Vec<String> = sql
        .projections
        .iter()
        .filter(|p| !p.is_aggregate())
        .flat_map(|p| {
            let mut keys = vec![name_key(&p.expr)];
            if let Some(a) = &p.alias {
                keys.push(name_key(a));
            }
            keys.extend(p.columns.iter().map(|c| name_key(c)));
            keys
        })
        .collect();
    let unexplained: Vec<String> = sql
        .group_by
        .iter()
        .zip(&group_keys)
        .filter(|(raw, key)| {
            let raw_key = name_key(raw);
            let benign = norm.benign_group_by.contains(&raw_key);
            let required = norm.required_group_by && non_agg_keys.contains(&raw_key);
            let asked = question.group_by.iter().any(|dim| dim_hits(dim, key, raw));
            !(benign || required || asked || argmax || having)
        })
        .map(|(raw, _)| raw.clone())
        .collect();
    (missing, unexplained)
}

fn top_k_mismatch(question: &QuestionSpec, sql: &SqlSpec) -> Option<String> {
    let k = question.top_k?;
    match sql.limit {
        Some(limit) if limit != k => Some(format!("top {k} requested, LIMIT {limit}")),
        None if k > 1 && !sql.window_functions => Some(format!("top {k} requested, no LIMIT")),
        _ => None,
    }
}

/// Whether `needle` occurs in `haystack`, ASCII case ignored (no allocation).
fn contains_ignore_ascii_case(haystack: &str, needle: &str) -> bool {
    needle.is_empty()
        || haystack
            .as_bytes()
            .windows(needle.len())
            .any(|window| window.eq_ignore_ascii_case(needle.as_bytes()))
}
