//! ESM+ intermediate representation: a small canonical query tree, and lowering from
//! `sqlparser`'s AST with scoped alias resolution (fix M4), join types (M1), IN lists (M7),
//! aliases without AS (rule 14), and a real boolean tree (esm_plus.md A14).
//!
//! Parse-time rules (11, 15, 19, 20) are applied here, as the reference engine does.
//!
//! [`tree`] holds the tree and the schema facts the rules read; [`lower`] builds the tree from
//! sqlparser's AST.

mod lower;
mod tree;

pub use lower::{LowerCtx, LowerError, MAX_DEPTH, canon_number, numeric_string, parse};
pub use tree::{CmpOp, Expr, FromItem, JoinKind, OrderKey, PlusSchema, Pred, Query, SetOp};
