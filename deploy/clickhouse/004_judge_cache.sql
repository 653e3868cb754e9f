-- Durable judge verdict cache shared by replicas and across restarts: the judge consults its
-- in-process cache, then this table, then the LLM, and writes the verdict back. `key` is the
-- content hash of (prompt version, model, inputs); `value` is the verdict as JSON. Read with
-- FINAL (or LIMIT 1 BY key); the newest created_at wins.
CREATE TABLE IF NOT EXISTS judge_cache
(
    key String,
    value String,
    created_at DateTime
)
ENGINE = ReplacingMergeTree(created_at)
ORDER BY (key)
SETTINGS index_granularity = 8192;
