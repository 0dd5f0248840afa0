//! Prometheus's `query_range` answer: a `matrix` of series, each `[timestamp, "value"]`
//! pairs. Every check runs while serde_json reads the value it is about, so its error carries
//! serde_json's line and column of that place.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

use crate::{ObservedError, ObservedSeries, SERIES_MAX, Sample, SeriesBuilder};

pub(crate) fn parse(text: &str) -> Result<Vec<ObservedSeries>, ObservedError> {
    let response: Response = serde_json::from_str(text).map_err(located)?;
    Ok(response.data.result)
}

/// serde_json's error as `line:column: message` (its message without the position it appends).
fn located(error: serde_json::Error) -> ObservedError {
    let text = error.to_string();
    let message = match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    };
    ObservedError {
        line: error.line().max(1),
        column: error.column().max(1),
        message,
    }
}

#[derive(Deserialize)]
struct Response {
    #[serde(deserialize_with = "success")]
    #[allow(dead_code)] // checked while read
    status: (),
    data: Data,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Data {
    #[serde(deserialize_with = "matrix")]
    #[allow(dead_code)] // checked while read
    result_type: (),
    #[serde(deserialize_with = "series_list")]
    result: Vec<ObservedSeries>,
}

fn success<'de, D: Deserializer<'de>>(deserializer: D) -> Result<(), D::Error> {
    let status = String::deserialize(deserializer)?;
    if status == "success" {
        Ok(())
    } else {
        Err(de::Error::custom(format!(
            "the query's `status` is `{status}`, not `success`: export the answer of a query \
             that succeeded"
        )))
    }
}

fn matrix<'de, D: Deserializer<'de>>(deserializer: D) -> Result<(), D::Error> {
    let kind = String::deserialize(deserializer)?;
    if kind == "matrix" {
        Ok(())
    } else {
        Err(de::Error::custom(format!(
            "the result is a `{kind}`, not a `matrix`: export a range query (query_range, or \
             Grafana's table view of a time series), whose series have a value at every step"
        )))
    }
}

/// One element of `result`, as the file has it.
#[derive(Deserialize)]
struct RawSeries {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    values: Samples,
}

/// A series' `values`, checked sample by sample.
struct Samples(SeriesBuilder);

impl<'de> Deserialize<'de> for Samples {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(SamplesVisitor)
    }
}

struct SamplesVisitor;

impl<'de> Visitor<'de> for SamplesVisitor {
    type Value = Samples;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of [timestamp, \"value\"] samples")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Samples, A::Error> {
        let mut builder = SeriesBuilder::default();
        while let Some((seconds, value)) = seq.next_element::<(f64, String)>()? {
            let unix_ms = (seconds * 1000.0).round();
            if !(unix_ms.is_finite() && unix_ms.abs() < 253_402_207_200_000.0) {
                return Err(de::Error::custom(format!(
                    "the timestamp {seconds} is not Unix seconds"
                )));
            }
            let value = value
                .parse::<f64>()
                .map_err(|_| de::Error::custom(format!("the value `{value}` is not a number")))?;
            builder
                .push(Sample {
                    unix_ms: unix_ms as i64,
                    value,
                })
                .map_err(de::Error::custom)?;
        }
        Ok(Samples(builder))
    }
}

fn series_list<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<ObservedSeries>, D::Error> {
    deserializer.deserialize_seq(SeriesListVisitor)
}

struct SeriesListVisitor;

