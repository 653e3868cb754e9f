-- Hourly rollup per (app, agent, agent_version, model, metric), fed by a plain materialized
-- view on every insert into `evaluations`. Aggregate states so that the numbers survive
-- redelivery: `events` and the tier counts are distinct event_id counts (uniq), so an event
-- redelivered after a crash is not counted twice; `value_avg` is the mean Φ (STEF, 0-100) or
-- the mean accuracy (gold metrics, 0-1). Query with the -Merge combinators, e.g.
--   SELECT hour, agent_version, uniqMerge(events), avgMerge(value_avg)
--   FROM evaluations_hourly GROUP BY hour, agent_version ORDER BY hour
-- NULL labels are stored as '' (Nullable columns cannot be part of the sorting key).
CREATE TABLE IF NOT EXISTS evaluations_hourly
(
    hour DateTime,
    app_id String,
    agent_id String,
    agent_version String,
    model String,
    metric String,
    events AggregateFunction(uniq, String),
    value_sum AggregateFunction(sum, Float64),
    value_avg AggregateFunction(avg, Float64),
    tier_excellent AggregateFunction(uniqIf, String, UInt8),
    tier_good AggregateFunction(uniqIf, String, UInt8),
    tier_marginal AggregateFunction(uniqIf, String, UInt8),
    tier_poor AggregateFunction(uniqIf, String, UInt8),
    not_ok AggregateFunction(uniqIf, String, UInt8),
    judge_cached AggregateFunction(uniqIf, String, UInt8),
    judged_by_llm AggregateFunction(uniqIf, String, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, app_id, agent_id, agent_version, model, metric)
SETTINGS index_granularity = 8192;

CREATE MATERIALIZED VIEW IF NOT EXISTS evaluations_hourly_mv TO evaluations_hourly AS
SELECT
    toStartOfHour(ts) AS hour,
    ifNull(app_id, '') AS app_id,
    ifNull(agent_id, '') AS agent_id,
    ifNull(agent_version, '') AS agent_version,
    ifNull(model, '') AS model,
    metric,
    uniqState(event_id) AS events,
    sumState(value) AS value_sum,
    avgState(value) AS value_avg,
    uniqIfState(event_id, toUInt8(ifNull(quality_tier, '') = 'excellent')) AS tier_excellent,
    uniqIfState(event_id, toUInt8(ifNull(quality_tier, '') = 'good')) AS tier_good,
    uniqIfState(event_id, toUInt8(ifNull(quality_tier, '') = 'marginal')) AS tier_marginal,
    uniqIfState(event_id, toUInt8(ifNull(quality_tier, '') = 'poor')) AS tier_poor,
    uniqIfState(event_id, toUInt8(status != 'ok')) AS not_ok,
    uniqIfState(event_id, toUInt8(ifNull(judge_cached, 0) = 1)) AS judge_cached,
    uniqIfState(event_id, toUInt8(startsWith(ifNull(judge, ''), 'llm:'))) AS judged_by_llm
FROM evaluations
GROUP BY hour, app_id, agent_id, agent_version, model, metric;
