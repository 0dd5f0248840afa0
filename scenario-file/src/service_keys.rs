//! The keys of a `[services.<name>]` table, declared once ([`KeySpec`]: name, value, default,
//! range, one line of doc). From them come the reader ([`RawService`]), the validation's
//! getters (`validate/service.rs`, through `validate/table.rs`) and the key table of
//! `docs/scenario-format.md` ([`service_table`]; checked by `tests/integration/docs_tables.rs`).

use crate::keys::{
    KeyDefault, KeySpec, MISSING, Range, TableSpec, Value, key_names, markdown_table,
};
use crate::raw::{Declared, RawTable};
use crate::validate::INSTANCES_MAX;

/// A `[services.<name>]` table as written.
pub type RawService = RawTable<Service>;

/// The declaration of `[services.<name>]`.
pub struct Service;

impl Declared for Service {
    const SPEC: &'static TableSpec = &SERVICE;
}

const SERVICE_KEYS: [KeySpec; 3] = [
    KeySpec {
        name: "instances",
        value: Value::Count,
        default: KeyDefault::Required(MISSING),
        range: Range::Between {
            min: 1,
            max: INSTANCES_MAX,
            why: "each instance copies every per-instance resource of its flows",
        },
        doc: "the instances (pods) it runs, each with its own copies of the per-instance \
              resources its flows use",
    },
    KeySpec {
        name: "flows",
        value: Value::Refs("flows"),
        default: KeyDefault::Required(MISSING),
        range: Range::Checked("at least one, each in one service at most"),
        doc: "the flows the service runs",
    },
    KeySpec {
        name: "spread",
        value: Value::Enum(&["round_robin", "random"]),
        default: KeyDefault::Is("\"round_robin\""),
        range: Range::Any,
        doc: "`\"round_robin\"` (instance 0, 1, ..., in the order the load sends) or \
              `\"random\"` (uniform, from a stream of the load's own, so the load's other \
              draws stay as they are)",
    },
];

const SERVICE_NAMES: [&str; SERVICE_KEYS.len()] = key_names(&SERVICE_KEYS);

pub const SERVICE: TableSpec = TableSpec::plain("a service", &SERVICE_KEYS, &SERVICE_NAMES);

/// The key table of `[services.<name>]` in `docs/scenario-format.md`.
pub fn service_table() -> String {
    markdown_table(&SERVICE)
}
