//! The backpressure semaphore, by count and by bytes, as an RAII permit:
//! [`outagelab_model::semaphore::SharedSemaphore`] (the model's `Semaphore` behind its mutex)
//! with a guard that releases on drop, so a cancelled task cannot leak capacity.
//!
//! No time and no waiting: a request over a cap is refused at once (seed 000's blob writes are
//! dropped, not queued), exactly as the model decides.

use std::future::Future;

use outagelab_model::semaphore::{
    Permit, Rejection, SemaphoreConfig, SemaphoreCounters, SharedSemaphore,
};

pub struct LiveSemaphore {
    semaphore: SharedSemaphore,
}

impl LiveSemaphore {
    pub fn new(config: SemaphoreConfig) -> Self {
        LiveSemaphore {
            semaphore: SharedSemaphore::new(config),
        }
    }

    /// A permit for work of `bytes` bytes, or which cap refused it.
    pub fn try_acquire(&self, bytes: u64) -> Result<SemaphorePermit<'_>, Rejection> {
        let permit = self.semaphore.try_acquire(bytes)?;
        Ok(SemaphorePermit {
            semaphore: self,
            permit: Some(permit),
        })
    }

    /// Runs `work` holding a permit for `bytes` bytes; `Err(rejection)`: it was not run.
    pub async fn run<T>(&self, bytes: u64, work: impl Future<Output = T>) -> Result<T, Rejection> {
        let _permit = self.try_acquire(bytes)?;
        Ok(work.await)
    }

    pub fn counters(&self) -> SemaphoreCounters {
        self.semaphore.counters()
    }
}

/// Work in flight; released when dropped.
#[must_use = "dropping the permit releases it at once"]
pub struct SemaphorePermit<'a> {
    semaphore: &'a LiveSemaphore,
    permit: Option<Permit>,
}

impl SemaphorePermit<'_> {
    pub fn bytes(&self) -> u64 {
        self.permit.as_ref().map_or(0, Permit::bytes)
    }
}

impl Drop for SemaphorePermit<'_> {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            self.semaphore.semaphore.release(permit);
        }
    }
}
