//! Real servers for the daemon integration tests: ClickHouse (Debian's `clickhouse-server`) and
//! the Kafka-compatible broker tansu, each started as a child process on free loopback ports with
//! its state in a temp dir, so that a test can stop, kill and restart them to inject faults.
//! Also: the `sqlgrade` daemon as a child process, a Kafka producer, and the event corpus.
//!
//! `scripts/services.sh install` installs the binaries; when they are missing or cannot start,
//! [`Servers::start`] returns `None` and the test prints a loud SKIPPED message.
//!
//! One file per job: [`process`] (ports, child processes, HTTP, skipping), [`clickhouse`],
//! [`cluster`] (ZooKeeper and a sharded, replicated ClickHouse cluster), [`kafka`] (tansu, a
//! producer, topics), [`corpus`] (the events), [`daemon`] (the daemon process) and
//! [`harness`] (everything a daemon test starts); their items are re-exported here.

pub mod clickhouse;
pub mod cluster;
pub mod corpus;
pub mod daemon;
pub mod harness;
pub mod kafka;
pub mod process;

pub use clickhouse::*;
pub use corpus::*;
pub use daemon::*;
pub use harness::*;
pub use kafka::*;
pub use process::*;
