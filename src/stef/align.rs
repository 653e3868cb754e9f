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
//! 6. Binary matches: projections (every requested output shares a word with some projection,
//!    `*` matches all; no outputs recognised → match), aggregations (every requested function is
//!    present — COUNT also as a conditional SUM, AVG also as SUM with COUNT or a division, MAX/MIN
//!    also as ORDER BY DESC/ASC, DISTINCT counts need a DISTINCT or a grouping; computed
//!    percentages/ratios accept anything), grouping (every requested dimension grouped, and every
//!    GROUP BY column justified by the question, rule 1, rule 2, or an argmax pattern: GROUP BY with
//!    ORDER BY an aggregate when the question asks for a superlative/top-k).

use crate::sqlspec::{AggFunc, Filter, FilterOp, FilterValue, SortDir, SqlSpec};

use super::normalize::{self, Normalization};
use super::question::COMPUTED;
use super::rules::CompiledRules;
use super::text::{
    contains_phrase, name_key, name_words, render_filter, render_question_filter, value_text,
    words_match,
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
        match (hit, near) {
            (Some(i), _) => {
                used[i] = true;
                matched += 1;
                out.matched.push(format!(
                    "{} ~ {}",
                    render_question_filter(q),
                    render_filter(sql_filters[i])
                ));
            }
            (None, Some(i)) => out.mismatched.push(format!(
                "{} vs {}",
                render_question_filter(q),
                render_filter(sql_filters[i])
            )),
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
            benign: is_benign(f, &sql_keys[i], rules),
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

    out.unmatched_outputs = unmatched_outputs(question, sql, rules);
    out.projections_match = out.unmatched_outputs.is_empty();
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

/// Dimensions agree when keys are equal or one is the year idiom over the other
/// (`yearorderdate` vs `orderdate`).
fn dims_agree(q: &str, s: &str) -> bool {
    q == s
        || s.strip_prefix("year").is_some_and(|rest| rest == q)
        || q.strip_prefix("year").is_some_and(|rest| rest == s)
}

/// Whether an SQL filter satisfies a required filter's op and value.
fn compatible(q: &QuestionFilter, f: &Filter) -> bool {
    use FilterOp::*;
    match q.op {
        IsNull | IsNotNull => f.op == q.op,
        Eq | Contains | StartsWith | EndsWith | Like => match (&f.op, &f.rhs) {
            (Eq, rhs) => value_text(rhs).is_some_and(|v| v == q.value),
            (In, FilterValue::List(items)) => items
                .iter()
                .any(|it| value_text(it).is_some_and(|v| v == q.value)),
            (Contains | StartsWith | EndsWith | Like, rhs) => value_text(rhs).is_some_and(|v| {
                v == q.value
                    || (v.chars().count() >= 3 && contains_phrase(&q.value, v))
                    || (q.op != Eq && contains_phrase(v, &q.value))
                    // A date/year prefix: LIKE '2012%' answers 2012, LIKE '2012-01%' answers 2012-01.
                    || (f.op == StartsWith && q.value.starts_with(v))
            }),
            // A year as a date range: `d >= '2012-01-01'` (the paired upper bound is the other half).
            (GtEq, rhs) if is_year(&q.value) => value_text(rhs)
                .is_some_and(|v| v == q.value || v.starts_with(&format!("{}-01-01", q.value))),
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
            let same_op = f.op == q.op;
            // A date bound against a year: `> 2010` ~ `>= '2011-01-01'` is not attempted; only the
            // same value and op match.
            same_op
                && value_text(&f.rhs)
                    .is_some_and(|v| v == q.value || v.starts_with(&format!("{}-", q.value)))
        }
        In => match &f.rhs {
            FilterValue::List(items) => items
                .iter()
                .any(|it| value_text(it).is_some_and(|v| v == q.value)),
            rhs => f.op == Eq && value_text(rhs).is_some_and(|v| v == q.value),
        },
    }
}

fn is_year(v: &str) -> bool {
    v.len() == 4 && v.bytes().all(|b| b.is_ascii_digit())
}

fn is_benign(f: &Filter, key: &str, rules: &CompiledRules) -> bool {
    rules.benign.iter().any(|b| {
        b.lhs_key == key
            && b.op == f.op
            && match f.op {
                FilterOp::IsNull | FilterOp::IsNotNull => true,
                _ => value_text(&f.rhs).is_some_and(|v| v == b.value),
            }
    })
}

fn unmatched_outputs(question: &QuestionSpec, sql: &SqlSpec, rules: &CompiledRules) -> Vec<String> {
    if question.outputs.is_empty()
        || sql
            .projections
            .iter()
            .any(|p| p.expr.ends_with('*') && p.aggregate.is_none())
    {
        return Vec::new();
    }
    let mut proj_words: Vec<String> = Vec::new();
    for p in &sql.projections {
        proj_words.extend(name_words(&p.expr));
        if let Some(a) = &p.alias {
            proj_words.extend(name_words(a));
        }
        for c in &p.columns {
            proj_words.extend(name_words(c));
            proj_words.extend(name_words(&rules.dimension_key(c)));
        }
    }
    question
        .outputs
        .iter()
        .filter(|o| {
            let mapped = rules.dimension_key(o);
            let words = name_words(o);
            let hit = words
                .iter()
                .any(|w| proj_words.iter().any(|p| words_match(w, p)))
                || proj_words.contains(&mapped);
            !hit
        })
        .cloned()
        .collect()
}

fn missing_aggregations(question: &QuestionSpec, sql: &SqlSpec) -> Vec<String> {
    let has = |func: &AggFunc| sql.aggregations.iter().any(|a| &a.func == func);
    let ordered = |dir: SortDir| sql.order_by.iter().any(|o| o.dir == dir);
    let division = sql.projections.iter().any(|p| p.expr.contains('/'));
    let mut missing = Vec::new();
    for qa in &question.aggregations {
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
            AggFunc::Avg => {
                has(&AggFunc::Avg) || (has(&AggFunc::Sum) && (has(&AggFunc::Count) || division))
            }
            AggFunc::Max => has(&AggFunc::Max) || ordered(SortDir::Desc) || sql.window_functions,
            AggFunc::Min => has(&AggFunc::Min) || ordered(SortDir::Asc) || sql.window_functions,
            AggFunc::Other(name) if name == COMPUTED => true,
            other => has(other),
        };
        if !ok {
            let mut label = agg_name(&qa.func).to_string();
            if qa.distinct {
                label.push_str(" distinct");
            }
            if let Some(c) = &qa.column {
                label.push('(');
                label.push_str(c);
                label.push(')');
            }
            missing.push(label);
        }
    }
    missing
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
            !(benign || required || asked || argmax)
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
