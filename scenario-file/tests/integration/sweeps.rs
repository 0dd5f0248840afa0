//! Sweeps: one axis (`[sweep]`) or a grid (`[[sweep]]`, every combination), each point a
//! variant with its values.

use std::path::Path;

const BASE: &str = r#"[scenario]
name = "t"

[servers.redis]

[connections.c]
server = "redis"
command_timeout = "100ms"

[keys.k]

[databases.db]
latency = "10ms"

[flows.f]
steps = [{ redis = { command = "GET", connection = "c", key = "k" }, on_error = "next" }, { db = { name = "db" } }]

[loads.l]
flow = "f"
arrivals = "even"
rate = 10
count = 5
"#;

fn parse(extra: &str) -> Result<outagelab_scenario_file::ScenarioFile, String> {
    outagelab_scenario_file::parse(&format!("{BASE}\n{extra}"), Path::new("t.toml"))
        .map_err(|d| d.to_string())
}

#[test]
fn a_grid_runs_every_combination_with_the_last_axis_fastest() {
    let file = parse(
        r#"
[[variant]]
name = "a"
[[variant]]
name = "b"
patch = { connections = { c = { command_timeout = "50ms" } } }

[[sweep]]
parameter = "loads.l.rate"
values = [10, 20]
[sweep.expect]
"20" = ["requests == 5"]

[[sweep]]
parameter = "databases.db.latency"
label = "db"
values = ["5ms", "10ms", "20ms"]
"#,
    )
    .unwrap();
    let names: Vec<&str> = file.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names.len(), 2 * 2 * 3);
    assert_eq!(
        &names[..4],
        [
            "a / rate=10, db=5ms",
            "a / rate=10, db=10ms",
            "a / rate=10, db=20ms",
            "a / rate=20, db=5ms"
        ]
    );
    assert_eq!(names[6], "b / rate=10, db=5ms");
    // The x of a point is its first axis's value; every axis's value is kept as written.
    let last = &file.variants[11];
    assert_eq!(last.sweep_x, Some(20.0));
    assert_eq!(
        last.sweep_values,
        [
            ("rate".to_owned(), "20".to_owned()),
            ("db".to_owned(), "20ms".to_owned())
        ]
    );
    // The swept values reach the scenario.
    assert!(
        matches!(
            last.scenario.databases[0].latency,
            outagelab_sim::scenario::Distribution::Constant(d) if d.as_nanos() == 20_000_000
        ),
        "{:?}",
        last.scenario.databases[0].latency
    );
    // A value's expectations apply to every point with that value.
    let expected: Vec<usize> = file.variants.iter().map(|v| v.expectations.len()).collect();
    assert_eq!(expected, [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1]);
    assert_eq!(file.sweep_axes.len(), 2);
    assert_eq!(file.sweep.as_ref().unwrap().parameter, "loads.l.rate");
    assert_eq!(file.sweep_axes[1].unit, "ms");
}

#[test]
fn one_axis_reads_as_it_always_has() {
    let file =
        parse("[sweep]\nparameter = \"loads.l.rate\"\nlabel = \"R\"\nvalues = [1, 2]\n").unwrap();
    let names: Vec<&str> = file.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["R=1", "R=2"]);
    assert_eq!(file.sweep_axes.len(), 1);
}

/// A sweep over words has no numbers to plot: it reports the words, in list order, for the
/// charts' tick labels (each variant's x is its word's index); a numeric sweep reports none.
#[test]
fn a_sweep_over_words_reports_its_values() {
    let file = parse(
        "[[sweep]]\nparameter = \"scenario.description\"\nlabel = \"d\"\nvalues = [\"fast\", \"slow\"]\n\
         [[sweep]]\nparameter = \"loads.l.rate\"\nvalues = [1, 2]\n",
    )
    .unwrap();
    let xs: Vec<Option<f64>> = file.variants.iter().map(|v| v.sweep_x).collect();
    assert_eq!(xs, [Some(0.0), Some(0.0), Some(1.0), Some(1.0)]);
    assert_eq!(file.sweep_axes[0].values, ["fast", "slow"]);
    assert_eq!(file.sweep.as_ref().unwrap().values, ["fast", "slow"]);
    assert!(file.sweep_axes[1].values.is_empty());
}

