-- `evaluations` keyed for its reads as well as for deduplication. Until now it was ordered by
-- (event_id, metric, run_key), so every drill-down by time, app, agent or metric read whole month
-- partitions. The new sorting key
--
--     (run_key, app_key, agent_key, version_key, metric, ts, event_id)
--
-- serves the shipped reads (see README.md, "Access paths"): one run's rows (run_key = ?), the
-- recent rows of one app / agent / agent version and metric (the dashboard's latest and poorest
-- events, the review of an alert's series), and it still collapses a redelivered row: every
-- column of the key is a function of the event (its ids, labels and event time — stable across
-- redelivery since the event-time fallback) and of the metric, so the copies of one row share
-- the whole key. `app_key`, `agent_key`, `version_key` are the labels with NULL stored as ''
-- (18.16 allows no Nullable column in a sorting key); the sink writes them, the DEFAULTs fill
-- them for rows copied below and for older writers.
--
-- One event by id has a small lookup table, `evaluations_by_event` (event_id → the key prefix and
-- ts of its rows, filled by a materialized view), read first to narrow the detail read to a few
-- granules; current releases may add a bloom-filter skip index instead (README.md).
--
-- 18.16 cannot change a sorting key except by appending new columns, so the table is rebuilt:
-- the new table is created and filled from the old one, the materialized views that read
-- `evaluations` are dropped, the tables are swapped by RENAME, and the views are recreated on the
-- new table (same definitions as 005 and 009; the rollup tables keep their data). The old table
-- stays as `evaluations_before_011` until you drop it. Run `migrate` before starting the daemons
-- (the deploy order): rows written while it runs may miss the copy or the rollups. Each step is
-- safe to re-run after an interruption — the guarded statements are skipped once the swap has
-- happened. Portable DDL (18.16 and current releases).

-- migrate: skip if table evaluations_before_011 exists
CREATE TABLE IF NOT EXISTS evaluations_keyed
(
    event_id String,
    ts DateTime,
    app_id Nullable(String),
    agent_id Nullable(String),
    agent_version Nullable(String),
    model Nullable(String),
    run_id Nullable(String),
    metric String,
    value Float64,
    verdict Nullable(UInt8),
    status String,
    details String,
    quality_tier Nullable(String),
    filter_status Nullable(String),
    semantic_verdict Nullable(String),
    confidence Nullable(Float64),
    confidence_tier Nullable(String),
    sigma_filters Nullable(UInt8),
    sigma_verdict Nullable(UInt8),
    leniency Nullable(UInt8),
    rules_fired Array(String),
    enrichment_status Nullable(String),
    judge Nullable(String),
    judge_cached Nullable(UInt8),
    prompt_version Nullable(String),
    rules_version Nullable(String),
    prompt_tokens UInt64,
    completion_tokens UInt64,
    latency_us UInt64,
    scored_at DateTime,
    selection String DEFAULT '',
    inclusion_probability Nullable(Float64),
    revised_value Nullable(Float64),
    revised_verdict Nullable(String),
    run_key String,
    app_key String DEFAULT ifNull(app_id, ''),
    agent_key String DEFAULT ifNull(agent_id, ''),
    version_key String DEFAULT ifNull(agent_version, '')
)
ENGINE = ReplacingMergeTree(scored_at)
PARTITION BY toYYYYMM(ts)
ORDER BY (run_key, app_key, agent_key, version_key, metric, ts, event_id)
SETTINGS index_granularity = 8192;

-- migrate: skip if table evaluations_before_011 exists
INSERT INTO evaluations_keyed (event_id, ts, app_id, agent_id, agent_version, model, run_id, metric, value, verdict, status, details, quality_tier, filter_status, semantic_verdict, confidence, confidence_tier, sigma_filters, sigma_verdict, leniency, rules_fired, enrichment_status, judge, judge_cached, prompt_version, rules_version, prompt_tokens, completion_tokens, latency_us, scored_at, selection, inclusion_probability, revised_value, revised_verdict, run_key)
SELECT event_id, ts, app_id, agent_id, agent_version, model, run_id, metric, value, verdict, status, details, quality_tier, filter_status, semantic_verdict, confidence, confidence_tier, sigma_filters, sigma_verdict, leniency, rules_fired, enrichment_status, judge, judge_cached, prompt_version, rules_version, prompt_tokens, completion_tokens, latency_us, scored_at, selection, inclusion_probability, revised_value, revised_verdict, run_key
FROM evaluations;

DROP TABLE IF EXISTS evaluations_hourly_mv;

DROP TABLE IF EXISTS evaluations_scored_hourly_mv;

-- migrate: skip if table evaluations_before_011 exists
RENAME TABLE evaluations TO evaluations_before_011, evaluations_keyed TO evaluations;

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

CREATE TABLE IF NOT EXISTS evaluations_by_event
(
    event_id String,
    run_key String,
    app_key String,
    agent_key String,
    version_key String,
    ts DateTime
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY (event_id, run_key, app_key, agent_key, version_key, ts)
SETTINGS index_granularity = 1024;

CREATE MATERIALIZED VIEW IF NOT EXISTS evaluations_by_event_mv TO evaluations_by_event AS
SELECT DISTINCT event_id, run_key, app_key, agent_key, version_key, ts
FROM evaluations;

INSERT INTO evaluations_by_event
SELECT DISTINCT event_id, run_key, app_key, agent_key, version_key, ts
FROM evaluations;
