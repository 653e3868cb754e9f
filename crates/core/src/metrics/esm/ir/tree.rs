//! ESM+'s query tree (expressions, a boolean predicate tree, FROM items, set operations,
//! ORDER BY keys) and the schema facts (`PlusSchema`) its rules consult.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::catalogue::DbSchema;

/// A scalar expression.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Expr {
    /// A column, `table.column` lowercased (`@derived.column` for derived-table columns,
    /// `?.column` when it resolves nowhere).
    Col(String),
    /// `*` or `table.*`.
    Star(Option<String>),
    /// A number in canonical text form (`5`, `5.5`).
    Num(String),
    /// A string literal (case kept).
    Str(String),
    /// NULL.
    Null,
    /// A literal with its value stripped (value checking off).
    Value,
    /// MAX/MIN/COUNT/SUM/AVG.
    Agg {
        /// Lowercased function.
        func: String,
        /// DISTINCT inside the aggregate.
        distinct: bool,
        /// Argument (`Star(None)` for COUNT(*)).
        arg: Box<Expr>,
    },
    /// Any other function call.
    Func {
        /// Lowercased name (`cast:<type>` for CAST).
        name: String,
        /// Arguments.
        args: Vec<Expr>,
    },
    /// Binary arithmetic / concatenation.
    Bin {
        /// Operator text.
        op: String,
        /// Left.
        l: Box<Expr>,
        /// Right.
        r: Box<Expr>,
    },
    /// Unary minus on a non-literal.
    Neg(Box<Expr>),
    /// A scalar subquery.
    Sub(Box<Query>),
    /// A boolean expression used as a value.
    Pred(Box<Pred>),
    /// Anything else, by its lowercased SQL text.
    Other(String),
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `>`
    Gt,
    /// `<=`
    Le,
    /// `>=`
    Ge,
}

impl CmpOp {
    /// The operator that holds exactly when this one does not (rule 20).
    pub fn negated(self) -> CmpOp {
        match self {
            CmpOp::Eq => CmpOp::Ne,
            CmpOp::Ne => CmpOp::Eq,
            CmpOp::Lt => CmpOp::Ge,
            CmpOp::Ge => CmpOp::Lt,
            CmpOp::Gt => CmpOp::Le,
            CmpOp::Le => CmpOp::Gt,
        }
    }
}

/// A boolean condition tree.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Pred {
    /// Conjunction (flattened, children sorted once canonical).
    And(Vec<Pred>),
    /// Disjunction (flattened, children sorted once canonical).
    Or(Vec<Pred>),
    /// Negation of a compound condition.
    Not(Box<Pred>),
    /// `l op r`.
    Cmp {
        /// Operator.
        op: CmpOp,
        /// Left.
        l: Expr,
        /// Right.
        r: Expr,
    },
    /// `e [NOT] BETWEEN lo AND hi` (only when rule 19 is disabled).
    Between {
        /// Operand.
        e: Expr,
        /// Low.
        lo: Expr,
        /// High.
        hi: Expr,
        /// NOT BETWEEN.
        negated: bool,
    },
    /// `e [NOT] IN (list)` (only when rule 15 is disabled).
    InList {
        /// Operand.
        e: Expr,
        /// Items.
        list: Vec<Expr>,
        /// NOT IN.
        negated: bool,
    },
    /// `e [NOT] IN (subquery)`.
    InSub {
        /// Operand.
        e: Expr,
        /// Subquery.
        q: Box<Query>,
        /// NOT IN.
        negated: bool,
    },
    /// `e [NOT] LIKE pattern`.
    Like {
        /// Operand.
        e: Expr,
        /// Pattern.
        pat: Expr,
        /// NOT LIKE.
        negated: bool,
    },
    /// `e IS [NOT] NULL`.
    IsNull {
        /// Operand.
        e: Expr,
        /// IS NOT NULL.
        negated: bool,
    },
    /// `[NOT] EXISTS (q)`.
    Exists {
        /// Subquery.
        q: Box<Query>,
        /// NOT EXISTS.
        negated: bool,
    },
    /// A value used as a condition.
    Expr(Expr),
}

