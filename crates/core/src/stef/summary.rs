//! A readable summary of an SQL spec ([`SqlSummary`]): what the line-rate row stores under
//! `details.sql` for drill-down, and what the correctness model reads of the query's shape
//! (`correctness::features`), so that a row read back gives the same features as the row
//! written.

use serde::{Deserialize, Serialize};

use super::{align, text};
use crate::sqlspec::SqlSpec;

/// A readable summary of the SQL spec, stored in the row's `details`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SqlSummary {
    /// Dialect that parsed the SQL.
    pub dialect: String,
    /// Projections (`expr` or `expr AS alias`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub projections: Vec<String>,
    /// Aggregations (`count(distinct molecule_id)`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub aggregations: Vec<String>,
    /// Filters (`lhs op rhs`, HAVING/depth/OR marked).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<String>,
    /// GROUP BY.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub group_by: Vec<String>,
    /// ORDER BY (`expr asc|desc`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub order_by: Vec<String>,
    /// LIMIT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// SELECT DISTINCT.
    pub distinct: bool,
    /// Tables referenced.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tables: Vec<String>,
    /// Nested subqueries walked.
    pub subqueries: usize,
    /// Set operations present.
    pub set_operations: bool,
    /// Window functions present.
    pub window_functions: bool,
}

impl SqlSummary {
    /// Summarize a spec.
    pub fn of(spec: &SqlSpec) -> SqlSummary {
        let agg = |a: &crate::sqlspec::Aggregation| {
            let name = align::agg_name(&a.func);
            let mut s = String::with_capacity(name.len() + a.arg.len() + 11);
            s.push_str(name);
            s.push('(');
            if a.distinct {
                s.push_str("distinct ");
            }
            s.push_str(&a.arg);
            s.push(')');
            s
        };
        SqlSummary {
            dialect: spec.dialect.clone(),
            projections: spec
                .projections
                .iter()
                .map(|p| match &p.alias {
                    Some(a) => [p.expr.as_str(), " as ", a].concat(),
                    None => p.expr.clone(),
                })
                .collect(),
            aggregations: spec.aggregations.iter().map(agg).collect(),
            filters: spec
                .filters
                .iter()
                .map(|f| {
                    let mut s = text::render_filter(f);
                    if f.clause == crate::sqlspec::Clause::Having {
                        s.push_str(" [having]");
                    }
                    if f.in_disjunction {
                        s.push_str(" [or]");
                    }
                    if f.depth > 0 {
                        s.push_str(" [depth ");
                        s.push_str(&f.depth.to_string());
                        s.push(']');
                    }
                    s
                })
                .collect(),
            group_by: spec.group_by.clone(),
            order_by: spec
                .order_by
                .iter()
                .map(|o| {
                    let dir = match o.dir {
                        crate::sqlspec::SortDir::Asc => "asc",
                        crate::sqlspec::SortDir::Desc => "desc",
                    };
                    [o.expr.as_str(), " ", dir].concat()
                })
                .collect(),
            limit: spec.limit,
            distinct: spec.distinct,
            tables: spec.tables.clone(),
            subqueries: spec.subqueries,
            set_operations: spec.set_operations,
            window_functions: spec.window_functions,
        }
    }
}
