-- The review page's monitor (issue 76): per hour and series (app, agent, agent_version), what the
-- charts and the version comparison need, as mergeable aggregate states so that day buckets and
-- whole versions are sums of hours: line-rate `stef` events, scored, flagged by the line-rate
-- verdict, and the count, sum and sum of squares of Φ and of the line-rate predictor of
-- correctness (`p_correct`, the verdict as 0/1 on rows without one); on the LLM judge's scored
-- uniform slice (`stef_judged` with an inclusion probability) the same moments of the corrections
-- (judge − line rate) for Φ and correctness. The page reads it with the -Merge combinators
-- (`serve::monitor`), never the rows. Fed by a plain materialized view on every insert and
-- backfilled once from the rows already there; like `evaluations_hourly`, a redelivered row is
-- counted again in the sums (the event counts are distinct).
CREATE TABLE IF NOT EXISTS stef_monitor_hourly
(
    hour DateTime,
    app_id String,
    agent_id String,
    agent_version String,
    events AggregateFunction(uniqIf, String, UInt8),
    scored AggregateFunction(uniqIf, String, UInt8),
    flagged AggregateFunction(uniqIf, String, UInt8),
    line_n AggregateFunction(countIf, UInt8),
    phi_sum AggregateFunction(sumIf, Float64, UInt8),
    phi_sq AggregateFunction(sumIf, Float64, UInt8),
    p_sum AggregateFunction(sumIf, Float64, UInt8),
    p_sq AggregateFunction(sumIf, Float64, UInt8),
    judged_n AggregateFunction(countIf, UInt8),
    phi_corr_sum AggregateFunction(sumIf, Float64, UInt8),
    phi_corr_sq AggregateFunction(sumIf, Float64, UInt8),
    p_corr_sum AggregateFunction(sumIf, Float64, UInt8),
    p_corr_sq AggregateFunction(sumIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, app_id, agent_id, agent_version)
SETTINGS index_granularity = 8192;

CREATE MATERIALIZED VIEW IF NOT EXISTS stef_monitor_hourly_mv TO stef_monitor_hourly AS
SELECT
    toStartOfHour(ts) AS hour,
    ifNull(app_id, '') AS app_id,
    ifNull(agent_id, '') AS agent_id,
    ifNull(agent_version, '') AS agent_version,
    uniqIfState(event_id, toUInt8(metric = 'stef')) AS events,
    uniqIfState(event_id, toUInt8(metric = 'stef' AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS scored,
    uniqIfState(event_id, toUInt8(metric = 'stef' AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error') AND NOT ifNull(verdict, ifNull(semantic_verdict, '') IN ('correct', 'likely_correct')))) AS flagged,
    countIfState(toUInt8(metric = 'stef' AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS line_n,
    sumIfState(value, toUInt8(metric = 'stef' AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS phi_sum,
    sumIfState(value * value, toUInt8(metric = 'stef' AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS phi_sq,
    sumIfState(ifNull(p_correct, toFloat64(ifNull(verdict, ifNull(semantic_verdict, '') IN ('correct', 'likely_correct')))), toUInt8(metric = 'stef' AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS p_sum,
    sumIfState(pow(ifNull(p_correct, toFloat64(ifNull(verdict, ifNull(semantic_verdict, '') IN ('correct', 'likely_correct')))), 2), toUInt8(metric = 'stef' AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS p_sq,
    countIfState(toUInt8(metric = 'stef_judged' AND isNotNull(inclusion_probability) AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS judged_n,
    sumIfState(value - ifNull(revised_value, value), toUInt8(metric = 'stef_judged' AND isNotNull(inclusion_probability) AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS phi_corr_sum,
    sumIfState(pow(value - ifNull(revised_value, value), 2), toUInt8(metric = 'stef_judged' AND isNotNull(inclusion_probability) AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS phi_corr_sq,
    sumIfState(toFloat64(ifNull(semantic_verdict, '') IN ('correct', 'likely_correct')) - ifNull(revised_p_correct, toFloat64(ifNull(revised_correct, ifNull(revised_verdict, '') IN ('correct', 'likely_correct')))), toUInt8(metric = 'stef_judged' AND isNotNull(inclusion_probability) AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS p_corr_sum,
    sumIfState(pow(toFloat64(ifNull(semantic_verdict, '') IN ('correct', 'likely_correct')) - ifNull(revised_p_correct, toFloat64(ifNull(revised_correct, ifNull(revised_verdict, '') IN ('correct', 'likely_correct')))), 2), toUInt8(metric = 'stef_judged' AND isNotNull(inclusion_probability) AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS p_corr_sq
FROM evaluations
WHERE metric IN ('stef', 'stef_judged')
GROUP BY hour, app_id, agent_id, agent_version;

INSERT INTO stef_monitor_hourly
SELECT
    toStartOfHour(ts) AS hour,
    ifNull(app_id, '') AS app_id,
    ifNull(agent_id, '') AS agent_id,
    ifNull(agent_version, '') AS agent_version,
    uniqIfState(event_id, toUInt8(metric = 'stef')) AS events,
    uniqIfState(event_id, toUInt8(metric = 'stef' AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS scored,
    uniqIfState(event_id, toUInt8(metric = 'stef' AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error') AND NOT ifNull(verdict, ifNull(semantic_verdict, '') IN ('correct', 'likely_correct')))) AS flagged,
    countIfState(toUInt8(metric = 'stef' AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS line_n,
    sumIfState(value, toUInt8(metric = 'stef' AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS phi_sum,
    sumIfState(value * value, toUInt8(metric = 'stef' AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS phi_sq,
    sumIfState(ifNull(p_correct, toFloat64(ifNull(verdict, ifNull(semantic_verdict, '') IN ('correct', 'likely_correct')))), toUInt8(metric = 'stef' AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS p_sum,
    sumIfState(pow(ifNull(p_correct, toFloat64(ifNull(verdict, ifNull(semantic_verdict, '') IN ('correct', 'likely_correct')))), 2), toUInt8(metric = 'stef' AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS p_sq,
    countIfState(toUInt8(metric = 'stef_judged' AND isNotNull(inclusion_probability) AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS judged_n,
    sumIfState(value - ifNull(revised_value, value), toUInt8(metric = 'stef_judged' AND isNotNull(inclusion_probability) AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS phi_corr_sum,
    sumIfState(pow(value - ifNull(revised_value, value), 2), toUInt8(metric = 'stef_judged' AND isNotNull(inclusion_probability) AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS phi_corr_sq,
    sumIfState(toFloat64(ifNull(semantic_verdict, '') IN ('correct', 'likely_correct')) - ifNull(revised_p_correct, toFloat64(ifNull(revised_correct, ifNull(revised_verdict, '') IN ('correct', 'likely_correct')))), toUInt8(metric = 'stef_judged' AND isNotNull(inclusion_probability) AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS p_corr_sum,
    sumIfState(pow(toFloat64(ifNull(semantic_verdict, '') IN ('correct', 'likely_correct')) - ifNull(revised_p_correct, toFloat64(ifNull(revised_correct, ifNull(revised_verdict, '') IN ('correct', 'likely_correct')))), 2), toUInt8(metric = 'stef_judged' AND isNotNull(inclusion_probability) AND status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS p_corr_sq
FROM evaluations FINAL
WHERE metric IN ('stef', 'stef_judged')
GROUP BY hour, app_id, agent_id, agent_version;
