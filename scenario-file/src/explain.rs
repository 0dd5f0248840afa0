//! `outagelab validate --explain`: the values each breaker, retry policy, connection and fault
//! of a variant runs with, written back as the file's keys, with the preset they started from
//! and its source (a fault's keys and their defaults come from `fault_kinds`).
//! A reviewer reads here what a `preset = "..."` expanded to after the file's overrides.

use std::fmt::Write as _;

use outagelab_model::backoff::{Growth, Jitter};
use outagelab_model::breaker::{
    EvaluateOn, HalfOpenRule, LateFailures, Threshold, Trip, UncountedAs, Window,
};
use outagelab_model::presets;
use outagelab_report::Outcome;
use outagelab_sim::Scenario;
use outagelab_sim::scenario::{
    BreakerSpec, ConnectionSpec, OnError, OutcomeSet, Reconnect, RetrySpec, StepSpec,
};

use crate::Variant;
use crate::breaker_keys::BREAKER;
use crate::connection_keys::CONNECTION;
use crate::keys::{KeyDefault, KeySpec};
use crate::retry_keys::RETRY;

/// The breakers, retry policies, connections and faults of `variant`, one block each, as
/// `key = value` lines.
pub fn explain(variant: &Variant) -> String {
    let mut out = String::new();
    let preset_of = |section: &str| {
        variant
            .presets
            .iter()
            .find(|used| used.section == section)
            .map(|used| used.preset.as_str())
    };
    for breaker in &variant.scenario.breakers {
        let section = format!("breakers.{}", breaker.name);
        explain_breaker(&mut out, &section, preset_of(&section), breaker);
    }
    for retry in &variant.scenario.retries {
        let section = format!("retries.{}", retry.name);
        explain_retry(&mut out, &section, preset_of(&section), retry);
    }
    for connection in &variant.scenario.connections {
        let section = format!("connections.{}", connection.name);
        explain_connection(&mut out, &section, preset_of(&section), connection);
    }
    for fault in &variant.scenario.faults {
        crate::fault_kinds::explain(
            &mut out,
            &format!("faults.{}", fault.name),
            &variant.settings,
        );
    }
    if out.is_empty() {
        out.push_str("(no breakers, retry policies, connections or faults)\n");
    }
    mark_overrides(&out, variant)
}

/// Marks each `key = value` line whose key the file (or the variant's patch) wrote with
/// `# set in the file`; the others are the preset's or the default.
fn mark_overrides(text: &str, variant: &Variant) -> String {
    let mut out = String::new();
    let mut section = "";
    for line in text.lines() {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name;
        }
        out.push_str(line);
        if let Some((key, _)) = line.strip_prefix("  ").and_then(|l| l.split_once(" = "))
            && variant.settings.contains_key(&format!("{section}.{key}"))
        {
            out.push_str("  # set in the file");
        }
        out.push('\n');
    }
    out
}

/// What an error does in each flow of `scenario`, for every step that can fail (see
/// [`StepSpec::can_fail`]): `(flow, "GET cache -> next (fail-open); db main -> fail")`, in
/// flow order, leaving out flows where no step can fail. `run`'s table prints it, so whether a
/// design fails open or closed is on the page and not only in the file.
pub fn error_routing(scenario: &Scenario) -> Vec<(String, String)> {
    let mut flows = Vec::new();
    // A copy of a service's flow for another instance routes errors as its base does.
    for flow in scenario
        .flows
        .iter()
        .filter(|f| f.instance.is_none_or(|i| i.index == 0))
    {
        let steps: Vec<(usize, &StepSpec)> = flow
            .steps
            .iter()
            .enumerate()
            .filter(|(_, step)| step.can_fail())
            .collect();
        if steps.is_empty() {
            continue;
        }
        let named: Vec<String> = steps
            .iter()
            .map(|(_, step)| scenario.step_name(step))
            .collect();
        let routes: Vec<String> = steps
            .iter()
            .zip(&named)
            .map(|((index, step), name)| {
                // Two steps that read alike are told apart by their number.
                let name = if named.iter().filter(|other| *other == name).count() > 1 {
                    format!("{name} (step {index})")
                } else {
                    name.clone()
                };
                let route = match step.on_error {
                    OnError::Fail => "fail",
                    OnError::Next => "next (fail-open)",
                    OnError::Ignore => "ignore (fire-and-forget)",
                };
                format!("{name} -> {route}")
            })
            .collect();
        flows.push((flow.name.clone(), routes.join("; ")));
    }
    flows
}

