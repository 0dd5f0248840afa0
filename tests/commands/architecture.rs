//! ARCHITECTURE.md stays true: every file or directory it names exists, and every Rust item
//! it names (`sim::engine::Simulator`, `Breaker`, `StepSpec::can_fail`) is defined in the
//! crate it names (or, unqualified, somewhere in the workspace). A rename that forgets the map
//! fails here, naming the stale words.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Names from outside the workspace that the map mentions (std and tokio types).
const EXTERNAL: [&str; 3] = ["Copy", "Instant", "Self"];

/// Where a crate named by its Rust name keeps its sources.
const CRATES: [(&str, &str); 6] = [
    ("sim", "sim/src"),
    ("model", "model/src"),
    ("report", "report/src"),
    ("live", "live/src"),
    ("plots", "plots/src"),
    ("scenario_file", "scenario-file/src"),
];

/// The workspace's root (shared with `function_lengths`).
pub(crate) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every file and directory under `dir` (no `target/` or hidden ones), relative to the root.
pub(crate) fn walk(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        into.push(path.strip_prefix(root()).unwrap().to_owned());
        if path.is_dir() {
            walk(&path, into);
        }
    }
}

/// The `code spans` of the text.
fn spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// What one crate's sources (or the workspace's) define and mention.
#[derive(Default)]
struct Names {
    /// Items (`struct`, `enum`, `fn`, ...), macros, enum variants and fields (a name at the
    /// start of a line), and re-exported names.
    defined: BTreeSet<String>,
    /// Every word.
    words: BTreeSet<String>,
}

impl Names {
    fn add(&mut self, text: &str) {
        let keywords = [
            "struct",
            "enum",
            "trait",
            "type",
            "fn",
            "mod",
            "const",
            "static",
            "union",
            "macro_rules!",
        ];
        for line in text.lines() {
            let words: Vec<&str> = line
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '!'))
                .filter(|w| !w.is_empty())
                .collect();
            for pair in words.windows(2) {
                if keywords.contains(&pair[0]) {
                    self.defined
                        .insert(pair[1].trim_end_matches('!').to_owned());
                }
            }
            let trimmed = line.trim_start();
            let rest = trimmed.strip_prefix("pub ").unwrap_or(trimmed);
            let rest = rest.strip_prefix("pub(crate) ").unwrap_or(rest);
            let head: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !head.is_empty() && rest[head.len()..].starts_with([',', '(', '{', ' ', ':']) {
                self.defined.insert(head);
            }
            if trimmed.starts_with("pub use") {
                self.defined.extend(words.iter().map(|w| (*w).to_owned()));
            }
            self.words
                .extend(words.iter().map(|w| w.trim_end_matches('!').to_owned()));
        }
    }
}

