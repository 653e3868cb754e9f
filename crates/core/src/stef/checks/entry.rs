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
    run_grounded(input).findings
}

/// What [`run_grounded`] found, with what the checks computed on the way that naming the
/// event's elements reuses instead of computing it again.
#[derive(Debug, Default)]
pub struct CheckRun {
    /// The findings, in check order.
    pub findings: Vec<Finding>,
    /// The question's grounding in the schema, when the grounded checks computed one.
    pub grounding: Option<Grounding>,
    /// Each of the SQL's references resolved through the catalogue, when the catalogue checks
    /// ran.
    pub(crate) resolved: Option<Vec<super::Resolved>>,
}

/// [`run`], and what the checks computed that the question type and the query's names reuse.
pub fn run_grounded(input: &CheckInput<'_>) -> CheckRun {
    let mut out = Vec::new();
    let mut grounded = None;
    let mut resolved = None;
    evidence_checks(input, &mut out);
    shape_checks(input, &mut out);
    intent_checks(input, &mut out);
    if let (Some(schema), Some(refs)) = (input.schema, input.spec.references.as_ref()) {
        resolved = Some(catalogue_checks(input, schema, refs, &mut out));
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
    CheckRun {
        findings: out,
        grounding: grounded,
        resolved,
    }
}
