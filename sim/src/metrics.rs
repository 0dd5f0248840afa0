//! Streaming metrics: counts, latency histograms and a bucketed time series, in memory that
//! does not grow with the number of requests.
//!
//! A request is recorded once, when it ends, in the bucket of the instant it ended. Latency
//! totals use HDR histograms (three significant digits, nanoseconds), one per flow and outcome,
//! merged into the per-flow, per-outcome and overall figures when the run ends; each bucket of
//! the time series computes its p50, p95 and p99 when it closes as a histogram with two significant
//! digits (microseconds) would: from the bucket's latencies themselves while there are at most
//! [`BUCKET_SAMPLES_MAX`] of them, from one reusable histogram beyond that. Gauges (in-flight requests, database concurrency,
//! bulkhead occupancy, pending commands) are kept as the maximum reached in each bucket.
//!
//! The series keeps at most [`BUCKETS_MAX`] buckets, so its memory does not grow with the
//! length of a run: a run with a horizon starts with the asked width doubled as often as its
//! horizon needs ([`Metrics::for_run`]); a run that fills the series anyway (no horizon)
//! merges its buckets in pairs and doubles the width, as often as needed. Counts add and
//! gauges keep their maximum, exactly; a merged bucket's percentiles are the largest of the
//! pair's, an upper bound on the pooled percentile, which the series says
//! (`percentiles_merged_before_ms`). Both are integer arithmetic on the run's own events: the
//! same run widens the same way on every machine.
//!
//! Public for the live runner (`outagelab-live`), which records a real run's requests here so
//! that its report has the very shape, buckets and percentile rounding of a simulated one.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use outagelab_model::time::SimTime;
use outagelab_report::{
    CountKey, FlowSummary, GaugeKey, LatencyHistogram, LatencyStats, Outcome, PercentileRule,
    Series,
};

/// Most buckets a series keeps (even, so that buckets merge in pairs): at the cap, pairs merge
/// and the width doubles. 8192 buckets of a few dozen columns are a few megabytes; the longest
/// bundled series has 801.
pub const BUCKETS_MAX: u64 = 8192;

/// Largest latency the bucket histograms and the CDF resolve: the longest run the simulator
/// accepts (`RunLimits::LENGTH_MAX`, 2^62 ns), so no latency is ever clipped. A
/// [`Latency`]'s histogram grows to what it holds instead.
const LATENCY_NANOS_MAX: u64 = 1 << 62;

/// Most latencies the open bucket keeps one by one; beyond, it counts them in its histogram
/// instead (whose 48 KB are then cleared when the bucket closes).
const BUCKET_SAMPLES_MAX: usize = 4096;

/// Index of a gauge registered with [`Metrics::add_gauge`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GaugeId(usize);

/// Index of an event counter registered with [`Metrics::add_counter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterId(usize);

/// Latency of a set of requests: a histogram plus exact min, max and sum.
///
/// The histogram resizes itself to the largest latency recorded (or added), so an empty one
/// costs 16 KiB, not the 430 KiB of one sized for the longest run; its buckets
/// (1 ns resolution, three significant digits) are the same whatever its size, so its
/// percentiles are too.
#[derive(Clone)]
pub(crate) struct Latency {
    histogram: Histogram<u64>,
    min: u64,
    max: u64,
    sum: u128,
}

impl Latency {
    pub(crate) fn new() -> Latency {
        Latency {
            histogram: Histogram::new(3).expect("valid histogram precision"),
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }

    pub(crate) fn record(&mut self, nanos: u64) {
        // `record` grows the histogram to hold it (`saturating_record` would clamp it to the
        // size so far); on 64 bits an auto-resizing histogram holds any u64.
        self.histogram
            .record(nanos)
            .expect("an auto-resizing histogram holds any latency");
        self.min = self.min.min(nanos);
        self.max = self.max.max(nanos);
        self.sum += u128::from(nanos);
    }

    /// The stats of the union of `sets` (empty ones for none); one set alone is read where it
    /// is, not copied into a union first.
    fn stats_of_union<'l>(
        mut sets: impl Iterator<Item = &'l Latency>,
        rule: PercentileRule,
    ) -> LatencyStats {
        let Some(first) = sets.next() else {
            return LatencyStats::default();
        };
        let Some(second) = sets.next() else {
            return first.stats(rule);
        };
        // The union starts as a copy of the widest histogram, and each narrower one is added
        // value by value over its own width only (adding a wider one walks all of its
        // width). A union's counts are the same whatever the order.
        let mut sets: Vec<&Latency> = [first, second].into_iter().chain(sets).collect();
        sets.sort_by_key(|set| std::cmp::Reverse(set.histogram.distinct_values()));
        let mut union = sets[0].clone();
        for set in &sets[1..] {
            union.merge(set);
        }
        union.stats(rule)
    }

    fn merge(&mut self, other: &Latency) {
        self.histogram
            .add(&other.histogram)
            .expect("auto-resizing histograms of one precision add");
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    pub(crate) fn stats(&self, rule: PercentileRule) -> LatencyStats {
        let count = self.histogram.len();
        if count == 0 {
            return LatencyStats::default();
        }
        let ms = |nanos: u64| Some(nanos as f64 / 1e6);
        // A percentile is its bucket's upper edge, which may pass the exact maximum.
        let thousandths = [50_000, 90_000, 95_000, 99_000, 99_900];
        let [p50, p90, p95, p99, p999] = percentiles(&self.histogram, rule, thousandths)
            .map(|value| ms(value.clamp(self.min, self.max)));
        LatencyStats {
            count,
            min: ms(self.min),
            p50,
            p90,
            p95,
            p99,
            p999,
            max: ms(self.max),
            mean: Some((self.sum / u128::from(count)) as f64 / 1e6),
        }
    }
}

/// Latency of the requests of one flow, by outcome (each allocated on first use).
struct LatencyByOutcome {
    by_outcome: [Option<Latency>; Outcome::COUNT],
}

impl LatencyByOutcome {
    fn new() -> Self {
        LatencyByOutcome {
            by_outcome: std::array::from_fn(|_| None),
        }
    }