fn header(out: &mut String, section: &str, preset: Option<(&str, &str, &str)>) {
    let _ = writeln!(out, "[{section}]");
    if let Some((name, source, notes)) = preset {
        let _ = writeln!(out, "  preset = \"{name}\"");
        let _ = writeln!(out, "    # source: {source}");
        let _ = writeln!(out, "    # notes: {notes}");
    }
}

fn explain_breaker(out: &mut String, section: &str, preset: Option<&str>, spec: &BreakerSpec) {
    let found = preset.and_then(presets::breaker_preset);
    header(out, section, found.map(|p| (p.name, p.source, p.notes)));
    for key in BREAKER.keys {
        if let Some(value) = breaker_value(spec, key.name) {
            let _ = writeln!(out, "  {} = {value}", key.name);
        }
    }
}

/// What the breaker runs with for its key `name` (in the declaration's order), as the file
/// would write it; `None` for a key not printed: the preset (in the header), the rule it does
/// not have, a threshold without a rate, a slow-call share without a slow-call rule.
fn breaker_value(spec: &BreakerSpec, name: &str) -> Option<String> {
    let config = &spec.config;
    let quoted = |value: &dyn std::fmt::Display| format!("\"{value}\"");
    let rate_rule = matches!(config.trip(), Trip::FailureRate { .. });
    Some(match name {
        "enabled" => spec.enabled.to_string(),
        "preset" => return None,
        "failures" => match config.trip() {
            Trip::Consecutive { failures_max } => failures_max.to_string(),
            Trip::FailureRate { .. } => return None,
        },
        "failure_rate" => failure_rate(config.trip())?,
        "open_for" => quoted(&config.open_for()),
        "half_open_probes" => config.probes_max().to_string(),
        "counts" => outcomes(spec.counts),
        "ignores" => outcomes(spec.ignores),
        "late_failures" => quoted(&match config.late_failures() {
            LateFailures::Ignored => "ignored",
            LateFailures::Counted => "counted",
        }),
        "half_open_rule" => quoted(&match config.half_open_rule() {
            HalfOpenRule::AllProbesSucceed => "all_probes_succeed",
            HalfOpenRule::FailureRate => "failure_rate",
        }),
        "uncounted_as" => quoted(&match config.uncounted_as() {
            UncountedAs::Ignored => "ignored",
            UncountedAs::Success => "success",
        }),
        "half_open_max_wait" => config
            .half_open_max_wait()
            .map_or("none (waits for ever)".to_owned(), |wait| quoted(&wait)),
        "warm_up" => config
            .warm_up()
            .map_or("none".to_owned(), |warm_up| quoted(&warm_up)),
        "open_for_factor" => thousandths(config.open_for_factor_permille()),
        "open_for_max" => quoted(&config.open_for_max()),
        "evaluate_on" => quoted(&match config.evaluate_on() {
            EvaluateOn::Any => "any",
            EvaluateOn::Failure => "failure",
        }),
        "threshold" if !rate_rule => return None,
        "threshold" => quoted(&match config.threshold() {
            Threshold::Reached => "reached",
            Threshold::Exceeded => "exceeded",
        }),
        "slow_call_duration" => config
            .slow_calls()
            .map_or("none (no slow-call rule)".to_owned(), |slow| {
                quoted(&slow.duration)
            }),
        "slow_call_percent" => thousandths(config.slow_calls()?.rate_permille * 100),
        _ => panic!("`validate --explain` does not print the breaker's `{name}`"),
    })
}

/// A failure-rate rule as the file writes it.
fn failure_rate(trip: Trip) -> Option<String> {
    let Trip::FailureRate {
        rate_permille,
        window,
        min_calls,
    } = trip
    else {
        return None;
    };
    let window = match window {
        Window::Calls(calls) => format!("window_calls = {calls}"),
        Window::Time { length, slots } => {
            format!("window = \"{length}\", window_slots = {slots}")
        }
    };
    Some(format!(
        "{{ percent = {}, {window}, min_calls = {min_calls} }}",
        thousandths(rate_permille * 100)
    ))
}

fn explain_retry(out: &mut String, section: &str, preset: Option<&str>, spec: &RetrySpec) {
    let found = preset.and_then(presets::retry_preset);
    header(out, section, found.map(|p| (p.name, p.source, p.notes)));
    for key in RETRY.keys {
        if let Some(value) = retry_value(spec, key.name) {
            let _ = writeln!(out, "  {} = {value}", key.name);
        }
    }
}

