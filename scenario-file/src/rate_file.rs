//! A load's rate over time read from a file (`rate_file`): an incident's traffic, exported as
//! rows of `time,rate`.
//!
//! ```text
//! # time (s), requests per second
//! time,rate
//! 1733220000,410
//! 1733220010,415.5
//! 1733220020,1200
//! ```
//!
//! Times are seconds (a Unix timestamp or an offset: only differences count), strictly
//! increasing, read as exact decimals (to the nanosecond, no exponent); rates are requests per
//! second, zero or more, to 0.001/s. The rate moves linearly from each row to the next, so
//! the rows become the stages of a [`RateStages`] that starts at the first row and ends at
//! the last. Blank lines and lines starting with `#` are skipped, and so is a first line
//! whose two fields are not numbers (a header). Problems are reported as `line:column: message`.

use outagelab_model::time::SimDuration;
use outagelab_sim::scenario::{RateStage, RateStages};

/// The curve of `text`, or the first problem as `line:column: message`.
pub(crate) fn parse(text: &str, rows_max: usize) -> Result<RateStages, String> {
    let mut rows: Vec<(u128, u64)> = Vec::new();
    let mut first_line = true;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let content = line.trim();
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        let header = std::mem::replace(&mut first_line, false);
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() != 2 {
            return Err(format!(
                "{number}:1: expected two fields, `time,rate`, not {}",
                fields.len()
            ));
        }
        let rate_column = fields[0].len() + 2;
        let time = match nanos(fields[0].trim()) {
            Ok(time) => time,
            // A header names its columns: neither field is a number.
            Err(_) if header && fields[1].trim().parse::<f64>().is_err() => continue,
            Err(why) => return Err(format!("{number}:1: the time {why}")),
        };
        let rate = milli_rate(fields[1].trim())
            .map_err(|why| format!("{number}:{rate_column}: the rate {why}"))?;
        if let Some(&(previous, _)) = rows.last()
            && time <= previous
        {
            return Err(format!(
                "{number}:1: the time {} is not after the row before's: rows must be in time \
                 order, without repeats",
                fields[0].trim()
            ));
        }
        if rows.len() == rows_max {
            return Err(format!(
                "{number}:1: more than the {rows_max} rows a load's rate may have"
            ));
        }
        rows.push((time, rate));
    }
    if rows.len() < 2 {
        return Err(format!(
            "{}:1: has {} row(s) of `time,rate`: a rate over time needs two at least",
            text.lines().count().max(1),
            rows.len()
        ));
    }
    curve(&rows)
}

/// The curve of a request-rate series in Prometheus's `query_range` answer: the one series
/// `series` names (as `name{label="value"}`; any when the file has one), its samples the rows.
/// Problems are reported as `line:column: message` for the file, or `1:1: message` for the
/// choice of series.
pub(crate) fn parse_prometheus(
    text: &str,
    series: Option<&str>,
    rows_max: usize,
) -> Result<RateStages, String> {
    use outagelab_observed::{Format, ObservedFile};
    let file = ObservedFile::parse(text, Format::PrometheusJson).map_err(|e| e.to_string())?;
    let listed = || {
        let names: Vec<String> = (file.series.iter().take(10))
            .map(|s| format!("`{}`", s.display_name()))
            .collect();
        names.join(", ")
    };
    let chosen = match series {
        Some(name) => file
            .series
            .iter()
            .find(|s| s.display_name() == name)
            .ok_or_else(|| format!("1:1: has no series `{name}`; it has {}", listed()))?,
        None if file.series.len() == 1 => &file.series[0],
        None => {
            return Err(format!(
                "1:1: has {} series: choose the request rate with `rate_series` (it has {})",
                file.series.len(),
                listed()
            ));
        }
    };
    if chosen.samples.len() > rows_max {
        return Err(format!(
            "1:1: more than the {rows_max} samples a load's rate may have"
        ));
    }
    let first = chosen.samples[0].unix_ms;
    let rows = (chosen.samples.iter())
        .map(|sample| {
            let rate = milli_rate(&sample.value.to_string())
                .map_err(|why| format!("1:1: the rate at {} {why}", sample.unix_ms))?;
            Ok((
                u128::from((sample.unix_ms - first).unsigned_abs()) * 1_000_000,
                rate,
            ))
        })
        .collect::<Result<Vec<_>, String>>()?;
    curve(&rows)
}

