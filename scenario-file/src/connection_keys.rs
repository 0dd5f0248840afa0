//! The keys of a `[connections.<name>]` table and of its `subscribe` and `tracking`, and of the
//! `[client_loops.<name>]` a connection names, declared once ([`KeySpec`]: name, value,
//! default, range, one line of doc). From them come the readers ([`RawConnection`],
//! [`RawClientLoop`]), the validation's getters (`validate/connection.rs`, through
//! `validate/table.rs`, which applies a client preset's values and the defaults as declared),
//! the keys `validate --explain` prints (those a preset gives) and their order, and the key
//! tables of `docs/scenario-format.md` ([`reference_table`], [`subscribe_table`],
//! [`tracking_table`], [`client_loop_table`]; checked by `tests/integration/docs_tables.rs`). A key a preset gives is
//! declared [`KeyDefault::Preset`] (its value from `outagelab_model::presets::CLIENT_PRESETS`).

use outagelab_model::presets::CLIENT_PRESETS;
use serde::de::MapAccess;
use toml::Spanned;

use crate::keys::{
    KeyDefault, KeySpec, MISSING, Range, TableSpec, Value, key_names, markdown_table, preset_names,
};
use crate::raw::{Declared, RawTable, RawValue, nested_table};

/// A `[connections.<name>]` table as written.
pub type RawConnection = RawTable<Connection>;

/// The declaration of `[connections.<name>]`.
pub struct Connection;

/// A `[client_loops.<name>]` table as written.
pub type RawClientLoop = RawTable<ClientLoop>;

/// The declaration of `[client_loops.<name>]`.
pub struct ClientLoop;

impl Declared for ClientLoop {
    const SPEC: &'static TableSpec = &CLIENT_LOOP;
}

/// The declaration of a connection's `subscribe = { ... }`.
pub struct Subscribe;

/// The declaration of a connection's `tracking = { ... }`.
pub struct Tracking;

impl Declared for Connection {
    const SPEC: &'static TableSpec = &CONNECTION;

    fn nested<'de, M: MapAccess<'de>>(
        key: &'static KeySpec,
        map: &mut M,
    ) -> Result<Spanned<RawValue>, M::Error> {
        match key.name {
            "subscribe" => nested_table::<Subscribe, M>(map),
            "tracking" => nested_table::<Tracking, M>(map),
            other => unreachable!("a connection declares no table `{other}`"),
        }
    }
}

impl Declared for Subscribe {
    const SPEC: &'static TableSpec = &SUBSCRIBE;
}

impl Declared for Tracking {
    const SPEC: &'static TableSpec = &TRACKING;
}

impl RawConnection {
    /// The server it connects to, as written.
    pub fn server(&self) -> &str {
        match self.keys.get("server").map(Spanned::get_ref) {
            Some(RawValue::Word(server)) => server,
            _ => unreachable!("a connection is read only with its server"),
        }
    }

    /// Whether it is a subscriber.
    pub fn subscribes(&self) -> bool {
        self.keys.get("subscribe").is_some()
    }
}

/// The presets' names, in the model's order.
pub const PRESET_NAMES: [&str; CLIENT_PRESETS.len()] = preset_names!(CLIENT_PRESETS);

