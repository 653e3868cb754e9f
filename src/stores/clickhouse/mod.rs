//! Everything that talks to ClickHouse, in one room: its `[clickhouse]` section ([`config`]), the
//! client built from it ([`client`]), how failures are classified and retried ([`classify`], [`Backoff`]), the
//! evaluation sink ([`sink`]), migrations ([`migrate`]) and the durable judge cache
//! ([`judge_cache`]).
//!
//! Client schema validation is off (`with_validation(false)`) so that the crate works with
//! ClickHouse 18.16 as well as current servers. The password stays a
//! [`Secret`](crate::settings::Secret) until it is handed to the client; neither it nor a URL's
//! userinfo is ever logged.

pub mod cluster;
pub mod config;
mod connection;
pub mod ddl;
pub mod judge_cache;
pub mod migrate;
pub mod queries;
pub mod retention;
pub mod review_store;
pub mod rowbinary;
pub mod rows;
pub mod sink;

pub(crate) use connection::{Backoff, epoch_seconds, now_seconds};
pub use connection::{
    DEAD_LETTERS_TABLE, DEFAULT_URL, EVALUATIONS_TABLE, EVENT_INPUTS_TABLE, FailureKind,
    INSERT_COMPRESSION, LABELS_TABLE, classify, client, cluster_layout, exception_code,
    request_timeout, server_client, url,
};
