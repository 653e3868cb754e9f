-- Hourly dead-letter counts per reason class for dashboards (the reason up to its first ':',
-- e.g. `malformed JSON`, so that messages with embedded positions still group together).
CREATE TABLE IF NOT EXISTS dead_letters_hourly
(
    hour DateTime,
    reason_class String,
    letters AggregateFunction(uniq, String)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, reason_class)
SETTINGS index_granularity = 8192;

CREATE MATERIALIZED VIEW IF NOT EXISTS dead_letters_hourly_mv TO dead_letters_hourly AS
SELECT
    toStartOfHour(received_at) AS hour,
    splitByChar(':', reason)[1] AS reason_class,
    uniqState(source) AS letters
FROM dead_letters
GROUP BY hour, reason_class;
