//! One variant of a scenario file run in wall-clock time against a real Redis (`outagelab
//! live`), written as the same report a simulated run writes.
//!
//! What runs for real: the file's loads (open-loop even, Poisson and burst arrivals drawn
//! exactly as the simulator draws them, from the same seeded streams; closed loops), its
//! Redis steps (`GET`, `SET`, `SET NX PX`, `INCR`, `DEL`) on `redis` connections with the
//! file's `command_timeout`, its breakers, semaphores, bulkheads and retry policies through
//! their live forms ([`crate::LiveBreaker`], [`crate::LiveSemaphore`],
//! [`crate::LiveBulkhead`], [`crate::LiveRetry`]), reconnect slots through
//! [`crate::LiveSlot`], and its faults as real commands (see `faults.rs`), or, for those that
//! cut the network (`stop`, `disconnect`), at a [`Forwarder`] in front of each connection. A
//! database query
//! and a `work` step are a tokio sleep of a duration drawn from the file's distribution with
//! the simulator's stream for that database or flow. Anything else is refused before the run
//! ([`check()`]), with the file key that names it.
//!
//! What a request's latency is: for an open loop, from the instant its arrival is due to its
//! end, so a runner that wakes late (tokio's timers have a resolution of a millisecond) counts
//! its lateness, as a load generator that avoids coordinated omission does; for a closed
//! loop, from the instant the caller sends it, since a caller that wakes late has only
//! thought longer.
//!
//! Bounds: the run stops at the file's horizon, or earlier at [`Options::horizon_cap`]; a file
//! without a horizon runs until its requests have ended, at most [`LENGTH_WITHOUT_HORIZON`]
//! (or the cap). Requests still in flight then are `unfinished`. Every task the run starts is
//! in one `JoinSet`, aborted at the end. The server's last reading and the teardown take at
//! most [`GRACE`] more, whatever the server does ([`survive`]): a server that stops answering
//! or a fault that cannot be injected is the report's verdict, not a lost report.

mod check;
mod connection;
mod database;
#[cfg(test)]
mod differential;
mod faults;
mod layers;
mod lifecycle;
mod loads;
mod network;
mod record;
mod report;
mod session;
pub mod survive;

use loads::start_load;
use network::{
    cut_network, cuts_network, forwarders, is_toxic, open_connections, sample_server, toxify,
};
use report::report;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::{
    ConnectionSummary, DatabaseSummary, FaultWindow, Outcome, RunnerTiming, SlotSummary,
    VariantReport, Verdict,
};
use outagelab_sim::open_loop::OpenLoopClock;
use outagelab_sim::scenario::{
    Arrivals, BulkheadId, CacheOp, ClosedLoop, ConnectionId, DatabaseId, FaultKind, FaultSpec,
    FaultTarget, FlowId, KeyFamilyId, LoadSpec, OnError, OnHit, PolicyRef, RedisCommand,
    StepAction, StepSpec,
};
use outagelab_sim::{Scenario, StepResult, Stream, key_index, rules, summaries};
use redis::RedisError;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

pub use check::{HZ_MAX, Unsupported, check};
pub use faults::KEY_PREFIX;
pub use session::{LiveSection, NotRun, Planned, Session, length_limit, parse_address, session};
pub use survive::{Events, GRACE, Interrupt, LiveEvent};

use crate::bulkhead::DetachedPermit;
use crate::cache::LiveCache;
use crate::clock::{Clock, TokioClock};
use crate::forwarder::Forwarder;
use connection::Connection;
use database::SharedDatabase;
use faults::{Admin, silence_of};
use layers::{Around, Layers};
use outagelab_model::cache::{CacheKey, Lookup};
use record::Recorder;
use survive::{EventKind, Health, ServerWatch};

/// How long a run of a file without a horizon may last at most (unless capped shorter).
pub const LENGTH_WITHOUT_HORIZON: SimDuration = SimDuration::from_secs(60);

/// Time between the run's setup and its start: connections (and slots connected at the
/// start) are made before the run's clock reads zero, so the first arrivals are on time.
const SETUP_LEAD: Duration = Duration::from_millis(100);

/// How to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// The Redis server, `host:port`. Its keys under [`KEY_PREFIX`] are deleted; its
    /// `maxmemory`, `maxmemory-policy`, `maxmemory-samples` and `hz` are set for the run and
    /// put back after it; the file's faults pause, kill, flush and reconfigure it for real.
    pub address: String,
    /// Stop here at the latest; a run never goes past the file's own horizon.
    pub horizon_cap: Option<SimDuration>,
}

