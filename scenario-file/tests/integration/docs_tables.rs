//! The reference tables of `docs/scenario-format.md` that the kinds' declarations generate:
//! each sits between two markers, and differs from what the declarations make only when
//! someone forgot to regenerate it.

use std::sync::Mutex;
use std::{env, fs};

use outagelab_scenario_file::{
    adaptive_limit_table, aimd_table, breaker_failure_rate_table, breaker_presets_table,
    breaker_reference_table, bulkhead_table, cache_step_table, cache_table, call_step_table,
    caller_table, client_loop_table, client_presets_table, collapse_table,
    connection_reference_table, connection_subscribe_table, connection_tracking_table,
    database_table, db_step_table, fault_kinds_table, fault_reference_table, gradient2_table,
    key_family_table, kv_store_table, load_reference_table, load_stage_table, lock_step_table,
    lock_table, preload_table, rate_limit_step_table, rate_limit_table, redis_step_table,
    retry_presets_table, retry_reference_table, semaphore_table, server_table, service_table,
    step_table, throttle_step_table, throttle_table, work_step_table,
};

const DOCS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/scenario-format.md");

/// The docs between `begin` and `end` must be `generated`; with `OUTAGELAB_BLESS=1` they are
/// rewritten to it instead.
fn check_generated(begin: &str, end: &str, generated: &str) {
    // The tests run on threads: one at a time reads and rewrites the file.
    static DOCS_FILE: Mutex<()> = Mutex::new(());
    let _only = DOCS_FILE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let docs = fs::read_to_string(DOCS).expect("docs/scenario-format.md");
    let (before, rest) = docs.split_once(begin).expect("the table's first marker");
    let (table, after) = rest.split_once(end).expect("the table's last marker");
    let generated = format!("\n{generated}");
    if table == generated {
        return;
    }
    if env::var_os("OUTAGELAB_BLESS").is_some_and(|bless| bless == "1") {
        fs::write(DOCS, format!("{before}{begin}{generated}{end}{after}")).expect("written");
        return;
    }
    let first = table
        .lines()
        .zip(generated.lines())
        .find(|(written, made)| written != made);
    panic!(
        "docs/scenario-format.md's table after `{begin}` is not what the declarations make: \
         regenerate it with `OUTAGELAB_BLESS=1 cargo test -p outagelab-scenario-file --test \
         integration docs_tables`\nfirst difference:\n  docs:      {:?}\n  generated: {:?}",
        first.map(|(written, _)| written),
        first.map(|(_, made)| made),
    );
}

#[test]
fn the_fault_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: fault keys (scenario-file/src/fault_kinds.rs) -->",
        "<!-- end generated: fault keys -->",
        &fault_reference_table(),
    );
}

#[test]
fn the_fault_kind_table_is_the_declarations() {
    check_generated(
        "<!-- generated: fault kinds (scenario-file/src/fault_kinds.rs) -->",
        "<!-- end generated: fault kinds -->",
        &fault_kinds_table(),
    );
}

#[test]
fn the_breaker_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: breaker keys (scenario-file/src/breaker_keys.rs) -->",
        "<!-- end generated: breaker keys -->",
        &breaker_reference_table(),
    );
}

#[test]
fn the_failure_rate_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: failure_rate keys (scenario-file/src/breaker_keys.rs) -->",
        "<!-- end generated: failure_rate keys -->",
        &breaker_failure_rate_table(),
    );
}

#[test]
fn the_retry_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: retry keys (scenario-file/src/retry_keys.rs) -->",
        "<!-- end generated: retry keys -->",
        &retry_reference_table(),
    );
}

#[test]
fn the_connection_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: connection keys (scenario-file/src/connection_keys.rs) -->",
        "<!-- end generated: connection keys -->",
        &connection_reference_table(),
    );
}

#[test]
fn the_subscribe_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: subscribe keys (scenario-file/src/connection_keys.rs) -->",
        "<!-- end generated: subscribe keys -->",
        &connection_subscribe_table(),
    );
}

#[test]
fn the_tracking_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: tracking keys (scenario-file/src/connection_keys.rs) -->",
        "<!-- end generated: tracking keys -->",
        &connection_tracking_table(),
    );
}

#[test]
fn the_load_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: load keys (scenario-file/src/load_keys.rs) -->",
        "<!-- end generated: load keys -->",
        &load_reference_table(),
    );
}

#[test]
fn the_stage_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: stage keys (scenario-file/src/load_keys.rs) -->",
        "<!-- end generated: stage keys -->",
        &load_stage_table(),
    );
}

#[test]
fn the_bulkhead_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: bulkhead keys (scenario-file/src/limit_keys.rs) -->",
        "<!-- end generated: bulkhead keys -->",
        &bulkhead_table(),
    );
}

#[test]
fn the_semaphore_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: semaphore keys (scenario-file/src/limit_keys.rs) -->",
        "<!-- end generated: semaphore keys -->",
        &semaphore_table(),
    );
}

#[test]
fn the_adaptive_limit_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: adaptive_limit keys (scenario-file/src/limit_keys.rs) -->",
        "<!-- end generated: adaptive_limit keys -->",
        &adaptive_limit_table(),
    );
}

#[test]
fn the_aimd_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: aimd keys (scenario-file/src/limit_keys.rs) -->",
        "<!-- end generated: aimd keys -->",
        &aimd_table(),
    );
}