/// Join kinds (M1). `Inner` covers JOIN, INNER JOIN, CROSS JOIN and comma joins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum JoinKind {
    /// Inner or cross join.
    Inner,
    /// LEFT [OUTER] JOIN.
    Left,
    /// RIGHT [OUTER] JOIN.
    Right,
    /// FULL OUTER JOIN.
    Full,
}

/// A FROM item.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum FromItem {
    /// A base table (lowercased name).
    Table(String),
    /// A derived table.
    Sub(Box<Query>),
}

/// Set operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum SetOp {
    /// UNION
    Union,
    /// UNION ALL
    UnionAll,
    /// INTERSECT
    Intersect,
    /// EXCEPT
    Except,
}

/// One ORDER BY key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct OrderKey {
    /// Key expression.
    pub expr: Expr,
    /// DESC.
    pub desc: bool,
    /// Whether ASC/DESC was written.
    pub explicit: bool,
}

/// A query.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Default)]
pub struct Query {
    /// SELECT DISTINCT.
    pub distinct: bool,
    /// Select list.
    pub select: Vec<Expr>,
    /// FROM items in written order.
    pub from: Vec<FromItem>,
    /// Join kind before each FROM item after the first.
    pub joins: Vec<JoinKind>,
    /// ON conditions, as a list of conjuncts.
    pub on: Vec<Pred>,
    /// WHERE.
    pub where_: Option<Pred>,
    /// GROUP BY.
    pub group_by: Vec<Expr>,
    /// HAVING.
    pub having: Option<Pred>,
    /// ORDER BY.
    pub order_by: Vec<OrderKey>,
    /// LIMIT value.
    pub limit: Option<i64>,
    /// OFFSET value.
    pub offset: Option<i64>,
    /// Trailing set operation.
    pub set_op: Option<(SetOp, Box<Query>)>,
}

impl Query {
    /// Whether every join is inner (or there is at most one table).
    pub fn all_inner(&self) -> bool {
        self.joins.iter().all(|j| *j == JoinKind::Inner)
    }

    /// Base tables in FROM.
    pub fn base_tables(&self) -> Vec<&str> {
        self.from
            .iter()
            .filter_map(|f| match f {
                FromItem::Table(t) => Some(t.as_str()),
                FromItem::Sub(_) => None,
            })
            .collect()
    }

    /// The single base table when FROM is exactly one table.
    pub fn single_table(&self) -> Option<&str> {
        match self.from.as_slice() {
            [FromItem::Table(t)] => Some(t),
            _ => None,
        }
    }
}

/// Schema view for ESM+: columns per table and the constraint facts.
#[derive(Debug, Clone)]
pub struct PlusSchema {
    /// Lowercased table → lowercased columns.
    pub tables: BTreeMap<String, Vec<String>>,
    /// The loaded schema.
    pub db: DbSchema,
    /// FK (lowercased `t.c`) → referenced `t.c`.
    pub fk: HashMap<String, String>,
}

impl PlusSchema {
    /// Build from a database schema.
    pub fn new(db: &DbSchema) -> PlusSchema {
        PlusSchema {
            tables: db.lower_columns(),
            fk: db.fk_pairs().into_iter().collect(),
            db: db.clone(),
        }
    }

    /// Whether NOT NULL/UNIQUE facts beyond PKs are known (introspected from SQLite).
    pub fn has_constraints(&self) -> bool {
        self.db.constraints == crate::catalogue::ConstraintSource::Sqlite
    }

    /// UNIQUE fact for a `t.c` column: `Some(true)` established, `Some(false)` known false,
    /// `None` unknown (constraints unavailable).
    pub fn unique(&self, col: &str) -> Option<bool> {
        if self.db.is_unique(col) {
            Some(true)
        } else if self.has_constraints() {
            Some(false)
        } else {
            None
        }
    }

    /// NOT NULL fact, as [`PlusSchema::unique`].
    pub fn not_null(&self, col: &str) -> Option<bool> {
        if self.db.is_not_null(col) {
            Some(true)
        } else if self.has_constraints() {
            Some(false)
        } else {
            None
        }
    }

    /// Whether `col` is a single-column (non-composite) primary key.
    pub fn single_pk(&self, col: &str) -> bool {
        self.db.is_single_pk(col)
    }
}
