//! A `[retries.<name>]` table read through its declaration (`crate::retry_keys`): every key
//! through [`TableReader`], which applies the preset's values and the defaults as each key
//! declares them; here, what the declaration cannot say: a growing backoff's need of a
//! ceiling, the keys that apply only with another, and the config's refusals placed at the
//! key they came from.

use std::ops::Range;

use outagelab_model::ConfigError;
use outagelab_model::backoff::{BackoffConfig, FACTOR_PERMILLE_ONE, Growth, Jitter};
use outagelab_model::presets::{self, RetryPreset};
use outagelab_model::retry::{RetryBudgetConfig, RetryConfig};
use outagelab_report::Outcome;
use outagelab_sim::scenario::{OutcomeSet, RetrySpec};

use super::table::TableReader;
use super::{Reported, Validator};
use crate::retry_keys::{RETRY, RawRetry};

type Reader<'v, 'a, 'r> = TableReader<'v, 'a, 'r>;

impl Validator<'_> {
    pub(super) fn retry(&mut self, name: &str, raw: &RawRetry) -> Option<RetrySpec> {
        let table_span = self.key_span(&["retries", name]);
        let prefix = format!("retries.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &RETRY, table_span);
        let preset = r.preset(presets::retry_preset).ok()?;
        let backoff = backoff(&mut r, preset).ok()?;
        let budget = budget(&mut r).ok()?;
        let max_attempts = r.count("max_attempts", preset.map(|p| p.max_attempts));
        let max_attempts = max_attempts.ok()?.or_else(|| {
            r.missing("max_attempts");
            None
        })?;
        let elapsed_max = r.duration("elapsed_max", preset.and_then(|p| p.elapsed_max));
        let elapsed_max = elapsed_max.ok()?;
        let config = RetryConfig::new(max_attempts, backoff, budget, None)
            .and_then(|config| config.with_elapsed_max(elapsed_max));
        let config = config.map_err(|error| refuse_config(&mut r, error)).ok()?;
        let retry_on = match r.list("retry_on") {
            None => OutcomeSet::new([
                Outcome::Timeout,
                Outcome::Refused,
                Outcome::ConnectionLost,
                Outcome::ServerError,
            ]),
            Some(list) => {
                let key = r.key("retry_on");
                r.validator.error_outcomes(&list, &key)?
            }
        };
        Some(RetrySpec {
            name: name.to_owned(),
            enabled: r.flag("enabled"),
            config,
            retry_on,
        })
    }
}

/// The waits between attempts: the first, how they grow, their ceiling and their jitter.
fn backoff(r: &mut Reader, preset: Option<&RetryPreset>) -> Result<BackoffConfig, Reported> {
    let base = r.duration("backoff", preset.map(|p| p.backoff))?;
    let base = base.ok_or_else(|| r.missing("backoff"))?;
    let factor = r.thousandths("backoff_factor", preset.map(|p| p.backoff_factor_permille))?;
    let factor_permille = factor.expect("declared with a default");
    let growth = r.choice("backoff_growth", GROWTHS, preset.map(|p| p.backoff_growth))?;
    let growth = growth.expect("declared with a default");
    let ceiling = match r.duration("backoff_max", preset.map(|p| p.backoff_max))? {
        Some(ceiling) => ceiling,
        None if growth == Growth::Fibonacci => {
            return Err(needs_ceiling(r, "backoff_growth", "fibonacci"));
        }
        None if factor_permille > FACTOR_PERMILLE_ONE => {
            return Err(needs_ceiling(r, "backoff_factor", "backoff_factor above 1"));
        }
        None => base,
    };
    let jitter = jitter(r, preset)?;
    BackoffConfig::new(base, factor_permille, ceiling, jitter)
        .and_then(|backoff| backoff.with_growth(growth))
        .map_err(|error| refuse_config(r, error))
}

const GROWTHS: &[(&str, Growth)] = &[
    ("exponential", Growth::Exponential),
    ("fibonacci", Growth::Fibonacci),
];

