//! STEF end to end: the paper's listings, the shared BIRD and Spider predictions, the checks
//! and the rule profiles, one test binary (each file below was its own).

#[path = "../support/mod.rs"]
mod support;

mod bird;
mod checks;
mod paper;
mod rules;
mod verdict_model;
