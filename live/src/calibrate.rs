//! What the simulator's connection parameters mean on this machine, measured against a real
//! Redis on multiplexed connections (the `redis` crate, as the slot uses it):
//!
//! - **latency**: half the median round trip of [`Plan::pings`] PINGs sent one after another
//!   (the simulator's `latency` is one way);
//! - **the client loop's write rate**: the client is one event loop (a current-thread tokio
//!   runtime, as `outagelab live` runs, and as ioredis' Node is one thread), and every command
//!   of every connection is built and handed to its connection by that loop, one after
//!   another. A task spawned right after the [`Plan::sets`] SETs of [`Plan::set_bytes`] each
//!   first runs once the loop has built every one (copying the value into the command,
//!   packing it): bytes over that time is the simulator's `[client_loops] write_rate`.
//! - **the writer's first turn**: that task's PING, on a second connection, is answered only
//!   after the first connection's writer has had its turn, which comes after the builds: it
//!   writes into the socket as long as the socket takes bytes before the loop looks at
//!   anything else. What the PING waits beyond its round trip from the task's first run is
//!   that turn. A burst of [`Plan::small_sets`] (small enough for one turn) gives its copy
//!   rate (`copy_rate`); the big burst's turn, at that rate, gives how much it copies before
//!   it yields (`copy_before_yield`).
//! - **bandwidth**: the same SETs, all queued at once on the one connection, as seed 000's
//!   blob writes were, from the first send to the last reply, less one round trip. The
//!   simulator builds every SET of the burst first (`B`), then sends each through its writer
//!   and the connection's pipe, two stages one after the other, so the pipe's time per SET is
//!   solved from that tandem: with `c` the writer's time to copy a SET and `T` the burst's,
//!   `T - B = c + K b` when the pipe is the slower stage (`b >= c`), else `T - B = K c + b`.
//!   It folds in the server's own per-byte cost and the socket's, which the simulator's pipe
//!   bandwidth stands for.
//!
//! - **per-command cost**: what the server says it spent executing them (`INFO
//!   commandstats`, read before and after, so its totals are not reset): an `INCR`'s time per
//!   call is the simulator's server `command_cost`, and what a SET of [`Plan::set_bytes`]
//!   took beyond it gives the server's `byte_rate` (none when the server's big SET takes no
//!   longer: Redis keeps a big argument's buffer instead of copying it). Time reading the
//!   request off the socket is not in these figures; it is in the bandwidth.
//!
//! Bounds: a fixed number of commands, each under the connection's response timeout
//! ([`RESPONSE_TIMEOUT`]). The keys written are deleted at the end. Integer arithmetic only.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisError, RedisResult};
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
    /// INCRs sent one after another, for the server's cost of a command.
    pub incrs: u32,
    /// A small burst of SETs of `set_bytes`, all copied in the writer's first turn (measured
    /// first, before the big one).
    pub small_sets: u32,
}

impl Plan {
    /// Seed 000's shape: 60 queued SETs of 2 MiB (the figure the HOL scenario fits), after
    /// 200 PINGs.
    pub const SEED_000: Plan = Plan {
        pings: 200,
        sets: 60,
        set_bytes: 2 << 20,
        incrs: 1000,
        small_sets: 4,
    };
}

/// What was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Calibration {
    pub plan: Plan,
    pub round_trip_median: Duration,
    /// From the first SET sent to the last reply.
    pub sets_elapsed: Duration,
    /// A burst's turns on the client loop: the big one's ([`Plan::sets`]) and the small
    /// one's ([`Plan::small_sets`]).
    pub burst: LoopTurns,
    pub small_burst: LoopTurns,
    /// The server's own time per INCR and per SET, from its command statistics.
    pub incr_server_nanos: u64,
    pub set_server_nanos: u64,
}

/// What the client loop spent on one burst of SETs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopTurns {
    /// From the first SET spawned to the first run of a task spawned after the last: the
    /// loop's time building them.
    pub build: Duration,
    /// From then until that task's PING on another connection was answered, less a round
    /// trip: the first connection's writer's first turn.
    pub writer: Duration,
}

