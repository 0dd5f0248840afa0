//! The fault kinds of a scenario file, declared once. Each [`FaultKindSpec`] names a kind,
//! what it acts on, whether it happens at one instant, its own keys ([`KeySpec`]: name, value,
//! default, range, one line of doc) and the function that builds the simulator's
//! [`FaultKind`] from them. From this list come:
//!
//! - the keys a `[faults.<name>]` table accepts, and the value each is read as
//!   ([`crate::raw::RawFault`]); an undeclared key is refused there, naming every key;
//! - the refusal of a key of another kind, a missing required key, a value out of its range,
//!   and the defaults ([`crate::validate`]'s fault reader, `validate/faults.rs`);
//! - the key table and the kind table of `docs/scenario-format.md` ([`reference_table`],
//!   [`kinds_table`]; `tests/integration/docs_tables.rs` compares them, and
//!   `OUTAGELAB_BLESS=1` rewrites them);
//! - `explore`'s instant kinds ([`crate::INSTANT_KINDS`]).
//!
//! Adding a fault kind is one entry in [`FAULT_KINDS`] and its `build` function here, its
//! mechanism in the simulator, and its tests; the docs' tables are then regenerated.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::LazyLock;

use outagelab_model::time::SimDuration;
use outagelab_sim::scenario::{CommandScope, ErrorReply, FaultKind, PauseMode};

use crate::keys::{Bound, KeyDefault, KeySpec, Range, Value, describe_default, describe_value};
use crate::validate::{FaultReader, Reported};

/// What a kind acts on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum On {
    Server,
    /// A server, or one client connection.
    ServerOrConnection,
    /// One client connection; `refusal` completes "a `<kind>` fault ..." for another target.
    Connection {
        refusal: &'static str,
    },
    Database,
}

/// One fault kind.
pub struct FaultKindSpec {
    /// As the file writes it: `kind = "pause"`.
    pub name: &'static str,
    /// What happens, for the reference's table of kinds.
    pub doc: &'static str,
    pub on: On,
    /// For a kind that happens at one instant, why a `duration` is refused.
    pub instant: Option<&'static str>,
    pub keys: &'static [KeySpec],
    /// The simulator's fault from the table's keys (read through `reader`, which applies
    /// the declarations: defaults, ranges, required keys).
    pub(crate) build: fn(&mut FaultReader) -> Result<FaultKind, Reported>,
}

impl FaultKindSpec {
    pub fn key(&self, name: &str) -> Option<&'static KeySpec> {
        self.keys.iter().find(|key| key.name == name)
    }
}

/// A common key's absence is serde's `missing field`, told with the reference's meaning of
/// the key (`suggest::serde_message_at`), not this.
const MISSING_COMMON: &str = "";

/// The keys every fault has, read into [`crate::raw::RawFault`]'s own fields.
pub const COMMON_KEYS: &[KeySpec] = &[
    KeySpec {
        name: "enabled",
        value: Value::Bool,
        default: KeyDefault::Is("true"),
        range: Range::Any,
        doc: "a disabled fault is checked and left out, for a variant to enable",
    },
    KeySpec {
        name: "target",
        value: Value::Target,
        default: KeyDefault::Required(MISSING_COMMON),
        range: Range::Any,
        // `{connection}` and `{database}`: the kinds that act on each, in the reference.
        doc: "the server, a connection (in a service, one instance's copy: `inv@1`; \
              {connection}), or a database ({database} only, which act on nothing else)",
    },
    KeySpec {
        name: "kind",
        value: Value::Enum(&[]),
        default: KeyDefault::Required(MISSING_COMMON),
        range: Range::Any,
        doc: "one of the kinds below",
    },
    KeySpec {
        name: "at",
        value: Value::Duration,
        default: KeyDefault::Required(MISSING_COMMON),
        range: Range::Any,
        doc: "when it starts",
    },
    KeySpec {
        name: "duration",
        value: Value::Duration,
        default: KeyDefault::Otherwise("none: the fault lasts to the end"),
        range: Range::Longer {
            why: "leave it out for a fault that never ends",
        },
        doc: "how long it lasts; refused for the kinds that happen at one instant",
    },
];

const ALL_OR_WRITE: Value = Value::Enum(&["all", "write"]);

