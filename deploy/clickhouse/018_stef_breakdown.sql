-- Where the agent goes wrong: per hour, series (app, agent, agent_version), dimension and
-- element, the line-rate `stef` events whose SQL reads the element — a table, a column
-- (`table.column`) or a join edge (`details.reads`) — or whose question has the type
-- (`details.question_type`): events, scored, flagged by the line-rate verdict and the sum of
-- `p_correct` (the verdict as 0/1 on rows without one) over the scored, as aggregate states; and
-- per element and finding code the events whose finding names the element
-- (`details.findings[].elements`; for a question type, every finding of its events). The
-- review page and `sqlgrade breakdown` read them with the -Merge combinators, never the rows.
-- Each finding's elements are one array of (dimension, element, code) per finding, flattened with
-- `arrayReduce('groupArrayArray', …)` for the one ARRAY JOIN 18.16 allows (a subquery or an
-- `arrayJoin` beside the clause fails there when the view is pushed to).
-- The elements are read from the details' text with regular expressions (Debian's ClickHouse
-- 18.16 has no JSON path functions): the daemon renders `reads` and each finding's `elements`
-- as flat objects of string arrays. Like `stef_monitor_hourly`, a redelivered row adds to
-- `p_sum` again (the event counts are distinct). Backfilled once from the rows already there
-- (rows written before the daemon rendered `reads` have none and count nowhere).
CREATE TABLE IF NOT EXISTS stef_breakdown_hourly
(
    hour DateTime,
    app_id String,
    agent_id String,
    agent_version String,
    dimension String,
    element String,
    events AggregateFunction(uniq, String),
    scored AggregateFunction(uniqIf, String, UInt8),
    flagged AggregateFunction(uniqIf, String, UInt8),
    p_sum AggregateFunction(sumIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (dimension, hour, app_id, agent_id, agent_version, element)
SETTINGS index_granularity = 8192;

CREATE MATERIALIZED VIEW IF NOT EXISTS stef_breakdown_hourly_mv TO stef_breakdown_hourly AS
SELECT
    toStartOfHour(ts) AS hour,
    ifNull(app_id, '') AS app_id,
    ifNull(agent_id, '') AS agent_id,
    ifNull(agent_version, '') AS agent_version,
    tupleElement(de, 1) AS dimension,
    tupleElement(de, 2) AS element,
    uniqState(event_id) AS events,
    uniqIfState(event_id, toUInt8(status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS scored,
    uniqIfState(event_id, toUInt8(status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error') AND NOT ifNull(verdict, ifNull(semantic_verdict, '') IN ('correct', 'likely_correct')))) AS flagged,
    sumIfState(ifNull(p_correct, toFloat64(ifNull(verdict, ifNull(semantic_verdict, '') IN ('correct', 'likely_correct')))), toUInt8(status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS p_sum
FROM evaluations
ARRAY JOIN arrayConcat(
    arrayMap(x -> ('table', x), extractAll(extract(details, '"reads":\\{[^}]*"tables":\\[([^\\]]*)'), '"([^"]*)"')),
    arrayMap(x -> ('column', x), extractAll(extract(details, '"reads":\\{[^}]*"columns":\\[([^\\]]*)'), '"([^"]*)"')),
    arrayMap(x -> ('join', x), extractAll(extract(details, '"reads":\\{[^}]*"joins":\\[([^\\]]*)'), '"([^"]*)"')),
    arrayFilter(t -> tupleElement(t, 2) != '', [('question_type', extract(details, '"question_type":"([^"]*)"'))])
) AS de
WHERE metric = 'stef'
GROUP BY hour, app_id, agent_id, agent_version, dimension, element;

CREATE TABLE IF NOT EXISTS stef_breakdown_findings_hourly
(
    hour DateTime,
    app_id String,
    agent_id String,
    agent_version String,
    dimension String,
    element String,
    code String,
    events AggregateFunction(uniq, String)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (dimension, hour, app_id, agent_id, agent_version, element, code)
SETTINGS index_granularity = 8192;

CREATE MATERIALIZED VIEW IF NOT EXISTS stef_breakdown_findings_hourly_mv TO stef_breakdown_findings_hourly AS
SELECT
    toStartOfHour(ts) AS hour,
    ifNull(app_id, '') AS app_id,
    ifNull(agent_id, '') AS agent_id,
    ifNull(agent_version, '') AS agent_version,
    tupleElement(fe, 1) AS dimension,
    tupleElement(fe, 2) AS element,
    tupleElement(fe, 3) AS code,
    uniqState(event_id) AS events
FROM evaluations
ARRAY JOIN arrayFilter(t -> tupleElement(t, 2) != '' AND tupleElement(t, 3) != '', arrayReduce('groupArrayArray', arrayMap(p -> arrayConcat(
    arrayMap(x -> ('table', x, extract(p, '^([a-z_0-9]+)"')), extractAll(extract(extract(p, '"elements":\\{[^}]*'), '"tables":\\[([^\\]]*)'), '"([^"]*)"')),
    arrayMap(x -> ('column', x, extract(p, '^([a-z_0-9]+)"')), extractAll(extract(extract(p, '"elements":\\{[^}]*'), '"columns":\\[([^\\]]*)'), '"([^"]*)"')),
    arrayMap(x -> ('join', x, extract(p, '^([a-z_0-9]+)"')), extractAll(extract(extract(p, '"elements":\\{[^}]*'), '"joins":\\[([^\\]]*)'), '"([^"]*)"')),
    [('question_type', extract(details, '"question_type":"([^"]*)"'), extract(p, '^([a-z_0-9]+)"'))]
), arraySlice(splitByString('{"code":"', details), 2)))) AS fe
WHERE metric = 'stef'
GROUP BY hour, app_id, agent_id, agent_version, dimension, element, code;

INSERT INTO stef_breakdown_hourly
SELECT
    toStartOfHour(ts) AS hour,
    ifNull(app_id, '') AS app_id,
    ifNull(agent_id, '') AS agent_id,
    ifNull(agent_version, '') AS agent_version,
    tupleElement(de, 1) AS dimension,
    tupleElement(de, 2) AS element,
    uniqState(event_id) AS events,
    uniqIfState(event_id, toUInt8(status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS scored,
    uniqIfState(event_id, toUInt8(status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error') AND NOT ifNull(verdict, ifNull(semantic_verdict, '') IN ('correct', 'likely_correct')))) AS flagged,
    sumIfState(ifNull(p_correct, toFloat64(ifNull(verdict, ifNull(semantic_verdict, '') IN ('correct', 'likely_correct')))), toUInt8(status NOT IN ('sql_too_large', 'judge_error', 'gold_error', 'gold_unavailable', 'gold_parse_error'))) AS p_sum
FROM evaluations FINAL
ARRAY JOIN arrayConcat(
    arrayMap(x -> ('table', x), extractAll(extract(details, '"reads":\\{[^}]*"tables":\\[([^\\]]*)'), '"([^"]*)"')),
    arrayMap(x -> ('column', x), extractAll(extract(details, '"reads":\\{[^}]*"columns":\\[([^\\]]*)'), '"([^"]*)"')),
    arrayMap(x -> ('join', x), extractAll(extract(details, '"reads":\\{[^}]*"joins":\\[([^\\]]*)'), '"([^"]*)"')),
    arrayFilter(t -> tupleElement(t, 2) != '', [('question_type', extract(details, '"question_type":"([^"]*)"'))])
) AS de
WHERE metric = 'stef'
GROUP BY hour, app_id, agent_id, agent_version, dimension, element;

INSERT INTO stef_breakdown_findings_hourly
SELECT
    toStartOfHour(ts) AS hour,
    ifNull(app_id, '') AS app_id,
    ifNull(agent_id, '') AS agent_id,
    ifNull(agent_version, '') AS agent_version,
    tupleElement(fe, 1) AS dimension,
    tupleElement(fe, 2) AS element,
    tupleElement(fe, 3) AS code,
    uniqState(event_id) AS events
FROM evaluations FINAL
ARRAY JOIN arrayFilter(t -> tupleElement(t, 2) != '' AND tupleElement(t, 3) != '', arrayReduce('groupArrayArray', arrayMap(p -> arrayConcat(
    arrayMap(x -> ('table', x, extract(p, '^([a-z_0-9]+)"')), extractAll(extract(extract(p, '"elements":\\{[^}]*'), '"tables":\\[([^\\]]*)'), '"([^"]*)"')),
    arrayMap(x -> ('column', x, extract(p, '^([a-z_0-9]+)"')), extractAll(extract(extract(p, '"elements":\\{[^}]*'), '"columns":\\[([^\\]]*)'), '"([^"]*)"')),
    arrayMap(x -> ('join', x, extract(p, '^([a-z_0-9]+)"')), extractAll(extract(extract(p, '"elements":\\{[^}]*'), '"joins":\\[([^\\]]*)'), '"([^"]*)"')),
    [('question_type', extract(details, '"question_type":"([^"]*)"'), extract(p, '^([a-z_0-9]+)"'))]
), arraySlice(splitByString('{"code":"', details), 2)))) AS fe
WHERE metric = 'stef'
GROUP BY hour, app_id, agent_id, agent_version, dimension, element, code;
