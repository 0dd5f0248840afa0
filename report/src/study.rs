//! A study: every variant of a file run on every seed of a range, on common random numbers
//! (variant A and variant B on seed 7 draw the same arrivals and latencies wherever they do the
//! same thing), and what a design review reads from it: each summary metric's mean over the
//! seeds with a 95% confidence interval, and each variant's paired difference from a baseline
//! variant with its own interval.
//!
//! A study is data in three steps. [`Study::header`] describes the runs (the header); each run
//! adds one [`RunRow`] (its flattened summary and its expectations' evaluations); [`Study::
//! finish`] computes the statistics from the rows alone. A shard of the runs (`run --shard
//! K/N`) is the same header with some rows and no statistics, so merging shards is sorting the
//! union of their rows and finishing: the merged file is byte for byte what one run writes.
//!
//! Statistics (all deterministic: sums in seed order, IEEE arithmetic, no platform maths):
//! - mean over the seeds on which the metric has a value;
//! - 95% interval `mean ± t(0.975, n-1) · s / √n` (Student's t, `s` the sample standard
//!   deviation); none for one seed;
//! - paired difference: `variant − baseline` on each seed where both have a value, then the
//!   same mean and interval over those differences. Pairing on the seed is what common random
//!   numbers buy: the noise both runs share cancels, so the interval is narrower than the two
//!   variants' own intervals suggest.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::expect::{Evaluation, Expectation};
use crate::{Summary, SweepInfo, Verdict};

/// Everything a multi-seed run wrote: the header, the statistics and the rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Study {
    pub scenario: String,
    /// First and last seed of the range, both included.
    pub seeds: [u64; 2],
    /// The variant every other one is compared with.
    pub baseline: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepInfo>,
    /// What the table shows and the review chooses by.
    pub selection: Selection,
    /// Present in a shard's file only: which slice of the runs it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    pub variants: Vec<StudyVariant>,
    /// One per variant and seed, ordered by seed then variant.
    pub runs: Vec<RunRow>,
}

/// The metrics a study's table shows, the constraints a point must satisfy and the objective
/// that names the best one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    pub metrics: Vec<String>,
    /// Expectations on the mean over seeds (`databases.main.peak_concurrency <= 20`).
    pub constraints: Vec<String>,
    /// `min <metric>` or `max <metric>`.
    pub objective: Option<String>,
    /// A second objective, `min <metric>` or `max <metric>`, that chooses among the best point
    /// and the points tied with it on the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tie_break: Option<String>,
}

/// `run --shard K/N`: the runs whose index `i` (in seed-then-variant order) has
/// `i % count == index - 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    /// Whether run number `run` (from 0, in seed-then-variant order) belongs to this shard.
    pub fn holds(self, run: u64) -> bool {
        run % self.count == self.index - 1
    }
}

/// One variant of a study: its expectations, and (once finished) its statistics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StudyVariant {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep_x: Option<f64>,
    /// For a point of a sweep: each axis's label and value as the file writes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub point: Vec<(String, String)>,
    /// The variant's expectations as the file writes them, in order.
    pub expectations: Vec<String>,
    /// Each expectation judged over the seeds (empty in a shard).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verdicts: Vec<Judged>,
    /// Every metric that has a value on some seed, by its path (empty in a shard).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, Across>,
    /// Whether the means satisfy every constraint (`None` without constraints or in a shard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub satisfies: Option<bool>,
    /// Whether this is the best variant under the constraints, by the objective.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub best: bool,
    /// Whether this point satisfies the constraints and is tied with the best on the
    /// objective: the 95% intervals of their means overlap (the seeds cannot tell them apart).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tied: bool,
}

/// One expectation judged over the seeds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    pub held: bool,
    /// Seeds it held on (for a plain expectation, every seed must).
    pub seeds_held: u64,
    pub seeds: u64,
    /// The value judged: the mean, the quantile, the share in percent (none for a plain one).
    pub value: Option<f64>,
    /// Lowest and highest value over the seeds.
    pub low: Option<f64>,
    pub high: Option<f64>,
    /// The first seed it failed on, for a plain expectation.
    pub first_failing_seed: Option<u64>,
}