    fn record(&mut self, outcome: Outcome, nanos: u64) {
        self.by_outcome[outcome.index()]
            .get_or_insert_with(Latency::new)
            .record(nanos);
    }

    /// Merges `groups` outcome by outcome, then reports `all` and every outcome. A set held
    /// by one group alone is read where it is, not copied into a merged one first.
    fn stats<'g>(
        groups: impl Iterator<Item = &'g LatencyByOutcome> + Clone,
        rule: PercentileRule,
    ) -> BTreeMap<String, LatencyStats> {
        let sets = |outcome: Outcome| {
            (groups.clone()).filter_map(move |g| g.by_outcome[outcome.index()].as_ref())
        };
        let mut map = BTreeMap::new();
        for outcome in Outcome::ALL {
            let stats = Latency::stats_of_union(sets(outcome), rule);
            map.insert(outcome.name().to_owned(), stats);
        }
        let all = Latency::stats_of_union(Outcome::ALL.into_iter().flat_map(sets), rule);
        map.insert("all".to_owned(), all);
        map
    }
}

struct FlowTotals {
    requests: u64,
    outcomes: [u64; Outcome::COUNT],
    latency: LatencyByOutcome,
    background: [u64; Outcome::COUNT],
}

struct Gauge {
    name: String,
    current: u64,
    max_in_bucket: u64,
}

/// Events of one kind, counted per bucket.
struct Counter {
    name: String,
    in_bucket: u64,
}

/// The percentiles each bucket of the time series reports, in thousandths: p50, p95, p99.
const BUCKET_PERCENTILES: [u32; 3] = [50_000, 95_000, 99_000];

/// The latencies of the open bucket, in microseconds, for its percentiles: two significant
/// digits, each percentile the upper edge of the histogram bucket that holds its rank.
struct BucketLatency {
    /// Every latency of the bucket while there are at most [`BUCKET_SAMPLES_MAX`]; then empty.
    samples: Vec<u64>,
    /// Every latency of the bucket once there were more (`samples` spilled into it); empty
    /// before. Its bucket edges are the edges of both ways.
    histogram: Histogram<u64>,
    /// Exact extremes.
    min: u64,
    max: u64,
}

impl BucketLatency {
    fn new() -> Self {
        BucketLatency {
            samples: Vec::new(),
            histogram: Histogram::new_with_bounds(1, LATENCY_NANOS_MAX / 1000, 2)
                .expect("valid histogram bounds"),
            min: u64::MAX,
            max: 0,
        }
    }

    fn record(&mut self, micros: u64) {
        if !self.histogram.is_empty() {
            self.histogram.saturating_record(micros);
        } else if self.samples.len() < BUCKET_SAMPLES_MAX {
            self.samples.push(micros);
        } else {
            for &sample in &self.samples {
                self.histogram.saturating_record(sample);
            }
            self.samples.clear();
            self.histogram.saturating_record(micros);
        }
        self.min = self.min.min(micros);
        self.max = self.max.max(micros);
    }

    /// The p50, p95 and p99 in milliseconds (`None` for an empty bucket), and empties it.
    fn take_percentiles(&mut self, rule: PercentileRule) -> [Option<f64>; 3] {
        let (min, max) = (self.min, self.max);
        let ms = |micros: u64| Some(micros.clamp(min, max) as f64 / 1e3);
        let percentiles = if !self.histogram.is_empty() {
            percentiles(&self.histogram, rule, BUCKET_PERCENTILES).map(ms)
        } else if !self.samples.is_empty() {
            // What the histogram would answer: the upper edge of the bucket that holds the
            // value of the rank (every latency is at most the histogram's highest value, so
            // none would have been clamped).
            let count = self.samples.len() as u64;
            // The percentiles are asked in increasing order, so each rank is at or after the
            // one before: once a rank's value is in place, everything after it is at least as
            // large, and the next is selected among those only.
            let mut from = 0;
            let mut at = |thousandths| {
                let rank = rule.rank(thousandths, count) as usize;
                debug_assert!(rank > from, "percentiles asked in increasing order");
                let samples = &mut self.samples[from..];
                let (_, &mut value, _) = samples.select_nth_unstable(rank - 1 - from);
                from = rank - 1;
                debug_assert!(value <= self.histogram.high());
                ms(self.histogram.highest_equivalent(value))
            };
            BUCKET_PERCENTILES.map(&mut at)
        } else {
            [None; 3]
        };
        self.clear();
        percentiles
    }

    fn clear(&mut self) {
        if !self.histogram.is_empty() {
            self.histogram.reset();
        }
        self.samples.clear();
        self.min = u64::MAX;
        self.max = 0;
    }
}

