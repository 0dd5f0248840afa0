//! "Did you mean": the name closest to a misspelt one, when one is close enough to be a typo;
//! and what to write instead, for serde's messages that name a Rust type rather than the fix.

use crate::keys::{DECLARED_TABLES, Value};
use crate::step_keys;

/// The candidate nearest to `name` by edit distance, if it is a plausible typo of it: at most
/// two edits, and fewer edits than the shorter name has characters (so `a` is not a typo of
/// `b`). Ties go to the first candidate in the order given.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        let distance = edit_distance(name, candidate);
        let shorter = name.chars().count().min(candidate.chars().count());
        if distance == 0 || distance > 2 || distance >= shorter {
            continue;
        }
        if best.is_none_or(|(best, _)| distance < best) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// serde's message for an unknown field or enum value (`unknown field `comand_timeout`,
/// expected one of `server`, `command_timeout`, ...`, `unknown variant `hnag`, expected ...`)
/// with a "did you mean" when one of the expected names is a plausible typo, in the shape of
/// an unknown reference's message: `unknown field `comand_timeout`: did you mean
/// `command_timeout`? (expected one of ...)`. Any other message comes back as it is.
pub fn serde_message(message: &str) -> String {
    for unknown in ["unknown field `", "unknown variant `"] {
        let Some((name, expected)) = message
            .strip_prefix(unknown)
            .and_then(|rest| rest.split_once("`, expected "))
        else {
            continue;
        };
        // The expected names are every other piece between backticks.
        let candidates = expected.split('`').skip(1).step_by(2);
        if let Some(near) = closest(name, candidates) {
            return format!("{unknown}{name}`: did you mean `{near}`? (expected {expected})");
        }
    }
    message.to_owned()
}

/// [`serde_message`] for the value at `key` (a dotted path, e.g. `bulkheads.db`), with what
/// its words alone do not tell: a missing field's meaning, from the reference
/// (`docs/scenario-format.md`, the one place keys are described); a number written with a unit
/// where the key takes a plain number; a table written as a string, without the name of the
/// reader's Rust type.
pub fn serde_message_at(message: &str, key: &str) -> String {
    if let Some(said) = synonym(message, key) {
        return said;
    }
    let message = serde_message(message);
    if let Some(field) = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.strip_suffix('`'))
    {
        let said = match step_action(key) {
            // A step's action: its declaration's, not a row of the flows' section.
            Some(action) => step_action_meaning(action, field),
            None => declared_meaning(key, field).or_else(|| meaning(key, field)),
        };
        return match said {
            Some((section, meaning)) => format!(
                "missing field `{field}`, which {section} requires: {meaning} \
                 (docs/scenario-format.md)"
            ),
            None => message,
        };
    }
    let Some((found, expected)) = message
        .strip_prefix("invalid type: ")
        .and_then(|rest| rest.split_once(", expected "))
    else {
        return message;
    };
    let leaf = key.rsplit('.').next().unwrap_or(key);
    if let Some(text) = found
        .strip_prefix("string \"")
        .and_then(|rest| rest.strip_suffix('"'))
    {
        const NUMBERS: [&str; 10] = [
            "f64", "f32", "u64", "u32", "u16", "u8", "usize", "i64", "i32", "a number",
        ];
        if NUMBERS.contains(&expected) {
            if let Some((amount, unit)) = number_and_unit(text) {
                let per_second = if unit == "/s" {
                    " (a rate is requests per second)"
                } else {
                    ""
                };
                return format!(
                    "`{text}` is a number with a unit, but `{leaf}` is a plain number{per_second}: \
                     write `{leaf} = {amount}`"
                );
            }
            return format!("`{leaf}` is a number, not a string: write it without quotes");
        }
    }
    if expected.starts_with("struct Raw") {
        let example = match leaf {
            "slo" => " e.g. `slo = { latency = \"200ms\", percentile = 99 }`".to_owned(),
            _ => format!(" `{leaf} = {{ ... }}` or a `[{key}]` section"),
        };
        return format!("expected a table, found {found}: write it as{example}");
    }
    message
}

/// Names a newcomer writes for a key the format spells otherwise, too far from it for a typo:
/// (the section, the name written, what to write instead).
const SYNONYMS: [(&str, &str, &str); 3] = [
    (
        "databases",
        "pool",
        "the pool is `max_connections` (its size; `connection_queue` is its wait queue)",
    ),
    (
        "databases",
        "pool_size",
        "the pool is `max_connections` (its size; `connection_queue` is its wait queue)",
    ),
    (
        "connections",
        "timeout",
        "a command's timeout is `command_timeout` (`connect_timeout` for connecting)",
    ),
];

