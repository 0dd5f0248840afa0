//! A `[loads.<name>]` table read through its declaration (`crate::load_keys`): every key
//! through [`TableReader`]; here, what the declaration cannot say: which keys each kind of
//! `arrivals` takes (the others refused, each with why), the end of an open loop, a closed
//! loop's callers, and a rate over time from `stages` or a `rate_file`. A
//! `[callers.<name>]` table (`crate::load_keys::CALLER`), what sends a load's requests, is
//! read here too.

use outagelab_model::time::{SimDuration, SimTime};
use outagelab_sim::scenario::{
    Arrivals, CallerSpec, ClosedLoop, Distribution, LoadEnd, LoadSpec, Rate, RateStage, RateStages,
};
use toml::Spanned;

use super::table::TableReader;
use super::{Reported, Validator, limit, since_zero};
use crate::kinds::Names;
use crate::load_keys::{CALLER, LOAD, RawCaller, RawLoad};
use crate::raw::RawValue;

type Reader<'v, 'a, 'r> = TableReader<'v, 'a, 'r>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Even,
    Poisson,
    Burst,
    Closed,
}

const KINDS: &[(&str, Kind)] = &[
    ("even", Kind::Even),
    ("poisson", Kind::Poisson),
    ("burst", Kind::Burst),
    ("closed", Kind::Closed),
];

