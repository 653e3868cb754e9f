//! The `sqlgrade` binary under test.
//!
//! Cargo builds a package's binaries before its integration tests and benches and puts them
//! beside the test executables' `deps/` directory; `CARGO_BIN_EXE_sqlgrade` (when set in the
//! environment) wins.

use std::path::PathBuf;

/// Path of the `sqlgrade` binary built for the running test or bench.
///
/// # Panics
/// When the binary is not there (test support: nothing can run without it).
pub fn sqlgrade() -> PathBuf {
    if let Some(path) = std::env::var_os("CARGO_BIN_EXE_sqlgrade") {
        return PathBuf::from(path);
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
