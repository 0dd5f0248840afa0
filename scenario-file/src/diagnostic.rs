//! Errors in a scenario file, located: file, line, column and key.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::de::{DeTable, DeValue};

/// One problem in a scenario file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: PathBuf,
    /// 1-based line and column (in characters) of the offending text; 0 when the problem is
    /// the file as a whole.
    pub line: usize,
    pub column: usize,
    /// The dotted key the problem is about, e.g. `connections.cache.command_timeout`.
    pub key: String,
    pub message: String,
    /// The variants the problem shows up in, when it is not in all of them.
    pub variants: Vec<String>,
    /// The command line's `--set KEY=VALUE` the offending text comes from, when it is not in
    /// the file (`line` and `column` are 0 then).
    pub set: Option<String>,
}

impl Diagnostic {
    /// Where the problem is: `file:line:column`, `file` for the whole file, or
    /// `file: --set KEY=VALUE` for a value the command line gave.
    pub fn location(&self) -> String {
        let file = self.file.display();
        match (&self.set, self.line) {
            (Some(set), _) => format!("{file}: --set {set}"),
            (None, 0) => file.to_string(),
            (None, line) => format!("{file}:{line}:{}", self.column),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.location())?;
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)?;
        if !self.variants.is_empty() {
            let names: Vec<String> = self.variants.iter().map(|v| format!("\"{v}\"")).collect();
            write!(f, " (in variant {})", names.join(", "))?;
        }
        Ok(())
    }
}

/// Every problem found, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, diagnostic) in self.0.iter().enumerate() {
            if index > 0 {
                writeln!(f)?;
            }
            write!(f, "{diagnostic}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

/// Turns byte spans in one source text into diagnostics.
pub(crate) struct Source<'a> {
    pub file: &'a Path,
    pub text: &'a str,
    /// Spans past the end of `text` that hold the values of `--set` flags, each with its
    /// `KEY=VALUE` as the command line wrote it.
    pub sets: Vec<(Range<usize>, String)>,
}

impl Source<'_> {
    pub fn diagnostic(
        &self,
        span: Option<Range<usize>>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> Diagnostic {
        let set = span.as_ref().and_then(|span| {
            self.sets
                .iter()
                .find(|(range, _)| range.contains(&span.start))
                .map(|(_, set)| set.clone())
        });
        let (line, column) = match span {
            Some(span) if set.is_none() => self.line_column(span.start),
            _ => (0, 0),
        };
        Diagnostic {
            file: self.file.to_owned(),
            line,
            column,
            key: key.into(),
            message: message.into(),
            variants: Vec::new(),
            set,
        }
    }

    fn line_column(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..floor_char_boundary(self.text, offset)];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        (line, before[line_start..].chars().count() + 1)
    }
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// The dotted key path of the innermost key whose key or value covers `offset`, e.g.
/// `flows.read.steps[1].redis`; empty when none does. (A table's own span covers only its
/// header, so every table is searched, not just those whose span covers the offset.)
pub(crate) fn key_path_at(root: &DeTable<'_>, offset: usize) -> String {
    let mut best: Option<(usize, String)> = None;
    search_table(root, offset, String::new(), 0, &mut best);
    best.map(|(_, path)| path).unwrap_or_default()
}

fn covers(span: Range<usize>, offset: usize) -> bool {
    span.start <= offset && offset < span.end.max(span.start + 1)
}

fn search_table(
    table: &DeTable<'_>,
    offset: usize,
    prefix: String,
    depth: usize,
    best: &mut Option<(usize, String)>,
) {
    for (key, value) in table.iter() {
        let path = if prefix.is_empty() {
            key.get_ref().to_string()
        } else {
            format!("{prefix}.{}", key.get_ref())
        };
        search_value(
            value,
            offset,
            path,
            depth + 1,
            covers(key.span(), offset),
            best,
        );
    }
}

fn search_value(
    value: &toml::Spanned<DeValue<'_>>,
    offset: usize,
    path: String,
    depth: usize,
    key_covers: bool,
    best: &mut Option<(usize, String)>,
) {
    if (key_covers || covers(value.span(), offset)) && best.as_ref().is_none_or(|(d, _)| depth > *d)
    {
        *best = Some((depth, path.clone()));
    }
    match value.get_ref() {
        DeValue::Table(inner) => search_table(inner, offset, path, depth, best),
        DeValue::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                search_value(
                    item,
                    offset,
                    format!("{path}[{index}]"),
                    depth + 1,
                    false,
                    best,
                );
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns_count_characters_from_one() {
        let text = "a = 1\nbé = \"x\"\n";
        let source = Source {
            file: Path::new("s.toml"),
            text,
            sets: Vec::new(),
        };
        let offset = text.find("\"x\"").unwrap();
        let diagnostic = source.diagnostic(Some(offset..offset + 3), "bé", "bad");
        assert_eq!((diagnostic.line, diagnostic.column), (2, 6));
        assert_eq!(diagnostic.to_string(), "s.toml:2:6: bé: bad");
    }

    #[test]
    fn key_paths_descend_into_tables_and_arrays() {
        let text = "[flows.read]\nsteps = [{ redis = \"GET\" }, { db = \"main\" }]\n";
        let table = DeTable::parse(text).unwrap();
        let offset = text.find("main").unwrap();
        assert_eq!(
            key_path_at(table.get_ref(), offset),
            "flows.read.steps[1].db"
        );
    }
}