pub struct Metrics {
    rule: PercentileRule,
    /// The width asked for, and the width of the buckets now (the asked one times a power of
    /// two).
    bucket_nanos_asked: u64,
    bucket_nanos: u64,
    /// Where the last merge of buckets in pairs happened: buckets before it are merged.
    merged_before_nanos: Option<u64>,
    /// Index of the bucket being filled.
    bucket: u64,
    /// Where that bucket ends (saturating): before it, an event closes nothing.
    bucket_end_nanos: u64,
    bucket_outcomes: [u64; Outcome::COUNT],
    bucket_latency: BucketLatency,
    series: Series,
    /// The series' requests by outcome, one column per outcome (named when the series ends).
    outcome_columns: [Vec<u64>; Outcome::COUNT],
    gauges: Vec<Gauge>,
    gauge_columns: Vec<Vec<u64>>,
    counters: Vec<Counter>,
    counter_columns: Vec<Vec<u64>>,
    requests: u64,
    outcomes: [u64; Outcome::COUNT],
    flows: Vec<FlowTotals>,
    /// Lock waits per database, allocated on the first one.
    lock_waits: Vec<Option<Latency>>,
    /// The upper edges of the latency CDF's buckets ([`latency_edges_nanos`]), and the
    /// requests that ended in each: exact counts, in a few kilobytes.
    cdf_edges_nanos: Vec<u64>,
    /// For each power of two `2^k`, the index of the first edge at or above it: a latency's
    /// edge is found from there in a few steps ([`Metrics::cdf_bucket`]).
    cdf_first_edge_of_power: [u16; 64],
    cdf_counts: Vec<u64>,
}

impl Metrics {
    pub fn new(bucket_nanos: u64, flows: usize, databases: usize, rule: PercentileRule) -> Metrics {
        Metrics::for_run(bucket_nanos, None, flows, databases, rule)
    }

    /// [`Metrics::new`] for a run that stops at `horizon`, if it has one: the buckets start as
    /// wide as they must for the series to hold the horizon in [`BUCKETS_MAX`] buckets (the
    /// asked width doubled as often as needed), so it never merges them.
    pub fn for_run(
        bucket_nanos_asked: u64,
        horizon: Option<SimTime>,
        flows: usize,
        databases: usize,
        rule: PercentileRule,
    ) -> Metrics {
        assert!(bucket_nanos_asked > 0, "bucket width is validated non-zero");
        let bucket_nanos = horizon.map_or(bucket_nanos_asked, |horizon| {
            width_for(bucket_nanos_asked, horizon.as_nanos())
        });
        Metrics {
            rule,
            bucket_nanos_asked,
            bucket_nanos,
            merged_before_nanos: None,
            bucket: 0,
            bucket_end_nanos: bucket_nanos,
            bucket_outcomes: [0; Outcome::COUNT],
            bucket_latency: BucketLatency::new(),
            series: Series {
                bucket_ms: bucket_nanos as f64 / 1e6,
                ..Series::default()
            },
            outcome_columns: std::array::from_fn(|_| Vec::new()),
            gauges: Vec::new(),
            gauge_columns: Vec::new(),
            counters: Vec::new(),
            counter_columns: Vec::new(),
            requests: 0,
            outcomes: [0; Outcome::COUNT],
            lock_waits: (0..databases).map(|_| None).collect(),
            cdf_counts: vec![0; latency_edges_nanos().len()],
            cdf_edges_nanos: latency_edges_nanos(),
            cdf_first_edge_of_power: first_edge_of_each_power(&latency_edges_nanos()),
            flows: (0..flows)
                .map(|_| FlowTotals {
                    requests: 0,
                    outcomes: [0; Outcome::COUNT],
                    latency: LatencyByOutcome::new(),
                    background: [0; Outcome::COUNT],
                })
                .collect(),
        }
    }

    /// Bytes the time series holds so far (start, outcomes, three percentiles, every gauge
    /// and counter column, per bucket its columns have room for): what grows with the length
    /// of a run, up to [`BUCKETS_MAX`] buckets.
    pub fn series_bytes(&self) -> u64 {
        let values = Outcome::COUNT + self.gauges.len() + self.counters.len();
        let per_bucket = 8 + 3 * 16 + 8 * values as u64;
        self.series.start_ms.capacity() as u64 * per_bucket
    }

    /// The width of the buckets now, in nanoseconds: the asked width times a power of two.
    pub fn bucket_nanos(&self) -> u64 {
        self.bucket_nanos
    }

    /// Registers a gauge (before the run starts); its series is named `name` in reports.
    pub fn add_gauge(&mut self, key: GaugeKey) -> GaugeId {
        self.gauges.push(Gauge {
            name: key.to_string(),
            current: 0,
            max_in_bucket: 0,
        });
        self.gauge_columns.push(Vec::new());
        GaugeId(self.gauges.len() - 1)
    }

    /// Registers an event counter (before the run starts); its series, the events of each
    /// bucket, is named `name` in reports.
    pub fn add_counter(&mut self, key: CountKey) -> CounterId {
        self.counters.push(Counter {
            name: key.to_string(),
            in_bucket: 0,
        });
        self.counter_columns.push(Vec::new());
        CounterId(self.counters.len() - 1)
    }

    /// The gauge registered as `key`, if one was.
    pub fn gauge(&self, key: &GaugeKey) -> Option<GaugeId> {
        let name = key.to_string();
        self.gauges.iter().position(|g| g.name == name).map(GaugeId)
    }

    /// The event counter registered as `key`, if one was.
    pub fn counter(&self, key: &CountKey) -> Option<CounterId> {
        let name = key.to_string();
        self.counters
            .iter()
            .position(|c| c.name == name)
            .map(CounterId)
    }

    /// One event now. Call [`Metrics::advance_to`] first.
    pub fn count(&mut self, id: CounterId) {
        self.count_many(id, 1);
    }

    /// `events` events now. Call [`Metrics::advance_to`] first.
    pub fn count_many(&mut self, id: CounterId, events: u64) {
        self.counters[id.0].in_bucket += events;
    }

    /// The value `id` was last set to.
    pub fn gauge_now(&self, id: GaugeId) -> u64 {
        self.gauges[id.0].current
    }

