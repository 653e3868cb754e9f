//! Hearing SIGINT/SIGTERM on a thread of its own, and the last-resort shutdown watchdog.

use std::time::Duration;

use tokio::sync::watch;

/// Exit code of `run` when shutdown did not finish within `pipeline.shutdown_timeout_ms`
/// (something could not be flushed or committed; it is redelivered on the next start).
pub const EXIT_SHUTDOWN_INCOMPLETE: u8 = 3;

/// How long past `pipeline.shutdown_timeout_ms` the last-resort watchdog waits before it ends
/// the process itself (the run's own deadline normally ends it first, with a precise error).
const SHUTDOWN_BACKSTOP: Duration = Duration::from_secs(3);

/// A watch channel that turns `true` on SIGINT/SIGTERM; a second signal exits at once.
///
/// Signals are received on a thread of their own, not on the async runtime: a step that blocks
/// the runtime's workers (librdkafka commits inside a rebalance callback while the broker is
/// gone) must not keep the daemon from hearing SIGTERM. With `limit`, the first signal also
/// starts a watchdog that ends the process (status [`EXIT_SHUTDOWN_INCOMPLETE`]) if it is still
/// running [`SHUTDOWN_BACKSTOP`] after the limit — the last resort behind the run's own deadline.
pub fn shutdown_signal(limit: Option<Duration>) -> watch::Receiver<bool> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let (tx, rx) = watch::channel(false);
    let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
        Ok(signals) => signals,
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGINT/SIGTERM; stop the process with SIGKILL");
            return rx;
        }
    };
    let listening = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut received = signals.forever();
            if received.next().is_none() {
                return;
            }
            tracing::info!("signal received; draining (press Ctrl-C again to exit immediately)");
            if let Some(limit) = limit {
                start_shutdown_watchdog(limit);
            }
            let _ = tx.send(true);
            if received.next().is_some() {
                eprintln!("sqlgrade: second signal; exiting without draining");
                std::process::exit(130);
            }
        });
    if let Err(error) = listening {
        tracing::warn!(%error, "cannot start the signal thread; stop the process with SIGKILL");
    }
    rx
}

/// End the process [`SHUTDOWN_BACKSTOP`] after `limit` if it is still running.
pub fn start_shutdown_watchdog(limit: Duration) {
    let spawned = std::thread::Builder::new()
        .name("shutdown-watchdog".into())
        .spawn(move || {
            std::thread::sleep(limit + SHUTDOWN_BACKSTOP);
            eprintln!(
                "sqlgrade: error: shutdown did not finish within {limit:?} \
                 (pipeline.shutdown_timeout_ms); exiting. Events not yet written stay \
                 uncommitted and are redelivered on the next start"
            );
            std::process::exit(i32::from(EXIT_SHUTDOWN_INCOMPLETE));
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot start the shutdown watchdog");
    }
}
