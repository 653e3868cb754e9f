//! Intent checks: the kind of answer the question asks for — a list of things, a count, the
//! most or least numerous — against the kind the SQL gives. No schema, no data: the question's
//! opening words and the SQL's outer SELECT. Each is `info` until people's labels show it right
//! often enough to change the verdict (the findings reference); as `info` it weighs through
//! the correctness model only.
//!
//! | code | fires when |
//! |---|---|
//! | `aggregate_for_list` | a list of things is asked ("which …", "list …", "name …", "what are …") and no quantity (how many, number, count, total, average, sum, percentage, ratio, …); every output of the SQL is an aggregate |
//! | `order_by_not_count` | the most or least numerous / common / frequent is asked (or the evidence writes `MAX(COUNT(…))` / `MIN(COUNT(…))`); the SQL orders by something and counts nothing |
//! | `limit_over_aggregate` | every output is an aggregate, without GROUP BY (one row), and the SQL still has ORDER BY with LIMIT: a ranking written over a single total |

use super::{CheckInput, contains_word, push};
use crate::sqlspec::AggFunc;
use crate::stef::text::{find_bytes, match_starts};
use crate::stef::{ErrorCategory, Finding, FindingCode, Severity};

/// Words that ask for a quantity: a question with one of them wants a number, not a list.
const QUANTITY_WORDS: [&str; 17] = [
    "how many",
    "how much",
    "number",
    "count",
    "total",
    "average",
    "avg",
    "sum",
    "percentage",
    "percent",
    "ratio",
    "proportion",
    "rate",
    "amount",
    "difference",
    "times",
    "mean",
];

/// Openings of a question that asks for a list of things.
const LIST_OPENINGS: [&str; 9] = [
    "which ",
    "list ",
    "name ",
    "what are ",
    "give the ",
    "show ",
    "identify ",
    "find the ",
    "enumerate ",
];

/// Whether a lowercased question asks for a list of things: it opens like one ("which …",
/// "list …", "what are …") and asks for no quantity.
pub(crate) fn asks_list(q: &str) -> bool {
    LIST_OPENINGS.iter().any(|o| q.starts_with(o))
        && !QUANTITY_WORDS.iter().any(|w| contains_word(q, w))
}

/// Whether a lowercased question asks for the most or least numerous / common / frequent
/// thing, or its evidence writes `MAX(COUNT(…))` / `MIN(COUNT(…))`. Cheap first: most
/// questions have no "most" or "least" at all.
fn asks_numerous(q: &str, evidence: Option<&str>) -> bool {
    const WHICH: [&str; 6] = [
        "numerous", "common", "frequent", "popular", "often", "times",
    ];
    let in_question = ["most ", "least ", "fewest "].iter().any(|m| {
        match_starts(q, m).any(|at| WHICH.iter().any(|w| q[at + m.len()..].starts_with(w)))
    });
    in_question
        || evidence.is_some_and(|e| {
            find_bytes(e.as_bytes(), b"count").is_some()
                && e.split_whitespace()
                    .collect::<String>()
                    .split("(count(")
                    .next()
                    .is_some_and(|before| before.ends_with("max") || before.ends_with("min"))
        })
}

/// SQL expressions as a finding's evidence writes them: `a, b`.
fn comma_list<'a>(exprs: impl Iterator<Item = &'a str>) -> String {
    exprs.collect::<Vec<_>>().join(", ")
}

/// Run the intent checks. The SQL's shape is looked at first: the question's words are read
/// only for a query whose shape could contradict them.
pub fn intent_checks(input: &CheckInput<'_>, out: &mut Vec<Finding>) {
    let spec = input.spec;
    let outputs_all_aggregates =
        !spec.projections.is_empty() && spec.projections.iter().all(|p| p.is_aggregate());
    if outputs_all_aggregates && asks_list(&input.texts.question_lower) {
        push(
            out,
            FindingCode::AggregateForList,
            Severity::Info,
            ErrorCategory::Attribute,
            format!(
                "a list is asked for; the SQL returns only {}",
                comma_list(spec.projections.iter().map(|p| p.expr.as_str()))
            ),
        );
    }
    if !spec.order_by.is_empty()
        && !spec.aggregations.iter().any(|a| a.func == AggFunc::Count)
        && asks_numerous(
            &input.texts.question_lower,
            input.texts.enriched_lower.as_deref(),
        )
    {
        push(
            out,
            FindingCode::OrderByNotCount,
            Severity::Info,
            ErrorCategory::Function,
            format!(
                "the most or least numerous is asked for; the SQL orders by {} and counts nothing",
                comma_list(spec.order_by.iter().map(|o| o.expr.as_str()))
            ),
        );
    }
    if outputs_all_aggregates
        && spec.group_by.is_empty()
        && !spec.order_by.is_empty()
        && spec.limit.is_some()
        && !spec.set_operations
    {
        push(
            out,
            FindingCode::LimitOverAggregate,
            Severity::Info,
            ErrorCategory::Clause,
            "ORDER BY … LIMIT over one aggregated row (no GROUP BY): the ranking does nothing"
                .into(),
        );
    }
}
