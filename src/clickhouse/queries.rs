//! The access paths of `evaluations`: the reads the project ships besides the dashboard, each
//! written to use the sorting key of migration 011 —
//! `(run_key, app_key, agent_key, version_key, metric, ts, event_id)` — so it reads a few
//! granules instead of whole month partitions. `benches/clickhouse_reads.rs` measures rows read
//! and latency of each, before and after the key, on 20 million rows; the dashboard's own
//! queries live in `deploy/grafana/`. Every query reads deduplicated rows (`FINAL`).

/// One run's rows (what `report` reads): the key's first column. Bind: the run id.
pub const RUN_ROWS: &str = "SELECT event_id, agent_id, agent_version, run_id, metric, value, \
     verdict, status, quality_tier, details, semantic_verdict, inclusion_probability, \
     revised_value, revised_verdict FROM evaluations FINAL WHERE run_key = ?";

/// The recent poor events of one agent version (live traffic, `run_key = ''`), newest first —
/// the drill-down from a score-drop alert. Bind: app, agent, agent version, earliest `ts`
/// (seconds since the epoch).
pub const RECENT_POOR_EVENTS: &str = "SELECT event_id, ts, value, status, quality_tier \
     FROM evaluations FINAL \
     WHERE run_key = '' AND app_key = ? AND agent_key = ? AND version_key = ? \
     AND metric = 'stef' AND ts >= toDateTime(?) AND quality_tier = 'poor' \
     ORDER BY ts DESC LIMIT 100";

/// Every row of one event, by id: the lookup table `evaluations_by_event` (ordered by
/// `event_id`) gives the key prefix and time of its rows, which narrow the detail read to the
/// granules that hold them. `GLOBAL IN` so that the same text runs through `Distributed` tables
/// on a cluster (the few lookup rows are gathered once and sent to the shards). Bind: the event
/// id, twice.
pub const EVENT_ROWS: &str = "SELECT metric, value, status FROM evaluations FINAL \
     WHERE event_id = ? AND (run_key, app_key, agent_key, version_key, ts) GLOBAL IN \
     (SELECT run_key, app_key, agent_key, version_key, ts FROM evaluations_by_event WHERE event_id = ?)";