/// One metric of one variant over the seeds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Across {
    /// Seeds on which the metric has a value.
    pub n: u64,
    pub mean: f64,
    /// The 95% interval of the mean; none for one seed.
    pub ci95: Option<[f64; 2]>,
    pub min: f64,
    pub max: f64,
    /// The paired difference from the baseline variant (not on the baseline itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_baseline: Option<Paired>,
}

/// A paired difference, `variant − baseline` seed by seed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    pub n: u64,
    pub mean: f64,
    pub ci95: Option<[f64; 2]>,
}

/// One variant on one seed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    pub seed: u64,
    /// Index into [`Study::variants`].
    pub variant: usize,
    pub verdict: Verdict,
    /// Each expectation of the variant evaluated on this run, in the file's order (`None` when
    /// its metric could not be read).
    pub expectations: Vec<Option<Evaluation>>,
    /// The summary flattened to `path -> value`; a metric with no value on this run (a
    /// latency with no request counted) is absent.
    pub metrics: BTreeMap<String, f64>,
}

impl RunRow {
    /// The row for one finished run.
    pub fn new(
        seed: u64,
        variant: usize,
        verdict: Verdict,
        summary: &Summary,
        expectations: &[Expectation],
    ) -> RunRow {
        RunRow {
            seed,
            variant,
            verdict,
            expectations: expectations
                .iter()
                .map(|e| e.evaluate(summary).ok())
                .collect(),
            metrics: flatten(summary),
        }
    }
}

/// Every number of a summary by its dotted path, as expectations name them, in sorted order;
/// a metric with no value is left out.
pub fn flatten(summary: &Summary) -> BTreeMap<String, f64> {
    let value = serde_json::to_value(summary).expect("a summary always serialises");
    flatten_value(&value)
}

