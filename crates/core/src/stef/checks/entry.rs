//! The entry point: every check that applies to one event, in order — the evidence checks, then
//! the catalogue and grounded checks when the event's schema is known (probes run later, at the edge).

use super::CheckInput;
use super::catalogue::catalogue_checks;
use super::evidence::evidence_checks;
use super::grounded::grounded_checks;
use super::intent::intent_checks;
use super::shape::shape_checks;
use crate::stef::grounding::ground_words;
use crate::stef::{ConfirmedBy, Finding, FindingCode};

/// Run every check that applies; findings in check order.
pub fn run(input: &CheckInput<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    evidence_checks(input, &mut out);
    shape_checks(input, &mut out);
    intent_checks(input, &mut out);
    if let (Some(schema), Some(refs)) = (input.schema, input.spec.references.as_ref()) {
        catalogue_checks(input, schema, refs, &mut out);
        let question_words = input.texts.words();
        let grounding = ground_words(input.texts, question_words, schema);
        grounded_checks(input, schema, refs, &grounding, question_words, &mut out);
        // What the schema itself settles: a name it does not have, a literal its type cannot
        // hold.
        for f in out.iter_mut().filter(|f| {
            matches!(
                f.code,
                FindingCode::UnknownTable
                    | FindingCode::UnknownColumn
                    | FindingCode::ColumnNotInTable
                    | FindingCode::UnknownQualifier
                    | FindingCode::AmbiguousColumn
                    | FindingCode::LiteralTypeMismatch
            )
        }) {
            f.confirmed_by = Some(ConfirmedBy::Catalogue);
        }
    }
    out
}
