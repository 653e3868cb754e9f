//! Shape checks: what the SQL's own form says, with no schema and no question — conditions
//! that cannot mean what they say. Both are `info`: they leave the deterministic verdict (and
//! so Φ) as it was and count through the correctness model (`stef::correctness`), which
//! weighs them by how often people call such queries wrong.
//!
//! | code | fires when | severity |
//! |---|---|---|
//! | `text_compared_with_number` | in SQLite, a text-valued expression — a text function's result (`strftime`, `substr`, `date`, `upper`, …), a concatenation, a cast to text — compared with a number (`strftime('%Y', birthday) = 1996`, `BETWEEN 1990 AND 2000`, `IN (10, 11)`): SQLite converts neither side, every number sorts before every text, so `=` is never true and `<` / `>` always false / true (arithmetic, `CAST(… AS INTEGER)` and columns convert, and are left alone) | info |
//! | `and_or_precedence` | an OR among whose operands is an AND without parentheses (`a AND b OR c`): AND binds first, so the OR's other branch is free of the AND's conditions | info |

use super::{CheckInput, push};
use crate::stef::{ErrorCategory, Finding, FindingCode, Severity};

/// Run the shape checks.
pub(super) fn shape_checks(input: &CheckInput<'_>, out: &mut Vec<Finding>) {
    let sqlite = input
        .dialect
        .is_some_and(|d| crate::sqlspec::canonical_dialect(d) == "sqlite");
    if sqlite {
        for comparison in &input.spec.text_number_comparisons {
            push(
                out,
                FindingCode::TextComparedWithNumber,
                Severity::Info,
                ErrorCategory::Value,
                format!(
                    "{} compares text with a number: SQLite converts neither, so they are never \
                     equal (every number sorts before every text)",
                    super::clip(comparison, 160)
                ),
            );
        }
    }
    if input.spec.mixed_and_or {
        push(
            out,
            FindingCode::AndOrPrecedence,
            Severity::Info,
            ErrorCategory::Operator,
            "AND and OR are mixed without parentheses: AND binds first, so the OR's other \
             branch drops the AND's conditions"
                .to_string(),
        );
    }
}
