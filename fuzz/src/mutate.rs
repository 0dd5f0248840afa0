//! Byte- and token-level mutation of the bundled scenario files: bytes flipped, inserted and
//! deleted, lines deleted, duplicated and swapped, numbers replaced by extremes (0, -1, 1e308,
//! 10 000 000, NaN, ...), durations by extremes (`"1ns"`, `"0s"`, `"10000000h"`, ...) and
//! quoted names by other names of the same file. A mutant is mostly the file it came from, so
//! it reaches the deep parts of a real scenario that a generator would rarely build.

use crate::rng::Rng;

macro_rules! bundled {
    ($file:literal) => {
        ($file, include_str!(concat!("../../scenarios/", $file)))
    };
}

/// Where the bundled scenarios are: inputs are read as if from a file here, so that a bundled
/// file's references beside it (`[observed] file`, a load's `rate_file`) resolve in its
/// mutants too.
pub const SCENARIOS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios");

/// Every bundled scenario (`scenarios/*.toml`), by file name; a test keeps the list equal to
/// the directory.
pub const BUNDLED: [(&str, &str); 33] = [
    bundled!("adaptive-limit.toml"),
    bundled!("blob-cache-blast-radius.toml"),
    bundled!("breaker-libraries.toml"),
    bundled!("breaker-open-sweep.toml"),
    bundled!("cache-load-bearing.toml"),
    bundled!("cascade-throttle.toml"),
    bundled!("client-options-probe.toml"),
    bundled!("closed-loop-pause.toml"),
    bundled!("db-slowdown.toml"),
    bundled!("explore-reconnect-slot.toml"),
    bundled!("explore-stall-burst.toml"),
    bundled!("flaky-dependency.toml"),
    bundled!("forwarder-outage.toml"),
    bundled!("gateway-rate-limit.toml"),
    bundled!("lock-guarded-writes.toml"),
    bundled!("policy-order.toml"),
    bundled!("postmortem-pause.toml"),
    bundled!("quick-start.toml"),
    bundled!("reconnect-slot.toml"),
    bundled!("redis-dead-protection-poisson.toml"),
    bundled!("redis-dead-protection.toml"),
    bundled!("retry-storm-map.toml"),
    bundled!("retry-storm.toml"),
    bundled!("seed000-blob-burst.toml"),
    bundled!("seed000-client-pause.toml"),
    bundled!("seed000-docker-pause.toml"),
    bundled!("seed000-explore.toml"),
    bundled!("seed000-maxmemory.toml"),
    bundled!("seed003-friday-night.toml"),
    bundled!("seed003-pubsub-invalidation.toml"),
    bundled!("shared-connection-hol.toml"),
    bundled!("traffic-ramp.toml"),
    bundled!("tune-retry-budget.toml"),
];

const NUMBER_EXTREMES: &[&str] = &[
    "0",
    "-1",
    "1",
    "1e308",
    "10000000",
    "1000000000",
    "4294967296",
    "18446744073709551615",
    "9223372036854775807",
    "nan",
    "inf",
    "0.0001",
    "1.5",
];

const DURATION_EXTREMES: &[&str] = &[
    "\"1ns\"",
    "\"0s\"",
    "\"1us\"",
    "\"-1s\"",
    "\"10000000h\"",
    "\"1e308s\"",
    "\"2562047h\"",
    "\"NaNms\"",
    "\"1.0000000001ms\"",
];

const INSERTED: &[u8] = b"[]{}=,.\"'#\n0123456789-e_ \\";

/// The mutations of one mutant, for the campaign's report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    FlipBit,
    InsertByte,
    DeleteBytes,
    DeleteLine,
    DuplicateLine,
    SwapLines,
    Number,
    Duration,
    SwapStrings,
}

const MUTATIONS: [Mutation; 9] = [
    Mutation::FlipBit,
    Mutation::InsertByte,
    Mutation::DeleteBytes,
    Mutation::DeleteLine,
    Mutation::DuplicateLine,
    Mutation::SwapLines,
    Mutation::Number,
    Mutation::Duration,
    Mutation::SwapStrings,
];