/// Why a live run has no report.
#[derive(Debug)]
pub enum LiveError {
    /// The file asks for something a live run cannot do.
    Unsupported(Unsupported),
    /// The server could not be reached or refused a command of the run's own while the run
    /// was set up: nothing was measured.
    Redis { doing: String, error: RedisError },
    /// Interrupted (SIGINT) while the run was set up: nothing was measured.
    Interrupted,
}

impl std::fmt::Display for LiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LiveError::Unsupported(unsupported) => write!(f, "{unsupported}"),
            LiveError::Redis { doing, error } => write!(f, "{doing}: {error}"),
            LiveError::Interrupted => write!(f, "interrupted before the run started"),
        }
    }
}

impl std::error::Error for LiveError {}

fn redis_error(doing: impl Into<String>) -> impl FnOnce(RedisError) -> LiveError {
    move |error| LiveError::Redis {
        doing: doing.into(),
        error,
    }
}

/// Runs `scenario` (one variant, `name`) against the server. Notes (a fault injected another
/// way than its command) go to `notes`. What happened to the server is in the report's
/// verdict; [`run_watched`] gives the events too.
pub async fn run(
    scenario: &Scenario,
    name: &str,
    sweep_x: Option<f64>,
    options: &Options,
    notes: &mut Vec<String>,
) -> Result<VariantReport, LiveError> {
    let (events, interrupt) = (Events::new(), Interrupt::new());
    let ran = run_watched(scenario, name, sweep_x, options, notes, &events, &interrupt).await?;
    Ok(ran.report)
}

/// One variant's live run, as far as it got.
#[derive(Debug)]
pub struct Ran {
    /// For the time measured; its verdict says how the run ended ([`survive::verdict`]).
    pub report: VariantReport,
    /// Whether the server answered the run's last commands: a next variant can use it.
    pub server_answers: bool,
    /// The run's clock, for what is said after it.
    clock: TokioClock,
}

/// As [`run`], saying what happens to the server in `events` as it happens, and ending early
/// (reported for the time measured) when `interrupt` is triggered. Ends at most [`GRACE`]
/// after the measured time's end. `Err` only when nothing was measured: the file asks for
/// what a live run cannot do, or the server could not be set up for the run.
pub async fn run_watched(
    scenario: &Scenario,
    name: &str,
    sweep_x: Option<f64>,
    options: &Options,
    notes: &mut Vec<String>,
    events: &Events,
    interrupt: &Interrupt,
) -> Result<Ran, LiveError> {
    check(scenario).map_err(LiveError::Unsupported)?;
    let setup = async {
        let mut admin = Admin::connect(&options.address)
            .await
            .map_err(redis_error(format!("connecting to {}", options.address)))?;
        admin
            .prepare(scenario)
            .await
            .map_err(redis_error("setting the server up for the run"))?;
        Ok(admin)
    };
    let admin = tokio::select! {
        biased;
        () = interrupt.triggered() => return Err(LiveError::Interrupted),
        admin = setup => admin?,
    };
    let admin = Arc::new(admin);
    let ran = lifecycle::drive(
        scenario, name, sweep_x, options, &admin, notes, events, interrupt,
    )
    .await;
    // Within the deadline `drive` set (or GRACE from now, when it failed before setting one).
    admin.set_deadline(Instant::now() + GRACE);
    let restored = admin.restore().await;
    if let Err(error) = &restored {
        let at_ms = (ran.as_ref()).map_or(0.0, |ran| ran.clock.now().as_nanos() as f64 / 1e6);
        events.push(LiveEvent {
            variant: name.to_owned(),
            at_ms,
            event: EventKind::SettingsNotRestored,
            detail: format!(
                "the server's settings ({}) and the run's keys could not be put back: {error}",
                faults::SAVED.join(", ")
            ),
        });
    }
    let mut ran = ran?;
    if restored.as_ref().is_err_and(is_silence) {
        ran.server_answers = false;
    }
    Ok(ran)
}

/// Whether `error` says the server did not answer (rather than answered no).
fn is_silence(error: &RedisError) -> bool {
    silence_of(error).is_some()
}

