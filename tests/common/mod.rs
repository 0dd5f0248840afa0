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
