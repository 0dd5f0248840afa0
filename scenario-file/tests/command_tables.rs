//! The command tables together: `[fit]` unknowns and `[tune]` knobs start from the file's
//! value, so no other table may vary the same key (its values would fall outside their range
//! and the file would refuse its own runs and reproducers). Each overlap is refused at the
//! key that makes it; disjoint keys read.

use std::path::Path;

/// The bundled postmortem file (`[observed]` and `[fit]` over the pause's duration and the
/// connection's timeout), read where its observed file is.
fn postmortem() -> (String, &'static Path) {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/postmortem-pause.toml"
    ));
    (std::fs::read_to_string(path).unwrap(), path)
}

const TEMPLATE: &str = "[explore]\nvariants = [\"breaker\"]\n\
    [explore.faults.stall]\ntarget = \"redis\"\nkind = \"pause\"\nat = { min = \"1s\", max = \"3s\" }\n";

fn refused(text: &str, path: &Path, at: &str, other: &str) {
    let message = outagelab_scenario_file::parse(text, path)
        .expect_err("the overlap is refused")
        .to_string();
    assert!(message.contains(at), "not at {at}:\n{message}");
    assert!(
        message.contains(&format!("is also in {other}: [fit] and [tune] start from")),
        "not about {other}:\n{message}"
    );
}

#[test]
fn a_key_fit_or_tune_starts_from_is_varied_by_no_other_table() {
    let (base, path) = postmortem();
    let pause = "\"faults.pause.duration\" = { min = \"100ms\", max = \"8s\" }";
    refused(
        &format!("{base}\n{TEMPLATE}[explore.params]\n{pause}\n"),
        path,
        "explore.params.\"faults.pause.duration\"",
        "[fit.unknowns]",
    );
    refused(
        &format!(
            "{base}\n[map]\nfault = \"pause\"\n\
             trigger = {{ key = \"faults.pause.duration\", values = [\"1s\", \"3s\"] }}\n\
             load = {{ key = \"loads.steady.rate\", values = [100, 200] }}\n\
             recovered = {{ metric = \"failed_per_s\", at_most = 0, for = \"1s\" }}\n"
        ),
        path,
        "map.trigger.key",
        "[fit.unknowns]",
    );
    let timeout = "\"connections.cache.command_timeout\" = { min = \"100ms\", max = \"1s\" }";
    refused(
        &format!("{base}\n{TEMPLATE}[tune]\nvariant = \"breaker\"\n[tune.knobs]\n{timeout}\n"),
        path,
        "tune.knobs.\"connections.cache.command_timeout\"",
        "[fit.unknowns]",
    );
    // Without [fit]: explore draws the rate the tune would start from.
    let without_fit = &base[..base.find("[fit]").unwrap()];
    let rate = "\"loads.steady.rate\" = { min = 50, max = 400 }";
    refused(
        &format!(
            "{without_fit}\n{TEMPLATE}[explore.params]\n{rate}\n\
             [tune]\nvariant = \"breaker\"\n[tune.knobs]\n{rate}\n"
        ),
        path,
        "tune.knobs.\"loads.steady.rate\"",
        "[explore.params]",
    );
    // Disjoint keys: every table reads.
    let file = outagelab_scenario_file::parse(
        &format!(
            "{base}\n{TEMPLATE}[explore.params]\n{rate}\n\
             [tune]\nvariant = \"breaker\"\n[tune.knobs]\n\
             \"breakers.redis.failures\" = {{ min = 2, max = 20 }}\n\
             [map]\nfault = \"pause\"\n\
             trigger = {{ key = \"faults.pause.at\", values = [\"1s\", \"2s\"] }}\n\
             load = {{ key = \"loads.steady.rate\", values = [100, 200] }}\n\
             recovered = {{ metric = \"failed_per_s\", at_most = 0, for = \"1s\" }}\n"
        ),
        path,
    )
    .unwrap_or_else(|d| panic!("{d}"));
    assert!(file.fit.is_some() && file.explore.is_some());
    assert!(file.tune.is_some() && file.map.is_some());
}