impl Calibration {
    /// The one-way latency the simulator's `latency` key means.
    pub fn latency_one_way(&self) -> Duration {
        self.round_trip_median / 2
    }

    /// The client loop's write rate: the SETs' bytes over the loop's time building them.
    pub fn loop_bytes_per_second(&self) -> u64 {
        rate(self.bytes(), self.burst.build)
    }

    /// The writer's copy rate: the small burst's bytes over its writer's turn.
    pub fn copy_bytes_per_second(&self) -> u64 {
        let bytes = u128::from(self.plan.small_sets) * self.plan.set_bytes as u128;
        rate(bytes, self.small_burst.writer)
    }

    /// How much the writer copies before it yields: the big burst's turn at the copy rate,
    /// at least the small burst (which one turn copied) and at most the big one.
    /// (At the copy rate in whole MiB/s, as the snippet prints it, so that the simulated turn
    /// lasts what was measured.)
    pub fn copy_before_yield(&self) -> u64 {
        let printed_rate = (self.copy_bytes_per_second() >> 20).max(1) << 20;
        let copied = u128::from(printed_rate) * self.burst.writer.as_nanos() / 1_000_000_000;
        let small = u128::from(self.plan.small_sets) * self.plan.set_bytes as u128;
        let most = copied.clamp(small.min(self.bytes()), self.bytes().max(1));
        u64::try_from(most).unwrap_or(u64::MAX)
    }

    /// The connection's bandwidth: the pipe stage of the writer-then-pipe tandem the simulator
    /// puts each SET through once the burst is built, solved from the burst's time less one
    /// round trip and the builds (see the module's documentation), at the copy rate as the
    /// snippet prints it.
    pub fn bytes_per_second(&self) -> u64 {
        let sets = u128::from(self.plan.sets);
        let burst = self
            .sets_elapsed
            .saturating_sub(self.round_trip_median)
            .as_nanos();
        let after_builds = burst.saturating_sub(self.burst.build.as_nanos());
        let per_set_copy = self.plan.set_bytes as u128 * 1_000_000_000
            / u128::from((self.copy_bytes_per_second() >> 20).max(1) << 20);
        let per_set_pipe = if after_builds >= (sets + 1) * per_set_copy {
            (after_builds - per_set_copy) / sets
        } else {
            after_builds.saturating_sub(sets * per_set_copy)
        };
        // A writer about as slow as the whole burst leaves the pipe next to nothing; a pipe
        // faster than the writer by more than that is not told apart from it, so its time per
        // SET is taken as at least a tenth of the writer's.
        let per_set_pipe = per_set_pipe.max(per_set_copy / 10).max(1);
        let rate = self.plan.set_bytes as u128 * 1_000_000_000 / per_set_pipe;
        u64::try_from(rate).unwrap_or(u64::MAX)
    }

    fn bytes(&self) -> u128 {
        u128::from(self.plan.sets) * self.plan.set_bytes as u128
    }

    /// The server's cost of executing any command: an INCR's.
    pub fn command_cost(&self) -> Duration {
        Duration::from_nanos(self.incr_server_nanos.max(1))
    }

    /// The server's per-byte cost, from what a SET took beyond an INCR; `None` when it took
    /// no longer (bytes are free to execute).
    pub fn server_byte_rate(&self) -> Option<u64> {
        let extra_nanos = self.set_server_nanos.checked_sub(self.incr_server_nanos)?;
        if extra_nanos == 0 {
            return None;
        }
        let rate = self.plan.set_bytes as u128 * 1_000_000_000 / u128::from(extra_nanos);
        Some(u64::try_from(rate).unwrap_or(u64::MAX))
    }

