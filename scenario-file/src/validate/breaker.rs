//! A `[breakers.<name>]` table read through its declaration (`crate::breaker_keys`): every key
//! through [`TableReader`], which applies the preset's values and the defaults as each key
//! declares them; here, what the declaration cannot say: the rule written or the preset's, the
//! keys that go in pairs, and the config's refusals placed at the key they came from.

use std::ops::Range;

use outagelab_model::ConfigError;
use outagelab_model::backoff::FACTOR_PERMILLE_ONE;
use outagelab_model::breaker::{
    BreakerConfig, EvaluateOn, HalfOpenRule, LateFailures, SlowCalls, Threshold, Trip, UncountedAs,
    Window,
};
use outagelab_model::presets::{self, BreakerPreset};
use outagelab_model::time::SimDuration;
use outagelab_report::Outcome;
use outagelab_sim::scenario::{BreakerSpec, OutcomeSet};
use toml::Spanned;

use super::table::TableReader;
use super::{Reported, Validator};
use crate::breaker_keys::{BREAKER, RawBreaker};

type Reader<'v, 'a, 'r> = TableReader<'v, 'a, 'r>;

impl Validator<'_> {
    pub(super) fn breaker(&mut self, name: &str, raw: &RawBreaker) -> Option<BreakerSpec> {
        let table_span = self.key_span(&["breakers", name]);
        let prefix = format!("breakers.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &BREAKER, table_span);
        let preset = r.preset(presets::breaker_preset).ok()?;
        let config = breaker_config(&mut r, preset).ok()?;
        let (counts, ignores) = counted(&mut r);
        Some(BreakerSpec {
            name: name.to_owned(),
            enabled: r.flag("enabled"),
            config,
            counts,
            ignores,
        })
    }
}

/// The breaker's config: its rule, then every other key, each written or the preset's.
fn breaker_config(
    r: &mut Reader,
    preset: Option<&'static BreakerPreset>,
) -> Result<BreakerConfig, Reported> {
    let open_for = r.duration("open_for", preset.map(|p| p.open_for))?;
    let open_for = open_for.ok_or_else(|| r.missing("open_for"))?;
    let probes = r.count("half_open_probes", preset.map(|p| p.half_open_probes))?;
    let probes = probes.expect("declared with a default");
    let config = trip(r, preset, open_for, probes)?;
    let late_failures = r.choice(
        "late_failures",
        LATE_FAILURES,
        preset.map(|p| p.late_failures),
    )?;
    let uncounted_as = r.choice("uncounted_as", UNCOUNTED_AS, preset.map(|p| p.uncounted_as))?;
    let evaluate_on = r.choice("evaluate_on", EVALUATE_ON, preset.map(|p| p.evaluate_on))?;
    let half_open_rule = r.choice("half_open_rule", RULES, preset.map(|p| p.half_open_rule))?;
    let wait = r.duration(
        "half_open_max_wait",
        preset.and_then(|p| p.half_open_max_wait),
    )?;
    let warm_up = r.duration("warm_up", preset.and_then(|p| p.warm_up))?;
    let (factor_permille, open_for_max) = open_growth(r, preset, open_for)?;
    let slow_calls = slow_calls(r, preset)?;
    // A preset's threshold goes with a rate rule; consecutive failures written have none.
    let writes_failures = r.written("failures").is_some();
    let preset_threshold = preset.filter(|_| !writes_failures).map(|p| p.threshold);
    let threshold = r.choice("threshold", THRESHOLDS, preset_threshold)?;
    let config = config.and_then(|config| {
        config
            .with_threshold(threshold.expect("declared with a default"))?
            .with_half_open_rule(half_open_rule.expect("declared with a default"))?
            .with_half_open_max_wait(wait)?
            .with_open_growth(factor_permille, open_for_max)?
            .with_slow_calls(slow_calls)
    });
    let config = config.map_err(|error| refuse_config(r, error))?;
    Ok(config
        .with_late_failures(late_failures.expect("declared with a default"))
        .with_uncounted_as(uncounted_as.expect("declared with a default"))
        .with_evaluate_on(evaluate_on.expect("declared with a default"))
        .with_warm_up(warm_up))
}

const LATE_FAILURES: &[(&str, LateFailures)] = &[
    ("ignored", LateFailures::Ignored),
    ("counted", LateFailures::Counted),
];
const UNCOUNTED_AS: &[(&str, UncountedAs)] = &[
    ("ignored", UncountedAs::Ignored),
    ("success", UncountedAs::Success),
];
const EVALUATE_ON: &[(&str, EvaluateOn)] =
    &[("any", EvaluateOn::Any), ("failure", EvaluateOn::Failure)];