/// Every number of a summary as JSON (a report's, read back), by its dotted path, as
/// [`flatten`] gives them.
pub fn flatten_value(value: &Value) -> BTreeMap<String, f64> {
    fn walk(prefix: &str, value: &Value, out: &mut BTreeMap<String, f64>) {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    let path = if prefix.is_empty() {
                        key.clone()
                    } else {
                        format!("{prefix}.{key}")
                    };
                    walk(&path, child, out);
                }
            }
            Value::Number(number) => {
                if let Some(number) = number.as_f64() {
                    out.insert(prefix.to_owned(), number);
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    walk("", value, &mut out);
    out
}

impl Study {
    /// Where a study's runs go: the variants' names, sweep values and expectations.
    pub fn header(
        scenario: &str,
        seeds: [u64; 2],
        baseline: &str,
        sweep: Option<SweepInfo>,
        selection: Selection,
        variants: Vec<StudyVariant>,
    ) -> Study {
        Study {
            scenario: scenario.to_owned(),
            seeds,
            baseline: baseline.to_owned(),
            sweep,
            selection,
            shard: None,
            variants,
            runs: Vec::new(),
        }
    }

    /// How many runs the whole study has: every variant on every seed.
    pub fn run_count(&self) -> u64 {
        (self.seeds[1] - self.seeds[0] + 1) * self.variants.len() as u64
    }

    /// The `(seed, variant)` of run number `run`, in seed-then-variant order.
    pub fn run_at(&self, run: u64) -> (u64, usize) {
        let per_seed = self.variants.len() as u64;
        (self.seeds[0] + run / per_seed, (run % per_seed) as usize)
    }

    /// The constraints `variant`'s means break, as written, in the selection's order: those
    /// that make it "not satisfied".
    pub fn broken_constraints(&self, variant: &StudyVariant) -> Vec<String> {
        (self.selection.constraints.iter())
            .filter_map(|text| Constraint::parse(text).ok())
            .filter(|constraint| !constraint.holds(&variant.metrics))
            .map(|constraint| constraint.text().to_owned())
            .collect()
    }

    /// Computes every statistic from the rows (sorted first); clears the shard.
    pub fn finish(&mut self) -> Result<(), String> {
        self.runs.sort_by_key(|row| (row.seed, row.variant));
        let expected = self.run_count();
        if self.runs.len() as u64 != expected
            || self
                .runs
                .iter()
                .enumerate()
                .any(|(i, row)| self.run_at(i as u64) != (row.seed, row.variant))
        {
            return Err(format!(
                "the study needs {expected} runs (every variant on seeds {}..{}) once each, and \
                 has {}",
                self.seeds[0],
                self.seeds[1],
                self.runs.len()
            ));
        }
        self.shard = None;
        let baseline = self
            .variants
            .iter()
            .position(|v| v.name == self.baseline)
            .ok_or_else(|| {
                let names: Vec<String> = (self.variants.iter())
                    .map(|v| format!("\"{}\"", v.name))
                    .collect();
                format!(
                    "the baseline \"{}\" is not a variant (the variants: {})",
                    self.baseline,
                    names.join(", ")
                )
            })?;
        let per_variant: Vec<Vec<&RunRow>> = (0..self.variants.len())
            .map(|v| self.runs.iter().filter(|row| row.variant == v).collect())
            .collect();
        for (v, rows) in per_variant.iter().enumerate() {
            let variant = &mut self.variants[v];
            variant.verdicts = judge_all(&variant.expectations, rows)?;
            variant.metrics = across(rows, (v != baseline).then(|| &per_variant[baseline]));
        }
        self.choose()
    }

    /// Marks the variants whose means satisfy the constraints, the best one by the objective,
    /// and those tied with it: satisfying points whose objective's 95% interval overlaps the
    /// best's (a point without an interval, one seed, is its mean). With a tie-break, the best
    /// is the point of that set best by the second objective, and the rest are tied.
    fn choose(&mut self) -> Result<(), String> {
        let constraints = self
            .selection
            .constraints
            .iter()
            .map(|text| Constraint::parse(text))
            .collect::<Result<Vec<_>, _>>()?;
        let objective = self
            .selection
            .objective
            .as_deref()
            .map(Objective::parse)
            .transpose()?;
        if constraints.is_empty() && objective.is_none() {
            return Ok(());
        }
        let mut best: Option<(usize, f64)> = None;
        for (index, variant) in self.variants.iter_mut().enumerate() {
            let satisfies = constraints.iter().all(|c| c.holds(&variant.metrics));
            variant.satisfies = Some(satisfies);
            let score = objective
                .as_ref()
                .and_then(|o| variant.metrics.get(&o.metric).map(|a| o.score(a.mean)));
            if let (true, Some(score)) = (satisfies, score)
                && best.is_none_or(|(_, b)| score < b)
            {
                best = Some((index, score));
            }
        }
        let tie_break = (self.selection.tie_break.as_deref())
            .map(Objective::parse)
            .transpose()?;
        let (Some((first_best, _)), Some(objective)) = (best, objective) else {
            return Ok(());
        };
        let interval = |variant: &StudyVariant| {
            (variant.metrics.get(&objective.metric)).map(|a| a.ci95.unwrap_or([a.mean, a.mean]))
        };
        let [low, high] = interval(&self.variants[first_best]).expect("the best has a value");
        let level: Vec<usize> = (0..self.variants.len())
            .filter(|&index| {
                let variant = &self.variants[index];
                variant.satisfies == Some(true)
                    && interval(variant).is_some_and(|[l, h]| l <= high && low <= h)
            })
            .collect();
        let mut chosen = first_best;
        if let Some(tie_break) = tie_break {
            let score = |index: usize| {
                (self.variants[index].metrics.get(&tie_break.metric))
                    .map(|a| tie_break.score(a.mean))
            };
            // The first of the lowest scores, in the file's order; a point without a value
            // of the second metric is not chosen by it.
            let mut lowest: Option<(usize, f64)> = None;
            for &index in &level {
                if let Some(score) = score(index)
                    && lowest.is_none_or(|(_, l)| score < l)
                {
                    lowest = Some((index, score));
                }
            }
            if let Some((index, _)) = lowest {
                chosen = index;
            }
        }
        for index in level {
            self.variants[index].tied = index != chosen;
        }
        self.variants[chosen].best = true;
        Ok(())
    }
}

/// A constraint on a metric's mean: an expectation read as `mean <metric> ...`.
pub struct Constraint {
    /// As written, without the `mean`.
    text: String,
    mean: Expectation,
}

impl Constraint {
    pub fn parse(text: &str) -> Result<Constraint, String> {
        let expectation =
            Expectation::parse(text).map_err(|e| format!("constraint `{text}`: {e}"))?;
        if expectation.scope() != crate::expect::Scope::EachSeed {
            return Err(format!(
                "constraint `{text}`: a constraint is judged on the mean over seeds already; \
                 write it without a prefix"
            ));
        }
        let mean = Expectation::parse(&format!("mean {text}"))
            .map_err(|e| format!("constraint `{text}`: {e}"))?;
        Ok(Constraint {
            text: expectation.text().to_owned(),
            mean,
        })
    }

    /// The constraint as written (`latency_ms.all.p99 < 200`).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The metric whose mean it constrains.
    pub fn metric(&self) -> String {
        self.mean.metric()
    }

    /// The numbers the mean is held to: the limit of a comparison, or both ends of a range.
    pub fn thresholds(&self) -> Vec<f64> {
        self.mean.thresholds()
    }

    /// Whether a mean of its metric satisfies it.
    pub fn holds_for(&self, mean: f64) -> bool {
        let evaluation = Evaluation {
            passed: true,
            actual: Some(mean),
        };
        self.mean.judge(&[evaluation]).passed
    }

    /// Whether the means satisfy it; a point without a value of its metric does not.
    pub fn holds(&self, metrics: &BTreeMap<String, Across>) -> bool {
        metrics
            .get(&self.metric())
            .is_some_and(|across| self.holds_for(across.mean))
    }
}

/// `min <metric>` or `max <metric>`: what "best" means among the points that satisfy the
/// constraints.
pub struct Objective {
    pub minimise: bool,
    pub metric: String,
}

impl Objective {
    pub fn parse(text: &str) -> Result<Objective, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            [direction @ ("min" | "max"), metric] => Ok(Objective {
                minimise: *direction == "min",
                metric: (*metric).to_owned(),
            }),
            _ => Err(format!(
                "objective `{text}`: write `min <metric>` or `max <metric>`, e.g. `min \
                 latency_ms.all.p99`"
            )),
        }
    }

    /// Lower is better.
    fn score(&self, mean: f64) -> f64 {
        if self.minimise { mean } else { -mean }
    }
}

