//! The live slot's waiting, on tokio's paused clock with a connector that takes 50 ms: callers
//! that arrive during an attempt wait on it (single flight) and get its outcome; a connecting
//! caller that is cancelled releases them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use outagelab_live::slot::{Connector, LiveSlot, Unavailable};
use outagelab_model::reconnect::ReconnectConfig;

const CONNECT_TAKES: Duration = Duration::from_millis(50);
const CALLERS: usize = 50;

/// Every attempt takes [`CONNECT_TAKES`] and succeeds or fails as told; counts the attempts.
struct Slow {
    succeeds: bool,
    attempts: AtomicU32,
}

impl Connector for Slow {
    type Connection = u32;
    type Error = &'static str;

    async fn connect(&self) -> Result<u32, &'static str> {
        let attempt = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        tokio::time::sleep(CONNECT_TAKES).await;
        if self.succeeds {
            Ok(attempt)
        } else {
            Err("refused")
        }
    }
}

fn slot(succeeds: bool) -> Arc<LiveSlot<Slow>> {
    Arc::new(LiveSlot::new(
        ReconnectConfig::seed_001(),
        Slow {
            succeeds,
            attempts: AtomicU32::new(0),
        },
    ))
}

/// Starts [`CALLERS`] leases at once and returns their results in the order they were started.
async fn burst(slot: &Arc<LiveSlot<Slow>>) -> Vec<Result<u64, Unavailable>> {
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let slot = slot.clone();
            tokio::spawn(async move { slot.lease().await.map(|lease| lease.generation().get()) })
        })
        .collect();
    let mut results = Vec::new();
    for caller in callers {
        results.push(caller.await.expect("a caller finished"));
    }
    results
}

#[tokio::test(start_paused = true)]
async fn callers_during_an_attempt_wait_on_it_and_share_its_connection() {
    let slot = slot(true);
    let results = burst(&slot).await;
    assert!(results.iter().all(|result| *result == Ok(1)), "{results:?}");
    assert_eq!(slot.stats().attempts_total, 1, "single flight");
    assert!(slot.stats().connected);
}

#[tokio::test(start_paused = true)]
async fn callers_during_a_failed_attempt_fail_open_after_it() {
    let slot = slot(false);
    let results = burst(&slot).await;
    let failed = results
        .iter()
        .filter(|result| matches!(result, Err(Unavailable::ConnectFailed { .. })))
        .count();
    let backing_off = results
        .iter()
        .filter(|result| matches!(result, Err(Unavailable::BackingOff { .. })))
        .count();
    assert_eq!((failed, backing_off), (1, CALLERS - 1), "{results:?}");
    assert_eq!(slot.stats().connect_failures_total, 1);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_connect_releases_the_callers_waiting_on_it() {
    let slot = slot(true);
    let connecting = slot.clone();
    // The connecting caller gives up after 10 ms, in the middle of its 50 ms connect.
    let cancelled = tokio::spawn(async move {
        tokio::time::timeout(Duration::from_millis(10), connecting.lease())
            .await
            .is_err()
    });
    tokio::task::yield_now().await;
    let waiter = {
        let slot = slot.clone();
        tokio::spawn(async move { slot.lease().await.map(|lease| lease.generation().get()) })
    };
    assert!(cancelled.await.unwrap(), "the connecting caller timed out");
    let waited = tokio::time::timeout(Duration::from_secs(1), waiter)
        .await
        .expect("the waiter was released")
        .unwrap();
    // The attempt was reported failed at its start, so the waiter finds its window open.
    assert!(
        matches!(waited, Err(Unavailable::BackingOff { .. })),
        "{waited:?}"
    );
    let stats = slot.stats();
    assert_eq!((stats.attempts_total, stats.connect_failures_total), (1, 1));
}
