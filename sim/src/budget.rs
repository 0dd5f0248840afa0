//! The process's memory budget, which every run in the process draws on.
//!
//! `[run] memory_max` bounds the whole process: every variant, seed and thread. A
//! [`MemoryBudget`] is made once per command; each run charges it through its own
//! [`Account`], whose reservation follows the run's estimate of what it holds (checked every
//! [`MEMORY_CHECK_EVERY`] pieces of work, and before the request slab grows); results a
//! command keeps after their run (a variant's report, series included) stay charged with
//! [`MemoryBudget::hold`]. The budget is an atomic count of bytes reserved, so runs on several
//! threads share it.
//!
//! Determinism: a run is stopped (`memory_budget`) when its own estimate passes its own
//! `memory_max`, or when the budget refuses its reservation. Alone in the process, or after
//! runs that ran before it in a fixed order (`run`'s variants), both depend on nothing but the
//! runs. On several threads the second may depend on what the other runs held at that moment:
//! the account then says so ([`Account::crowded_out`]) and the caller runs it again once
//! nothing else runs (a study does), so every result it keeps is the one the run has alone.
//!
//! The estimate counts what grows (requests in flight, queued commands and events, running
//! queries, the series); the process itself (code, stacks, the allocator's books, everything
//! of fixed size) gets [`MemoryBudget::for_process`]'s allowance, off the top.

use std::sync::atomic::{AtomicU64, Ordering};

/// Every this much work (events, requests spawned or advanced), a run's memory estimate is
/// checked against its budget: often enough that a run cannot outgrow it by much in between
/// (each adds a few hundred bytes at most), rarely enough to cost nothing.
pub(crate) const MEMORY_CHECK_EVERY: u64 = 4096;

/// What the process keeps for itself before runs are charged, at most: its code, stacks and
/// the allocator's own books, which no run's estimate counts. An eighth of the budget when
/// that is less (a tiny budget is a test's).
pub const PROCESS_ALLOWANCE_BYTES: u64 = 64 << 20;

/// The budget of runs held to their own `memory_max` only (the library's `run`, the tests):
/// one for every such run of the process, which never refuses.
pub(crate) static UNBOUNDED: MemoryBudget = MemoryBudget::unbounded();

/// Bytes the runs of a process may reserve, and how many they hold now.
#[derive(Debug)]
pub struct MemoryBudget {
    bytes_max: u64,
    reserved: AtomicU64,
}

impl MemoryBudget {
    /// A budget of exactly `bytes_max` for runs to share.
    pub const fn new(bytes_max: u64) -> MemoryBudget {
        MemoryBudget {
            bytes_max,
            reserved: AtomicU64::new(0),
        }
    }

    /// No bound: each run is held to its own `memory_max` only (the library's `run`, the
    /// tests).
    pub const fn unbounded() -> MemoryBudget {
        MemoryBudget::new(u64::MAX)
    }

    /// The budget of a process whose `[run] memory_max` is `memory_max` bytes: that less
    /// what the process keeps for itself ([`PROCESS_ALLOWANCE_BYTES`], or an eighth when
    /// less).
    pub fn for_process(memory_max: u64) -> MemoryBudget {
        let allowance = PROCESS_ALLOWANCE_BYTES.min(memory_max / 8);
        MemoryBudget::new(memory_max - allowance)
    }

    pub fn bytes_max(&self) -> u64 {
        self.bytes_max
    }

    /// Bytes reserved now, by every account and every hold.
    pub fn reserved_bytes(&self) -> u64 {
        self.reserved.load(Ordering::Acquire)
    }

    /// Keeps `bytes` charged until the process ends: a result kept after its run (a
    /// variant's report). Charged even past the budget, since it is already allocated: the
    /// next run is then refused at its first check.
    pub fn hold(&self, bytes: u64) {
        self.reserved.fetch_add(bytes, Ordering::AcqRel);
    }

    /// Reserves `bytes` more if the total stays within the budget.
    fn try_reserve(&self, bytes: u64) -> bool {
        self.reserved
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |reserved| {
                reserved
                    .checked_add(bytes)
                    .filter(|&total| total <= self.bytes_max)
            })
            .is_ok()
    }

    fn release(&self, bytes: u64) {
        let before = self.reserved.fetch_sub(bytes, Ordering::AcqRel);
        debug_assert!(before >= bytes, "an account releases only what it reserved");
    }
}

/// One run's share of a [`MemoryBudget`]: what it has reserved, given back when it is
/// dropped.
#[derive(Debug)]
pub struct Account<'b> {
    budget: &'b MemoryBudget,
    /// The run's own bound (`memory_max` of its scenario).
    own_bytes_max: u64,
    reserved: u64,
    /// The budget refused a reservation the run would have had alone.
    crowded_out: bool,
}

