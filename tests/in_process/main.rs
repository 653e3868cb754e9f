//! Every integration test that starts no server of its own: one test binary, its tests run in
//! parallel threads. Scripted servers in this process (the OpenAI-compatible mock, the OTLP
//! receiver) and the `sqlgrade` binary run by the CLI tests are fine here; a real server
//! (Kafka, ClickHouse, a model, a browser), a process-wide setting (an environment variable, a
//! global `tracing` subscriber) or a measurement that must have the CPU to itself makes a test a
//! top-level `tests/*.rs` of its own, or a module of `tests/daemon/` (ARCHITECTURE.md, "Where to
//! add … a test"; `crates/architecture/tests/architecture.rs`, `test_groups_start_no_servers`).

#[path = "../support/mod.rs"]
mod support;

mod alert_backfill;
mod alert_replay;
mod alert_webhook;
mod breakdown;
mod calibrate_kappa;
mod cli_commands;
mod cli_judged_metrics;
mod deploy_image;
mod gold;
mod hostile_inputs;
mod judge_drift;
mod judge_estimates;
mod judge_llm;
mod judge_second_pass;
mod pipeline_flow;
mod report_html;
mod review_http;
mod stef;
mod telemetry_otlp;
