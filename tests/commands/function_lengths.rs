//! The form issue 30 set stays: no production function of the simulator (`sim/src`) is 150
//! lines or longer, and none of the file reader's validation (`scenario-file/src/validate.rs`
//! and `validate/`) is over 100. A function that grows past its limit fails here, named with
//! its file, line and length: split it where its steps are.
//!
//! Lengths are counted from the line of `fn` to the line of its closing brace, on the code
//! with comments, strings and character literals blanked (a `{` in a format string counts
//! nothing); unit tests (`#[cfg(test)] mod`) are not production code and are skipped.

use std::path::{Path, PathBuf};

use crate::architecture::{root, walk};

/// Where the limits hold: a directory or file, and the longest a function may be there.
const LIMITS: [(&str, usize); 3] = [
    ("sim/src", 149),
    ("scenario-file/src/validate.rs", 100),
    ("scenario-file/src/validate", 100),
];

/// The Rust files at `place` (a file, or a directory's, in name order), relative to the root.
fn rust_files(place: &str) -> Vec<PathBuf> {
    let path = Path::new(place);
    if root().join(path).is_file() {
        return vec![path.to_owned()];
    }
    let mut found = Vec::new();
    walk(&root().join(path), &mut found);
    found.retain(|file| file.extension().is_some_and(|e| e == "rs"));
    found.sort();
    found
}

/// `text` with every comment, string and character literal replaced by spaces (line breaks
/// kept, so lines still count), so that only the code's own braces remain.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        let end = if rest.starts_with(&['/', '/']) {
            i + rest.iter().position(|&c| c == '\n').unwrap_or(rest.len())
        } else if rest.starts_with(&['/', '*']) {
            block_comment_end(&chars, i)
        } else if let Some(end) = raw_string_end(&chars, i) {
            end
        } else if rest[0] == '"' {
            string_end(&chars, i + 1)
        } else if rest[0] == '\'' && char_literal(rest) {
            // After the character, or after the escape's first character (`'\''`).
            let from = if rest[1] == '\\' { 3 } else { 2 };
            i + from + rest[from..].iter().position(|&c| c == '\'').unwrap_or(0) + 1
        } else {
            out.push(rest[0]);
            i += 1;
            continue;
        };
        out.extend(chars[i..end.min(chars.len())].iter().map(|&c| blank(c)));
        i = end;
    }
    out
}

fn block_comment_end(chars: &[char], start: usize) -> usize {
    let mut depth = 0;
    let mut i = start;
    while i + 1 < chars.len() {
        match (chars[i], chars[i + 1]) {
            ('/', '*') => (depth, i) = (depth + 1, i + 2),
            ('*', '/') if depth == 1 => return i + 2,
            ('*', '/') => (depth, i) = (depth - 1, i + 2),
            _ => i += 1,
        }
    }
    chars.len()
}

/// The end of a `"` string whose body starts at `body`, escapes skipped.
fn string_end(chars: &[char], body: usize) -> usize {
    let mut i = body;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    chars.len()
}

/// `r"..."`, `r#"..."#` (and `br`): the index after its end, when one starts at `start` (and
/// is not the end of an identifier such as `for`).
fn raw_string_end(chars: &[char], start: usize) -> Option<usize> {
    let after_b = if chars[start] == 'b' {
        start + 1
    } else {
        start
    };
    if chars.get(after_b) != Some(&'r')
        || (start > 0 && (chars[start - 1].is_alphanumeric() || chars[start - 1] == '_'))
    {
        return None;
    }
    let hashes = chars[after_b + 1..]
        .iter()
        .take_while(|&&c| c == '#')
        .count();
    let quote = after_b + 1 + hashes;
    if chars.get(quote) != Some(&'"') {
        return None;
    }
    let closing: Vec<char> = std::iter::once('"')
        .chain(std::iter::repeat_n('#', hashes))
        .collect();
    (quote + 1..chars.len())
        .find(|&i| chars[i..].starts_with(&closing))
        .map(|i| i + closing.len())
        .or(Some(chars.len()))
}

/// Whether the `'` at the start of `rest` opens a character literal (`'{'`, `'\n'`), not a
/// lifetime (`'a`).
fn char_literal(rest: &[char]) -> bool {
    match rest.get(1) {
        Some('\\') => rest.len() > 3,
        Some(_) => rest.get(2) == Some(&'\''),
        None => false,
    }
}