/// The error replies an `error_reply` fault answers with (`ErrorReply::ALL`'s outcome names;
/// a test holds the two together).
const ERROR_REPLIES: &[&str] = &["oom", "readonly", "loading", "wrongtype"];

/// `slowdown`, which a database's `slow` and a server's `cpu_throttle` both take: a key
/// means one thing in every kind that declares it.
const SLOWDOWN_RANGE: Range = Range::Numbers {
    low: Bound::Above(1.0),
    high: Bound::AtMost(1000.0),
    step: 0.001,
    refusal: "{value} is not a slowdown: give how many times slower, {range}",
};
const SLOWDOWN_DOC: &str = "how many times slower the target works while it lasts: a \
                            database runs its queries, a server its commands, that many times \
                            slower";

/// Every fault kind, in the order `kind`'s refusal lists them.
pub const FAULT_KINDS: &[FaultKindSpec] = &[
    FaultKindSpec {
        name: "pause",
        doc: "CLIENT PAUSE: commands are accepted, not executed; new connections accepted. It \
               ends on the server's first cron tick at or after its end (see `hz`). `mode = \
               \"write\"` (CLIENT PAUSE … WRITE) holds only writes: reads are served, and a \
               connection whose next command is a write waits with everything behind it",
        on: On::Server,
        instant: None,
        keys: &[KeySpec {
            name: "mode",
            value: ALL_OR_WRITE,
            default: KeyDefault::Is("\"all\""),
            range: Range::Any,
            doc: "`\"write\"` (CLIENT PAUSE … WRITE) holds only writes",
        }],
        build: pause,
    },
    FaultKindSpec {
        name: "hang",
        doc: "docker pause, SIGSTOP: no replies, connections stay open, connection attempts \
               get no answer; a command that was running when the process froze replies when it \
               thaws. It ends exactly at its end (a frozen process has no cron)",
        on: On::Server,
        instant: None,
        keys: &[],
        build: |_| Ok(FaultKind::Hang),
    },
    FaultKindSpec {
        name: "stop",
        doc: "the process exits: connections dropped, new ones refused; started again at the \
               end, empty unless `persistence`",
        on: On::Server,
        instant: None,
        keys: &[],
        build: |_| Ok(FaultKind::Stop),
    },
    FaultKindSpec {
        name: "kill",
        doc: "CLIENT KILL of every client, at one instant: connections dropped, a reply not \
               yet on the wire lost, the process keeps running with its keys. On a connection: \
               CLIENT KILL of that client only",
        on: On::ServerOrConnection,
        instant: Some("a kill happens at one instant (the server keeps running)"),
        keys: &[],
        build: |_| Ok(FaultKind::Kill),
    },
    FaultKindSpec {
        name: "maxmemory",
        doc: "CONFIG SET maxmemory, at one instant: the new limit stays (until a `stop` \
               restarts the server, which reads its configured limit again), and the server \
               evicts at once (per its policy) to get under it",
        on: On::Server,
        instant: Some("a maxmemory change happens at one instant (the new limit stays)"),
        keys: &[KeySpec {
            name: "maxmemory",
            value: Value::Size,
            default: KeyDefault::Required(
                "a `maxmemory` fault sets a new limit: give it, e.g. `maxmemory = \"30MiB\"` \
                 (0 lifts the limit)",
            ),
            range: Range::Any,
            doc: "the new limit; `0` lifts it",
        }],
        build: maxmemory,
    },
    FaultKindSpec {
        name: "flushall",
        doc: "FLUSHALL, at one instant: every key is gone and its memory free",
        on: On::Server,
        instant: Some("a flushall happens at one instant (the keys stay gone)"),
        keys: &[],
        build: |_| Ok(FaultKind::FlushAll),
    },
    FaultKindSpec {
        name: "error_reply",
        doc: "while it lasts, the server answers the commands in `commands` with the error \
               instead of running them: `readonly` (a primary demoted by a failover), `loading` \
               (a restarting server loading its dataset), `wrongtype`, `oom`. The caller's step \
               gets the outcome of the same name. The fault answers before the server looks at \
               its memory (no eviction, no `oom`); overlapping ones answer with the oldest that \
               covers the command",
        on: On::Server,
        instant: None,
        keys: &[
            KeySpec {
                name: "error",
                value: Value::OneOf {
                    values: ERROR_REPLIES,
                    noun: "error reply",
                    plural: "errors",
                },
                default: KeyDefault::Required(
                    "an `error_reply` fault needs the error it answers with: one of \
                     oom, readonly, loading, wrongtype",
                ),
                range: Range::Any,
                doc: "the error the server answers with",
            },
            KeySpec {
                name: "commands",
                value: ALL_OR_WRITE,
                default: KeyDefault::Otherwise(
                    "`\"write\"` for `readonly`, `\"all\"` for the others",
                ),
                range: Range::Any,
                doc: "which commands get it: all, or those that are not read-only (a demoted \
                      replica serves reads)",
            },
        ],
        build: error_reply,
    },
    FaultKindSpec {
        name: "disconnect",
        doc: "a connection only: its network to the server is cut while the fault lasts; the \
               link drops (the client hears it after what is already on the wire) and every \
               connection attempt is refused until the end. The server and its other clients \
               are not touched",
        on: On::Connection {
            refusal: "cuts one client connection from its server: target a connection \
                      (a server can `stop`)",
        },
        instant: None,
        keys: &[],
        build: |_| Ok(FaultKind::Disconnect),
    },
    FaultKindSpec {
        name: "failover",
        doc: "the primary's process dies (as `stop`, and it stays down); at the end (the \
               detection and election time: Sentinel's `down-after-milliseconds` plus the \
               election), `replica` (required: a replica of the target) is promoted: it takes \
               writes, and every connection that follows failovers connects to it from its next \
               attempt (a connection with `follows_failover = false` keeps its address and \
               finds nothing there). Unlike a `stop` without persistence, the promoted replica \
               has the data, but for the writes of its last lag",
        on: On::Server,
        instant: None,
        keys: &[
            KeySpec {
                name: "replica",
                value: Value::Ref("servers"),
                default: KeyDefault::Required(
                    "a `failover` promotes a replica: name it (`replica = \"...\"`)",
                ),
                range: Range::Any,
                doc: "the replica promoted: a server with `replica_of` the target",
            },
            KeySpec {
                name: "unreachable",
                value: Value::Bool,
                default: KeyDefault::Is("false"),
                range: Range::Any,
                doc: "the primary's host dies with it, so its address answers nothing \
                      (connection attempts there wait out their `connect_timeout`, as after a \
                      `crash`) instead of refusing",
            },
        ],
        build: failover,
    },
    FaultKindSpec {
        name: "crash",
        doc: "the node dies (an OOM-killed pod, a lost host): connections dropped, and its \
               address answers nothing while it lasts, so each connection attempt waits out its \
               `connect_timeout`; at the end a new process starts there, empty unless \
               `persistence`",
        on: On::Server,
        instant: None,
        keys: &[],
        build: |_| Ok(FaultKind::Crash),
    },
    FaultKindSpec {
        name: "cpu_throttle",
        doc: "a Redis server only: while it lasts, its one thread runs `slowdown` times slower \
               (a container's CPU quota throttling it, a noisy neighbour on the host, a fork \
               for BGSAVE copying pages). Every command takes that many times its time on the \
               thread, so replies come late and, once commands arrive faster than the slowed \
               thread runs them, queue behind each other on every connection. A command's time \
               is set when it starts: one running when the fault starts or ends keeps its own. \
               With several at once, the slowest holds, and each ends on its own; a restart \
               (after a `stop`) stays throttled, as its container does",
        on: On::Server,
        instant: None,
        keys: &[KeySpec {
            name: "slowdown",
            value: Value::Number,
            default: KeyDefault::Required(
                "a `cpu_throttle` fault runs its server's commands slower: say how many \
                 times, e.g. `slowdown = 4`",
            ),
            range: SLOWDOWN_RANGE,
            doc: SLOWDOWN_DOC,
        }],
        build: cpu_throttle,
    },
    FaultKindSpec {
        name: "slow",
        doc: "a database only: while it lasts, every query's work runs `slowdown` times slower \
               (a vacuum, a noisy neighbour, a cold buffer cache after a restart). It acts on \
               the work clock the database's capacity sharing and collapse act on: a query \
               running when it starts slows from that instant, one still running at its end \
               speeds up again, so a 40 ms query under `slowdown = 4` from 10 ms to 30 ms ends \
               at 55 ms (10 ms of work, then 5, then the last 25). With several at once, the \
               slowest holds, and each ends on its own",
        on: On::Database,
        instant: None,
        keys: &[KeySpec {
            name: "slowdown",
            value: Value::Number,
            default: KeyDefault::Required(
                "a `slow` fault runs its database's queries slower: say how many times, \
                 e.g. `slowdown = 4`",
            ),
            range: SLOWDOWN_RANGE,
            doc: SLOWDOWN_DOC,
        }],
        build: slow,
    },
    FaultKindSpec {
        name: "refuse",
        doc: "a database only: while it lasts, every query that starts is refused at once with \
               `refused` (the listener gone, `max_connections` taken by something else) and \
               counted in the database's `refused`; queries already running finish. Several at \
               once refuse until the last ends",
        on: On::Database,
        instant: None,
        keys: &[],
        build: |_| Ok(FaultKind::Refuse),
    },
    FaultKindSpec {
        name: "pool_exhausted",
        doc: "a database with `max_connections` only: while it lasts, something else holds \
               `connections` of them (a batch job, a leaked pool, another service). Queries \
               already holding one run on; a query that finds the rest taken waits in the \
               `connection_queue` or is refused when it is full, as when the pool is full of \
               the service's own queries; at the end the held connections come back and the \
               oldest waiters take them at once. With a pool of 2 and a queue of 1 held whole \
               from 10 ms to 100 ms, a 40 ms query waiting since 20 ms starts at 100 ms and \
               ends at 140 ms. Several at once hold their connections added up, each giving its \
               own back at its end",
        on: On::Database,
        instant: None,
        keys: &[KeySpec {
            name: "connections",
            value: Value::Count,
            default: KeyDefault::Otherwise("all of them"),
            range: Range::Whole {
                min: 1,
                max: "`max_connections`",
                why: "a fault that holds no connection does nothing",
                over: "{value} connections of a pool of {max} (`max_connections`): at most {max}",
            },
            doc: "how many of the database's `max_connections` something else holds while it \
                  lasts",
        }],
        build: pool_exhausted,
    },
    FaultKindSpec {
        name: "lock_held",
        doc: "a database only: while it lasts, something else holds every advisory lock of the \
               key family `key` (a migration's table lock, a long transaction, a backup). A \
               query whose step takes one of them (`lock` on a `db` step) waits for the fault's \
               end holding its connection, so waiters count against `max_connections` as a real \
               convoy does; at the end the waiters queue for their own keys in arrival order. \
               Queries that hold a lock, or already wait for one, when it starts take their \
               turns as before. Queries of 40 ms on one key at 0, 20 and 50 ms take turns 0-40, \
               40-80, 80-120 alone; with the family held from 10 ms to 100 ms they run 0-40, \
               100-140, 140-180, two waiting at once",
        on: On::Database,
        instant: None,
        keys: &[KeySpec {
            name: "key",
            value: Value::Ref("keys"),
            default: KeyDefault::Required(
                "a `lock_held` fault holds the advisory locks of a key family (a table lock): \
                 name it, e.g. `key = \"accounts\"`",
            ),
            range: Range::Any,
            doc: "the key family whose every advisory lock something else holds while it lasts",
        }],
        build: lock_held,
    },
    FaultKindSpec {
        name: "latency",
        doc: "a connection only (run live too, at a forwarder), toxiproxy's `latency` toxic in \
               both directions: while it lasts, every command and reply sent on it arrives \
               `latency` later (drawn within `± jitter` per item, from a stream of the \
               connection's own), and never before what was sent ahead of it on the same wire \
               (TCP keeps order). It ends when it ends: what it holds at its end is let go then \
               (toxiproxy forwards what a removed toxic held); the connection handshake is not \
               delayed. With 100 µs each way, 50 ms added from 1 ms to 200 ms makes a GET \
               issued at 10 ms answer at 110.205 ms, and one issued at 199 ms (held until the \
               end, 200 ms) at 200.205 ms. Several on one connection add up",
        on: On::Connection { refusal: SENDS },
        instant: None,
        keys: &[
            KeySpec {
                name: "latency",
                value: Value::Duration,
                default: KeyDefault::Required(
                    "a `latency` fault adds a delay to what the connection sends: give it, \
                     e.g. `latency = \"50ms\"`",
                ),
                range: Range::Any,
                doc: "the delay added one way to everything the connection sends in either \
                      direction",
            },
            KeySpec {
                name: "jitter",
                value: Value::Duration,
                default: KeyDefault::Is("\"0s\""),
                range: Range::Any,
                doc: "the delay is drawn uniformly within `latency ± jitter` per command or reply",
            },
        ],
        build: latency,
    },
    FaultKindSpec {
        name: "bandwidth",
        doc: "a connection only (run live too), toxiproxy's `bandwidth` toxic in both \
               directions: while it lasts, what is sent on it moves at `bandwidth` instead of \
               the connection's own (a 100 KiB SET at 1 MiB/s spends about 98 ms on the wire, \
               head-of-line for what is behind it). Only while it lasts: bytes still to send at \
               its end go at the connection's own rate, and bytes on the wire at its start slow \
               down then. Ten 1 MiB SETs issued at once on a 100 MiB/s connection take about \
               0.1 s; behind a 1 MiB/s fault of 100 ms, about 0.2 s; behind one of 30 s, 10 s. \
               With several, the slowest holds",
        on: On::Connection { refusal: SENDS },
        instant: None,
        keys: &[KeySpec {
            name: "bandwidth",
            value: Value::Bandwidth,
            default: KeyDefault::Required(
                "a `bandwidth` fault limits what the connection sends: give the rate, \
                 e.g. `bandwidth = \"100KiB/s\"`",
            ),
            range: Range::Any,
            doc: "the rate what the connection sends in either direction moves at while it lasts",
        }],
        build: bandwidth,
    },
    FaultKindSpec {
        name: "packet_loss",
        doc: "a connection only (run live too, at a forwarder, per chunk read), packet loss \
               under TCP in both directions: while it lasts, each command or reply is lost on a \
               transmission with chance `loss` and sent again after `retransmit`, the timeout \
               doubling at each loss (Linux's backoff), so it arrives `retransmit × (2^k - 1)` \
               late after `k` losses in a row (at most 15, `tcp_retries2`; the timeout stops \
               doubling at 120 s, Linux's `TCP_RTO_MAX`), and everything sent after it waits \
               behind it (a TCP stream keeps its order: head-of-line blocking). With `loss = \
               10` and the default 200 ms, 90% arrive on time, 9% 200 ms late, 0.9% 600 ms \
               late. A transmission after the fault's end gets through: an item lost once in a \
               100 ms fault arrives at its first retransmission, 200 ms later. Losses of \
               several faults combine (`1 - Π(1 - p)`), the longest timeout holds",
        on: On::Connection { refusal: SENDS },
        instant: None,
        keys: &[
            KeySpec {
                name: "loss",
                value: Value::Number,
                default: KeyDefault::Required(
                    "a `packet_loss` fault loses a share of what the connection sends: give it \
                     in percent, e.g. `loss = 2`",
                ),
                range: Range::Numbers {
                    low: Bound::Above(0.0),
                    high: Bound::Below(100.0),
                    step: 0.0001,
                    refusal: "{value} is not a share of transmissions lost: {range} percent (at \
                              100 nothing would ever arrive)",
                },
                doc: "the share of transmissions lost, in percent",
            },
            KeySpec {
                name: "retransmit",
                value: Value::Duration,
                // Linux's TCP_RTO_MIN: the first retransmission on a fast network.
                default: KeyDefault::Is("\"200ms\""),
                range: Range::Longer {
                    why: "a lost packet is sent again after it",
                },
                doc: "TCP's retransmission timeout (the default is Linux's minimum)",
            },
        ],
        build: packet_loss,
    },
    FaultKindSpec {
        name: "slow_close",
        doc: "a connection only (run live too: the forwarder holds the end of the stream \
               back), toxiproxy's `slow_close`: while it lasts, a close takes `delay` longer to \
               reach the other side. When the server drops the client (`kill`, `stop`, a \
               `disconnect`), the client hears it that much later: its commands wait, it counts \
               no disconnect and does not reconnect until then. A GET held by a pause when the \
               network is cut at 20 ms: the client hears the drop at 20.1 ms, with a 300 ms \
               `slow_close` at 320.1 ms, and with one that ends at 100 ms at 100 ms (a close it \
               holds is let go at its end). Several add up. (A reset, toxiproxy's `reset_peer`, \
               is a `kill` on the connection)",
        on: On::Connection { refusal: SENDS },
        instant: None,
        keys: &[KeySpec {
            name: "delay",
            value: Value::Duration,
            default: KeyDefault::Required(
                "a `slow_close` fault holds a close back: give how long, e.g. `delay = \"500ms\"`",
            ),
            range: Range::Longer {
                why: "a close held back no time",
            },
            doc: "how much later a close reaches the other side while it lasts",
        }],
        build: slow_close,
    },
];