/// `text` with one to four mutations drawn from `seed` (one in most mutants, so that most
/// still read). Token mutations (numbers, durations,
/// names) are drawn twice as often as byte ones, whose mutants the reader mostly refuses.
/// Invalid UTF-8 that a byte mutation makes is replaced by U+FFFD.
pub fn mutate(seed: u64, text: &str) -> String {
    let mut rng = Rng::new(seed, 0, 2);
    let mut bytes = text.as_bytes().to_vec();
    let mutations = match rng.below(100) {
        0..60 => 1,
        60..85 => 2,
        _ => rng.range(3, 4),
    };
    for _ in 0..mutations {
        let mutation = if rng.chance(67) {
            *rng.pick(&MUTATIONS[6..])
        } else {
            *rng.pick(&MUTATIONS[..6])
        };
        apply(&mut rng, &mut bytes, mutation);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn apply(rng: &mut Rng, bytes: &mut Vec<u8>, mutation: Mutation) {
    if bytes.is_empty() {
        bytes.push(*rng.pick(INSERTED));
        return;
    }
    let len = bytes.len() as u64;
    match mutation {
        Mutation::FlipBit => {
            let at = rng.below(len) as usize;
            bytes[at] ^= 1 << rng.below(8);
        }
        Mutation::InsertByte => {
            let at = rng.range(0, len) as usize;
            let byte = if rng.chance(80) {
                *rng.pick(INSERTED)
            } else {
                rng.below(256) as u8
            };
            bytes.insert(at, byte);
        }
        Mutation::DeleteBytes => {
            let at = rng.below(len);
            let end = (at + rng.range(1, 16)).min(len);
            bytes.drain(at as usize..end as usize);
        }
        Mutation::DeleteLine | Mutation::DuplicateLine | Mutation::SwapLines => {
            let mut lines: Vec<Vec<u8>> =
                bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
            let count = lines.len() as u64;
            let at = rng.below(count) as usize;
            match mutation {
                Mutation::DeleteLine => {
                    lines.remove(at);
                }
                Mutation::DuplicateLine => {
                    let line = lines[at].clone();
                    lines.insert(at, line);
                }
                _ => {
                    let other = rng.below(count) as usize;
                    lines.swap(at, other);
                }
            }
            *bytes = lines.join(&b'\n');
        }
        Mutation::Number => {
            let numbers = tokens(
                bytes,
                |b| b.is_ascii_digit(),
                |b| b.is_ascii_digit() || b == b'.' || b == b'_',
            );
            if let Some(&(start, end)) = pick_span(rng, &numbers) {
                let extreme = if rng.chance(30) {
                    // The number scaled up: a burst of 10^7 instead of 10^3.
                    let original = String::from_utf8_lossy(&bytes[start..end]).into_owned();
                    format!("{original}{}", "0".repeat(rng.range(1, 7) as usize))
                } else {
                    (*rng.pick(NUMBER_EXTREMES)).to_owned()
                };
                bytes.splice(start..end, extreme.into_bytes());
            }
        }
        Mutation::Duration => {
            let durations: Vec<(usize, usize)> = strings(bytes)
                .into_iter()
                .filter(|&(start, end)| is_duration(&bytes[start + 1..end - 1]))
                .collect();
            if let Some(&(start, end)) = pick_span(rng, &durations) {
                let extreme = *rng.pick(DURATION_EXTREMES);
                bytes.splice(start..end, extreme.bytes());
            }
        }
        Mutation::SwapStrings => {
            let quoted = strings(bytes);
            if quoted.len() >= 2 {
                let (start, end) = *rng.pick(&quoted);
                let (from, to) = *rng.pick(&quoted);
                let replacement = bytes[from..to].to_vec();
                bytes.splice(start..end, replacement);
            }
        }
    }
}

fn pick_span<'a>(rng: &mut Rng, spans: &'a [(usize, usize)]) -> Option<&'a (usize, usize)> {
    (!spans.is_empty()).then(|| rng.pick(spans))
}

/// Spans of tokens that start with a byte `first` accepts and go on while `rest` accepts.
fn tokens(
    bytes: &[u8],
    first: impl Fn(u8) -> bool,
    rest: impl Fn(u8) -> bool,
) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if first(bytes[at]) && (at == 0 || !bytes[at - 1].is_ascii_alphanumeric()) {
            let start = at;
            at += 1;
            while at < bytes.len() && rest(bytes[at]) {
                at += 1;
            }
            spans.push((start, at));
        } else {
            at += 1;
        }
    }
    spans
}

/// Spans of double-quoted strings on one line, quotes included.
fn strings(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    for (at, &byte) in bytes.iter().enumerate() {
        match (byte, start) {
            (b'"', None) => start = Some(at),
            (b'"', Some(open)) => {
                spans.push((open, at + 1));
                start = None;
            }
            (b'\n', Some(_)) => start = None,
            _ => {}
        }
    }
    spans
}

/// Whether a string's content reads as a duration (`100ms`, `1.5s`).
fn is_duration(content: &[u8]) -> bool {
    let digits = content
        .iter()
        .take_while(|b| b.is_ascii_digit() || **b == b'.')
        .count();
    let unit = &content[digits..];
    digits > 0 && [&b"ns"[..], b"us", b"ms", b"s", b"m", b"h"].contains(&unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_file_is_listed() {
        let directory = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios");
        let mut files: Vec<String> = std::fs::read_dir(directory)
            .expect("the scenarios directory")
            .map(|entry| {
                entry
                    .expect("an entry")
                    .file_name()
                    .into_string()
                    .expect("UTF-8")
            })
            .filter(|name| name.ends_with(".toml"))
            .collect();
        files.sort();
        let listed: Vec<&str> = BUNDLED.iter().map(|(name, _)| *name).collect();
        assert_eq!(files, listed);
    }

    #[test]
    fn mutants_differ_and_repeat() {
        let (_, text) = BUNDLED[0];
        let mutants: Vec<String> = (0..50).map(|seed| mutate(seed, text)).collect();
        assert!(mutants.iter().all(|mutant| mutant != text));
        assert_eq!(mutants[3], mutate(3, text));
    }

    #[test]
    fn token_spans() {
        assert_eq!(
            strings(b"a = \"1s\", b = \"x\"\n\"y"),
            vec![(4, 8), (14, 17)]
        );
        assert!(is_duration(b"100ms") && is_duration(b"1.5s") && !is_duration(b"redis"));
    }
}