impl<'de> Visitor<'de> for SeriesListVisitor {
    type Value = Vec<ObservedSeries>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of series, each with `metric` and `values`")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut list = Vec::new();
        while let Some(raw) = seq.next_element::<RawSeries>()? {
            if list.len() == SERIES_MAX {
                return Err(de::Error::custom(format!(
                    "more than the {SERIES_MAX} series a file may have"
                )));
            }
            let mut labels = raw.metric;
            let name = labels.remove("__name__").unwrap_or_default();
            let series = raw.values.0.finish(name, labels);
            list.push(series.map_err(de::Error::custom)?);
        }
        if list.is_empty() {
            return Err(de::Error::custom(
                "the result has no series: the query matched nothing in its range",
            ));
        }
        Ok(list)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Format, ObservedFile};

    fn parse(text: &str) -> Result<ObservedFile, String> {
        ObservedFile::parse(text, Format::PrometheusJson).map_err(|e| e.to_string())
    }

    const GOOD: &str = r#"{"status":"success","data":{"resultType":"matrix","result":[
{"metric":{"__name__":"http_requests","code":"503"},"values":[[1733220000,"0"],[1733220015,"2.5"],[1733220030,"40"]]},
{"metric":{"code":"200"},"values":[[1733220000.5,"100"],[1733220001.5,"99"]]}
]}}"#;

    #[test]
    fn a_matrix_gives_each_series_with_its_labels_and_step() {
        let file = parse(GOOD).unwrap();
        assert_eq!(file.series.len(), 2);
        let errors = &file.series[0];
        assert_eq!(errors.name, "http_requests");
        assert_eq!(errors.display_name(), "http_requests{code=\"503\"}");
        assert_eq!(errors.step_ms, 15_000);
        let values: Vec<f64> = errors.samples.iter().map(|s| s.value).collect();
        assert_eq!(values, [0.0, 2.5, 40.0]);
        assert_eq!(errors.samples[2].unix_ms, 1_733_220_030_000);
        let ok = &file.series[1];
        assert_eq!((ok.name.as_str(), ok.step_ms), ("", 1000));
        assert_eq!(ok.samples[0].unix_ms, 1_733_220_000_500);
    }

    #[test]
    fn a_series_is_found_by_name_and_labels() {
        let file = parse(GOOD).unwrap();
        let code = |c: &str| [("code".to_owned(), c.to_owned())].into_iter().collect();
        let found = file.find(Some("http_requests"), &code("503")).unwrap();
        assert_eq!(found.samples.len(), 3);
        assert_eq!(file.find(None, &code("200")).unwrap().samples.len(), 2);
        let none = file.find(Some("http_requests"), &code("500")).unwrap_err();
        assert!(
            none.contains("it has `http_requests{code=\"503\"}`"),
            "{none}"
        );
        let several = file.find(None, &Default::default()).unwrap_err();
        assert!(several.starts_with("2 series match"), "{several}");
    }

    #[test]
    fn each_bad_file_is_refused_where_the_problem_is() {
        let cases = [
            (
                r#"{"status":"error","errorType":"bad_data","error":"x"}"#,
                "1:17: the query's `status` is `error`",
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#,
                "1:49: the result is a `vector`, not a `matrix`",
            ),
            (
                "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[\n\
                 {\"metric\":{},\"values\":[[10,\"1\"],[20,\"NaN\"]]}]}}",
                "2:43: the value NaN is not a finite number",
            ),
            (
                "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[\n\
                 {\"metric\":{},\"values\":[[10,\"1\"],[20,\"1\"],[20,\"1\"]]}]}}",
                "2:50: the sample at 1970-01-01T00:00:20Z is not after the one before it",
            ),
            (
                "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[\n\
                 {\"metric\":{},\"values\":[[10,\"1\"],[20,\"1\"],[40,\"1\"]]}]}}",
                "2:50: a gap: the sample at 1970-01-01T00:00:40Z is 20 s after the one before, \
                 and the series' step (its first two samples) is 10 s",
            ),
            (
                "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[\n\
                 {\"metric\":{},\"values\":[[10,\"1\"]]}]}}",
                "2:34: the series `` has 1 sample(s)",
            ),
            (
                "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[\n\
                 {\"metric\":{},\"values\":[[10,\"lots\"]]}]}}",
                "2:35: the value `lots` is not a number",
            ),
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
                "1:61: the result has no series",
            ),
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{}}]}}"#,
                "1:73: missing field `values`",
            ),
            (r#"{"status":"success","#, "1:20: EOF while parsing a value"),
        ];
        let wrong: Vec<String> = cases
            .iter()
            .map(|(text, expected)| (parse(text).unwrap_err(), expected))
            .filter(|(error, expected)| !error.starts_with(*expected))
            .map(|(error, expected)| format!("{error}\n  not {expected}"))
            .collect();
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}
