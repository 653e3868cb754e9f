//! The access paths of `evaluations`: the reads the project ships besides the dashboard, each
//! written to use the sorting key of migration 011 —
//! `(run_key, app_key, agent_key, version_key, metric, ts, event_id)` — so it reads a few
//! granules instead of whole month partitions. `benches/clickhouse_reads.rs` measures rows read
//! and latency of each, before and after the key, on 20 million rows; the dashboard's own
//! queries live in `deploy/grafana/`. Every query reads deduplicated rows (`FINAL`).

/// The columns of `evaluations` read back as a `stores::StoredRow` (a macro so that the queries
/// below can be built from it at compile time).
macro_rules! row_columns {
    () => {
        "event_id, toString(ts, 'UTC') AS ts_utc, app_id, agent_id, agent_version, model, \
         run_id, metric, value, verdict, status, details, quality_tier, filter_status, \
         semantic_verdict, confidence, confidence_tier, rules_fired, enrichment_status, judge, \
         judge_identity, selection, inclusion_probability, revised_value, revised_verdict, \
         p_correct, revised_p_correct, revised_correct, prompt_tokens, completion_tokens"
    };
}

/// The columns of `evaluations` read back as a `stores::StoredRow`.
pub const ROW_COLUMNS: &str = row_columns!();

/// One run's rows (what `report` and `audit` read): the key's first column. Bind: the run id.
pub const RUN_ROWS: &str = concat!(
    "SELECT ",
    row_columns!(),
    " FROM evaluations FINAL WHERE run_key = ?"
);

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
/// granules that hold them (a plain `IN`: 18.16 does not use the key for `GLOBAL IN`). On a
/// cluster `distributed_product_mode = 'local'` makes each shard read its own lookup table —
/// right, since both tables are sharded by `event_id` — and is a no-op on one server. Bind: the
/// event id, three times.
pub const EVENT_ROWS: &str = "SELECT metric, value, status FROM evaluations FINAL \
     WHERE event_id = ? AND (run_key, app_key, agent_key, version_key) IN \
     (SELECT run_key, app_key, agent_key, version_key FROM evaluations_by_event WHERE event_id = ?) \
     AND ts IN (SELECT ts FROM evaluations_by_event WHERE event_id = ?) \
     SETTINGS distributed_product_mode = 'local'";
