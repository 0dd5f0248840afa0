//! Seeded, portable randomness.
//!
//! The generator is PCG-64 MCG (`rand_pcg::Pcg64Mcg`), whose output is fixed by its
//! specification. Each entity (a load generator, a database) draws from its own stream,
//! derived from the scenario's root seed and the entity's kind and name, so adding a client does
//! not shift the draws of any other. Every sample is computed in integers: the same seed gives
//! the same draws on every platform.

use outagelab_model::time::SimDuration;
use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::scenario::{Distribution, KeyDistribution};

/// One entity's random stream.
#[derive(Clone, Debug)]
pub struct Stream(Pcg64Mcg);

impl Stream {
    /// The stream of the entity `kind`/`name` under `root_seed`.
    pub fn derive(root_seed: u64, kind: &str, name: &str) -> Stream {
        let mut hash = FNV_OFFSET;
        for byte in kind.bytes().chain([0]).chain(name.bytes()) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME);
        }
        Stream(Pcg64Mcg::seed_from_u64(mix(root_seed ^ mix(hash))))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A uniform draw from `0..n` (multiply-shift; the bias is below `n / 2^64`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// An exponential draw with the given mean, in nanoseconds.
    pub fn exponential_nanos(&mut self, mean_nanos: u64) -> u64 {
        ((u128::from(mean_nanos) * u128::from(self.neg_ln_uniform_q32())) >> 32) as u64
    }

    /// `-ln(u)` for a uniform draw `u` in (0, 1], in fixed point with 32 fractional bits: an
    /// exponential draw with mean 1.
    pub fn neg_ln_uniform_q32(&mut self) -> u64 {
        neg_ln_q32(self.next_u64().max(1))
    }

    pub fn duration(&mut self, distribution: &Distribution) -> SimDuration {
        let nanos = match *distribution {
            Distribution::Constant(d) => d.as_nanos(),
            Distribution::Uniform { min, max } => {
                let span = max.as_nanos() - min.as_nanos();
                min.as_nanos() + self.below(span.saturating_add(1))
            }
            Distribution::Exponential { min, mean } => min
                .as_nanos()
                .saturating_add(self.exponential_nanos(mean.as_nanos())),
        };
        SimDuration::from_nanos(nanos)
    }
}

impl outagelab_model::random::RandomBits for Stream {
    fn next_u64(&mut self) -> u64 {
        Stream::next_u64(self)
    }
}

