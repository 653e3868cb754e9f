//! Small helpers over sqlparser's AST that every reader of it needs — the SQL-side spec
//! (`sqlspec::walk`) and ESM+'s lowering (`metrics::esm::ir`) — written once: a join's
//! constraint, an object name's last identifier. `ts_ex` walks with sqlparser's derived
//! visitor (feature `visitor`), which enters every node kind.
//!
//! The ports that mirror a reference script keep their own traversal on purpose: Spider's
//! `process_sql.py` works on tokens, not on sqlparser's AST (`metrics::esm::spider`), and
//! ETM's tree builder reproduces sqlglot's node shapes and its refusals case by case
//! (`metrics::etm::build`).

use sqlparser::ast::{Ident, JoinConstraint, JoinOperator, ObjectName, ObjectNamePart};

/// The constraint (`ON …`, `USING (…)`, natural, none) of a join, for every join kind that has
/// one.
pub fn join_constraint(op: &JoinOperator) -> Option<&JoinConstraint> {
    match op {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c)
        | JoinOperator::CrossJoin(c)
        | JoinOperator::Semi(c)
        | JoinOperator::LeftSemi(c)
        | JoinOperator::RightSemi(c)
        | JoinOperator::Anti(c)
        | JoinOperator::LeftAnti(c)
        | JoinOperator::RightAnti(c)
        | JoinOperator::StraightJoin(c)
        | JoinOperator::AsOf { constraint: c, .. } => Some(c),
        _ => None,
    }
}

/// The last part of an object name when it is an identifier (`main.Schools` → `Schools`).
pub fn last_identifier(name: &ObjectName) -> Option<&Ident> {
    match name.0.last() {
        Some(ObjectNamePart::Identifier(ident)) => Some(ident),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use sqlparser::ast::{SetExpr, Statement, TableFactor};
    use sqlparser::dialect::SQLiteDialect;
    use sqlparser::parser::Parser;

    use super::*;

    #[test]
    fn joins_and_names() {
        let sql = "SELECT 1 FROM main.Schools AS s LEFT JOIN t ON s.id = t.id CROSS JOIN u";
        let Statement::Query(query) = Parser::parse_sql(&SQLiteDialect {}, sql).unwrap().remove(0)
        else {
            panic!("a query")
        };
        let SetExpr::Select(select) = *query.body else {
            panic!("a select")
        };
        let from = &select.from[0];
        let TableFactor::Table { name, .. } = &from.relation else {
            panic!("a table")
        };
        assert_eq!(last_identifier(name).unwrap().value, "Schools");
        let on = join_constraint(&from.joins[0].join_operator).unwrap();
        assert!(matches!(on, JoinConstraint::On(_)));
        let cross = join_constraint(&from.joins[1].join_operator).unwrap();
        assert!(matches!(cross, JoinConstraint::None));
    }
}
