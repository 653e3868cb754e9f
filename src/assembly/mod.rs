//! Wiring a run from a [`Config`]: source, sink, judge, scorer — the one place `run`,
//! `backfill` and `score` build their components.
//!
//! Every component takes its own config section; a misconfigured one is a [`BuildError`] with
//! the reason, never silently replaced by something else.
//!
//! [`components`] builds each component from its section (the one place that dispatches on a
//! source's, sink's or judge's kind: the kinds live in different layers); [`pipeline`] wires a
//! source, a sink and a scorer into the one pipeline `run` and `backfill` share (a mode, not a
//! copy: alerts, the second pass, telemetry); [`second_pass`] wires the LLM-judged pass;
//! [`daemon`] joins everything `sqlgrade run` needs around that pipeline and bounds its
//! shutdown; [`error`] says why a build failed.

mod components;
mod daemon;
mod error;
mod pipeline;
mod second_pass;

pub use components::{
    build_durable_cache, build_judge, build_llm_client_for, build_profiles, build_scorer,
    build_source, build_source_with_health,
};
pub use daemon::Daemon;
pub use error::BuildError;
pub use pipeline::{
    AssembledPipeline, MAX_RECORDED_ALERTS, RunMode, TELEMETRY_GRACE, assemble_pipeline,
    finish_evaluations, finish_telemetry,
};
pub use second_pass::build_second_pass;
