-- One row per (event_id, metric). ReplacingMergeTree on the full sorting key (event_id, metric):
-- a redelivered event (at-least-once consumption) collapses into one row on merge, and every
-- query the project ships reads this table deduplicated (FINAL or LIMIT 1 BY event_id, metric).
-- Portable DDL: runs on ClickHouse 18.16 (Debian) and current releases (no LowCardinality,
-- CODEC, TTL, DateTime64 or Bool; Nullable columns stay out of the sorting key).
CREATE TABLE IF NOT EXISTS evaluations
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
    scored_at DateTime
)
ENGINE = ReplacingMergeTree(scored_at)
PARTITION BY toYYYYMM(ts)
ORDER BY (event_id, metric)
SETTINGS index_granularity = 8192;
