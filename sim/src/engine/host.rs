//! The engine as the step actions see it ([`Host`]): the one implementation, each method a
//! field or helper of the simulator's, so that an action reaches only these.

#[allow(unused_imports)]
use super::*;

use crate::actions::{Host, RequestHeld, Waiting};
use crate::database::Query;
use crate::scenario::StepAction;
use crate::versions::{DataKey, HeldValue, ValueFrom, Versions};

impl Host for Simulator<'_> {
    fn now(&self) -> SimTime {
        self.now
    }

    fn actions(&mut self) -> &mut Actions {
        &mut self.actions
    }

    fn versions(&mut self) -> &mut Versions {
        &mut self.versions
    }

    fn flow_of(&self, slot: u32) -> FlowId {
        self.request(slot).flow
    }

    fn step_action(&self, slot: u32) -> StepAction {
        self.step_of(slot).action
    }

    fn current_ref(&self, slot: u32) -> RequestRef {
        Simulator::current_ref(self, slot)
    }

    fn held(&mut self, slot: u32) -> &mut RequestHeld {
        &mut self.slots[slot as usize].held
    }

    fn set_retry_after(&mut self, slot: u32, after: SimDuration) {
        self.request_mut(slot).retry_after = Some(after);
    }

    fn set_value(&mut self, slot: u32, value: HeldValue) {
        self.request_mut(slot).value = Some(value);
    }

    fn hold_value(&mut self, slot: u32, version: u64, from: ValueFrom) {
        Simulator::hold_value(self, slot, version, from);
    }

    fn value_version(&self, slot: u32, key: DataKey) -> u64 {
        Simulator::value_version(self, slot, key)
    }

    fn key_of(&self, slot: u32, family: KeyFamilyId) -> u32 {
        Simulator::key_of(self, slot, family)
    }

    fn wait(&mut self, slot: u32, waiting: Waiting) {
        self.set_stage(slot, Stage::Waiting(Wait::Action(waiting)));
    }

    fn set_timer(&mut self, slot: u32, at: SimTime, kind: TimerKind) {
        Simulator::set_timer(self, slot, at, kind);
    }

    fn issue_command(
        &mut self,
        slot: u32,
        connection: ConnectionId,
        op: Op,
        replay_writes: bool,
    ) -> Option<StepResult> {
        Simulator::issue_command(self, slot, connection, op, replay_writes)
    }

    fn close_origin(&mut self, slot: u32) {
        if let Some(origin) = self.request_mut(slot).origin.take() {
            self.redis.close_origin(origin);
        }
    }

    fn start_query(&mut self, slot: u32, database: DatabaseId, query: Query) {
        self.set_stage(slot, Stage::Waiting(Wait::Query));
        (self.databases).start(self.now, database, query, &mut self.events);
        self.record_lock_waits();
    }
}
