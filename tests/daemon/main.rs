//! The daemon against real servers (tansu, ClickHouse, the `sqlgrade` binary, the scripted
//! LLM): one test binary whose tests each start their own servers and run **one at a time**
//! ([`one_at_a_time`]), so their waits never share the machine with another test's servers, as
//! when each file below was its own binary.

use tokio::sync::{Mutex, MutexGuard};

mod broker;
mod clickhouse;
mod crash;
mod flow;
mod group;
mod judge_work;
mod kafka_source;
mod outage;
mod shutdown;
mod soak;

/// Held by every test of this binary for its whole life (its servers', its daemons'): the
/// tests run one after another whatever `--test-threads` says. An async lock (each test has its
/// own runtime; the guard is held across its awaits), which a failing test releases as it
/// unwinds.
async fn one_at_a_time() -> MutexGuard<'static, ()> {
    static SERVERS: Mutex<()> = Mutex::const_new(());
    SERVERS.lock().await
}
