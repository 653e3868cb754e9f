//! Child processes and loopback ports for the test servers: free ports, waiting for a start,
//! stopping with a signal, log tails, tiny HTTP requests, state directories, start attempts
//! and the loud SKIPPED message.

use std::io::Write as _;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free loopback TCP port (bound, read, released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(crate) fn port_open(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Duration::from_millis(200),
    )
    .is_ok()
}

/// Wait until `ready` holds for a child process just spawned: `Ok` when it does, `Err` with the
/// reason — and the tail of its `logs` — when the process exits first or `timeout` passes.
/// Checking for an early exit turns "did not answer in 60 s" into the process's own words at once
/// (a port taken between [`free_port`] and the bind, a bad config).
pub fn wait_for_start(
    what: &str,
    child: &mut Child,
    timeout: Duration,
    logs: &[PathBuf],
    mut ready: impl FnMut() -> bool,
) -> Result<(), String> {
    let started = Instant::now();
    let deadline = started + timeout;
    loop {
        if ready() {
            return Ok(());
        }
        let reason = match child.try_wait() {
            Ok(Some(status)) => format!("{what} exited before it was ready ({status})"),
            _ if Instant::now() >= deadline => {
                format!("{what} was not ready after {} s", timeout.as_secs())
            }
            _ => {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        return Err(format!("{reason}; {}", log_tails(logs, 12)));
    }
}

/// The last `lines` lines of each file in `logs` that exists and is not empty, labelled.
pub fn log_tails(logs: &[PathBuf], lines: usize) -> String {
    let mut out = String::new();
    for path in logs {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let all: Vec<&str> = text.lines().collect();
        if all.is_empty() {
            continue;
        }
        let tail = &all[all.len().saturating_sub(lines)..];
        out.push_str(&format!(
            "\n--- last lines of {} ---\n{}",
            path.display(),
            tail.join("\n")
        ));
    }
    if out.is_empty() {
        "its logs are empty".to_string()
    } else {
        out
    }
}

pub fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

pub(crate) fn find_binary(name: &str, extra_dirs: &[PathBuf]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra_dirs.iter().cloned())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

pub(crate) fn signal(child: &Child, sig: &str) {
    // Quiet: the process may have exited already ("No such process").
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .stderr(Stdio::null())
        .status();
}

pub fn stop_child(child: &mut Option<Child>, sig: &str, timeout: Duration) {
    if let Some(mut c) = child.take() {
        signal(&c, sig);
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(_)) = c.try_wait() {
                break;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Whether test servers log every query to `system.query_log`
/// (`SQLGRADE_CLICKHOUSE_LOG_QUERIES=1`; benches use it to say what the server spent its CPU on).
pub fn log_queries() -> bool {
    std::env::var("SQLGRADE_CLICKHOUSE_LOG_QUERIES").is_ok_and(|v| v == "1")
}

/// How many times [`Servers::start`] and [`Servers::start_cluster`] try, each in a fresh state
/// dir on fresh ports: a port that [`free_port`] handed out can be taken by another process's
/// outgoing connection before the server binds it, and nothing but a new port helps then.
pub(crate) const START_ATTEMPTS: u32 = 3;

/// Minimal blocking HTTP/1.0 GET; the body on 200.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    http_request(
        port,
        &format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"),
    )
    .ok()
    .and_then(|(code, body)| (code == 200).then_some(body))
}

/// Minimal blocking HTTP/1.0 POST; the body on 200, the error body otherwise.
pub fn http_post(port: u16, path: &str, body: &str) -> Result<String, String> {
    let req = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    match http_request(port, &req) {
        Ok((200, body)) => Ok(body),
        Ok((code, body)) => Err(format!("HTTP {code}: {body}")),
        Err(e) => Err(e),
    }
}

/// Send a raw request to 127.0.0.1, return (status, body).
pub fn http_request(port: u16, request: &str) -> Result<(u16, String), String> {
    http_request_to("127.0.0.1", port, request)
}

/// Send a raw request to `host`, return (status, body); at most 60 s for the answer.
pub fn http_request_to(host: &str, port: u16, request: &str) -> Result<(u16, String), String> {
    http_request_within(host, port, request, Duration::from_secs(60))
}

/// Send a raw request to `host`, return (status, body); at most `timeout` between reads.
pub fn http_request_within(
    host: &str,
    port: u16,
    request: &str,
    timeout: Duration,
) -> Result<(u16, String), String> {
    use std::io::Read as _;
    let mut s = std::net::TcpStream::connect((host, port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(timeout)).ok();
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .ok_or("bad HTTP response")?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((code, body))
}

/// The root under which [`Servers`] make their temp dirs, when set ([`set_state_root`]).
pub(crate) static STATE_ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Keep the state of every server started from now on in a fresh directory under `root`
/// instead of the system temp dir — the daemon benchmark puts it on a tmpfs, so that the file
/// system's own work (ext4 with online discard, freeing what earlier runs wrote) does not drift
/// from run to run. The first call wins; later calls are ignored.
pub fn set_state_root(root: PathBuf) {
    let _ = STATE_ROOT.set(root);
}

/// A fresh temp dir for the servers of `test`.
pub(crate) fn state_dir(test: &str) -> tempfile::TempDir {
    let prefix = format!("sqlgrade-{test}-");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix);
    match STATE_ROOT.get() {
        Some(root) => builder.tempdir_in(root),
        None => builder.tempdir(),
    }
    .unwrap()
}

/// Run `start` up to [`START_ATTEMPTS`] times, saying why each failed attempt failed; the last
/// error when none succeeds. A missing binary fails every attempt the same way, at once.
pub(crate) fn attempts<T>(
    test: &str,
    mut start: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let mut attempt = 1;
    loop {
        match start() {
            Ok(started) => return Ok(started),
            Err(e) if attempt < START_ATTEMPTS && !e.contains("not installed") => {
                eprintln!(
                    "{test}: starting the test servers failed (attempt {attempt} of \
                     {START_ATTEMPTS}), trying again on fresh ports: {e}"
                );
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Print a loud SKIPPED message (or panic when `SQLGRADE_REQUIRE_SERVERS` is set, as the test
/// script sets it after starting the servers' installation).
pub fn skip(test: &str, why: &str) {
    let msg = format!(
        "\n\n======== SKIPPED {test}: cannot start the test servers: {why}\n======== run `scripts/services.sh install` first\n\n"
    );
    eprintln!("{msg}");
    if std::env::var_os("SQLGRADE_REQUIRE_SERVERS").is_some() {
        panic!("{msg}");
    }
}

/// Remove ANSI escape sequences (`ESC [ … letter`).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Poll `check` until it returns true or `timeout` passes.
pub fn eventually(timeout: Duration, check: impl FnMut() -> bool) -> bool {
    wait_until(timeout, check)
}

/// CPU seconds (user + system) process `pid` has used so far (`/proc/<pid>/stat`; 0 when it
/// cannot be read).
pub fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<f64>().ok()))
        .sum();
    ticks / 100.0
}