/// A growing backoff without a ceiling, pointed at what makes it grow.
fn needs_ceiling(r: &mut Reader, grows: &str, what: &str) -> Reported {
    let (span, key) = (r.written_span(grows), r.key("backoff_max"));
    let message = format!("a growing backoff ({what}) needs backoff_max, its ceiling");
    r.validator.error(span, key, message);
    Reported
}

/// The jitter, with the spread `proportional` takes (written, the preset's, or 0.5).
fn jitter(r: &mut Reader, preset: Option<&RetryPreset>) -> Result<Jitter, Reported> {
    let preset_spread = match preset.map(|p| p.jitter) {
        Some(Jitter::Proportional {
            randomization_permille,
        }) => Some(randomization_permille),
        _ => None,
    };
    let spread = r.thousandths("randomization_factor", preset_spread)?;
    let proportional = Jitter::Proportional {
        randomization_permille: spread.expect("declared with a default"),
    };
    let jitter = match r.choice("jitter", JITTERS, preset.map(|p| p.jitter))? {
        Some(Jitter::Proportional { .. }) => proportional,
        jitter => jitter.expect("declared with a default"),
    };
    if r.written("randomization_factor").is_some() && !matches!(jitter, Jitter::Proportional { .. })
    {
        return Err(r.refuse(
            "randomization_factor",
            "applies to jitter = \"proportional\" only",
        ));
    }
    Ok(jitter)
}

/// The jitters by name; a proportional one takes its spread from `randomization_factor`.
const JITTERS: &[(&str, Jitter)] = &[
    ("none", Jitter::None),
    ("full", Jitter::Full),
    ("equal", Jitter::Equal),
    ("decorrelated", Jitter::Decorrelated),
    (
        "proportional",
        Jitter::Proportional {
            randomization_permille: 0,
        },
    ),
];

/// The retry budget, which `budget_percent` turns on; its other keys need it.
fn budget(r: &mut Reader) -> Result<Option<RetryBudgetConfig>, Reported> {
    let Some(percent) = r.written("budget_percent") else {
        for key in ["budget_min_per_second", "budget_window"] {
            if r.written(key).is_some() {
                r.refuse(key, "needs budget_percent, which turns the budget on");
            }
        }
        return Ok(None);
    };
    let written = percent.get_ref().clone();
    let thousandths = r.thousandths("budget_percent", None)?.expect("written");
    let number = match written {
        crate::raw::RawValue::Number(number) => number,
        _ => unreachable!("a number is read as a float"),
    };
    if !thousandths.is_multiple_of(100) {
        let message = format!("{number}% is finer than the 0.1% a budget is kept to");
        return Err(r.refuse("budget_percent", message));
    }
    let ratio_permille = thousandths / 100;
    // In the file's unit: the model's own refusal counts in permille.
    if ratio_permille > 1000 {
        let message = format!(
            "must be at most 100 (one retry per request), not {number}: more would let retries \
             outnumber the requests they retry"
        );
        return Err(r.refuse("budget_percent", message));
    }
    let window = r
        .duration("budget_window", None)?
        .expect("declared with a default");
    let floor = r.count("budget_min_per_second", None)?;
    let floor = floor.expect("declared with a default");
    RetryBudgetConfig::new(ratio_permille, floor, window)
        .map(Some)
        .map_err(|error| refuse_config(r, error))
}

/// The config's refusal, at the key its field came from: where the file wrote it, or the
/// preset that gave it (a budget's keys: where written).
fn refuse_config(r: &mut Reader, error: ConfigError) -> Reported {
    let name = match error.field {
        "base" => "backoff",
        "factor_permille" => "backoff_factor",
        "ceiling" => "backoff_max",
        "randomization_permille" => "randomization_factor",
        "ratio_permille" => "budget_percent",
        "ttl" => "budget_window",
        "min_retries_per_second" => "budget_min_per_second",
        field => field,
    };
    let span: Option<Range<usize>> = if RETRY.key(name).is_none() {
        None
    } else if name.starts_with("budget_") {
        r.written_span(name)
    } else {
        r.span(name)
    };
    let key = r.key(name);
    r.validator.error(span, key, error.reason);
    Reported
}
