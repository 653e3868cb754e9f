//! ESM+ (esm_plus.md §2): the functional fixes M1–M8 and the 20 equivalence rules, applied as
//! canonicalising rewrites to gold and prediction alike, then a clause-by-clause comparison.
//!
//! Where the reference engine is known to be wrong, this follows the paper and the digest's
//! [D] recommendations: rule 1 maps MIN→ASC and MAX→DESC; rules 2, 3, 4, 5, 6, 17 require
//! UNIQUE *and* NOT NULL; rule 6 also needs a NOT NULL subquery column (A10); rules 13 and 16
//! only use inner joins (A4, A5); rule 18 keeps DISTINCT (A7); NOT BETWEEN becomes
//! `x < a OR x > b` (A8); rules run bottom-up to a fixpoint (A17). By default GROUP BY is
//! compared as a set and ORDER BY keeps a direction per key (A12, A13); `paper_compat`
//! restores the paper's ordered GROUP BY and single ORDER BY direction.
//!
//! Rules whose preconditions need UNIQUE/NOT NULL facts that the schema does not provide
//! (a `tables.json` schema without the SQLite file) are skipped and recorded.
//!
//! One file per step: [`options`] (settings and the outcome), [`matching`] (`esm_plus`: lower,
//! canonicalise, apply the rules, compare clause by clause), [`canon`] (canonical forms),
//! [`rules`] (the equivalence rules), [`walk`] (the tree walks they share).

mod canon;
mod matching;
mod options;
mod rules;
mod walk;

pub use matching::{canonical, compare, esm_plus};
pub use options::{EsmPlusOptions, EsmPlusOutcome, SkippedRule};
pub use rules::rule_names;