/// serde's unknown-field `message` at `key`, when the name is a [`SYNONYMS`] entry of its
/// section: `unknown field `pool`: the pool is `max_connections` (...) (expected one of ...)`.
fn synonym(message: &str, key: &str) -> Option<String> {
    let (name, expected) = message
        .strip_prefix("unknown field `")?
        .split_once("`, expected ")?;
    let section = key.split('.').next()?;
    let (_, _, instead) = SYNONYMS
        .iter()
        .find(|(table, written, _)| *table == section && *written == name)?;
    Some(format!(
        "unknown field `{name}`: {instead} (expected {expected})"
    ))
}

/// `1500/s` as (`1500`, `/s`), `300ms` as (`300`, `ms`): a number, then letters or a slash.
fn number_and_unit(text: &str) -> Option<(&str, &str)> {
    let text = text.trim();
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(text.len());
    let (amount, unit) = text.split_at(end);
    let unit_like = unit.trim_start();
    (!amount.is_empty()
        && amount.parse::<f64>().is_ok()
        && !unit_like.is_empty()
        && unit_like
            .chars()
            .all(|c| c.is_ascii_alphabetic() || c == '/'))
    .then_some((amount, unit_like))
}

/// What the declaration of a table declared key by key (`keys::DECLARED_TABLES`) says
/// `field` of the table at `key` is, and which table that is: `loads.l.stages[0]` is one of a
/// load's `stages`. Its own table, not the first row of the reference's section that has the
/// field's name (a stage's `duration` is not the load's).
fn declared_meaning(key: &str, field: &str) -> Option<(String, String)> {
    let mut parts = key.split('.');
    let root = parts.next()?;
    let &(_, mut spec) = DECLARED_TABLES.iter().find(|(table, _)| *table == root)?;
    parts.next()?;
    let mut within = Vec::new();
    for part in parts {
        let name = part.split('[').next()?;
        spec = match spec.key(name)?.value {
            Value::Table(nested) | Value::Tables(nested) => nested,
            _ => return None,
        };
        within.push(name);
    }
    let doc = spec.key(field)?.doc;
    let section = match within.as_slice() {
        [] => format!("a `[{root}.<name>]`"),
        within => format!("`{}` in a `[{root}.<name>]`", within.join(".")),
    };
    Some((section, doc.to_owned()))
}

/// The action whose table is at `key`, when `key` is one: `cache` for
/// `flows.read.steps[0].cache`.
fn step_action(key: &str) -> Option<&str> {
    let mut parts = key.split('.');
    let (root, _flow, step, action) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    (root == "flows" && step.starts_with("steps[") && parts.next().is_none()).then_some(action)
}

/// What the declaration of the step action `action` (`step_keys::action_table`) says
/// its key `field` is; nothing for an action not declared there.
fn step_action_meaning(action: &str, field: &str) -> Option<(String, String)> {
    let spec = step_keys::action_table(action)?;
    let doc = spec.key(field)?.doc;
    Some((format!("a step's `{action}`"), doc.to_owned()))
}

/// The reference the messages quote.
const REFERENCE: &str = include_str!("../../docs/scenario-format.md");

/// What the reference says `field` of the table at `key` means: its section's heading
/// (``[bulkheads.<name>]`` for `bulkheads.db`, ``[report]`` for `report`) and the last cell of
/// the field's row in that section's table; `None` when the reference has no such row or says
/// nothing more than "required".
fn meaning(key: &str, field: &str) -> Option<(String, String)> {
    let kind = key
        .split(['.', '['])
        .next()
        .filter(|kind| !kind.is_empty())?;
    let headings = [format!("`[{kind}.<name>]`"), format!("`[{kind}]`")];
    let mut lines = REFERENCE.lines();
    let heading = lines.by_ref().find(|line| {
        line.starts_with("## ") && headings.iter().any(|h| line.contains(h.as_str()))
    })?;
    let section = if heading.contains("<name>]") {
        format!("a `[{kind}.<name>]`")
    } else {
        format!("`[{kind}]`")
    };
    let row = format!("| `{field}` |");
    let line = lines
        .take_while(|line| !line.starts_with("## "))
        .find(|line| line.starts_with(&row))?;
    let meaning = line
        .trim_end()
        .trim_end_matches('|')
        .rsplit('|')
        .next()?
        .trim();
    (!meaning.is_empty() && !matches!(meaning, "required" | "yes"))
        .then(|| (section, meaning.to_owned()))
}