/// Picks the index of a key in a family of `count` keys from a request's key seed. Different
/// families get independent indices from the same seed.
pub fn key_index(key_seed: u64, family: u32, count: u32, distribution: KeyDistribution) -> u32 {
    let mixed = mix(key_seed ^ mix(u64::from(family) + 1));
    let scaled = |bits: u64, n: u32| ((u128::from(bits) * u128::from(n)) >> 64) as u32;
    match distribution {
        KeyDistribution::Uniform => scaled(mixed, count),
        KeyDistribution::Hot {
            hot_keys,
            share_permille,
        } => {
            // The low bits choose hot or cold, the high bits the key within its set.
            let hot = mixed % 1000 < u64::from(share_permille);
            let within = mix(mixed);
            if hot {
                scaled(within, hot_keys)
            } else {
                hot_keys + scaled(within, count - hot_keys)
            }
        }
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// SplitMix64's finaliser: a bijective mix of 64 bits.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `-ln(u / 2^64)` in fixed point with 32 fractional bits, for `u >= 1`, computed with integer
/// operations only.
///
/// The result is defined as `(1 + leading - F) * ln 2`, rounded down, where `F` is the 32-bit
/// binary logarithm of the mantissa that [`log2_by_squaring`] computes (the function this
/// module has always used). The fast path computes the mantissa's logarithm to within
/// [`LOG2_ERROR_Q64`] from a table and a polynomial; when that leaves `F` in doubt (the
/// logarithm is within [`LOG2_DOUBT_Q64`] of a multiple of 2^-32, about one input in 2^19) it
/// asks [`log2_by_squaring`] itself. Either way the result is the same bits.
fn neg_ln_q32(u: u64) -> u64 {
    debug_assert!(u >= 1);
    let leading = u.leading_zeros();
    // u / 2^64 = y * 2^-(leading + 1) with y = m / 2^63 in [1, 2).
    let m = u << leading;
    let log2_y_q32 = match log2_q64_fast(m) {
        Some(log2_y_q64) => log2_y_q64 >> 32,
        // Q2.62, as the squaring wants it.
        None => log2_by_squaring(m >> 1, 32),
    };
    // -log2(u / 2^64) = 1 + leading - log2(y)
    let neg_log2_q32 = (u64::from(leading + 1) << 32) - log2_y_q32;
    const LN_2_Q32: u128 = 2_977_044_472; // round(ln 2 * 2^32)
    ((u128::from(neg_log2_q32) * LN_2_Q32) >> 32) as u64
}

/// `log2(y_q62 / 2^62)` for `y_q62` in `[2^62, 2^63)`, as `bits` fractional bits, by repeated
/// squaring: each squaring (truncated to Q2.62) doubles the logarithm, and its integer part is
/// the next bit. Truncation only lowers the value: step `k` loses at most `1.5 * 2^-62`
/// relative, which is `2.2 * 2^-62 / 2^k` of the logarithm, so the result is
/// `floor(2^bits * log2(y))` or, when the logarithm is less than `2.2 * 2^-62` (9 units of
/// 2^-64) above a multiple of `2^-bits`, one less. (The caller's own truncation of `y` to Q2.62
/// adds at most `0.72 * 2^-62`: 12 units of 2^-64 in all.)
const fn log2_by_squaring(mut y_q62: u64, bits: u32) -> u64 {
    let mut log2 = 0;
    let mut bit = bits;
    while bit > 0 {
        bit -= 1;
        y_q62 = ((y_q62 as u128 * y_q62 as u128) >> 62) as u64;
        if y_q62 >= 1 << 63 {
            y_q62 >>= 1;
            log2 |= 1 << bit;
        }
    }
    log2
}

/// The mantissa's logarithm is split between a table and a polynomial: its top 8 bits after
/// the leading one pick `RECIPROCALS[i]`, about `1 / (1 + (i + 1/2) / 256)` in Q63, which brings
/// it within `2^-9` of 1, and `NEG_LOG2_RECIPROCALS[i]`, `-log2` of that reciprocal in Q64.
const TABLE_BITS: u32 = 8;
const TABLE_LEN: usize = 1 << TABLE_BITS;

const RECIPROCALS: [u64; TABLE_LEN] = {
    let mut table = [0; TABLE_LEN];
    let mut i = 0;
    while i < TABLE_LEN {
        // round(2^63 / (1 + (i + 1/2) / 256)) = round(2^72 / (513 + 2i))
        let divisor = 513 + 2 * i as u128;
        table[i] = (((1u128 << 73) / divisor + 1) >> 1) as u64;
        i += 1;
    }
    table
};

const NEG_LOG2_RECIPROCALS: [u64; TABLE_LEN] = {
    let mut table = [0; TABLE_LEN];
    let mut i = 0;
    while i < TABLE_LEN {
        // The reciprocal r is in (1/2, 1): -log2(r) = 1 - log2(2r), and 2r in Q62 is r in Q63.
        // (64 bits by squaring: at most 9 units of 2^-64 high, since 1 - log2 is taken.)
        table[i] = 0u64.wrapping_sub(log2_by_squaring(RECIPROCALS[i], 64));
        i += 1;
    }
    table
};

/// `round(2^62 / (n ln 2))` for n = 1..=5: `log2(1 + t) = t/ln 2 - t^2/(2 ln 2) + ...`.
const LOG2_SERIES_Q62: [i64; 5] = [
    6_653_256_548_922_161_246,
    3_326_628_274_461_080_623,
    2_217_752_182_974_053_749,
    1_663_314_137_230_540_311,
    1_330_651_309_784_432_249,
];

/// Bound on the fast path's error in Q64: the series cut after `t^5` (`|t|^6 / (6 ln 2)` with
/// `|t| <= 2^-9`: under 2^8 units), the table's 9 units, and a few units of truncation.
const LOG2_ERROR_Q64: u64 = 1 << 9;

/// How close to a multiple of 2^-32 (in Q64) the fast logarithm may come before the squaring is
/// asked instead: its own error, plus the squaring's 12 units of downward bias.
const LOG2_DOUBT_Q64: u64 = 1 << 12;
const _: () = assert!(LOG2_DOUBT_Q64 > LOG2_ERROR_Q64 + 12);

/// `log2(m / 2^63)` in Q64 for `m >= 2^63`, within [`LOG2_ERROR_Q64`], unless it is within
/// [`LOG2_DOUBT_Q64`] of a multiple of 2^-32: then `None`.
fn log2_q64_fast(m: u64) -> Option<u64> {
    debug_assert!(m >= 1 << 63);
    let index = (m >> (63 - TABLE_BITS)) as usize & (TABLE_LEN - 1);
    // z = m * r / 2^63 is within 2^-9 of 1 (Q63); t = z - 1.
    let z = ((u128::from(m) * u128::from(RECIPROCALS[index])) >> 63) as u64;
    let t = z.wrapping_sub(1 << 63) as i64;
    // Horner in Q62: c1 - t(c2 - t(c3 - t(c4 - t c5))).
    let times_t = |q: i64| ((i128::from(t) * i128::from(q)) >> 63) as i64;
    let [c1, c2, c3, c4, c5] = LOG2_SERIES_Q62;
    let q = c1 - times_t(c2 - times_t(c3 - times_t(c4 - times_t(c5))));
    let log2_z_q64 = (i128::from(t) * i128::from(q)) >> 61; // Q63 * Q62 -> Q64
    let log2_q64 = i128::from(NEG_LOG2_RECIPROCALS[index]) + log2_z_q64;
    // Below a multiple of 2^-32 by less than the doubt, or above it by less: ask the squaring.
    let fraction = (log2_q64 as u32).wrapping_add(LOG2_DOUBT_Q64 as u32);
    if fraction < 2 * LOG2_DOUBT_Q64 as u32 {
        return None;
    }
    Some(log2_q64 as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_is_pinned() {
        // Published first outputs of Pcg64Mcg::seed_from_u64(42): if these change, every
        // recorded figure changes with them.
        let mut raw = Pcg64Mcg::seed_from_u64(42);
        assert_eq!(raw.next_u64(), 10_580_897_095_847_554_459);
        assert_eq!(raw.next_u64(), 2_459_073_333_136_617_071);
    }

    #[test]
    fn streams_depend_on_seed_kind_and_name() {
        let first = |seed, kind, name| Stream::derive(seed, kind, name).next_u64();
        assert_eq!(first(1, "load", "a"), first(1, "load", "a"));
        assert_ne!(first(1, "load", "a"), first(2, "load", "a"));
        assert_ne!(first(1, "load", "a"), first(1, "load", "b"));
        assert_ne!(first(1, "load", "a"), first(1, "database", "a"));
        assert_ne!(first(1, "ab", "c"), first(1, "a", "bc"));
    }

    /// The logarithm as it was computed before the table (bit by bit, 32 squarings): the
    /// oracle `neg_ln_q32` must match bit for bit. Kept verbatim, apart from `log2_by_squaring`.
    fn neg_ln_q32_by_squaring(u: u64) -> u64 {
        let leading = u.leading_zeros();
        let mut y = (u << leading) >> 1;
        let mut log2_y_q32: u64 = 0;
        for bit in (0..32).rev() {
            y = ((u128::from(y) * u128::from(y)) >> 62) as u64;
            if y >= 1 << 63 {
                y >>= 1;
                log2_y_q32 |= 1 << bit;
            }
        }
        let neg_log2_q32 = (u64::from(leading + 1) << 32) - log2_y_q32;
        ((u128::from(neg_log2_q32) * 2_977_044_472u128) >> 32) as u64
    }

    /// Random inputs, spread over every exponent as well as uniform; `OUTAGELAB_LOG_SAMPLES`
    /// sets how many (a release run with 10^8 is the thorough check).
    fn log_samples() -> impl Iterator<Item = u64> {
        let count: u64 =
            std::env::var("OUTAGELAB_LOG_SAMPLES").map_or(200_000, |n| n.parse().expect("a count"));
        let mut stream = Stream::derive(3, "test", "log");
        (0..count).map(move |i| {
            let bits = stream.next_u64();
            if i % 2 == 0 {
                bits
            } else {
                (bits >> (i / 2 % 64)).max(1)
            }
        })
    }

    #[test]
    fn the_logarithm_is_the_same_bits_as_by_squaring() {
        let mut edges = vec![
            1,
            2,
            3,
            u64::MAX,
            u64::MAX - 1,
            u64::MAX / 3,
            12_345_678_901,
        ];
        for shift in 0..64 {
            let power = 1u64 << shift;
            edges.extend([power, power - 1, power + 1, power | (power >> 1)]);
        }
        for u in edges.into_iter().filter(|&u| u >= 1).chain(log_samples()) {
            assert_eq!(neg_ln_q32(u), neg_ln_q32_by_squaring(u), "u={u}");
        }
    }

    #[test]
    fn the_logarithm_is_the_same_bits_at_every_step_of_the_squaring() {
        // The smallest mantissa whose 32-bit logarithm by squaring reaches `target`, and its
        // neighbours: where the squaring's truncation decides a bit.
        let mut stream = Stream::derive(3, "test", "log steps");
        let log2_q32 = |m: u64| log2_by_squaring(m >> 1, 32);
        for _ in 0..2_000 {
            let target = stream.next_u64() >> 32;
            let (mut low, mut high) = (1u64 << 63, u64::MAX);
            while low < high {
                let middle = low + (high - low) / 2;
                if log2_q32(middle) >= target {
                    high = middle;
                } else {
                    low = middle + 1;
                }
            }
            for m in low.saturating_sub(3)..=low.saturating_add(3) {
                for u in [m, m >> 17, m >> 40] {
                    assert_eq!(neg_ln_q32(u), neg_ln_q32_by_squaring(u), "u={u}");
                }
            }
        }
    }

    #[test]
    fn the_fast_logarithm_stays_within_its_error_bound() {
        // 64 bits by squaring are exact to 12 units of 2^-64 (low), which the bound leaves room
        // for: compare with a margin of those 12 units.
        for u in log_samples() {
            let m = u << u.leading_zeros();
            if let Some(fast) = log2_q64_fast(m) {
                let slow = log2_by_squaring(m >> 1, 64);
                assert!(
                    fast.abs_diff(slow) <= LOG2_ERROR_Q64 - 12,
                    "m={m}: {fast} vs {slow}"
                );
            }
        }
    }

    #[test]
    fn the_squaring_is_rarely_asked() {
        // The doubt window is 2^13 of the 2^32 fractions: about one draw in 2^19 (a power of
        // two, whose logarithm is whole, is always asked).
        let mut stream = Stream::derive(3, "test", "doubt");
        let draws = 1 << 20;
        let doubtful = (0..draws)
            .filter(|_| log2_q64_fast(stream.next_u64() | 1 << 63).is_none())
            .count();
        assert!(doubtful < 16, "{doubtful} of {draws}");
        assert_eq!(log2_q64_fast(1 << 63), None);
    }

    #[test]
    fn fixed_point_logarithm_matches_floating_point() {
        for u in [
            1u64,
            2,
            3,
            1 << 20,
            12_345_678_901,
            1 << 63,
            u64::MAX / 3,
            u64::MAX,
        ] {
            let exact = -(u as f64 / 2f64.powi(64)).ln();
            let fixed = neg_ln_q32(u) as f64 / 2f64.powi(32);
            assert!((exact - fixed).abs() < 1e-8, "u={u}: {exact} vs {fixed}");
        }
    }

    #[test]
    fn exponential_draws_have_the_requested_mean() {
        let mut stream = Stream::derive(7, "test", "exp");
        let draws = 200_000u64;
        let total: u64 = (0..draws)
            .map(|_| stream.exponential_nanos(2_000_000))
            .sum();
        let mean = total as f64 / draws as f64;
        assert!((mean - 2e6).abs() < 2e6 * 0.01, "mean {mean}");
    }

    #[test]
    fn uniform_draws_stay_in_range_and_cover_it() {
        let mut stream = Stream::derive(7, "test", "uniform");
        let uniform = Distribution::Uniform {
            min: SimDuration::from_nanos(10),
            max: SimDuration::from_nanos(12),
        };
        let mut seen = [0u32; 3];
        for _ in 0..3000 {
            let nanos = stream.duration(&uniform).as_nanos();
            seen[(nanos - 10) as usize] += 1;
        }
        assert!(seen.iter().all(|&count| count > 900), "{seen:?}");
    }

    #[test]
    fn key_indices_are_uniform_and_independent_per_family() {
        let mut counts = [0u32; 4];
        for seed in 0..4000u64 {
            counts[key_index(seed, 0, 4, KeyDistribution::Uniform) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 900), "{counts:?}");
        let uniform = |s, family| key_index(s, family, 1000, KeyDistribution::Uniform);
        let same = (0..1000u64)
            .filter(|&s| uniform(s, 0) == uniform(s, 1))
            .count();
        assert!(same < 10, "families share indices {same} times in 1000");
    }

    #[test]
    fn a_hot_set_takes_its_share_of_the_draws() {
        let hot = KeyDistribution::Hot {
            hot_keys: 10,
            share_permille: 900,
        };
        let draws: Vec<u32> = (0..100_000u64)
            .map(|s| key_index(s, 3, 1000, hot))
            .collect();
        let in_hot = draws.iter().filter(|&&k| k < 10).count();
        assert!((89_000..91_000).contains(&in_hot), "{in_hot}");
        assert!(draws.iter().all(|&k| k < 1000));
        let mut seen = [false; 1000];
        draws.iter().for_each(|&k| seen[k as usize] = true);
        assert!(seen.iter().all(|&s| s), "every key is drawn");
    }
}
