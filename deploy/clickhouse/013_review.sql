-- The review page's tables (`sqlgrade serve`).
--
-- event_inputs: one row per scored event with the inputs its scores were computed from, so a
-- person can see why an event scored what it did. The sink writes it beside `evaluations`
-- unless `[sink] store_inputs = false`. Keyed by event_id (the review page reads one event, or
-- the events of a queue page, by id); a redelivered event collapses on merge (read with FINAL).
-- Partitioned by month of event time, so `sqlgrade prune` drops it with `evaluations`.
CREATE TABLE IF NOT EXISTS event_inputs
(
    event_id String,
    ts DateTime,
    app_id Nullable(String),
    agent_id Nullable(String),
    agent_version Nullable(String),
    model Nullable(String),
    run_id Nullable(String),
    question String,
    enriched_question Nullable(String),
    sql String,
    gold_sql Nullable(String),
    stored_at DateTime
)
ENGINE = ReplacingMergeTree(stored_at)
PARTITION BY toYYYYMM(ts)
ORDER BY (event_id)
SETTINGS index_granularity = 8192;

-- labels: one row per (event, reviewer) — a reviewer's later label replaces the earlier one
-- (the newest labelled_at wins; read with FINAL). verdict is correct | incorrect | unsure;
-- category one of the review page's error categories or ''. Not partitioned: labels are the
-- scarce data every calibration rests on, and `sqlgrade prune` never drops them.
CREATE TABLE IF NOT EXISTS labels
(
    event_id String,
    reviewer String,
    verdict String,
    category String,
    note String,
    labelled_at DateTime
)
ENGINE = ReplacingMergeTree(labelled_at)
ORDER BY (event_id, reviewer)
SETTINGS index_granularity = 8192;
