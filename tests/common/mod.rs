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

/// A report (`run --json`, `live --json`) read back.
#[allow(dead_code, reason = "not every test binary reads a report")]
pub fn read_report(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("the report was written"))
        .expect("the report is JSON")
}

/// The variant named `name` of a report.
#[allow(dead_code, reason = "not every test binary reads a report")]
pub fn variant<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    (report["variants"]
        .as_array()
        .expect("a report has variants")
        .iter())
    .find(|variant| variant["name"] == name)
    .unwrap_or_else(|| panic!("no variant {name}"))
}

/// `file` simulated (`run`) and run live against the server at `address` (`live`), each with
/// `extra` arguments, their reports written in `dir` and read back: (simulated, live).
#[allow(dead_code, reason = "only the live test binaries run both")]
pub fn simulated_and_live(
    file: &str,
    address: &str,
    dir: &Path,
    extra: &[&str],
) -> (serde_json::Value, serde_json::Value) {
    let (simulated, live) = (dir.join("simulated.json"), dir.join("live.json"));
    let run = ["run", file, "--json", simulated.to_str().unwrap()];
    succeed(&[&run[..], extra].concat());
    let live_args = [
        "live",
        file,
        "--redis",
        address,
        "--json",
        live.to_str().unwrap(),
    ];
    succeed(&[&live_args[..], extra].concat());
    (read_report(&simulated), read_report(&live))
}
