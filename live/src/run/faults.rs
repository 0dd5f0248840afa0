//! The server side of a live run, through one admin connection: the file's server settings
//! before the run (and the server's own put back after it), its faults injected with the
//! real commands, and what the server says about its memory at the end.
//!
//! | fault | command |
//! |---|---|
//! | `pause` | `CLIENT PAUSE <ms> ALL` (`WRITE` with `mode = "write"`) |
//! | `hang` | `DEBUG SLEEP <s>`; where the server refuses DEBUG (Redis 7's default), `CLIENT PAUSE <ms> ALL`, said on standard error |
//! | `kill` | `CLIENT KILL TYPE normal` (every client but the admin connection itself) |
//! | `maxmemory` | `CONFIG SET maxmemory <bytes>` |
//! | `flushall` | `FLUSHALL` |
//! | `stop` | every connection's forwarder down (connects refused, links dropped); at the end `FLUSHALL` unless `persistence`, the file's settings again, the forwarders up |
//! | `disconnect` | that connection's forwarder down for the fault's length |
//! | `latency`, `bandwidth` | that connection's forwarder delays (within the jitter) or paces the bytes it carries for the fault's length |
//!
//! The last two cut the network, not the server: a live run whose file has either puts a
//! [`crate::forwarder::Forwarder`] in front of each connection (`mod.rs`), and injects them
//! there; this connection gives the restart's commands.
//!
//! The admin connection has no response timeout of its own (a `DEBUG SLEEP` answers when the
//! server wakes); every command is bounded by [`GRACE`] past the fault's length, and never
//! waits past the run's deadline ([`Admin::set_deadline`]: the measured time's end plus
//! [`GRACE`]). A command whose connection was refused or dropped forgets it, and the next
//! command connects again: a server that comes back is used again, as a reconnect slot does.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use outagelab_model::time::SimDuration;
use outagelab_report::ServerSummary;
use outagelab_sim::Scenario;
use outagelab_sim::scenario::{FaultKind, FaultSpec, PauseMode};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Cmd, RedisError, RedisResult, Value};

use tokio::time::Instant;

use super::locked;
use super::survive::{GRACE, Silence};
use crate::clock::std_duration;

/// The prefix of every key a live run writes (`outagelab:live:<family>:<index>`); the keys
/// under it are deleted before each run and after it.
pub const KEY_PREFIX: &str = "outagelab:live:";

/// The name a live run gives the key `index` of the family `family`.
pub(crate) fn live_key(family: &str, index: u32) -> String {
    format!("{KEY_PREFIX}{family}:{index}")
}

/// Preloaded keys are written at most this many to a pipeline...
const PRELOAD_BATCH: u32 = 256;

/// ... and at most this many bytes of values (but one key at least): a pipeline must be
/// answered within [`GRACE`], and 16 MiB is a small part of what loopback carries in it.
const PRELOAD_BATCH_BYTES: u64 = 16 << 20;

/// How many keys of `value_bytes` each go to one preload pipeline: from 1 to
/// [`PRELOAD_BATCH`].
fn preload_batch(value_bytes: u32) -> u32 {
    let fit = PRELOAD_BATCH_BYTES / u64::from(value_bytes.max(1));
    u32::try_from(fit)
        .unwrap_or(u32::MAX)
        .clamp(1, PRELOAD_BATCH)
}

/// The server settings a run changes, read before it and set back after it.
pub(crate) const SAVED: [&str; 4] = ["maxmemory", "maxmemory-policy", "maxmemory-samples", "hz"];

/// Most SCAN calls while deleting the run's keys (each looks at up to 1000 keys).
const SCAN_CALLS_MAX: u32 = 1_000_000;

/// The run's connection to the server for its own commands. Invariant: no command waits past
/// its own length plus [`GRACE`], nor past the deadline once one is set; a lost connection is
/// made again by the next command (within that command's bound).
pub(crate) struct Admin {
    client: Client,
    /// `None` before the first command and once lost.
    connection: Mutex<Option<MultiplexedConnection>>,
    /// Set when a connection is made again after one was lost (taken by [`Admin::take_reconnected`]).
    reconnected: AtomicBool,
    /// No command waits past this, once set.
    deadline: Mutex<Option<Instant>>,
    saved: Vec<(String, String)>,
    /// The server's `run_id` when the run was set up: another one later is a restarted server.
    run_id: Mutex<Option<String>>,
}