#[test]
fn grid_mistakes_are_refused_at_their_key() {
    for (extra, expected) in [
        (
            "[[sweep]]\nparameter = \"loads.l.rate\"\nvalues = [1]\n[[sweep]]\nparameter = \"loads.l.rate\"\nvalues = [2]\n",
            "sweep[1].parameter: `loads.l.rate` is swept twice",
        ),
        (
            "[[sweep]]\nparameter = \"loads.l.rate\"\nvalues = [1]\n[[sweep]]\nvalues = [2]\n",
            "sweep[1]: missing field `parameter`",
        ),
        (
            "[[sweep]]\nparameter = \"loads.l.rate\"\nvalues = [1, 2]\n[[sweep]]\nparameter = \"loads.l.count\"\nvalues = [1, 2]\n[sweep.expect]\n\"3\" = [\"requests == 1\"]\n",
            "sweep[1].expect.3: `3` is not one of the swept values",
        ),
    ] {
        let error = parse(extra)
            .err()
            .unwrap_or_else(|| panic!("accepted: {extra}"));
        assert!(error.contains(expected), "{extra}\n{error}");
    }
    let root = format!("sweep = [1, 2]\n{BASE}");
    let error = outagelab_scenario_file::parse(&root, Path::new("t.toml")).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("sweep[0]: each axis of a grid is a table"),
        "{error}"
    );
    // 101 x 100 points is past the 10 000 runs a file may make: said at the axis that passes it.
    let values = |n: usize| (0..n).map(|v| v.to_string()).collect::<Vec<_>>().join(", ");
    let error = parse(&format!(
        "[[sweep]]\nparameter = \"loads.l.rate\"\nvalues = [{}]\n[[sweep]]\nparameter = \"loads.l.count\"\nvalues = [{}]\n",
        values(101),
        values(100)
    ))
    .unwrap_err();
    assert!(
        error.contains("sweep[1].values: 101 runs × 100 swept values = 10100 runs"),
        "{error}"
    );
}

#[test]
fn a_variant_s_expect_at_applies_to_its_own_points_only() {
    let file = parse(
        r#"
[[variant]]
name = "a"
[variant.expect_at]
"20" = ["requests == 5"]
[[variant]]
name = "b"

[sweep]
parameter = "loads.l.rate"
values = [10, 20]
"#,
    )
    .unwrap();
    let expected: Vec<(&str, usize)> = file
        .variants
        .iter()
        .map(|v| (v.name.as_str(), v.expectations.len()))
        .collect();
    assert_eq!(
        expected,
        [
            ("a / value=10", 0),
            ("a / value=20", 1),
            ("b / value=10", 0),
            ("b / value=20", 0)
        ]
    );
    let unswept = parse(
        "[[variant]]\nname = \"a\"\n[variant.expect_at]\n\"30\" = [\"requests == 5\"]\n\n[sweep]\nparameter = \"loads.l.rate\"\nvalues = [10, 20]\n",
    )
    .unwrap_err();
    assert!(
        unswept.contains("variant \"a\" expect_at.30: `30` is not one of the swept values"),
        "{unswept}"
    );
    let no_sweep =
        parse("[[variant]]\nname = \"a\"\n[variant.expect_at]\n\"30\" = [\"requests == 5\"]\n")
            .unwrap_err();
    assert!(no_sweep.contains("the file sweeps nothing"), "{no_sweep}");
}

/// An axis that names its variants sweeps those only: the others run once, at the file's
/// value, under their own name, with `-` for the axis (in a 3-variant review, 7 runs instead
/// of 21). A value's expectations reach only the points that have it.
#[test]
fn an_axis_sweeps_only_the_variants_it_names() {
    let file = parse(
        r#"
[[variant]]
name = "a"
[[variant]]
name = "b"
[[variant]]
name = "c"

[sweep]
parameter = "databases.db.latency"
label = "db"
values = ["5ms", "20ms"]
variants = ["b"]
[sweep.expect]
"20ms" = ["requests == 5"]
"#,
    )
    .unwrap();
    type Seen<'a> = (&'a str, Option<f64>, Vec<(String, String)>, usize);
    let seen: Vec<Seen> = (file.variants.iter())
        .map(|v| {
            let values = v.sweep_values.clone();
            (v.name.as_str(), v.sweep_x, values, v.expectations.len())
        })
        .collect();
    let value = |text: &str| vec![("db".to_owned(), text.to_owned())];
    assert_eq!(
        seen,
        [
            ("a", None, value("-"), 0),
            ("b / db=5ms", Some(5.0), value("5ms"), 0),
            ("b / db=20ms", Some(20.0), value("20ms"), 1),
            ("c", None, value("-"), 0),
        ]
    );
    // The unswept variants keep the file's value.
    let latency = |index: usize| match file.variants[index].scenario.databases[0].latency {
        outagelab_sim::scenario::Distribution::Constant(d) => d.as_nanos(),
        ref other => panic!("{other:?}"),
    };
    assert_eq!([latency(0), latency(3)], [10_000_000; 2]);
}

#[test]
fn an_axis_naming_no_variant_of_the_file_is_refused() {
    let variants = "[[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\n";
    let sweep = |names: &str| {
        format!("[sweep]\nparameter = \"loads.l.rate\"\nvalues = [1, 2]\nvariants = {names}\n")
    };
    let unknown = parse(&format!("{variants}{}", sweep("[\"bb\"]"))).unwrap_err();
    assert!(
        unknown.contains("sweep.variants: \"bb\" is not a variant (the variants: \"a\", \"b\")"),
        "{unknown}"
    );
    let empty = parse(&format!("{variants}{}", sweep("[]"))).unwrap_err();
    assert!(
        empty.contains("sweep.variants: names no variant"),
        "{empty}"
    );
    let implicit = parse(&sweep("[\"base\"]")).unwrap_err();
    assert!(
        implicit.contains("sweep.variants: the file has no [[variant]]"),
        "{implicit}"
    );
}
