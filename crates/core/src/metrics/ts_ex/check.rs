//! `ts_ex`'s pure pieces: mutants of the gold query, its literals and tables, the verdict
//! types and the [`SuiteCheck`] seam (the module documentation of [`super`]).

use std::ops::ControlFlow;

use serde::Serialize;
use sqlparser::ast::{
    BinaryOperator, Distinct, Expr, FunctionArguments, JoinOperator, LimitClause, OrderByKind,
    OrderBySort, Query, Value, visit_relations,
};

use crate::catalogue::DbSchema;
use crate::exec::ResultSet;
use crate::metrics::ex::ExConvention;

use super::suspect;
use super::syntax::{each_expr, each_select, parse_query};

/// Apply the `target`th single mutation; `counter` counts the sites seen.
fn mutate(q: &mut Query, target: usize, counter: &mut usize) {
    let hit = |counter: &mut usize| {
        let now = *counter == target;
        *counter += 1;
        now
    };
    // Expressions: comparisons, AND / OR, aggregates, IS NULL, IN.
    each_expr(q, &mut |e| {
        let replacement = match e {
            Expr::BinaryOp { left, op, right } => {
                let flipped = match op {
                    BinaryOperator::Eq => Some(BinaryOperator::NotEq),
                    BinaryOperator::NotEq => Some(BinaryOperator::Eq),
                    BinaryOperator::Gt => Some(BinaryOperator::GtEq),
                    BinaryOperator::GtEq => Some(BinaryOperator::Gt),
                    BinaryOperator::Lt => Some(BinaryOperator::LtEq),
                    BinaryOperator::LtEq => Some(BinaryOperator::Lt),
                    _ => None,
                };
                if let Some(flipped) = flipped {
                    if hit(counter) {
                        *op = flipped;
                    }
                    None
                } else if matches!(op, BinaryOperator::And | BinaryOperator::Or) {
                    if hit(counter) {
                        Some((**left).clone())
                    } else if hit(counter) {
                        Some((**right).clone())
                    } else {
                        None
                    }
                } else {
                    None
                }
            }
            Expr::Function(func) => {
                let name = func.name.to_string().to_lowercase();
                let other = match name.as_str() {
                    "max" => Some("MIN"),
                    "min" => Some("MAX"),
                    "sum" => Some("AVG"),
                    "avg" => Some("SUM"),
                    _ => None,
                };
                if let Some(other) = other {
                    if hit(counter) {
                        func.name =
                            sqlparser::ast::ObjectName::from(vec![sqlparser::ast::Ident::new(
                                other,
                            )]);
                    }
                } else if name == "count"
                    && let FunctionArguments::List(list) = &mut func.args
                    && !list.args.iter().any(|a| {
                        matches!(
                            a,
                            sqlparser::ast::FunctionArg::Unnamed(
                                sqlparser::ast::FunctionArgExpr::Wildcard
                            )
                        )
                    })
                {
                    if hit(counter) {
                        list.duplicate_treatment = match list.duplicate_treatment {
                            Some(sqlparser::ast::DuplicateTreatment::Distinct) => None,
                            _ => Some(sqlparser::ast::DuplicateTreatment::Distinct),
                        };
                    } else if hit(counter) {
                        // COUNT(c) against COUNT(*): told apart only where c is NULL.
                        list.duplicate_treatment = None;
                        list.args = vec![sqlparser::ast::FunctionArg::Unnamed(
                            sqlparser::ast::FunctionArgExpr::Wildcard,
                        )];
                    }
                }
                None
            }
            Expr::IsNull(x) => hit(counter).then(|| Expr::IsNotNull(x.clone())),
            Expr::IsNotNull(x) => hit(counter).then(|| Expr::IsNull(x.clone())),
            Expr::InList { negated, .. } | Expr::InSubquery { negated, .. } => {
                if hit(counter) {
                    *negated = !*negated;
                }
                None
            }
            _ => None,
        };
        if let Some(r) = replacement {
            *e = r;
        }
    });
    // SELECTs: DISTINCT, join types.
    each_select(q, &mut |s| {
        if hit(counter) {
            s.distinct = match s.distinct {
                Some(Distinct::Distinct) => None,
                _ => Some(Distinct::Distinct),
            };
        }
        for twj in &mut s.from {
            for j in &mut twj.joins {
                let flipped = match &j.join_operator {
                    JoinOperator::Join(c) | JoinOperator::Inner(c) => {
                        Some(JoinOperator::LeftOuter(c.clone()))
                    }
                    JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => {
                        Some(JoinOperator::Join(c.clone()))
                    }
                    _ => None,
                };
                if let Some(flipped) = flipped
                    && hit(counter)
                {
                    j.join_operator = flipped;
                }
            }
        }
    });
    // The outermost ORDER BY and LIMIT.
    if let Some(order) = &mut q.order_by
        && let OrderByKind::Expressions(items) = &mut order.kind
    {
        for item in items {
            if hit(counter) {
                item.options.sort = match item.options.sort {
                    Some(OrderBySort::Desc) => Some(OrderBySort::Asc),
                    _ => Some(OrderBySort::Desc),
                };
            }
        }
    }
    if let Some(LimitClause::LimitOffset {
        limit: Some(Expr::Value(v)),
        ..
    }) = &mut q.limit_clause
        && let Value::Number(n, _) = &mut v.value
        && let Ok(k) = n.parse::<u64>()
        && hit(counter)
    {
        *n = (k + 1).to_string();
    }
}