/// The error of an admin command that was not answered in time.
fn not_answered(what: &str) -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("the server did not answer {what}"),
    ))
}

/// Whether `error` means the connection is gone (refused, dropped, broken), not that a reply
/// is late or says no.
fn is_lost(error: &RedisError) -> bool {
    !error.is_timeout()
        && (error.is_io_error() || error.is_connection_dropped() || error.is_connection_refusal())
}

/// How a server that gave `error` instead of an answer is silent; `None` when it answered
/// (an error reply is an answer).
pub(crate) fn silence_of(error: &RedisError) -> Option<Silence> {
    if error.is_timeout() {
        Some(Silence::Stalled)
    } else if is_lost(error) {
        Some(Silence::Unreachable)
    } else {
        None
    }
}

impl Admin {
    /// Connects to `address` within [`GRACE`].
    pub async fn connect(address: &str) -> RedisResult<Admin> {
        let admin = Admin {
            client: Client::open(format!("redis://{address}/"))?,
            connection: Mutex::new(None),
            reconnected: AtomicBool::new(false),
            deadline: Mutex::new(None),
            saved: Vec::new(),
            run_id: Mutex::new(None),
        };
        admin.query(&redis::cmd("PING"), Duration::ZERO).await?;
        Ok(admin)
    }

    /// From now on no command waits past `deadline` (nor past an earlier one already set).
    pub fn set_deadline(&self, deadline: Instant) {
        let mut set = locked(&self.deadline);
        *set = Some(set.map_or(deadline, |earlier| earlier.min(deadline)));
    }

    /// Whether a connection was made again after one was lost, since the last call.
    pub fn take_reconnected(&self) -> bool {
        self.reconnected.swap(false, Ordering::SeqCst)
    }

    /// The connection, made now if there is none.
    async fn connection(&self) -> RedisResult<MultiplexedConnection> {
        if let Some(connection) = locked(&self.connection).clone() {
            return Ok(connection);
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(GRACE))
            .set_response_timeout(None);
        let connection = (self.client)
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let mut slot = locked(&self.connection);
        if slot.is_none() {
            *slot = Some(connection.clone());
        }
        Ok(connection)
    }

    /// Runs `work` on the connection, for at most `wait` and never past the deadline; forgets
    /// the connection if `work` finds it gone.
    async fn bounded<T, F>(
        &self,
        wait: Duration,
        what: &str,
        work: impl FnOnce(MultiplexedConnection) -> F,
    ) -> RedisResult<T>
    where
        F: std::future::Future<Output = RedisResult<T>>,
    {
        let mut until = Instant::now() + wait;
        if let Some(deadline) = *locked(&self.deadline) {
            until = until.min(deadline);
        }
        let attempt = async {
            let had = locked(&self.connection).is_some();
            let connection = self.connection().await?;
            if !had && locked(&self.run_id).is_some() {
                self.reconnected.store(true, Ordering::SeqCst);
            }
            work(connection).await
        };
        let result = match tokio::time::timeout_at(until, attempt).await {
            Ok(result) => result,
            Err(_) => Err(not_answered(what)),
        };
        if let Err(error) = &result
            && is_lost(error)
        {
            *locked(&self.connection) = None;
        }
        result
    }

    /// `cmd`, for at most `length` plus [`GRACE`] (and never past the deadline).
    async fn query(&self, cmd: &Cmd, length: Duration) -> RedisResult<Value> {
        self.query_within(cmd, length + GRACE).await
    }

    async fn query_within(&self, cmd: &Cmd, wait: Duration) -> RedisResult<Value> {
        self.bounded(wait, "the admin connection", |mut connection| async move {
            cmd.query_async(&mut connection).await
        })
        .await
    }

