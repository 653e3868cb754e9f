//! Test and benchmark support for sqlgrade — a dev-dependency, never part of the daemon.
//!
//! - [`data`]: the repository root and the shared benchmark data beside it;
//! - [`bin`]: the `sqlgrade` binary under test; [`cli`]: running it with a clean environment;
//! - [`events`]: real events built from the shared BIRD/Spider predictions, valid judge replies;
//! - [`servers`]: real ClickHouse (one server, or a replicated cluster with ZooKeeper) and tansu
//!   servers as child processes, the daemon as a child process, a Kafka producer, and the
//!   daemon-test harness;
//! - [`openai_mock`]: a scripted OpenAI-compatible server (delays, 429s, garbage);
//! - [`model_server`]: a real OpenAI-compatible server (llama.cpp) with a real small model;
//! - [`otlp`]: an OTLP/HTTP receiver;
//! - [`dashboard`]: the shipped Grafana queries, runnable against a server;
//! - [`verdict_labels`]: people's verdicts of `shared/data/labels` scored as line-rate rows
//!   (what the correctness model is fitted and measured on).

pub mod bin;
pub mod cli;
pub mod dashboard;
pub mod data;
pub mod events;
pub mod model_server;
pub mod openai_mock;
pub mod otlp;
pub mod rng;
pub mod servers;
pub mod verdict_labels;
