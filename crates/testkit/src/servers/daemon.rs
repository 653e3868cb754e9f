//! The `sqlgrade` daemon as a child process (`sqlgrade run` with a config file).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::process::{http_get, signal, strip_ansi};

/// A running `sqlgrade run` process.
pub struct Daemon {
    pub child: Option<Child>,
    pub config: PathBuf,
    pub log: PathBuf,
    pub health_port: u16,
}

impl Daemon {
    /// Spawn `sqlgrade run --config <config>` with output in `log`.
    pub fn spawn(config: &Path, log: &Path, health_port: u16) -> Daemon {
        Daemon::spawn_binary(&crate::bin::sqlgrade(), config, log, health_port)
    }

    /// [`Daemon::spawn`] with another build of `sqlgrade` (benchmarks compare two).
    pub fn spawn_binary(binary: &Path, config: &Path, log: &Path, health_port: u16) -> Daemon {
        Daemon::spawn_with_env(binary, config, log, health_port, &[])
    }

    /// [`Daemon::spawn_binary`] with more environment variables.
    pub fn spawn_with_env(
        binary: &Path,
        config: &Path,
        log: &Path,
        health_port: u16,
        env: &[(String, String)],
    ) -> Daemon {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = Command::new(binary)
            .args(["run", "--config"])
            .arg(config)
            .env("RUST_LOG", "info,rdkafka=warn")
            .env("NO_COLOR", "1")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("sqlgrade spawns");
        Daemon {
            child: Some(child),
            config: config.to_path_buf(),
            log: log.to_path_buf(),
            health_port,
        }
    }

    /// SIGKILL (no cleanup at all).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for the exit code.
    pub fn terminate(&mut self, timeout: Duration) -> Option<i32> {
        let mut c = self.child.take()?;
        signal(&c, "TERM");
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = c.try_wait() {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The exit status if the process has ended (a config it rejected, a crash); `None` while
    /// it runs or after [`kill9`](Daemon::kill9) / [`terminate`](Daemon::terminate).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Whether `/readyz` answers 200.
    pub fn ready(&self) -> bool {
        http_get(self.health_port, "/readyz").is_some()
    }

    /// The daemon's log so far (ANSI colour codes removed).
    pub fn log_text(&self) -> String {
        strip_ansi(&std::fs::read_to_string(&self.log).unwrap_or_default())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}