const RULES: &[(&str, HalfOpenRule)] = &[
    ("all_probes_succeed", HalfOpenRule::AllProbesSucceed),
    ("failure_rate", HalfOpenRule::FailureRate),
];
const THRESHOLDS: &[(&str, Threshold)] = &[
    ("reached", Threshold::Reached),
    ("exceeded", Threshold::Exceeded),
];

/// The rule that opens it: the file's `failures` or `failure_rate`, else the preset's. (The
/// config's refusal is placed later, with the other keys'.)
fn trip(
    r: &mut Reader,
    preset: Option<&BreakerPreset>,
    open_for: SimDuration,
    probes: u32,
) -> Result<Result<BreakerConfig, ConfigError>, Reported> {
    if r.written("failures").is_some() {
        let failures = r.count("failures", None)?.expect("written");
        return Ok(BreakerConfig::new(failures, open_for, probes));
    }
    if let Some(mut rate) = r.table("failure_rate") {
        let (rate_permille, window, min_calls) = failure_rate(&mut rate, preset)?;
        return Ok(BreakerConfig::failure_rate(
            rate_permille,
            window,
            min_calls,
            open_for,
            probes,
        ));
    }
    match preset.map(|p| p.trip) {
        Some(Trip::Consecutive { failures_max }) => {
            Ok(BreakerConfig::new(failures_max, open_for, probes))
        }
        Some(Trip::FailureRate {
            rate_permille,
            window,
            min_calls,
        }) => Ok(BreakerConfig::failure_rate(
            rate_permille,
            window,
            min_calls,
            open_for,
            probes,
        )),
        None => {
            let (span, prefix) = (r.table_span.clone(), r.prefix.clone());
            r.validator.error(
                span,
                prefix,
                "a breaker has no rule: give it one of `failures`, `failure_rate`, or a preset",
            );
            Err(Reported)
        }
    }
}

/// A written `failure_rate`: its percent, its window and its minimum, each reported on its
/// own before any is given up on.
fn failure_rate(
    rate: &mut Reader,
    preset: Option<&BreakerPreset>,
) -> Result<(u32, Window, u32), Reported> {
    let permille = rate.percent("percent", None);
    let min_calls = rate.count("min_calls", None);
    let window = if rate.written("window_calls").is_some() {
        if rate.written("window_slots").is_some() {
            rate.refuse(
                "window_slots",
                "applies to a time window (window), not to window_calls",
            );
        }
        let calls = rate.count("window_calls", None);
        calls.map(|calls| Window::Calls(calls.expect("written")))
    } else {
        let length = rate
            .duration("window", None)
            .map(|l| l.expect("one window is read"));
        // The default must divide the window too: it is pointed at there. Ten slots, or the
        // preset's rule (Polly keeps a window under 200 ms as one).
        let slots = match rate.written("window_slots") {
            Some(_) => rate
                .count("window_slots", None)
                .map(|slots| slots.expect("written")),
            None => length
                .as_ref()
                .map(|length| presets::window_slots(preset, *length))
                .map_err(|_| Reported),
        };
        length.and_then(|length| {
            Ok(Window::Time {
                length,
                slots: slots?,
            })
        })
    };
    let permille = permille?.expect("required");
    Ok((permille, window?, min_calls?.expect("required")))
}

/// How reopenings grow: the factor, and the ceiling it needs above 1 (else `open_for`).
fn open_growth(
    r: &mut Reader,
    preset: Option<&BreakerPreset>,
    open_for: SimDuration,
) -> Result<(u32, SimDuration), Reported> {
    let preset_factor = preset.map(|p| p.open_for_factor_permille);
    let factor = r.thousandths("open_for_factor", preset_factor)?;
    let factor = factor.expect("declared with a default");
    let grows = |factor: u32| factor > FACTOR_PERMILLE_ONE;
    let preset_max = preset
        .filter(|p| grows(p.open_for_factor_permille))
        .map(|p| p.open_for_max);
    let max = match r.duration("open_for_max", preset_max)? {
        Some(max) => max,
        None if grows(factor) => {
            let span = r.written_span("open_for_factor");
            let key = r.key("open_for_max");
            r.validator.error(
                span,
                key,
                "growing openings (open_for_factor above 1) need open_for_max, their ceiling",
            );
            return Err(Reported);
        }
        None => open_for,
    };
    Ok((factor, max))
}

