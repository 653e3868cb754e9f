//! Execution accuracy (EX): do the prediction's rows equal the gold's rows?
//!
//! Two conventions, because the benchmarks disagree on what "equal" means:
//! - [`ExConvention::Bird`]: `set(pred_rows) == set(gold_rows)`; row order and duplicates are
//!   ignored, column order matters (BIRD's official evaluator).
//! - [`ExConvention::SpiderTestSuite`]: multiset equality of rows under some permutation of the
//!   columns; row order matters only when the gold SQL contains `ORDER BY` (the Spider test-suite
//!   evaluator's `result_eq`).
//!
//! Values compare as Python compares them (`507 == 507.0`, `'11' != 11`), see
//! [`crate::exec::SqlValue::key`].

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use std::hash::Hash;

use crate::exec::ResultSet;

/// Which benchmark's notion of result equality to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExConvention {
    /// BIRD: set equality of rows.
    #[default]
    Bird,
    /// Spider test-suite: multiset equality up to column permutation, ordered iff gold has ORDER BY.
    SpiderTestSuite,
}

impl ExConvention {
    /// Name used in row details.
    pub fn as_str(self) -> &'static str {
        match self {
            ExConvention::Bird => "bird",
            ExConvention::SpiderTestSuite => "spider_test_suite",
        }
    }
}

/// Compare two result sets under `convention`; `gold_sql` decides whether order matters for the
/// Spider convention.
pub fn results_match(
    gold: &ResultSet,
    pred: &ResultSet,
    convention: ExConvention,
    gold_sql: &str,
) -> bool {
    let g = gold.key_ref_rows();
    let p = pred.key_ref_rows();
    match convention {
        ExConvention::Bird => bird_equal(&g, &p),
        ExConvention::SpiderTestSuite => spider_equal(&g, &p, order_matters(gold_sql)),
    }
}

/// Spider test-suite rule: row order matters when the gold query text has `order by`.
pub fn order_matters(gold_sql: &str) -> bool {
    gold_sql.to_lowercase().contains("order by")
}

/// BIRD: `set(pred) == set(gold)`.
pub fn bird_equal<K: Eq + Hash>(gold: &[Vec<K>], pred: &[Vec<K>]) -> bool {
    let g: HashSet<&Vec<K>> = gold.iter().collect();
    let p: HashSet<&Vec<K>> = pred.iter().collect();
    g == p
}

fn multiset<'a, K: Eq + Hash>(
    rows: impl Iterator<Item = &'a Vec<K>>,
) -> HashMap<&'a Vec<K>, usize> {
    let mut m = HashMap::new();
    for r in rows {
        *m.entry(r).or_insert(0) += 1;
    }
    m
}

/// Spider test-suite `result_eq(gold, pred, order_matters)`.
pub fn spider_equal<K: Eq + Hash + Ord + Clone>(
    gold: &[Vec<K>],
    pred: &[Vec<K>],
    order_matters: bool,
) -> bool {
    if gold.is_empty() && pred.is_empty() {
        return true;
    }
    if gold.len() != pred.len() {
        return false;
    }
    let width = gold.first().map_or(0, Vec::len);
    if pred.first().map_or(0, Vec::len) != width {
        return false;
    }
    if gold.iter().chain(pred.iter()).any(|r| r.len() != width) {
        return false;
    }
    // Quick rejection: the multiset of each row's sorted values must agree.
    let sorted_row = |r: &Vec<K>| {
        let mut s = r.clone();
        s.sort();
        s
    };
    if order_matters {
        if gold
            .iter()
            .zip(pred.iter())
            .any(|(g, p)| sorted_row(g) != sorted_row(p))
        {
            return false;
        }
    } else {
        let gs: Vec<Vec<K>> = gold.iter().map(sorted_row).collect();
        let ps: Vec<Vec<K>> = pred.iter().map(sorted_row).collect();
        if multiset(gs.iter()) != multiset(ps.iter()) {
            return false;
        }
    }
    // Candidate columns of pred for each gold column: every value of the pred column occurs in
    // the gold column (necessary for any permutation that makes the multisets equal).
    let gold_col_sets: Vec<HashSet<&K>> = (0..width)
        .map(|i| gold.iter().filter_map(|r| r.get(i)).collect())
        .collect();
    let candidates: Vec<Vec<usize>> = gold_col_sets
        .iter()
        .map(|set| {
            (0..width)
                .filter(|&j| {
                    pred.iter()
                        .all(|r| r.get(j).is_some_and(|v| set.contains(v)))
                })
                .collect()
        })
        .collect();
    let gold_ms = multiset(gold.iter());
    let mut perm = Vec::with_capacity(width);
    let mut used = vec![false; width];
    search_permutation(
        &candidates,
        &mut perm,
        &mut used,
        &mut |perm: &[usize]| {
            let permuted: Vec<Vec<K>> = pred
                .iter()
                .map(|r| perm.iter().filter_map(|&j| r.get(j).cloned()).collect())
                .collect();
            if order_matters {
                permuted.as_slice() == gold
            } else {
                multiset(permuted.iter()) == gold_ms
            }
        },
    )
}

