//! Seed 000's fault table, beyond its figures (which the files' expectations hold on seeds
//! 1-20): the breaker heals the replica within a second of its probe once Redis answers, and
//! the maxmemory outage is one that nothing ends, not one the run was too short to see end.

use std::path::Path;

use outagelab_report::VariantReport;

fn run(file: &str, variant: &str, edit: impl Fn(String) -> String) -> VariantReport {
    let text = edit(std::fs::read_to_string(file).unwrap());
    let scenario = outagelab_scenario_file::parse(&text, Path::new(file)).unwrap();
    let variant = scenario
        .variants
        .iter()
        .find(|v| v.name == variant)
        .unwrap_or_else(|| panic!("{file} has a variant {variant}"));
    outagelab_sim::run(&variant.scenario).unwrap()
}

fn at(report: &VariantReport, event: &str, target: &str, after_ms: f64) -> Option<f64> {
    report
        .log
        .iter()
        .find(|e| e.event == event && e.target == target && e.at_ms >= after_ms)
        .map(|e| e.at_ms)
}

#[test]
fn once_redis_answers_the_probe_closes_the_breaker_and_the_503s_stop_within_a_second() {
    for (file, fault) in [
        ("scenarios/seed000-client-pause.toml", "client-pause"),
        ("scenarios/seed000-docker-pause.toml", "docker-pause"),
    ] {
        for seed in [1, 2, 3] {
            let edit = |text: String| text.replace("seed = 1\n", &format!("seed = {seed}\n"));
            let report = run(file, "today", edit);
            let ended = at(&report, "fault_ended", fault, 0.0).expect("the fault ends");
            let closed = at(&report, "breaker_closed", "process", ended).unwrap_or_else(|| {
                panic!("{file} seed {seed}: the breaker closes after the fault")
            });
            let http = report.summary.http.as_ref().unwrap();
            let last_5xx = http.last_5xx_ms.unwrap();
            assert!(
                last_5xx <= closed + 1000.0,
                "{file} seed {seed}: last 5xx at {last_5xx} ms, breaker closed at {closed} ms"
            );
            assert!(
                http.ok_after_last_5xx > 0,
                "{file} seed {seed}: it serves again"
            );
            // The probe that closed it was the first after Redis came back: the breaker was
            // half-open less than one open period (5 s) plus one command timeout (2 s) after
            // the fault ended.
            assert!(
                closed - ended < 7000.0,
                "{file} seed {seed}: {ended} -> {closed}"
            );
        }
    }
}

#[test]
fn with_noeviction_the_maxmemory_outage_outlasts_any_run_and_allkeys_lru_ends_it() {
    let file = "scenarios/seed000-maxmemory.toml";
    // The same run made three times longer: still no 2xx after the last 5xx, and the server
    // still holds more than its limit, because nothing it holds can be freed.
    let longer = |text: String| {
        text.replace("duration = \"34.8s\"", "duration = \"104.4s\"")
            .replace("horizon = \"40s\"", "horizon = \"110s\"")
    };
    let report = run(file, "today", longer);
    let http = report.summary.http.as_ref().unwrap();
    assert!(
        http.last_5xx_ms.unwrap() > 104_000.0,
        "5xx to the end of the load"
    );
    assert_eq!(http.ok_after_last_5xx, 0);
    let redis = &report.summary.servers["redis"];
    assert!(redis.used_memory > redis.maxmemory.unwrap());
    assert_eq!(redis.evicted_keys, 0);
    let limit = at(&report, "memory_limit_reached", "redis", 0.0).unwrap();
    let oom = at(&report, "first_oom", "redis", 0.0).unwrap();
    let opened = at(&report, "breaker_open", "process", 0.0).unwrap();
    assert!(
        limit <= oom && oom <= opened,
        "{limit} {oom} {opened}: full, refused, opened"
    );
    // The same fault with allkeys-lru: the server evicts blobs and no request fails.
    let report = run(file, "allkeys-lru", longer);
    assert_eq!(report.summary.http.as_ref().unwrap().class_5xx, 0);
    assert!(at(&report, "first_eviction", "redis", 0.0).is_some());
}
