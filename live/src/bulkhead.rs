//! The bulkhead as an async permit: [`outagelab_model::bulkhead::Bulkhead`] behind a mutex
//! (held for one model call, never across an `.await`), a waiter parked on a oneshot channel
//! when the model queues it, and guards that give the permit back when dropped.
//!
//! The model decides who runs, who queues and who is shed, and which waiter a released permit
//! goes to (the oldest). This module only hands the permit over: a release made under the lock
//! sends it to the waiter the model named; a waiter that gives up (its future dropped) is
//! cancelled in the model, or, if the model had already granted it, gives the permit back at
//! once, so no capacity leaks whatever is cancelled when. No time: a bulkhead decides by
//! count.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use outagelab_model::bulkhead::{Acquire, Bulkhead, BulkheadConfig, Permit, WaiterId};
use tokio::sync::oneshot;

struct State {
    bulkhead: Bulkhead,
    /// Where each queued waiter's permit goes, by the id the model queued it under.
    waiters: BTreeMap<WaiterId, oneshot::Sender<Permit>>,
    next_waiter: WaiterId,
}

pub struct LiveBulkhead {
    state: Mutex<State>,
}

/// The queue was full: the call must not be made (the model's [`Acquire::Shed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shed;

/// What asking for a permit gave.
pub enum Entry<'a> {
    Granted(BulkheadPermit<'a>),
    /// Queued: await it for the permit.
    Queued(Queued<'a>),
    Shed,
}

impl LiveBulkhead {
    pub fn new(config: BulkheadConfig) -> Self {
        LiveBulkhead {
            state: Mutex::new(State {
                bulkhead: Bulkhead::new(config),
                waiters: BTreeMap::new(),
                next_waiter: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks for a permit now: granted, queued (the oldest waiter gets the next permit given
    /// back) or shed.
    pub fn try_acquire(&self) -> Entry<'_> {
        let mut state = self.lock();
        let waiter = state.next_waiter;
        state.next_waiter += 1;
        match state.bulkhead.try_acquire(waiter) {
            Acquire::Granted(permit) => Entry::Granted(BulkheadPermit {
                bulkhead: self,
                permit: Some(permit),
            }),
            Acquire::Queued => {
                let (sender, receiver) = oneshot::channel();
                state.waiters.insert(waiter, sender);
                Entry::Queued(Queued {
                    bulkhead: self,
                    waiter,
                    receiver: Some(receiver),
                })
            }
            Acquire::Shed => Entry::Shed,
        }
    }

    /// A permit, waiting in the queue if the model queues this call; `Err(Shed)` when its
    /// queue is full.
    pub async fn acquire(&self) -> Result<BulkheadPermit<'_>, Shed> {
        match self.try_acquire() {
            Entry::Granted(permit) => Ok(permit),
            Entry::Queued(queued) => Ok(queued.await),
            Entry::Shed => Err(Shed),
        }
    }

    /// Runs `work` holding a permit; `Err(Shed)`: it was not run.
    pub async fn run<T>(&self, work: impl Future<Output = T>) -> Result<T, Shed> {
        let _permit = self.acquire().await?;
        Ok(work.await)
    }

    /// Permits out, and waiters queued.
    pub fn occupancy(&self) -> (u32, u32) {
        let state = self.lock();
        (state.bulkhead.in_use(), state.bulkhead.queued())
    }

    /// Gives `permit` back under the lock: the model passes it to its oldest waiter, whose
    /// channel gets it; a waiter that has gone (its receiver dropped between the model's
    /// grant and now) gives it straight back, which may pass it on again. Bounded by the
    /// queue's length: each turn takes one waiter out of it.
    fn release(state: &mut State, permit: Permit) {
        let mut permit = permit;
        while let Some(grant) = state.bulkhead.release(permit) {
            let sender = state
                .waiters
                .remove(&grant.waiter)
                .expect("every waiter the model queued has a channel");
            match sender.send(grant.permit) {
                Ok(()) => return,
                Err(returned) => permit = returned,
            }
        }
    }
}

/// A permit held; given back when dropped.
#[must_use = "dropping the permit gives it back at once"]
pub struct BulkheadPermit<'a> {
    bulkhead: &'a LiveBulkhead,
    permit: Option<Permit>,
}

impl BulkheadPermit<'_> {
    /// The permit without its guard, for work that outlives the task holding the guard (a
    /// query whose caller gave up keeps its pool's connection until the database ends it):
    /// whoever waits for that work gives it back with [`LiveBulkhead::give_back`].
    pub fn detach(mut self) -> DetachedPermit {
        DetachedPermit(
            self.permit
                .take()
                .expect("a guard holds its permit until dropped"),
        )
    }
}

/// A permit out of its guard ([`BulkheadPermit::detach`]). Single use, as the model's permit:
/// given back once with [`LiveBulkhead::give_back`]; dropped without that, its place stays
/// taken (the end of a run, whose bulkhead goes with it, is the one place that may do so).
#[must_use = "a detached permit holds its place until it is given back"]
pub struct DetachedPermit(Permit);

impl LiveBulkhead {
    /// Gives a detached permit back, as dropping its guard would have.
    pub fn give_back(&self, permit: DetachedPermit) {
        LiveBulkhead::release(&mut self.lock(), permit.0);
    }
}

impl Drop for BulkheadPermit<'_> {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            LiveBulkhead::release(&mut self.bulkhead.lock(), permit);
        }
    }
}

