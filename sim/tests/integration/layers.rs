//! The simulator's layers (ARCHITECTURE.md, "Layers of the simulator") held to its code: every
//! `crate::` path in `sim/src` outside comments and unit tests, by top-level module, goes to a
//! module of its own layer or an earlier one, or is one of the listed exceptions; the modules
//! of one layer use each other without a circle; and every exception listed is still needed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers and exceptions as ARCHITECTURE.md lists them.
struct Layers {
    /// Each top-level module's layer (1 is the lowest).
    layer_of: BTreeMap<String, usize>,
    /// `(from, to)` imports allowed against the order.
    exceptions: BTreeSet<(String, String)>,
}

/// The backticked names before the first `:` of `line`.
fn names_before_colon(line: &str) -> Vec<String> {
    let head = line.split(':').next().unwrap_or("");
    head.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

fn parse_layers(architecture: &str) -> Layers {
    let section = architecture
        .split("## Layers of the simulator")
        .nth(1)
        .expect("ARCHITECTURE.md has a section \"Layers of the simulator\"");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut layer_of = BTreeMap::new();
    let mut exceptions = BTreeSet::new();
    let mut in_exceptions = false;
    for line in section.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("Exceptions") {
            in_exceptions = true;
        }
        if let Some((number, rest)) = trimmed.split_once(". ")
            && let Ok(layer) = number.parse::<usize>()
            && !in_exceptions
        {
            // A layer's modules may run onto its next line: take names up to the colon, which
            // may be on a later line; ARCHITECTURE.md keeps each layer's list on its first line
            // or two, before the colon.
            for name in names_before_colon(rest) {
                layer_of.insert(name, layer);
            }
        } else if !in_exceptions && trimmed.starts_with('`') && !layer_of.is_empty() {
            // The continuation of the last layer's list of modules.
            let last = *layer_of.values().max().expect("a layer");
            for name in names_before_colon(trimmed) {
                layer_of.insert(name, last);
            }
        } else if in_exceptions && let Some(rest) = trimmed.strip_prefix("- `") {
            let (from, rest) = rest.split_once('`').expect("- `from` uses `to`, ...");
            let targets = rest.split(':').next().unwrap_or("");
            for to in targets.split('`').skip(1).step_by(2) {
                exceptions.insert((from.to_owned(), to.to_owned()));
            }
        }
    }
    Layers {
        layer_of,
        exceptions,
    }
}

/// The source without its unit tests (from `#[cfg(test)] mod tests` on) and without `//`
/// comments (doc links name modules they do not use).
fn code_of(source: &str) -> String {
    let source = source
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or(source);
    source
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules `code` names through `crate::` paths, braces expanded
/// (`crate::{a::b, c}` names `a` and `c`).
fn modules_used(code: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c == '$' || c.is_alphanumeric() || c == '_') {
            continue; // `$crate::` or a longer name ending in `crate`
        }
        if let Some(group) = rest.strip_prefix('{') {
            // The first segment of each element at the group's top level.
            let mut depth = 0usize;
            let mut start = true;
            let mut name = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && (c.is_alphanumeric() || c == '_') => name.push(c),
                    _ if start && !name.is_empty() => {
                        used.insert(std::mem::take(&mut name));
                        start = false;
                    }
                    _ => {}
                }
            }
            if !name.is_empty() {
                used.insert(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                used.insert(name);
            }
        }
    }
    used
}

/// Every import of `modules` (top-level module, its sources' code) that the layers do not
/// allow, and every exception no import needs, as messages.
fn problems(modules: &BTreeMap<String, String>, layers: &Layers) -> Vec<String> {
    let mut problems = Vec::new();
    let mut edges: BTreeSet<(String, String)> = BTreeSet::new();
    for (module, code) in modules {
        for used in modules_used(code) {
            if used != *module && modules.contains_key(&used) {
                edges.insert((module.clone(), used));
            }
        }
    }
    for module in modules.keys() {
        if !layers.layer_of.contains_key(module) {
            problems.push(format!("module {module} is in no layer of ARCHITECTURE.md"));
        }
    }
    let mut same_layer: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in &edges {
        let (Some(&a), Some(&b)) = (layers.layer_of.get(from), layers.layer_of.get(to)) else {
            continue;
        };
        let excepted = layers.exceptions.contains(&(from.clone(), to.clone()));
        if b > a && !excepted {
            problems.push(format!(
                "{from} (layer {a}) uses {to} (layer {b}): an import back up a layer"
            ));
        }
        if a == b && !excepted {
            same_layer.entry(from).or_default().push(to);
        }
    }
    for (from, to) in &layers.exceptions {
        if !edges.contains(&(from.clone(), to.clone())) {
            problems.push(format!(
                "the exception {from} -> {to} is no longer needed: take it out of ARCHITECTURE.md"
            ));
        }
    }
    if let Some(circle) = circle(&same_layer) {
        problems.push(format!("a circle within a layer: {}", circle.join(" -> ")));
    }
    problems
}