/// Everything one live run shares between its tasks.
struct Run {
    scenario: Scenario,
    clock: TokioClock,
    recorder: Mutex<Recorder>,
    connections: Vec<Connection>,
    /// The policies' live forms.
    layers: Layers<TokioClock>,
    caches: Vec<LiveCache>,
    /// Per database, its stand-in when it has a capacity (a plain sleep otherwise).
    shared_databases: Vec<Option<SharedDatabase>>,
    /// The simulator's streams: per database, per flow's work, per load.
    database_streams: Vec<Mutex<Stream>>,
    work_streams: Vec<Mutex<Stream>>,
    /// Per flow, its call steps' draws (a call is a stand-in: a sleep and a drawn answer).
    call_streams: Vec<Mutex<Stream>>,
    /// The bytes every written value is cut from (the longest value of the file).
    value: Vec<u8>,
    tasks: Mutex<JoinSet<()>>,
    done: Notify,
    /// The variant's name, for its events.
    name: String,
    events: Events,
    /// The server as the runner's probes and last reading found it.
    watch: Mutex<ServerWatch>,
    /// Whether a fault of the file could not be injected or undone.
    fault_failed: AtomicBool,
    /// Whether the server restarted during the run (another `run_id`).
    restarted: AtomicBool,
    /// The faults (by index) whose command was sent and not yet answered.
    pending_faults: Mutex<Vec<usize>>,
    /// How late the runner woke for the file's instants ([`Run::wake_at`]).
    timing: Mutex<RunnerTiming>,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How a step ended, as its layers see it on the way out (the simulator's `Leaving`):
/// `result` is what the step returns (what a retry reacts to), `io` what its I/O returned
/// (what a breaker judges the called service by). They differ on a rate-limit step, whose
/// result is the limiter's decision on what its store answered.
#[derive(Clone, Debug)]
struct StepEnd {
    result: StepResult,
    io: StepResult,
    /// The step's work goes on after the step ended (a database query whose caller timed out):
    /// it is done once this reads `true`.
    work: Option<WorkDone>,
}

/// The end of work that outlived its step: `true` once it is done.
type WorkDone = watch::Receiver<bool>;

/// Waits until `work` is done (at once if its sender is gone: the run is ending).
async fn work_done(mut work: WorkDone) {
    let _ = work.wait_for(|done| *done).await;
}

impl Run {
    fn recorder(&self) -> MutexGuard<'_, Recorder> {
        locked(&self.recorder)
    }

    fn now(&self) -> SimTime {
        self.clock.now()
    }

    /// Says `detail` (an event of `kind`) now.
    fn event(&self, kind: EventKind, detail: String) {
        self.events.push(LiveEvent {
            variant: self.name.clone(),
            at_ms: self.now().as_nanos() as f64 / 1e6,
            event: kind,
            detail,
        });
    }

    /// What a probe sent at `sent` found: `Ok` an answer, `Err` how the server was silent.
    fn probed(&self, sent: SimTime, found: Result<(), survive::Silence>) {
        let said = match found {
            Ok(()) => locked(&self.watch).answered(self.now()),
            Err(how) => locked(&self.watch).failed(sent, how),
        };
        if let Some((kind, detail)) = said {
            self.event(kind, detail);
        }
    }

    async fn sleep_until(&self, at: SimTime) {
        tokio::time::sleep_until(self.clock.instant_at(at)).await;
    }

    /// Sleeps until `at`, an instant the file times (an arrival, a caller's send, a fault's
    /// start), and records how late the runner woke for it.
    async fn wake_at(&self, at: SimTime) {
        self.sleep_until(at).await;
        let late = self.now().saturating_since(at);
        let ms = |nanos: u64| nanos as f64 / 1e6;
        let mut timing = locked(&self.timing);
        timing.wakes += 1;
        let late_ms = ms(late.as_nanos());
        if late_ms > RunnerTiming::LATE_MS {
            timing.late_wakes += 1;
        }
        if late_ms > timing.worst_lateness_ms {
            timing.worst_lateness_ms = late_ms;
            timing.worst_due_ms = ms(at.as_nanos());
        }
    }

    /// Starts `task` as part of the run (aborted when the run ends).
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = locked(&self.tasks);
        // Reap what has finished, so the set holds only what still runs.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(task);
    }

    /// Wakes the driver if nothing is left to wait for.
    fn check_done(&self) {
        if self.recorder().is_done() {
            self.done.notify_one();
        }
    }

    /// One request of `flow`, sent at `sent` (the instant the file says).
    async fn request(self: Arc<Self>, flow: FlowId, key_seed: u64, sent: SimTime) {
        self.recorder().arrived(self.now(), flow);
        let outcome = self.flow(flow, key_seed).await;
        self.recorder().ended(self.now(), flow, sent, outcome);
        self.check_done();
    }