/// The refusal of the kinds that act on what a connection sends.
const SENDS: &str = "acts on what one client connection sends: target a connection";

/// The kind called `name`.
pub fn kind(name: &str) -> Option<&'static FaultKindSpec> {
    FAULT_KINDS.iter().find(|kind| kind.name == name)
}

/// Every kind's name, in order.
pub fn kind_names() -> &'static [&'static str] {
    static NAMES: LazyLock<Vec<&'static str>> =
        LazyLock::new(|| FAULT_KINDS.iter().map(|kind| kind.name).collect());
    &NAMES
}

/// Every key a fault table accepts: the common keys, then each kind's in the kinds' order.
pub fn all_keys() -> &'static [&'static str] {
    static KEYS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
        let mut keys: Vec<&'static str> = COMMON_KEYS.iter().map(|key| key.name).collect();
        for key in FAULT_KINDS.iter().flat_map(|kind| kind.keys) {
            if !keys.contains(&key.name) {
                keys.push(key.name);
            }
        }
        keys
    });
    &KEYS
}

/// The value a kind's key `name` is read as: a key means one thing in every kind that
/// declares it (a test checks it).
pub fn key_value(name: &str) -> Option<(&'static str, Value)> {
    FAULT_KINDS
        .iter()
        .flat_map(|kind| kind.keys)
        .find(|key| key.name == name)
        .map(|key| (key.name, key.value))
}

