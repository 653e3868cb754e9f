-- Payloads that could not be decoded or validated, and rows the server rejected as
-- non-retryable (`error` holds the server's message). Keyed by (source, reason) so that a
-- redelivered message dead-lettered twice collapses into one row; read with FINAL.
CREATE TABLE IF NOT EXISTS dead_letters
(
    received_at DateTime,
    source String,
    reason String,
    payload String,
    payload_encoding String,
    error String
)
ENGINE = ReplacingMergeTree(received_at)
PARTITION BY toYYYYMM(received_at)
ORDER BY (source, reason)
SETTINGS index_granularity = 8192;