/// Near-miss mutants of `sql`, each differing in one place, deduplicated, in site order
/// (at most `cap`). Empty when the query cannot be parsed.
pub fn mutants(sql: &str, cap: usize) -> Vec<String> {
    let Some(original) = parse_query(sql) else {
        return Vec::new();
    };
    let mut sites = 0usize;
    mutate(&mut original.clone(), usize::MAX, &mut sites);
    let base = original.to_string();
    let mut out: Vec<String> = Vec::new();
    for target in 0..sites {
        if out.len() >= cap {
            break;
        }
        let mut q = original.clone();
        let mut counter = 0;
        mutate(&mut q, target, &mut counter);
        let text = q.to_string();
        if text != base && !out.contains(&text) {
            out.push(text);
        }
    }
    out
}

/// A literal one of the queries compares with, as the generator should plant it.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// A number (its neighbours are planted too: just inside and outside a comparison).
    Number(f64),
    /// A string (for a LIKE pattern: the pattern with its wildcards filled in).
    Text(String),
}

/// The literals of a query (subqueries included), with the boundary neighbours of numbers
/// and LIKE patterns made concrete.
pub fn literals(sql: &str) -> Vec<Literal> {
    let Some(mut q) = parse_query(sql) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    each_expr(&mut q, &mut |e| {
        let Expr::Value(v) = e else {
            return;
        };
        match &v.value {
            Value::Number(n, _) => {
                if let Ok(x) = n.parse::<f64>() {
                    for y in [x, x - 1.0, x + 1.0] {
                        let l = Literal::Number(y);
                        if !out.contains(&l) {
                            out.push(l);
                        }
                    }
                }
            }
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => {
                let mut variants = vec![s.clone()];
                if s.contains('%') || s.contains('_') {
                    variants.push(s.replace('%', "").replace('_', "x"));
                    variants.push(s.replace('%', "zz").replace('_', "x"));
                }
                for t in variants {
                    let l = Literal::Text(t);
                    if !out.contains(&l) {
                        out.push(l);
                    }
                }
            }
            _ => {}
        }
    });
    out
}

/// The numbers of a query's literals and their neighbours: what the generator plants, and
/// what every range constraint admits ([`constraints::Rule::admits`]).
pub fn literal_numbers(sql: &str) -> Vec<f64> {
    literals(sql)
        .into_iter()
        .filter_map(|l| match l {
            Literal::Number(x) => Some(x),
            Literal::Text(_) => None,
        })
        .collect()
}

/// The lowercased names of the tables a query reads, in order of appearance (subqueries
/// anywhere included; a CTE's name where FROM reads it, too): every relation sqlparser's
/// visitor meets.
pub fn tables_read(sql: &str) -> Vec<String> {
    let Some(q) = parse_query(sql) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    let _ = visit_relations(&q, |name| {
        if let Some(last) = name.0.last() {
            let n = last
                .to_string()
                .trim_matches(['"', '`', '[', ']'])
                .to_lowercase();
            if !out.contains(&n) {
                out.push(n);
            }
        }
        ControlFlow::<()>::Continue(())
    });
    out
}

/// One side's result on a database, for people: the columns and the first rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShownResult {
    /// Column names.
    pub columns: Vec<String>,
    /// Up to [`SHOWN_ROWS`] rows, rendered.
    pub rows: Vec<Vec<String>>,
    /// Rows in the full result.
    pub row_count: usize,
}

/// Rows of a result shown in a counterexample.
pub const SHOWN_ROWS: usize = 10;

impl ShownResult {
    /// Render a result set.
    pub fn of(rs: &ResultSet) -> ShownResult {
        ShownResult {
            columns: rs.columns.clone(),
            rows: rs
                .rows
                .iter()
                .take(SHOWN_ROWS)
                .map(|r| r.iter().map(|v| v.to_string()).collect())
                .collect(),
            row_count: rs.rows.len(),
        }
    }
}

/// Which databases a suite is drawn from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SuiteMode {
    /// Only databases that keep every constraint of [`constraints::DbConstraints`] (`ts_ex`).
    Constrained,
    /// Any database of the schema (`ts_ex_strict`): primary keys unique, nothing else kept.
    Strict,
}

impl SuiteMode {
    /// The name stored in rows' details.
    pub fn as_str(self) -> &'static str {
        match self {
            SuiteMode::Constrained => "constrained",
            SuiteMode::Strict => "strict",
        }
    }
}

