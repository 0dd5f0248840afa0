//! Every typed id in every spec of every bundled file (each variant, services expanded) is
//! one its spec's reference visitor (`outagelab_sim::references`) shows: so a spec field that
//! refers to another resource cannot be left out of `check_references` or of the copy of a
//! service's resources per instance, which are both loops over those visitors.

use std::path::Path;

use outagelab_sim::references::unvisited_ids;

#[test]
fn every_id_of_every_spec_of_every_bundled_file_is_visited() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the bundled scenarios")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "found {} bundled files", files.len());
    let mut variants = 0;
    for path in &files {
        let file = outagelab_scenario_file::load(path)
            .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
        for variant in &file.variants {
            let unvisited = unvisited_ids(&variant.scenario);
            assert!(
                unvisited.is_empty(),
                "{} ({}): {unvisited:#?}",
                path.display(),
                variant.name
            );
            variants += 1;
        }
    }
    assert!(variants >= files.len());
}

/// The check fires: an id hidden from the visitor (a cache step whose cache is named in a
/// field the visitor does not show) is found.
#[test]
fn an_id_the_visitor_does_not_show_is_found() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/quick-start.toml"),
    )
    .expect("the quick start");
    let file = outagelab_scenario_file::parse(&text, Path::new("quick-start.toml"))
        .expect("the quick start parses");
    let mut scenario = file.variants[0].scenario.clone();
    assert!(unvisited_ids(&scenario).is_empty());
    // A name that looks like an id in a field no visitor reads stands in for a new field.
    scenario.flows[0].name = "CacheId(0)".into();
    let unvisited = unvisited_ids(&scenario);
    assert_eq!(unvisited.len(), 1, "{unvisited:#?}");
    assert!(
        unvisited[0].starts_with("1 CacheId written, 0 visited"),
        "{unvisited:?}"
    );
}