    /// A `[servers]`, a `[client_loops]` and a `[connections]` table to paste into a scenario
    /// file (the server table's two keys replace the file's own `command_cost` and
    /// `byte_rate`; the client loop is named as the connection is, and every connection of
    /// the client names it).
    pub fn snippet(&self, name: &str, server: &str) -> String {
        let latency_us = self.latency_one_way().as_micros().max(1);
        let mib_per_second = (self.bytes_per_second() >> 20).max(1);
        let loop_mib_per_second = (self.loop_bytes_per_second() >> 20).max(1);
        let byte_rate = match self.server_byte_rate() {
            Some(rate) => format!("byte_rate = \"{}MiB/s\"\n", (rate >> 20).max(1)),
            None => "# no byte_rate: the server's SET took no longer than its INCR\n".to_owned(),
        };
        format!(
            "# measured by `outagelab calibrate`: median of {pings} PING round trips {rtt_us}us; \
             {sets} queued SETs of {size} bytes on one connection in {elapsed_ms} ms, built by \
             the client loop in {build_ms} ms, its writer's first turn {turn_ms} ms ({small} SETs: \
             {small_turn_us}us); the server's own time per call (INFO commandstats): INCR \
             {incr_ns} ns over {incrs}, SET {set_ns} ns\n\
             [servers.{server}]\n\
             command_cost = \"{command_ns}ns\"\n\
             {byte_rate}\n\
             [client_loops.{name}]\n\
             write_rate = \"{loop_mib_per_second}MiB/s\"\n\
             copy_rate = \"{copy_mib_per_second}MiB/s\"\n\
             copy_before_yield = {copy_before_yield}\n\
             \n\
             [connections.{name}]\n\
             server = \"{server}\"\n\
             latency = \"{latency_us}us\"\n\
             bandwidth = \"{mib_per_second}MiB/s\"\n\
             client_loop = \"{name}\"\n",
            pings = self.plan.pings,
            rtt_us = self.round_trip_median.as_micros(),
            sets = self.plan.sets,
            size = self.plan.set_bytes,
            elapsed_ms = self.sets_elapsed.as_millis(),
            build_ms = self.burst.build.as_millis(),
            turn_ms = self.burst.writer.as_millis(),
            small = self.plan.small_sets,
            small_turn_us = self.small_burst.writer.as_micros(),
            copy_mib_per_second = (self.copy_bytes_per_second() >> 20).max(1),
            copy_before_yield = self.copy_before_yield(),
            incr_ns = self.incr_server_nanos,
            incrs = self.plan.incrs,
            set_ns = self.set_server_nanos,
            command_ns = self.command_cost().as_nanos(),
        )
    }
}

/// Measures against the server at `address` (`host:port`). Runs on a current-thread runtime
/// only (an error otherwise): the client loop's share is what one thread spends.
pub async fn calibrate(address: &str, plan: Plan) -> RedisResult<Calibration> {
    assert!(
        plan.pings > 0
            && plan.sets > 0
            && plan.set_bytes > 0
            && plan.incrs > 0
            && plan.small_sets > 0,
        "an empty plan"
    );
    if tokio::runtime::Handle::current().runtime_flavor()
        != tokio::runtime::RuntimeFlavor::CurrentThread
    {
        return Err(RedisError::from(std::io::Error::other(
            "calibrate runs on a current-thread runtime: the client loop it measures is one \
             thread",
        )));
    }
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

    let before = command_stats(&mut connection).await?;
    let other = client
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    // The small burst first, in a process that has not yet written big values (as a live
    // run's small burst is): one that has reuses their memory and writes the next faster.
    let (_, small_burst) = queued_sets(
        &connection,
        &other,
        plan.small_sets,
        plan.sets,
        plan,
        round_trip_median,
    )
    .await?;
    let (sets_elapsed, burst) =
        queued_sets(&connection, &other, plan.sets, 0, plan, round_trip_median).await?;
    let counter = format!("{KEY_PREFIX}counter");
    for _ in 0..plan.incrs {
        let _: i64 = redis::cmd("INCR")
            .arg(&counter)
            .query_async(&mut connection)
            .await?;
    }
    let after = command_stats(&mut connection).await?;
    let per_call = |command: &str| {
        let (calls, usec) = after.per(command, &before);
        // Microseconds over calls, as nanoseconds per call.
        (usec * 1000).checked_div(calls).unwrap_or(0)
    };
    let (set_server_nanos, incr_server_nanos) = (per_call("set"), per_call("incr"));
    let mut cleanup = redis::cmd("DEL");
    cleanup.arg(&counter);
    for index in 0..plan.sets + plan.small_sets {
        cleanup.arg(format!("{KEY_PREFIX}{index}"));
    }
    let _: i64 = cleanup.query_async(&mut connection).await?;

    Ok(Calibration {
        plan,
        round_trip_median,
        sets_elapsed,
        burst,
        small_burst,
        incr_server_nanos,
        set_server_nanos,
    })
}