/// The kinds that declare the key `name`, in order.
pub fn kinds_taking(name: &str) -> Vec<&'static str> {
    FAULT_KINDS
        .iter()
        .filter(|kind| kind.key(name).is_some())
        .map(|kind| kind.name)
        .collect()
}

/// The kinds whose target `accepts`, as "`a`, `b` or `c`".
pub fn kinds_on(accepts: impl Fn(On) -> bool) -> String {
    let names: Vec<String> = FAULT_KINDS
        .iter()
        .filter(|kind| accepts(kind.on))
        .map(|kind| format!("`{}`", kind.name))
        .collect();
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

fn pause(reader: &mut FaultReader) -> Result<FaultKind, Reported> {
    let mode = match reader.word("mode")?.as_deref() {
        Some("write") => PauseMode::Write,
        _ => PauseMode::All,
    };
    Ok(FaultKind::Pause(mode))
}

fn maxmemory(reader: &mut FaultReader) -> Result<FaultKind, Reported> {
    let bytes = reader.size("maxmemory")?;
    Ok(FaultKind::MaxMemory((bytes > 0).then_some(bytes)))
}

fn error_reply(reader: &mut FaultReader) -> Result<FaultKind, Reported> {
    let written = reader.need_word("error")?;
    let error = ErrorReply::ALL
        .into_iter()
        .find(|error| error.outcome().name() == written)
        .expect("the declared error replies are ErrorReply::ALL's");
    // A demoted replica still serves reads; the other errors answer everything.
    let commands = match reader.word("commands")?.as_deref() {
        Some("all") => CommandScope::All,
        Some(_) => CommandScope::Writes,
        None if error == ErrorReply::ReadOnly => CommandScope::Writes,
        None => CommandScope::All,
    };
    Ok(FaultKind::ErrorReply { error, commands })
}

fn failover(reader: &mut FaultReader) -> Result<FaultKind, Reported> {
    // A failover promotes a server's replica: aimed at a connection, the fix is to target
    // the connection's server, not to make the replica follow the connection.
    let target = reader.target_name();
    if let Some((_, connection)) = reader.names.connections.get(target) {
        let server = connection.server();
        let message = format!(
            "a `failover` acts on a server, and `{target}` is a connection: target its server \
             (`target = \"{server}\"`)"
        );
        return reader.refuse_target(message);
    }
    let (replica, replica_name) = reader.server("replica")?;
    let follows = reader.names.servers.get(replica_name).and_then(|(_, r)| {
        match r.keys.get("replica_of").map(|p| p.get_ref()) {
            Some(crate::raw::RawValue::Word(primary)) => Some(primary.as_str()),
            _ => None,
        }
    });
    if follows != Some(target) {
        let message = format!(
            "`{replica_name}` is not a replica of `{target}` (give it `replica_of = \
             \"{target}\"`)"
        );
        return reader.refuse("replica", message);
    }
    let unreachable = reader.flag("unreachable")?;
    Ok(FaultKind::Failover {
        replica,
        unreachable,
    })
}

fn slow(reader: &mut FaultReader) -> Result<FaultKind, Reported> {
    let slowdown_permille = reader.thousandths("slowdown")?;
    Ok(FaultKind::Slow { slowdown_permille })
}

fn cpu_throttle(reader: &mut FaultReader) -> Result<FaultKind, Reported> {
    let slowdown_permille = reader.thousandths("slowdown")?;
    Ok(FaultKind::CpuThrottle { slowdown_permille })
}

fn pool_exhausted(reader: &mut FaultReader) -> Result<FaultKind, Reported> {
    let target = reader.target_name();
    // On an unknown target or a server: said where the target is checked.
    let max = reader
        .names
        .databases
        .get(target)
        .map(|(_, database)| database.keys.get("max_connections"));
    let connections = match max {
        None => 1,
        Some(None) => {
            let message = format!(
                "`{target}` has no `max_connections`: there is no pool to exhaust (give the \
                 database a limit)"
            );
            return reader.refuse_target(message);
        }
        Some(Some(max)) => {
            let crate::raw::RawValue::Whole(max) = max.get_ref() else {
                unreachable!("a count is read as a whole number")
            };
            let max = u32::try_from(max.0).unwrap_or(u32::MAX);
            reader.whole("connections", max)?.unwrap_or(max)
        }
    };
    Ok(FaultKind::PoolExhausted { connections })
}

fn lock_held(reader: &mut FaultReader) -> Result<FaultKind, Reported> {
    let family = reader.key_family("key")?;
    Ok(FaultKind::LockHeld { family })
}

fn latency(reader: &mut FaultReader) -> Result<FaultKind, Reported> {
    let added = reader.need_duration("latency")?;
    let jitter = reader.duration("jitter")?.unwrap_or(SimDuration::ZERO);
    if added.is_zero() && jitter.is_zero() {
        return reader.refuse(
            "latency",
            "a `latency` fault of 0 without jitter does nothing",
        );
    }
    Ok(FaultKind::Latency { added, jitter })
}

fn bandwidth(reader: &mut FaultReader) -> Result<FaultKind, Reported> {
    Ok(FaultKind::Bandwidth(reader.bandwidth("bandwidth")?))
}

fn packet_loss(reader: &mut FaultReader) -> Result<FaultKind, Reported> {
    let percent = reader.number("loss")?;
    // To a millionth, at least one and at most all but one.
    let ppm = ((percent * 10_000.0).round() as u32).clamp(1, 999_999);
    let retransmit = reader.need_duration("retransmit")?;
    Ok(FaultKind::PacketLoss { ppm, retransmit })
}

fn slow_close(reader: &mut FaultReader) -> Result<FaultKind, Reported> {
    let delay = reader.need_duration("delay")?;
    Ok(FaultKind::SlowClose { delay })
}

/// The key table of `[faults.<name>]` in `docs/scenario-format.md`, as markdown.
pub fn reference_table() -> String {
    let mut out =
        String::from("| key | fault | value | default | meaning |\n|---|---|---|---|---|\n");
    for key in COMMON_KEYS {
        let faults = if key.name == "duration" {
            let instants: Vec<String> = FAULT_KINDS
                .iter()
                .filter(|kind| kind.instant.is_some())
                .map(|kind| format!("`{}`", kind.name))
                .collect();
            format!("every but {} (instants)", instants.join(", "))
        } else {
            "every".to_owned()
        };
        row(&mut out, key, &faults);
    }
    for key_name in &all_keys()[COMMON_KEYS.len()..] {
        let kinds = kinds_taking(key_name);
        let spec = FAULT_KINDS
            .iter()
            .find_map(|kind| kind.key(key_name))
            .expect("all_keys lists declared keys");
        let faults: Vec<String> = kinds.iter().map(|kind| format!("`{kind}`")).collect();
        row(&mut out, spec, &faults.join(", "));
    }
    out
}

/// The `key = value` lines `validate --explain` prints for the fault table `section`
/// (`faults.<name>`): its target, kind and start, then every key its kind declares, as the
/// file wrote it (`settings`, as [`crate::Variant::settings`] holds them) or else as the
/// declaration's default.
pub fn explain(out: &mut String, section: &str, settings: &BTreeMap<String, String>) {
    let written = |key: &str| settings.get(&format!("{section}.{key}"));
    let Some(kind) = written("kind").and_then(|name| kind(name.trim_matches('"'))) else {
        return;
    };
    writeln!(out, "[{section}]").expect("a String");
    let common = COMMON_KEYS
        .iter()
        .filter(|key| key.name != "enabled")
        .filter(|key| key.name != "duration" || kind.instant.is_none());
    for key in common.chain(kind.keys) {
        let value = match (written(key.name), key.default) {
            (Some(value), _) => value.clone(),
            (None, KeyDefault::Is(text) | KeyDefault::Otherwise(text)) => text.replace('`', ""),
            (None, KeyDefault::Required(_) | KeyDefault::Preset(_)) => continue,
        };
        writeln!(out, "  {} = {value}", key.name).expect("a String");
    }
}

/// The table of kinds of `[faults.<name>]` in `docs/scenario-format.md`, as markdown.
pub fn kinds_table() -> String {
    let mut out = String::from("| kind | what happens |\n|---|---|\n");
    for kind in FAULT_KINDS {
        writeln!(out, "| `\"{}\"` | {} |", kind.name, kind.doc).expect("a String");
    }
    out
}

fn row(out: &mut String, key: &KeySpec, faults: &str) {
    let value = describe_value(key);
    let default = describe_default(key.default);
    let name = key.name;
    let and = |accepts: fn(On) -> bool| kinds_on(accepts).replace(" or ", " and ");
    let doc = key
        .doc
        .replace(
            "{connection}",
            &and(|on| matches!(on, On::Connection { .. } | On::ServerOrConnection)),
        )
        .replace("{database}", &and(|on| on == On::Database));
    writeln!(out, "| `{name}` | {faults} | {value} | {default} | {doc} |").expect("a String");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_means_one_thing_in_every_kind() {
        for kind in FAULT_KINDS {
            for key in kind.keys {
                assert!(
                    COMMON_KEYS.iter().all(|common| common.name != key.name),
                    "`{}` of `{}` is a common key",
                    key.name,
                    kind.name
                );
                assert_eq!(
                    key_value(key.name),
                    Some((key.name, key.value)),
                    "{}",
                    key.name
                );
            }
        }
    }

    #[test]
    fn the_error_replies_are_the_simulators() {
        let names: Vec<&str> = ErrorReply::ALL.map(|e| e.outcome().name()).to_vec();
        assert_eq!(names, ERROR_REPLIES);
    }

    #[test]
    fn kind_names_are_unique() {
        let mut names = kind_names().to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FAULT_KINDS.len());
    }

    #[test]
    fn every_declared_key_of_every_kind_is_in_the_reference_table() {
        let table = reference_table();
        for key in COMMON_KEYS {
            assert!(
                table.contains(&format!("| `{}` | every", key.name)),
                "{}",
                key.name
            );
        }
        for kind in FAULT_KINDS {
            for key in kind.keys {
                let line = table
                    .lines()
                    .find(|line| line.starts_with(&format!("| `{}` |", key.name)))
                    .unwrap_or_else(|| panic!("no row for `{}`", key.name));
                assert!(line.contains(&format!("`{}`", kind.name)), "{line}");
                assert!(line.contains(key.doc), "{line}");
            }
        }
    }
}