    /// A `PING` answered within `wait`.
    pub async fn ping(&self, wait: Duration) -> RedisResult<()> {
        self.query_within(&redis::cmd("PING"), wait).await.map(drop)
    }

    /// The server's `run_id` (`INFO server`).
    async fn read_run_id(&self) -> RedisResult<Option<String>> {
        let text = self.info(&["server"]).await?;
        Ok(info_fields(&text).get("run_id").map(|id| (*id).to_owned()))
    }

    /// Whether the server is another process than the one the run was set up on (it
    /// restarted); the new one's `run_id` is kept, so a restart is found once.
    pub async fn restarted(&self) -> RedisResult<bool> {
        let now = self.read_run_id().await?;
        let mut known = locked(&self.run_id);
        let restarted = known.is_some() && now.is_some() && *known != now;
        if now.is_some() {
            *known = now;
        }
        Ok(restarted)
    }

    async fn config_set(&self, name: &str, value: &str) -> RedisResult<()> {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("SET").arg(name).arg(value);
        self.query(&cmd, Duration::ZERO).await.map(drop)
    }

    /// Saves what the run will change, deletes what an earlier run left, and applies the
    /// file's server settings (memory limit, policy, samples, `hz`); resets the server's
    /// statistics so the run's evictions and errors are its own.
    pub async fn prepare(&mut self, scenario: &Scenario) -> RedisResult<()> {
        self.query(&redis::cmd("CLIENT").arg("UNPAUSE").clone(), Duration::ZERO)
            .await?;
        self.saved.clear();
        for name in SAVED {
            let mut cmd = redis::cmd("CONFIG");
            cmd.arg("GET").arg(name);
            let pairs: Vec<String> =
                redis::from_redis_value(self.query(&cmd, Duration::ZERO).await?)?;
            if let [_, value] = pairs.as_slice() {
                self.saved.push((name.to_owned(), value.clone()));
            }
        }
        self.delete_run_keys().await?;
        self.preload(scenario).await?;
        self.apply_settings(scenario).await?;
        self.query(
            &redis::cmd("CONFIG").arg("RESETSTAT").clone(),
            Duration::ZERO,
        )
        .await?;
        let run_id = self.read_run_id().await?;
        *locked(&self.run_id) = run_id;
        Ok(())
    }

    /// Writes the keys the file's server starts with (`preload`: the first `count` keys of a
    /// family, each a value of `value_bytes`, without expiry), before its memory limit is
    /// set, as the simulated server holds them from the start. Bounded: one pipeline per
    /// [`preload_batch`] keys, each answered within [`GRACE`].
    async fn preload(&self, scenario: &Scenario) -> RedisResult<()> {
        let Some(server) = scenario.servers.first() else {
            return Ok(());
        };
        for preload in &server.preload {
            let family = &scenario.keys[preload.family.index()].name;
            let value = vec![b'x'; preload.value_bytes as usize];
            let batch = preload_batch(preload.value_bytes);
            let mut start = 0;
            while start < preload.count {
                let end = preload.count.min(start + batch);
                let mut pipeline = redis::pipe();
                for index in start..end {
                    pipeline.set(live_key(family, index), &value[..]).ignore();
                }
                self.bounded(GRACE, "the preloaded keys", |mut connection| async move {
                    pipeline.query_async::<()>(&mut connection).await
                })
                .await?;
                start = end;
            }
        }
        Ok(())
    }

    /// The file's server settings: memory limit, policy, samples, `hz` (as a server started
    /// with them has them).
    pub async fn apply_settings(&self, scenario: &Scenario) -> RedisResult<()> {
        let Some(server) = scenario.servers.first() else {
            return Ok(());
        };
        let memory = server.memory;
        self.config_set("maxmemory", &memory.maxmemory.unwrap_or(0).to_string())
            .await?;
        self.config_set("maxmemory-policy", memory.policy.name())
            .await?;
        if let outagelab_sim::scenario::EvictionSamples::Sampled(samples) = memory.samples {
            self.config_set("maxmemory-samples", &samples.to_string())
                .await?;
        }
        if let Some(hz) = server.hz {
            self.config_set("hz", &hz.to_string()).await?;
        }
        Ok(())
    }