fn search_permutation(
    candidates: &[Vec<usize>],
    perm: &mut Vec<usize>,
    used: &mut [bool],
    check: &mut dyn FnMut(&[usize]) -> bool,
) -> bool {
    let i = perm.len();
    let Some(cands) = candidates.get(i) else {
        return check(perm);
    };
    for &j in cands {
        if used.get(j).copied().unwrap_or(true) {
            continue;
        }
        if let Some(u) = used.get_mut(j) {
            *u = true;
        }
        perm.push(j);
        let found = search_permutation(candidates, perm, used, check);
        perm.pop();
        if let Some(u) = used.get_mut(j) {
            *u = false;
        }
        if found {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::SqlValue;

    fn rs(rows: Vec<Vec<SqlValue>>) -> ResultSet {
        ResultSet {
            columns: vec![],
            rows,
        }
    }

    #[test]
    fn numbers_compare_by_value() {
        let g = rs(vec![vec![SqlValue::Integer(507)]]);
        let p = rs(vec![vec![SqlValue::Real(507.0)]]);
        assert!(results_match(&g, &p, ExConvention::Bird, "SELECT 1"));
        assert!(results_match(
            &g,
            &p,
            ExConvention::SpiderTestSuite,
            "SELECT 1"
        ));
        let t = rs(vec![vec![SqlValue::Text("507".into())]]);
        assert!(!results_match(&g, &t, ExConvention::Bird, "SELECT 1"));
    }

    #[test]
    fn bird_ignores_duplicates_and_order_but_not_columns() {
        use SqlValue::Integer as I;
        let g = rs(vec![vec![I(1), I(2)], vec![I(3), I(4)]]);
        let p = rs(vec![vec![I(3), I(4)], vec![I(1), I(2)], vec![I(1), I(2)]]);
        assert!(results_match(&g, &p, ExConvention::Bird, ""));
        let swapped = rs(vec![vec![I(2), I(1)], vec![I(4), I(3)]]);
        assert!(!results_match(&g, &swapped, ExConvention::Bird, ""));
        assert!(results_match(
            &g,
            &swapped,
            ExConvention::SpiderTestSuite,
            ""
        ));
        assert!(!results_match(&g, &p, ExConvention::SpiderTestSuite, ""));
    }

    #[test]
    fn spider_order_matters_only_with_order_by() {
        use SqlValue::Integer as I;
        let g = rs(vec![vec![I(1)], vec![I(2)]]);
        let p = rs(vec![vec![I(2)], vec![I(1)]]);
        assert!(results_match(
            &g,
            &p,
            ExConvention::SpiderTestSuite,
            "SELECT a FROM t"
        ));
        assert!(!results_match(
            &g,
            &p,
            ExConvention::SpiderTestSuite,
            "SELECT a FROM t ORDER BY a"
        ));
    }
}
