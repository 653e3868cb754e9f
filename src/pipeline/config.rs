//! `[pipeline]`: the topology's knobs (workers, channel capacity, size limits, the shutdown
//! deadline).

use std::num::NonZeroUsize;

use serde::{Deserialize, Serialize};

/// `[pipeline]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineConfig {
    /// Events scored concurrently (default: the number of CPUs).
    pub workers: NonZeroUsize,
    /// Capacity of each bounded channel between stages.
    pub channel_capacity: NonZeroUsize,
    /// Larger payloads are dead-lettered unread.
    pub max_event_bytes: usize,
    /// Larger SQL is not parsed (status `sql_too_large`).
    pub max_sql_bytes: usize,
    /// After SIGTERM/SIGINT, the longest the daemon takes to drain, flush, commit and exit,
    /// whatever is unreachable (broker, ClickHouse, the judge endpoint). Past it the process
    /// exits with status 3 and what was not written stays uncommitted (redelivered on the next
    /// start). The default fits Kubernetes' default 30 s grace period.
    pub shutdown_timeout_ms: u64,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            workers: std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN),
            channel_capacity: NonZeroUsize::new(1024).unwrap_or(NonZeroUsize::MIN),
            max_event_bytes: crate::event::DEFAULT_MAX_EVENT_BYTES,
            max_sql_bytes: crate::sqlspec::DEFAULT_MAX_SQL_BYTES,
            shutdown_timeout_ms: 25_000,
        }
    }
}

impl PipelineConfig {
    /// What is wrong with this section alone.
    pub fn problems(&self) -> Vec<String> {
        [
            ("max_event_bytes", self.max_event_bytes),
            ("max_sql_bytes", self.max_sql_bytes),
        ]
        .into_iter()
        .filter(|&(_, value)| value == 0)
        .map(|(key, _)| format!("pipeline.{key} must be at least 1"))
        .collect()
    }
}
