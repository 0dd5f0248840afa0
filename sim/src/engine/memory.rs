//! The run's memory: what it holds now (the estimate its account reserves), the periodic
//! check against the budget, and the request slab's growth, which asks the budget first.

#[allow(unused_imports)]
use super::*;

/// Slots the request slab grows by when the budget has no room for it to double: a few, for
/// the requests of the current turn, after which the run stops.
const SLOTS_OVER_BUDGET: usize = 64;

impl<'s> Simulator<'s> {
    /// Counts one piece of work that may grow what the run holds (an event, a request spawned
    /// or advanced) and, every [`crate::budget::MEMORY_CHECK_EVERY`] of them, reserves the
    /// estimate from the run's account ([`crate::budget`]): true from the first refusal on.
    /// Counting work rather than events catches a single event that spawns a burst of
    /// millions.
    pub(super) fn over_memory_budget(&mut self) -> bool {
        if self.memory.count_work() {
            let estimate = self.memory_estimate();
            self.memory.check(estimate);
        }
        self.memory.exceeded()
    }

    /// A slot with its request, and its own array of holds: room for every layer of the
    /// deepest step, as `Vec` allocates it (at least 4, a power of two), with the
    /// allocator's header of 16 bytes.
    fn bytes_per_slot(&self) -> usize {
        let holds = match self.layers_max {
            0 => 0,
            layers => layers.next_power_of_two().max(4) * std::mem::size_of::<Hold>() + 16,
        };
        std::mem::size_of::<Slot>() + holds
    }

    /// What the run holds now, in bytes: the parts that grow with what is in flight or with
    /// the length of the run (everything else is fixed by the scenario's size).
    fn memory_estimate(&self) -> u64 {
        let slots = (self.slots.capacity() * self.bytes_per_slot()) as u64;
        let queues = (self.free_slots.capacity() * 4 + self.runnable.capacity() * 8) as u64;
        slots
            + queues
            + self.events.capacity() as u64 * EventQueue::ENTRY_BYTES
            + self.redis.memory_bytes()
            + self.databases.memory_bytes()
            + self.after_queries.len() as u64 * 64
            + self.observation.metrics.series_bytes()
            + self
                .loads
                .iter()
                .map(|l| l.workers.len() as u64 * (8 + 16))
                .sum::<u64>()
            + self.callers.memory_bytes()
            + self.actions.memory_bytes()
            + self.policies.memory_bytes()
    }

    /// Makes room in the full request slab: it doubles if the budget allows the doubled
    /// slab, else grows by a few slots. The budget is asked before the slab grows, not after:
    /// doubling a slab of millions of requests is one allocation of gigabytes.
    pub(super) fn grow_slab(&mut self) {
        let doubled = self.slots.capacity().max(SLOTS_OVER_BUDGET);
        let bytes = (doubled * self.bytes_per_slot()) as u64;
        let estimate = self.memory_estimate();
        let more = if self.memory.allows_growth(estimate, bytes) {
            doubled
        } else {
            SLOTS_OVER_BUDGET
        };
        self.slots.reserve_exact(more);
    }
}
