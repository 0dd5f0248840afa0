//! Which instance issued a token.
//!
//! A policy that hands out a token (a breaker's ticket, a permit, a lease, a throttle slot)
//! takes it back later and changes its state by it. A token handed to another instance of the
//! same type would silently corrupt that one (a permit released into the wrong semaphore frees
//! capacity it never took). So every such instance gets an [`InstanceId`] when it is created,
//! stamps it into each token it issues, and checks it, with a real `assert!`, when the token
//! comes back.
//!
//! The ids come from one process-wide counter. They name instances only for this check: no id
//! reaches a decision, a report or any other output, so a run stays reproducible whatever order
//! instances were created in. Under `cfg(loom)` the counter is still the standard library's
//! atomic, on purpose: it is not part of any model, and loom must not schedule around it.
//!
//! A clone of an instance keeps its id: tokens issued before the clone are valid for both
//! copies, as they describe state that both copies hold.

use std::fmt;

/// The identity of one policy instance; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct InstanceId(u64);

impl InstanceId {
    /// A fresh id, never handed out before in this process (a `u64` counter does not wrap in
    /// practice: at one instance a nanosecond it lasts 584 years).
    pub(crate) fn fresh() -> Self {
        // Deliberately `std`'s atomic even under loom: see the module documentation.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        InstanceId(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }

    /// Panics unless a token stamped with `issuer` is handed back to this instance.
    /// `token` and `kind` name them in the message, e.g. "a permit" and "semaphore".
    #[track_caller]
    pub(crate) fn assert_issued(self, issuer: InstanceId, token: &str, kind: &str) {
        assert!(
            issuer == self,
            "{token} was handed back to a {kind} that did not issue it \
             ({kind} #{} issued it, {kind} #{} got it)",
            issuer,
            self
        );
    }
}

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_ids_are_distinct() {
        let (a, b) = (InstanceId::fresh(), InstanceId::fresh());
        assert_ne!(a, b);
        a.assert_issued(a, "a permit", "semaphore");
    }

    #[test]
    #[should_panic(expected = "a permit was handed back to a semaphore that did not issue it")]
    fn a_foreign_token_panics() {
        let (a, b) = (InstanceId::fresh(), InstanceId::fresh());
        a.assert_issued(b, "a permit", "semaphore");
    }
}
