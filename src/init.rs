//! `outagelab init`: a starter scenario for your own service, written from a template. Each
//! template is a bundled scenario (so `cargo test` runs it, and CI holds its expectations on
//! every seed it states): a commented file that validates and runs as written.

use std::io::Write;
use std::path::Path;

/// A starting point: its name (`--template NAME`), what it models, and its text.
pub struct Template {
    pub name: &'static str,
    pub about: &'static str,
    pub text: &'static str,
}

pub const TEMPLATES: [Template; 3] = [
    Template {
        name: "cache-aside",
        about: "a read path through a Redis cache to a database, through a Redis hang: no \
                timeout, a timeout, a timeout with a breaker and a bulkhead",
        text: include_str!("../scenarios/quick-start.toml"),
    },
    Template {
        name: "lock-guarded-writes",
        about: "writes behind a per-file lock over Redis, reads behind a shared one, through \
                a Redis pause: command and acquire timeouts compared",
        text: include_str!("../scenarios/lock-guarded-writes.toml"),
    },
    Template {
        name: "gateway-rate-limit",
        about: "a gateway's rate limiter keeping its buckets in Redis, through a Redis \
                restart: fail open, fail closed, a connection that never reconnects",
        text: include_str!("../scenarios/gateway-rate-limit.toml"),
    },
];

/// The templates, one line each, for `--help`-like listings and errors.
pub fn listing() -> String {
    TEMPLATES
        .iter()
        .map(|t| format!("  {:<21} {}\n", t.name, t.about))
        .collect()
}

/// Writes template `name` to `path` (`-`: standard output). Refuses to overwrite a file, and
/// names the templates when `name` is none of them. `Err` is the message for standard error.
pub fn write(name: &str, path: &Path) -> Result<String, String> {
    let Some(template) = TEMPLATES.iter().find(|t| t.name == name) else {
        return Err(format!(
            "init: no template \"{name}\"; the templates:\n{}",
            listing()
        ));
    };
    if path == Path::new("-") {
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(template.text.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(|e| format!("init: cannot write to standard output: {e}"))?;
        return Ok(String::new());
    }
    if path.exists() {
        return Err(format!(
            "init: {} exists: choose another path (init never overwrites a file)",
            path.display()
        ));
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("init: cannot create {}: {e}", parent.display()))?;
    }
    std::fs::write(path, template.text)
        .map_err(|e| format!("init: cannot write {}: {e}", path.display()))?;
    let shown = path.display();
    Ok(format!(
        "wrote {shown} (template {name}: {})\n\
         next: outagelab run {shown} --plot out    (the table, the expectations, the charts)\n\
         then change the numbers its comments point at, and run it again\n",
        template.about
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every template validates without a warning, under its own name in the listing.
    #[test]
    fn every_template_is_a_valid_scenario() {
        for template in TEMPLATES {
            let file = outagelab_scenario_file::parse(template.text, Path::new(template.name))
                .unwrap_or_else(|d| panic!("{}: {d}", template.name));
            assert!(file.warnings.is_empty(), "{}", template.name);
            assert!(listing().contains(template.name));
        }
    }
}