/// Rows of (time in ns, rate in thousandths), at least two, in increasing time, as the
/// stages that move linearly from each to the next.
fn curve(rows: &[(u128, u64)]) -> Result<RateStages, String> {
    let stages = rows
        .windows(2)
        .map(|pair| {
            let nanos = u64::try_from(pair[1].0 - pair[0].0).map_err(|_| {
                "1:1: the rows span more time than a run can hold (~584 years)".to_owned()
            })?;
            Ok(RateStage {
                duration: SimDuration::from_nanos(nanos),
                target_milli: pair[1].1,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let curve = RateStages {
        start_milli: rows[0].1,
        stages,
    };
    if rows.iter().all(|&(_, rate)| rate == 0) {
        return Err("1:1: every rate is 0: the load would send nothing".to_owned());
    }
    Ok(curve)
}

/// Seconds written as a decimal (`12`, `1733220000.250`), in nanoseconds, exactly.
fn nanos(text: &str) -> Result<u128, String> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !(fraction.is_empty() || digits(fraction)) {
        return Err(format!(
            "`{text}` is not a number of seconds (digits, an optional fraction, no sign or \
             exponent)"
        ));
    }
    if fraction.len() > 9 {
        return Err(format!(
            "`{text}` is finer than the nanosecond a time is kept to"
        ));
    }
    let whole: u128 = whole
        .parse::<u64>()
        .map_err(|_| format!("`{text}` is too large"))?
        .into();
    let fraction: u128 = format!("{fraction:0<9}").parse().expect("nine digits");
    Ok(whole * 1_000_000_000 + fraction)
}

/// A rate in requests per second, zero or more, as thousandths.
fn milli_rate(text: &str) -> Result<u64, String> {
    let rate: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of requests per second"))?;
    if rate == 0.0 {
        return Ok(0);
    }
    if !rate.is_finite() || rate < 0.0 {
        return Err(format!(
            "must be zero or more requests per second, not {text}"
        ));
    }
    outagelab_sim::scenario::Rate::per_second(rate)
        .map(|rate| rate.millirequests_per_second())
        .map_err(|error| error.reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_stages_from_the_first_rows_rate() {
        let text = "# exported\ntime,rate\n1733220000,410\n\n1733220010.5,415.5\n1733220020,0\n";
        let curve = parse(text, 10).unwrap();
        assert_eq!(curve.start_milli, 410_000);
        assert_eq!(
            curve.stages,
            vec![
                RateStage {
                    duration: SimDuration::from_nanos(10_500_000_000),
                    target_milli: 415_500,
                },
                RateStage {
                    duration: SimDuration::from_nanos(9_500_000_000),
                    target_milli: 0,
                },
            ]
        );
    }

    #[test]
    fn a_bad_row_is_named_by_line_and_column() {
        for (text, expected) in [
            (
                "0,1\n5,abc\n",
                "2:3: the rate `abc` is not a number of requests per second",
            ),
            (
                "0,1\n5,-2\n",
                "2:3: the rate must be zero or more requests per second, not -2",
            ),
            (
                "0,1\n5,nan\n",
                "2:3: the rate must be zero or more requests per second, not nan",
            ),
            (
                "0,1\n5,1,2\n",
                "2:1: expected two fields, `time,rate`, not 3",
            ),
            (
                "0,1\n5,2\n5,3\n",
                "3:1: the time 5 is not after the row before's: rows must be in time order, without repeats",
            ),
            (
                "0,1\n-5,2\n",
                "2:1: the time `-5` is not a number of seconds (digits, an optional fraction, no sign or exponent)",
            ),
            (
                "1e3,2\n5,1\n",
                "1:1: the time `1e3` is not a number of seconds (digits, an optional fraction, no sign or exponent)",
            ),
            (
                "0,1\n1e3,2\n",
                "2:1: the time `1e3` is not a number of seconds (digits, an optional fraction, no sign or exponent)",
            ),
            (
                "time,rate\n0,1\n",
                "2:1: has 1 row(s) of `time,rate`: a rate over time needs two at least",
            ),
            (
                "0,0\n5,0\n",
                "1:1: every rate is 0: the load would send nothing",
            ),
            (
                "0,1\n5,1\n9,1\n",
                "3:1: more than the 2 rows a load's rate may have",
            ),
        ] {
            assert_eq!(parse(text, 2).unwrap_err(), expected, "{text:?}");
        }
    }
}
