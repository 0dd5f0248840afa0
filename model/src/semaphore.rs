//! Backpressure semaphore: a cap on work in flight, by count and by bytes, with no queue.
//!
//! Seed 000, fix 2: blob-cache writes were fire-and-forget with no in-flight cap, so 260
//! concurrent 2 MiB SETs queued head-of-line in front of the lock commands on the same
//! connection. The fix bounds the writes in flight by count and by bytes. The blob cache is
//! fail-open, so a write over the cap is dropped rather than queued: [`Semaphore::try_acquire`]
//! either grants a [`Permit`] at once or says which cap was hit, and never makes anyone wait.
//!
//! Call order: [`Semaphore::try_acquire`] with the size of the work; on `Ok(permit)` do the
//! work, then hand the permit to [`Semaphore::release`] exactly once; on `Err(rejection)` drop
//! the work (there is no queue to wait in).
//!
//! Invariants:
//! - `in_flight <= max_in_flight` and `bytes_in_flight <= max_bytes` at every moment;
//! - `in_flight` and `bytes_in_flight` are the number of permits out and the sum of their
//!   bytes;
//! - a [`Permit`] cannot be copied or cloned and `release` takes it by value, so the type
//!   system returns each permit at most once; dropping one without releasing it leaks its
//!   capacity, which is what the `#[must_use]` warns about;
//! - a permit belongs to the semaphore that granted it: releasing it into another one panics
//!   (a real `assert!`) before anything changes, in every form;
//! - a request is checked against the caps in a fixed order, and the first that fails names
//!   the rejection: [`Rejection::LargerThanByteCap`], then [`Rejection::InFlightCap`], then
//!   [`Rejection::ByteCap`].
//!
//! Three forms, one decision function ([`decide`]):
//! - [`Semaphore`], the sans-IO state machine the simulator drives;
//! - [`SharedSemaphore`], the same `Semaphore` behind a [`crate::sync::Mutex`];
//! - [`AtomicSemaphore`], a lock-free form: a compare-and-swap loop on one `AtomicU64` that
//!   packs the count and the bytes, checked against `Semaphore` by a property test and by loom.
//!
//! No time: nothing here depends on `now`, so no method takes it.

use crate::config::ConfigError;
use crate::instance::InstanceId;
use crate::sync::{AtomicU32, AtomicU64, Mutex, Ordering, lock};

/// A validated semaphore configuration: at least one cap, and every cap set is at least 1.
///
/// A cap left out is no cap at all, up to the width of the counter that holds it:
/// `u32::MAX` permits, `u64::MAX` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SemaphoreConfig {
    max_in_flight: Option<u32>,
    max_bytes: Option<u64>,
}

impl SemaphoreConfig {
    /// At most `max_in_flight` permits out and at most `max_bytes` bytes held by them.
    pub fn new(max_in_flight: Option<u32>, max_bytes: Option<u64>) -> Result<Self, ConfigError> {
        if max_in_flight == Some(0) {
            return Err(ConfigError::new(
                "max_in_flight",
                "must be at least 1 (a cap of zero drops every write; leave it out for no cap)",
            ));
        }
        if max_bytes == Some(0) {
            return Err(ConfigError::new(
                "max_bytes",
                "must be at least 1 (a cap of zero bytes drops every write; leave it out for no cap)",
            ));
        }
        if max_in_flight.is_none() && max_bytes.is_none() {
            return Err(ConfigError::new(
                "max_in_flight",
                "or max_bytes must be set (a semaphore with neither cap bounds nothing)",
            ));
        }
        Ok(SemaphoreConfig {
            max_in_flight,
            max_bytes,
        })
    }

    pub fn max_in_flight(&self) -> Option<u32> {
        self.max_in_flight
    }

    pub fn max_bytes(&self) -> Option<u64> {
        self.max_bytes
    }

    fn in_flight_limit(&self) -> u32 {
        self.max_in_flight.unwrap_or(u32::MAX)
    }

    fn bytes_limit(&self) -> u64 {
        self.max_bytes.unwrap_or(u64::MAX)
    }
}

/// The right to have one piece of work of [`Permit::bytes`] bytes in flight. Give it back to
/// the semaphore that granted it, with `release`, exactly once.
///
/// Not `Clone`, not `Copy`: `release` consumes it, so it cannot be released twice.
///
/// ```compile_fail,E0382
/// use outagelab_model::semaphore::{Semaphore, SemaphoreConfig};
/// let mut semaphore = Semaphore::new(SemaphoreConfig::new(Some(1), None).unwrap());
/// let permit = semaphore.try_acquire(10).unwrap();
/// semaphore.release(permit);
/// semaphore.release(permit); // the permit was moved by the first release
/// ```
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a permit that is not released leaks semaphore capacity"]
pub struct Permit {
    /// The semaphore that granted it.
    owner: InstanceId,
    bytes: u64,
}