/// A circle in `edges`, if there is one (depth-first, in name order).
fn circle<'a>(edges: &BTreeMap<&'a str, Vec<&'a str>>) -> Option<Vec<&'a str>> {
    fn visit<'a>(
        node: &'a str,
        edges: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<&'a str>> {
        if let Some(at) = path.iter().position(|&n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node);
            return Some(found);
        }
        if !done.insert(node) {
            return None;
        }
        path.push(node);
        for &next in edges.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, edges, path, done) {
                return Some(found);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for &node in edges.keys() {
        if let Some(found) = visit(node, edges, &mut Vec::new(), &mut done) {
            return Some(found);
        }
    }
    None
}

/// `sim/src`'s top-level modules with their code (a directory module's files together).
fn sim_modules() -> BTreeMap<String, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules: BTreeMap<String, String> = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("sim/src is readable") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(&src).expect("under src");
            let first = relative.components().next().expect("a component");
            let name = first
                .as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned();
            if name == "lib" {
                continue; // the crate root declares and re-exports; it is no layer
            }
            let source = std::fs::read_to_string(&path).expect("a source file");
            modules.entry(name).or_default().push_str(&code_of(&source));
        }
    }
    modules
}

fn architecture() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md");
    std::fs::read_to_string(path).expect("ARCHITECTURE.md is readable")
}

#[test]
fn no_import_runs_back_up_a_layer() {
    let layers = parse_layers(&architecture());
    assert!(layers.layer_of.len() > 20, "the layers list every module");
    let problems = problems(&sim_modules(), &layers);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The check fires: a mechanism that reaches up into the engine, a circle inside one layer,
/// and an exception nothing needs are each reported.
#[test]
fn the_layer_check_catches_a_planted_back_edge() {
    let layers = parse_layers(&architecture());
    let mut modules = sim_modules();
    let clean = problems(&modules, &layers);
    assert!(clean.is_empty(), "{clean:?}");

    let database = modules.get_mut("database").expect("a database module");
    database.push_str("\nuse crate::{kernel::Event, engine::Simulator};\n");
    let found = problems(&modules, &layers);
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("database (layer 6) uses engine (layer 9)")),
        "{found:?}"
    );

    let mut modules = sim_modules();
    modules
        .get_mut("callers")
        .unwrap()
        .push_str("\nfn f() { crate::monitors::x(); }\n");
    modules
        .get_mut("monitors")
        .unwrap()
        .push_str("\nfn g() { crate::callers::y(); }\n");
    let found = problems(&modules, &layers);
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("a circle within a layer: callers -> monitors")),
        "{found:?}"
    );

    let mut modules = sim_modules();
    let kernel = modules.get_mut("kernel").unwrap();
    *kernel = kernel.replace("crate::redis", "crate::elsewhere");
    let found = problems(&modules, &layers);
    assert!(
        found
            .iter()
            .any(|p| p.contains("exception kernel -> redis is no longer needed")),
        "{found:?}"
    );
}

#[test]
fn paths_are_read_through_braces_and_past_comments() {
    let code = code_of(
        "use crate::{kernel::{Event, EventQueue}, rng::Stream};\n\
         // crate::engine is only named here\n\
         let x = crate::metrics::Metrics::new(); $crate::ignored::x\n\
         #[cfg(test)]\nmod tests { use crate::engine; }",
    );
    let used: Vec<String> = modules_used(&code).into_iter().collect();
    assert_eq!(used, ["kernel", "metrics", "rng"]);
}
