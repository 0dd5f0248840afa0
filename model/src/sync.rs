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