impl Permit {
    /// The bytes this permit holds against the byte cap.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// Why a request got no permit. The caller drops the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rejection {
    /// `max_in_flight` permits are out; a release makes room.
    InFlightCap,
    /// The request's bytes would take the bytes in flight past `max_bytes`; a release may make
    /// room.
    ByteCap,
    /// The request alone is larger than `max_bytes`: no release will ever make room for it.
    LargerThanByteCap,
}

/// Occupancy and event counts of a semaphore.
///
/// Event counts are `u64`: at one event per nanosecond they last 584 years.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SemaphoreCounters {
    /// Permits out now.
    pub in_flight: u32,
    /// Bytes held by the permits out now.
    pub bytes_in_flight: u64,
    /// The most permits ever out at once.
    pub in_flight_peak: u32,
    /// The most bytes ever in flight at once (not necessarily when `in_flight_peak` was).
    pub bytes_in_flight_peak: u64,
    pub acquired: u64,
    pub released: u64,
    pub rejected_in_flight_cap: u64,
    pub rejected_byte_cap: u64,
    pub rejected_larger_than_byte_cap: u64,
}

impl SemaphoreCounters {
    /// Requests rejected for `reason`.
    pub fn rejected(&self, reason: Rejection) -> u64 {
        match reason {
            Rejection::InFlightCap => self.rejected_in_flight_cap,
            Rejection::ByteCap => self.rejected_byte_cap,
            Rejection::LargerThanByteCap => self.rejected_larger_than_byte_cap,
        }
    }

    /// Requests rejected for any reason.
    pub fn rejected_total(&self) -> u64 {
        self.rejected_in_flight_cap + self.rejected_byte_cap + self.rejected_larger_than_byte_cap
    }
}

/// The one admission rule every form applies: given the occupancy, either the occupancy after
/// granting `bytes`, or the first cap that refuses it (in the order the module documents).
///
/// The result never exceeds either cap, and the count never overflows (it is below its cap
/// before the increment) nor do the bytes (the sum is checked).
pub fn decide(
    config: &SemaphoreConfig,
    in_flight: u32,
    bytes_in_flight: u64,
    bytes: u64,
) -> Result<(u32, u64), Rejection> {
    let bytes_limit = config.bytes_limit();
    if bytes > bytes_limit {
        return Err(Rejection::LargerThanByteCap);
    }
    if in_flight >= config.in_flight_limit() {
        return Err(Rejection::InFlightCap);
    }
    match bytes_in_flight.checked_add(bytes) {
        Some(total) if total <= bytes_limit => Ok((in_flight + 1, total)),
        _ => Err(Rejection::ByteCap),
    }
}

/// A backpressure semaphore by count and by bytes, with no queue. See the module
/// documentation for the call order and the invariants.
#[derive(Clone, Debug)]
pub struct Semaphore {
    /// Stamped into every permit, checked when one comes back.
    id: InstanceId,
    config: SemaphoreConfig,
    counters: SemaphoreCounters,
}

impl Semaphore {
    pub fn new(config: SemaphoreConfig) -> Self {
        Semaphore {
            id: InstanceId::fresh(),
            config,
            counters: SemaphoreCounters::default(),
        }
    }

    pub fn config(&self) -> &SemaphoreConfig {
        &self.config
    }

    /// Permits out now.
    pub fn in_flight(&self) -> u32 {
        self.counters.in_flight
    }

    /// Bytes held by the permits out now.
    pub fn bytes_in_flight(&self) -> u64 {
        self.counters.bytes_in_flight
    }

    pub fn counters(&self) -> SemaphoreCounters {
        self.counters
    }

    /// Grants a permit for `bytes` if both caps allow it, at once; otherwise says which cap
    /// refused it. Never queues.
    pub fn try_acquire(&mut self, bytes: u64) -> Result<Permit, Rejection> {
        let counters = &mut self.counters;
        match decide(
            &self.config,
            counters.in_flight,
            counters.bytes_in_flight,
            bytes,
        ) {
            Ok((in_flight, bytes_in_flight)) => {
                counters.in_flight = in_flight;
                counters.bytes_in_flight = bytes_in_flight;
                counters.in_flight_peak = counters.in_flight_peak.max(in_flight);
                counters.bytes_in_flight_peak = counters.bytes_in_flight_peak.max(bytes_in_flight);
                counters.acquired += 1;
                Ok(Permit {
                    owner: self.id,
                    bytes,
                })
            }
            Err(rejection) => {
                match rejection {
                    Rejection::InFlightCap => counters.rejected_in_flight_cap += 1,
                    Rejection::ByteCap => counters.rejected_byte_cap += 1,
                    Rejection::LargerThanByteCap => counters.rejected_larger_than_byte_cap += 1,
                }
                Err(rejection)
            }
        }
    }

    /// Returns a permit this semaphore granted.
    ///
    /// Panics if another semaphore granted the permit, or if the occupancy could not hold it
    /// (the paired check of what `try_acquire` wrote); both are checked before anything
    /// changes.
    pub fn release(&mut self, permit: Permit) {
        self.id.assert_issued(permit.owner, "a permit", "semaphore");
        let counters = &mut self.counters;
        assert!(
            counters.in_flight >= 1 && counters.bytes_in_flight >= permit.bytes,
            "released a permit of {} bytes with {} permits and {} bytes out: \
             it was not granted by this semaphore",
            permit.bytes,
            counters.in_flight,
            counters.bytes_in_flight
        );
        counters.in_flight -= 1;
        counters.bytes_in_flight -= permit.bytes;
        counters.released += 1;
    }
}