    /// Sets `policy`'s gauges to its state now.
    fn observe_policy(&self, policy: PolicyRef) {
        let now = self.now();
        let layers = &self.layers;
        let mut recorder = self.recorder();
        match policy {
            PolicyRef::Breaker(id) => {
                let level = rules::breaker_level(layers.breakers[id.index()].live.state());
                let gauge = recorder.breakers[id.index()];
                recorder.set_gauge(now, gauge, level);
            }
            PolicyRef::Semaphore(id) => {
                let counters = layers.semaphores[id.index()].live.counters();
                let (in_flight, bytes) = recorder.semaphores[id.index()];
                recorder.set_gauge(now, in_flight, u64::from(counters.in_flight));
                recorder.set_gauge(now, bytes, counters.bytes_in_flight);
            }
            PolicyRef::Bulkhead(id) => {
                let (in_use, queued) = layers.bulkheads[id.index()].live.occupancy();
                let (in_use_gauge, queued_gauge) = recorder.bulkheads[id.index()];
                recorder.set_gauge(now, in_use_gauge, u64::from(in_use));
                recorder.set_gauge(now, queued_gauge, u64::from(queued));
            }
            PolicyRef::AdaptiveLimit(id) => {
                let live = &layers.adaptive_limits[id.index()].live;
                let (limit, in_flight) = (live.limit(), live.in_flight());
                let (limit_gauge, in_flight_gauge) = recorder.adaptive_limits[id.index()];
                recorder.set_gauge(now, limit_gauge, u64::from(limit));
                recorder.set_gauge(now, in_flight_gauge, u64::from(in_flight));
            }
            PolicyRef::Retry(_) => {}
        }
    }

    /// Runs the steps of `flow` for one request, routed as the simulator routes them.
    async fn flow(self: &Arc<Self>, flow: FlowId, key_seed: u64) -> Outcome {
        let steps = &self.scenario.flows[flow.index()].steps;
        let mut index = 0;
        // Bounded: each turn moves to a later step.
        while let Some(step) = steps.get(index) {
            if step.on_error == OnError::Ignore {
                self.background(flow, index, key_seed);
                index += 1;
                continue;
            }
            let result = self.step(flow, step, key_seed).await;
            match (result, step.on_hit, step.on_error) {
                (StepResult::Hit, OnHit::Finish, _) => {
                    self.run_skipped_finally(flow, index + 1..steps.len(), key_seed);
                    return Outcome::Ok;
                }
                (StepResult::Hit, OnHit::Goto(target), _) => {
                    // A jump over a `finally` step does not skip it: it runs in the background.
                    self.run_skipped_finally(flow, index + 1..usize::from(target), key_seed);
                    index = usize::from(target);
                    continue;
                }
                (StepResult::Error(kind), _, OnError::Fail) => {
                    self.run_skipped_finally(flow, index + 1..steps.len(), key_seed);
                    return kind;
                }
                (StepResult::Error(kind), _, _) => {
                    if let Some(connection) = rules::fail_open_connection(&step.action)
                        && rules::fails_open(kind)
                    {
                        // Let through unchecked: Redis could not be reached, or was not asked.
                        self.recorder().failed_open(self.now(), connection.index());
                        if let Some(slot) = self.connections[connection.index()].slot() {
                            slot.record_fail_open();
                        }
                    }
                }
                _ => {}
            }
            index += 1;
        }
        Outcome::Ok
    }

    /// Starts, in the background, every `finally` step among `steps` of `flow`, which the
    /// request will not reach (it ended, or jumped past them), as the simulator does.
    fn run_skipped_finally(
        self: &Arc<Self>,
        flow: FlowId,
        steps: std::ops::Range<usize>,
        key_seed: u64,
    ) {
        for index in steps {
            if self.scenario.flows[flow.index()].steps[index].finally {
                self.background(flow, index, key_seed);
            }
        }
    }

    /// A fire-and-forget step: it runs on its own; its end is counted apart.
    fn background(self: &Arc<Self>, flow: FlowId, index: usize, key_seed: u64) {
        self.recorder().background_started(flow);
        let run = Arc::clone(self);
        self.spawn(async move {
            let step = &run.scenario.flows[flow.index()].steps[index];
            let outcome = rules::step_outcome(run.step(flow, step, key_seed).await);
            run.recorder().background_ended(run.now(), flow, outcome);
        });
    }

