//! The entry point: every check that applies to one event, in order — the evidence checks, then
//! the catalogue and grounded checks when the event's schema is known (probes run later, at the edge).

use super::CheckInput;
use super::catalogue::catalogue_checks;
use super::evidence::evidence_checks;
use super::grounded::grounded_checks;
use super::intent::intent_checks;
use super::shape::shape_checks;
use crate::stef::grounding::{Grounding, ground_words};
use crate::stef::{ConfirmedBy, Finding, FindingCode};

/// Run every check that applies; findings in check order.
pub fn run(input: &CheckInput<'_>) -> Vec<Finding> {
    run_grounded(input).0
}

/// [`run`], and the question's grounding in the schema when the grounded checks computed one
/// (what the question type reuses instead of grounding the question again).
pub fn run_grounded(input: &CheckInput<'_>) -> (Vec<Finding>, Option<Grounding>) {
    let mut out = Vec::new();
    let mut grounded = None;
    evidence_checks(input, &mut out);
    shape_checks(input, &mut out);
    intent_checks(input, &mut out);
    if let (Some(schema), Some(refs)) = (input.schema, input.spec.references.as_ref()) {
        catalogue_checks(input, schema, refs, &mut out);
        let question_words = input.texts.words();
        let grounding = ground_words(input.texts, question_words, schema);
        grounded_checks(input, schema, refs, &grounding, question_words, &mut out);
        grounded = Some(grounding);
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
    (out, grounded)
}
