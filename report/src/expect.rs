//! Expectations: checks on a variant's summary that make a run fail when a figure moves.
//!
//! Grammar (one expectation per string):
//!
//! ```text
//! <metric> <op> <number>        op is one of  <  <=  ==  !=  >=  >
//! <metric> <op> <metric>        e.g. outcomes.ok == requests
//! <metric> in <low>..<high>     inclusive at both ends
//! ```
//!
//! `<metric>` is a dotted path into the variant's [`Summary`] as it appears in
//! the JSON report, for example `outcomes.shed`, `latency_ms.ok.p99`,
//! `flows.read.latency_ms.all.max` or `databases.main.peak_concurrency`.
//!
//! Over a range of seeds (`run --seeds`), an expectation as written above must hold on every
//! seed. Three prefixes judge the seeds together instead ([`Scope`]):
//!
//! ```text
//! mean <metric> <op> <number>                 the mean over the seeds
//! p90 <metric> <op> <number>                  a quantile over the seeds (nearest rank)
//! at least 90% of seeds: <expectation>        the share of seeds it holds on
//! ```
//!
//! On one seed each reads as its plain form (the mean of one value is that value).

use std::fmt;

use serde_json::Value;

use crate::Summary;

#[derive(Clone, Debug, PartialEq)]
pub struct Expectation {
    text: String,
    scope: Scope,
    path: Vec<String>,
    check: Check,
}

/// How an expectation judges a run over several seeds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scope {
    /// It must hold on every seed.
    EachSeed,
    /// The mean of the metric over the seeds must pass the check.
    Mean,
    /// The quantile (in percent, nearest rank) of the metric over the seeds must pass.
    Quantile(u32),
    /// The plain expectation must hold on at least this percentage of the seeds.
    AtLeast(f64),
}

#[derive(Clone, Debug, PartialEq)]
enum Check {
    Compare(Op, Operand),
    Within(f64, f64),
}

/// The right-hand side of a comparison.
#[derive(Clone, Debug, PartialEq)]
enum Operand {
    Number(f64),
    Metric(Vec<String>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Lt,
    Le,
    Eq,
    Ne,
    Ge,
    Gt,
}

const OPS: [(&str, Op); 6] = [
    ("<=", Op::Le),
    (">=", Op::Ge),
    ("==", Op::Eq),
    ("!=", Op::Ne),
    ("<", Op::Lt),
    (">", Op::Gt),
];

/// What an expectation found.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Evaluation {
    pub passed: bool,
    /// The metric's value; `None` when it has none (a latency with no request counted).
    pub actual: Option<f64>,
}

