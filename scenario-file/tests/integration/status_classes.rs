//! Outcomes named by their HTTP status class (`retry_on = ["5xx"]`): the class is read from the
//! statuses the run answers with, the `[http]` table's or the defaults.

use std::path::Path;

const FILE: &str = r#"[scenario]
name = "t"

[databases.db]
latency = "10ms"

[flows.f]
steps = [{ db = { name = "db" }, retry = "r" }]

[loads.l]
flow = "f"
arrivals = "even"
rate = 10
count = 5
"#;

#[test]
fn a_status_class_in_retry_on_names_every_outcome_answered_with_it() {
    use outagelab_report::Outcome;
    let retry = "\n[retries.r]\nmax_attempts = 3\nbackoff = \"1s\"\nretry_on = [\"5xx\"]\n";
    let file =
        outagelab_scenario_file::parse(&format!("{FILE}{retry}"), Path::new("t.toml")).unwrap();
    let retry_on = file.variants[0].scenario.retries[0].retry_on;
    let retried: Vec<Outcome> = Outcome::ALL
        .into_iter()
        .filter(|o| retry_on.contains(*o))
        .collect();
    // Every error outcome but a 429 (and a 499: no policy sees a cancelled request), by the
    // default statuses.
    let expected: Vec<Outcome> = Outcome::ALL[1..]
        .iter()
        .copied()
        .filter(|o| *o != Outcome::RateLimited && *o != Outcome::Cancelled)
        .collect();
    assert_eq!(retried, expected);
    // `[http]` moves an outcome between classes.
    let http = "\n[http]\nstatus = { rate_limited = 503, timeout = 408 }\n";
    let file = outagelab_scenario_file::parse(&format!("{FILE}{retry}{http}"), Path::new("t.toml"))
        .unwrap();
    let retry_on = file.variants[0].scenario.retries[0].retry_on;
    assert!(retry_on.contains(Outcome::RateLimited));
    assert!(!retry_on.contains(Outcome::Timeout));
}
