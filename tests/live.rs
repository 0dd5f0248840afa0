//! `outagelab live`'s command line: what it refuses before touching a server (exit 2, the file,
//! the variant and the key named), with no server needed.

mod common;

use common::{outagelab, scratch};

#[test]
fn a_feature_a_live_run_cannot_do_is_refused_by_file_variant_and_key() {
    let dir = scratch("live-refusals");
    let file = dir.join("cache.toml");
    std::fs::write(
        &file,
        r#"[scenario]
name = "cache"

[caches.l1]
max_entries = 10
max_bytes = "1MiB"
ttl = "1s"

[keys.k]
count = 1

[flows.read]
steps = [{ cache = { name = "l1", op = "get", key = "k" } }]

[loads.l]
flow = "read"
arrivals = "burst"
count = 1
"#,
    )
    .unwrap();
    let file = file.to_str().unwrap();
    // Port 9 (discard) on loopback: nothing is sent, since the file is refused first.
    let output = outagelab(&["live", file, "--redis", "127.0.0.1:9"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{file}: variant \"base\": flows.read.steps[0].cache: in-process cache steps are \
             not run live"
        )),
        "{stderr}"
    );

    let output = outagelab(&[
        "live",
        "scenarios/closed-loop-pause.toml",
        "--redis",
        "127.0.0.1:9",
        "--variant",
        "closed loop",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--variant \"closed loop\": scenarios/closed-loop-pause.toml has no such variant (it has: \"closed loop, 50 callers\", \"open loop, same mean rate\")"),
        "{stderr}"
    );

    let output = outagelab(&[
        "live",
        "scenarios/closed-loop-pause.toml",
        "--redis",
        "127.0.0.1:9",
        "--horizon",
        "0s",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--horizon: must be longer than zero")
    );
}