const CONNECTION_KEYS: [KeySpec; 20] = [
    KeySpec {
        name: "preset",
        value: Value::OneOf {
            values: &PRESET_NAMES,
            noun: "client preset",
            plural: "presets",
        },
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "start from a client library's defaults (below); every other key overrides it",
    },
    KeySpec {
        name: "server",
        value: Value::Ref("servers"),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "the server it connects to",
    },
    KeySpec {
        name: "latency",
        value: Value::Duration,
        default: KeyDefault::Is("\"100us\""),
        range: Range::Any,
        doc: "one-way network latency",
    },
    KeySpec {
        name: "bandwidth",
        value: Value::Bandwidth,
        default: KeyDefault::Otherwise("unlimited"),
        range: Range::Any,
        doc: "pipe bandwidth in each direction",
    },
    KeySpec {
        name: "command_timeout",
        value: Value::Duration,
        default: KeyDefault::Preset(&KeyDefault::Otherwise(
            "none (wait forever, ioredis' default)",
        )),
        range: Range::Longer {
            why: "every command would fail; leave it out to wait forever",
        },
        doc: "the caller gets `timeout`; the command stays in the pipe and the server still \
              executes it",
    },
    KeySpec {
        name: "offline_queue",
        value: Value::Bool,
        default: KeyDefault::Preset(&KeyDefault::Otherwise("`true` (`false` for a slot)")),
        range: Range::Any,
        doc: "while disconnected, queue commands (`true`) or refuse them at once (`false`)",
    },
    KeySpec {
        name: "max_retries",
        value: Value::CountOrUnlimited,
        default: KeyDefault::Preset(&KeyDefault::Otherwise("`20`")),
        range: Range::Any,
        doc: "times a command may outlive a lost link or a failed reconnect before it fails \
              with `connection_lost`; `\"unlimited\"` never fails it",
    },
    KeySpec {
        name: "connect_timeout",
        value: Value::Duration,
        default: KeyDefault::Preset(&KeyDefault::Is("\"10s\"")),
        range: Range::Longer {
            why: "no connection could ever be made",
        },
        doc: "a connection attempt with no answer fails after this",
    },
    KeySpec {
        name: "reconnect_delay",
        value: Value::Duration,
        default: KeyDefault::Preset(&KeyDefault::Otherwise(
            "`\"50ms\"` (`\"100ms\"` for a slot or a manager)",
        )),
        range: Range::Longer {
            why: "a refused connection would be retried in a loop that never lets time pass",
        },
        doc: "attempt n waits min(n · delay, max) (ioredis' default strategy); a slot's \
              backoff window after n failed attempts is min(delay · 2^(n−1), max)",
    },
    KeySpec {
        name: "reconnect_delay_max",
        value: Value::Duration,
        default: KeyDefault::Preset(&KeyDefault::Otherwise(
            "`\"2s\"` (`\"5s\"` for a slot, `\"10s\"` for a manager)",
        )),
        range: Range::Checked("at least `reconnect_delay`"),
        doc: "the longest delay",
    },
    KeySpec {
        name: "reconnect_growth",
        value: Value::Enum(&["linear", "doubling"]),
        default: KeyDefault::Preset(&KeyDefault::Is("\"linear\"")),
        range: Range::Any,
        doc: "with `reconnect = \"always\"`: `\"linear\"`, attempt n waits min(n · delay, max) \
              (ioredis), or `\"doubling\"`, min(delay · 2^(n−1), max) (lettuce's \
              `Delay.exponential()`)",
    },
    KeySpec {
        name: "connected_at_start",
        value: Value::Bool,
        default: KeyDefault::Is("true"),
        range: Range::Any,
        doc: "connected before the run starts",
    },
    KeySpec {
        name: "reconnect",
        value: Value::Enum(&["always", "never", "slot", "manager"]),
        default: KeyDefault::Preset(&KeyDefault::Is("\"always\"")),
        range: Range::Any,
        doc: "`\"never\"`: the first connection is the only one (a `OnceCell`); once it is \
              lost, every command fails. `\"slot\"`: a reconnect slot (below). `\"manager\"`: \
              redis-rs' `ConnectionManager` (below)",
    },
    KeySpec {
        name: "pending_max",
        value: Value::Count,
        default: KeyDefault::Preset(&KeyDefault::Otherwise("none (ioredis has no limit)")),
        range: Range::Between {
            min: 1,
            max: u32::MAX,
            why: "every command would be shed; leave it out for no limit",
        },
        doc: "most commands a connection (for a slot, each of its connections) holds without \
              a reply: sent, offline, or timed out and not yet answered (the server still owes \
              them a reply). A command issued beyond it fails at once with `shed`, as lettuce's \
              `requestQueueSize` and node-redis' `commandsQueueMaxLength` do. It bounds the \
              client's memory when Redis hangs: without it, every timed-out command stays \
              queued. The report's `peak_pending` counts all of a slot's connections at once (a \
              replaced one keeps its timed-out commands until they end), so on a slot it may \
              exceed this",
    },
    KeySpec {
        name: "subscribe",
        value: Value::Table(&SUBSCRIBE),
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "subscriber mode (below): `{ channel = \"inv\", invalidates = \"l1\", \
              flush_on_reconnect = false }`; `channel` may be left out for a connection that \
              only receives tracking invalidations",
    },
    KeySpec {
        name: "tracking",
        value: Value::Table(&TRACKING),
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "`CLIENT TRACKING ON REDIRECT`: `{ redirect = \"inv\" }` (default mode) or `{ \
              redirect = \"inv\", bcast = [\"product\"] }` (BCAST on key families); `redirect` \
              names a subscriber on the same server",
    },
    KeySpec {
        name: "follows_failover",
        value: Value::Bool,
        default: KeyDefault::Is("true"),
        range: Range::Any,
        doc: "after a failover of its server, connect to the promoted replica (Sentinel- and \
              cluster-aware clients); `false` keeps the address it was given",
    },
    KeySpec {
        name: "client_loop",
        value: Value::Ref("client_loops"),
        default: KeyDefault::Otherwise("none (written at once)"),
        range: Range::Any,
        doc: "the client event loop that writes its commands (below)",
    },
    KeySpec {
        name: "timer_lateness",
        value: Value::Duration,
        default: KeyDefault::Is("\"0s\""),
        range: Range::Any,
        doc: "how late the client's timers fire: a `command_timeout` of 100 ms with 1 ms of \
              lateness fails at 101 ms (Node's timers run on a later turn of a busy loop)",
    },
    KeySpec {
        name: "reconnect_retries",
        value: Value::Count,
        // redis-rs 0.27's `ConnectionManager`'s.
        default: KeyDefault::Is("6"),
        range: Range::Between {
            min: 0,
            max: 1000,
            why: "(each is one more connection attempt)",
        },
        doc: "with `reconnect = \"manager\"`: attempts after the first (below)",
    },
];

