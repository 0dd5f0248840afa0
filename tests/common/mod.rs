//! What the command-line tests share: the binary, run from the checkout, and a scratch
//! directory per test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the `outagelab` binary with `args` from the checkout's root.
pub fn outagelab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_outagelab"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

/// A fresh directory under the target directory for this test's files.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the binary with `args` and returns its standard output; fails the test, with its
/// standard error, unless it exits 0.
#[allow(dead_code, reason = "not every test binary needs a command to succeed")]
pub fn succeed(args: &[&str]) -> String {
    let output = outagelab(args);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}
