//! A real OpenAI-compatible model server for the LLM-judge tests: llama.cpp's server as
//! packaged on PyPI (`llama-cpp-python[server]`) with Gemma 3 270M Q4_K_M, both installed by
//! `scripts/services.sh install` under `~/.cache/sqlgrade/`, started as a child process on a
//! free loopback port.
//!
//! It is what a user runs locally, so the tests see the real wire: its rejections (HTTP 500 for
//! `json_schema`), its grammar-constrained `json_object` mode, its token counts and its
//! `finish_reason`. A model this small judges badly; tests check the path, not the verdicts.
//! Everything the server decides is bounded: startup by [`STARTUP_TIMEOUT`], a generation by the
//! caller's `max_tokens`, and the process is killed on drop.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::servers::{free_port, http_get, skip, stop_child, wait_for_start};

/// The model file's name under the models directory.
pub const MODEL_FILE: &str = "gemma-3-270m-q4_k_m.gguf";

/// The name the server answers to (`model` in requests).
pub const MODEL_ALIAS: &str = "gemma-3-270m";

/// Loading a 253 MB model and importing the server takes a few seconds; this bounds it.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(120);

/// The model's chat template. The GGUF carries none, and llama-cpp-python would fall back to
/// Llama 2's; its `gemma` format drops `system` messages, so the judge config that goes with it
/// sets `judge.system_prompt = "in_user"`.
pub const CHAT_FORMAT: &str = "gemma";

/// Threads the server computes with. Fixed, so that the same build gives the same tokens.
pub const THREADS: u32 = 2;

/// Context window: the longest judge prompt (STEF, ~2,700 tokens) with its reply and a repair
/// turn.
pub const CONTEXT_TOKENS: u32 = 8192;

fn cache_dir() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
        .join(".cache/sqlgrade")
}

/// The virtualenv `services.sh` built the server into (`SQLGRADE_LLAMA_VENV` overrides).
pub fn venv() -> PathBuf {
    std::env::var_os("SQLGRADE_LLAMA_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("llama-venv"))
}

/// The model `services.sh` assembled (`SQLGRADE_MODEL_DIR` overrides its directory).
pub fn model_path() -> PathBuf {
    std::env::var_os("SQLGRADE_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("models"))
        .join(MODEL_FILE)
}

/// A running `python -m llama_cpp.server`.
pub struct LlamaServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    child: Option<Child>,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl LlamaServer {
    /// Start the server for `test`; `None` after a loud SKIPPED message (a panic under
    /// `SQLGRADE_REQUIRE_SERVERS`) when it is not installed or does not come up.
    pub fn start(test: &str) -> Option<LlamaServer> {
        match LlamaServer::try_start() {
            Ok(server) => Some(server),
            Err(e) => {
                skip(test, &e);
                None
            }
        }
    }

    fn try_start() -> Result<LlamaServer, String> {
        let python = venv().join("bin/python");
        let model = model_path();
        if !python.is_file() || !model.is_file() {
            return Err(format!(
                "the llama.cpp server ({}) or the model ({}) is not installed",
                python.display(),
                model.display()
            ));
        }
        let dir = tempfile::Builder::new()
            .prefix("sqlgrade-llama-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let log = dir.path().join("server.log");
        let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let port = free_port();
        let child = Command::new(&python)
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(&model)
            .args([
                "--model_alias",
                MODEL_ALIAS,
                "--host",
                "127.0.0.1",
                "--port",
            ])
            .arg(port.to_string())
            .args(["--chat_format", CHAT_FORMAT])
            .args(["--n_ctx", &CONTEXT_TOKENS.to_string()])
            .args(["--n_threads", &THREADS.to_string()])
            .args(["--n_threads_batch", &THREADS.to_string()])
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(|e| e.to_string())?)
            .stderr(out)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", python.display()))?;
        let mut server = LlamaServer {
            port,
            child: Some(child),
            log,
            _dir: dir,
        };
        let log = server.log.clone();
        let child = server.child.as_mut().expect("just spawned");
        wait_for_start(
            &format!("the llama.cpp server (port {port})"),
            child,
            STARTUP_TIMEOUT,
            &[log],
            || http_get(port, "/v1/models").is_some(),
        )?;
        Ok(server)
    }

    /// `http://127.0.0.1:PORT/v1`, for `judge.base_url`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// The last `chars` characters of the server's log (for assertion messages).
    pub fn log_tail(&self, chars: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let skip = text.chars().count().saturating_sub(chars);
        text.chars().skip(skip).collect()
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        stop_child(&mut self.child, "TERM", Duration::from_secs(5));
    }
}