    fn step<'a>(
        self: &'a Arc<Self>,
        flow: FlowId,
        step: &'a StepSpec,
        key_seed: u64,
    ) -> Pin<Box<dyn Future<Output = StepResult> + Send + 'a>> {
        Box::pin(async move {
            let attempt = Attempt {
                run: self,
                flow,
                step,
                key_seed,
            };
            let end = self.layers.pass(&attempt, &self.scenario, step, 0).await;
            end.result
        })
    }

    /// `command` on `connection`, on the request's key of the family `key`.
    async fn redis(
        &self,
        connection: ConnectionId,
        command: RedisCommand,
        key: KeyFamilyId,
        replay_writes: bool,
        key_seed: u64,
    ) -> StepResult {
        let family = &self.scenario.keys[key.index()];
        let index = key_index(key_seed, key.0, family.count, family.distribution);
        let key = faults::live_key(&family.name, index);
        let issued = self.now();
        self.recorder().command_issued(issued, connection.index());
        let (result, ending) = self.connections[connection.index()]
            .execute(
                command,
                &key,
                &self.value,
                replay_writes,
                issued,
                &self.clock,
            )
            .await;
        let slot_connected = self.connections[connection.index()]
            .slot()
            .map(|slot| u64::from(slot.stats().connected));
        let mut recorder = self.recorder();
        let now = self.now();
        recorder.command_ended(now, connection.index(), ending);
        if let (Some(connected), Some(gauge)) =
            (slot_connected, recorder.connected[connection.index()])
        {
            recorder.set_gauge(now, gauge, connected);
        }
        result
    }

    /// A query of `work` on a database with a capacity (`database.rs`): it ends when it has
    /// had its work, however the running queries share the capacity meanwhile; a client-side
    /// `timeout` ends the step first and leaves the query running, as a database does.
    async fn shared_query(
        self: &Arc<Self>,
        shared: &SharedDatabase,
        database: DatabaseId,
        work: SimDuration,
        timeout: Option<SimDuration>,
    ) -> (StepResult, Option<WorkDone>) {
        let started = self.now();
        let mut finished = shared.start(work);
        let ended = move |run: &Run| run.recorder().query_ended(run.now(), database.index());
        let Some(timeout) = timeout else {
            let _ = finished.await; // an error: the run is ending
            ended(self);
            return (StepResult::Ok, None);
        };
        tokio::select! {
            biased;
            _ = &mut finished => {
                ended(self);
                (StepResult::Ok, None)
            }
            () = self.sleep_until(started.saturating_add(timeout)) => {
                let run = Arc::clone(self);
                let (over, work) = watch::channel(false);
                self.spawn(async move {
                    let _ = finished.await;
                    ended(&run);
                    let _ = over.send(true);
                });
                (StepResult::Error(Outcome::Timeout), Some(work))
            }
        }
    }

    /// The step's action; with the end of its work when that outlives the step.
    async fn act(
        self: &Arc<Self>,
        flow: FlowId,
        step: &StepSpec,
        key_seed: u64,
    ) -> (StepResult, Option<WorkDone>) {
        let result = match step.action {
            StepAction::RateLimit { limiter, key } => {
                let slot = &self.layers.rate_limits[limiter.index()];
                match rules::rate_limit_store(slot.enabled, slot.store, key) {
                    // The store's check-and-charge, as the simulator stands it in: an INCR of
                    // the request's key on the store's connection. The decision is the model's.
                    Some((store, key)) => {
                        self.redis(store, RedisCommand::Incr, key, step.replay_writes, key_seed)
                            .await
                    }
                    // A local limiter (or a disabled one) answers at once.
                    None => StepResult::Ok,
                }
            }
            StepAction::Redis {
                connection,
                command,
                key,
            } => {
                self.redis(connection, command, key, step.replay_writes, key_seed)
                    .await
            }
            StepAction::Database {
                database,
                timeout,
                latency,
                lock: _,
                data: _,
            } => {
                let spec = &self.scenario.databases[database.index()];
                let distribution = latency.unwrap_or(spec.latency);
                let duration =
                    locked(&self.database_streams[database.index()]).duration(&distribution);
                let started = self.now();
                self.recorder().query_started(started, database.index());
                if let Some(shared) = &self.shared_databases[database.index()] {
                    return self.shared_query(shared, database, duration, timeout).await;
                }
                let done = started.saturating_add(duration);
                match timeout {
                    Some(timeout) if timeout < duration => {
                        // The query goes on after its caller gave up, as a database's does.
                        let run = Arc::clone(self);
                        let (ended, work) = watch::channel(false);
                        self.spawn(async move {
                            run.sleep_until(done).await;
                            run.recorder().query_ended(run.now(), database.index());
                            let _ = ended.send(true);
                        });
                        self.sleep_until(started.saturating_add(timeout)).await;
                        return (StepResult::Error(Outcome::Timeout), Some(work));
                    }
                    _ => {
                        self.sleep_until(done).await;
                        self.recorder().query_ended(self.now(), database.index());
                        StepResult::Ok
                    }
                }
            }
            StepAction::Work { duration } => {
                let duration = locked(&self.work_streams[flow.index()]).duration(&duration);
                self.sleep_until(self.now().saturating_add(duration)).await;
                StepResult::Ok
            }
            StepAction::Call {
                latency,
                error_permille,
                error,
            } => {
                let (latency, answer) = rules::call_answer(
                    &mut locked(&self.call_streams[flow.index()]),
                    &latency,
                    error_permille,
                    error,
                );
                self.sleep_until(self.now().saturating_add(latency)).await;
                answer
            }
            StepAction::Cache { cache, op, key } => {
                // The request's key of the family, named as the simulator names it; a put
                // stores version 0 (a live run follows no data versions).
                let key = key.map(|family| {
                    let spec = &self.scenario.keys[family.index()];
                    CacheKey::pair(
                        family.0,
                        key_index(key_seed, family.0, spec.count, spec.distribution),
                    )
                });
                let key = || key.expect("validated: every cache op but flush has a key");
                let live = &self.caches[cache.index()];
                let result = match op {
                    CacheOp::Get => match live.get(key()) {
                        Lookup::Hit { .. } => StepResult::Hit,
                        Lookup::Miss | Lookup::Expired => StepResult::Miss,
                    },
                    CacheOp::Put { value_bytes } => {
                        let _ = live.insert(key(), 0, u64::from(value_bytes));
                        StepResult::Ok
                    }
                    CacheOp::Invalidate => {
                        live.invalidate(key());
                        StepResult::Ok
                    }
                    CacheOp::Flush => {
                        live.flush();
                        StepResult::Ok
                    }
                };
                let mut recorder = self.recorder();
                let now = self.now();
                let gauge = recorder.cache_entries[cache.index()];
                recorder.set_gauge(now, gauge, live.len() as u64);
                result
            }
            StepAction::Throttle { .. } | StepAction::Lock { .. } => {
                unreachable!("refused by the live check")
            }
        };
        (result, None)
    }
}

