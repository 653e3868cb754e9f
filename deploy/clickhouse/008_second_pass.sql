-- The second, LLM-judged pass (rows with metric = 'stef_judged'): why the event was selected
-- for the LLM judge (`selection`: reasons, most important first; `census` when every event is
-- judged), the probability it was in the uniform slice (NULL for priority-only picks, which
-- never enter the estimates), and the line-rate `stef` score the row revises. Empty / NULL on
-- every other row. Portable DDL (18.16 and current releases). 18.16 has no
-- `ADD COLUMN IF NOT EXISTS`: `sqlgrade migrate` skips an `ALTER TABLE … ADD COLUMN` (one
-- column per statement) whose column exists already.
ALTER TABLE evaluations ADD COLUMN selection String DEFAULT '';
ALTER TABLE evaluations ADD COLUMN inclusion_probability Nullable(Float64);
ALTER TABLE evaluations ADD COLUMN revised_value Nullable(Float64);
ALTER TABLE evaluations ADD COLUMN revised_verdict Nullable(String);

-- Calibrated estimates per hour and series (app, agent, agent_version, model): what the LLM
-- judge would say about *all* scored events, by prediction-powered inference — the line-rate
-- mean over every scored event plus the mean LLM-minus-line-rate correction on the judged
-- uniform slice, with the half width of a 95% interval:
--   estimate ± 1.96 · sqrt(var(line) / events + var(correction) / judged_uniform)
-- `phi_*` for mean Φ (0-100), `correct_*` for the share of `correct`/`likely_correct` verdicts
-- (0-1). NULL half widths mean fewer than two judged uniform events in the window.
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
            toFloat64(ifNull(semantic_verdict, '') IN ('correct', 'likely_correct')),
            metric = 'stef' AND status IN ('ok', 'judge_fallback')) AS line_correct,
        varSampIf(
            toFloat64(ifNull(semantic_verdict, '') IN ('correct', 'likely_correct')),
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
            toFloat64(ifNull(semantic_verdict, '') IN ('correct', 'likely_correct'))
                - toFloat64(ifNull(revised_verdict, '') IN ('correct', 'likely_correct')),
            metric = 'stef_judged' AND status = 'ok' AND isNotNull(inclusion_probability))
            AS correct_correction,
        varSampIf(
            toFloat64(ifNull(semantic_verdict, '') IN ('correct', 'likely_correct'))
                - toFloat64(ifNull(revised_verdict, '') IN ('correct', 'likely_correct')),
            metric = 'stef_judged' AND status = 'ok' AND isNotNull(inclusion_probability))
            AS var_correct_correction
    FROM evaluations FINAL
    GROUP BY hour, app_id, agent_id, agent_version, model
);