/// What the retry policy runs with for its key `name` (in the declaration's order), as the
/// file would write it; `None` for a key not printed: the preset (in the header), a spread
/// without proportional jitter, a budget's keys without a budget.
fn retry_value(spec: &RetrySpec, name: &str) -> Option<String> {
    let config = &spec.config;
    let backoff = config.backoff();
    let quoted = |value: &dyn std::fmt::Display| format!("\"{value}\"");
    Some(match name {
        "enabled" => spec.enabled.to_string(),
        "preset" => return None,
        "max_attempts" => config.max_attempts().to_string(),
        "backoff" => quoted(&backoff.base()),
        "backoff_factor" => thousandths(backoff.factor_permille()),
        "backoff_max" => quoted(&backoff.ceiling()),
        "backoff_growth" => quoted(&match backoff.growth() {
            Growth::Exponential => "exponential",
            Growth::Fibonacci => "fibonacci",
        }),
        "jitter" => quoted(&match backoff.jitter() {
            Jitter::None => "none",
            Jitter::Full => "full",
            Jitter::Equal => "equal",
            Jitter::Decorrelated => "decorrelated",
            Jitter::Proportional { .. } => "proportional",
        }),
        "randomization_factor" => match backoff.jitter() {
            Jitter::Proportional {
                randomization_permille,
            } => thousandths(randomization_permille),
            _ => return None,
        },
        "elapsed_max" => config
            .elapsed_max()
            .map_or("none".to_owned(), |max| quoted(&max)),
        "budget_percent" => config
            .budget()
            .map_or("none (no budget)".to_owned(), |budget| {
                thousandths(budget.ratio_permille() * 100)
            }),
        "budget_min_per_second" => config.budget()?.min_retries_per_second().to_string(),
        "budget_window" => quoted(&config.budget()?.ttl()),
        "retry_on" => outcomes(spec.retry_on),
        _ => panic!("`validate --explain` does not print the retry policy's `{name}`"),
    })
}

fn explain_connection(
    out: &mut String,
    section: &str,
    preset: Option<&str>,
    spec: &ConnectionSpec,
) {
    let found = preset.and_then(presets::client_preset);
    header(out, section, found.map(|p| (p.name, p.source, p.notes)));
    for key in CONNECTION.keys {
        if let Some(value) = connection_value(spec, key.name) {
            let _ = writeln!(out, "  {} = {value}", key.name);
        }
    }
}

/// What the connection runs with for its key `name` (in the declaration's order), as the file
/// would write it: the keys a client preset gives, and a manager's retries; `None` for the
/// others (its server, its network, its subscriptions: as the file wrote them), and for a
/// growth where it is not `reconnect = "always"`'s.
fn connection_value(spec: &ConnectionSpec, name: &str) -> Option<String> {
    let quoted = |value: &dyn std::fmt::Display| format!("\"{value}\"");
    Some(match name {
        "command_timeout" => spec
            .command_timeout
            .map_or("none (waits for ever)".to_owned(), |t| quoted(&t)),
        "offline_queue" => spec.offline_queue.to_string(),
        "max_retries" => spec
            .max_retries
            .map_or("\"unlimited\"".to_owned(), |max| max.to_string()),
        "connect_timeout" => quoted(&spec.connect_timeout),
        "reconnect_delay" => quoted(&spec.reconnect_delay),
        "reconnect_delay_max" => quoted(&spec.reconnect_delay_max),
        "reconnect_growth" if spec.reconnect != Reconnect::Always => return None,
        "reconnect_growth" => quoted(&match spec.reconnect_growth {
            presets::ReconnectGrowth::Linear => "linear",
            presets::ReconnectGrowth::Doubling => "doubling",
        }),
        "reconnect" => quoted(&match spec.reconnect {
            Reconnect::Always => "always",
            Reconnect::Never => "never",
            Reconnect::Slot(_) => "slot",
            Reconnect::Manager { .. } => "manager",
        }),
        "pending_max" => spec
            .pending_max
            .map_or("none".to_owned(), |max| max.to_string()),
        "reconnect_retries" => match spec.reconnect {
            Reconnect::Manager { retries } => retries.to_string(),
            _ => return None,
        },
        _ => return None,
    })
}

