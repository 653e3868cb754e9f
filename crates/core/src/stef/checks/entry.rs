//! The entry point: every check that applies to one event, in order — the evidence checks, then
//! the catalogue and grounded checks when the event's schema is known (probes run later, at the edge).

use super::CheckInput;
use super::catalogue::catalogue_checks;
use super::evidence::evidence_checks;
use super::grounded::grounded_checks;
use crate::stef::Finding;
use crate::stef::grounding::ground;

/// Run every check that applies; findings in check order.
pub fn run(input: &CheckInput<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    evidence_checks(input, &mut out);
    if let (Some(schema), Some(refs)) = (input.schema, input.spec.references.as_ref()) {
        catalogue_checks(input, schema, refs, &mut out);
        grounded_checks(input, schema, refs, &ground(input.texts, schema), &mut out);
    }
    out
}