    pub fn set_gauge(&mut self, id: GaugeId, value: u64) {
        let gauge = &mut self.gauges[id.0];
        gauge.current = value;
        gauge.max_in_bucket = gauge.max_in_bucket.max(value);
    }

    /// Closes every bucket that ends at or before `now`. Call before recording anything that
    /// happens at `now`.
    ///
    /// Bound: each bucket closed is one turn of the loop; every [`BUCKETS_MAX`] / 2 of them the
    /// width doubles, so reaching `now` takes at most `BUCKETS_MAX / 2` turns per doubling
    /// (under 64 doublings in all).
    pub fn advance_to(&mut self, now: SimTime) {
        // (A saturated end is the end of time: nothing comes after it.)
        while now.as_nanos() >= self.bucket_end_nanos && self.bucket_end_nanos != u64::MAX {
            if self.bucket == BUCKETS_MAX {
                // No room for the open bucket: it widens with the others, and stays open.
                self.merge_pairs();
            } else {
                self.close_bucket();
            }
        }
    }

    fn close_bucket(&mut self) {
        if self.bucket == BUCKETS_MAX {
            self.merge_pairs();
        }
        debug_assert_eq!(self.series.start_ms.len() as u64, self.bucket);
        let series = &mut self.series;
        series
            .start_ms
            .push((self.bucket * self.bucket_nanos) as f64 / 1e6);
        for (column, &count) in self.outcome_columns.iter_mut().zip(&self.bucket_outcomes) {
            column.push(count);
        }
        let [p50, p95, p99] = self.bucket_latency.take_percentiles(self.rule);
        series.p50_ms.push(p50);
        series.p95_ms.push(p95);
        series.p99_ms.push(p99);
        for (gauge, column) in self.gauges.iter().zip(&mut self.gauge_columns) {
            column.push(gauge.max_in_bucket);
        }
        for (counter, column) in self.counters.iter().zip(&mut self.counter_columns) {
            column.push(counter.in_bucket);
        }
        self.bucket += 1;
        self.bucket_end_nanos = (self.bucket + 1).saturating_mul(self.bucket_nanos);
        self.bucket_outcomes = [0; Outcome::COUNT];
        for gauge in &mut self.gauges {
            gauge.max_in_bucket = gauge.current;
        }
        for counter in &mut self.counters {
            counter.in_bucket = 0;
        }
    }

    /// The series is full and the open bucket has no room: buckets `2i` and `2i + 1` become
    /// bucket `i` of twice the width, and the open bucket, which starts where it did, is
    /// twice as wide.
    fn merge_pairs(&mut self) {
        let half = (BUCKETS_MAX / 2) as usize;
        fn pairs<T: Copy>(column: &mut Vec<T>, merge: impl Fn(T, T) -> T) {
            for i in 0..column.len() / 2 {
                column[i] = merge(column[2 * i], column[2 * i + 1]);
            }
            column.truncate(column.len() / 2);
        }
        let sum = |a: u64, b: u64| a + b;
        let max = |a: u64, b: u64| a.max(b);
        // Percentiles cannot be pooled from percentiles: the larger is an upper bound.
        let larger = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.outcome_columns.iter_mut().for_each(|c| pairs(c, sum));
        self.counter_columns.iter_mut().for_each(|c| pairs(c, sum));
        self.gauge_columns.iter_mut().for_each(|c| pairs(c, max));
        let series = &mut self.series;
        for column in [&mut series.p50_ms, &mut series.p95_ms, &mut series.p99_ms] {
            pairs(column, larger);
        }
        self.merged_before_nanos = Some(self.bucket * self.bucket_nanos);
        self.bucket_nanos *= 2;
        self.bucket = half as u64;
        series.start_ms.truncate(half);
        for (index, start) in series.start_ms.iter_mut().enumerate() {
            *start = (index as u64 * self.bucket_nanos) as f64 / 1e6;
        }
        self.bucket_end_nanos = (self.bucket + 1).saturating_mul(self.bucket_nanos);
    }

    pub fn record_arrival(&mut self, flow: usize) {
        self.requests += 1;
        self.flows[flow].requests += 1;
    }

    pub fn record_end(&mut self, flow: usize, outcome: Outcome, latency_nanos: u64) {
        self.outcomes[outcome.index()] += 1;
        self.bucket_outcomes[outcome.index()] += 1;
        self.bucket_latency.record(latency_nanos / 1000);
        let edge = self.cdf_bucket(latency_nanos);
        self.cdf_counts[edge] += 1;
        let flow = &mut self.flows[flow];
        flow.outcomes[outcome.index()] += 1;
        flow.latency.record(outcome, latency_nanos);
    }

    /// The CDF bucket of a latency: the first edge at or above it (the last edge is above
    /// every latency the run allows). Every edge before the first one at or above the
    /// latency's power of two is below the latency, so the search starts there and passes the
    /// few edges (at most 7: the R20 series has 6 or 7 per doubling) up to the latency.
    fn cdf_bucket(&self, latency_nanos: u64) -> usize {
        let power = latency_nanos.checked_ilog2().unwrap_or(0) as usize;
        let edges = &self.cdf_edges_nanos;
        let mut edge = usize::from(self.cdf_first_edge_of_power[power]);
        while edge < edges.len() - 1 && edges[edge] < latency_nanos {
            edge += 1;
        }
        debug_assert_eq!(
            edge,
            edges
                .partition_point(|&e| e < latency_nanos)
                .min(edges.len() - 1)
        );
        edge
    }

    pub fn record_lock_wait(&mut self, database: usize, nanos: u64) {
        self.lock_waits[database]
            .get_or_insert_with(Latency::new)
            .record(nanos);
    }

