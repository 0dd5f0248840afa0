//! A `[services.<name>]` table read through its declaration (`crate::service_keys`): every
//! key through [`TableReader`]; here, what the declaration cannot say: a flow listed twice, a
//! service of no flow, and the expansion into instances (`outagelab_sim::instances`).

use outagelab_sim::Scenario;
use outagelab_sim::scenario::{ServiceSpec, Spread};

use super::Validator;
use super::table::TableReader;
use crate::kinds::Names;
use crate::service_keys::{RawService, SERVICE};

const SPREADS: &[(&str, Spread)] = &[
    ("round_robin", Spread::RoundRobin),
    ("random", Spread::Random),
];

impl Validator<'_> {
    /// `[services.<name>]`: runs its flows on `instances` instances, each with its own copies
    /// of the per-instance resources they use (`outagelab_sim::instances`).
    pub(super) fn service(
        &mut self,
        scenario: &mut Scenario,
        name: &str,
        raw: &RawService,
        names: &Names,
    ) {
        let table_span = self.key_span(&["services", name]);
        let prefix = format!("services.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &SERVICE, table_span);
        let instances = r.count("instances", None);
        let listed = r.list("flows").expect("a service is read with its flows");
        let key = r.key("flows");
        let mut flows = Vec::new();
        for flow in listed.get_ref() {
            if let Some(id) = r.validator.resolve(&names.flows, flow, &key) {
                if flows.contains(&id) {
                    let message = format!("flow `{}` is listed twice", flow.get_ref());
                    r.validator.error(Some(flow.span()), key.clone(), message);
                }
                flows.push(id);
            }
        }
        if listed.get_ref().is_empty() {
            r.refuse("flows", "a service runs at least one flow");
        }
        let spread = r.choice("spread", SPREADS, None);
        let Ok(Some(instances)) = instances else {
            return;
        };
        if flows.len() != listed.get_ref().len() || flows.is_empty() {
            return;
        }
        let Ok(Some(spread)) = spread else { return };
        let spec = ServiceSpec {
            name: name.to_owned(),
            instances,
            spread,
        };
        if let Err(message) = outagelab_sim::instances::expand(scenario, spec, &flows) {
            let span = r.table_span.clone();
            r.validator.error(span, r.prefix.clone(), message);
        }
    }
}
