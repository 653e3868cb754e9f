//! The connection and what every ClickHouse child shares: the client built from `[clickhouse]`, the
//! table names, how failures are classified and retried, the cluster layout (module
//! documentation of `clickhouse`).
use std::time::Duration;

use super::config::ClickHouseConfig;

/// The server used when `[clickhouse] url` is unset.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8123";

/// Table of evaluation rows (`deploy/clickhouse/001_evaluations.sql`).
pub const EVALUATIONS_TABLE: &str = "evaluations";

/// Table of dead letters (`deploy/clickhouse/002_dead_letters.sql`).
pub const DEAD_LETTERS_TABLE: &str = "dead_letters";

/// Table of the scored events' inputs (question, enriched question, SQL), migration 013.
pub const EVENT_INPUTS_TABLE: &str = "event_inputs";

/// Table of human labels written by the review page, migration 013.
pub const LABELS_TABLE: &str = "labels";

/// The server URL of `[clickhouse]` (`DEFAULT_URL` when unset).
pub fn url(settings: &ClickHouseConfig) -> &str {
    settings
        .url
        .as_deref()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or(DEFAULT_URL)
}

/// A `clickhouse` client for `[clickhouse]`: server, credentials, database selected.
/// On a cluster with `insert_sync`, inserts through `Distributed` tables are synchronous.
pub fn client(settings: &ClickHouseConfig) -> clickhouse::Client {
    let client = server_client(settings).with_database(&settings.database);
    if settings.cluster.name.is_some() && settings.cluster.insert_sync {
        client.with_setting("insert_distributed_sync", "1")
    } else {
        client
    }
}

/// The cluster layout of `[clickhouse.cluster]` (its name, or `name` to override it); `None` = one
/// server.
pub fn cluster_layout(
    settings: &ClickHouseConfig,
    name: Option<&str>,
) -> Option<super::cluster::ClusterLayout> {
    let name = name
        .map(str::to_string)
        .or_else(|| settings.cluster.name.clone())?;
    Some(super::cluster::ClusterLayout {
        name,
        database: settings.database.clone(),
        replica_path: settings.cluster.replica_path.clone(),
        replica_name: settings.cluster.replica_name.clone(),
    })
}

/// How inserts are compressed on the way to the server: LZ4, the client's default, named here
/// because the sink compresses its chunks itself (on several threads, [`super::rowbinary`]) and
/// must do what the client expects.
pub const INSERT_COMPRESSION: clickhouse::Compression = clickhouse::Compression::Lz4;

/// The same client without a database selected (to create it).
pub fn server_client(settings: &ClickHouseConfig) -> clickhouse::Client {
    let mut client = clickhouse::Client::default()
        .with_url(url(settings))
        .with_compression(INSERT_COMPRESSION)
        .with_validation(false);
    if let Some(user) = &settings.user {
        client = client.with_user(user);
    }
    if let Some(password) = settings.password.as_ref().filter(|p| !p.is_empty()) {
        client = client.with_password(password.expose());
    }
    client
}

/// The per-request timeout of `[clickhouse]`.
pub fn request_timeout(settings: &ClickHouseConfig) -> Duration {
    Duration::from_millis(settings.request_timeout_ms.max(1))
}

/// How a failed insert should be handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Try the same data again later (network, overload, server down, unknown).
    Transient,
    /// The server rejected the data itself; retrying the same rows cannot succeed.
    RejectedData,
}

/// ClickHouse exception codes that mean "this data is bad", not "try later".
const DATA_ERROR_CODES: &[u32] = &[
    6,   // CANNOT_PARSE_TEXT
    26,  // CANNOT_PARSE_QUOTED_STRING
    27,  // CANNOT_PARSE_INPUT_ASSERTION_FAILED
    32,  // ATTEMPT_TO_READ_AFTER_EOF
    33,  // CANNOT_READ_ALL_DATA
    38,  // CANNOT_PARSE_DATE
    41,  // CANNOT_PARSE_DATETIME
    53,  // TYPE_MISMATCH
    69,  // ARGUMENT_OUT_OF_BOUND
    70,  // CANNOT_CONVERT_TYPE
    72,  // CANNOT_PARSE_NUMBER
    117, // INCORRECT_DATA
    131, // TOO_LARGE_STRING_SIZE
    349, // CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN
];

/// The `Code: N` of a ClickHouse exception message, if present.
pub fn exception_code(message: &str) -> Option<u32> {
    let start = message.find("Code: ")? + "Code: ".len();
    let digits: String = message[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Classify an insert error.
pub fn classify(error: &clickhouse::error::Error) -> FailureKind {
    use clickhouse::error::Error;
    match error {
        Error::BadResponse(message) => match exception_code(message) {
            Some(code) if DATA_ERROR_CODES.contains(&code) => FailureKind::RejectedData,
            _ => FailureKind::Transient,
        },
        // Our own rows failed to serialize: resending cannot help.
        Error::Custom(_)
        | Error::SequenceMustHaveLength
        | Error::InvalidUtf8Encoding(_)
        | Error::DataFormat(_) => FailureKind::RejectedData,
        _ => FailureKind::Transient,
    }
}

/// Capped exponential backoff.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    pub(crate) fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff { next: initial, max }
    }

    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        delay
    }
}

/// RFC 3339 → seconds since the epoch, clamped to ClickHouse `DateTime`'s range.
pub(crate) fn epoch_seconds(ts: &str) -> Option<u32> {
    let secs = chrono::DateTime::parse_from_rfc3339(ts).ok()?.timestamp();
    Some(secs.clamp(0, i64::from(u32::MAX)) as u32)
}

pub(crate) fn now_seconds() -> u32 {
    chrono::Utc::now().timestamp().clamp(0, i64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exception_codes_are_parsed_and_classified() {
        assert_eq!(
            exception_code("Code: 27, e.displayText() = DB::Exception: Cannot parse input"),
            Some(27)
        );
        assert_eq!(exception_code("no code here"), None);
        let rejected =
            clickhouse::error::Error::BadResponse("Code: 53. DB::Exception: Type mismatch".into());
        assert_eq!(classify(&rejected), FailureKind::RejectedData);
        let overloaded = clickhouse::error::Error::BadResponse(
            "Code: 252. DB::Exception: Too many parts".into(),
        );
        assert_eq!(classify(&overloaded), FailureKind::Transient);
        assert_eq!(
            classify(&clickhouse::error::Error::TimedOut),
            FailureKind::Transient
        );
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(350));
        let delays: Vec<u128> = (0..4).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(delays, vec![100, 200, 350, 350]);
    }

    #[test]
    fn unset_url_means_the_local_default() {
        assert_eq!(url(&ClickHouseConfig::default()), DEFAULT_URL);
        let settings = ClickHouseConfig {
            url: Some("http://ch:8123".into()),
            ..ClickHouseConfig::default()
        };
        assert_eq!(url(&settings), "http://ch:8123");
    }
}