/// One request's run of a step: what its layers ([`Layers::pass`]) ask of the run.
struct Attempt<'r> {
    run: &'r Arc<Run>,
    flow: FlowId,
    step: &'r StepSpec,
    key_seed: u64,
}

impl Around for Attempt<'_> {
    fn act(&self) -> Pin<Box<dyn Future<Output = (StepResult, Option<WorkDone>)> + Send + '_>> {
        Box::pin(self.run.act(self.flow, self.step, self.key_seed))
    }

    fn sleep_until(&self, at: SimTime) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.run.sleep_until(at))
    }

    /// On a task of its own: a query whose caller gave up holds its pool's connection until
    /// the database ends it.
    fn keep_until_done(&self, index: usize, permit: DetachedPermit, work: WorkDone) {
        let run = Arc::clone(self.run);
        self.run.spawn(async move {
            work_done(work).await;
            run.layers.bulkheads[index].live.give_back(permit);
            run.layers.bulkhead_peaks(index);
            run.observe_policy(PolicyRef::Bulkhead(BulkheadId(index as u32)));
        });
    }

    fn observe(&self, policy: PolicyRef) {
        self.run.observe_policy(policy);
    }

    fn rate_limit_failed_open(&self, index: usize) {
        let run = self.run;
        run.recorder().rate_limit_failed_open(run.now(), index);
    }

    fn rejected_attempt(&self) {
        self.run.recorder().rejected_attempt(self.run.now());
    }

    fn rate_limit_bucket(&self, family: Option<KeyFamilyId>) -> u64 {
        rules::rate_limit_bucket(family.map(|family| {
            let keys = &self.run.scenario.keys[family.index()];
            let index = key_index(self.key_seed, family.0, keys.count, keys.distribution);
            (family, index)
        }))
    }
}