#[test]
fn the_gradient2_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: gradient2 keys (scenario-file/src/limit_keys.rs) -->",
        "<!-- end generated: gradient2 keys -->",
        &gradient2_table(),
    );
}

#[test]
fn the_cache_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: cache keys (scenario-file/src/policy_keys.rs) -->",
        "<!-- end generated: cache keys -->",
        &cache_table(),
    );
}

#[test]
fn the_rate_limit_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: rate_limit keys (scenario-file/src/policy_keys.rs) -->",
        "<!-- end generated: rate_limit keys -->",
        &rate_limit_table(),
    );
}

#[test]
fn the_kv_store_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: kv_store keys (scenario-file/src/policy_keys.rs) -->",
        "<!-- end generated: kv_store keys -->",
        &kv_store_table(),
    );
}

#[test]
fn the_throttle_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: throttle keys (scenario-file/src/policy_keys.rs) -->",
        "<!-- end generated: throttle keys -->",
        &throttle_table(),
    );
}

#[test]
fn the_lock_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: lock keys (scenario-file/src/policy_keys.rs) -->",
        "<!-- end generated: lock keys -->",
        &lock_table(),
    );
}

#[test]
fn the_breaker_preset_table_is_the_presets() {
    check_generated(
        "<!-- generated: breaker presets (model/src/presets.rs, scenario-file/src/explain.rs) -->",
        "<!-- end generated: breaker presets -->",
        &breaker_presets_table(),
    );
}

#[test]
fn the_retry_preset_table_is_the_presets() {
    check_generated(
        "<!-- generated: retry presets (model/src/presets.rs, scenario-file/src/explain.rs) -->",
        "<!-- end generated: retry presets -->",
        &retry_presets_table(),
    );
}

#[test]
fn the_client_preset_table_is_the_presets() {
    check_generated(
        "<!-- generated: client presets (model/src/presets.rs, scenario-file/src/explain.rs) -->",
        "<!-- end generated: client presets -->",
        &client_presets_table(),
    );
}

#[test]
fn the_database_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: database keys (scenario-file/src/resource_keys.rs) -->",
        "<!-- end generated: database keys -->",
        &database_table(),
    );
}

#[test]
fn the_collapse_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: collapse keys (scenario-file/src/resource_keys.rs) -->",
        "<!-- end generated: collapse keys -->",
        &collapse_table(),
    );
}

#[test]
fn the_key_family_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: key family keys (scenario-file/src/resource_keys.rs) -->",
        "<!-- end generated: key family keys -->",
        &key_family_table(),
    );
}

#[test]
fn the_server_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: server keys (scenario-file/src/resource_keys.rs) -->",
        "<!-- end generated: server keys -->",
        &server_table(),
    );
}

#[test]
fn the_preload_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: preload keys (scenario-file/src/resource_keys.rs) -->",
        "<!-- end generated: preload keys -->",
        &preload_table(),
    );
}

#[test]
fn the_service_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: service keys (scenario-file/src/service_keys.rs) -->",
        "<!-- end generated: service keys -->",
        &service_table(),
    );
}

#[test]
fn the_caller_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: caller keys (scenario-file/src/load_keys.rs) -->",
        "<!-- end generated: caller keys -->",
        &caller_table(),
    );
}

#[test]
fn the_client_loop_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: client loop keys (scenario-file/src/connection_keys.rs) -->",
        "<!-- end generated: client loop keys -->",
        &client_loop_table(),
    );
}

#[test]
fn the_step_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: step keys (scenario-file/src/step_keys.rs) -->",
        "<!-- end generated: step keys -->",
        &step_table(),
    );
}

#[test]
fn the_redis_step_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: redis step keys (scenario-file/src/step_keys.rs) -->",
        "<!-- end generated: redis step keys -->",
        &redis_step_table(),
    );
}

#[test]
fn the_db_step_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: db step keys (scenario-file/src/step_keys.rs) -->",
        "<!-- end generated: db step keys -->",
        &db_step_table(),
    );
}

#[test]
fn the_work_step_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: work step keys (scenario-file/src/step_keys.rs) -->",
        "<!-- end generated: work step keys -->",
        &work_step_table(),
    );
}

#[test]
fn the_call_step_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: call step keys (scenario-file/src/step_keys.rs) -->",
        "<!-- end generated: call step keys -->",
        &call_step_table(),
    );
}

#[test]
fn the_cache_step_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: cache step keys (scenario-file/src/step_keys.rs) -->",
        "<!-- end generated: cache step keys -->",
        &cache_step_table(),
    );
}

#[test]
fn the_throttle_step_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: throttle step keys (scenario-file/src/step_keys.rs) -->",
        "<!-- end generated: throttle step keys -->",
        &throttle_step_table(),
    );
}

#[test]
fn the_rate_limit_step_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: rate_limit step keys (scenario-file/src/step_keys.rs) -->",
        "<!-- end generated: rate_limit step keys -->",
        &rate_limit_step_table(),
    );
}

#[test]
fn the_lock_step_key_table_is_the_declarations() {
    check_generated(
        "<!-- generated: lock step keys (scenario-file/src/step_keys.rs) -->",
        "<!-- end generated: lock step keys -->",
        &lock_step_table(),
    );
}
