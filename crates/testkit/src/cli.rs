//! Running the `sqlgrade` binary from tests.

use std::path::Path;
use std::process::Command;

/// The binary in `cwd`, with a clean `SQLGRADE__*` environment and quiet logs.
pub fn sqlgrade(cwd: &Path) -> Command {
    let mut cmd = Command::new(crate::bin::sqlgrade());
    cmd.current_dir(cwd).env("RUST_LOG", "warn");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("SQLGRADE__") {
            cmd.env_remove(key);
        }
    }
    cmd
}
