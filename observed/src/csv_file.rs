//! A CSV of `timestamp,series,value` rows: each row one sample of the series it names.

use std::collections::BTreeMap;

use crate::timestamp::parse_timestamp;
use crate::{ObservedError, ObservedSeries, SERIES_MAX, Sample, SeriesBuilder};

pub(crate) fn parse(text: &str) -> Result<Vec<ObservedSeries>, ObservedError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    // Series in the order the file first names them; `index` finds one by name.
    let mut series: Vec<(String, SeriesBuilder, usize)> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let mut first_row = true;
    let mut last_line = 1;
    for record in reader.records() {
        let record = record.map_err(|error| {
            let line = error.position().map_or(last_line, |p| p.line() as usize);
            at(line, 1, format!("not CSV: {error}"))
        })?;
        let line = record.position().map_or(last_line, |p| p.line() as usize);
        last_line = line;
        let header = std::mem::replace(&mut first_row, false);
        // The column where field `i` starts, each field before it followed by one comma.
        let column = |i: usize| record.range(i).map_or(1, |range| range.start + i + 1);
        if record.len() != 3 {
            return Err(at(
                line,
                1,
                format!(
                    "expected three fields, `timestamp,series,value`, not {}",
                    record.len()
                ),
            ));
        }
        let unix_ms = match parse_timestamp(&record[0]) {
            Ok(unix_ms) => unix_ms,
            // A header names its columns: neither the timestamp nor the value is a number.
            Err(_) if header && record[2].parse::<f64>().is_err() => continue,
            Err(why) => return Err(at(line, column(0), format!("the timestamp {why}"))),
        };
        let value = record[2].parse::<f64>().map_err(|_| {
            let message = format!("the value `{}` is not a number", &record[2]);
            at(line, column(2), message)
        })?;
        let name = record[1].to_owned();
        let slot = match index.get(&name) {
            Some(&slot) => slot,
            None => {
                if series.len() == SERIES_MAX {
                    let message = format!("more than the {SERIES_MAX} series a file may have");
                    return Err(at(line, column(1), message));
                }
                index.insert(name.clone(), series.len());
                series.push((name, SeriesBuilder::default(), line));
                series.len() - 1
            }
        };
        let column = if value.is_finite() { 1 } else { column(2) };
        series[slot]
            .1
            .push(Sample { unix_ms, value })
            .map_err(|message| at(line, column, message))?;
    }
    if series.is_empty() {
        return Err(at(last_line, 1, "has no rows of `timestamp,series,value`"));
    }
    series
        .into_iter()
        .map(|(name, builder, first_line)| {
            builder
                .finish(name, BTreeMap::new())
                .map_err(|message| at(first_line, 1, message))
        })
        .collect()
}

fn at(line: usize, column: usize, message: impl Into<String>) -> ObservedError {
    ObservedError {
        line,
        column,
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use crate::{Format, ObservedFile};

    fn parse(text: &str) -> Result<ObservedFile, String> {
        ObservedFile::parse(text, Format::Csv).map_err(|e| e.to_string())
    }

    #[test]
    fn rows_of_interleaved_series_give_each_series_in_file_order() {
        let text = "# exported from Grafana\n\
                    timestamp,series,value\n\
                    2024-12-03T10:00:00Z,errors,0\n\
                    2024-12-03T10:00:00Z,\"latency{quantile=\"\"0.99\"\"}\",12.5\n\
                    \n\
                    1733220010,errors,4\n\
                    1733220010,\"latency{quantile=\"\"0.99\"\"}\",250\n";
        let file = parse(text).unwrap();
        let names: Vec<&str> = file.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["errors", "latency{quantile=\"0.99\"}"]);
        let latency = &file.series[1];
        assert_eq!(latency.step_ms, 10_000);
        assert_eq!(latency.samples[0].unix_ms, 1_733_220_000_000);
        assert_eq!(latency.samples[1].value, 250.0);
    }

    #[test]
    fn each_bad_row_is_refused_at_its_line_and_column() {
        let cases = [
            ("1,a,1\n2,a\n", "2:1: expected three fields"),
            ("1,a,1\nnoon,a,2\n", "2:1: the timestamp `noon` is neither"),
            ("1,a,1\n2,a,many\n", "2:5: the value `many` is not a number"),
            (
                "1,a,1\n2,a,NaN\n",
                "2:5: the value NaN is not a finite number",
            ),
            (
                "1,a,1\n2,a,inf\n",
                "2:5: the value inf is not a finite number",
            ),
            (
                "1,a,1\n2,a,1\n2,a,1\n",
                "3:1: the sample at 1970-01-01T00:00:02Z is not after",
            ),
            (
                "1,a,1\n2,a,1\n4,a,1\n",
                "3:1: a gap: the sample at 1970-01-01T00:00:04Z is 2 s",
            ),
            (
                "1,a,1\n2,a,1\n1,b,1\n",
                "3:1: the series `b` has 1 sample(s)",
            ),
            ("# nothing\n", "1:1: has no rows"),
        ];
        for (text, expected) in cases {
            let error = parse(text).unwrap_err();
            assert!(
                error.starts_with(expected),
                "{text:?}\n{error}\nnot {expected}"
            );
        }
    }
}