/// `INFO commandstats`: calls and microseconds per command, since the server started (or its
/// last `CONFIG RESETSTAT`).
struct CommandStats(std::collections::BTreeMap<String, (u64, u64)>);

impl CommandStats {
    /// Calls and microseconds of `command` since `earlier`.
    fn per(&self, command: &str, earlier: &CommandStats) -> (u64, u64) {
        let at = |stats: &CommandStats| stats.0.get(command).copied().unwrap_or((0, 0));
        let ((calls, usec), (calls_before, usec_before)) = (at(self), at(earlier));
        (
            calls.saturating_sub(calls_before),
            usec.saturating_sub(usec_before),
        )
    }
}

async fn command_stats(connection: &mut MultiplexedConnection) -> RedisResult<CommandStats> {
    let text: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(connection)
        .await?;
    Ok(CommandStats(parse_command_stats(&text)))
}

/// `cmdstat_set:calls=60,usec=1234,usec_per_call=20.57,...` lines as `set -> (60, 1234)`.
fn parse_command_stats(text: &str) -> std::collections::BTreeMap<String, (u64, u64)> {
    text.lines()
        .filter_map(|line| {
            let (name, fields) = line.trim().strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |key: &str| {
                fields
                    .split(',')
                    .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
                    .and_then(|value| value.parse::<u64>().ok())
            };
            Some((name.to_owned(), (field("calls")?, field("usec")?)))
        })
        .collect()
}

/// Sends `sets` SETs (keys from `first_key`) at once on clones of one connection (so they
/// queue on its one socket) and returns the time from the first send to the last reply, and
/// the loop's turns for them: when a task spawned after the last SET first ran, and when its
/// PING on `other`, a second connection of the same client, was answered. Each SET is built
/// in its own task from one shared value, as a live run's burst builds its writes (`outagelab
/// live`), so the client's own per-byte cost (copying the value into the command, packing
/// it) is the one a live run pays.
async fn queued_sets(
    connection: &MultiplexedConnection,
    other: &MultiplexedConnection,
    sets: u32,
    first_key: u32,
    plan: Plan,
    round_trip: Duration,
) -> RedisResult<(Duration, LoopTurns)> {
    let value: std::sync::Arc<[u8]> = vec![b'x'; plan.set_bytes].into();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for index in first_key..first_key + sets {
        let (mut connection, value) = (connection.clone(), std::sync::Arc::clone(&value));
        tasks.spawn(async move {
            let mut command = redis::cmd("SET");
            command.arg(format!("{KEY_PREFIX}{index}")).arg(&value[..]);
            command.query_async::<()>(&mut connection).await
        });
    }
    // Spawned after every SET: on one thread, it first runs once the loop has built each, and
    // its PING is answered once the first connection's writer has had its turn.
    let mut other = other.clone();
    let probe = tokio::spawn(async move {
        let built = started.elapsed();
        let _: String = redis::cmd("PING").query_async(&mut other).await?;
        RedisResult::Ok((built, started.elapsed()))
    });
    // Bounded: one join per SET spawned.
    while let Some(joined) = tasks.join_next().await {
        joined.expect("a SET task finished")?;
    }
    let sets_elapsed = started.elapsed();
    let (built, answered) = probe.await.expect("the probe task finished")?;
    // The PING took one round trip beyond the writer's turn.
    let writer = answered.saturating_sub(built).saturating_sub(round_trip);
    Ok((
        sets_elapsed,
        LoopTurns {
            build: built,
            writer,
        },
    ))
}

