//! STEF end to end: the paper's listings, the shared BIRD and Spider predictions, the checks
//! and the rule profiles (each file below was once its own test binary).

mod bird;
mod checks;
mod paper;
mod rules;
mod verdict_model;
