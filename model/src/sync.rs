//! The one place that chooses between the standard library's synchronisation primitives and
//! loom's. Everything concurrent in this crate imports from here, never from `std::sync`
//! directly, so that `RUSTFLAGS="--cfg loom"` swaps in loom's checked types everywhere at once.

#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) use loom::sync::{
    Arc, Condvar, Mutex, MutexGuard,
    atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering},
};
#[cfg(not(loom))]
#[allow(unused_imports)]
pub(crate) use std::sync::{
    Arc, Condvar, Mutex, MutexGuard,
    atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering},
};

/// Locks `mutex`, ignoring poisoning: the state machines behind these mutexes keep their
/// invariants between calls, so a panic in another holder cannot leave them half-updated.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The preemption bound of every loom model in this crate, pinned here so that the suite takes
/// seconds whatever the environment says: `LOOM_MAX_PREEMPTIONS` does not change it. Three
/// preemptions find the races these models are about (each needs one or two); a deeper search
/// means raising this number here, in a commit, not in a shell.
#[cfg(all(test, loom))]
pub(crate) const LOOM_PREEMPTION_BOUND: usize = 3;

/// Checks `model` under loom with the preemption bound pinned to [`LOOM_PREEMPTION_BOUND`].
/// The other limits (`LOOM_MAX_PERMUTATIONS`, `LOOM_MAX_DURATION`, ...) still come from the
/// environment, as with `loom::model`.
#[cfg(all(test, loom))]
pub(crate) fn loom_model<F>(model: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(LOOM_PREEMPTION_BOUND);
    builder.check(model);
}

/// Explores every interleaving of `model` within `preemption_bound` (at most
/// [`LOOM_PREEMPTION_BOUND`]) and returns `(executions, executions for which model returned
/// true)`. For counterexample tests: the caller asserts that loom found the bad interleaving
/// (and, usually, that not every execution is bad), so the test fails if loom ever stops
/// finding it, and no other panic can pass for the counterexample. Exploration is exhaustive
/// within the bound: the permutation and duration limits of the environment are switched off,
/// since a truncated search could miss the counterexample.
///
/// The tallies are `std` atomics outside the model on purpose: they record what loom explored
/// and are not part of what it checks.
#[cfg(all(test, loom))]
pub(crate) fn loom_count_executions<F>(preemption_bound: usize, model: F) -> (u64, u64)
where
    F: Fn() -> bool + Sync + Send + 'static,
{
    use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering as StdOrdering};
    assert!(
        preemption_bound <= LOOM_PREEMPTION_BOUND,
        "preemption bound {preemption_bound} is above the suite's {LOOM_PREEMPTION_BOUND}"
    );
    let tallies = std::sync::Arc::new((StdAtomicU64::new(0), StdAtomicU64::new(0)));
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemption_bound);
    builder.max_permutations = None;
    builder.max_duration = None;
    let recorded = tallies.clone();
    builder.check(move || {
        let found = model();
        recorded.0.fetch_add(1, StdOrdering::Relaxed);
        if found {
            recorded.1.fetch_add(1, StdOrdering::Relaxed);
        }
    });
    (
        tallies.0.load(StdOrdering::Relaxed),
        tallies.1.load(StdOrdering::Relaxed),
    )
}

/// The loom models run with debug assertions on (`.ci/run` builds them with the `loom`
/// profile): the models' `debug_assert!`s are checked in every interleaving loom explores.
/// Under `--release` they were compiled out, and this test fails there (nothing panics).
#[cfg(all(test, loom))]
mod loom_profile {
    #[test]
    #[should_panic(expected = "debug assertions are checked under loom")]
    fn loom_checks_debug_assertions() {
        super::loom_model(|| debug_assert!(false, "debug assertions are checked under loom"));
    }
}
