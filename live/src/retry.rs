//! The retry policy with its budget, live: [`outagelab_model::retry::RetryPolicy`] and the
//! policy's random source behind one mutex (held for one model call, never across an
//! `.await`), with `now` from a [`Clock`].
//!
//! The model decides whether and when to try again (attempts, Retry-After, the budget, the
//! elapsed limit, the jittered backoff); this module only waits until the instant it names.
//! Each request owns its [`RetryState`], as in the model.

use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};

use outagelab_model::random::RandomBits;
use outagelab_model::retry::{RetryConfig, RetryCounters, RetryDecision, RetryPolicy, RetryState};
use outagelab_model::time::SimDuration;

use crate::clock::{Clock, TokioClock, std_duration};

pub struct LiveRetry<R: RandomBits + Send, C: Clock = TokioClock> {
    policy: Mutex<(RetryPolicy, R)>,
    clock: C,
}

/// How an attempt ended, as the retry sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt {
    Succeeded,
    /// Failed with an error the policy retries, and the wait the server asked for, if any.
    Retryable {
        retry_after: Option<SimDuration>,
    },
    /// Failed with an error it does not retry.
    Final,
}

impl<R: RandomBits + Send> LiveRetry<R, TokioClock> {
    /// On the wall clock, starting now; `random` draws the backoff's jitter.
    pub fn new(config: RetryConfig, random: R) -> Self {
        Self::with_clock(config, random, TokioClock::start_now())
    }
}

impl<R: RandomBits + Send, C: Clock> LiveRetry<R, C> {
    pub fn with_clock(config: RetryConfig, random: R, clock: C) -> Self {
        LiveRetry {
            policy: Mutex::new((RetryPolicy::new(config), random)),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, (RetryPolicy, R)> {
        self.policy.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request starts now: it deposits into the budget and gets its retry state.
    pub fn on_request(&self) -> RetryState {
        let now = self.clock.now();
        self.lock().0.on_request(now)
    }

    /// An attempt of `request` failed now: whether and when to try again.
    pub fn on_failure(
        &self,
        request: &mut RetryState,
        retry_after: Option<SimDuration>,
    ) -> RetryDecision {
        let now = self.clock.now();
        let (policy, random) = &mut *self.lock();
        policy.on_failure(now, request, retry_after, random)
    }

    pub fn counters(&self) -> RetryCounters {
        self.lock().0.counters()
    }

    /// Runs `attempt` until it succeeds, fails for good, or the policy gives up, sleeping
    /// until each retry's instant; returns the last attempt's result. Bounded by the policy's
    /// `max_attempts`.
    pub async fn run<T, F, Fut>(&self, mut attempt: F, judge: impl Fn(&T) -> Attempt) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = T>,
    {
        let mut request = self.on_request();
        loop {
            let result = attempt().await;
            let Attempt::Retryable { retry_after } = judge(&result) else {
                return result;
            };
            match self.on_failure(&mut request, retry_after) {
                RetryDecision::Retry { at } => {
                    let wait = at.saturating_since(self.clock.now());
                    tokio::time::sleep(std_duration(wait)).await;
                }
                RetryDecision::GiveUp(_) => return result,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use outagelab_model::backoff::{BackoffConfig, Jitter};
    use outagelab_model::random::SplitMix64;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// On tokio's paused clock: two failures, then a success, after the backoff's 100 and
    /// 200 ms; a final error is not retried; the attempts stop at the policy's cap.
    #[tokio::test(start_paused = true)]
    async fn run_waits_out_each_backoff_and_stops_where_the_policy_says() {
        let backoff = BackoffConfig::new(
            SimDuration::from_millis(100),
            2000,
            SimDuration::from_secs(1),
            Jitter::None,
        )
        .unwrap();
        let retry = LiveRetry::new(
            RetryConfig::new(3, backoff, None, None).unwrap(),
            SplitMix64(1),
        );
        let attempts = AtomicU32::new(0);
        let started = tokio::time::Instant::now();
        let result = retry
            .run(
                || async { attempts.fetch_add(1, Ordering::SeqCst) + 1 },
                |&attempt| {
                    if attempt < 3 {
                        Attempt::Retryable { retry_after: None }
                    } else {
                        Attempt::Succeeded
                    }
                },
            )
            .await;
        assert_eq!(result, 3);
        assert_eq!(started.elapsed(), std::time::Duration::from_millis(300));
        let finals = retry.run(|| async { "no" }, |_| Attempt::Final).await;
        assert_eq!(finals, "no");
        let capped = AtomicU32::new(0);
        retry
            .run(
                || async { capped.fetch_add(1, Ordering::SeqCst) },
                |_| Attempt::Retryable { retry_after: None },
            )
            .await;
        assert_eq!(capped.load(Ordering::SeqCst), 3, "max_attempts");
        assert_eq!(retry.counters().attempts_exhausted, 1);
    }
}