/// `bytes` over `elapsed`, per second (an `elapsed` of zero taken as a nanosecond).
fn rate(bytes: u128, elapsed: Duration) -> u64 {
    u64::try_from(bytes * 1_000_000_000 / elapsed.as_nanos().max(1)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 60 SETs of 2 MiB over 300 ms, built in 120 ms, the writer's turn 20 ms; 4 SETs (8 MiB)
    /// copied in 4 ms.
    fn measured() -> Calibration {
        Calibration {
            plan: Plan::SEED_000,
            round_trip_median: Duration::from_micros(40),
            sets_elapsed: Duration::from_millis(300),
            burst: LoopTurns {
                build: Duration::from_millis(120),
                writer: Duration::from_millis(20),
            },
            small_burst: LoopTurns {
                build: Duration::from_millis(8),
                writer: Duration::from_millis(4),
            },
            incr_server_nanos: 2_000,
            set_server_nanos: 2_000,
        }
    }

    #[test]
    fn command_statistics_are_read_by_command() {
        let text = "# Commandstats\r\ncmdstat_set:calls=60,usec=1234,usec_per_call=20.57,\
                    rejected_calls=0,failed_calls=0\r\ncmdstat_incr:calls=1000,usec=2500,\
                    usec_per_call=2.50\r\n";
        let stats = parse_command_stats(text);
        assert_eq!(stats["set"], (60, 1234));
        assert_eq!(stats["incr"], (1000, 2500));
        let earlier = CommandStats([("set".to_owned(), (10, 234))].into());
        assert_eq!(CommandStats(stats).per("set", &earlier), (50, 1000));
    }

    #[test]
    fn a_set_no_slower_than_an_incr_makes_bytes_free() {
        let mut calibration = measured();
        assert_eq!(calibration.server_byte_rate(), None);
        assert!(calibration.snippet("c", "redis").contains("# no byte_rate"));
        // 2 MiB in 512 us beyond the INCR's 2 us: 4.096 GB/s, 3906 MiB/s.
        calibration.set_server_nanos = 514_000;
        assert_eq!(calibration.server_byte_rate(), Some(4_096_000_000));
        assert!(
            calibration.snippet("c", "redis").contains(
                "[servers.redis]\ncommand_cost = \"2000ns\"\nbyte_rate = \"3906MiB/s\"\n"
            )
        );
    }

    #[test]
    fn the_pipe_is_solved_from_the_writer_then_pipe_tandem_after_the_builds() {
        let mut calibration = Calibration {
            // 60 SETs: 300 ms less the round trip.
            sets_elapsed: Duration::from_micros(300_040),
            ..measured()
        };
        // 120 MiB built in 120 ms.
        assert_eq!(calibration.loop_bytes_per_second(), 1_048_576_000);
        // 8 MiB copied in 4 ms (1 ms a SET); the big burst's turn, 20 ms of it, copied 40 MiB.
        assert_eq!(calibration.copy_bytes_per_second(), 2_097_152_000);
        assert_eq!(calibration.copy_before_yield(), 40 * 1_048_576);
        // The pipe is the slower stage: 300 - 120 = 1 + 60 b, b = 2.9833 ms a 2 MiB SET.
        assert_eq!(
            calibration.bytes_per_second(),
            2_097_152_000_000_000 / 2_983_333
        );
        let snippet = calibration.snippet("tokio", "redis");
        assert!(
            snippet.contains(
                "[client_loops.tokio]\nwrite_rate = \"1000MiB/s\"\ncopy_rate = \"2000MiB/s\"\n\
                 copy_before_yield = 41943040\n\n[connections.tokio]\n\
                 server = \"redis\"\nlatency = \"20us\"\nbandwidth = \"670MiB/s\"\n\
                 client_loop = \"tokio\"\n"
            ),
            "{snippet}"
        );
        // The writer is the slower stage: 60.5 = 60 x 1 + b, b = 0.5 ms.
        calibration.sets_elapsed = Duration::from_micros(180_540);
        assert_eq!(calibration.bytes_per_second(), 4_194_304_000);
    }

    #[test]
    fn the_writer_copies_at_least_the_small_burst_and_at_most_the_big_one() {
        let mut calibration = measured();
        calibration.burst.writer = Duration::from_millis(2);
        // A big turn shorter than the small one (noise): the small burst, which one turn took.
        assert_eq!(calibration.copy_before_yield(), 8 << 20);
        // A big turn long enough for more than the burst: the burst.
        calibration.burst.writer = Duration::from_secs(1);
        assert_eq!(calibration.copy_before_yield(), 120 << 20);
    }
}