    pub fn lock_wait_stats(&self, database: usize) -> LatencyStats {
        self.lock_waits[database]
            .as_ref()
            .map_or_else(LatencyStats::default, |latency| latency.stats(self.rule))
    }

    pub fn record_background_end(&mut self, flow: usize, outcome: Outcome) {
        self.flows[flow].background[outcome.index()] += 1;
    }

    pub fn requests(&self) -> u64 {
        self.requests
    }

    pub fn outcome_counts(&self) -> BTreeMap<String, u64> {
        counts_by_name(&self.outcomes)
    }

    pub fn latency_stats(&self) -> BTreeMap<String, LatencyStats> {
        LatencyByOutcome::stats(self.flows.iter().map(|flow| &flow.latency), self.rule)
    }

    /// Every ended request's latency in the report's fixed buckets ([`LatencyHistogram`]).
    pub fn latency_histogram(&self) -> LatencyHistogram {
        let counted = self.cdf_edges_nanos.iter().zip(&self.cdf_counts);
        let listed = counted.filter(|&(_, &count)| count > 0);
        let (le_ms, counts) = listed
            .map(|(&edge, &count)| (edge as f64 / 1e6, count))
            .unzip();
        LatencyHistogram { le_ms, counts }
    }

    /// The summary of flow `flow`, given how many of its requests had not ended and how many
    /// of its background steps had not ended.
    pub fn flow_summary(
        &self,
        flow: usize,
        unfinished: u64,
        background_unfinished: u64,
    ) -> FlowSummary {
        let totals = &self.flows[flow];
        let mut background = counts_by_name(&totals.background);
        background.insert("unfinished".to_owned(), background_unfinished);
        FlowSummary {
            requests: totals.requests,
            outcomes: counts_by_name(&totals.outcomes),
            unfinished,
            latency_ms: LatencyByOutcome::stats(std::iter::once(&totals.latency), self.rule),
            background,
            peak_in_flight: 0,
            stale_reads: 0,
            stale_age_ms: LatencyStats::default(),
        }
    }

    /// Closes the series through the bucket holding `end` and returns it.
    pub fn finish_series(&mut self, end: SimTime) -> Series {
        self.advance_to(end);
        self.close_bucket();
        let mut series = std::mem::take(&mut self.series);
        series.bucket_ms = self.bucket_nanos as f64 / 1e6;
        series.bucket_ms_asked = (self.bucket_nanos != self.bucket_nanos_asked)
            .then(|| self.bucket_nanos_asked as f64 / 1e6);
        series.percentiles_merged_before_ms = self.merged_before_nanos.map(|at| at as f64 / 1e6);
        for outcome in Outcome::ALL {
            let column = std::mem::take(&mut self.outcome_columns[outcome.index()]);
            series.outcomes.insert(outcome.name().to_owned(), column);
        }
        for (gauge, column) in self.gauges.iter().zip(&mut self.gauge_columns) {
            series
                .gauges_max
                .insert(gauge.name.clone(), std::mem::take(column));
        }
        for (counter, column) in self.counters.iter().zip(&mut self.counter_columns) {
            series
                .counts
                .insert(counter.name.clone(), std::mem::take(column));
        }
        series
    }
}

/// The narrowest width, the asked one times a power of two, at which a series that closes the
/// bucket holding `horizon_nanos` has at most [`BUCKETS_MAX`] buckets.
pub fn width_for(bucket_nanos_asked: u64, horizon_nanos: u64) -> u64 {
    let mut width = bucket_nanos_asked;
    while horizon_nanos / width + 1 > BUCKETS_MAX {
        width = width.saturating_mul(2);
    }
    width
}

/// The R20 preferred numbers, in thousandths: the upper edges of a decade of
/// [`LatencyHistogram`] buckets.
const R20_THOUSANDTHS: [u64; 20] = [
    1000, 1120, 1250, 1400, 1600, 1800, 2000, 2240, 2500, 2800, 3150, 3550, 4000, 4500, 5000, 5600,
    6300, 7100, 8000, 9000,
];

/// The upper edges of the [`LatencyHistogram`] buckets in nanoseconds, from 1 µs to the first
/// at or above the largest latency the histograms hold: integers, the same on every platform,
/// at most 320.
fn latency_edges_nanos() -> Vec<u64> {
    let mut edges = Vec::with_capacity(320);
    let mut decade = 1u64; // nanoseconds per thousandth: 1 µs is 1000 thousandths of 1 ns
    loop {
        for step in R20_THOUSANDTHS {
            let edge = step * decade;
            edges.push(edge);
            if edge >= LATENCY_NANOS_MAX {
                return edges;
            }
        }
        decade *= 10;
    }
}

/// For each power of two `2^k` (`k` below 64), the index of the first of `edges` (ascending)
/// at or above it, or of the last edge when none is.
fn first_edge_of_each_power(edges: &[u64]) -> [u16; 64] {
    std::array::from_fn(|power| {
        let first = edges.partition_point(|&e| e < 1u64 << power);
        u16::try_from(first.min(edges.len() - 1)).expect("a few hundred edges")
    })
}

/// The percentile `thousandths / 1000` % of a non-empty histogram under `rule`, as the upper
/// edge of the bucket holding the value of that rank, asked alone: what the tests hold
/// [`percentiles`] to.
#[cfg(test)]
fn percentile(histogram: &Histogram<u64>, rule: PercentileRule, thousandths: u32) -> u64 {
    let count = histogram.len();
    histogram.value_at_quantile(quantile_of(rule.rank(thousandths, count), count))
}

/// The quantile at which the histogram answers for the value of rank `rank` of `count`.
fn quantile_of(rank: u64, count: u64) -> f64 {
    // The histogram answers for the rank ceil(q * count); half a rank below the one wanted is
    // far from any rounding edge, so this q always selects exactly `rank`.
    (rank as f64 - 0.5) / count as f64
}

