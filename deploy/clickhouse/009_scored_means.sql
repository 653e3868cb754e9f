-- Coverage-aware hourly rollup: means over *scored* rows only, beside how many rows were
-- scored. A row is scored unless its status says the metric could not judge the SQL:
-- `sql_too_large`, `judge_error`, `gold_error`, `gold_unavailable`, `gold_parse_error` (the rule
-- of `RowStatus::is_scored`; a prediction that fails to execute stays scored as 0, as the
-- benchmarks define it). `evaluations_hourly.value_avg` (005) averages every row, so a BIRD
-- backfill's ESM with 365 of 432 gold queries unparseable read 0.10 instead of 0.66. Query:
--   SELECT hour, metric, avgIfMerge(value_avg) AS mean,
--          uniqIfMerge(scored) / uniqMerge(events) AS coverage
--   FROM evaluations_scored_hourly GROUP BY hour, metric
--
-- A table of its own, with a materialized view of its own: adding columns to
-- `evaluations_hourly` would break its view on 18.16 (a view must produce every column of its
-- target there), and dropping that view to recreate it would lose the inserts in between. The
-- INSERT below fills the table from the rows written before this migration; rows written while
-- it runs may be counted twice, so run `migrate` before starting the daemons (the deploy
-- order). NULL labels are stored as ''. Portable DDL (18.16 and current releases).
CREATE TABLE IF NOT EXISTS evaluations_scored_hourly
(
    hour DateTime,
    app_id String,
    agent_id String,
    agent_version String,
    model String,
    metric String,
    events AggregateFunction(uniq, String),
    scored AggregateFunction(uniqIf, String, UInt8),
    value_avg AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, app_id, agent_id, agent_version, model, metric)
SETTINGS index_granularity = 8192;

CREATE MATERIALIZED VIEW IF NOT EXISTS evaluations_scored_hourly_mv TO evaluations_scored_hourly AS
SELECT
    toStartOfHour(ts) AS hour,
    ifNull(app_id, '') AS app_id,
    ifNull(agent_id, '') AS agent_id,
    ifNull(agent_version, '') AS agent_version,
    ifNull(model, '') AS model,
    metric,
    uniqState(event_id) AS events,
    uniqIfState(event_id, toUInt8(status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS scored,
    avgIfState(value, toUInt8(status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS value_avg
FROM evaluations
GROUP BY hour, app_id, agent_id, agent_version, model, metric;

INSERT INTO evaluations_scored_hourly
SELECT
    toStartOfHour(ts) AS hour,
    ifNull(app_id, '') AS app_id,
    ifNull(agent_id, '') AS agent_id,
    ifNull(agent_version, '') AS agent_version,
    ifNull(model, '') AS model,
    metric,
    uniqState(event_id) AS events,
    uniqIfState(event_id, toUInt8(status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS scored,
    avgIfState(value, toUInt8(status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS value_avg
FROM evaluations
GROUP BY hour, app_id, agent_id, agent_version, model, metric;