/// The breaker presets' table of `docs/scenario-format.md`: see [`presets_table`].
pub fn breaker_presets_table() -> String {
    let presets: Vec<_> = (presets::BREAKER_PRESETS.iter())
        .map(|preset| (preset.name, preset.source, preset.notes))
        .collect();
    let scenario = preset_scenario("breakers", "", &presets);
    presets_table(&presets, BREAKER.keys, |i, key| {
        breaker_value(&scenario.breakers[i], key)
    })
}

/// The retry presets' table of `docs/scenario-format.md`: see [`presets_table`].
pub fn retry_presets_table() -> String {
    let presets: Vec<_> = (presets::RETRY_PRESETS.iter())
        .map(|preset| (preset.name, preset.source, preset.notes))
        .collect();
    let scenario = preset_scenario("retries", "", &presets);
    presets_table(&presets, RETRY.keys, |i, key| {
        retry_value(&scenario.retries[i], key)
    })
}

/// The client presets' table of `docs/scenario-format.md`: see [`presets_table`].
pub fn client_presets_table() -> String {
    let presets: Vec<_> = (presets::CLIENT_PRESETS.iter())
        .map(|preset| (preset.name, preset.source, preset.notes))
        .collect();
    let scenario = preset_scenario("connections", "server = \"redis\"\n", &presets);
    presets_table(&presets, CONNECTION.keys, |i, key| {
        connection_value(&scenario.connections[i], key)
    })
}

/// A scenario with one table of `root` per preset, `p0`, `p1`, ... in the presets' order,
/// each naming its preset and nothing else (but `also`): what a preset alone runs with, read
/// as any file is read.
fn preset_scenario(root: &str, also: &str, presets: &[(&str, &str, &str)]) -> Scenario {
    assert!(presets.len() <= 10, "`p10` would sort before `p2`");
    let mut text = String::from(
        "[scenario]\nname = \"presets\"\n\n[servers.redis]\n\n[databases.db]\n\
         latency = \"1ms\"\n\n[flows.f]\nsteps = [{ db = { name = \"db\" } }]\n\n\
         [loads.l]\nflow = \"f\"\narrivals = \"even\"\nrate = 1\ncount = 1\n",
    );
    for (i, (name, ..)) in presets.iter().enumerate() {
        let _ = write!(text, "\n[{root}.p{i}]\n{also}preset = \"{name}\"\n");
    }
    let file = crate::parse(&text, std::path::Path::new("presets.toml"));
    let mut file = file.unwrap_or_else(|error| panic!("every preset reads: {error}"));
    file.variants.swap_remove(0).scenario
}

/// A table of presets: a row per key a preset gives (declared [`KeyDefault::Preset`], in the
/// declaration's order), a column per preset, each cell what `validate --explain` prints for
/// a table of that preset alone (`value(i, key)` for the `i`-th preset; empty where it prints
/// nothing); then each preset's source and notes, as `--explain` prints them.
fn presets_table(
    presets: &[(&str, &str, &str)],
    keys: &[KeySpec],
    value: impl Fn(usize, &str) -> Option<String>,
) -> String {
    let mut out = String::from("| key |");
    for (name, ..) in presets {
        let _ = write!(out, " `{name}` |");
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(presets.len()));
    out.push('\n');
    for key in keys.iter() {
        if !matches!(key.default, KeyDefault::Preset(_)) {
            continue;
        }
        let _ = write!(out, "| `{}` |", key.name);
        for i in 0..presets.len() {
            match value(i, key.name) {
                Some(value) => {
                    let _ = write!(out, " `{value}` |");
                }
                None => out.push_str(" |"),
            }
        }
        out.push('\n');
    }
    out.push('\n');
    for (name, source, notes) in presets {
        let _ = writeln!(out, "- `{name}`: {source}. Notes: {notes}");
    }
    out
}

/// A count of thousandths as a decimal number: 1500 is `1.5`, 2000 is `2`.
fn thousandths(value: u32) -> String {
    let (whole, fraction) = (value / 1000, value % 1000);
    if fraction == 0 {
        whole.to_string()
    } else {
        let digits = format!("{fraction:03}");
        format!("{whole}.{}", digits.trim_end_matches('0'))
    }
}