/// The slow-call rule: both keys, written or the preset's, or neither.
fn slow_calls(
    r: &mut Reader,
    preset: Option<&BreakerPreset>,
) -> Result<Option<SlowCalls>, Reported> {
    let preset_slow = preset.and_then(|p| p.slow_calls);
    let duration = r.duration("slow_call_duration", preset_slow.map(|s| s.duration))?;
    let rate = r.percent("slow_call_percent", preset_slow.map(|s| s.rate_permille))?;
    let (missing, at, message) = match (duration, rate) {
        (Some(duration), Some(rate_permille)) => {
            return Ok(Some(SlowCalls {
                duration,
                rate_permille,
            }));
        }
        (None, None) => return Ok(None),
        (Some(_), None) => (
            "slow_call_percent",
            "slow_call_duration",
            "a slow-call rule needs slow_call_percent too: the share of slow calls that opens \
             the breaker",
        ),
        (None, Some(_)) => (
            "slow_call_duration",
            "slow_call_percent",
            "a slow-call rule needs slow_call_duration too: how long a slow call lasts",
        ),
    };
    let (span, key) = (r.written_span(at), r.key(missing));
    r.validator.error(span, key, message);
    Err(Reported)
}

/// The config's refusal, at the key its field came from: where the file wrote it, or the
/// preset that gave it, or the table.
fn refuse_config(r: &mut Reader, error: ConfigError) -> Reported {
    let (key, span) = config_field(r, error.field);
    let reason = if matches!(
        error.field,
        "failure_rate_permille" | "slow_call_rate_permille"
    ) && !error.reason.contains("consecutive")
    {
        format!("{} (in tenths of a percent)", error.reason)
    } else {
        error.reason
    };
    let span = span.or(r.table_span.clone());
    r.validator.error(span, key, reason);
    Reported
}

/// The file's key for a field of the breaker's config, and where its value came from.
fn config_field(r: &mut Reader, field: &str) -> (String, Option<Range<usize>>) {
    let in_rate = match field {
        "failure_rate_permille" => Some("percent"),
        "min_calls" | "window_calls" | "window_slots" => Some(field),
        "window_length" => Some("window"),
        _ => None,
    };
    if let Some(name) = in_rate {
        let Some(rate) = r.table("failure_rate") else {
            // The preset's rule, which its own tests hold valid.
            return (format!("{}.failure_rate.{name}", r.prefix), None);
        };
        // Default slots are pointed at the window they divide.
        let span = rate.written_span(name).or_else(|| {
            (name == "window_slots")
                .then(|| rate.written_span("window"))
                .flatten()
        });
        return (rate.key(name), span);
    }
    let name = match field {
        "slow_call_rate_permille" => "slow_call_percent",
        field => field,
    };
    (r.key(name), r.span(name))
}

/// What the breaker counts and what it ignores, each a list of errors.
fn counted(r: &mut Reader) -> (OutcomeSet, OutcomeSet) {
    let counted = r.list("counts");
    let counts = match &counted {
        // A library's preset counts what the library counts by default: every error
        // (resilience4j's empty recordExceptions, Polly's ShouldHandle, opossum, gobreaker's
        // IsSuccessful); without a preset, seed 003's network errors and timeouts.
        None if r.written("preset").is_some() => OutcomeSet::every_error(),
        None => OutcomeSet::network_errors(),
        Some(list) => r.validator.breaker_outcomes(list, &r.key("counts")),
    };
    // Ignored errors count neither way (resilience4j's ignoreExceptions, gobreaker's
    // IsExcluded): none unless the file lists them. Listed in both, an error would be ignored
    // (the classifier asks `ignores` first), which the file cannot have meant.
    let Some(list) = r.list("ignores") else {
        return (counts, OutcomeSet::default());
    };
    let key = r.key("ignores");
    let ignores = r.validator.breaker_outcomes(&list, &key);
    let counted = counted.map(Spanned::into_inner).unwrap_or_default();
    for entry in list.get_ref() {
        if counted.iter().any(|e| e.get_ref() == entry.get_ref()) {
            r.validator.error(
                Some(entry.span()),
                key.clone(),
                format!(
                    "`{}` is in counts too: an error is either counted or ignored",
                    entry.get_ref()
                ),
            );
        }
    }
    (counts, ignores)
}

impl Validator<'_> {
    /// A breaker's list of error outcomes (`counts`, `ignores`): a policy's list of errors
    /// ([`Self::error_outcomes`]), less `breaker_open`, the breaker's own refusal. On an error
    /// (already reported, located) the set is empty: the file is refused anyway.
    fn breaker_outcomes(&mut self, list: &Spanned<Vec<Spanned<String>>>, key: &str) -> OutcomeSet {
        for entry in list.get_ref() {
            if Outcome::from_name(entry.get_ref()) == Some(Outcome::BreakerOpen) {
                self.error(
                    Some(entry.span()),
                    key,
                    "`breaker_open` is the breaker's own refusal: it never reaches the breaker",
                );
            }
        }
        self.error_outcomes(list, key).unwrap_or_default()
    }
}
