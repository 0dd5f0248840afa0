//! What a review shows of a file besides its results: the keys on which each variant differs
//! from the baseline (patches and swept values alike), and the comment block that states the
//! file's assumptions.

use std::path::Path;

use outagelab_scenario_file::{Difference, differences};

const FILE: &str = r#"# What this models.
#
# Assumed: 10 requests a second.

[scenario]
name = "t"
description = "a file to compare"

[servers.redis]

[connections.c]
server = "redis"
command_timeout = "100ms"

[keys.k]

[databases.db]
latency = "10ms"

[breakers.b]
enabled = false
preset = "polly-v8"

[flows.f]
steps = [{ redis = { command = "GET", connection = "c", key = "k" }, breaker = "b", on_error = "next" }, { db = { name = "db" } }]

[loads.l]
flow = "f"
arrivals = "even"
rate = 10
count = 5

[[variant]]
name = "base"

[[variant]]
name = "breaker"
patch = { breakers = { b = { enabled = true } }, flows = { f = { steps = { 0 = { on_error = "fail" } } } } }

[sweep]
parameter = "connections.c.command_timeout"
label = "timeout"
values = ["100ms", "1s"]
"#;

fn difference(key: &str, baseline: Option<&str>, variant: Option<&str>) -> Difference {
    Difference {
        key: key.to_owned(),
        baseline: baseline.map(str::to_owned),
        variant: variant.map(str::to_owned),
    }
}

#[test]
fn a_variant_differs_from_the_baseline_in_its_patch_and_its_swept_values() {
    let file = outagelab_scenario_file::parse(FILE, Path::new("t.toml")).unwrap();
    let names: Vec<&str> = file.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "base / timeout=100ms",
            "base / timeout=1s",
            "breaker / timeout=100ms",
            "breaker / timeout=1s"
        ]
    );
    let baseline = &file.variants[0];
    assert_eq!(differences(baseline, baseline), []);
    assert_eq!(
        differences(baseline, &file.variants[1]),
        [difference(
            "connections.c.command_timeout",
            Some("\"100ms\""),
            Some("\"1s\"")
        )]
    );
    assert_eq!(
        differences(baseline, &file.variants[3]),
        [
            difference("breakers.b.enabled", Some("false"), Some("true")),
            difference(
                "connections.c.command_timeout",
                Some("\"100ms\""),
                Some("\"1s\"")
            ),
            difference(
                "flows.f.steps.0.on_error",
                Some("\"next\""),
                Some("\"fail\"")
            ),
        ]
    );
}

#[test]
fn a_key_only_one_side_sets_shows_as_missing_on_the_other() {
    let text = FILE.replace(
        "patch = { breakers = { b = { enabled = true } }, flows = { f = { steps = { 0 = { on_error = \"fail\" } } } } }",
        "patch = { databases = { db = { capacity = 4 } } }",
    );
    let file = outagelab_scenario_file::parse(&text, Path::new("t.toml")).unwrap();
    assert_eq!(
        differences(&file.variants[0], &file.variants[2]),
        [difference("databases.db.capacity", None, Some("4"))]
    );
    assert_eq!(
        differences(&file.variants[2], &file.variants[0]),
        [difference("databases.db.capacity", Some("4"), None)]
    );
}

#[test]
fn the_preamble_is_the_leading_comment_block_and_the_description_is_kept() {
    let file = outagelab_scenario_file::parse(FILE, Path::new("t.toml")).unwrap();
    assert_eq!(
        file.preamble,
        ["What this models.", "", "Assumed: 10 requests a second."]
    );
    assert_eq!(file.description.as_deref(), Some("a file to compare"));
    let bare = FILE.replace(
        "# What this models.\n#\n# Assumed: 10 requests a second.\n",
        "",
    );
    let file = outagelab_scenario_file::parse(&bare, Path::new("t.toml")).unwrap();
    assert!(file.preamble.is_empty(), "{:?}", file.preamble);
}