/// Every function with a body in `text`: (line of `fn`, name, length in lines), outside
/// `#[cfg(test)]` modules.
fn functions(text: &str) -> Vec<(usize, String, usize)> {
    let code = code_only(text);
    let lines: Vec<&str> = code.lines().collect();
    let mut found = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index].trim_start();
        let next = lines.get(index + 1).map_or("", |l| l.trim_start());
        if line.starts_with("#[cfg(test)]") && next.starts_with("mod ") {
            // A module of tests here, or declared here and kept in its own file (`mod x;`).
            index = closing_line(&lines, index + 1).map_or(index + 2, |end| end + 1);
            continue;
        }
        if let Some(name) = function_name(line)
            && let Some(end) = closing_line(&lines, index)
        {
            found.push((index + 1, name, end - index + 1));
        }
        index += 1;
    }
    found
}

/// The name of the function a line declares (`pub(crate) async fn name(`), if it does.
fn function_name(line: &str) -> Option<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|&w| w == "fn")?;
    let qualifiers = ["pub", "const", "async", "unsafe", "extern"];
    let declares = words[..at]
        .iter()
        .all(|w| qualifiers.contains(w) || w.starts_with("pub("));
    let name = words.get(at + 1)?;
    let name: String = name
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (declares && !name.is_empty()).then_some(name)
}

/// The line of the brace that closes the first block opened at or after line `from`, or
/// `None` when a `;` outside brackets ends the item first (a declaration without a body; the
/// `;` of `-> [u8; 4]` does not).
fn closing_line(lines: &[&str], from: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut brackets = 0usize;
    let mut opened = false;
    for (offset, line) in lines[from..].iter().enumerate() {
        for c in line.chars() {
            match c {
                '{' => (depth, opened) = (depth + 1, true),
                '}' if opened => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(from + offset);
                    }
                }
                '(' | '[' if !opened => brackets += 1,
                ')' | ']' if !opened => brackets = brackets.saturating_sub(1),
                ';' if !opened && brackets == 0 => return None,
                _ => {}
            }
        }
    }
    None
}

/// Every function over its limit, as "file:line: name is N lines (at most M)", and the names
/// of every function measured.
fn over_their_limits() -> (Vec<String>, Vec<String>) {
    let mut over = Vec::new();
    let mut measured = Vec::new();
    for (place, most) in LIMITS {
        for file in rust_files(place) {
            let text = std::fs::read_to_string(root().join(&file)).unwrap();
            for (line, name, length) in functions(&text) {
                measured.push(name.clone());
                if length > most {
                    let file = file.display();
                    over.push(format!(
                        "{file}:{line}: `{name}` is {length} lines (at most {most})"
                    ));
                }
            }
        }
    }
    (over, measured)
}

#[test]
fn no_function_is_over_its_places_limit() {
    let (over, measured) = over_their_limits();
    assert!(over.is_empty(), "split these:\n{}", over.join("\n"));
    // The engine's own functions, after its `#[cfg(test)] mod stepping;`, and the reader's
    // longest are measured (a scanner that skipped them would hold nothing).
    for name in ["dispatch", "run_to_end", "connection", "redis_step"] {
        assert!(measured.iter().any(|m| m == name), "`{name}` not measured");
    }
}

/// The count sees a long function, skips braces in strings, comments and characters, and
/// skips unit tests: a check that could not fail would hold nothing.
#[test]
fn a_long_function_is_caught_and_braces_in_strings_are_not_code() {
    let body: String = (0..150).map(|i| format!("    let x{i} = {i};\n")).collect();
    let text = format!(
        "pub(crate) fn long() {{\n{body}}}\n\
         fn short(c: char) -> &'static str {{\n    let _ = '{{';\n    // }} {{\n    \
         let _ = r#\"}}\"#;\n    if c == '}}' {{ \"{{\" }} else {{ \"}}}}\\\"\" }}\n}}\n\
         fn declared();\n\
         #[cfg(test)]\nmod elsewhere;\n\
         fn array() -> [u8; 2] {{\n    [b'\\'', b'{{']\n}}\n\
         #[cfg(test)]\nmod tests {{\n    fn a_test() {{\n{body}    }}\n}}\n"
    );
    let found = functions(&text);
    assert_eq!(
        found,
        vec![
            (1, "long".to_owned(), 152),
            (153, "short".to_owned(), 6),
            (162, "array".to_owned(), 3),
        ],
        "{text}"
    );
}
