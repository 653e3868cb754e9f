//! The four production normalization rules (STEF §5, stef.md §2.5). Each exempts an SQL construct
//! from penalty; which ones fired is recorded per event.
//!
//! 1. **Required GROUP BY** — `|P_agg| ≥ 1 ∧ |P_nonagg| ≥ 1 ∧ group_by ⊇ P_nonagg`: a GROUP BY that a
//!    mixed SELECT list makes mandatory is not an unrequested grouping. A non-aggregate projection
//!    is covered when GROUP BY names its expression, its alias, or every column it references
//!    (projections without columns, i.e. constants, are trivially covered).
//! 2. **Benign GROUP BY** — a GROUP BY column `g` is benign when a top-level WHERE filter
//!    `g (= | LIKE | ILIKE) literal` exists (after sqlspec normalization: `Eq`, `Contains`,
//!    `StartsWith`, `EndsWith`, `Like`, not under OR); benign columns leave grouping alignment.
//! 3. **Sensible default ORDER BY** — no explicit order requested ∧ every ORDER BY item is an
//!    aggregate ordered DESC or a GROUP BY dimension ordered ASC.
//! 4. **Safety LIMIT** — no top-k requested ∧ `λ ≥ λ_min` (`profile.limit_min`). A smaller LIMIT
//!    without a top-k request is reported as `suspicious_limit` for the verdict.
//!
//! The rules run on the SQL spec *before* any Rapp processing (ignore/benign filters, mappings):
//! normalization rules take precedence over application rules (STEF §5.6), so e.g. a filter on an
//! ignored dimension still makes its GROUP BY column benign.

use crate::sqlspec::{FilterOp, Projection, SortDir, SqlSpec};

use super::text::name_key;
use super::{NormalizationRule, QuestionSpec, RuleProfile};

/// Outcome of the normalization rules for one (question spec, SQL spec) pair.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Normalization {
    /// Rules that fired, in rule order.
    pub rules_fired: Vec<NormalizationRule>,
    /// Rule 1 held: the GROUP BY is structurally required by the SELECT list.
    pub required_group_by: bool,
    /// GROUP BY keys ([`name_key`]) exempted by rule 2.
    pub benign_group_by: Vec<String>,
    /// ORDER BY exempted by rule 3.
    pub default_order_by: bool,
    /// ORDER BY present, not requested and not exempted.
    pub unexplained_order: bool,
    /// LIMIT exempted by rule 4.
    pub safety_limit: bool,
    /// LIMIT below λ_min without a top-k request.
    pub suspicious_limit: Option<u64>,
}

/// Apply the four rules.
pub fn apply(sql: &SqlSpec, question: &QuestionSpec, profile: &RuleProfile) -> Normalization {
    let mut out = Normalization::default();
    let group_keys: Vec<String> = sql.group_by.iter().map(|g| name_key(g)).collect();

    // Rule 1.
    let (agg, non_agg): (Vec<&Projection>, Vec<&Projection>) =
        sql.projections.iter().partition(|p| p.is_aggregate());
    if !agg.is_empty()
        && !non_agg.is_empty()
        && non_agg.iter().all(|p| projection_covered(p, &group_keys))
    {
        out.required_group_by = true;
        out.rules_fired.push(NormalizationRule::RequiredGroupBy);
    }

    // Rule 2.
    for (g, key) in sql.group_by.iter().zip(&group_keys) {
        let _ = g;
        let constrained = sql.filters.iter().any(|f| {
            f.depth == 0
                && !f.in_disjunction
                && f.clause == crate::sqlspec::Clause::Where
                && matches!(
                    f.op,
                    FilterOp::Eq
                        | FilterOp::Contains
                        | FilterOp::StartsWith
                        | FilterOp::EndsWith
                        | FilterOp::Like
                )
                && f.rhs.is_literal()
                && name_key(&f.lhs) == *key
        });
        if constrained && !out.benign_group_by.contains(key) {
            out.benign_group_by.push(key.clone());
        }
    }
    if !out.benign_group_by.is_empty() {
        out.rules_fired.push(NormalizationRule::BenignGroupBy);
    }

    // Rule 3.
    if !sql.order_by.is_empty() && !question.explicit_order {
        let sensible = sql.order_by.iter().all(|item| {
            let key = name_key(&item.expr);
            let is_aggregate = item.aggregate.is_some()
                || sql.projections.iter().any(|p| {
                    p.is_aggregate()
                        && (name_key(&p.expr) == key
                            || p.alias.as_deref().is_some_and(|a| name_key(a) == key))
                });
            let is_dimension = group_keys.contains(&key);
            (is_aggregate && item.dir == SortDir::Desc)
                || (is_dimension && item.dir == SortDir::Asc)
        });
        if sensible {
            out.default_order_by = true;
            out.rules_fired.push(NormalizationRule::DefaultOrderBy);
        } else {
            out.unexplained_order = true;
        }
    }

    // Rule 4.
    if let Some(limit) = sql.limit
        && question.top_k.is_none()
    {
        if limit >= profile.limit_min {
            out.safety_limit = true;
            out.rules_fired.push(NormalizationRule::SafetyLimit);
        } else {
            out.suspicious_limit = Some(limit);
        }
    }
    out
}

fn projection_covered(p: &Projection, group_keys: &[String]) -> bool {
    if group_keys.contains(&name_key(&p.expr)) {
        return true;
    }
    if p.alias
        .as_deref()
        .is_some_and(|a| group_keys.contains(&name_key(a)))
    {
        return true;
    }
    // A projection over grouped columns only (`upper(name)`, constants) is determined per group.
    p.expr != "*" && p.columns.iter().all(|c| group_keys.contains(&name_key(c)))
}