/// A call queued for a permit. Await it; drop it to give up its place.
#[must_use = "a queued call holds its place until it is awaited or dropped"]
pub struct Queued<'a> {
    bulkhead: &'a LiveBulkhead,
    waiter: WaiterId,
    receiver: Option<oneshot::Receiver<Permit>>,
}

impl<'a> Queued<'a> {
    /// The permit, if a release has already handed it to this waiter.
    pub fn try_take(&mut self) -> Option<BulkheadPermit<'a>> {
        let permit = self.receiver.as_mut()?.try_recv().ok()?;
        self.receiver = None;
        Some(BulkheadPermit {
            bulkhead: self.bulkhead,
            permit: Some(permit),
        })
    }
}

impl<'a> Future for Queued<'a> {
    type Output = BulkheadPermit<'a>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let receiver = self.receiver.as_mut().expect("polled after it resolved");
        match Pin::new(receiver).poll(context) {
            Poll::Ready(Ok(permit)) => {
                self.receiver = None;
                Poll::Ready(BulkheadPermit {
                    bulkhead: self.bulkhead,
                    permit: Some(permit),
                })
            }
            // The sender lives in the state as long as the model queues this waiter, and is
            // used or removed only under the lock, by a release (which sends) or by this
            // waiter's own drop.
            Poll::Ready(Err(_)) => unreachable!("a queued waiter's channel is never dropped"),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        let Some(mut receiver) = self.receiver.take() else {
            return; // resolved: the permit is someone's
        };
        let mut state = self.bulkhead.lock();
        if state.bulkhead.cancel(self.waiter) {
            state.waiters.remove(&self.waiter);
        } else if let Ok(permit) = receiver.try_recv() {
            // Granted before it gave up: the permit goes back (and maybe on to the next).
            LiveBulkhead::release(&mut state, permit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detached_permit_holds_its_place_until_given_back() {
        let bulkhead = bulkhead(1, 1);
        let Entry::Granted(permit) = bulkhead.try_acquire() else {
            panic!("the first call runs");
        };
        let detached = permit.detach();
        // Its place is still taken: the next call queues.
        let Entry::Queued(mut queued) = bulkhead.try_acquire() else {
            panic!("the second call queues");
        };
        assert_eq!(bulkhead.occupancy(), (1, 1));
        assert!(queued.try_take().is_none());
        bulkhead.give_back(detached);
        // Given back, it goes to the waiter.
        let permit = queued.try_take().expect("the waiter has the permit");
        assert_eq!(bulkhead.occupancy(), (1, 0));
        drop(permit);
        assert_eq!(bulkhead.occupancy(), (0, 0));
    }

    fn bulkhead(max: u32, queue: u32) -> LiveBulkhead {
        LiveBulkhead::new(BulkheadConfig::new(max, queue).unwrap())
    }

    #[tokio::test]
    async fn a_queued_call_waits_for_the_permit_given_back() {
        let live = bulkhead(1, 1);
        let first = live.acquire().await.unwrap();
        let Entry::Queued(waiting) = live.try_acquire() else {
            panic!("the second call queues");
        };
        assert!(
            matches!(live.try_acquire(), Entry::Shed),
            "the queue is full"
        );
        assert_eq!(live.occupancy(), (1, 1));
        drop(first);
        let second = waiting.await;
        assert_eq!(live.occupancy(), (1, 0), "the permit passed on, not freed");
        drop(second);
        assert_eq!(live.occupancy(), (0, 0));
    }

    #[test]
    fn a_waiter_that_gives_up_leaks_nothing_before_or_after_its_grant() {
        let live = bulkhead(1, 2);
        let Entry::Granted(first) = live.try_acquire() else {
            panic!("free");
        };
        let (Entry::Queued(early), Entry::Queued(late)) = (live.try_acquire(), live.try_acquire())
        else {
            panic!("both queue");
        };
        // Gives up while queued: it leaves the queue.
        drop(early);
        assert_eq!(live.occupancy(), (1, 1));
        // Granted, then gives up before taking it: the permit comes back.
        drop(first);
        assert_eq!(live.occupancy(), (1, 0), "granted to the late waiter");
        drop(late);
        assert_eq!(live.occupancy(), (0, 0), "and given back when it left");
        assert!(matches!(live.try_acquire(), Entry::Granted(_)));
    }
}