impl Validator<'_> {
    /// `[callers.<name>]`: a timeout longer than zero, a retry policy by name.
    pub(super) fn caller(
        &mut self,
        name: &str,
        raw: &RawCaller,
        names: &Names,
    ) -> Option<CallerSpec> {
        let table_span = self.key_span(&["callers", name]);
        let prefix = format!("callers.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &CALLER, table_span);
        let timeout = r.duration("timeout", None).ok()?;
        let retry = match r.name("retry") {
            Some(retry) => {
                let key = r.key("retry");
                Some(r.validator.resolve(&names.retries, &retry, &key)?)
            }
            None => None,
        };
        let cancel_on_timeout = r.flag("cancel_on_timeout");
        if cancel_on_timeout && timeout.is_none() {
            let message = "a caller without a `timeout` never gives up, so it never cancels: \
                           give it a `timeout`";
            r.refuse("cancel_on_timeout", message);
            return None;
        }
        Some(CallerSpec {
            name: name.to_owned(),
            timeout,
            retry,
            cancel_on_timeout,
        })
    }

    pub(super) fn load(
        &mut self,
        name: &str,
        raw: &RawLoad,
        names: &Names,
        horizon: Option<SimTime>,
    ) -> Option<LoadSpec> {
        let table_span = self.key_span(&["loads", name]);
        let prefix = format!("loads.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &LOAD, table_span);
        let flow = r.name("flow").expect("a load is read with its flow");
        let key = r.key("flow");
        let flow = r.validator.resolve(&names.flows, &flow, &key);
        let start = r.duration("start", None).unwrap_or_default();
        let start = SimTime::ZERO.saturating_add(start.unwrap_or_default());
        if let Some(horizon) = horizon
            && start > horizon
            && r.written("start").is_some()
        {
            let message = format!(
                "starts at {}, after the horizon {}: it would never run",
                since_zero(start),
                since_zero(horizon)
            );
            r.refuse("start", message);
        }
        let kind = r.choice("arrivals", KINDS, None).ok()??;
        refuse_keys_of_other_kinds(&mut r, kind);
        let arrivals = match kind {
            Kind::Closed => closed_loop(&mut r, start).ok()?,
            Kind::Burst => burst(&mut r).ok()?,
            Kind::Even | Kind::Poisson => open_loop(&mut r, start, kind == Kind::Poisson).ok()?,
        };
        let caller = match r.name("caller") {
            Some(caller) => {
                let key = r.key("caller");
                Some(r.validator.resolve(&names.callers, &caller, &key)?)
            }
            None => None,
        };
        Some(LoadSpec {
            name: name.to_owned(),
            flow: flow?,
            start,
            arrivals,
            caller,
        })
    }
}

/// Each of `keys` the file wrote is refused at it, with `message`: keys that do not apply to
/// what the table describes.
fn refuse_written(r: &mut Reader, keys: &[&str], message: &str) {
    for key in keys {
        if r.written(key).is_some() {
            r.refuse(key, message);
        }
    }
}

/// The keys of the kinds of load this one is not.
fn refuse_keys_of_other_kinds(r: &mut Reader, kind: Kind) {
    if matches!(kind, Kind::Burst | Kind::Closed) {
        refuse_written(
            r,
            &["stages", "rate_file"],
            "applies to an even or Poisson load, whose rate it changes over time",
        );
    }
    if r.written("rate_file").is_none() {
        refuse_written(
            r,
            &["rate_series"],
            "chooses the series of a Prometheus `rate_file`: give one",
        );
    }
    if kind != Kind::Closed {
        refuse_written(
            r,
            &["workers", "think", "stagger", "iterations"],
            "applies to a closed loop (arrivals = \"closed\"), whose callers wait for each \
             request before the next",
        );
    }
}

/// A problem with the load as a whole, at its `arrivals`.
fn refuse_at_arrivals(r: &mut Reader, name: &str, message: &str) -> Reported {
    let (span, key) = (r.written_span("arrivals"), r.key(name));
    r.validator.error(span, key, message);
    Reported
}

/// `workers` callers, each sending its next request once its last has ended and it has
/// thought, until its `iterations` or the load's `duration`.
fn closed_loop(r: &mut Reader, start: SimTime) -> Result<Arrivals, Reported> {
    refuse_written(
        r,
        &["rate", "count"],
        "does not apply to a closed loop: its callers send when their last request ends (give \
         `workers`, `think`, and `iterations` or `duration`)",
    );
    if r.written("workers").is_none() {
        let message = "a closed loop needs `workers`, the number of callers";
        return Err(refuse_at_arrivals(r, "workers", message));
    }
    let workers = r.count("workers", None);
    let think = r.latency("think");
    let stagger = r.duration("stagger", None).unwrap_or_default();
    let iterations = r.count_to("iterations", u64::MAX)?;
    let until = r.duration("duration", None)?;
    let until = until.map(|duration| start.saturating_add(duration));
    if iterations.is_none() && until.is_none() {
        let message = "a closed loop needs an end: `iterations` per caller, a `duration`, or both";
        return Err(refuse_at_arrivals(r, "iterations", message));
    }
    Ok(Arrivals::Closed(ClosedLoop {
        workers: workers?.expect("written"),
        think: think?.unwrap_or(Distribution::Constant(SimDuration::ZERO)),
        stagger: stagger.unwrap_or_default(),
        iterations,
        until,
    }))
}

/// `count` requests at the start, in order.
fn burst(r: &mut Reader) -> Result<Arrivals, Reported> {
    refuse_written(
        r,
        &["rate", "duration"],
        "does not apply to a burst (it sends `count` requests at once)",
    );
    if r.written("count").is_none() {
        return Err(refuse_at_arrivals(r, "count", "a burst needs a count"));
    }
    let count = r.count_to("count", limit::BURST)?.expect("written");
    Ok(Arrivals::Burst { count })
}

/// Even or Poisson arrivals: at a rate over time from a `rate_file` or `stages`, or at one
/// `rate` until a `count` or a `duration`.
fn open_loop(r: &mut Reader, start: SimTime, poisson: bool) -> Result<Arrivals, Reported> {
    if r.written("rate_file").is_some() {
        let stages = rate_file(r, start)?;
        return Ok(Arrivals::Staged { stages, poisson });
    }
    if r.written("stages").is_some() {
        let stages = rate_stages(r, start)?;
        return Ok(Arrivals::Staged { stages, poisson });
    }
    let rate = match r.written("rate").map(respan_number) {
        Some(rate) => {
            Rate::per_second(*rate.get_ref()).map_err(|error| r.refuse("rate", error.reason))
        }
        None => Err(refuse_at_arrivals(
            r,
            "rate",
            "needs a rate (requests per second)",
        )),
    };
    let end = match (r.written("count"), r.written("duration")) {
        (Some(_), None) => r
            .count_to("count", u64::MAX)
            .map(|c| LoadEnd::Count(c.expect("written"))),
        (None, Some(_)) => r
            .duration("duration", None)
            .map(|d| LoadEnd::Until(start.saturating_add(d.expect("written")))),
        (count, _) => {
            let span = count.map(Spanned::span).or(r.written_span("arrivals"));
            let key = r.key("count");
            r.validator
                .error(span, key, "give exactly one of `count` or `duration`");
            Err(Reported)
        }
    };
    let (rate, end) = (rate?, end?);
    Ok(if poisson {
        Arrivals::Poisson { rate, end }
    } else {
        Arrivals::Even { rate, end }
    })
}

fn respan_number(value: &Spanned<RawValue>) -> Spanned<f64> {
    super::table::respan(value.clone(), |raw| match raw {
        RawValue::Number(number) => number,
        _ => unreachable!("a number is read as a float"),
    })
}

/// A staged load's rate curve: `rate` (0 when absent) at the start, then each stage's
/// target, every rate zero or in `Rate`'s range; stages longer than zero, at most
/// [`limit::STAGES`], ending where time can still be represented; and a curve that sends
/// something. `count` and `duration` do not apply: the stages say when the load ends.
fn rate_stages(r: &mut Reader, start: SimTime) -> Result<RateStages, Reported> {
    refuse_written(
        r,
        &["count", "duration"],
        "does not apply to a load with `stages`: it ends with its last stage",
    );
    let start_milli = match r.written("rate").map(respan_number) {
        Some(rate) => r.validator.rate_or_zero(&rate, &r.key("rate")),
        None => Some(0),
    };
    let (span, list) = r.tables("stages").expect("written");
    if list.is_empty() {
        let message = "needs at least one stage ({ duration = \"10s\", target = 100 })";
        return Err(r.refuse("stages", message));
    }
    if list.len() > limit::STAGES {
        let message = format!(
            "has {} stages, more than the {} a load may have",
            list.len(),
            limit::STAGES
        );
        return Err(r.refuse("stages", message));
    }
    let stages = each_stage(r, list, start);
    let (start_milli, stages) = (start_milli.ok_or(Reported)?, stages?);
    if start_milli == 0 && stages.iter().all(|stage| stage.target_milli == 0) {
        let (key, message) = (
            r.key("stages"),
            "every stage's target is 0 and so is `rate`: the load would send nothing",
        );
        r.validator.error(Some(span), key, message);
        return Err(Reported);
    }
    Ok(RateStages {
        start_milli,
        stages,
    })
}

/// Each stage, read on its own (every problem reported), ending where a run can still count.
fn each_stage<'r>(
    r: &mut Reader<'_, '_, 'r>,
    list: &'r [Spanned<crate::raw::Written>],
    start: SimTime,
) -> Result<Vec<RateStage>, Reported> {
    let mut parsed = Vec::with_capacity(list.len());
    let mut ok = true;
    let mut end = Some(start);
    for (index, stage) in list.iter().enumerate() {
        let prefix = r.key(&format!("stages[{index}]"));
        let mut s = r.over("stages", prefix, stage.get_ref(), stage.span());
        let duration = s.duration("duration", None);
        let target = s.written("target").map(respan_number).expect("required");
        let target = s.validator.rate_or_zero(&target, &s.key("target"));
        match (duration, target) {
            (Ok(Some(duration)), Some(target_milli)) => {
                end = end.and_then(|end| end.checked_add(duration));
                if end.is_none() && ok {
                    s.refuse(
                        "duration",
                        "the stages end past the latest instant a run can hold (~584 years)",
                    );
                }
                ok &= end.is_some();
                parsed.push(RateStage {
                    duration,
                    target_milli,
                });
            }
            _ => ok = false,
        }
    }
    if ok { Ok(parsed) } else { Err(Reported) }
}