/// A [`Semaphore`] shared by threads: the same state machine behind a mutex.
///
/// Invariant (checked by a loom smoke model, which can only reorder whole calls since each
/// runs under the one lock): permits and bytes in flight never exceed their caps, and once
/// every thread has released its permit, none are out.
pub struct SharedSemaphore {
    semaphore: Mutex<Semaphore>,
}

impl SharedSemaphore {
    pub fn new(config: SemaphoreConfig) -> Self {
        SharedSemaphore {
            semaphore: Mutex::new(Semaphore::new(config)),
        }
    }

    pub fn try_acquire(&self, bytes: u64) -> Result<Permit, Rejection> {
        lock(&self.semaphore).try_acquire(bytes)
    }

    pub fn release(&self, permit: Permit) {
        lock(&self.semaphore).release(permit)
    }

    /// All counters, as one consistent reading.
    pub fn counters(&self) -> SemaphoreCounters {
        lock(&self.semaphore).counters()
    }
}

/// Bits of the packed word that hold the bytes in flight; the count sits above them.
const PACKED_BYTES_BITS: u32 = 44;
/// Bits of the packed word that hold the permits in flight.
const PACKED_IN_FLIGHT_BITS: u32 = u64::BITS - PACKED_BYTES_BITS;
/// Largest `max_bytes` an [`AtomicSemaphore`] accepts: 2^44 - 1 bytes (16 TiB).
pub const ATOMIC_BYTES_MAX: u64 = (1 << PACKED_BYTES_BITS) - 1;
/// Largest `max_in_flight` an [`AtomicSemaphore`] accepts: 2^20 - 1 permits.
pub const ATOMIC_IN_FLIGHT_MAX: u32 = (1 << PACKED_IN_FLIGHT_BITS) - 1;

fn pack(in_flight: u32, bytes_in_flight: u64) -> u64 {
    debug_assert!(in_flight <= ATOMIC_IN_FLIGHT_MAX && bytes_in_flight <= ATOMIC_BYTES_MAX);
    (u64::from(in_flight) << PACKED_BYTES_BITS) | bytes_in_flight
}

fn unpack(word: u64) -> (u32, u64) {
    let in_flight = u32::try_from(word >> PACKED_BYTES_BITS).expect("20 bits fit in a u32");
    (in_flight, word & ATOMIC_BYTES_MAX)
}

/// A lock-free [`Semaphore`]: the count and the bytes in flight live in one `AtomicU64`
/// (count in the high 20 bits, bytes in the low 44), updated by compare-and-swap, so a grant
/// checks and takes both caps in one atomic step. The decision is [`decide`], the same
/// function `Semaphore` applies.
///
/// Both caps must be set and fit the packed word (at most [`ATOMIC_IN_FLIGHT_MAX`] permits
/// and [`ATOMIC_BYTES_MAX`] bytes); then, called from one thread, it makes exactly the
/// decisions of a `Semaphore` with the same config and keeps the same counters (a property
/// test checks this).
///
/// Invariants (checked by loom): permits and bytes in flight never exceed their caps; once
/// every permit is released, none are out. The occupancy is one word, so
/// [`AtomicSemaphore::counters`] reads `in_flight` and `bytes_in_flight` consistently; the
/// event counts and peaks are separate atomics, each exact, read one after the other.
///
/// Ordering: a grant's successful CAS is `AcqRel` and a release's is `AcqRel`, so whatever a
/// releasing thread did before `release` happens-before the work of a thread whose grant used
/// the room it made. Counters are `Relaxed`: they order nothing.
pub struct AtomicSemaphore {
    /// Stamped into every permit, checked when one comes back.
    id: InstanceId,
    config: SemaphoreConfig,
    /// `pack(in_flight, bytes_in_flight)`.
    occupancy: AtomicU64,
    in_flight_peak: AtomicU32,
    bytes_in_flight_peak: AtomicU64,
    acquired: AtomicU64,
    released: AtomicU64,
    rejected_in_flight_cap: AtomicU64,
    rejected_byte_cap: AtomicU64,
    rejected_larger_than_byte_cap: AtomicU64,
}

