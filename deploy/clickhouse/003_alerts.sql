-- Score-drop alerts raised by the alert engine. One row per alert_id (re-raising the same
-- alert after a restart replaces it); read with FINAL.
CREATE TABLE IF NOT EXISTS alerts
(
    alert_id String,
    fired_at DateTime,
    app_id String,
    agent_id String,
    agent_version String,
    model String,
    metric String,
    rule String,
    severity String,
    window_start DateTime,
    window_end DateTime,
    baseline Float64,
    observed Float64,
    events UInt64,
    message String,
    details String
)
ENGINE = ReplacingMergeTree(fired_at)
PARTITION BY toYYYYMM(fired_at)
ORDER BY (alert_id)
SETTINGS index_granularity = 8192;
