//! What the simulator's connection parameters mean on this machine, measured against a real
//! Redis on one multiplexed connection (the `redis` crate, as the slot uses it):
//!
//! - **latency**: half the median round trip of [`Plan::pings`] PINGs sent one after another
//!   (the simulator's `latency` is one way);
//! - **bandwidth**: [`Plan::sets`] SETs of [`Plan::set_bytes`] each, all queued at once on the
//!   one connection, as seed 000's blob writes were; the effective bandwidth is the bytes
//!   written over the time from the first send to the last reply, less one round trip. It
//!   folds in the server's own per-byte cost and the client's, which the simulator's pipe
//!   bandwidth stands for.
//!
//! Bounds: a fixed number of commands, each under the connection's response timeout
//! ([`RESPONSE_TIMEOUT`]). The keys written are deleted at the end. Integer arithmetic only.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisResult};
use tokio::time::Instant;

/// Every command of the calibration must be answered within this.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The prefix of the keys the calibration writes (and deletes).
pub const KEY_PREFIX: &str = "outagelab:calibrate:";

/// What to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub pings: u32,
    pub sets: u32,
    pub set_bytes: usize,
}

impl Plan {
    /// Seed 000's shape: 60 queued SETs of 2 MiB (the figure the HOL scenario fits), after
    /// 200 PINGs.
    pub const SEED_000: Plan = Plan {
        pings: 200,
        sets: 60,
        set_bytes: 2 << 20,
    };
}

/// What was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Calibration {
    pub plan: Plan,
    pub round_trip_median: Duration,
    /// From the first SET sent to the last reply.
    pub sets_elapsed: Duration,
    /// Bytes of values written per second, after taking one round trip off the elapsed time.
    pub bytes_per_second: u64,
}

impl Calibration {
    /// The one-way latency the simulator's `latency` key means.
    pub fn latency_one_way(&self) -> Duration {
        self.round_trip_median / 2
    }

    /// A `[connections]` table to paste into a scenario file.
    pub fn snippet(&self, name: &str, server: &str) -> String {
        let latency_us = self.latency_one_way().as_micros().max(1);
        let mib_per_second = (self.bytes_per_second >> 20).max(1);
        format!(
            "# measured by `outagelab calibrate`: median of {pings} PING round trips {rtt_us}us; \
             {sets} queued SETs of {size} bytes on one connection in {elapsed_ms} ms\n\
             [connections.{name}]\n\
             server = \"{server}\"\n\
             latency = \"{latency_us}us\"\n\
             bandwidth = \"{mib_per_second}MiB/s\"\n",
            pings = self.plan.pings,
            rtt_us = self.round_trip_median.as_micros(),
            sets = self.plan.sets,
            size = self.plan.set_bytes,
            elapsed_ms = self.sets_elapsed.as_millis(),
        )
    }
}

/// Measures against the server at `address` (`host:port`).
pub async fn calibrate(address: &str, plan: Plan) -> RedisResult<Calibration> {
    assert!(
        plan.pings > 0 && plan.sets > 0 && plan.set_bytes > 0,
        "an empty plan"
    );
    let client = Client::open(format!("redis://{address}/"))?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT));
    let mut connection = client
        .get_multiplexed_async_connection_with_config(&config)
        .await?;

    let mut round_trips = Vec::with_capacity(plan.pings as usize);
    for _ in 0..plan.pings {
        let sent = Instant::now();
        let _: String = redis::cmd("PING").query_async(&mut connection).await?;
        round_trips.push(sent.elapsed());
    }
    round_trips.sort_unstable();
    let round_trip_median = round_trips[round_trips.len() / 2];

    let sets_elapsed = queued_sets(&connection, plan).await?;
    let mut cleanup = redis::cmd("DEL");
    for index in 0..plan.sets {
        cleanup.arg(format!("{KEY_PREFIX}{index}"));
    }
    let _: i64 = cleanup.query_async(&mut connection).await?;

    let bytes = u128::from(plan.sets) * plan.set_bytes as u128;
    let transfer_nanos = sets_elapsed
        .saturating_sub(round_trip_median)
        .as_nanos()
        .max(1);
    let bytes_per_second =
        u64::try_from(bytes * 1_000_000_000 / transfer_nanos).unwrap_or(u64::MAX);
    Ok(Calibration {
        plan,
        round_trip_median,
        sets_elapsed,
        bytes_per_second,
    })
}

/// Sends every SET at once on clones of one connection (so they queue on its one socket) and
/// returns the time from the first send to the last reply. Each SET is built in its own task
/// from one shared value, as a live run's burst builds its writes (`outagelab live`), so the
/// client's own per-byte cost (copying the value into the command, packing it) is the one a
/// live run pays.
async fn queued_sets(connection: &MultiplexedConnection, plan: Plan) -> RedisResult<Duration> {
    let value: std::sync::Arc<[u8]> = vec![b'x'; plan.set_bytes].into();
    let started = Instant::now();
    let mut sets = tokio::task::JoinSet::new();
    for index in 0..plan.sets {
        let (mut connection, value) = (connection.clone(), std::sync::Arc::clone(&value));
        sets.spawn(async move {
            let mut command = redis::cmd("SET");
            command.arg(format!("{KEY_PREFIX}{index}")).arg(&value[..]);
            command.query_async::<()>(&mut connection).await
        });
    }
    // Bounded: one join per SET spawned.
    while let Some(joined) = sets.join_next().await {
        joined.expect("a SET task finished")?;
    }
    Ok(started.elapsed())
}