const CONNECTION_NAMES: [&str; CONNECTION_KEYS.len()] = key_names(&CONNECTION_KEYS);

pub const CONNECTION: TableSpec =
    TableSpec::plain("a connection", &CONNECTION_KEYS, &CONNECTION_NAMES);

const SUBSCRIBE_KEYS: [KeySpec; 3] = [
    KeySpec {
        name: "channel",
        value: Value::Name("a channel's name"),
        default: KeyDefault::Otherwise("none: tracking invalidations only"),
        range: Range::Any,
        doc: "the Pub/Sub channel it subscribes to",
    },
    KeySpec {
        name: "invalidates",
        value: Value::Ref("caches"),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "the cache whose keys its messages invalidate (in a service, its own instance's)",
    },
    KeySpec {
        name: "flush_on_reconnect",
        value: Value::Bool,
        default: KeyDefault::Is("false"),
        range: Range::Any,
        doc: "empty the cache when its link comes back after a loss: it cannot know what it \
              missed",
    },
];

const SUBSCRIBE_NAMES: [&str; SUBSCRIBE_KEYS.len()] = key_names(&SUBSCRIBE_KEYS);

pub const SUBSCRIBE: TableSpec =
    TableSpec::plain("a subscription", &SUBSCRIBE_KEYS, &SUBSCRIBE_NAMES);

const TRACKING_KEYS: [KeySpec; 2] = [
    KeySpec {
        name: "redirect",
        value: Value::Ref("connections"),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "the subscriber, on the same server, that receives the invalidations",
    },
    KeySpec {
        name: "bcast",
        value: Value::Refs("keys"),
        default: KeyDefault::Otherwise("`[]`: the default mode"),
        range: Range::Any,
        doc: "BCAST: an invalidation for every write of a key of these families",
    },
];

const TRACKING_NAMES: [&str; TRACKING_KEYS.len()] = key_names(&TRACKING_KEYS);

pub const TRACKING: TableSpec =
    TableSpec::plain("client tracking", &TRACKING_KEYS, &TRACKING_NAMES);

const CLIENT_LOOP_KEYS: [KeySpec; 3] = [
    KeySpec {
        name: "write_rate",
        value: Value::Bandwidth,
        default: KeyDefault::Required(MISSING),
        range: Range::Checked("more than zero"),
        doc: "the rate the loop builds its connections' commands at, one after another",
    },
    KeySpec {
        name: "copy_rate",
        value: Value::Bandwidth,
        default: KeyDefault::Otherwise("none: a command leaves once built"),
        range: Range::Checked("more than zero"),
        doc: "the writer's turn, with `copy_before_yield`: the rate a connection's writer \
              copies what it was handed into its socket",
    },
    KeySpec {
        name: "copy_before_yield",
        value: Value::Size,
        default: KeyDefault::Otherwise("none, as `copy_rate`"),
        range: Range::Checked("more than zero"),
        doc: "with `copy_rate`: how much a writer copies before the loop builds again",
    },
];

const CLIENT_LOOP_NAMES: [&str; CLIENT_LOOP_KEYS.len()] = key_names(&CLIENT_LOOP_KEYS);

pub const CLIENT_LOOP: TableSpec =
    TableSpec::plain("a client event loop", &CLIENT_LOOP_KEYS, &CLIENT_LOOP_NAMES);

/// The key table of `[client_loops.<name>]` in `docs/scenario-format.md`.
pub fn client_loop_table() -> String {
    markdown_table(&CLIENT_LOOP)
}

/// The key table of `[connections.<name>]` in `docs/scenario-format.md`, as markdown.
pub fn reference_table() -> String {
    markdown_table(&CONNECTION)
}

/// The key table of a connection's `subscribe`.
pub fn subscribe_table() -> String {
    markdown_table(&SUBSCRIBE)
}

/// The key table of a connection's `tracking`.
pub fn tracking_table() -> String {
    markdown_table(&TRACKING)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preset_names_are_the_models() {
        let names: Vec<&str> = CLIENT_PRESETS.iter().map(|preset| preset.name).collect();
        assert_eq!(names, PRESET_NAMES);
    }
}
