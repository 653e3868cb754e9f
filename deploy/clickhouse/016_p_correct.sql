-- The line-rate verdict, learned from people (issue 75): every `stef` row carries `p_correct`,
-- the correctness model's probability that people would call the query correct, and its
-- `verdict` is `p_correct >=` the model's threshold (Φ is unchanged). A `stef_judged` row keeps
-- the line-rate `p_correct` and boolean verdict it revises. NULL on other rows and on rows written
-- before this migration. Portable DDL (18.16 and current releases); `sqlgrade migrate` skips an
-- `ALTER TABLE … ADD COLUMN` whose column exists already, and on a cluster the Distributed table
-- is recreated with the columns by `migrate --cluster`.
ALTER TABLE evaluations ADD COLUMN p_correct Nullable(Float64);
ALTER TABLE evaluations ADD COLUMN revised_p_correct Nullable(Float64);
ALTER TABLE evaluations ADD COLUMN revised_correct Nullable(UInt8);

-- The views that read the line-rate verdict now read the row's own `verdict` (the boolean call:
-- the model's on `stef` rows since this migration, `correct`/`likely_correct` before, an LLM's
-- on `stef_judged` rows), and the estimates correct `p_correct` where a row has it.
DROP TABLE IF EXISTS stef_estimates_hourly;
DROP TABLE IF EXISTS judge_agreement_daily;
DROP TABLE IF EXISTS judge_disagreement_hourly;

-- Calibrated estimates per hour and series (app, agent, agent_version, model), by
-- prediction-powered inference — the line-rate mean over every scored event plus the mean
-- LLM-minus-line-rate correction on the judged uniform slice, with the half width of a 95%
-- interval:
--   estimate ± 1.96 · sqrt(var(line) / events + var(correction) / judged_uniform)
-- `phi_*` for mean Φ (0-100); `correct_*` for the share correct (0-1), whose line-rate value is
-- `p_correct` (the verdict as 0/1 on rows without one) and whose LLM value is the judge's verdict.
-- `mean_p_correct`: the correctness model's own estimate of the share correct, from the line rate
-- alone (no LLM; rectified by people's labels on the review page and in `report`). NULL half
-- widths mean fewer than two judged uniform events in the window.
CREATE VIEW IF NOT EXISTS stef_estimates_hourly AS
SELECT
    hour,
    app_id,
    agent_id,
    agent_version,
    model,
    events,
    judged_uniform,
    line_phi,
    line_phi + phi_correction AS estimated_phi,
    1.959964 * sqrt(var_phi / events + var_phi_correction / judged_uniform) AS phi_half_width,
    line_correct,
    mean_p_correct,
    line_correct + correct_correction AS estimated_correct_share,
    1.959964 * sqrt(var_correct / events + var_correct_correction / judged_uniform)
        AS correct_half_width
FROM
(
    SELECT
        toStartOfHour(ts) AS hour,
        ifNull(app_id, '') AS app_id,
        ifNull(agent_id, '') AS agent_id,
        ifNull(agent_version, '') AS agent_version,
        ifNull(model, '') AS model,
        countIf(metric = 'stef' AND status IN ('ok', 'judge_fallback')) AS events,
        avgIf(value, metric = 'stef' AND status IN ('ok', 'judge_fallback')) AS line_phi,
        varSampIf(value, metric = 'stef' AND status IN ('ok', 'judge_fallback')) AS var_phi,
        avgIf(
            ifNull(p_correct, toFloat64(ifNull(verdict, 0))),
            metric = 'stef' AND status IN ('ok', 'judge_fallback')) AS line_correct,
        avgIf(p_correct, metric = 'stef' AND status IN ('ok', 'judge_fallback'))
            AS mean_p_correct,
        varSampIf(
            ifNull(p_correct, toFloat64(ifNull(verdict, 0))),
            metric = 'stef' AND status IN ('ok', 'judge_fallback')) AS var_correct,
        countIf(metric = 'stef_judged' AND status = 'ok' AND isNotNull(inclusion_probability))
            AS judged_uniform,
        avgIf(
            value - ifNull(revised_value, 0),
            metric = 'stef_judged' AND status = 'ok' AND isNotNull(inclusion_probability))
            AS phi_correction,
        varSampIf(
            value - ifNull(revised_value, 0),
            metric = 'stef_judged' AND status = 'ok' AND isNotNull(inclusion_probability))
            AS var_phi_correction,
        avgIf(
            toFloat64(ifNull(verdict, 0)) - ifNull(revised_p_correct, toFloat64(ifNull(revised_correct,
                ifNull(revised_verdict, '') IN ('correct', 'likely_correct')))),
            metric = 'stef_judged' AND status = 'ok' AND isNotNull(inclusion_probability))
            AS correct_correction,
        varSampIf(
            toFloat64(ifNull(verdict, 0)) - ifNull(revised_p_correct, toFloat64(ifNull(revised_correct,
                ifNull(revised_verdict, '') IN ('correct', 'likely_correct')))),
            metric = 'stef_judged' AND status = 'ok' AND isNotNull(inclusion_probability))
            AS var_correct_correction
    FROM evaluations FINAL
    GROUP BY hour, app_id, agent_id, agent_version, model
);

-- Agreement of each judge with people, per day (of the judged event's time), series, metric
-- (`stef` line rate, `stef_judged` LLM) and judge identity: one pair per (event, reviewer) label
-- (`unsure` left out; the newest label per reviewer), the judge's side being the row's own
-- `verdict`. Cohen's kappa with the half width of its 95% large-sample interval
-- (sqrt(po(1 - po) / (n (1 - pe)^2))), and accuracy with its 95% Wilson interval. NaN kappa:
-- chance agreement is 1 (every pair on one side). `sqlgrade calibrate` and the review page compute
-- the same from the same pairs (their kappa interval is a bootstrap).
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
                toUInt8(ifNull(verdict, 0)) AS judge_correct
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
-- the line-rate verdict it revises (`revised_correct`; before this migration the revised
-- four-point verdict). A cheap early warning that either judge changed. Uniform-slice rows only in
-- `uniform_*` (priority picks over-sample events the line rate doubts).
CREATE VIEW IF NOT EXISTS judge_disagreement_hourly AS
SELECT
    toStartOfHour(ts) AS hour,
    ifNull(app_id, '') AS app_id,
    ifNull(agent_id, '') AS agent_id,
    ifNull(agent_version, '') AS agent_version,
    ifNull(model, '') AS model,
    count() AS judged,
    countIf(ifNull(verdict, 0) != ifNull(revised_correct,
        ifNull(revised_verdict, '') IN ('correct', 'likely_correct'))) AS disagree,
    disagree / judged AS disagreement_share,
    countIf(isNotNull(inclusion_probability)) AS uniform_judged,
    countIf(isNotNull(inclusion_probability)
        AND ifNull(verdict, 0) != ifNull(revised_correct,
            ifNull(revised_verdict, '') IN ('correct', 'likely_correct'))) AS uniform_disagree
FROM evaluations FINAL
WHERE metric = 'stef_judged' AND status = 'ok'
GROUP BY hour, app_id, agent_id, agent_version, model;