impl<'b> Account<'b> {
    pub fn new(budget: &'b MemoryBudget, own_bytes_max: u64) -> Account<'b> {
        Account {
            budget,
            own_bytes_max,
            reserved: 0,
            crowded_out: false,
        }
    }

    /// Sets the reservation to `bytes`, what the run holds (or is about to): true if that is
    /// within the run's own bound and the budget has room for it. On a refusal the
    /// reservation stays as it was.
    pub fn reserve(&mut self, bytes: u64) -> bool {
        if bytes > self.own_bytes_max {
            return false;
        }
        if bytes <= self.reserved {
            self.budget.release(self.reserved - bytes);
            self.reserved = bytes;
            return true;
        }
        if self.budget.try_reserve(bytes - self.reserved) {
            self.reserved = bytes;
            return true;
        }
        // Alone (nothing else reserved or held), would it have fitted?
        if bytes <= self.budget.bytes_max {
            self.crowded_out = true;
        }
        false
    }

    /// Whether a refusal came from what other runs or results held rather than from this
    /// run's own size: alone, the run would have gone on.
    pub fn crowded_out(&self) -> bool {
        self.crowded_out
    }

    pub fn reserved_bytes(&self) -> u64 {
        self.reserved
    }
}

impl Drop for Account<'_> {
    fn drop(&mut self) {
        self.budget.release(self.reserved);
    }
}

/// A run's memory check: its account, the work done since the estimate was last checked,
/// and whether it was refused (from then on the run stops at its next turn).
#[derive(Debug)]
pub(crate) struct MemoryCheck<'b> {
    account: Account<'b>,
    work_since_check: u64,
    exceeded: bool,
}

impl<'b> MemoryCheck<'b> {
    pub(crate) fn new(account: Account<'b>) -> MemoryCheck<'b> {
        MemoryCheck {
            account,
            work_since_check: 0,
            exceeded: false,
        }
    }

    /// Counts one piece of work: true when the estimate is due for a check (every
    /// [`MEMORY_CHECK_EVERY`] pieces, and never once refused).
    pub(crate) fn count_work(&mut self) -> bool {
        if self.exceeded {
            return false;
        }
        self.work_since_check += 1;
        if self.work_since_check < MEMORY_CHECK_EVERY {
            return false;
        }
        self.work_since_check = 0;
        true
    }

    /// Reserves `estimate`, what the run holds now; a refusal stops the run.
    pub(crate) fn check(&mut self, estimate: u64) {
        self.exceeded |= !self.account.reserve(estimate);
    }

    /// Whether the run was refused: it stops at its next turn.
    pub(crate) fn exceeded(&self) -> bool {
        self.exceeded
    }

    /// Before an allocation of `bytes` more than `estimate` (which counts what is held now):
    /// whether it fits. A refusal stops the run at its next turn, as a check's does.
    pub(crate) fn allows_growth(&mut self, estimate: u64, bytes: u64) -> bool {
        if self.exceeded || !self.account.reserve(estimate.saturating_add(bytes)) {
            self.exceeded = true;
            return false;
        }
        true
    }

    pub(crate) fn account(&self) -> &Account<'b> {
        &self.account
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn two_runs_share_one_budget() {
        // Two variants of 600 MiB each fit a 1 GiB budget one at a time, not together: the
        // second is refused while the first holds its share, and says it was crowded out.
        let budget = MemoryBudget::new(1024 * MIB);
        let mut first = Account::new(&budget, 1024 * MIB);
        let mut second = Account::new(&budget, 1024 * MIB);
        assert!(first.reserve(600 * MIB));
        assert!(!second.reserve(600 * MIB));
        assert!(second.crowded_out(), "alone it would have fitted");
        assert_eq!(budget.reserved_bytes(), 600 * MIB);
        // Shrinking gives back; dropping gives back the rest.
        assert!(first.reserve(100 * MIB));
        assert!(second.reserve(600 * MIB));
        assert_eq!(budget.reserved_bytes(), 700 * MIB);
        drop(first);
        drop(second);
        assert_eq!(budget.reserved_bytes(), 0);
    }

    #[test]
    fn a_run_over_its_own_bound_or_the_whole_budget_was_not_crowded_out() {
        let budget = MemoryBudget::new(1024 * MIB);
        let mut small = Account::new(&budget, 10 * MIB);
        assert!(!small.reserve(11 * MIB));
        assert!(!small.crowded_out());
        let mut big = Account::new(&budget, 4096 * MIB);
        assert!(!big.reserve(2048 * MIB));
        assert!(!big.crowded_out(), "alone it is refused too");
        assert_eq!(budget.reserved_bytes(), 0);
    }

    #[test]
    fn held_results_count_against_the_runs_after_them() {
        // `run` keeps each variant's report: what 19 reports hold is not there for the 20th.
        let budget = MemoryBudget::new(100 * MIB);
        budget.hold(95 * MIB);
        let mut next = Account::new(&budget, 100 * MIB);
        assert!(next.reserve(5 * MIB));
        assert!(!next.reserve(6 * MIB));
        drop(next);
        assert_eq!(budget.reserved_bytes(), 95 * MIB);
    }

    #[test]
    fn the_process_keeps_an_allowance_off_the_top() {
        assert_eq!(
            MemoryBudget::for_process(4 << 30).bytes_max(),
            (4 << 30) - (64 << 20)
        );
        assert_eq!(MemoryBudget::for_process(8 * MIB).bytes_max(), 7 * MIB);
    }

    #[test]
    fn accounts_on_many_threads_never_reserve_more_than_the_budget_together() {
        let budget = MemoryBudget::new(1000);
        std::thread::scope(|scope| {
            for thread in 0..4u64 {
                let budget = &budget;
                scope.spawn(move || {
                    let mut account = Account::new(budget, 1000);
                    for step in 0..10_000u64 {
                        let _ = account.reserve((step * 7 + thread * 13) % 400);
                        assert!(budget.reserved_bytes() <= 1000);
                    }
                });
            }
        });
        assert_eq!(budget.reserved_bytes(), 0);
    }
}