impl Expectation {
    /// Parses one expectation. The metric path is checked later, against a summary's shape.
    pub fn parse(text: &str) -> Result<Expectation, String> {
        let text = text.trim();
        let shown = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if let Some(rest) = shown.strip_prefix("at least ") {
            let shape = || {
                format!(
                    "`{shown}` is not a share of seeds: write `at least 90% of seeds: \
                     <expectation>`"
                )
            };
            let (share, inner) = rest.split_once("% of seeds:").ok_or_else(shape)?;
            let share = number(share.trim()).map_err(|_| shape())?;
            if !(share > 0.0 && share <= 100.0) {
                return Err(format!(
                    "a share of seeds is above 0% and at most 100%, not {share}%"
                ));
            }
            let inner = Expectation::parse(inner)?;
            if inner.scope != Scope::EachSeed {
                return Err(format!(
                    "`{shown}`: a share of seeds applies to a plain expectation, not to a \
                     mean or a quantile"
                ));
            }
            return Ok(Expectation {
                text: shown,
                scope: Scope::AtLeast(share),
                ..inner
            });
        }
        let words: Vec<&str> = shown.split(' ').collect();
        let scope = match words.as_slice() {
            [first, _, _, ..] if words.len() >= 4 && *first == "mean" => Some(Scope::Mean),
            [first, _, _, ..] if words.len() >= 4 && first.starts_with('p') => {
                let percent = first[1..]
                    .parse::<u32>()
                    .ok()
                    .filter(|p| (1..=100).contains(p))
                    .ok_or_else(|| {
                        format!(
                            "`{first}` is not a quantile over seeds: write p50, p90 or p99 \
                             (1 to 100), or `mean`"
                        )
                    })?;
                Some(Scope::Quantile(percent))
            }
            _ => None,
        };
        if let Some(scope) = scope {
            let inner = Expectation::parse(&words[1..].join(" "))?;
            if let Check::Compare(_, Operand::Metric(_)) = inner.check {
                return Err(format!(
                    "`{shown}`: a {} over seeds is compared with a number, not with another \
                     metric",
                    if scope == Scope::Mean {
                        "mean"
                    } else {
                        "quantile"
                    }
                ));
            }
            return Ok(Expectation {
                text: shown,
                scope,
                ..inner
            });
        }
        let text = shown.as_str();
        let words: Vec<&str> = text.split_whitespace().collect();
        let (path, check) = match words.as_slice() {
            [path, "in", range] => {
                let (low, high) = range.split_once("..").ok_or_else(|| {
                    format!("`{range}` is not a range: write it as <low>..<high>, e.g. 402..418")
                })?;
                let (low, high) = (number(low)?, number(high)?);
                if low > high {
                    return Err(format!("the range {range} is empty: {low} is above {high}"));
                }
                (*path, Check::Within(low, high))
            }
            [path, op, value] => {
                let op_text = *op;
                let op = OPS
                    .iter()
                    .find(|(symbol, _)| symbol == op)
                    .map(|&(_, op)| op)
                    .ok_or_else(|| {
                        format!("`{op}` is not a comparison: use <, <=, ==, !=, >= or >")
                    })?;
                let operand = match number(value) {
                    Ok(number) => Operand::Number(number),
                    Err(_)
                        if value.parse::<f64>().is_err()
                            && value.starts_with(|c: char| c.is_ascii_alphabetic()) =>
                    {
                        Operand::Metric(metric_path(value)?)
                    }
                    Err(_) if has_unit(value) => {
                        return Err(unit_message(path, op_text, value));
                    }
                    Err(error) => return Err(error),
                };
                (*path, Check::Compare(op, operand))
            }
            _ => {
                return Err(format!(
                    "`{text}` is not an expectation: write `<metric> <op> <number>` or \
                     `<metric> in <low>..<high>`, e.g. `outcomes.ok >= 400`"
                ));
            }
        };
        Ok(Expectation {
            text: words.join(" "),
            scope: Scope::EachSeed,
            path: metric_path(path)?,
            check,
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// How the expectation judges several seeds.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// Judges the evaluations of one variant on each seed of a range (from [`evaluate`]).
    /// Every seed for a plain expectation; the mean or a quantile of the values, or the share
    /// of seeds that held, for the other scopes. `actual` is the value judged: the mean, the
    /// quantile, the share in percent; `None` for a plain expectation.
    ///
    /// [`evaluate`]: Expectation::evaluate
    pub fn judge(&self, per_seed: &[Evaluation]) -> Evaluation {
        let values: Vec<f64> = per_seed.iter().filter_map(|e| e.actual).collect();
        match self.scope {
            Scope::EachSeed => Evaluation {
                passed: !per_seed.is_empty() && per_seed.iter().all(|e| e.passed),
                actual: None,
            },
            Scope::AtLeast(share) => {
                let held = per_seed.iter().filter(|e| e.passed).count();
                let percent = if per_seed.is_empty() {
                    0.0
                } else {
                    held as f64 * 100.0 / per_seed.len() as f64
                };
                Evaluation {
                    passed: !per_seed.is_empty() && percent >= share,
                    actual: Some(percent),
                }
            }
            Scope::Mean | Scope::Quantile(_) => {
                // A seed on which the metric has no value (a latency with no request counted)
                // fails the judgement rather than being left out of it.
                if values.is_empty() || values.len() < per_seed.len() {
                    return Evaluation {
                        passed: false,
                        actual: None,
                    };
                }
                let value = match self.scope {
                    Scope::Quantile(percent) => {
                        let mut sorted = values;
                        sorted.sort_by(f64::total_cmp);
                        let rank = (u64::from(percent) * sorted.len() as u64).div_ceil(100);
                        sorted[rank.max(1) as usize - 1]
                    }
                    _ => values.iter().sum::<f64>() / values.len() as f64,
                };
                Evaluation {
                    passed: self.holds(value),
                    actual: Some(value),
                }
            }
        }
    }

    /// Whether a value passes a check against a number (or a range).
    fn holds(&self, value: f64) -> bool {
        match &self.check {
            Check::Within(low, high) => *low <= value && value <= *high,
            Check::Compare(op, Operand::Number(number)) => compare(*op, value, *number),
            Check::Compare(_, Operand::Metric(_)) => false,
        }
    }

    pub fn metric(&self) -> String {
        self.path.join(".")
    }

    /// The numbers the metric is checked against: one for a comparison with a number, both
    /// ends of a range, none for a comparison with another metric.
    pub fn thresholds(&self) -> Vec<f64> {
        match &self.check {
            Check::Compare(_, Operand::Number(number)) => vec![*number],
            Check::Within(low, high) => vec![*low, *high],
            Check::Compare(_, Operand::Metric(_)) => Vec::new(),
        }
    }

    /// Checks that the metric path names a number (or an empty latency) in a summary of this
    /// shape; used to reject a misspelt metric before anything runs.
    pub fn check_path(&self, shape: &Summary) -> Result<(), String> {
        let shape = to_value(shape);
        resolve(&self.path, &shape)?;
        if let Check::Compare(_, Operand::Metric(other)) = &self.check {
            resolve(other, &shape)?;
        }
        Ok(())
    }

    pub fn evaluate(&self, summary: &Summary) -> Result<Evaluation, String> {
        let summary = to_value(summary);
        let actual = resolve(&self.path, &summary)?;
        let passed = match (actual, &self.check) {
            (None, _) => false,
            (Some(actual), Check::Within(low, high)) => *low <= actual && actual <= *high,
            (Some(actual), Check::Compare(op, operand)) => {
                let value = match operand {
                    Operand::Number(number) => Some(*number),
                    Operand::Metric(other) => resolve(other, &summary)?,
                };
                value.is_some_and(|value| compare(*op, actual, value))
            }
        };
        Ok(Evaluation { passed, actual })
    }
}

fn compare(op: Op, actual: f64, value: f64) -> bool {
    match op {
        Op::Lt => actual < value,
        Op::Le => actual <= value,
        Op::Eq => actual == value,
        Op::Ne => actual != value,
        Op::Ge => actual >= value,
        Op::Gt => actual > value,
    }
}

/// The number at the dotted `metric` of `summary` (`http.window_5xx_ms`); `None` for a metric
/// with no value; an error for a path the summary does not have.
pub fn metric_value(summary: &Summary, metric: &str) -> Result<Option<f64>, String> {
    resolve(&metric_path(metric)?, &to_value(summary))
}

fn metric_path(text: &str) -> Result<Vec<String>, String> {
    let path: Vec<String> = text.split('.').map(str::to_owned).collect();
    if path.iter().any(String::is_empty) {
        return Err(format!("the metric `{text}` has an empty part"));
    }
    Ok(path)
}

/// Metrics that are a span of something the summary counts, and read as 0 when it counted
/// none: a window of no 5xx lasts no time, so "the failure window is at most 15 s" holds
/// on a run without one (the JSON keeps its `null`: no first or last 5xx).
const ZERO_WHEN_NONE: [(&str, &str); 1] = [("http.window_5xx_ms", "http.5xx")];

/// The number at `path` in a summary; `None` for a metric with no value (a latency with no
/// request counted); 0 for a span of nothing ([`ZERO_WHEN_NONE`]).
fn resolve(path: &[String], summary: &Value) -> Result<Option<f64>, String> {
    let value = resolve_as_written(path, summary)?;
    if value.is_none() {
        let metric = path.join(".");
        for (span, count) in ZERO_WHEN_NONE {
            if metric == span && resolve_as_written(&metric_path(count)?, summary)? == Some(0.0) {
                return Ok(Some(0.0));
            }
        }
    }
    Ok(value)
}

/// The number at `path` in a summary as the JSON has it; `None` for `null`.
fn resolve_as_written(path: &[String], summary: &Value) -> Result<Option<f64>, String> {
    let metric = path.join(".");
    let mut node = summary;
    for (depth, part) in path.iter().enumerate() {
        node = match node.get(part) {
            Some(child) => child,
            None => {
                let known: Vec<&str> = match node {
                    Value::Object(map) => map.keys().map(String::as_str).collect(),
                    _ => Vec::new(),
                };
                let parent = path[..depth].join(".");
                let place = if parent.is_empty() {
                    "the summary".to_owned()
                } else {
                    format!("`{parent}`")
                };
                return Err(if known.is_empty() {
                    format!("unknown metric `{metric}`: {place} has no parts")
                } else {
                    format!(
                        "unknown metric `{metric}`: {place} has no `{part}` (it has: {})",
                        known.join(", ")
                    )
                });
            }
        };
    }
    match node {
        Value::Number(number) => Ok(number.as_f64()),
        Value::Null => Ok(None),
        _ => Err(format!(
            "the metric `{metric}` is not a number: name one of its parts"
        )),
    }
}

impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Whether `text` is a number with a unit after it (`300ms`, `2s`, `1.5GiB`).
fn has_unit(text: &str) -> bool {
    let digits = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(text.len());
    digits > 0
        && digits < text.len()
        && text[..digits].parse::<f64>().is_ok()
        && text[digits..]
            .chars()
            .all(|c| c.is_ascii_alphabetic() || c == '/')
}

/// What to write instead of `<metric> <op> 300ms`: a metric is a plain number in the unit its
/// name says, and a bare `p99` is no metric.
fn unit_message(path: &str, op: &str, value: &str) -> String {
    let digits = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(value.len());
    let (amount, unit) = value.split_at(digits);
    let metric = if path.starts_with('p') && path[1..].parse::<u32>().is_ok() {
        format!("latency_ms.all.{path}")
    } else {
        path.to_owned()
    };
    let example = match unit {
        "s" => format!(
            "`{metric} {op} {}` (in milliseconds)",
            amount.parse::<f64>().unwrap_or(0.0) * 1000.0
        ),
        _ => format!("`{metric} {op} {amount}`"),
    };
    let bare = if metric != path {
        format!(" `{path}` alone is no metric: a request latency percentile is `{metric}`.")
    } else {
        String::new()
    };
    format!(
        "`{value}` has a unit: an expectation compares plain numbers, each metric in the unit \
         its name says (`latency_ms` in milliseconds, sizes in bytes), e.g. {example}.{bare}"
    )
}

fn number(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() => Ok(value),
        _ => Err(format!("`{text}` is not a finite number")),
    }
}

fn to_value(summary: &Summary) -> Value {
    serde_json::to_value(summary).expect("a summary always serialises")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DatabaseSummary, LatencyStats};

    fn summary() -> Summary {
        let mut summary = Summary::default();
        summary.outcomes.insert("ok".into(), 410);
        summary.outcomes.insert("shed".into(), 90);
        summary.latency_ms.insert(
            "all".into(),
            LatencyStats {
                count: 500,
                p99: Some(270.5),
                ..LatencyStats::default()
            },
        );
        summary
            .latency_ms
            .insert("timeout".into(), LatencyStats::default());
        summary.databases.insert(
            "main".into(),
            DatabaseSummary {
                queries: 410,
                peak_concurrency: 20,
                ..DatabaseSummary::default()
            },
        );
        summary
    }

    fn check(text: &str, passed: bool) {
        let expectation = Expectation::parse(text).unwrap();
        let evaluation = expectation.evaluate(&summary()).unwrap();
        assert_eq!(evaluation.passed, passed, "{text}: {evaluation:?}");
    }

    #[test]
    fn comparisons_and_ranges() {
        check("outcomes.ok == 410", true);
        check("outcomes.ok != 410", false);
        check("outcomes.ok in 402..418", true);
        check("outcomes.shed in 91..100", false);
        check("latency_ms.all.p99 <= 275", true);
        check("latency_ms.all.p99 < 270", false);
        check("databases.main.peak_concurrency <= 20", true);
        check("databases.main.peak_concurrency > 20", false);
        check("outcomes.shed >= 90", true);
        check("outcomes.ok > outcomes.shed", true);
        check("outcomes.ok == outcomes.shed", false);
    }

    #[test]
    fn a_metric_with_no_value_fails() {
        let expectation = Expectation::parse("latency_ms.timeout.p50 < 5").unwrap();
        let evaluation = expectation.evaluate(&summary()).unwrap();
        assert_eq!(
            evaluation,
            Evaluation {
                passed: false,
                actual: None
            }
        );
    }

    /// Issue 29: "the failure window is at most 15 s" on a run without a 5xx. The window of
    /// none lasts no time: it reads as 0 (passes `<=`, fails `>=`), while a window that was
    /// measured reads as itself and the first and last 5xx still have no value.
    #[test]
    fn a_window_of_no_5xx_reads_as_zero() {
        let judged = |http: crate::HttpSummary, text: &str| {
            let summary = Summary {
                http: Some(http),
                ..summary()
            };
            Expectation::parse(text)
                .unwrap()
                .evaluate(&summary)
                .unwrap()
        };
        let none = || crate::HttpSummary {
            class_2xx: 410,
            ..crate::HttpSummary::default()
        };
        let at_most = judged(none(), "http.window_5xx_ms <= 15000");
        assert_eq!((at_most.passed, at_most.actual), (true, Some(0.0)));
        assert!(!judged(none(), "http.window_5xx_ms >= 1").passed);
        assert!(judged(none(), "mean http.window_5xx_ms == 0").passed);
        let first = judged(none(), "http.first_5xx_ms <= 15000");
        assert_eq!((first.passed, first.actual), (false, None));
        let failing = crate::HttpSummary {
            class_5xx: 3,
            first_5xx_ms: Some(1_000.0),
            last_5xx_ms: Some(17_000.0),
            window_5xx_ms: Some(16_000.0),
            ..none()
        };
        let measured = judged(failing, "http.window_5xx_ms <= 15000");
        assert_eq!((measured.passed, measured.actual), (false, Some(16_000.0)));
        // 5xx counted without a window (no summary the simulator writes): not read as 0.
        let odd = crate::HttpSummary {
            class_5xx: 2,
            ..none()
        };
        assert_eq!(judged(odd, "http.window_5xx_ms <= 15000").actual, None);
    }

    fn rejected(text: &str, message: &str) {
        let error = Expectation::parse(text)
            .and_then(|e| e.check_path(&summary()))
            .unwrap_err();
        assert!(error.contains(message), "{text}: {error}");
    }

    #[test]
    fn bad_expectations_say_what_is_wrong() {
        rejected("outcomes.ok", "is not an expectation");
        rejected("outcomes.ok => 3", "is not a comparison");
        rejected("outcomes.ok == many", "unknown metric `many`");
        rejected("outcomes.ok == outcomes.nope", "`outcomes` has no `nope`");
        rejected("outcomes.ok == 1e999", "`1e999` is not a finite number");
        rejected("outcomes.ok == NaN", "`NaN` is not a finite number");
        // A unit after the number says what to write instead, and what a bare `p99` means.
        rejected(
            "p99 < 300ms",
            "`300ms` has a unit: an expectation compares plain numbers, each metric in the unit \
             its name says (`latency_ms` in milliseconds, sizes in bytes), e.g. \
             `latency_ms.all.p99 < 300`. `p99` alone is no metric: a request latency \
             percentile is `latency_ms.all.p99`.",
        );
        rejected(
            "latency_ms.ok.max <= 2s",
            "`2s` has a unit: an expectation compares plain numbers, each metric in the unit \
             its name says (`latency_ms` in milliseconds, sizes in bytes), e.g. \
             `latency_ms.ok.max <= 2000` (in milliseconds).",
        );
        rejected("outcomes.ok in 5..2", "is empty");
        rejected("outcomes.ok in 5", "is not a range");
        rejected("outcome.ok == 1", "the summary has no `outcome`");
        rejected(
            "databases.db.peak_concurrency < 3",
            "`databases` has no `db` (it has: main)",
        );
        rejected("databases.main < 3", "is not a number");
        rejected("outcomes..ok < 3", "has an empty part");
    }

    fn seeds(values: &[Option<f64>], passed: &[bool]) -> Vec<Evaluation> {
        values
            .iter()
            .zip(passed)
            .map(|(&actual, &passed)| Evaluation { passed, actual })
            .collect()
    }

    #[test]
    fn scopes_over_seeds_judge_the_seeds_together() {
        let values = [Some(10.0), Some(20.0), Some(30.0), Some(100.0)];
        let all = seeds(&values, &[true, true, true, false]);
        let judge = |text: &str| Expectation::parse(text).unwrap().judge(&all);

        // Plain: every seed must hold.
        assert!(!judge("outcomes.ok < 50").passed);
        // The mean is 40.
        let mean = judge("mean outcomes.ok < 50");
        assert_eq!(
            mean,
            Evaluation {
                passed: true,
                actual: Some(40.0)
            }
        );
        assert!(!judge("mean outcomes.ok < 40").passed);
        assert!(judge("mean outcomes.ok in 39..41").passed);
        // Nearest rank: p50 of 4 values is the 2nd, p75 the 3rd, p76 the 4th.
        assert_eq!(judge("p50 outcomes.ok < 50").actual, Some(20.0));
        assert_eq!(judge("p75 outcomes.ok < 50").actual, Some(30.0));
        let p76 = judge("p76 outcomes.ok < 50");
        assert_eq!(
            p76,
            Evaluation {
                passed: false,
                actual: Some(100.0)
            }
        );
        // Three seeds of four held.
        let share = judge("at least 75% of seeds: outcomes.ok < 50");
        assert_eq!(
            share,
            Evaluation {
                passed: true,
                actual: Some(75.0)
            }
        );
        assert!(!judge("at least 76% of seeds: outcomes.ok < 50").passed);

        // A seed without a value fails a mean instead of being left out.
        let gap = seeds(&[Some(1.0), None], &[true, false]);
        let mean = Expectation::parse("mean outcomes.ok < 5")
            .unwrap()
            .judge(&gap);
        assert_eq!(
            mean,
            Evaluation {
                passed: false,
                actual: None
            }
        );
        // No seed at all holds nothing.
        assert!(
            !Expectation::parse("outcomes.ok < 5")
                .unwrap()
                .judge(&[])
                .passed
        );
    }

    #[test]
    fn on_one_seed_a_scope_reads_as_its_plain_form() {
        check("mean outcomes.ok == 410", true);
        check("p90 outcomes.ok < 400", false);
        check("at least 50% of seeds: outcomes.shed >= 90", true);
        let scoped = Expectation::parse("at least 90% of seeds:  outcomes.ok  in 1..2").unwrap();
        assert_eq!(scoped.text(), "at least 90% of seeds: outcomes.ok in 1..2");
        assert_eq!(scoped.scope(), Scope::AtLeast(90.0));
        assert_eq!(scoped.metric(), "outcomes.ok");
    }

    #[test]
    fn bad_scopes_say_what_is_wrong() {
        rejected("p0 outcomes.ok < 3", "is not a quantile over seeds");
        rejected("p101 outcomes.ok < 3", "is not a quantile over seeds");
        rejected("mean outcomes.ok < outcomes.shed", "compared with a number");
        rejected(
            "at least 90 of seeds: outcomes.ok < 3",
            "is not a share of seeds",
        );
        rejected(
            "at least 0% of seeds: outcomes.ok < 3",
            "above 0% and at most 100%",
        );
        rejected(
            "at least 90% of seeds: mean outcomes.ok < 3",
            "applies to a plain",
        );
        rejected("mean outcome.ok < 3", "the summary has no `outcome`");
    }
}
