//! What a step action may touch of the engine, and nothing more: the clock, its own state, what
//! its request holds and waits for, the request's keys and values, and the two mechanisms it
//! starts work in (a Redis command, a database query). The engine's `Simulator` is the one
//! implementation; the actions are generic over it, so a call is direct (no dynamic dispatch)
//! and no action can reach the engine's other parts (the layers, the monitors, the loads).

use outagelab_model::time::{SimDuration, SimTime};

use crate::actions::{Actions, RequestHeld, Waiting};
use crate::database::Query;
use crate::kernel::{RequestRef, StepResult, TimerKind};
use crate::redis::Op;
use crate::scenario::{ConnectionId, DatabaseId, FlowId, KeyFamilyId, StepAction};
use crate::versions::{DataKey, HeldValue, ValueFrom, Versions};

/// The engine as a step action sees it. `slot` is always a live request's.
pub(crate) trait Host {
    /// The instant being simulated.
    fn now(&self) -> SimTime;
    /// The actions' own state (caches, rate limiters, throttles, lock clients, streams).
    fn actions(&mut self) -> &mut Actions;
    /// The committed versions of followed data.
    fn versions(&mut self) -> &mut Versions;
    /// The flow of the request in `slot`.
    fn flow_of(&self, slot: u32) -> FlowId;
    /// The action of the step the request in `slot` is on.
    fn step_action(&self, slot: u32) -> StepAction;
    /// The reference the request in `slot` is known by while it waits.
    fn current_ref(&self, slot: u32) -> RequestRef;
    /// What the request in `slot` holds of the actions' state.
    fn held(&mut self, slot: u32) -> &mut RequestHeld;
    /// The Retry-After the request's refusal asks for.
    fn set_retry_after(&mut self, slot: u32, after: SimDuration);
    /// The value the request in `slot` now holds.
    fn set_value(&mut self, slot: u32, value: HeldValue);
    /// The request holds the value it read of its step's key: its version, read from `from`.
    fn hold_value(&mut self, slot: u32, version: u64, from: ValueFrom);
    /// The version of `key` the request in `slot` would write (what it read, or the latest).
    fn value_version(&self, slot: u32, key: DataKey) -> u64;
    /// The key of `family` the request in `slot` draws for its step.
    fn key_of(&self, slot: u32, family: KeyFamilyId) -> u32;
    /// The request in `slot` waits on its action's own wait, which a timer of the action ends.
    fn wait(&mut self, slot: u32, waiting: Waiting);
    /// A timer of `kind` for the request in `slot`, at `at`.
    fn set_timer(&mut self, slot: u32, at: SimTime, kind: TimerKind);
    /// Sends `op` for the request in `slot` on `connection`: the result at once, or `None`
    /// when the request waits for it.
    fn issue_command(
        &mut self,
        slot: u32,
        connection: ConnectionId,
        op: Op,
        replay_writes: bool,
    ) -> Option<StepResult>;
    /// The write the request in `slot` made copies of, taken: it is closed on the server side
    /// (a write of its own, whose next attempt is not a copy of it).
    fn close_origin(&mut self, slot: u32);
    /// Starts `query` on `database` for the request in `slot`, which waits for its answer.
    fn start_query(&mut self, slot: u32, database: DatabaseId, query: Query);
}
