//! The core's integration tests, one binary: the SQL analysis on every real query of the shared
//! data (verbatim, hostile, rules), the grounded STEF checks on the expert labels, ts_ex's walk
//! and the Hybrid-EX fixtures. Each file below was once its own binary; none starts a server
//! or touches what the whole process shares, so they run in parallel threads. They depend on
//! nothing but the core (`support` finds the shared data).

mod support;

mod gold_llm_hybrid_fixtures;
mod sqlspec_corpus;
mod sqlspec_hostile;
mod sqlspec_real;
mod sqlspec_rules;
mod stef_grounded_labels;
mod ts_ex_walk;