impl AtomicSemaphore {
    /// Rejects a config with a cap left out or too large for the packed word.
    pub fn new(config: SemaphoreConfig) -> Result<Self, ConfigError> {
        match config.max_in_flight {
            Some(cap) if cap <= ATOMIC_IN_FLIGHT_MAX => {}
            _ => {
                return Err(ConfigError::new(
                    "max_in_flight",
                    format!(
                        "must be set and at most {ATOMIC_IN_FLIGHT_MAX} for the lock-free \
                         semaphore (it packs the count into {PACKED_IN_FLIGHT_BITS} bits)"
                    ),
                ));
            }
        }
        match config.max_bytes {
            Some(cap) if cap <= ATOMIC_BYTES_MAX => {}
            _ => {
                return Err(ConfigError::new(
                    "max_bytes",
                    format!(
                        "must be set and at most {ATOMIC_BYTES_MAX} for the lock-free \
                         semaphore (it packs the bytes into {PACKED_BYTES_BITS} bits)"
                    ),
                ));
            }
        }
        Ok(AtomicSemaphore {
            id: InstanceId::fresh(),
            config,
            occupancy: AtomicU64::new(pack(0, 0)),
            in_flight_peak: AtomicU32::new(0),
            bytes_in_flight_peak: AtomicU64::new(0),
            acquired: AtomicU64::new(0),
            released: AtomicU64::new(0),
            rejected_in_flight_cap: AtomicU64::new(0),
            rejected_byte_cap: AtomicU64::new(0),
            rejected_larger_than_byte_cap: AtomicU64::new(0),
        })
    }

    pub fn config(&self) -> &SemaphoreConfig {
        &self.config
    }