fn judge_all(texts: &[String], rows: &[&RunRow]) -> Result<Vec<Judged>, String> {
    texts
        .iter()
        .enumerate()
        .map(|(e, text)| {
            let expectation = Expectation::parse(text)?;
            let per_seed: Vec<Evaluation> = rows
                .iter()
                .map(|row| {
                    row.expectations
                        .get(e)
                        .cloned()
                        .flatten()
                        .unwrap_or(Evaluation {
                            passed: false,
                            actual: None,
                        })
                })
                .collect();
            let values = per_seed.iter().filter_map(|e| e.actual);
            let low = values.clone().min_by(f64::total_cmp);
            let high = values.max_by(f64::total_cmp);
            let verdict = expectation.judge(&per_seed);
            Ok(Judged {
                held: verdict.passed,
                seeds_held: per_seed.iter().filter(|e| e.passed).count() as u64,
                seeds: per_seed.len() as u64,
                value: verdict.actual,
                low,
                high,
                first_failing_seed: rows
                    .iter()
                    .zip(&per_seed)
                    .find(|(_, e)| !e.passed)
                    .map(|(row, _)| row.seed),
            })
        })
        .collect()
}

/// Every metric of one variant over its rows, and its paired difference from the baseline's
/// rows (same seeds, same order).
fn across(rows: &[&RunRow], baseline: Option<&Vec<&RunRow>>) -> BTreeMap<String, Across> {
    let mut paths: Vec<&String> = rows.iter().flat_map(|row| row.metrics.keys()).collect();
    paths.sort();
    paths.dedup();
    let mut out = BTreeMap::new();
    for path in paths {
        let value = |row: &RunRow| row.metrics.get(path).copied();
        let values: Vec<f64> = rows.iter().filter_map(|row| value(row)).collect();
        let Some(stats) = Stats::of(&values) else {
            continue;
        };
        let vs_baseline = baseline.and_then(|base| {
            let differences: Vec<f64> = rows
                .iter()
                .zip(base)
                .filter_map(|(row, base)| Some(value(row)? - value(base)?))
                .collect();
            Stats::of(&differences).map(|d| Paired {
                n: d.n,
                mean: d.mean,
                ci95: d.ci95,
            })
        });
        out.insert(
            path.clone(),
            Across {
                n: stats.n,
                mean: stats.mean,
                ci95: stats.ci95,
                min: stats.min,
                max: stats.max,
                vs_baseline,
            },
        );
    }
    out
}

