//! "Did you mean": the name closest to a misspelt one, when one is close enough to be a typo.

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
