//! `esm_plus`: both queries lowered, canonicalised and rewritten by the rules to a fixpoint,
//! then compared clause by clause.

use std::collections::BTreeSet;

use super::canon::canon_query;
use super::options::{EsmPlusOptions, EsmPlusOutcome, SkippedRule};
use super::rules::{RuleCx, pass};
use crate::metrics::esm::ir::{self, LowerCtx, PlusSchema, Query};

/// ESM+ of `pred` against `gold`. `Err` when the gold query cannot be parsed.
pub fn esm_plus(
    schema: &PlusSchema,
    gold: &str,
    pred: &str,
    opts: EsmPlusOptions,
) -> Result<EsmPlusOutcome, ir::LowerError> {
    let mut skipped = BTreeSet::new();
    let (g, gold_rules) = canonical(schema, gold, opts, &mut skipped)?;
    let (p, pred_rules, pred_parse_error) = match canonical(schema, pred, opts, &mut skipped) {
        Ok((p, r)) => (Some(p), r, None),
        Err(e) => (None, Vec::new(), Some(e.0)),
    };
    let mismatched = match &p {
        Some(p) => compare(&g, p),
        None => vec!["parse"],
    };
    Ok(EsmPlusOutcome {
        verdict: mismatched.is_empty(),
        pred_parsed: p.is_some(),
        pred_parse_error,
        mismatched,
        gold_rules,
        pred_rules,
        skipped_rules: skipped.into_iter().collect(),
    })
}

/// Parse, rewrite with the enabled rules and canonicalise one query; returns the rules that
/// fired.
pub fn canonical(
    schema: &PlusSchema,
    sql: &str,
    opts: EsmPlusOptions,
    skipped: &mut BTreeSet<SkippedRule>,
) -> Result<(Query, Vec<u8>), ir::LowerError> {
    let mut lctx = LowerCtx {
        disabled: opts.disabled_rules,
        fired: Vec::new(),
    };
    let mut q = ir::parse(sql, schema, &mut lctx)?;
    let mut cx = RuleCx {
        schema,
        opts,
        fired: lctx.fired.iter().copied().collect(),
        skipped,
    };
    for _ in 0..10 {
        if !pass(&mut q, &mut cx) {
            break;
        }
    }
    canon_query(&mut q, opts);
    Ok((q, cx.fired.into_iter().collect()))
}

/// Clause-by-clause comparison of two canonical queries; the clauses that differ.
pub fn compare(g: &Query, p: &Query) -> Vec<&'static str> {
    let mut out = Vec::new();
    if g.select != p.select {
        out.push("select");
    }
    if g.distinct != p.distinct {
        out.push("distinct");
    }
    if g.from != p.from || g.joins != p.joins {
        out.push("from");
    }
    if g.on != p.on {
        out.push("join_conditions");
    }
    if g.where_ != p.where_ {
        out.push("where");
    }
    if g.group_by != p.group_by {
        out.push("group_by");
    }
    if g.having != p.having {
        out.push("having");
    }
    if g.order_by != p.order_by {
        out.push("order_by");
    }
    if g.limit != p.limit || g.offset != p.offset {
        out.push("limit");
    }
    if g.set_op != p.set_op {
        out.push("set_operation");
    }
    out
}

// ------------------------------------------------------------------------------------------
// Canonicalisation.
