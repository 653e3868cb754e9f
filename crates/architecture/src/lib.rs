//! Nothing: this crate exists for its test, `tests/architecture.rs`, which reads the workspace's
//! sources (with `syn`) and manifests (with `toml`) and holds them to ARCHITECTURE.md. As its own
//! crate the check builds and links only those two, not the daemon it reads (rdkafka,
//! ClickHouse, the HTTP stack).