/// The percentiles `thousandths[i] / 1000` % (ascending) of a non-empty histogram under
/// `rule`, each the upper edge of the bucket holding the value of that rank: one pass over
/// the histogram's counts for them all, each what `value_at_quantile` gives it alone.
fn percentiles<const N: usize>(
    histogram: &Histogram<u64>,
    rule: PercentileRule,
    thousandths: [u32; N],
) -> [u64; N] {
    debug_assert!(
        thousandths.is_sorted(),
        "percentiles asked in increasing order"
    );
    let count = histogram.len();
    let quantiles = thousandths.map(|t| quantile_of(rule.rank(t, count), count));
    let mut values = histogram.value_at_quantiles(quantiles);
    std::array::from_fn(|_| values.next().expect("one value per ascending quantile"))
}

fn counts_by_name(counts: &[u64; Outcome::COUNT]) -> BTreeMap<String, u64> {
    Outcome::ALL
        .into_iter()
        .map(|outcome| (outcome.name().to_owned(), counts[outcome.index()]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_latency_lands_in_the_first_cdf_bucket_at_or_above_it() {
        // The lookup from the latency's power of two must agree with a binary search over the
        // edges everywhere: at each edge, either side of it, at the powers of two, and at the
        // ends of the range.
        let metrics = Metrics::new(100 * MS, 1, 0, PercentileRule::NearestRank);
        let edges = &metrics.cdf_edges_nanos;
        let searched = |latency: u64| edges.partition_point(|&e| e < latency).min(edges.len() - 1);
        let mut latencies = vec![0, 1, u64::MAX, LATENCY_NANOS_MAX, LATENCY_NANOS_MAX + 1];
        for &edge in edges {
            latencies.extend([edge - 1, edge, edge + 1]);
        }
        latencies.extend((0..64).flat_map(|k| [(1u64 << k) - 1, 1 << k, (1 << k) + 1]));
        for latency in latencies {
            assert_eq!(
                metrics.cdf_bucket(latency),
                searched(latency),
                "{latency} ns"
            );
        }
    }

    #[test]
    fn requests_land_in_the_bucket_where_they_end() {
        let mut metrics = Metrics::new(100 * MS, 1, 0, PercentileRule::NearestRank);
        let gauge = metrics.add_gauge(GaugeKey::InFlight);
        metrics.set_gauge(gauge, 3);
        metrics.record_arrival(0);
        metrics.advance_to(SimTime::from_nanos(50 * MS));
        metrics.record_end(0, Outcome::Ok, 10 * MS);
        metrics.set_gauge(gauge, 1);
        metrics.advance_to(SimTime::from_nanos(250 * MS));
        metrics.record_end(0, Outcome::Timeout, 100 * MS);
        let series = metrics.finish_series(SimTime::from_nanos(260 * MS));
        assert_eq!(series.start_ms, vec![0.0, 100.0, 200.0]);
        assert_eq!(series.outcomes["ok"], vec![1, 0, 0]);
        assert_eq!(series.outcomes["timeout"], vec![0, 0, 1]);
        assert_eq!(series.gauges_max["in_flight"], vec![3, 1, 1]);
        assert_eq!(series.p50_ms[1], None);
        let p99 = series.p99_ms[2].unwrap();
        assert!((100.0..=101.0).contains(&p99), "{p99}");
    }

    #[test]
    fn a_full_series_merges_its_buckets_in_pairs_and_says_so() {
        // 1 ns buckets: the series fills after BUCKETS_MAX ns and widens as often as needed.
        let mut metrics = Metrics::new(1, 1, 0, PercentileRule::NearestRank);
        let gauge = metrics.add_gauge(GaugeKey::InFlight);
        metrics.set_gauge(gauge, 7);
        metrics.record_end(0, Outcome::Ok, 5_000); // bucket 0
        metrics.set_gauge(gauge, 0);
        metrics.advance_to(SimTime::from_nanos(1));
        metrics.record_end(0, Outcome::Ok, 9_000); // bucket 1: merges with bucket 0
        metrics.advance_to(SimTime::from_nanos(BUCKETS_MAX + 10));
        metrics.record_end(0, Outcome::Timeout, 2_000); // after the first merge: 2 ns buckets
        let end = SimTime::from_nanos(10 * BUCKETS_MAX + 3);
        metrics.advance_to(end);
        metrics.record_end(0, Outcome::Timeout, 3_000);
        let series = metrics.finish_series(end);
        assert!(!series.truncated);
        // 10 × BUCKETS_MAX ns needs 16 ns buckets (8 would need 10/8 × BUCKETS_MAX).
        assert_eq!(series.bucket_ms, 16.0 / 1e6);
        assert_eq!(series.bucket_ms_asked, Some(1.0 / 1e6));
        assert_eq!(series.len() as u64, 10 * BUCKETS_MAX / 16 + 1);
        assert_eq!(series.start_ms[1], 16.0 / 1e6);
        // Counts add and gauges keep their maximum: nothing is lost.
        assert_eq!(series.outcomes["ok"][0], 2);
        assert_eq!(series.outcomes["timeout"].iter().sum::<u64>(), 2);
        assert_eq!(series.gauges_max["in_flight"][0], 7);
        assert_eq!(series.gauges_max["in_flight"][1], 0);
        // The merged bucket's percentiles are the larger of the pair's (9 µs, not the pooled
        // p50 of 5 µs); the last bucket, never merged, is exact.
        assert_eq!(series.p50_ms[0], Some(0.009));
        assert_eq!(series.p50_ms.last(), Some(&Some(0.003)));
        // The last merge happened when 8 ns buckets filled: at BUCKETS_MAX × 8 ns.
        assert_eq!(
            series.percentiles_merged_before_ms,
            Some((8 * BUCKETS_MAX) as f64 / 1e6)
        );
        assert_eq!(metrics.outcome_counts()["ok"], 2);
    }

    #[test]
    fn a_series_of_exactly_buckets_max_buckets_is_not_merged() {
        let mut metrics = Metrics::new(MS, 1, 0, PercentileRule::NearestRank);
        let end = SimTime::from_nanos((BUCKETS_MAX - 1) * MS + 5);
        metrics.advance_to(end);
        metrics.record_end(0, Outcome::Ok, 5_000);
        let series = metrics.finish_series(end);
        assert_eq!(series.len() as u64, BUCKETS_MAX);
        assert_eq!((series.bucket_ms, series.bucket_ms_asked), (1.0, None));
        assert_eq!(series.percentiles_merged_before_ms, None);
        // One nanosecond later it is one bucket too many: they merge.
        let mut metrics = Metrics::new(MS, 1, 0, PercentileRule::NearestRank);
        let series = metrics.finish_series(SimTime::from_nanos(BUCKETS_MAX * MS));
        assert_eq!(series.len() as u64, BUCKETS_MAX / 2 + 1);
        assert_eq!(series.bucket_ms_asked, Some(1.0));
    }

    #[test]
    fn a_run_with_a_horizon_starts_wide_enough_and_never_merges() {
        let hour = 3_600_000 * MS;
        assert_eq!(width_for(100 * MS, 60_000 * MS), 100 * MS, "a minute fits");
        // 24 h at 100 ms is 864 001 buckets: 6.4 s (2^6 × 100 ms) gives 13 501 > 8192,
        // 12.8 s gives 6751.
        assert_eq!(width_for(100 * MS, 24 * hour), 12_800 * MS);
        assert_eq!(width_for(1, 1 << 62), 1 << 50);
        let mut metrics = Metrics::for_run(
            100 * MS,
            Some(SimTime::from_nanos(24 * hour)),
            1,
            0,
            PercentileRule::NearestRank,
        );
        metrics.advance_to(SimTime::from_nanos(24 * hour));
        metrics.record_end(0, Outcome::Ok, 5_000);
        let series = metrics.finish_series(SimTime::from_nanos(24 * hour));
        assert_eq!(series.len(), 6751);
        assert_eq!(series.bucket_ms, 12_800.0);
        assert_eq!(series.bucket_ms_asked, Some(100.0));
        assert_eq!(series.percentiles_merged_before_ms, None);
        assert_eq!(series.p50_ms.last(), Some(&Some(0.005)));
    }

    #[test]
    fn the_latency_histogram_counts_each_request_under_its_edge() {
        let edges = latency_edges_nanos();
        assert_eq!(edges[..3], [1000, 1120, 1250]);
        assert_eq!(edges[20], 10_000, "a decade later: 10 µs");
        assert!(edges.len() <= 320 && *edges.last().unwrap() >= LATENCY_NANOS_MAX);
        assert!(edges[edges.len() - 2] < LATENCY_NANOS_MAX);

        let mut metrics = Metrics::new(100 * MS, 2, 0, PercentileRule::NearestRank);
        // 1 ms exactly (on an edge: in the bucket it closes), 1.05 ms, 3 of 4.2 ms over two
        // flows and outcomes, and 10 s.
        metrics.record_end(0, Outcome::Ok, MS);
        metrics.record_end(0, Outcome::Ok, 1_050_000);
        metrics.record_end(0, Outcome::Ok, 4_200_000);
        metrics.record_end(1, Outcome::Timeout, 4_200_000);
        metrics.record_end(1, Outcome::Ok, 4_200_000);
        metrics.record_end(1, Outcome::Timeout, 10_000 * MS);
        let histogram = metrics.latency_histogram();
        assert_eq!(histogram.le_ms, [1.0, 1.12, 4.5, 10_000.0]);
        assert_eq!(histogram.counts, [1, 1, 3, 1]);
        assert_eq!(
            Metrics::new(MS, 1, 0, PercentileRule::NearestRank).latency_histogram(),
            LatencyHistogram::default()
        );
    }

    #[test]
    fn latency_stats_follow_the_nearest_rank_rule() {
        let mut metrics = Metrics::new(100 * MS, 1, 0, PercentileRule::NearestRank);
        for ms in 1..=100 {
            metrics.record_end(0, Outcome::Ok, ms * MS);
        }
        let stats = &metrics.latency_stats()["all"];
        assert_eq!(stats.count, 100);
        let close = |value: Option<f64>, expected: f64| {
            let value = value.unwrap();
            assert!(
                value >= expected && value <= expected * 1.001,
                "{value} vs {expected}"
            );
        };
        close(stats.p50, 50.0);
        close(stats.p90, 90.0);
        close(stats.p99, 99.0);
        assert_eq!(stats.max, Some(100.0));
        assert_eq!(stats.min, Some(1.0));
        assert_eq!(stats.mean, Some(50.5));
        assert_eq!(metrics.latency_stats()["timeout"].count, 0);
    }

    /// Growing histograms of very different sizes (a flow's microseconds, another's seconds),
    /// merged across flows and outcomes or read alone, give the percentiles one histogram of
    /// fixed bounds gives for the same latencies.
    #[test]
    fn merged_growing_histograms_give_the_fixed_histograms_percentiles() {
        let rule = PercentileRule::NearestRank;
        let mut metrics = Metrics::new(100 * MS, 2, 0, rule);
        let mut all = Histogram::<u64>::new_with_bounds(1, LATENCY_NANOS_MAX, 3).unwrap();
        let mut slow_ok = all.clone();
        for i in 0..600u64 {
            let (flow, outcome, nanos) = match i % 3 {
                0 => (0, Outcome::Ok, 1_000 + i * 7),
                1 => (1, Outcome::Ok, 1_000_000 + i * i * 27_000),
                _ => (1, Outcome::Timeout, 10_000_000_000 + i),
            };
            metrics.record_end(flow, outcome, nanos);
            all.record(nanos).unwrap();
            if flow == 1 && outcome == Outcome::Ok {
                slow_ok.record(nanos).unwrap();
            }
        }
        // A percentile is its bucket's upper edge, clamped to the exact extremes (these are
        // 1 000 ns and 10 000 000 599 ns overall, 1 027 000 ns and 9 653 716 000 ns for the
        // slow flow's `ok`).
        let extremes = |histogram: &Histogram<u64>| {
            if histogram.len() == 600 {
                (1_000, 10_000_000_599)
            } else {
                (1_027_000, 1_000_000 + 598 * 598 * 27_000)
            }
        };
        let expected = |histogram: &Histogram<u64>, thousandths| {
            let (min, max) = extremes(histogram);
            let value = percentile(histogram, rule, thousandths);
            Some(value.clamp(min, max) as f64 / 1e6)
        };
        let stats = &metrics.latency_stats()["all"];
        assert_eq!(stats.count, 600);
        assert_eq!(stats.p50, expected(&all, 50_000));
        assert_eq!(stats.p90, expected(&all, 90_000));
        assert_eq!(stats.p99, expected(&all, 99_000));
        let alone = &metrics.flow_summary(1, 0, 0).latency_ms["ok"];
        assert_eq!(alone.p50, expected(&slow_ok, 50_000));
        assert_eq!(alone.p999, expected(&slow_ok, 99_900));
    }
}

#[cfg(test)]
mod percentile_tests {
    use super::*;

    proptest::proptest! {
        /// The percentiles taken in one pass are each what the histogram gives for it alone,
        /// under both rules, from one latency to thousands spread over nine decades.
        #[test]
        fn percentiles_in_one_pass_are_each_the_one_asked_alone(
            latencies in proptest::collection::vec((0u32..30, 0u64..1000), 1..3000),
            floor in proptest::bool::ANY,
        ) {
            let rule = if floor { PercentileRule::FloorIndex } else { PercentileRule::NearestRank };
            let mut latency = Latency::new();
            for (power, low) in latencies {
                latency.record((1u64 << power) + low);
            }
            let thousandths = [0, 1, 50_000, 90_000, 95_000, 99_000, 99_900, 100_000];
            let together = percentiles(&latency.histogram, rule, thousandths);
            for (asked, value) in thousandths.into_iter().zip(together) {
                proptest::prop_assert_eq!(value, percentile(&latency.histogram, rule, asked));
            }
        }
    }
}

#[cfg(test)]
mod bucket_tests {
    use super::*;

    /// The p50, p95 and p99 of `micros` as the bucket histogram of two significant digits
    /// gives them (how every bucket was computed before it kept its samples).
    fn by_histogram(micros: &[u64], rule: PercentileRule) -> [Option<f64>; 3] {
        let mut histogram =
            Histogram::<u64>::new_with_bounds(1, LATENCY_NANOS_MAX / 1000, 2).unwrap();
        micros.iter().for_each(|&m| histogram.saturating_record(m));
        let (min, max) = (*micros.iter().min().unwrap(), *micros.iter().max().unwrap());
        let at = |thousandths| {
            Some(percentile(&histogram, rule, thousandths).clamp(min, max) as f64 / 1e3)
        };
        [at(50_000), at(95_000), at(99_000)]
    }

    #[test]
    fn bucket_percentiles_are_what_the_histogram_gives() {
        let mut stream = crate::rng::Stream::derive(5, "test", "bucket");
        let mut bucket = BucketLatency::new();
        for count in [
            1,
            2,
            3,
            7,
            100,
            999,
            BUCKET_SAMPLES_MAX,
            BUCKET_SAMPLES_MAX + 1,
            9000,
        ] {
            for rule in [PercentileRule::NearestRank, PercentileRule::FloorIndex] {
                // Latencies over every magnitude, zero and the largest included, and repeats.
                let micros: Vec<u64> = (0..count)
                    .map(|i| match i % 5 {
                        0 => 0,
                        1 => LATENCY_NANOS_MAX / 1000,
                        2 => 50_000,
                        _ => stream.next_u64() >> (10 + stream.below(54)),
                    })
                    .collect();
                micros.iter().for_each(|&m| bucket.record(m));
                let expected = by_histogram(&micros, rule);
                assert_eq!(bucket.take_percentiles(rule), expected, "{count} {rule:?}");
            }
        }
        assert_eq!(
            bucket.take_percentiles(PercentileRule::NearestRank),
            [None; 3]
        );
    }
}

#[cfg(test)]
mod rule_tests {
    use super::*;

    #[test]
    fn the_floor_index_rule_is_one_rank_higher_on_whole_ranks() {
        let mut histogram = Histogram::<u64>::new_with_bounds(1, 1 << 40, 3).unwrap();
        for value in 1..=100u64 {
            histogram.record(value).unwrap();
        }
        assert_eq!(
            percentile(&histogram, PercentileRule::NearestRank, 50_000),
            50
        );
        assert_eq!(
            percentile(&histogram, PercentileRule::FloorIndex, 50_000),
            51
        );
        assert_eq!(
            percentile(&histogram, PercentileRule::FloorIndex, 99_000),
            100
        );
    }
}
