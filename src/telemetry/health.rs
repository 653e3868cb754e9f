//! Liveness and readiness for orchestrators: `GET /healthz` and `GET /readyz`.
//!
//! Components (the Kafka source, the ClickHouse sink, …) report their state into a shared
//! [`Health`] registry; [`serve`] answers over HTTP:
//!
//! - `/healthz` — 200 while the process is alive and no component has failed for good
//!   (a `Failed` component means "restart me"); 503 otherwise.
//! - `/readyz` — 200 once the pipeline is running, every component is `Ok`, and shutdown has not
//!   begun; 503 while starting, degraded (e.g. the sink is retrying a stopped ClickHouse) or
//!   draining.
//!
//! Both return a small JSON body listing the components, so a human can see why.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use serde::Serialize;

/// One component's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "detail", rename_all = "snake_case")]
pub enum ComponentHealth {
    /// Working normally.
    Ok,
    /// Working but impaired (retrying, lagging); not ready, still alive.
    Degraded(String),
    /// Broken for good; the process should be restarted.
    Failed(String),
}

/// Lifecycle phase of the whole process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Connecting, migrating, waiting for partitions.
    Starting,
    /// Consuming and writing.
    Running,
    /// Shutdown requested: draining, flushing, committing.
    Draining,
}

/// How often and how long one component was not `Ok` (degraded or failed) during the run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Outage {
    /// Times it left `Ok`.
    pub episodes: u32,
    /// Time spent not `Ok`, the ongoing episode included.
    pub total: Duration,
    /// The longest episode.
    pub longest: Duration,
    /// Failed attempts reported while not `Ok` (each a degraded or failed report: an insert, a
    /// produce, a judgment or a connection that failed and is retried).
    pub failures: u64,
}

#[derive(Debug, Default)]
struct OutageClock {
    since: Option<Instant>,
    outage: Outage,
}

/// Shared health registry (cheap to update from any task).
#[derive(Debug)]
pub struct Health {
    phase: AtomicU8,
    components: Mutex<BTreeMap<String, ComponentHealth>>,
    outages: Mutex<BTreeMap<String, OutageClock>>,
}

impl Default for Health {
    fn default() -> Self {
        Health::new()
    }
}

#[derive(Serialize)]
struct Report<'a> {
    status: &'a str,
    phase: Phase,
    components: BTreeMap<String, ComponentHealth>,
}

impl Health {
    /// A registry in phase [`Phase::Starting`] with no components.
    pub fn new() -> Health {
        Health {
            phase: AtomicU8::new(0),
            components: Mutex::new(BTreeMap::new()),
            outages: Mutex::new(BTreeMap::new()),
        }
    }

    /// Set the process phase.
    pub fn set_phase(&self, phase: Phase) {
        let v = match phase {
            Phase::Starting => 0,
            Phase::Running => 1,
            Phase::Draining => 2,
        };
        self.phase.store(v, Ordering::Release);
    }

