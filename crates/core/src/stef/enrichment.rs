//! Enrichment validation (stef.md §2.1): is the agent's reformulation Qe faithful to the user's
//! question Qu? Deterministic: both texts are reduced to constraint sets with the question-side
//! extractor ([`super::question::text_constraints`]) and compared.
//!
//! Constraints: filter values (with their comparison), aggregation families, grouping dimensions
//! and an explicit top-k.
//!
//! Rules:
//! - **absent** — no Qe (or an empty one).
//! - A Qu constraint is **dropped** when Qe neither states it (same value/op class, same family,
//!   same dimension, same k) nor mentions its value or dimension anywhere in its text. A
//!   superlative (MAX/MIN) is kept by an explicit ordering in Qe unless Qe asks for the opposite.
//! - A Qe constraint is **added** when Qu does not state it, unless it merely makes an implicit
//!   intent explicit, which is faithful:
//!   - a clarified value: its value (or a part of it) is already in Qu (`publisher_name =
//!     'Marvel Comics'` for "from Marvel Comics", `country = China` for "in China");
//!   - a clarified date: a date inside a year Qu names, or any date when Qu uses a relative time
//!     expression (last/this/next year|month|week|quarter, today, yesterday, recent);
//!   - a column mapping: dimensions are compared after Rapp column mappings (`region` ≡
//!     `RegionName`);
//!   - an explanatory definition: the constraint sits in a clause of the form `<subject> refers
//!     to | means | stands for | is defined as | indicates | represents | denotes <definition>`
//!     (either order), or `<multi-word subject> = <formula>` — e.g. BIRD evidence
//!     `non-carcinogenic molecules refers to label = '-'`. Definitions explain terms; a glossary
//!     entry about a term Qu does not use is not a constraint either (whether a definition
//!     becomes a *required filter* is decided by the question extractor: only when its subject
//!     is made of Qu's words, see [`super::question`]);
//!   - a restatement of a definition: the same constraint also stated by one of Qe's definitions;
//!   - an aggregation that spells out a computation Qu asks for (percentage, ratio, difference)
//!     or an ordering Qu implies (a superlative).
//! - Status: added and dropped → **drifted**; only added → **adds_constraints**; only dropped →
//!   **drops_constraints**; neither → **faithful**.

use crate::sqlspec::{AggFunc, FilterOp};

use super::align::agg_name;
use super::question::{
    COMPUTED, clauses_with_definitions, evidence_clauses, question_constraints, text_constraints,
};
use super::text::{
    QuestionTexts, contains_phrase, name_words, render_question_filter, words_match,
};
use super::{Enrichment, EnrichmentStatus, QuestionFilter, QuestionSpec, RuleProfile};

/// Compare Qu with Qe.
pub fn validate(question: &str, enriched: Option<&str>, profile: &RuleProfile) -> Enrichment {
    validate_texts(&QuestionTexts::new(question, enriched), profile)
}