    /// What a stopped server is like when it starts again: without `persistence` its keys are
    /// gone (`FLUSHALL`), and it runs with its configured settings, the file's (a `maxmemory`
    /// fault's limit does not outlive a restart).
    pub async fn restart(&self, scenario: &Scenario) -> RedisResult<()> {
        let persistence = scenario
            .servers
            .first()
            .is_some_and(|server| server.persistence);
        if !persistence {
            self.query(&redis::cmd("FLUSHALL"), Duration::ZERO).await?;
        }
        self.apply_settings(scenario).await
    }

    /// Puts back what [`Admin::prepare`] changed, ends a pause, deletes the run's keys.
    pub async fn restore(&self) -> RedisResult<()> {
        self.query(&redis::cmd("CLIENT").arg("UNPAUSE").clone(), Duration::ZERO)
            .await?;
        for (name, value) in &self.saved {
            self.config_set(name, value).await?;
        }
        self.delete_run_keys().await
    }

    async fn delete_run_keys(&self) -> RedisResult<()> {
        let mut cursor: u64 = 0;
        for _ in 0..SCAN_CALLS_MAX {
            let mut scan = redis::cmd("SCAN");
            scan.arg(cursor)
                .arg("MATCH")
                .arg(format!("{KEY_PREFIX}*"))
                .arg("COUNT")
                .arg(1000);
            let (next, keys): (u64, Vec<String>) =
                redis::from_redis_value(self.query(&scan, Duration::ZERO).await?)?;
            if !keys.is_empty() {
                // DEL, not UNLINK: the memory is freed before the next run starts, not by the
                // server's background thread while it runs.
                let mut delete = redis::cmd("DEL");
                delete.arg(&keys);
                self.query(&delete, Duration::ZERO).await?;
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
        Err(RedisError::from(std::io::Error::other(format!(
            "deleting {KEY_PREFIX}* took more than {SCAN_CALLS_MAX} SCAN calls"
        ))))
    }

    /// Injects `fault` now; `rest` is what is left of the run, the length of a fault without
    /// a duration. Returns a note when the fault had to be injected another way than its
    /// command (DEBUG refused).
    pub async fn inject(
        &self,
        fault: &FaultSpec,
        rest: SimDuration,
    ) -> RedisResult<Option<String>> {
        // Never past the run's end: a `DEBUG SLEEP` that outlasted it would hold the server
        // through the teardown, which then could not read it.
        let length = std_duration(fault.duration.unwrap_or(rest).min(rest));
        let millis = length.as_millis().max(1).to_string();
        let pause = |mode: &str| {
            let mut cmd = redis::cmd("CLIENT");
            cmd.arg("PAUSE").arg(&millis).arg(mode);
            cmd
        };
        let command = match fault.kind {
            FaultKind::Pause(PauseMode::All) => pause("ALL"),
            FaultKind::Pause(PauseMode::Write) => pause("WRITE"),
            FaultKind::Hang => {
                let mut sleep = redis::cmd("DEBUG");
                sleep
                    .arg("SLEEP")
                    .arg(format!("{:.6}", length.as_secs_f64()));
                return match self.query(&sleep, length).await {
                    Ok(_) => Ok(None),
                    Err(error) if is_debug_refused(&error) => {
                        self.query(&pause("ALL"), Duration::ZERO).await?;
                        Ok(Some(format!(
                            "faults.{}: the server refuses DEBUG (enable-debug-command), so the \
                             hang is a CLIENT PAUSE {millis} ALL: commands wait, but new \
                             connections are accepted",
                            fault.name
                        )))
                    }
                    Err(error) => Err(error),
                };
            }
            FaultKind::Kill => {
                let mut kill = redis::cmd("CLIENT");
                kill.arg("KILL").arg("TYPE").arg("normal");
                kill
            }
            FaultKind::MaxMemory(limit) => {
                let mut set = redis::cmd("CONFIG");
                set.arg("SET")
                    .arg("maxmemory")
                    .arg(limit.unwrap_or(0).to_string());
                set
            }
            FaultKind::FlushAll => redis::cmd("FLUSHALL"),
            FaultKind::Stop | FaultKind::Disconnect => {
                unreachable!("injected at the forwarders (run::cut_network)")
            }
            FaultKind::Crash
            | FaultKind::CpuThrottle { .. }
            | FaultKind::ErrorReply { .. }
            | FaultKind::Failover { .. }
            | FaultKind::Slow { .. }
            | FaultKind::Refuse
            | FaultKind::PoolExhausted { .. }
            | FaultKind::LockHeld { .. } => unreachable!("refused by the live check"),
            FaultKind::Latency { .. }
            | FaultKind::Bandwidth(_)
            | FaultKind::PacketLoss { .. }
            | FaultKind::SlowClose { .. } => {
                unreachable!("injected at the forwarders (run::toxify)")
            }
        };
        self.query(&command, Duration::ZERO).await.map(|_| None)
    }

    async fn info(&self, sections: &[&str]) -> RedisResult<String> {
        let mut info = redis::cmd("INFO");
        for section in sections {
            info.arg(*section);
        }
        Ok(redis::from_redis_value(
            self.query(&info, Duration::ZERO).await?,
        )?)
    }

    /// The server's memory in use, and the keys it has evicted and expired since the
    /// statistics were reset at the start of the run.
    pub async fn memory_sample(&self) -> RedisResult<MemorySample> {
        let text = self.info(&["memory", "stats"]).await?;
        let fields = info_fields(&text);
        let number = |name: &str| number(&fields, name);
        Ok(MemorySample {
            used_memory: number("used_memory"),
            evicted_keys: number("evicted_keys"),
            expired_keys: number("expired_keys"),
        })
    }

    /// What the server says about its memory now (`INFO memory`, `stats`, `errorstats`),
    /// since the statistics were reset at the start of the run.
    pub async fn server_summary(&self) -> RedisResult<ServerSummary> {
        let text = self.info(&["memory", "stats", "errorstats"]).await?;
        let fields = info_fields(&text);
        let number = |name: &str| number(&fields, name);
        let maxmemory = number("maxmemory");
        Ok(ServerSummary {
            used_memory: number("used_memory"),
            used_memory_peak: number("used_memory_peak"),
            maxmemory: (maxmemory > 0).then_some(maxmemory),
            evicted_keys: number("evicted_keys"),
            expired_keys: number("expired_keys"),
            oom_replies: fields
                .get("errorstat_OOM")
                .and_then(|value| value.strip_prefix("count="))
                .and_then(|count| count.parse().ok())
                .unwrap_or(0),
        })
    }
}

/// One reading of the server's memory counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MemorySample {
    pub used_memory: u64,
    pub evicted_keys: u64,
    pub expired_keys: u64,
}

fn number(fields: &BTreeMap<&str, &str>, name: &str) -> u64 {
    fields
        .get(name)
        .and_then(|value| value.parse().ok())
        .unwrap_or(0)
}

fn is_debug_refused(error: &RedisError) -> bool {
    error.to_string().contains("DEBUG command not allowed")
}

/// `INFO`'s `name:value` lines.
fn info_fields(text: &str) -> BTreeMap<&str, &str> {
    text.lines()
        .filter_map(|line| line.trim_end().split_once(':'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preload_pipeline_holds_at_most_256_keys_and_16_mib() {
        let cases = [
            (0, 256),
            (2048, 256),
            (65_536, 256),
            (131_072, 128),
            (2 << 20, 8),
            (16 << 20, 1),
            (u32::MAX, 1),
        ];
        for (value_bytes, keys) in cases {
            assert_eq!(preload_batch(value_bytes), keys, "{value_bytes} bytes");
        }
    }

    #[test]
    fn info_lines_are_read_by_name() {
        let text = "# Memory\r\nused_memory:1024\r\nmaxmemory:0\r\n# Errorstats\r\nerrorstat_OOM:count=3\r\n";
        let fields = info_fields(text);
        assert_eq!(fields["used_memory"], "1024");
        assert_eq!(fields["errorstat_OOM"], "count=3");
        assert_eq!(fields.get("# Memory"), None);
    }
}