/// A staged load's curve read from `rate_file`: rows of `time,rate` (seconds, requests per
/// second), the rate moving linearly from each row to the next, the load starting at the
/// first row's rate and ending at the last row's time. `rate`, `stages`, `count` and
/// `duration` do not apply. A problem in the file is said at `rate_file`, with the file's own
/// line and column.
fn rate_file(r: &mut Reader, start: SimTime) -> Result<RateStages, Reported> {
    refuse_written(
        r,
        &["rate", "stages", "count", "duration"],
        "does not apply to a load with `rate_file`: the file gives its rate over time and its \
         end",
    );
    let file = r.name("rate_file").expect("written");
    let path = crate::beside(r.validator.source.file, file.get_ref());
    let text = std::fs::read_to_string(&path).map_err(|error| {
        let message = format!("cannot read {}: {error}", path.display());
        r.refuse("rate_file", message)
    })?;
    let series = r.name("rate_series");
    let prometheus =
        outagelab_observed::Format::of_path(&path) == outagelab_observed::Format::PrometheusJson;
    if series.is_some() && !prometheus {
        let message = "a CSV of `time,rate` rows is one series: `rate_series` chooses among the \
                       series of a Prometheus file (`.json`)";
        return Err(r.refuse("rate_series", message));
    }
    let series = series.as_ref().map(|series| series.get_ref().as_str());
    let parsed = if prometheus {
        crate::rate_file::parse_prometheus(&text, series, limit::STAGES + 1)
    } else {
        crate::rate_file::parse(&text, limit::STAGES)
    };
    let stages = parsed.map_err(|problem| {
        let message = format!("{}:{problem}", path.display());
        r.refuse("rate_file", message)
    })?;
    if start.checked_add(stages.duration()).is_none() {
        let message = format!(
            "{}: the rows end past the latest instant a run can hold (~584 years)",
            path.display()
        );
        return Err(r.refuse("rate_file", message));
    }
    Ok(stages)
}