/// [`validate`] from texts already clipped and lowercased (the scoring path builds them once
/// per event).
pub fn validate_texts(texts: &QuestionTexts<'_>, profile: &RuleProfile) -> Enrichment {
    let (Some(enriched), Some(qe_lower)) = (texts.enriched, texts.enriched_lower.as_deref()) else {
        return Enrichment::absent();
    };
    let question = texts.question;
    if crate::sqlspec::trimmed(enriched) == crate::sqlspec::trimmed(question) {
        return faithful();
    }
    let rules = profile.compiled();
    let qu = question_constraints(texts);
    let qu_lower = texts.question_lower.as_str();
    // Only asked about a date-like value Qe adds (rare): searched then, not per event.
    let relative_time = || RELATIVE_TIME.iter().any(|p| contains_phrase(qu_lower, p));

    // Qe constraints, clause by clause, remembering which come from explanatory definitions.
    // When Qe starts with Qu verbatim (question + hints, as BIRD's evidence is appended), Qu's
    // constraints are all stated and only the appended part is examined.
    let qu_included = texts.question_included;
    let mut qe = if qu_included {
        qu.clone()
    } else {
        QuestionSpec::default()
    };
    let mut explained_filters: Vec<bool> = vec![true; qe.filters.len()];
    let mut explained_aggs: Vec<bool> = vec![true; qe.aggregations.len()];
    let mut explained_groups: Vec<bool> = vec![true; qe.group_by.len()];
    for clause in evidence_clauses(texts) {
        // Definitions explain terms; whether their subject is in Qu or not (a glossary entry
        // about something else), they do not add constraints. Their constraints only matter
        // for recognising that a reformulation kept Qu's constraints.
        let definition = clause.definition.is_some();
        if definition && qu_included {
            continue;
        }
        let c = text_constraints(clause.text);
        for f in c.filters {
            if !qe.filters.contains(&f) {
                qe.filters.push(f);
                explained_filters.push(definition);
            }
        }
        for a in c.aggregations {
            if !qe.aggregations.iter().any(|x| x.func == a.func) {
                qe.aggregations.push(a);
                explained_aggs.push(definition);
            }
        }
        for g in c.group_by {
            if !qe.group_by.contains(&g) {
                qe.group_by.push(g);
                explained_groups.push(definition);
            }
        }
        qe.explicit_order |= c.explicit_order;
        if qe.top_k.is_none() {
            qe.top_k = c.top_k;
        }
    }

    let mut added = Vec::new();
    let mut dropped = Vec::new();
    let definition_filters: std::cell::OnceCell<Vec<QuestionFilter>> = std::cell::OnceCell::new();

    // Filters (nothing of Qu can be dropped when Qe contains it verbatim).
    for f in qu.filters.iter().filter(|_| !qu_included) {
        let kept = qe.filters.iter().any(|g| same_constraint(f, g))
            || (!f.value.is_empty() && contains_phrase(qe_lower, &f.value));
        if !kept {
            dropped.push(render_question_filter(f));
        }
    }
    for (f, explained) in qe.filters.iter().zip(&explained_filters) {
        let stated = qu.filters.iter().any(|g| same_constraint(f, g));
        if stated || *explained {
            continue;
        }
        let clarified_value = !f.value.is_empty()
            && (contains_phrase(qu_lower, &f.value)
                || qu.filters.iter().any(|g| {
                    g.value.len() >= 3
                        && (contains_phrase(&f.value, &g.value)
                            || contains_phrase(&g.value, &f.value))
                }));
        let clarified_date = is_date_like(&f.value)
            && (relative_time()
                || qu
                    .filters
                    .iter()
                    .any(|g| f.value.starts_with(&g.value) && g.value.len() == 4));
        // The same constraint spelled out by one of Qe's definitions ("label = '+' means
        // carcinogenic") elsewhere: a restatement of a definition is explained by it.
        let defined = || {
            definition_filters
                .get_or_init(|| {
                    clauses_with_definitions(enriched)
                        .into_iter()
                        .filter_map(|(_, parts)| parts)
                        .flat_map(|(_, definition)| text_constraints(definition).filters)
                        .collect()
                })
                .iter()
                .any(|g| same_constraint(f, g))
        };
        if !(clarified_value || clarified_date || defined()) {
            added.push(render_question_filter(f));
        }
    }

    // Aggregations.
    let qe_has = |func: &AggFunc| qe.aggregations.iter().any(|a| &a.func == func);
    let qu_has = |func: &AggFunc| qu.aggregations.iter().any(|a| &a.func == func);
    for a in &qu.aggregations {
        let kept = match &a.func {
            AggFunc::Max => qe_has(&AggFunc::Max) || (qe.explicit_order && !qe_has(&AggFunc::Min)),
            AggFunc::Min => qe_has(&AggFunc::Min) || (qe.explicit_order && !qe_has(&AggFunc::Max)),
            other => qe_has(other),
        };
        if !kept {
            dropped.push(format!("agg:{}", agg_name(&a.func)));
        }
    }
    let qu_computes = qu_has(&AggFunc::Other(COMPUTED.into()));
    for (a, explained) in qe.aggregations.iter().zip(&explained_aggs) {
        if qu_has(&a.func) || *explained {
            continue;
        }
        let implied = qu_computes
            || (matches!(a.func, AggFunc::Max | AggFunc::Min) && qu.explicit_order)
            || a.func == AggFunc::Other(COMPUTED.into()) && !qu.aggregations.is_empty();
        if !implied {
            added.push(format!("agg:{}", agg_name(&a.func)));
        }
    }

    // Grouping (dimensions compared through column mappings).
    let dims_match = |a: &str, b: &str| {
        rules.dimension_key(a) == rules.dimension_key(b) || {
            let (wa, wb) = (name_words(a), name_words(b));
            wa.iter().all(|x| wb.iter().any(|y| words_match(x, y)))
                || wb.iter().all(|x| wa.iter().any(|y| words_match(x, y)))
        }
    };
    for g in &qu.group_by {
        let kept = qe.group_by.iter().any(|h| dims_match(g, h)) || contains_phrase(qe_lower, g);
        if !kept {
            dropped.push(format!("group_by:{g}"));
        }
    }
    for (g, explained) in qe.group_by.iter().zip(&explained_groups) {
        let stated = qu.group_by.iter().any(|h| dims_match(g, h));
        if !(stated || *explained) {
            added.push(format!("group_by:{g}"));
        }
    }

    // Explicit top-k (k > 1; k = 1 comes from superlatives and is compared as MAX/MIN).
    match (qu.top_k.filter(|k| *k > 1), qe.top_k.filter(|k| *k > 1)) {
        (Some(a), Some(b)) if a != b => {
            dropped.push(format!("top_k:{a}"));
            added.push(format!("top_k:{b}"));
        }
        (Some(a), None) => dropped.push(format!("top_k:{a}")),
        (None, Some(b)) => added.push(format!("top_k:{b}")),
        _ => {}
    }

    let status = match (added.is_empty(), dropped.is_empty()) {
        (true, true) => EnrichmentStatus::Faithful,
        (false, true) => EnrichmentStatus::AddsConstraints,
        (true, false) => EnrichmentStatus::DropsConstraints,
        (false, false) => EnrichmentStatus::Drifted,
    };
    Enrichment {
        status,
        added,
        dropped,
    }
}