/// Mean, 95% interval, min and max of a sample.
#[derive(Debug, PartialEq)]
pub struct Stats {
    pub n: u64,
    pub mean: f64,
    pub ci95: Option<[f64; 2]>,
    pub min: f64,
    pub max: f64,
}

impl Stats {
    /// `None` for an empty sample; no interval for a sample of one.
    pub fn of(values: &[f64]) -> Option<Stats> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let ci95 = (n > 1).then(|| {
            let squares: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
            let sd = (squares / (n - 1) as f64).sqrt();
            let half = t_975(n as u64 - 1) * sd / (n as f64).sqrt();
            [mean - half, mean + half]
        });
        Some(Stats {
            n: n as u64,
            mean,
            ci95,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

/// Student's t quantile at 0.975 for `df` degrees of freedom: the table's value for 1 to 30,
/// then linear in `1/df` between 30, 40, 60, 120 and infinity (within 0.001 of the exact value
/// everywhere, which is far below the sampling error of any interval it makes).
pub fn t_975(df: u64) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    const TAIL: [(f64, f64); 4] = [(30.0, 2.042), (40.0, 2.021), (60.0, 2.000), (120.0, 1.980)];
    match df {
        0 => f64::NAN,
        1..=30 => TABLE[df as usize - 1],
        _ => {
            let x = 1.0 / df as f64;
            for pair in TAIL.windows(2) {
                let ((d0, t0), (d1, t1)) = (pair[0], pair[1]);
                if df as f64 <= d1 {
                    let (x0, x1) = (1.0 / d0, 1.0 / d1);
                    return t0 + (t1 - t0) * (x - x0) / (x1 - x0);
                }
            }
            let (x0, t0) = (1.0 / 120.0, 1.980);
            1.960 + (t0 - 1.960) * x / x0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_by_hand() {
        // 2, 4, 6, 8: mean 5, s = sqrt(20/3) = 2.582, t(3) = 3.182, half = 3.182 * 2.582 / 2.
        let stats = Stats::of(&[2.0, 4.0, 6.0, 8.0]).unwrap();
        assert_eq!(stats.mean, 5.0);
        let [low, high] = stats.ci95.unwrap();
        assert!((high - 5.0 - 4.108).abs() < 0.001, "{high}");
        assert!((5.0 - low - 4.108).abs() < 0.001, "{low}");
        assert_eq!((stats.min, stats.max, stats.n), (2.0, 8.0, 4));
        // One value: a mean, no interval. None: nothing.
        assert_eq!(Stats::of(&[3.0]).unwrap().ci95, None);
        assert_eq!(Stats::of(&[]), None);
        // A constant sample has a zero-width interval.
        assert_eq!(Stats::of(&[7.0; 5]).unwrap().ci95, Some([7.0, 7.0]));
    }

    #[test]
    fn t_quantiles_match_the_table() {
        assert_eq!(t_975(1), 12.706);
        assert_eq!(t_975(29), 2.045);
        // Between table points, within 0.001 of the exact values (R: qt(0.975, df)).
        for (df, exact) in [
            (35, 2.030108),
            (49, 2.009575),
            (99, 1.984217),
            (500, 1.964720),
        ] {
            assert!((t_975(df) - exact).abs() < 0.002, "{df}: {}", t_975(df));
        }
        assert!((t_975(1_000_000) - 1.96).abs() < 0.0001);
    }

    fn row(seed: u64, variant: usize, ok: f64) -> RunRow {
        RunRow {
            seed,
            variant,
            verdict: Verdict::Completed,
            expectations: vec![Some(Evaluation {
                passed: ok >= 10.0,
                actual: Some(ok),
            })],
            metrics: BTreeMap::from([("outcomes.ok".to_owned(), ok)]),
        }
    }

    fn study(rows: Vec<RunRow>) -> Study {
        let variant = |name: &str| StudyVariant {
            name: name.to_owned(),
            sweep_x: None,
            point: Vec::new(),
            expectations: vec!["outcomes.ok >= 10".to_owned()],
            verdicts: Vec::new(),
            metrics: BTreeMap::new(),
            satisfies: None,
            best: false,
            tied: false,
        };
        let mut study = Study::header(
            "t",
            [1, 3],
            "a",
            None,
            Selection {
                metrics: vec!["outcomes.ok".into()],
                constraints: vec!["outcomes.ok >= 10".into()],
                objective: Some("max outcomes.ok".into()),
                tie_break: None,
            },
            vec![variant("a"), variant("b")],
        );
        study.runs = rows;
        study
    }

    #[test]
    fn paired_differences_cancel_shared_noise() {
        // The seeds move both variants together; b is always a + 2.
        let mut s = study(vec![
            row(1, 0, 10.0),
            row(1, 1, 12.0),
            row(2, 0, 30.0),
            row(2, 1, 32.0),
            row(3, 0, 20.0),
            row(3, 1, 22.0),
        ]);
        s.finish().unwrap();
        let b = &s.variants[1].metrics["outcomes.ok"];
        let [low, high] = b.ci95.unwrap();
        assert!(
            high - low > 40.0,
            "the unpaired interval is wide: {low}..{high}"
        );
        let paired = b.vs_baseline.as_ref().unwrap();
        assert_eq!((paired.mean, paired.ci95), (2.0, Some([2.0, 2.0])));
        assert_eq!(s.variants[0].metrics["outcomes.ok"].vs_baseline, None);
        // Both satisfy `ok >= 10` on the mean; the larger mean is best.
        assert_eq!(s.variants[0].satisfies, Some(true));
        assert!(s.variants[1].best && !s.variants[0].best);
        // But their means' intervals overlap: the seeds cannot tell them apart on the
        // objective, and the study says so.
        assert!(s.variants[0].tied && !s.variants[1].tied);
        let judged = &s.variants[0].verdicts[0];
        assert!(judged.held && judged.seeds_held == 3);
    }

    /// Three points on three seeds: `a` and `b` close on the objective (ok), `c` far below;
    /// `a` has the lower p99.
    fn close_call(tie_break: Option<&str>) -> Study {
        let mut s = study(Vec::new());
        s.variants.push(StudyVariant {
            name: "c".to_owned(),
            ..s.variants[0].clone()
        });
        s.selection.tie_break = tie_break.map(str::to_owned);
        for (seed, oks) in [
            (1, [20.0, 21.0, 11.0]),
            (2, [22.0, 22.5, 12.0]),
            (3, [21.0, 22.0, 11.5]),
        ] {
            for (variant, ok) in oks.into_iter().enumerate() {
                let mut row = row(seed, variant, ok);
                let p99 = [100.0, 300.0, 50.0][variant];
                row.metrics
                    .insert("latency_ms.all.p99".to_owned(), p99 + seed as f64);
                s.runs.push(row);
            }
        }
        s.finish().unwrap();
        s
    }

    #[test]
    fn a_best_point_the_seeds_cannot_tell_from_another_is_flagged_tied() {
        let s = close_call(None);
        let marks: Vec<(bool, bool)> = s.variants.iter().map(|v| (v.best, v.tied)).collect();
        // b has the highest mean ok, a's interval overlaps it, c's (well below) does not.
        assert_eq!(marks, [(false, true), (true, false), (false, false)]);
    }

    #[test]
    fn a_tie_break_chooses_among_the_tied_points_only() {
        let s = close_call(Some("min latency_ms.all.p99"));
        let marks: Vec<(bool, bool)> = s.variants.iter().map(|v| (v.best, v.tied)).collect();
        // a has the lower p99 of the two tied; c, lower still, is not tied on ok.
        assert_eq!(marks, [(true, false), (false, true), (false, false)]);
    }

    #[test]
    fn a_constraint_gives_its_thresholds_and_says_which_means_break_it() {
        let check = |text: &str, thresholds: &[f64], holds: &[(f64, bool)]| {
            let constraint = Constraint::parse(text).unwrap();
            assert_eq!(constraint.text(), text);
            assert_eq!(constraint.metric(), "outcomes.ok");
            assert_eq!(constraint.thresholds(), thresholds, "{text}");
            for &(mean, held) in holds {
                assert_eq!(constraint.holds_for(mean), held, "{text} at {mean}");
            }
        };
        check(
            "outcomes.ok < 200",
            &[200.0],
            &[(199.0, true), (200.0, false)],
        );
        check("outcomes.ok >= 10", &[10.0], &[(10.0, true), (9.5, false)]);
        check(
            "outcomes.ok in 10..20",
            &[10.0, 20.0],
            &[(15.0, true), (21.0, false), (9.0, false)],
        );
        // The study names, per point, the constraints its means break.
        let mut s = study(vec![
            row(1, 0, 5.0),
            row(1, 1, 12.0),
            row(2, 0, 6.0),
            row(2, 1, 13.0),
            row(3, 0, 7.0),
            row(3, 1, 14.0),
        ]);
        s.selection.constraints.push("outcomes.ok < 12.5".into());
        s.finish().unwrap();
        assert_eq!(
            s.broken_constraints(&s.variants[0]),
            ["outcomes.ok >= 10"],
            "a's mean is 6"
        );
        assert_eq!(
            s.broken_constraints(&s.variants[1]),
            ["outcomes.ok < 12.5"],
            "b's mean is 13"
        );
        // A point without a value of the metric breaks it.
        let mut empty = s.variants[0].clone();
        empty.metrics.clear();
        assert_eq!(s.broken_constraints(&empty).len(), 2);
    }

    #[test]
    fn a_missing_or_doubled_run_is_refused() {
        let mut missing = study(vec![row(1, 0, 1.0), row(1, 1, 1.0), row(2, 0, 1.0)]);
        assert!(missing.finish().unwrap_err().contains("needs 6 runs"));
        let mut doubled = study(
            [1, 1, 2, 2, 3, 3]
                .iter()
                .map(|&seed| row(seed, 0, 1.0))
                .collect(),
        );
        assert!(doubled.finish().is_err());
    }

    #[test]
    fn shards_partition_the_runs() {
        let s = study(Vec::new());
        let shards: Vec<Shard> = (1..=4).map(|index| Shard { index, count: 4 }).collect();
        for run in 0..s.run_count() {
            assert_eq!(shards.iter().filter(|shard| shard.holds(run)).count(), 1);
        }
        assert_eq!(s.run_at(0), (1, 0));
        assert_eq!(s.run_at(5), (3, 1));
    }
}