fn outcomes(set: OutcomeSet) -> String {
    let names: Vec<String> = Outcome::ALL
        .iter()
        .filter(|outcome| set.contains(**outcome))
        .map(|outcome| format!("\"{}\"", outcome.name()))
        .collect();
    format!("[{}]", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::KeyDefault;

    const FILE: &str = r#"[scenario]
name = "t"

[databases.db]
latency = "10ms"

[servers.redis]

[connections.rs]
server = "redis"
preset = "redis-rs-multiplexed"
command_timeout = "250ms"

[breakers.r4j]
preset = "resilience4j"
open_for = "10s"
half_open_max_wait = "2s"

[breakers.plain]
failures = 3
open_for = "1s"

[retries.crate]
preset = "backoff-crate"
randomization_factor = 0.25

[flows.f]
steps = [{ db = { name = "db" }, breaker = "r4j", retry = "crate" }, { db = { name = "db" }, breaker = "plain" }]

[loads.l]
flow = "f"
arrivals = "even"
rate = 10
count = 5
"#;

    #[test]
    fn every_declared_breaker_key_but_the_preset_is_printed() {
        let parsed = crate::parse(FILE, std::path::Path::new("t.toml")).expect("valid");
        let variant = &parsed.variants[0];
        // A rate rule with a slow-call rule (resilience4j) and consecutive failures (plain).
        let printed = |key: &str| {
            variant
                .scenario
                .breakers
                .iter()
                .any(|breaker| breaker_value(breaker, key).is_some())
        };
        for key in BREAKER.keys {
            assert_eq!(printed(key.name), key.name != "preset", "{}", key.name);
        }
    }

    #[test]
    fn every_declared_retry_key_but_the_preset_is_printed() {
        let file = FILE.replace(
            "randomization_factor = 0.25",
            "randomization_factor = 0.25\nbudget_percent = 10",
        );
        let parsed = crate::parse(&file, std::path::Path::new("t.toml")).expect("valid");
        let retry = &parsed.variants[0].scenario.retries[0];
        for key in RETRY.keys {
            let printed = retry_value(retry, key.name).is_some();
            assert_eq!(printed, key.name != "preset", "{}", key.name);
        }
    }

    /// A connection's block is what a client preset gives: every key declared to take a
    /// preset's value, and a manager's retries.
    #[test]
    fn a_connection_prints_the_keys_a_preset_gives() {
        let file = FILE.replace(
            "[breakers.r4j]",
            "[connections.lettuce]\nserver = \"redis\"\npreset = \"lettuce\"\n\n\
             [connections.manager]\nserver = \"redis\"\nreconnect = \"manager\"\n\n\
             [breakers.r4j]",
        );
        let parsed = crate::parse(&file, std::path::Path::new("t.toml")).expect("valid");
        let connections = &parsed.variants[0].scenario.connections;
        for key in CONNECTION.keys {
            let printed = connections
                .iter()
                .any(|connection| connection_value(connection, key.name).is_some());
            let given = matches!(key.default, KeyDefault::Preset(_));
            assert_eq!(
                printed,
                given || key.name == "reconnect_retries",
                "{}",
                key.name
            );
        }
    }

    #[test]
    fn a_preset_expands_to_its_table_and_the_file_overrides_it_key_by_key() {
        let file = crate::parse(FILE, std::path::Path::new("t.toml")).unwrap();
        let variant = &file.variants[0];
        let r4j = &variant.scenario.breakers[1].config;
        let preset = presets::RESILIENCE4J;
        assert_eq!(r4j.trip(), preset.trip);
        assert_eq!(r4j.probes_max(), 10);
        assert_eq!(r4j.half_open_rule(), HalfOpenRule::FailureRate);
        assert_eq!(r4j.uncounted_as(), UncountedAs::Success);
        // Overridden by the file.
        assert_eq!(r4j.open_for(), outagelab_model::SimDuration::from_secs(10));
        assert_eq!(
            r4j.half_open_max_wait(),
            Some(outagelab_model::SimDuration::from_secs(2))
        );
        let retry = &variant.scenario.retries[0].config;
        assert_eq!(
            retry.backoff().jitter(),
            Jitter::Proportional {
                randomization_permille: 250
            }
        );
        assert_eq!(retry.elapsed_max(), presets::BACKOFF_CRATE.elapsed_max);
        let text = explain(variant);
        for line in [
            "[breakers.r4j]\n  preset = \"resilience4j\"",
            "  failure_rate = { percent = 50, window_calls = 100, min_calls = 100 }",
            "  open_for = \"10s\"",
            "  half_open_rule = \"failure_rate\"",
            "  warm_up = none",
            "[breakers.plain]\n  enabled = true\n  failures = 3",
            "  randomization_factor = 0.25",
            "  elapsed_max = \"900s\"",
        ] {
            assert!(text.contains(line), "no `{line}` in:\n{text}");
        }
        let connection = &variant.scenario.connections[0];
        assert_eq!(
            connection.reconnect,
            outagelab_sim::scenario::Reconnect::Never
        );
        assert!(!connection.offline_queue);
        assert_eq!(connection.max_retries, Some(0));
        assert_eq!(
            connection.command_timeout,
            Some(outagelab_model::SimDuration::from_millis(250))
        );
        assert!(text.contains("[connections.rs]\n  preset = \"redis-rs-multiplexed\"",));
        assert!(text.contains("  reconnect = \"never\""), "{text}");
        // Other presets, swapped into the file: the lines their values print as.
        let cases: [(&str, &str, &[&str]); 2] = [
            // A backon retry's waits follow Fibonacci.
            (
                "preset = \"backoff-crate\"\nrandomization_factor = 0.25",
                "preset = \"backon-fibonacci\"",
                &[
                    "  backoff_growth = \"fibonacci\"",
                    "  backoff_max = \"60s\"",
                    "  max_attempts = 4",
                ],
            ),
            // A lettuce connection's delays double.
            (
                "preset = \"redis-rs-multiplexed\"",
                "preset = \"lettuce\"",
                &[
                    "  reconnect_delay = \"1ms\"",
                    "  reconnect_delay_max = \"30s\"",
                    "  reconnect_growth = \"doubling\"",
                ],
            ),
        ];
        for (from, to, lines) in cases {
            let swapped = crate::parse(&FILE.replace(from, to), std::path::Path::new("t.toml"));
            let text = explain(&swapped.unwrap().variants[0]);
            for line in lines {
                assert!(text.contains(line), "{to}: no `{line}` in:\n{text}");
            }
        }
        assert_eq!(
            variant.presets,
            [
                crate::PresetUse {
                    section: "connections.rs".to_owned(),
                    preset: "redis-rs-multiplexed".to_owned()
                },
                crate::PresetUse {
                    section: "breakers.r4j".to_owned(),
                    preset: "resilience4j".to_owned()
                },
                crate::PresetUse {
                    section: "retries.crate".to_owned(),
                    preset: "backoff-crate".to_owned()
                },
            ]
        );
    }

    /// A Polly window the file writes without its slots is kept as Polly keeps it: one window
    /// under 200 ms, ten from 200 ms; other breakers get ten slots at any length.
    #[test]
    fn a_polly_window_under_200_ms_is_one_window() {
        let file = |breaker: &str, window: &str| {
            FILE.replace(
                "[breakers.plain]\nfailures = 3\nopen_for = \"1s\"",
                &format!(
                    "[breakers.plain]\n{breaker}\nopen_for = \"1s\"\nfailure_rate = {{ percent = 10, \
                     window = \"{window}\", min_calls = 2 }}\nignores = [\"oom\"]\nwarm_up = \"2s\""
                ),
            )
        };
        for (breaker, window, slots) in [
            ("preset = \"polly-v8\"", "150ms", 1),
            ("preset = \"polly-v8\"", "199ms", 1),
            ("preset = \"polly-v8\"", "200ms", 10),
            ("preset = \"polly-v7-advanced\"", "100ms", 1),
            ("preset = \"opossum\"", "150ms", 10),
            ("", "150ms", 10),
        ] {
            let parsed = crate::parse(&file(breaker, window), std::path::Path::new("t.toml"))
                .unwrap_or_else(|e| panic!("{e}"));
            let variant = &parsed.variants[0];
            let text = explain(variant);
            let line = format!("window = \"{window}\", window_slots = {slots}");
            assert!(text.contains(&line), "{breaker}: no `{line}` in:\n{text}");
            assert!(text.contains("  ignores = [\"oom\"]"), "{text}");
            assert!(text.contains("  warm_up = \"2s\""), "{text}");
            let threshold = if breaker.contains("opossum") {
                "exceeded"
            } else {
                "reached"
            };
            let line = format!("  threshold = \"{threshold}\"");
            assert!(text.contains(&line), "{breaker}: no `{line}` in:\n{text}");
        }
    }

    #[test]
    fn thousandths_print_as_short_decimals() {
        assert_eq!(thousandths(2000), "2");
        assert_eq!(thousandths(1500), "1.5");
        assert_eq!(thousandths(50_100), "50.1");
        assert_eq!(thousandths(5), "0.005");
    }
}