/// What in `text` does not exist in the tree `files`: the stale names, each with why.
fn stale(text: &str, files: &[PathBuf]) -> Vec<String> {
    let mut by_crate: Vec<(&str, Names)> = Vec::new();
    let mut workspace = Names::default();
    for path in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        let text = std::fs::read_to_string(root().join(path)).unwrap();
        workspace.add(&text);
        if let Some((_, dir)) = CRATES.iter().find(|(_, dir)| path.starts_with(dir)) {
            match by_crate.iter_mut().find(|(d, _)| d == dir) {
                Some((_, names)) => names.add(&text),
                None => {
                    let mut names = Names::default();
                    names.add(&text);
                    by_crate.push((dir, names));
                }
            }
        }
    }
    let mut problems = Vec::new();
    for span in spans(text) {
        let span = span.trim();
        // A path: a file or directory, at the root or at the end of one (`redis/locks.rs`).
        if span.contains('/')
            && !span.contains(' ')
            && span
                .chars()
                .all(|c| c.is_alphanumeric() || "_-./*".contains(c))
            && (span.ends_with(".rs") || span.ends_with('/') || span.ends_with(".md"))
        {
            let wanted = span.trim_end_matches('/');
            let found = if let Some((before, after)) = wanted.split_once('*') {
                files.iter().any(|f| {
                    let f = f.to_string_lossy();
                    f.starts_with(before) && f.ends_with(after)
                })
            } else {
                files.iter().any(|f| {
                    let f = f.to_string_lossy();
                    f == wanted || f.ends_with(&format!("/{wanted}"))
                })
            };
            if !found {
                problems.push(format!("`{span}`: no such file or directory"));
            }
            continue;
        }
        // A Rust name: `Foo`, `Foo::bar`, `crate::module::Item`, `macro!`, with what follows
        // a call or a pattern (`(...)`, `{ ... }`) left off.
        let name = span
            .split(['(', ' ', '{'])
            .next()
            .unwrap_or_default()
            .trim_end_matches("()");
        let segments: Vec<&str> = name.split("::").collect();
        let rusty = !name.is_empty()
            && segments.iter().all(|s| {
                !s.is_empty()
                    && s.trim_end_matches('!')
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '_')
                    && !s.starts_with(|c: char| c.is_ascii_digit())
            });
        let first = segments[0];
        let crate_dir = CRATES
            .iter()
            .find(|(c, _)| *c == first)
            .map(|(_, dir)| *dir);
        let capitalised = first.starts_with(|c: char| c.is_ascii_uppercase());
        if !rusty
            || !(capitalised || segments.len() > 1)
            || (crate_dir.is_some() && segments.len() == 1)
        {
            continue; // a word, a key, a command or a crate's name, not an item
        }
        let last = *segments.last().unwrap();
        if EXTERNAL.contains(&last) || (segments.len() == 1 && EXTERNAL.contains(&first)) {
            continue;
        }
        let names = match crate_dir {
            Some(dir) => (by_crate.iter())
                .find(|(d, _)| *d == dir)
                .map(|(_, names)| names)
                .expect("every crate has sources"),
            None => &workspace,
        };
        // Intermediate segments are modules or types: each must be a word of the sources.
        for segment in &segments[usize::from(crate_dir.is_some())..segments.len() - 1] {
            if !names.words.contains(*segment)
                && !files
                    .iter()
                    .any(|f| f.file_stem().is_some_and(|s| s == *segment))
            {
                problems.push(format!("`{span}`: `{segment}` is nowhere in its crate"));
            }
        }
        let module = segments.len() > 1
            && crate_dir.is_some()
            && last.starts_with(|c: char| c.is_ascii_lowercase())
            && files.iter().any(|f| {
                f.starts_with(crate_dir.unwrap()) && f.file_stem().is_some_and(|s| s == last)
            });
        if !module && !names.defined.contains(last.trim_end_matches('!')) {
            problems.push(format!(
                "`{span}`: `{last}` is not defined in {}",
                crate_dir.unwrap_or("the workspace")
            ));
        }
    }
    problems
}

fn tree() -> Vec<PathBuf> {
    let mut files = Vec::new();
    walk(root(), &mut files);
    files
}

#[test]
fn every_file_and_name_architecture_md_gives_exists() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let problems = stale(&text, &tree());
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md names what is not there:\n{}",
        problems.join("\n")
    );
}

/// The check fires on a stale map: a renamed type, a moved file, a crate item gone.
#[test]
fn a_stale_name_or_path_is_caught() {
    let files = tree();
    let problems = stale(
        "`sim::engine::Simulatorr`, `sim/src/engine_old.rs`, `Breakerr`, `model::breaker::Breaker`",
        &files,
    );
    assert_eq!(
        problems,
        [
            "`sim::engine::Simulatorr`: `Simulatorr` is not defined in sim/src",
            "`sim/src/engine_old.rs`: no such file or directory",
            "`Breakerr`: `Breakerr` is not defined in the workspace",
        ]
    );
}
