-- Which judge produced each verdict, precisely (`judge_identity`, README "Judge identity"):
-- `deterministic sqlgrade=<version> rules=<profile version>` on line-rate rows, `llm model=<name>
-- served=<model id the server reported> prompt=<version> mode=<response mode>` on LLM-judged
-- rows; '' on rows of other metrics and on rows written before this migration. Portable DDL
-- (18.16 and current releases); on a cluster the Distributed table is recreated with the column
-- by `migrate --cluster`.
ALTER TABLE evaluations ADD COLUMN judge_identity String DEFAULT '';

-- When each judge identity was first and last seen per series and metric, kept incrementally
-- by a materialized view on every insert (no scan of `evaluations`): a new `first_seen` is a
-- change of judge, which Grafana draws as an annotation. Query with the -Merge combinators:
--   SELECT judge_identity, minMerge(first_seen), maxMerge(last_seen), countMerge(rows)
--   FROM judge_identities GROUP BY app_id, agent_id, agent_version, model, metric, judge_identity
CREATE TABLE IF NOT EXISTS judge_identities
(
    app_id String,
    agent_id String,
    agent_version String,
    model String,
    metric String,
    judge_identity String,
    first_seen AggregateFunction(min, DateTime),
    last_seen AggregateFunction(max, DateTime),
    rows AggregateFunction(count)
)
ENGINE = AggregatingMergeTree()
ORDER BY (app_id, agent_id, agent_version, model, metric, judge_identity)
SETTINGS index_granularity = 8192;

CREATE MATERIALIZED VIEW IF NOT EXISTS judge_identities_mv TO judge_identities AS
SELECT
    ifNull(app_id, '') AS app_id,
    ifNull(agent_id, '') AS agent_id,
    ifNull(agent_version, '') AS agent_version,
    ifNull(model, '') AS model,
    metric,
    judge_identity,
    minState(ts) AS first_seen,
    maxState(ts) AS last_seen,
    countState() AS rows
FROM evaluations
WHERE judge_identity != ''
GROUP BY app_id, agent_id, agent_version, model, metric, judge_identity;

-- Agreement of each judge with people, per day (of the judged event's time), series, metric
-- (`stef` line rate, `stef_judged` LLM) and judge identity: one pair per (event, reviewer) label
-- (`unsure` left out; the newest label per reviewer), the judge's verdict counting as correct
-- when it is `correct` or `likely_correct`. Cohen's kappa with the half width of its 95%
-- large-sample interval (sqrt(po(1 - po) / (n (1 - pe)^2))), and accuracy with its 95% Wilson
-- interval. NaN kappa: chance agreement is 1 (every pair on one side). `sqlgrade calibrate` and
-- the review page compute the same from the same pairs (their kappa interval is a bootstrap).
CREATE VIEW IF NOT EXISTS judge_agreement_daily AS
SELECT
    day,
    app_id,
    agent_id,
    agent_version,
    model,
    metric,
    judge_identity,
    labelled,
    tp,
    fp,
    fn,
    tn,
    po AS accuracy,
    (po + 1.920729 / labelled
        - 1.959964 * sqrt(po * (1 - po) / labelled + 0.960365 / (labelled * labelled)))
        / (1 + 3.841459 / labelled) AS accuracy_lower,
    (po + 1.920729 / labelled
        + 1.959964 * sqrt(po * (1 - po) / labelled + 0.960365 / (labelled * labelled)))
        / (1 + 3.841459 / labelled) AS accuracy_upper,
    if(pe < 1, (po - pe) / (1 - pe), nan) AS kappa,
    if(pe < 1, 1.959964 * sqrt(po * (1 - po) / (labelled * (1 - pe) * (1 - pe))), nan)
        AS kappa_half_width
FROM
(
    SELECT
        day, app_id, agent_id, agent_version, model, metric, judge_identity,
        labelled, tp, fp, fn, tn,
        (tp + tn) / labelled AS po,
        ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (labelled * labelled) AS pe
    FROM
    (
        SELECT
            toDate(ts) AS day,
            app_id, agent_id, agent_version, model, metric, judge_identity,
            count() AS labelled,
            countIf(judge_correct = 1 AND human_correct = 1) AS tp,
            countIf(judge_correct = 1 AND human_correct = 0) AS fp,
            countIf(judge_correct = 0 AND human_correct = 1) AS fn,
            countIf(judge_correct = 0 AND human_correct = 0) AS tn
        FROM
        (
            SELECT
                event_id,
                ts,
                ifNull(app_id, '') AS app_id,
                ifNull(agent_id, '') AS agent_id,
                ifNull(agent_version, '') AS agent_version,
                ifNull(model, '') AS model,
                metric,
                judge_identity,
                toUInt8(ifNull(semantic_verdict, '') IN ('correct', 'likely_correct'))
                    AS judge_correct
            FROM evaluations FINAL
            WHERE metric IN ('stef', 'stef_judged') AND status IN ('ok', 'judge_fallback')
        ) AS judge_rows
        ALL INNER JOIN
        (
            SELECT event_id, toUInt8(verdict = 'correct') AS human_correct
            FROM labels FINAL
            WHERE verdict IN ('correct', 'incorrect')
        ) AS human_labels USING event_id
        GROUP BY day, app_id, agent_id, agent_version, model, metric, judge_identity
    )
);

-- How often the LLM judge and the line-rate verdict disagree, per hour and series: among the
-- judged rows (`stef_judged`, status ok), the share whose verdict (correct or not) differs from
-- the line-rate verdict it revises. A cheap early warning that either judge changed. Uniform-
-- slice rows only in `uniform_*` (priority picks over-sample events the line rate doubts).
CREATE VIEW IF NOT EXISTS judge_disagreement_hourly AS
SELECT
    toStartOfHour(ts) AS hour,
    ifNull(app_id, '') AS app_id,
    ifNull(agent_id, '') AS agent_id,
    ifNull(agent_version, '') AS agent_version,
    ifNull(model, '') AS model,
    count() AS judged,
    countIf((ifNull(semantic_verdict, '') IN ('correct', 'likely_correct'))
        != (ifNull(revised_verdict, '') IN ('correct', 'likely_correct'))) AS disagree,
    disagree / judged AS disagreement_share,
    countIf(isNotNull(inclusion_probability)) AS uniform_judged,
    countIf(isNotNull(inclusion_probability)
        AND (ifNull(semantic_verdict, '') IN ('correct', 'likely_correct'))
            != (ifNull(revised_verdict, '') IN ('correct', 'likely_correct'))) AS uniform_disagree
FROM evaluations FINAL
WHERE metric = 'stef_judged' AND status = 'ok'
GROUP BY hour, app_id, agent_id, agent_version, model;
