//! The `sqlgrade` binary under test.
//!
//! Cargo builds a package's binaries before its integration tests and benches and puts them
//! beside the test executables' `deps/` directory. `SQLGRADE_BIN` (when set in the environment)
//! wins: it is how a bench runs another build (`SQLGRADE_BIN=/tmp/old/sqlgrade cargo bench
//! --bench process`). Then `CARGO_BIN_EXE_sqlgrade`, which cargo itself sets when it runs a
//! test or bench (cargo 1.95 overwrites a value given on the command line, so that one cannot
//! choose the binary).

use std::path::PathBuf;
use std::process::Command;

/// Run `command` (a `sqlgrade` invocation) to the end and return its standard output.
///
/// # Panics
/// When it cannot start or does not exit successfully; the message carries its standard output
/// and standard error.
pub fn run_ok(command: &mut Command) -> String {
    let output = command.output().expect("start the command");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Path of the `sqlgrade` binary built for the running test or bench.
///
/// # Panics
/// When the binary is not there (test support: nothing can run without it).
pub fn sqlgrade() -> PathBuf {
    for variable in ["SQLGRADE_BIN", "CARGO_BIN_EXE_sqlgrade"] {
        if let Some(path) = std::env::var_os(variable).filter(|p| !p.is_empty()) {
            return PathBuf::from(path);
        }
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    let mut dir = exe.parent().expect("a directory").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let bin = dir.join(format!("sqlgrade{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "the sqlgrade binary is not at {} (build it: cargo build)",
        bin.display()
    );
    bin
}
