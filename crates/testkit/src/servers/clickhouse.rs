//! A real ClickHouse server (Debian's `clickhouse-server`) as a child process on free
//! loopback ports, its state in the test's temp dir.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::process::{
    find_binary, free_port, http_request_to, http_request_within, log_queries, stop_child,
    wait_for_start,
};

/// How long a ClickHouse server may take to answer `/ping` after its start.
const CLICKHOUSE_START: Duration = Duration::from_secs(120);

/// How long one `/ping` of a starting server may take.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// A ClickHouse server process.
pub struct ClickHouse {
    dir: PathBuf,
    /// Loopback address it listens on (127.0.0.1; other 127.0.0.x for the nodes of a cluster).
    pub host: String,
    pub http_port: u16,
    pub tcp_port: u16,
    child: Option<Child>,
    binary: PathBuf,
}

impl ClickHouse {
    /// Start a server with its state under `root/clickhouse`.
    pub fn start_in(root: &Path) -> Result<ClickHouse, String> {
        ClickHouse::start_node(
            root,
            "clickhouse",
            "127.0.0.1",
            (free_port(), free_port()),
            "",
        )
    }

    /// Start a server with its state under `root/subdir`, listening on `host` (a loopback
    /// address) at (HTTP, TCP) `ports`, with `extra_xml` added to its config (cluster settings).
    pub fn start_node(
        root: &Path,
        subdir: &str,
        host: &str,
        ports: (u16, u16),
        extra_xml: &str,
    ) -> Result<ClickHouse, String> {
        let binary = find_binary(
            "clickhouse-server",
            &[PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")],
        )
        .ok_or("clickhouse-server not installed (run scripts/services.sh install)")?;
        let dir = root.join(subdir);
        std::fs::create_dir_all(dir.join("log")).map_err(|e| e.to_string())?;
        let (http_port, tcp_port) = ports;
        let support = crate::data::repo_root().join("tests/support");
        let config = std::fs::read_to_string(support.join("clickhouse-config.xml.tmpl"))
            .map_err(|e| e.to_string())?
            .replace("@DIR@", &dir.to_string_lossy())
            .replace("@HTTP_PORT@", &http_port.to_string())
            .replace("@TCP_PORT@", &tcp_port.to_string())
            .replace(
                "<listen_host>127.0.0.1</listen_host>",
                &format!("<listen_host>{host}</listen_host>"),
            )
            .replace(
                "</yandex>",
                &format!("{extra_xml}\n{}</yandex>", part_log_xml()),
            );
        std::fs::write(dir.join("config.xml"), config).map_err(|e| e.to_string())?;
        let mut users = std::fs::read_to_string(support.join("clickhouse-users.xml.tmpl"))
            .map_err(|e| e.to_string())?;
        if log_queries() {
            users = users.replace(
                "<max_memory_usage>",
                "<log_queries>1</log_queries>\n            <max_memory_usage>",
            );
        }
        std::fs::write(dir.join("users.xml"), users).map_err(|e| e.to_string())?;
        let mut ch = ClickHouse {
            dir,
            host: host.to_string(),
            http_port,
            tcp_port,
            child: None,
            binary,
        };
        ch.launch()?;
        Ok(ch)
    }

    fn launch(&mut self) -> Result<(), String> {
        let log =
            std::fs::File::create(self.dir.join("log/stdout.log")).map_err(|e| e.to_string())?;
        let child = Command::new(&self.binary)
            .arg(format!(
                "--config-file={}",
                self.dir.join("config.xml").display()
            ))
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start clickhouse-server: {e}"))?;
        let child = self.child.insert(child);
        let (host, port) = (self.host.clone(), self.http_port);
        let logs = [
            self.dir.join("log/server.err.log"),
            self.dir.join("log/stdout.log"),
        ];
        // A node of a cluster on a busy 2-core machine has been seen to take over a minute.
        wait_for_start(
            &format!("clickhouse-server (HTTP port {port})"),
            child,
            CLICKHOUSE_START,
            &logs,
            || {
                // Short: whatever else holds the port (it was free a moment ago) may never answer.
                http_request_within(&host, port, "GET /ping HTTP/1.0\r\n\r\n", PING_TIMEOUT)
                    .is_ok_and(|(code, b)| code == 200 && b.starts_with("Ok"))
            },
        )
    }

    /// HTTP URL.
    pub fn url(&self) -> String {
        format!("http://{}:{}", self.host, self.http_port)
    }

    /// Process id while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Stop (SIGTERM).
    pub fn stop(&mut self) {
        stop_child(&mut self.child, "TERM", Duration::from_secs(20));
    }

    /// SIGKILL (a crash); [`ClickHouse::start_again`] brings it back on the same ports and data.
    pub fn kill(&mut self) {
        stop_child(&mut self.child, "KILL", Duration::from_secs(5));
    }

    /// Start again on the same ports and data.
    pub fn restart(&mut self) {
        self.stop();
        self.launch().expect("clickhouse restarts");
    }

    /// Start after [`ClickHouse::stop`].
    pub fn start_again(&mut self) {
        self.launch().expect("clickhouse restarts");
    }

    /// Run a query, return the body (TabSeparated). Panics on failure.
    pub fn query(&self, sql: &str) -> String {
        self.try_query(sql)
            .unwrap_or_else(|e| panic!("query {sql:?} on {} failed: {e}", self.url()))
    }

    /// Run a query; the body, or the error.
    pub fn try_query(&self, sql: &str) -> Result<String, String> {
        self.try_query_at("/", sql)
    }

    /// Run a query in `database`; the body, or the error.
    pub fn try_query_in(&self, database: &str, sql: &str) -> Result<String, String> {
        self.try_query_at(&format!("/?database={database}"), sql)
    }

    fn try_query_at(&self, path: &str, sql: &str) -> Result<String, String> {
        let req = format!(
            "POST {path} HTTP/1.0\r\nHost: {}\r\nContent-Length: {}\r\n\r\n{sql}",
            self.host,
            sql.len()
        );
        match http_request_to(&self.host, self.http_port, &req) {
            Ok((200, body)) => Ok(body),
            Ok((code, body)) => Err(format!("HTTP {code}: {body}")),
            Err(e) => Err(e),
        }
    }

    /// Run a query that returns one number.
    pub fn count(&self, sql: &str) -> u64 {
        let body = self.query(sql);
        body.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{sql:?} returned {body:?}"))
    }
}

impl Drop for ClickHouse {
    fn drop(&mut self) {
        stop_child(&mut self.child, "KILL", Duration::from_secs(5));
    }
}

/// With [`log_queries`], the server also logs every part it writes, merges or removes
/// (`system.part_log`): its merges are background CPU that the query log does not show.
fn part_log_xml() -> &'static str {
    if log_queries() {
        "    <part_log>\n        <database>system</database>\n        <table>part_log</table>\n        \
         <flush_interval_milliseconds>1000</flush_interval_milliseconds>\n    </part_log>\n"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::time::Instant;

    use super::*;
    use crate::servers::process::skip;

    /// A server that cannot bind its port fails at once, in its own words — not after the
    /// start timeout with "did not answer".
    #[test]
    fn a_clickhouse_whose_port_is_taken_fails_at_once_with_its_log() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let result = ClickHouse::start_node(
            dir.path(),
            "clickhouse",
            "127.0.0.1",
            (port, free_port()),
            "",
        );
        let err = match result {
            Ok(_) => panic!("clickhouse started on a port that is taken"),
            Err(e) if e.contains("not installed") => return skip("servers::tests", &e),
            Err(e) => e,
        };
        eprintln!("{err}");
        assert!(err.contains("exited before it was ready"), "{err}");
        assert!(err.contains("last lines of"), "{err}");
        assert!(
            started.elapsed() < CLICKHOUSE_START / 2,
            "{:?}",
            started.elapsed()
        );
    }
}
