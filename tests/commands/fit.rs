//! `outagelab fit`: a model fitted to an incident's observed series. An incident simulated with
//! a known pause, exported as observed series, is fitted back to that pause exactly; the fit
//! is the same on any number of threads; bad `[fit]` tables are refused at their keys.

use std::path::Path;

use crate::common;

use common::{outagelab, read_report, scratch, succeed};

fn scenario(pause: &str, rate: u32) -> String {
    common::pause_incident(pause, rate, 8)
}

/// The incident as it ran, a fix, and what was observed.
fn observed() -> String {
    format!(
        "\n[[variant]]\nname = \"as it ran\"\n\n[[variant]]\nname = \"100 ms timeout\"\n\
         patch = {{ connections = {{ cache = {{ command_timeout = \"100ms\" }} }} }}\n{}",
        common::OBSERVED_PER_SECOND
    )
}

/// The incident: a 2.3 s pause, run on seed 3 and exported as the ok requests per second and
/// the most in flight over each second.
fn write_incident(dir: &Path) {
    let truth = dir.join("truth.toml");
    std::fs::write(&truth, scenario("2300ms", 200)).unwrap();
    let json = dir.join("truth.json");
    succeed(&[
        "run",
        truth.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let csv = common::per_second_csv(&read_report(&json), 8, 1.0);
    std::fs::write(dir.join("incident.csv"), csv).unwrap();
}

#[test]
fn a_pause_is_recovered_exactly_from_a_simulated_incident() {
    let dir = scratch("fit-exact");
    write_incident(&dir);
    let file = dir.join("fit.toml");
    let fit = "\n[fit]\nruns_max = 60\n[fit.unknowns]\n\
               \"faults.pause.duration\" = { min = \"500ms\", max = \"5s\" }\n";
    // The file writes 4 s; the search starts from the guess given on the command line.
    std::fs::write(&file, format!("{}{}{fit}", scenario("4s", 200), observed())).unwrap();
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let fitted = out.join("fitted.toml");
    let stdout = succeed(&[
        "fit",
        file.to_str().unwrap(),
        "--set",
        "faults.pause.duration=\"1s\"",
        "--write",
        fitted.to_str().unwrap(),
    ]);
    assert!(
        stdout.contains("faults.pause.duration    1 s   2.3 s"),
        "{stdout}"
    );
    assert!(stdout.contains("0.0000 fitted"), "{stdout}");
    // The fixes against the fitted model (not the guess): the incident's own variant matches
    // every observed sample, and the timeout turns the pause into errors.
    let (_, fixes) = stdout
        .split_once("the file's variants against the fitted model")
        .unwrap_or_else(|| panic!("{stdout}"));
    let scores = fixes.split_once("simulated against observed").unwrap().1;
    let incident: Vec<&str> = scores
        .lines()
        .filter(|l| l.starts_with("as it ran"))
        .collect();
    assert_eq!(incident.len(), 2, "{scores}");
    for row in incident {
        let words: Vec<&str> = row.split_whitespace().collect();
        assert!(
            words.contains(&"0.00") && words.last() == Some(&"-"),
            "{row}"
        );
    }
    assert!(fixes.contains(" timeout"), "{fixes}");
    // The fitted file, written elsewhere, runs as it is and matches what was observed.
    let text = std::fs::read_to_string(&fitted).unwrap();
    assert!(text.contains("duration = \"2300000us\""), "{text}");
    let json = out.join("fitted.json");
    succeed(&[
        "run",
        fitted.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let report = read_report(&json);
    for series in report["observed"]["series"].as_array().unwrap() {
        assert_eq!(series["variants"][0]["rmse"], 0.0, "{series}");
    }
}

#[test]
fn the_fit_is_the_same_on_any_number_of_threads() {
    let dir = scratch("fit-threads");
    write_incident(&dir);
    let file = dir.join("fit.toml");
    let fit = "\n[fit]\nruns_max = 40\nseeds = \"1..3\"\n[fit.unknowns]\n\
               \"faults.pause.duration\" = { min = \"500ms\", max = \"5s\" }\n\
               \"loads.steady.rate\" = { min = 50, max = 400 }\n";
    std::fs::write(&file, format!("{}{}{fit}", scenario("1s", 150), observed())).unwrap();
    let one = succeed(&["fit", file.to_str().unwrap(), "--jobs", "1"]);
    let two = succeed(&["fit", file.to_str().unwrap(), "--jobs", "2"]);
    assert_eq!(one, two);
    assert!(one.contains("over the seeds"), "{one}");
}

#[test]
fn bad_fit_tables_are_refused_at_their_key() {
    let dir = scratch("fit-bad");
    write_incident(&dir);
    let unknown = |entry: &str| format!("\n[fit]\n[fit.unknowns]\n{entry}\n");
    let pause = "\"faults.pause.duration\"";
    let cases = [
        (
            unknown("\"loads.steady.count\" = { min = 1, max = 9 }"),
            "fit.unknowns.\"loads.steady.count\": `loads.steady.count` is not a key the file writes",
        ),
        (
            unknown(&format!("{pause} = {{ min = 1, max = 9 }}")),
            "`faults.pause.duration` is a duration: write the range's end with a unit",
        ),
        (
            unknown(&format!("{pause} = {{ min = \"5s\", max = \"1s\" }}")),
            "the range is empty",
        ),
        (
            unknown(&format!("{pause} = {{ min = \"2s\", max = \"5s\" }}")),
            "the file's value, \"1s\", is outside the range",
        ),
        (
            unknown("\"faults.pause.kind\" = { min = 1, max = 2 }"),
            "only durations, sizes, bandwidths and numbers can be searched",
        ),
        (
            format!(
                "\n[fit]\nvariant = \"nope\"\n[fit.unknowns]\n{pause} = {{ min = \"500ms\", max = \"5s\" }}\n"
            ),
            "fit.variant: \"nope\" is not a variant",
        ),
        (
            format!(
                "\n[fit]\nruns_max = 3\n[fit.unknowns]\n{pause} = {{ min = \"500ms\", max = \"5s\" }}\n"
            ),
            "fit.runs_max: 3 runs is outside 10..=100000",
        ),
        (
            "\n[fit]\n[fit.unknowns]\n".to_owned(),
            "fit.unknowns: has 0 unknowns",
        ),
    ];
    for (index, (fit, expected)) in cases.iter().enumerate() {
        let file = dir.join(format!("bad{index}.toml"));
        std::fs::write(&file, format!("{}{}{fit}", scenario("1s", 200), observed())).unwrap();
        let output = outagelab(&["fit", file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{fit}: {stderr}");
        assert!(stderr.contains(expected), "{fit}\n{stderr}\nnot {expected}");
        assert!(stderr.contains(&format!("bad{index}.toml:")), "{stderr}");
    }
    // A range without the file's value: `fit` and `validate` refuse it, `run` (which runs
    // the file, not the search) reads it.
    let file = dir.join("outside.toml");
    let fit = unknown(&format!("{pause} = {{ min = \"2s\", max = \"5s\" }}"));
    std::fs::write(&file, format!("{}{}{fit}", scenario("1s", 200), observed())).unwrap();
    let validate = outagelab(&["validate", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&validate.stderr);
    assert_eq!(validate.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is outside the range"), "{stderr}");
    let run = outagelab(&["run", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(matches!(run.status.code(), Some(0 | 1)), "{stderr}");
    // Without [observed] there is nothing to fit to.
    let file = dir.join("no-observed.toml");
    let fit = unknown(&format!("{pause} = {{ min = \"500ms\", max = \"5s\" }}"));
    std::fs::write(&file, format!("{}{fit}", scenario("1s", 200))).unwrap();
    let output = outagelab(&["fit", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the file needs an [observed] table"),
        "{stderr}"
    );
    // A range end the file refuses, and a key the variant's patch sets, before any search.
    let rate_zero = unknown("\"loads.steady.rate\" = { min = 0, max = 400 }");
    let patched = "\n[fit]\nvariant = \"100 ms timeout\"\n[fit.unknowns]\n\
                   \"connections.cache.command_timeout\" = { min = \"10ms\", max = \"1s\" }\n";
    let base_timeout = scenario("1s", 200).replace(
        "server = \"redis\"\n",
        "server = \"redis\"\ncommand_timeout = \"50ms\"\n",
    );
    for (text, expected) in [
        (
            format!("{}{}{rate_zero}", scenario("1s", 200), observed()),
            "the file refuses it",
        ),
        (
            format!("{base_timeout}{}{patched}", observed()),
            "sets it in its patch",
        ),
    ] {
        std::fs::write(&file, text).unwrap();
        let output = outagelab(&["fit", file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}\nnot {expected}");
    }
}

/// Points the file refuses inside the box (a pause after the horizon) are unusable, not errors:
/// the search goes on around them, and no seed's search takes more than `runs_max` runs (plus
/// the fitted and the file's values, one run each).
#[test]
fn refused_points_inside_the_ranges_are_searched_around_within_the_budget() {
    let dir = scratch("fit-refused");
    write_incident(&dir);
    let file = dir.join("fit.toml");
    let fit = "\n[fit]\nruns_max = 24\nseeds = \"1..2\"\n[fit.unknowns]\n\
               \"run.horizon\" = { min = \"3s\", max = \"10s\" }\n\
               \"faults.pause.at\" = { min = \"1s\", max = \"5s\" }\n";
    let text = scenario("2300ms", 200).replace(
        "[servers.redis]",
        "[run]\nhorizon = \"8s\"\n\n[servers.redis]",
    );
    std::fs::write(&file, format!("{text}{}{fit}", observed())).unwrap();
    // A point of the box the file refuses.
    let refused = outagelab(&[
        "run",
        file.to_str().unwrap(),
        "--set",
        "faults.pause.at=\"5s\"",
        "--set",
        "run.horizon=\"3s\"",
    ]);
    assert_eq!(refused.status.code(), Some(2));
    let stdout = succeed(&["fit", file.to_str().unwrap()]);
    let runs: u64 = stdout
        .split_once(" runs\n")
        .and_then(|(head, _)| head.rsplit(", ").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(runs <= 2 * (24 + 2), "{runs} runs: {stdout}");
    assert!(stdout.contains("run.horizon"), "{stdout}");
}

/// An unknown only given on the command line is still not a key the file writes.
#[test]
fn an_unknown_the_file_does_not_write_is_refused_even_when_set() {
    let dir = scratch("fit-set-unknown");
    write_incident(&dir);
    let file = dir.join("fit.toml");
    let fit = "\n[fit]\n[fit.unknowns]\n\"run.horizon\" = { min = \"3s\", max = \"10s\" }\n";
    std::fs::write(&file, format!("{}{}{fit}", scenario("1s", 200), observed())).unwrap();
    let output = outagelab(&["fit", file.to_str().unwrap(), "--set", "run.horizon=\"8s\""]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`run.horizon` is not a key the file writes"),
        "{stderr}"
    );
}
