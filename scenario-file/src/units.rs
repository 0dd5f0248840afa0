//! Quantities with units, parsed exactly: durations into nanoseconds, sizes into bytes,
//! bandwidths into bytes per second. No floating point: `"1.5s"` is 1 500 000 000 ns exactly,
//! and a value that is not a whole number of the base unit, or does not fit, is rejected.

/// Parses a duration such as `"100ms"`, `"1.5s"`, `"250us"`, `"2m"` or `"0s"` into
/// nanoseconds. Units: `ns`, `us` (or `µs`), `ms`, `s`, `m`, `h`.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    const UNITS: [(&str, u128); 7] = [
        ("ns", 1),
        ("us", 1_000),
        ("µs", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
        ("m", 60_000_000_000),
        ("h", 3_600_000_000_000),
    ];
    let hint = "write a number and a unit (ns, us, ms, s, m, h), e.g. \"100ms\" or \"1.5s\"";
    quantity(text, &UNITS, "nanosecond", hint)
}

/// Parses a size such as `"2MiB"`, `"512B"`, `"1.5KB"` into bytes. Units: `B`, `KB`, `MB`,
/// `GB` (powers of 1000), `KiB`, `MiB`, `GiB` (powers of 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let hint = "write a number and a unit (B, KB, MB, GB, KiB, MiB, GiB), e.g. \"2MiB\"";
    quantity(text, &SIZE_UNITS, "byte", hint)
}

const SIZE_UNITS: [(&str, u128); 7] = [
    ("B", 1),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
];

/// Parses a bandwidth such as `"100MiB/s"` or `"1Gbit/s"` into bytes per second. Byte units
/// as in [`parse_size`]; bit units `bit`, `Kbit`, `Mbit`, `Gbit` (powers of 1000).
pub fn parse_bandwidth(text: &str) -> Result<u64, String> {
    let hint = "write a size per second, e.g. \"100MiB/s\" or \"1Gbit/s\"";
    let Some(per_second) = text.trim().strip_suffix("/s") else {
        return Err(format!("`{text}` is not a bandwidth: {hint}"));
    };
    // Bits are counted in eighths of a byte, then converted.
    let bit_units: [(&str, u128); 4] = [
        ("bit", 1),
        ("Kbit", 1_000),
        ("Mbit", 1_000_000),
        ("Gbit", 1_000_000_000),
    ];
    if bit_units.iter().any(|(unit, _)| per_second.ends_with(unit)) {
        let bits = quantity(per_second, &bit_units, "bit", hint)?;
        if bits % 8 != 0 {
            return Err(format!(
                "`{text}` is not a whole number of bytes per second"
            ));
        }
        return Ok(bits / 8);
    }
    quantity(per_second, &SIZE_UNITS, "byte", hint)
}

/// `<digits>[.<digits>]<unit>`, exactly, as a count of the base unit.
fn quantity(text: &str, units: &[(&str, u128)], base: &str, hint: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    if trimmed.starts_with('-') {
        return Err(format!("`{text}` is negative: {hint}"));
    }
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let Some(&(_, scale)) = units.iter().find(|(name, _)| *name == unit.trim()) else {
        return Err(if unit.is_empty() {
            format!("`{text}` has no unit: {hint}")
        } else {
            format!("`{text}` has an unknown unit `{}`: {hint}", unit.trim())
        });
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) || fraction.contains('.') {
        return Err(format!("`{text}` is not a number with a unit: {hint}"));
    }
    let too_big = || {
        format!(
            "`{text}` is too large to fit (at most {} {base}s)",
            u64::MAX
        )
    };
    let whole: u128 = whole.parse().map_err(|_| too_big())?;
    let mut total = whole.checked_mul(scale).ok_or_else(too_big)?;
    // Trailing zeros change nothing; more than 18 significant decimals cannot be a whole
    // number of the base unit at any scale used here (the largest is an hour in nanoseconds,
    // under 10^13), and 18 digits keep every product below 2^128.
    let fraction = fraction.trim_end_matches('0');
    if fraction.len() > 18 {
        return Err(format!("`{text}` is finer than one {base}"));
    }
    if !fraction.is_empty() {
        let digits: u128 = fraction
            .parse()
            .map_err(|_| format!("`{text}` is not a number with a unit: {hint}"))?;
        let divisor = 10u128.pow(fraction.len() as u32);
        let scaled = digits * scale;
        if !scaled.is_multiple_of(divisor) {
            return Err(format!("`{text}` is finer than one {base}"));
        }
        total = total.checked_add(scaled / divisor).ok_or_else(too_big)?;
    }
    u64::try_from(total).map_err(|_| too_big())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_exactly() {
        let cases = [
            ("100ms", 100_000_000),
            ("1.5s", 1_500_000_000),
            ("2s", 2_000_000_000),
            ("250us", 250_000),
            ("250µs", 250_000),
            ("7ns", 7),
            ("0s", 0),
            ("1m", 60_000_000_000),
            ("1.25h", 4_500_000_000_000),
            ("0.000000001s", 1),
            (" 3 ms ", 3_000_000),
            ("1.5000000000000000000000000000000s", 1_500_000_000),
        ];
        for (text, nanos) in cases {
            assert_eq!(parse_duration(text), Ok(nanos), "{text}");
        }
    }

    #[test]
    fn bad_durations_say_why() {
        let cases = [
            ("100", "has no unit"),
            ("100 parsecs", "unknown unit `parsecs`"),
            ("-1s", "is negative"),
            ("1.5ns", "finer than one nanosecond"),
            ("1..5s", "not a number"),
            (".5s", "not a number"),
            ("99999999999h", "too large to fit"),
            ("600y", "unknown unit `y`"),
            (
                "1.999999999999999999999999999999h",
                "finer than one nanosecond",
            ),
            ("s", "not a number"),
        ];
        for (text, message) in cases {
            let error = parse_duration(text).unwrap_err();
            assert!(error.contains(message), "{text}: {error}");
        }
    }

    #[test]
    fn sizes_and_bandwidths() {
        assert_eq!(parse_size("2MiB"), Ok(2 * 1024 * 1024));
        assert_eq!(parse_size("1.5KB"), Ok(1500));
        assert_eq!(parse_size("512B"), Ok(512));
        assert!(
            parse_size("1.5B")
                .unwrap_err()
                .contains("finer than one byte")
        );
        assert_eq!(parse_bandwidth("100MiB/s"), Ok(100 * 1024 * 1024));
        assert_eq!(parse_bandwidth("1Gbit/s"), Ok(125_000_000));
        assert!(
            parse_bandwidth("100MiB")
                .unwrap_err()
                .contains("not a bandwidth")
        );
        assert!(
            parse_bandwidth("3bit/s")
                .unwrap_err()
                .contains("whole number of bytes")
        );
    }
}