/// A database on which gold and prediction disagree, small enough to read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Counterexample {
    /// `INSERT` statements that build it on the schema (tables without rows omitted);
    /// truncated at a size cap, which `truncated` says.
    pub script: String,
    /// Whether the script was cut at the cap.
    pub truncated: bool,
    /// Rows in the database.
    pub rows: usize,
    /// The gold query's result there.
    pub gold: ShownResult,
    /// The prediction's result there, or its error.
    pub pred: Result<ShownResult, String>,
    /// The constraints it keeps that bear on its tables, described (constrained suites).
    pub assumed: Vec<String>,
    /// The database's constraints it breaks, described (strict suites: a counterexample that
    /// needs NULL keys or duplicate names says so; empty under constraints, by construction).
    pub violates: Vec<String>,
}

/// `ts_ex`'s verdict on one pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TsOutcome {
    /// Equal results on the real database (when there is one) and on every suite database.
    pub verdict: bool,
    /// Databases in the suite (the real one not counted).
    pub suite_size: usize,
    /// Mutants of the gold query generated, and how many the suite tells apart from it.
    pub mutants: usize,
    /// Mutants the suite distinguishes.
    pub mutants_killed: usize,
    /// Whether the real database was compared too.
    pub real_database: bool,
    /// The smallest distinguishing database, when not equivalent on a generated one.
    pub counterexample: Option<Counterexample>,
    /// Where the results differed: `real` or `suite`.
    pub differs_on: Option<&'static str>,
    /// The prediction's error on the real database (then nothing else was run).
    pub pred_error: Option<String>,
    /// Which databases the suite was drawn from.
    pub mode: SuiteMode,
    /// The constraints the suite kept on the tables it fills, described (empty when strict).
    pub assumptions: Vec<String>,
    /// Whether the constraints include what the real database's data shows (else the
    /// schema's and people's assumptions only).
    pub constraints_mined: bool,
    /// The counterexample hinges on a condition of the gold nobody asked for
    /// ([`suspect::gold_suspects`]): with the real database compared, the verdict is EX's there.
    pub gold_suspect: Option<suspect::GoldSuspect>,
}

/// Why a pair could not be judged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TsError {
    /// The gold query fails (on the real database or a generated one it must run on).
    #[error("the gold query fails: {0}")]
    Gold(String),
    /// Nothing to compare on (no schema tables the queries read).
    #[error("{0}")]
    Unavailable(String),
}

/// Runs `ts_ex` for a pair: builds (or reuses) the gold query's suite, executes both queries
/// on it and on the real database when there is one.
pub trait SuiteCheck: Send + Sync {
    /// The verdict under `convention`, on a suite drawn as `mode` says. `asked` is the
    /// question and its evidence (empty when unknown): a constrained suite's counterexample
    /// that hinges on a gold condition they never ask for falls back to EX's verdict.
    fn check(
        &self,
        db: &DbSchema,
        gold: &str,
        pred: &str,
        asked: &str,
        convention: ExConvention,
        mode: SuiteMode,
    ) -> Result<TsOutcome, TsError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutants_change_one_thing_each() {
        let m = mutants(
            "SELECT DISTINCT name FROM t JOIN u ON t.id = u.tid WHERE age > 30 AND city = 'X' ORDER BY age LIMIT 3",
            100,
        );
        for want in [
            "age >= 30",
            "WHERE city = 'X' ORDER",
            "WHERE age > 30 ORDER",
            "SELECT name FROM",
            "LEFT OUTER JOIN",
            "ORDER BY age DESC",
            "LIMIT 4",
            "city <> 'X'",
        ] {
            assert!(
                m.iter().any(|s| s.contains(want)),
                "no mutant with {want}: {m:#?}"
            );
        }
        assert!(m.iter().all(|s| s.contains("FROM t")));
        let agg = mutants("SELECT max(a), count(b), count(*) FROM t", 100);
        assert!(agg.iter().any(|s| s.contains("MIN(a)")), "{agg:?}");
        assert!(
            agg.iter().any(|s| s.contains("count(DISTINCT b)")),
            "{agg:?}"
        );
        assert!(
            agg.iter().any(|s| s.contains("max(a), count(*), count(*)")),
            "{agg:?}"
        );
        assert!(mutants("not sql", 10).is_empty());
    }

    #[test]
    fn literals_come_with_their_neighbours() {
        let l = literals(
            "SELECT a FROM t WHERE x > 5 AND name LIKE 'ab%' AND y IN (SELECT z FROM u WHERE w = 'q')",
        );
        for want in [
            Literal::Number(5.0),
            Literal::Number(4.0),
            Literal::Number(6.0),
            Literal::Text("ab%".into()),
            Literal::Text("ab".into()),
            Literal::Text("abzz".into()),
            Literal::Text("q".into()),
        ] {
            assert!(l.contains(&want), "{want:?} missing from {l:?}");
        }
        assert_eq!(
            tables_read("SELECT a FROM t JOIN u ON 1 WHERE b IN (SELECT c FROM V)"),
            ["t", "u", "v"]
        );
    }
}