    /// The process phase.
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Acquire) {
            0 => Phase::Starting,
            1 => Phase::Running,
            _ => Phase::Draining,
        }
    }

    /// Record a component's state (logs transitions).
    pub fn set(&self, component: &str, state: ComponentHealth) {
        let mut map = self
            .components
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let previous = map.insert(component.to_string(), state.clone());
        {
            let mut outages = self
                .outages
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let clock = outages.entry(component.to_string()).or_default();
            if !matches!(state, ComponentHealth::Ok) {
                clock.outage.failures += 1;
            }
            match (&state, clock.since) {
                (ComponentHealth::Ok, Some(since)) => {
                    let episode = since.elapsed();
                    clock.outage.total += episode;
                    clock.outage.longest = clock.outage.longest.max(episode);
                    clock.since = None;
                }
                (ComponentHealth::Degraded(_) | ComponentHealth::Failed(_), None) => {
                    clock.outage.episodes += 1;
                    clock.since = Some(Instant::now());
                }
                _ => {}
            }
        }
        if previous.as_ref() != Some(&state) {
            match (&previous, &state) {
                (Some(ComponentHealth::Ok) | None, ComponentHealth::Ok) => {}
                _ => tracing::info!(component, state = ?state, "health changed"),
            }
        }
    }

    /// Each component that was not `Ok` at some point: how often and how long (an ongoing
    /// episode counted up to now).
    pub fn outages(&self) -> BTreeMap<String, Outage> {
        let outages = self
            .outages
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        outages
            .iter()
            .filter(|(_, c)| c.outage.episodes > 0)
            .map(|(name, c)| {
                let mut outage = c.outage;
                if let Some(since) = c.since {
                    let ongoing = since.elapsed();
                    outage.total += ongoing;
                    outage.longest = outage.longest.max(ongoing);
                }
                (name.clone(), outage)
            })
            .collect()
    }

    /// Every component's current state, by name.
    pub fn components(&self) -> BTreeMap<String, ComponentHealth> {
        self.snapshot()
    }

    fn snapshot(&self) -> BTreeMap<String, ComponentHealth> {
        self.components
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Alive: no component has failed for good.
    pub fn is_live(&self) -> bool {
        !self
            .snapshot()
            .values()
            .any(|c| matches!(c, ComponentHealth::Failed(_)))
    }

    /// Ready: running, and every component is `Ok`.
    pub fn is_ready(&self) -> bool {
        self.phase() == Phase::Running
            && self
                .snapshot()
                .values()
                .all(|c| matches!(c, ComponentHealth::Ok))
    }

    fn report(&self, ok: bool) -> (StatusCode, String) {
        let report = Report {
            status: if ok { "ok" } else { "unavailable" },
            phase: self.phase(),
            components: self.snapshot(),
        };
        let body = serde_json::to_string(&report)
            .unwrap_or_else(|_| r#"{"status":"unknown"}"#.to_string());
        let code = if ok {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        (code, body)
    }
}

/// Why the health endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    /// The listen address is not `host:port`, or its host does not resolve.
    #[error("invalid listen address {listen:?}")]
    Address {
        /// The address as configured.
        listen: String,
        /// The resolver's error (none when it resolved to no address at all).
        #[source]
        source: Option<std::io::Error>,
    },
    /// The server would be unsafe as configured (the review page beyond localhost without a
    /// token): the message says why and what to set.
    #[error("{0}")]
    Refused(String),
    /// Binding failed (port in use, permission).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address.
        addr: String,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// A running health endpoint; stops when dropped or on [`HealthServer::shutdown`].
#[derive(Debug)]
pub struct HealthServer {
    /// The bound address (useful with port 0).
    pub local_addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl HealthServer {
    /// Stop serving and wait for the server task.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for HealthServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Resolve and bind `listen` (`host:port`; port 0 picks a free one): the listener and the
/// address it got. Shared by the health endpoint and the review page (`sqlgrade serve`).
pub async fn bind(listen: &str) -> Result<(tokio::net::TcpListener, SocketAddr), HealthError> {
    let addr: SocketAddr = tokio::net::lookup_host(listen)
        .await
        .map_err(|source| HealthError::Address {
            listen: listen.to_string(),
            source: Some(source),
        })?
        .next()
        .ok_or_else(|| HealthError::Address {
            listen: listen.to_string(),
            source: None,
        })?;
    let bind_error = |source| HealthError::Bind {
        addr: listen.to_string(),
        source,
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(bind_error)?;
    let local_addr = listener.local_addr().map_err(bind_error)?;
    Ok((listener, local_addr))
}

/// Bounds every HTTP server of the daemon puts on its connections (the health endpoint and review
/// page, `sqlgrade serve`, the OTLP receiver), so half-sent requests cannot hold it.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// A request's headers must arrive within this; it also closes a keep-alive connection
    /// idle this long (hyper starts the timer when it waits for the next request).
    pub header_read_timeout: std::time::Duration,
    /// Connections open at once; the next one waits to be accepted until one closes.
    pub max_connections: usize,
    /// The longest any one connection lives (a request whose body trickles in).
    pub max_connection_age: std::time::Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_read_timeout: std::time::Duration::from_secs(10),
            max_connections: 256,
            max_connection_age: std::time::Duration::from_secs(300),
        }
    }
}

/// Serve `app` on `listener` until `shutdown` completes, each connection under `limits`:
/// HTTP/1.1 with a header read timeout (idle keep-alive included), at most
/// `max_connections` at once (accepting waits for a free one), and none older than
/// `max_connection_age`. On shutdown, connections finish their request in flight (up to 5 s).
pub async fn serve_bounded(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = std::sync::Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of file descriptors and the like: wait a little, go on.
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        let age = limits.max_connection_age;
        tokio::spawn(async move {
            let _ = tokio::time::timeout(age, connection).await;
            drop(permit);
        });
    }
    if tokio::time::timeout(std::time::Duration::from_secs(5), graceful.shutdown())
        .await
        .is_err()
    {
        tracing::debug!("HTTP connections still open at shutdown; closing them");
    }
}

/// Bind `listen` and serve `/healthz` and `/readyz` from `health` in a background task, plus
/// the routes of `extra` (the review page with `[server] review = true`).
pub async fn serve(
    listen: &str,
    health: std::sync::Arc<Health>,
    extra: Option<Router>,
) -> Result<HealthServer, HealthError> {
    let (listener, local_addr) = bind(listen).await?;
    let live = health.clone();
    let ready = health;
    let app = Router::new()
        .route(
            "/healthz",
            get(move || {
                let h = live.clone();
                async move { h.report(h.is_live()).into_response() }
            }),
        )
        .route(
            "/readyz",
            get(move || {
                let h = ready.clone();
                async move { h.report(h.is_ready()).into_response() }
            }),
        );
    let app = match extra {
        Some(extra) => app.merge(extra),
        None => app,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve_bounded(
        listener,
        app,
        ConnectionLimits::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    tracing::info!(%local_addr, "health endpoint listening (/healthz, /readyz)");
    Ok(HealthServer {
        local_addr,
        stop: Some(stop),
        task: Some(task),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn outages_count_episodes_and_time_away_from_ok() {
        let health = Health::new();
        health.set("sink", ComponentHealth::Ok);
        assert!(health.outages().is_empty());
        health.set("sink", ComponentHealth::Degraded("retrying".into()));
        std::thread::sleep(Duration::from_millis(20));
        // Another degraded report of the same episode is not a new one.
        health.set("sink", ComponentHealth::Degraded("still retrying".into()));
        health.set("sink", ComponentHealth::Ok);
        health.set("kafka", ComponentHealth::Degraded("no broker".into()));
        let outages = health.outages();
        let sink = outages["sink"];
        assert_eq!(sink.episodes, 1);
        assert_eq!(sink.failures, 2, "each degraded report is a failed attempt");
        assert!(sink.total >= Duration::from_millis(20) && sink.longest == sink.total);
        // The ongoing one counts up to now.
        assert_eq!(outages["kafka"].episodes, 1);
        assert_eq!(outages["kafka"].failures, 1);
    }

    async fn get_status(addr: SocketAddr, path: &str) -> (u16, String) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.unwrap();
        let code = buf[9..12].parse().unwrap();
        (code, buf)
    }

    #[tokio::test]
    async fn endpoints_follow_phase_and_components() {
        let health = Arc::new(Health::new());
        let server = serve("127.0.0.1:0", health.clone(), None).await.unwrap();
        let addr = server.local_addr;
        assert_eq!(get_status(addr, "/healthz").await.0, 200);
        assert_eq!(get_status(addr, "/readyz").await.0, 503);
        health.set("clickhouse", ComponentHealth::Ok);
        health.set_phase(Phase::Running);
        assert_eq!(get_status(addr, "/readyz").await.0, 200);
        health.set("clickhouse", ComponentHealth::Degraded("retrying".into()));
        let (code, body) = get_status(addr, "/readyz").await;
        assert_eq!(code, 503);
        assert!(body.contains("retrying"), "{body}");
        assert_eq!(get_status(addr, "/healthz").await.0, 200);
        health.set("kafka", ComponentHealth::Failed("fatal".into()));
        assert_eq!(get_status(addr, "/healthz").await.0, 503);
        health.set_phase(Phase::Draining);
        assert_eq!(get_status(addr, "/readyz").await.0, 503);
        assert_eq!(get_status(addr, "/nope").await.0, 404);
        server.shutdown().await;
    }
}
