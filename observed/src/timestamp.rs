//! Instants as a monitoring export writes them: Unix seconds, or RFC 3339.

/// Milliseconds since the Unix epoch of `text`: Unix seconds with up to nine decimals (rounded
/// to the millisecond, halves up), or an RFC 3339 time with its offset
/// (`2024-12-03T10:00:00Z`, `2024-12-03T11:00:00.5+01:00`).
pub fn parse_timestamp(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let numeric = text.starts_with(|c: char| c.is_ascii_digit() || c == '-');
    if numeric
        && !text.contains(['T', ' '])
        && let Some(ms) = unix_seconds(text)
    {
        return Ok(ms);
    }
    match text.parse::<jiff::Timestamp>() {
        Ok(timestamp) => Ok(timestamp.as_millisecond()),
        Err(_) => Err(format!(
            "`{text}` is neither Unix seconds (1733220000 or 1733220000.250) nor an RFC 3339 \
             time with its offset (2024-12-03T10:00:00Z)"
        )),
    }
}

/// Milliseconds of a decimal number of seconds; `None` when it is not one, or too large.
fn unix_seconds(text: &str) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !all_digits(whole) || !all_digits(fraction) || fraction.len() > 9 {
        return None;
    }
    let mut nanos = format!("{fraction:0<9}").parse::<i64>().ok()?;
    nanos += 500_000; // rounded to the millisecond, halves up
    let ms = whole
        .parse::<i64>()
        .ok()?
        .checked_mul(1000)?
        .checked_add(nanos / 1_000_000)?;
    // The years jiff can write, so that every instant read can be shown.
    let limit = 253_402_207_200_000; // 9999-12-31
    (ms <= limit).then_some(if negative { -ms } else { ms })
}

/// An instant in UTC, as RFC 3339: `2024-12-03T10:00:00Z` (with milliseconds when it has
/// them).
pub fn format_utc(unix_ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(unix_ms) {
        Ok(timestamp) => timestamp.to_string(),
        Err(_) => format!("{unix_ms} ms after the Unix epoch"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_seconds_and_rfc_3339_give_the_same_instant() {
        assert_eq!(parse_timestamp("1733220000"), Ok(1_733_220_000_000));
        assert_eq!(parse_timestamp("1733220000.25"), Ok(1_733_220_000_250));
        assert_eq!(parse_timestamp("1733220000.0004999"), Ok(1_733_220_000_000));
        assert_eq!(parse_timestamp("1733220000.0005"), Ok(1_733_220_000_001));
        assert_eq!(
            parse_timestamp("2024-12-03T10:00:00Z"),
            Ok(1_733_220_000_000)
        );
        assert_eq!(
            parse_timestamp("2024-12-03T11:00:00.25+01:00"),
            Ok(1_733_220_000_250)
        );
    }

    #[test]
    fn what_is_not_an_instant_is_refused_with_both_forms_named() {
        for text in ["yesterday", "2024-12-03T10:00:00", "1.2.3", "1e9", ""] {
            let error = parse_timestamp(text).unwrap_err();
            assert!(error.contains("RFC 3339"), "{text}: {error}");
        }
        assert!(parse_timestamp("99999999999999999").is_err());
    }

    #[test]
    fn instants_are_written_in_utc() {
        assert_eq!(format_utc(1_733_220_000_000), "2024-12-03T10:00:00Z");
        assert_eq!(format_utc(1_733_220_000_250), "2024-12-03T10:00:00.25Z");
    }
}
