//! The command tables together. `[fit]` unknowns and `[tune]` knobs start from the file's
//! value, so their range must hold it when `fit` or `tune` (or `validate`) reads the file; a
//! copy whose values another command set (an explored schedule, a map point, a reproducer)
//! reads with the value outside. A key tune tunes cannot be one explore draws (the tuned
//! value would be drawn over), and no command varies a key a `[sweep]` sets.

use std::path::Path;

use outagelab_scenario_file::{Starts, parse, parse_checking};

/// The bundled postmortem file (`[observed]` and `[fit]` over the pause's duration, 500 ms to
/// 4 s, and the connection's timeout), read where its observed file is.
fn postmortem() -> (String, &'static Path) {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/postmortem-pause.toml"
    ));
    (std::fs::read_to_string(path).unwrap(), path)
}

const TEMPLATE: &str = "[explore]\nvariants = [\"breaker\"]\n\
    [explore.faults.stall]\ntarget = \"redis\"\nkind = \"pause\"\nat = { min = \"1s\", max = \"3s\" }\n";

fn refused(text: &str, path: &Path, starts: Starts, at: &str, expected: &str) {
    let message = parse_checking(text, path, &[], starts)
        .expect_err("refused")
        .to_string();
    assert!(message.contains(at), "not at {at}:\n{message}");
    assert!(message.contains(expected), "not `{expected}`:\n{message}");
}

#[test]
fn a_value_outside_fit_s_range_is_refused_only_where_fit_starts_from_it() {
    let (base, path) = postmortem();
    let outside = base.replace("duration = \"1502200us\"", "duration = \"6s\"");
    assert_ne!(outside, base);
    // What a map point or an explored schedule reads, and what `run` reads.
    let file = parse(&outside, path).unwrap_or_else(|d| panic!("{d}"));
    assert!(file.fit.is_some());
    for starts in [
        Starts::ALL,
        Starts {
            fit: true,
            tune: false,
        },
    ] {
        refused(
            &outside,
            path,
            starts,
            "fit.unknowns.\"faults.pause.duration\"",
            "the file's value, \"6s\", is outside the range: the search starts from it",
        );
    }
    // Explore may draw a key fit searches, and map may set it, past fit's range.
    let both = format!(
        "{base}\n{TEMPLATE}[explore.params]\n\"faults.pause.duration\" = {{ min = \"5s\", max = \"8s\" }}\n\
         [map]\nfault = \"pause\"\n\
         trigger = {{ key = \"faults.pause.duration\", values = [\"1s\", \"6s\"] }}\n\
         load = {{ key = \"loads.steady.rate\", values = [100, 200] }}\n\
         recovered = {{ metric = \"failed_per_s\", at_most = 0, for = \"1s\" }}\n"
    );
    let file = parse_checking(&both, path, &[], Starts::ALL).unwrap_or_else(|d| panic!("{d}"));
    assert!(file.fit.is_some() && file.explore.is_some() && file.map.is_some());
}

#[test]
fn tune_cannot_tune_what_explore_draws() {
    let (base, path) = postmortem();
    let without_fit = &base[..base.find("[fit]").unwrap()];
    let rate = "\"loads.steady.rate\" = { min = 50, max = 400 }";
    refused(
        &format!(
            "{without_fit}\n{TEMPLATE}[explore.params]\n{rate}\n\
             [tune]\nvariant = \"breaker\"\n[tune.knobs]\n{rate}\n"
        ),
        path,
        Starts::default(),
        "tune.knobs.\"loads.steady.rate\"",
        "is also in [explore.params]: the explorations tune runs draw it in every schedule",
    );
    // A knob explore does not draw, beside a parameter it does: both read.
    let file = parse(
        &format!(
            "{without_fit}\n{TEMPLATE}[explore.params]\n{rate}\n\
             [tune]\nvariant = \"breaker\"\n[tune.knobs]\n\
             \"breakers.redis.failures\" = {{ min = 2, max = 20 }}\n"
        ),
        path,
    )
    .unwrap_or_else(|d| panic!("{d}"));
    assert!(file.tune.is_some());
}

#[test]
fn no_command_varies_a_swept_key() {
    let (base, path) = postmortem();
    let sweep = "[sweep]\nparameter = \"loads.steady.rate\"\nvalues = [100, 200]\n";
    let without_fit = &base[..base.find("[fit]").unwrap()];
    let without_variants = &without_fit[..without_fit.find("[[variant]]").unwrap()];
    let rate = "\"loads.steady.rate\" = { min = 50, max = 400 }";
    let swept = "`loads.steady.rate` is swept by [sweep]: each point sets it";
    refused(
        &format!("{without_variants}\n{sweep}\n{TEMPLATE}[explore.params]\n{rate}\n")
            .replace("variants = [\"breaker\"]\n", ""),
        path,
        Starts::default(),
        "explore.params.\"loads.steady.rate\"",
        swept,
    );
    refused(
        &format!(
            "{without_variants}\n{sweep}\n[map]\nfault = \"pause\"\n\
             trigger = {{ key = \"faults.pause.duration\", values = [\"1s\"] }}\n\
             load = {{ key = \"loads.steady.rate\", values = [100, 200] }}\n\
             recovered = {{ metric = \"failed_per_s\", at_most = 0, for = \"1s\" }}\n"
        ),
        path,
        Starts::default(),
        "map.load.key",
        swept,
    );
    let fit = &base[base.find("[fit]").unwrap()..];
    refused(
        &format!(
            "{without_variants}\n{sweep}\n{}\n\"loads.steady.rate\" = {{ min = 50, max = 400 }}\n",
            fit.replace("variant = \"as it ran\"\n", "")
        ),
        path,
        Starts::default(),
        "fit.unknowns.\"loads.steady.rate\"",
        swept,
    );
}