    /// As [`Semaphore::try_acquire`].
    ///
    /// Loop bound: the CAS is retried only when another thread's grant or release changed the
    /// word since it was read, so some thread always makes progress (lock-free, not
    /// wait-free).
    pub fn try_acquire(&self, bytes: u64) -> Result<Permit, Rejection> {
        let mut word = self.occupancy.load(Ordering::Acquire);
        loop {
            let (in_flight, bytes_in_flight) = unpack(word);
            let (in_flight_after, bytes_after) =
                match decide(&self.config, in_flight, bytes_in_flight, bytes) {
                    Ok(after) => after,
                    Err(rejection) => {
                        self.rejected_counter(rejection)
                            .fetch_add(1, Ordering::Relaxed);
                        return Err(rejection);
                    }
                };
            match self.occupancy.compare_exchange(
                word,
                pack(in_flight_after, bytes_after),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.acquired.fetch_add(1, Ordering::Relaxed);
                    // Every occupancy the word ever holds after a grant is written by that
                    // grant's CAS, so the maximum over grants of their result is the peak.
                    self.in_flight_peak
                        .fetch_max(in_flight_after, Ordering::Relaxed);
                    self.bytes_in_flight_peak
                        .fetch_max(bytes_after, Ordering::Relaxed);
                    return Ok(Permit {
                        owner: self.id,
                        bytes,
                    });
                }
                Err(current) => word = current,
            }
        }
    }

    /// As [`Semaphore::release`]: panics, leaving the occupancy untouched, if the permit was
    /// granted by another semaphore or the occupancy could not hold it. Same loop bound as
    /// `try_acquire`.
    pub fn release(&self, permit: Permit) {
        self.id.assert_issued(permit.owner, "a permit", "semaphore");
        let mut word = self.occupancy.load(Ordering::Acquire);
        loop {
            let (in_flight, bytes_in_flight) = unpack(word);
            assert!(
                in_flight >= 1 && bytes_in_flight >= permit.bytes,
                "released a permit of {} bytes with {} permits and {} bytes out: \
                 it was not granted by this semaphore",
                permit.bytes,
                in_flight,
                bytes_in_flight
            );
            match self.occupancy.compare_exchange(
                word,
                pack(in_flight - 1, bytes_in_flight - permit.bytes),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.released.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Err(current) => word = current,
            }
        }
    }

    /// The counters; see the type's documentation for which readings are consistent.
    pub fn counters(&self) -> SemaphoreCounters {
        let (in_flight, bytes_in_flight) = unpack(self.occupancy.load(Ordering::Acquire));
        SemaphoreCounters {
            in_flight,
            bytes_in_flight,
            in_flight_peak: self.in_flight_peak.load(Ordering::Relaxed),
            bytes_in_flight_peak: self.bytes_in_flight_peak.load(Ordering::Relaxed),
            acquired: self.acquired.load(Ordering::Relaxed),
            released: self.released.load(Ordering::Relaxed),
            rejected_in_flight_cap: self.rejected_in_flight_cap.load(Ordering::Relaxed),
            rejected_byte_cap: self.rejected_byte_cap.load(Ordering::Relaxed),
            rejected_larger_than_byte_cap: self
                .rejected_larger_than_byte_cap
                .load(Ordering::Relaxed),
        }
    }

    fn rejected_counter(&self, rejection: Rejection) -> &AtomicU64 {
        match rejection {
            Rejection::InFlightCap => &self.rejected_in_flight_cap,
            Rejection::ByteCap => &self.rejected_byte_cap,
            Rejection::LargerThanByteCap => &self.rejected_larger_than_byte_cap,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    fn semaphore(max_in_flight: Option<u32>, max_bytes: Option<u64>) -> Semaphore {
        Semaphore::new(SemaphoreConfig::new(max_in_flight, max_bytes).unwrap())
    }

    fn granted(result: Result<Permit, Rejection>) -> Permit {
        result.unwrap_or_else(|rejection| panic!("expected a permit, got {rejection:?}"))
    }

    #[test]
    fn the_count_cap_drops_writes_over_it_until_one_is_released() {
        let mut s = semaphore(Some(2), None);
        let first = granted(s.try_acquire(2 * MIB));
        let _second = granted(s.try_acquire(2 * MIB));
        assert_eq!(s.try_acquire(1), Err(Rejection::InFlightCap));
        s.release(first);
        let _third = granted(s.try_acquire(2 * MIB));
        assert_eq!((s.in_flight(), s.bytes_in_flight()), (2, 4 * MIB));
    }

    #[test]
    fn the_byte_cap_admits_small_writes_beside_a_large_one() {
        let mut s = semaphore(Some(10), Some(5 * MIB));
        let large = granted(s.try_acquire(4 * MIB));
        assert_eq!(s.try_acquire(2 * MIB), Err(Rejection::ByteCap));
        let small = granted(s.try_acquire(MIB));
        assert_eq!(
            s.bytes_in_flight(),
            5 * MIB,
            "exactly at the cap is allowed"
        );
        assert_eq!(s.try_acquire(1), Err(Rejection::ByteCap));
        let _zero = granted(s.try_acquire(0));
        s.release(large);
        s.release(small);
        assert_eq!((s.in_flight(), s.bytes_in_flight()), (1, 0));
    }

    #[test]
    fn a_write_larger_than_the_whole_byte_cap_is_told_so_even_when_idle() {
        let mut s = semaphore(Some(1), Some(2 * MIB));
        assert_eq!(
            s.try_acquire(2 * MIB + 1),
            Err(Rejection::LargerThanByteCap)
        );
        // Precedence: a write that could never fit is named so even when the count is full.
        let _held = granted(s.try_acquire(2 * MIB));
        assert_eq!(s.try_acquire(3 * MIB), Err(Rejection::LargerThanByteCap));
        // The count cap is checked before the byte cap.
        assert_eq!(s.try_acquire(MIB), Err(Rejection::InFlightCap));
    }

    #[test]
    fn counters_record_peaks_and_rejections_by_reason() {
        let mut s = semaphore(Some(3), Some(10));
        let a = granted(s.try_acquire(6));
        let b = granted(s.try_acquire(3));
        assert_eq!(s.try_acquire(2), Err(Rejection::ByteCap));
        assert_eq!(s.try_acquire(11), Err(Rejection::LargerThanByteCap));
        s.release(a);
        let c = granted(s.try_acquire(1));
        let d = granted(s.try_acquire(1));
        assert_eq!(s.try_acquire(0), Err(Rejection::InFlightCap));
        for permit in [b, c, d] {
            s.release(permit);
        }
        let counters = s.counters();
        assert_eq!(
            counters,
            SemaphoreCounters {
                in_flight: 0,
                bytes_in_flight: 0,
                in_flight_peak: 3,
                bytes_in_flight_peak: 9,
                acquired: 4,
                released: 4,
                rejected_in_flight_cap: 1,
                rejected_byte_cap: 1,
                rejected_larger_than_byte_cap: 1,
            }
        );
        assert_eq!(counters.rejected(Rejection::ByteCap), 1);
        assert_eq!(counters.rejected_total(), 3);
    }

    #[test]
    fn without_a_byte_cap_the_byte_sum_cannot_overflow() {
        let mut s = semaphore(Some(3), None);
        let _huge = granted(s.try_acquire(u64::MAX - 1));
        let _one = granted(s.try_acquire(1));
        assert_eq!(s.try_acquire(1), Err(Rejection::ByteCap));
        assert_eq!(s.bytes_in_flight(), u64::MAX);
    }

    #[test]
    #[should_panic(expected = "a permit was handed back to a semaphore that did not issue it")]
    fn a_permit_from_another_semaphore_is_refused_before_any_change() {
        let mut big = semaphore(None, Some(100));
        let mut small = semaphore(None, Some(100));
        let _small_permit = granted(small.try_acquire(1));
        let big_permit = granted(big.try_acquire(50));
        small.release(big_permit);
    }

    /// The case the occupancy check alone let through: the foreign permit is smaller than
    /// what is out, so releasing it would silently free capacity the other semaphore holds.
    #[test]
    fn a_foreign_permit_that_fits_the_occupancy_is_refused_too() {
        for atomic in [false, true] {
            let config = SemaphoreConfig::new(Some(2), Some(100)).unwrap();
            let result = std::panic::catch_unwind(|| {
                if atomic {
                    let (issuer, other) = (
                        AtomicSemaphore::new(config).unwrap(),
                        AtomicSemaphore::new(config).unwrap(),
                    );
                    let _held = granted(other.try_acquire(50));
                    other.release(granted(issuer.try_acquire(1)));
                } else {
                    let (mut issuer, mut other) = (Semaphore::new(config), Semaphore::new(config));
                    let _held = granted(other.try_acquire(50));
                    other.release(granted(issuer.try_acquire(1)));
                }
            });
            let message = result.expect_err("a foreign permit was accepted");
            let message = message
                .downcast_ref::<String>()
                .map(String::as_str)
                .unwrap_or_default();
            assert!(
                message.contains("a permit was handed back to a semaphore that did not issue it"),
                "atomic = {atomic}: {message}"
            );
        }
    }

    #[test]
    fn rejected_configs_say_which_field_and_why() {
        let cases = [
            (Some(0), Some(1), "max_in_flight: must be at least 1"),
            (Some(1), Some(0), "max_bytes: must be at least 1"),
            (Some(0), None, "max_in_flight: must be at least 1"),
            (None, None, "max_in_flight: or max_bytes must be set"),
        ];
        for (max_in_flight, max_bytes, expected) in cases {
            let error = SemaphoreConfig::new(max_in_flight, max_bytes).unwrap_err();
            assert!(error.to_string().starts_with(expected), "{error}");
        }
        for (max_in_flight, max_bytes) in [(Some(1), None), (None, Some(1)), (Some(1), Some(1))] {
            assert!(SemaphoreConfig::new(max_in_flight, max_bytes).is_ok());
        }
    }
}

#[cfg(all(test, not(loom)))]
mod concurrent_tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering as StdOrdering};

    #[test]
    fn the_atomic_form_refuses_configs_it_cannot_pack() {
        let cases = [
            (
                None,
                Some(1),
                "max_in_flight: must be set and at most 1048575",
            ),
            (
                Some(ATOMIC_IN_FLIGHT_MAX + 1),
                Some(1),
                "max_in_flight: must be set",
            ),
            (
                Some(1),
                None,
                "max_bytes: must be set and at most 17592186044415",
            ),
            (
                Some(1),
                Some(ATOMIC_BYTES_MAX + 1),
                "max_bytes: must be set",
            ),
        ];
        for (max_in_flight, max_bytes, expected) in cases {
            let config = SemaphoreConfig::new(max_in_flight, max_bytes).unwrap();
            let error = AtomicSemaphore::new(config).err().expect("refused");
            assert!(error.to_string().starts_with(expected), "{error}");
        }
        let widest = SemaphoreConfig::new(Some(ATOMIC_IN_FLIGHT_MAX), Some(ATOMIC_BYTES_MAX));
        let atomic = AtomicSemaphore::new(widest.unwrap()).unwrap();
        let permit = atomic.try_acquire(ATOMIC_BYTES_MAX).unwrap();
        assert_eq!(atomic.counters().bytes_in_flight, ATOMIC_BYTES_MAX);
        atomic.release(permit);
    }

    /// Threads hammer a semaphore of 3 permits and 10 bytes, tracking what they hold in their
    /// own atomics: neither cap is ever exceeded and everything comes back.
    fn hammer(
        acquire: impl Fn(u64) -> Result<Permit, Rejection> + Send + Sync + 'static,
        release: impl Fn(Permit) + Send + Sync + 'static,
    ) -> u64 {
        let (acquire, release) = (Arc::new(acquire), Arc::new(release));
        let inside = Arc::new(StdAtomicU64::new(0));
        let inside_bytes = Arc::new(StdAtomicU64::new(0));
        let granted = Arc::new(StdAtomicU64::new(0));
        let threads: Vec<_> = (0..6u64)
            .map(|thread| {
                let (acquire, release) = (acquire.clone(), release.clone());
                let (inside, inside_bytes, granted) =
                    (inside.clone(), inside_bytes.clone(), granted.clone());
                std::thread::spawn(move || {
                    for round in 0..2000u64 {
                        let bytes = (thread + round) % 6;
                        if let Ok(permit) = acquire(bytes) {
                            let count = inside.fetch_add(1, StdOrdering::SeqCst) + 1;
                            let held = inside_bytes.fetch_add(bytes, StdOrdering::SeqCst) + bytes;
                            assert!(count <= 3, "{count} permits out, cap 3");
                            assert!(held <= 10, "{held} bytes out, cap 10");
                            granted.fetch_add(1, StdOrdering::Relaxed);
                            inside_bytes.fetch_sub(bytes, StdOrdering::SeqCst);
                            inside.fetch_sub(1, StdOrdering::SeqCst);
                            release(permit);
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        granted.load(StdOrdering::Relaxed)
    }

    fn caps() -> SemaphoreConfig {
        SemaphoreConfig::new(Some(3), Some(10)).unwrap()
    }

    #[test]
    fn threads_never_exceed_the_caps_of_the_shared_semaphore() {
        let shared = Arc::new(SharedSemaphore::new(caps()));
        let (a, r) = (shared.clone(), shared.clone());
        let granted = hammer(move |b| a.try_acquire(b), move |p| r.release(p));
        let counters = shared.counters();
        assert_eq!((counters.in_flight, counters.bytes_in_flight), (0, 0));
        assert_eq!((counters.acquired, counters.released), (granted, granted));
        assert_eq!(counters.acquired + counters.rejected_total(), 6 * 2000);
        assert!(counters.in_flight_peak <= 3 && counters.bytes_in_flight_peak <= 10);
    }

    #[test]
    fn threads_never_exceed_the_caps_of_the_atomic_semaphore() {
        let atomic = Arc::new(AtomicSemaphore::new(caps()).unwrap());
        let (a, r) = (atomic.clone(), atomic.clone());
        let granted = hammer(move |b| a.try_acquire(b), move |p| r.release(p));
        let counters = atomic.counters();
        assert_eq!((counters.in_flight, counters.bytes_in_flight), (0, 0));
        assert_eq!((counters.acquired, counters.released), (granted, granted));
        assert_eq!(counters.acquired + counters.rejected_total(), 6 * 2000);
        assert!(counters.in_flight_peak <= 3 && counters.bytes_in_flight_peak <= 10);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Acquire(u64),
        /// Release the held permit at this index (modulo the number held), if any.
        Release(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u64..=12).prop_map(Op::Acquire),
            2 => any::<usize>().prop_map(Op::Release),
        ]
    }

    /// The obvious model: the list of permits out, summed on every question.
    fn reference(
        max_in_flight: Option<u32>,
        max_bytes: Option<u64>,
        held: &[u64],
        bytes: u64,
    ) -> Result<(), Rejection> {
        let bytes_max = max_bytes.unwrap_or(u64::MAX);
        if bytes > bytes_max {
            Err(Rejection::LargerThanByteCap)
        } else if held.len() as u64 >= u64::from(max_in_flight.unwrap_or(u32::MAX)) {
            Err(Rejection::InFlightCap)
        } else if u128::from(held.iter().sum::<u64>()) + u128::from(bytes) > u128::from(bytes_max) {
            Err(Rejection::ByteCap)
        } else {
            Ok(())
        }
    }

    fn decision(result: &Result<Permit, Rejection>) -> Result<(), Rejection> {
        result.as_ref().map(|_| ()).map_err(|rejection| *rejection)
    }

    proptest! {
        /// Driven by one thread with the same operations, the sequential, mutex and atomic
        /// forms make the decisions of the reference model and keep identical counters.
        #[test]
        fn every_form_makes_the_decisions_of_the_reference(
            max_in_flight in prop::option::weighted(0.8, 1u32..=4),
            max_bytes in prop::option::weighted(0.8, 1u64..=16),
            ops in prop::collection::vec(op(), 0..80),
        ) {
            prop_assume!(max_in_flight.is_some() || max_bytes.is_some());
            let config = SemaphoreConfig::new(max_in_flight, max_bytes).unwrap();
            let mut sequential = Semaphore::new(config);
            let shared = SharedSemaphore::new(config);
            // The atomic form needs both caps; without one it sits this case out.
            let atomic = AtomicSemaphore::new(config).ok();
            // Permits out, as (bytes, sequential's, shared's, atomic's).
            let mut held: Vec<(u64, Permit, Permit, Option<Permit>)> = Vec::new();
            for op in ops {
                match op {
                    Op::Acquire(bytes) => {
                        let sizes: Vec<u64> = held.iter().map(|h| h.0).collect();
                        let expected = reference(max_in_flight, max_bytes, &sizes, bytes);
                        let s = sequential.try_acquire(bytes);
                        let m = shared.try_acquire(bytes);
                        let a = atomic.as_ref().map(|atomic| atomic.try_acquire(bytes));
                        prop_assert_eq!(decision(&s), expected);
                        prop_assert_eq!(decision(&m), expected);
                        if let Some(a) = &a {
                            prop_assert_eq!(decision(a), expected);
                        }
                        if let (Ok(s), Ok(m)) = (s, m) {
                            prop_assert_eq!(s.bytes(), bytes);
                            held.push((bytes, s, m, a.map(|a| a.unwrap())));
                        }
                    }
                    Op::Release(index) => {
                        if !held.is_empty() {
                            let (_, s, m, a) = held.swap_remove(index % held.len());
                            sequential.release(s);
                            shared.release(m);
                            if let (Some(atomic), Some(a)) = (&atomic, a) {
                                atomic.release(a);
                            }
                        }
                    }
                }
                let counters = sequential.counters();
                prop_assert_eq!(counters.in_flight as usize, held.len());
                prop_assert_eq!(counters.bytes_in_flight, held.iter().map(|h| h.0).sum::<u64>());
                prop_assert_eq!(shared.counters(), counters);
                if let Some(atomic) = &atomic {
                    prop_assert_eq!(atomic.counters(), counters);
                }
            }
            for (_, s, m, a) in held {
                sequential.release(s);
                shared.release(m);
                if let (Some(atomic), Some(a)) = (&atomic, a) {
                    atomic.release(a);
                }
            }
            prop_assert_eq!((sequential.in_flight(), sequential.bytes_in_flight()), (0, 0));
        }
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicU64 as LoomAtomicU64, Ordering as LoomOrdering};

    /// What the threads hold, counted by the threads themselves: incremented after a grant,
    /// checked against the caps, decremented before the release.
    struct Holders {
        in_flight_max: u64,
        bytes_max: u64,
        count: LoomAtomicU64,
        bytes: LoomAtomicU64,
    }

    impl Holders {
        fn enter(&self, bytes: u64) {
            let count = self.count.fetch_add(1, LoomOrdering::SeqCst) + 1;
            let held = self.bytes.fetch_add(bytes, LoomOrdering::SeqCst) + bytes;
            assert!(
                count <= self.in_flight_max,
                "{count} permits out, cap {}",
                self.in_flight_max
            );
            assert!(
                held <= self.bytes_max,
                "{held} bytes out, cap {}",
                self.bytes_max
            );
        }

        fn leave(&self, bytes: u64) {
            self.bytes.fetch_sub(bytes, LoomOrdering::SeqCst);
            self.count.fetch_sub(1, LoomOrdering::SeqCst);
        }
    }

    /// One thread per entry of `sizes` tries once for that many bytes, holds, and releases.
    /// Returns how many were granted; after the join, checks that every permit came back.
    fn writers<S: Send + Sync + 'static>(
        config: SemaphoreConfig,
        semaphore: Arc<S>,
        sizes: &[u64],
        acquire: fn(&S, u64) -> Result<Permit, Rejection>,
        release: fn(&S, Permit),
        counters: fn(&S) -> SemaphoreCounters,
    ) {
        let holders = Arc::new(Holders {
            in_flight_max: u64::from(config.max_in_flight().unwrap()),
            bytes_max: config.max_bytes().unwrap(),
            count: LoomAtomicU64::new(0),
            bytes: LoomAtomicU64::new(0),
        });
        let threads: Vec<_> = sizes
            .iter()
            .map(|&bytes| {
                let (semaphore, holders) = (semaphore.clone(), holders.clone());
                loom::thread::spawn(move || match acquire(&semaphore, bytes) {
                    Ok(permit) => {
                        holders.enter(bytes);
                        holders.leave(bytes);
                        release(&semaphore, permit);
                        true
                    }
                    Err(_) => false,
                })
            })
            .collect();
        let mut granted = 0;
        for thread in threads {
            granted += u64::from(thread.join().unwrap());
        }
        let counters = counters(&semaphore);
        assert_eq!(
            (counters.in_flight, counters.bytes_in_flight),
            (0, 0),
            "a permit was lost"
        );
        assert_eq!((counters.acquired, counters.released), (granted, granted));
        assert_eq!(
            counters.acquired + counters.rejected_total(),
            sizes.len() as u64
        );
        assert!(granted >= 1, "an idle semaphore refused everyone");
    }

    /// 2 permits and 10 bytes; three writers of 4, 6 and 5 bytes. Any two of them fit the
    /// count, 4 + 6 fits the bytes, 6 + 5 does not: both caps are in play.
    fn both_caps() -> SemaphoreConfig {
        SemaphoreConfig::new(Some(2), Some(10)).unwrap()
    }
    const THREE_WRITERS: [u64; 3] = [4, 6, 5];

    /// The mutex form: whatever the interleaving, neither cap is exceeded and every permit
    /// comes back.
    ///
    /// A smoke model: [`SharedSemaphore`] runs each whole call under one mutex, so loom only
    /// varies the order in which the calls take the lock. It checks that the wrapper loses no
    /// permit and keeps the caps in every such order; the decisions themselves are checked by
    /// the property test, and the lock-free form, whose steps can really interleave, by the
    /// two models below.
    #[test]
    fn loom_semaphore_shared_never_exceeds_its_caps() {
        crate::sync::loom_model(|| {
            let semaphore = Arc::new(SharedSemaphore::new(both_caps()));
            writers(
                both_caps(),
                semaphore,
                &THREE_WRITERS,
                SharedSemaphore::try_acquire,
                SharedSemaphore::release,
                SharedSemaphore::counters,
            );
        });
    }

    /// The lock-free form, count cap: two writers race for one permit (the bytes always fit).
    /// Two threads, not three: each grant and release of the atomic form is several atomic
    /// steps (CAS, counters, peaks), and a third thread multiplies the interleavings to
    /// explore many times over for no race the two-thread model cannot show.
    #[test]
    fn loom_semaphore_atomic_never_exceeds_its_count_cap() {
        crate::sync::loom_model(|| {
            let config = SemaphoreConfig::new(Some(1), Some(10)).unwrap();
            let semaphore = Arc::new(AtomicSemaphore::new(config).unwrap());
            writers(
                config,
                semaphore,
                &[4, 5],
                AtomicSemaphore::try_acquire,
                AtomicSemaphore::release,
                AtomicSemaphore::counters,
            );
        });
    }

    /// The lock-free form, byte cap: two writers of 6 and 5 bytes race for 10 bytes (the count
    /// always fits).
    #[test]
    fn loom_semaphore_atomic_never_exceeds_its_byte_cap() {
        crate::sync::loom_model(|| {
            let config = SemaphoreConfig::new(Some(2), Some(10)).unwrap();
            let semaphore = Arc::new(AtomicSemaphore::new(config).unwrap());
            writers(
                config,
                semaphore,
                &[6, 5],
                AtomicSemaphore::try_acquire,
                AtomicSemaphore::release,
                AtomicSemaphore::counters,
            );
        });
    }
}