/// Levenshtein distance, in characters: insertions, deletions and substitutions. Names are
/// short, so the quadratic table is nothing.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, a_char) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, &b_char) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(a_char != b_char);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        for (a, b, distance) in [
            ("redis", "redis", 0),
            ("rediss", "redis", 1),
            ("reids", "redis", 2),
            ("cache", "db", 5),
            ("", "ab", 2),
        ] {
            assert_eq!(edit_distance(a, b), distance, "{a} {b}");
        }
    }

    #[test]
    fn only_plausible_typos_are_suggested() {
        let names = ["redis", "cache", "db", "db2"];
        assert_eq!(closest("rediss", names), Some("redis"));
        assert_eq!(closest("cahce", names), Some("cache"));
        assert_eq!(closest("db22", names), Some("db2"), "one edit beats two");
        assert_eq!(closest("db3", names), Some("db"), "a tie goes to the first");
        assert_eq!(closest("x", names), None, "too short to be a typo");
        assert_eq!(closest("postgres", names), None);
        assert_eq!(closest("redis", names), None, "not misspelt");
    }

    #[test]
    fn a_missing_field_says_what_it_is_from_the_reference() {
        assert_eq!(
            serde_message_at("missing field `queue`", "bulkheads.db"),
            "missing field `queue`, which a `[bulkheads.<name>]` requires: waiters in FIFO \
             order; when full, the step fails with `shed` at once (0 sheds whenever no permit \
             is free) (docs/scenario-format.md)"
        );
        // A row that says no more than "required", or a field the reference has no row for,
        // keeps serde's words.
        assert_eq!(
            serde_message_at("missing field `nothing`", "bulkheads.db"),
            "missing field `nothing`"
        );
    }

    #[test]
    fn a_missing_field_of_a_declared_table_says_what_its_declaration_says() {
        assert_eq!(
            serde_message_at("missing field `duration`", "loads.l.stages[0]"),
            "missing field `duration`, which `stages` in a `[loads.<name>]` requires: how long \
             the rate takes to move to `target` (docs/scenario-format.md)"
        );
        assert_eq!(
            serde_message_at("missing field `flow`", "loads.l"),
            "missing field `flow`, which a `[loads.<name>]` requires: the request type sent \
             (docs/scenario-format.md)"
        );
    }

    #[test]
    fn a_number_with_a_unit_or_a_string_table_says_what_to_write() {
        assert_eq!(
            serde_message_at(
                "invalid type: string \"1500/s\", expected f64",
                "loads.peak.rate"
            ),
            "`1500/s` is a number with a unit, but `rate` is a plain number (a rate is \
             requests per second): write `rate = 1500`"
        );
        assert_eq!(
            serde_message_at("invalid type: string \"ten\", expected u64", "keys.k.count"),
            "`count` is a number, not a string: write it without quotes"
        );
        assert_eq!(
            serde_message_at(
                "invalid type: string \"p99 < 200ms\", expected struct RawSlo",
                "report.slo"
            ),
            "expected a table, found string \"p99 < 200ms\": write it as e.g. \
             `slo = { latency = \"200ms\", percentile = 99 }`"
        );
    }

    #[test]
    fn a_name_the_format_spells_otherwise_says_what_to_write() {
        let expected = "one of `latency`, `capacity`, `max_connections`, `connection_queue`";
        assert_eq!(
            serde_message_at(
                &format!("unknown field `pool`, expected {expected}"),
                "databases.pg.pool"
            ),
            format!(
                "unknown field `pool`: the pool is `max_connections` (its size; \
                 `connection_queue` is its wait queue) (expected {expected})"
            )
        );
        // Only in its own section: a `pool` elsewhere is unknown as any other name.
        let elsewhere = "unknown field `pool`, expected one of `server`";
        assert_eq!(serde_message_at(elsewhere, "connections.c.pool"), elsewhere);
    }

    #[test]
    fn serde_messages_gain_a_suggestion_only_for_a_near_miss() {
        assert_eq!(
            serde_message(
                "unknown field `comand_timeout`, expected one of `server`, `command_timeout`"
            ),
            "unknown field `comand_timeout`: did you mean `command_timeout`? (expected one of `server`, `command_timeout`)"
        );
        assert_eq!(
            serde_message("unknown variant `hnag`, expected `stop` or `hang`"),
            "unknown variant `hnag`: did you mean `hang`? (expected `stop` or `hang`)"
        );
        for unchanged in [
            "unknown field `cost`, expected one of `command_cost`, `hz`",
            "unknown field `x`, there are no fields",
            "missing field `name`",
        ] {
            assert_eq!(serde_message(unchanged), unchanged);
        }
    }
}