fn faithful() -> Enrichment {
    Enrichment {
        status: EnrichmentStatus::Faithful,
        added: Vec::new(),
        dropped: Vec::new(),
    }
}

const RELATIVE_TIME: &[&str] = &[
    "last year",
    "this year",
    "next year",
    "last month",
    "this month",
    "last week",
    "this week",
    "last quarter",
    "this quarter",
    "today",
    "yesterday",
    "recent",
    "recently",
    "ytd",
    "year to date",
    "current year",
];

/// Same constraint: same value with ops of one class (equality-like, lower bound, upper bound,
/// negation, null tests).
fn same_constraint(a: &QuestionFilter, b: &QuestionFilter) -> bool {
    if op_class(a.op) != op_class(b.op) {
        return false;
    }
    if a.value == b.value {
        return true;
    }
    // Equality-like values where one contains the other (`marvel` vs `marvel comics`).
    op_class(a.op) == 0
        && a.value.len() >= 3
        && b.value.len() >= 3
        && (contains_phrase(&a.value, &b.value) || contains_phrase(&b.value, &a.value))
}

fn op_class(op: FilterOp) -> u8 {
    // The operators' variants, matched by name in this function only.
    use FilterOp::*;
    match op {
        Eq | Contains | StartsWith | EndsWith | Like | In => 0,
        Gt | GtEq => 1,
        Lt | LtEq => 2,
        NotEq | NotLike | NotIn => 3,
        IsNull => 4,
        IsNotNull => 5,
    }
}

