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
//! `<metric>` is a dotted path into the variant's [`Summary`](crate::Summary) as it appears in
//! the JSON report, for example `outcomes.shed`, `latency_ms.ok.p99`,
//! `flows.read.latency_ms.all.max` or `databases.main.peak_concurrency`.

use std::fmt;

use serde_json::Value;

use crate::Summary;

#[derive(Clone, Debug, PartialEq)]
pub struct Expectation {
    text: String,
    path: Vec<String>,
    check: Check,
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
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    pub passed: bool,
    /// The metric's value; `None` when it has none (a latency with no request counted).
    pub actual: Option<f64>,
}

impl Expectation {
    /// Parses one expectation. The metric path is checked later, against a summary's shape.
    pub fn parse(text: &str) -> Result<Expectation, String> {
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
            path: metric_path(path)?,
            check,
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn metric(&self) -> String {
        self.path.join(".")
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

fn metric_path(text: &str) -> Result<Vec<String>, String> {
    let path: Vec<String> = text.split('.').map(str::to_owned).collect();
    if path.iter().any(String::is_empty) {
        return Err(format!("the metric `{text}` has an empty part"));
    }
    Ok(path)
}

/// The number at `path` in a summary; `None` for a metric with no value (a latency with no
/// request counted).
fn resolve(path: &[String], summary: &Value) -> Result<Option<f64>, String> {
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
}