fn is_date_like(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() >= 7 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(q: &str, e: Option<&str>) -> Enrichment {
        validate(q, e, &RuleProfile::default())
    }

    #[test]
    fn absent_and_identical() {
        assert_eq!(
            status("How many heroes?", None).status,
            EnrichmentStatus::Absent
        );
        assert_eq!(
            status("How many heroes?", Some("  ")).status,
            EnrichmentStatus::Absent
        );
        assert_eq!(
            status("How many heroes?", Some("How many heroes?")).status,
            EnrichmentStatus::Faithful
        );
    }

    #[test]
    fn faithful_clarifications() {
        // Explicit dimension for a value already in Qu, grouping made explicit.
        let e = status(
            "Total spend in China per year",
            Some("Sum of TotalSpendUSD for Country = China, grouped by Year"),
        );
        assert_eq!(e.status, EnrichmentStatus::Faithful, "{e:?}");
        // BIRD-style evidence: definitions whose subject is in Qu.
        let e = status(
            "In the non-carcinogenic molecules, how many contain chlorine atoms?",
            Some(
                "In the non-carcinogenic molecules, how many contain chlorine atoms? non-carcinogenic molecules refers to label = '-'; chlorine atoms refers to element = 'cl'",
            ),
        );
        assert_eq!(e.status, EnrichmentStatus::Faithful, "{e:?}");
        // A relative date made concrete.
        let e = status(
            "Orders from last year",
            Some("Orders with order_date >= '2025-01-01' and order_date < '2026-01-01'"),
        );
        assert_eq!(e.status, EnrichmentStatus::Faithful, "{e:?}");
    }

    #[test]
    fn column_mappings_make_dimensions_equal() {
        let mut profile = RuleProfile::default();
        profile
            .column_mappings
            .insert("region".into(), "Territory".into());
        let e = validate(
            "Revenue per region",
            Some("Revenue grouped by Territory"),
            &profile,
        );
        assert_eq!(e.status, EnrichmentStatus::Faithful, "{e:?}");
        let e = validate(
            "Revenue per region",
            Some("Revenue grouped by Territory"),
            &RuleProfile::default(),
        );
        assert_eq!(e.status, EnrichmentStatus::Drifted, "{e:?}");
        // CamelCase physical names share words with the NL term even without a mapping.
        let e = validate(
            "Revenue per region",
            Some("Revenue grouped by RegionName"),
            &RuleProfile::default(),
        );
        assert_eq!(e.status, EnrichmentStatus::Faithful, "{e:?}");
    }

    #[test]
    fn adds_drops_and_drifts() {
        let e = status(
            "How many heroes are from Marvel Comics?",
            Some("How many heroes are from Marvel Comics with height above 200?"),
        );
        assert_eq!(e.status, EnrichmentStatus::AddsConstraints);
        assert_eq!(e.added, vec!["? > 200"]);
        let e = status(
            "How many heroes from Marvel Comics were created in 2010?",
            Some("How many heroes were created in 2010?"),
        );
        assert_eq!(e.status, EnrichmentStatus::DropsConstraints);
        assert_eq!(e.dropped, vec!["? = 'marvel comics'"]);
        let e = status(
            "What is the average height of heroes from Marvel Comics?",
            Some("What is the total weight of heroes from DC Comics?"),
        );
        assert_eq!(e.status, EnrichmentStatus::Drifted, "{e:?}");
        assert!(e.dropped.contains(&"agg:avg".to_string()));
        assert!(e.added.contains(&"agg:sum".to_string()));
        let e = status(
            "List the top 5 heroes by strength",
            Some("List the top 10 heroes by strength"),
        );
        assert_eq!(e.status, EnrichmentStatus::Drifted);
    }
}
