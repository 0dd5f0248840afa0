//! A `[connections.<name>]` table read through its declaration (`crate::connection_keys`):
//! every key through [`TableReader`], which applies a client preset's values and the defaults
//! as each key declares them; here, what the declaration cannot say: the defaults and keys
//! that depend on how it reconnects (`always`, `slot`, `manager`), the subscriber and tracking
//! tables' references, and the refusals placed at the key they came from. A
//! `[client_loops.<name>]` table (`crate::connection_keys::CLIENT_LOOP`) is read here too:
//! its writer's turn, whose two keys go together.

use std::num::NonZeroU32;
use std::ops::Range;

use outagelab_model::presets::{self, ClientPreset, ClientReconnect, ReconnectGrowth};
use outagelab_model::reconnect::ReconnectConfig;
use outagelab_model::time::SimDuration;
use outagelab_sim::scenario::{
    ClientLoopSpec, ConnectionSpec, KeyFamilyId, Reconnect, Subscription, Tracking, WriterTurn,
};

use super::table::TableReader;
use super::{Reported, Validator, default};
use crate::connection_keys::{CLIENT_LOOP, CONNECTION, RawClientLoop, RawConnection};
use crate::kinds::Names;
use crate::units::parse_duration;

type Reader<'v, 'a, 'r> = TableReader<'v, 'a, 'r>;

/// How it reconnects, as written (`reconnect`) or the preset's.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Always,
    Never,
    Slot,
    Manager,
}

const MODES: &[(&str, Mode)] = &[
    ("always", Mode::Always),
    ("never", Mode::Never),
    ("slot", Mode::Slot),
    ("manager", Mode::Manager),
];

const GROWTHS: &[(&str, ReconnectGrowth)] = &[
    ("linear", ReconnectGrowth::Linear),
    ("doubling", ReconnectGrowth::Doubling),
];

impl Validator<'_> {
    /// A client event loop: the rate it writes at, and the writer's turn, whose two keys go
    /// together.
    pub(super) fn client_loop(
        &mut self,
        name: &str,
        raw: &RawClientLoop,
    ) -> Option<ClientLoopSpec> {
        let table_span = self.key_span(&["client_loops", name]);
        let prefix = format!("client_loops.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &CLIENT_LOOP, table_span);
        let write_rate = r.bandwidth("write_rate");
        const TURN: &str = "the writer's turn is its copy rate and how much it copies \
                            before it yields";
        let writer = match (r.written("copy_rate"), r.written("copy_before_yield")) {
            (None, None) => Ok(None),
            (Some(_), Some(_)) => {
                let copy_rate = r.bandwidth("copy_rate");
                match r.size("copy_before_yield") {
                    Ok(Some(0)) => Err(r.refuse(
                        "copy_before_yield",
                        "must be more than zero bytes: a writer that yields before copying \
                         anything never writes",
                    )),
                    most => copy_rate.and_then(|copy_rate| {
                        Ok(copy_rate
                            .zip(most?)
                            .map(|(copy_rate, copy_before_yield)| WriterTurn {
                                copy_rate,
                                copy_before_yield,
                            }))
                    }),
                }
            }
            (Some(_), None) => {
                Err(r.refuse("copy_rate", format!("needs copy_before_yield too: {TURN}")))
            }
            (None, Some(_)) => {
                Err(r.refuse("copy_before_yield", format!("needs copy_rate too: {TURN}")))
            }
        };
        Some(ClientLoopSpec {
            name: name.to_owned(),
            write_rate: write_rate.ok()??,
            writer: writer.ok()?,
        })
    }

    pub(super) fn connection(
        &mut self,
        name: &str,
        raw: &RawConnection,
        names: &Names,
    ) -> Option<ConnectionSpec> {
        let table_span = self.key_span(&["connections", name]);
        let prefix = format!("connections.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &CONNECTION, table_span);
        let preset = r.preset(presets::client_preset).ok()?;
        let server = r
            .name("server")
            .expect("a connection is read with its server");
        let key = r.key("server");
        let server = r.validator.resolve(&names.servers, &server, &key);
        let command_timeout = preset.and_then(|p| p.command_timeout);
        let command_timeout = r.duration("command_timeout", command_timeout);
        let preset_mode = preset.map(|p| match p.reconnect {
            ClientReconnect::Always => Mode::Always,
            ClientReconnect::Never => Mode::Never,
        });
        let mode = r.choice("reconnect", MODES, preset_mode).ok()?;
        let mode = mode.expect("declared with a default");
        // A preset's offline queue, retries and delays are a reconnecting client's: not a
        // slot's, which has its own.
        let queued = preset.filter(|_| mode != Mode::Slot);
        let max_retries = max_retries(&mut r, queued, mode).ok()?;
        let connect_timeout = r.duration("connect_timeout", preset.map(|p| p.connect_timeout));
        let connect_timeout = connect_timeout.ok()?.expect("declared with a default");
        let (delay, delay_max) = delays(&mut r, queued, mode);
        let pending_max = r.count("pending_max", preset.and_then(|p| p.pending_max));
        let pending_max = pending_max.ok()?.and_then(NonZeroU32::new);
        let subscription = subscription(&mut r, names).ok()?;
        let tracking = tracking(&mut r, names, raw.server()).ok()?;
        reconnects_as_written(&mut r, mode, subscription.is_some()).ok()?;
        let client_loop = match r.name("client_loop") {
            Some(client_loop) => {
                let key = r.key("client_loop");
                Some(
                    r.validator
                        .resolve(&names.client_loops, &client_loop, &key)?,
                )
            }
            None => None,
        };
        let timer_lateness = r.duration("timer_lateness", None).ok()?;
        let reconnect_growth = growth(&mut r, queued, mode).ok()?;
        let latency = r.duration("latency", None).unwrap_or_default();
        let bandwidth = bandwidth(&mut r);
        let offline_queue = queued.map(|p| p.offline_queue).or(Some(mode != Mode::Slot));
        let offline_queue = r.flag_or("offline_queue", offline_queue);
        let reconnect = reconnect(&mut r, mode, delay, delay_max).ok()?;
        Some(ConnectionSpec {
            subscription,
            tracking,
            follows_failover: r.flag("follows_failover"),
            client_loop,
            timer_lateness: timer_lateness.expect("declared with a default"),
            pending_max,
            name: name.to_owned(),
            server: server?,
            latency: latency.unwrap_or_default(),
            bandwidth,
            command_timeout: command_timeout.unwrap_or(None),
            offline_queue,
            max_retries,
            connect_timeout,
            reconnect_delay: delay,
            reconnect_delay_max: delay_max,
            reconnect_growth,
            connected_at_start: r.flag("connected_at_start"),
            reconnect,
        })
    }
}

/// What only some ways of reconnecting take: a subscriber is not a slot, and only a manager
/// counts its own retries.
fn reconnects_as_written(r: &mut Reader, mode: Mode, subscribes: bool) -> Result<(), Reported> {
    if subscribes && mode == Mode::Slot {
        let message = "a subscriber cannot be a reconnect slot: a slot reconnects on a caller's \
                       command, and a subscriber sends none";
        return Err(r.refuse("reconnect", message));
    }
    if r.written("reconnect_retries").is_some() && mode != Mode::Manager {
        let message = "only `reconnect = \"manager\"` counts its retries (ioredis' own are \
                       `max_retries`, per command)";
        r.refuse("reconnect_retries", message);
    }
    Ok(())
}

/// How many lost links a command may outlive (`None`: any number); a slot carries none.
fn max_retries(
    r: &mut Reader,
    preset: Option<&ClientPreset>,
    mode: Mode,
) -> Result<Option<u32>, Reported> {
    if mode == Mode::Slot {
        let queues = matches!(
            r.written("offline_queue").map(|q| q.get_ref()),
            Some(crate::raw::RawValue::Bool(true))
        );
        if queues {
            r.refuse(
                "offline_queue",
                "a reconnect slot has no offline queue: a command runs on the live connection or \
                 fails at once",
            );
        }
        if r.written("max_retries").is_some() {
            r.refuse(
                "max_retries",
                "a reconnect slot carries no command over a lost connection (a read-only one is \
                 replayed once on a fresh connection)",
            );
        }
    }
    let limit = r.limit("max_retries", preset.map(|p| p.max_retries))?;
    Ok(limit.unwrap_or(Some(default::MAX_RETRIES)))
}

/// The reconnect delays, whose defaults depend on how it reconnects. A refused delay is
/// reported, and read as zero to go on checking the rest.
fn delays(r: &mut Reader, preset: Option<&ClientPreset>, mode: Mode) -> (SimDuration, SimDuration) {
    let (delay_default, max_default) = match mode {
        Mode::Slot => (default::SLOT_BACKOFF, default::SLOT_BACKOFF_MAX),
        Mode::Manager => (default::MANAGER_FACTOR, default::MANAGER_DELAY_MAX),
        Mode::Always | Mode::Never => (default::RECONNECT_DELAY, default::RECONNECT_DELAY_MAX),
    };
    let parse = |text| SimDuration::from_nanos(parse_duration(text).expect("defaults parse"));
    let delay = r.duration("reconnect_delay", preset.map(|p| p.reconnect_delay));
    let delay = delay.map_or(Some(SimDuration::ZERO), |delay| delay);
    let delay = delay.unwrap_or_else(|| parse(delay_default));
    let max = r.duration("reconnect_delay_max", preset.map(|p| p.reconnect_delay_max));
    let max = max.map_or(Some(SimDuration::ZERO), |max| max);
    let max = max.unwrap_or_else(|| parse(max_default));
    if delay > max {
        let from_preset = |r: &Reader, name| r.written_span(name).or(given(r, preset));
        let span = from_preset(r, "reconnect_delay").or(from_preset(r, "reconnect_delay_max"));
        let key = r.key("reconnect_delay");
        let message = format!("{delay} is above reconnect_delay_max {max}");
        r.validator.error(span, key, message);
    }
    (delay, max)
}

/// Where a value the preset gave is placed, if a preset gave one.
fn given(r: &Reader, preset: Option<&ClientPreset>) -> Option<Range<usize>> {
    preset.and(r.written_span("preset"))
}

/// How the delays grow: `reconnect = "always"` only (a slot's double, a manager's are its own).
fn growth(
    r: &mut Reader,
    preset: Option<&ClientPreset>,
    mode: Mode,
) -> Result<ReconnectGrowth, Reported> {
    let own_growth = !matches!(mode, Mode::Slot | Mode::Manager);
    if !own_growth && r.written("reconnect_growth").is_some() {
        return Err(r.refuse(
            "reconnect_growth",
            "applies to reconnect = \"always\": a slot's backoff doubles and a manager's is \
             redis-rs' own",
        ));
    }
    let preset = preset.filter(|_| own_growth).map(|p| p.reconnect_growth);
    let growth = r.choice("reconnect_growth", GROWTHS, preset)?;
    Ok(growth.expect("declared with a default"))
}

fn bandwidth(r: &mut Reader) -> Option<outagelab_sim::scenario::ByteRate> {
    let value = r.written("bandwidth")?;
    let text = super::table::respan(value.clone(), |raw| match raw {
        crate::raw::RawValue::Text(text) => text,
        _ => unreachable!("a bandwidth is read as text"),
    });
    let key = r.key("bandwidth");
    r.validator.bandwidth(&text, &key)
}

/// A subscriber's channel and the cache it invalidates.
fn subscription(r: &mut Reader, names: &Names) -> Result<Option<Subscription>, Reported> {
    let subscribe_key = r.key("subscribe");
    let Some(mut table) = r.table("subscribe") else {
        return Ok(None);
    };
    let invalidates = table.name("invalidates").expect("required");
    let cache = table
        .validator
        .resolve(&names.caches, &invalidates, &subscribe_key);
    let channel = table
        .name("channel")
        .map(|channel| table.validator.channel_id(channel.get_ref()));
    Ok(Some(Subscription {
        channel,
        invalidates: cache.ok_or(Reported)?,
        flush_on_reconnect: table.flag("flush_on_reconnect"),
    }))
}

/// Client tracking: the subscriber it redirects to (on its own server) and its BCAST families.
fn tracking(r: &mut Reader, names: &Names, server: &str) -> Result<Option<Tracking>, Reported> {
    let tracking_key = r.key("tracking");
    let Some(mut table) = r.table("tracking") else {
        return Ok(None);
    };
    let redirect = table.name("redirect").expect("required");
    let redirect_id = table
        .validator
        .resolve(&names.connections, &redirect, &tracking_key);
    let bcast_key = table.key("bcast");
    let bcast: Vec<Option<KeyFamilyId>> = (table.list("bcast").map(|l| l.into_inner()))
        .unwrap_or_default()
        .iter()
        .map(|family| table.validator.resolve(&names.keys, family, &bcast_key))
        .collect();
    let target = names.connections.get(redirect.get_ref());
    if let Some((_, target)) = target
        && (!target.subscribes() || target.server() != server)
    {
        let message = format!(
            "redirects its invalidations to `{}`, which is not a subscriber on the same server \
             (give it `subscribe = {{ invalidates = \"...\" }}`)",
            redirect.get_ref()
        );
        return Err(table.refuse("redirect", message));
    }
    Ok(Some(Tracking {
        redirect: redirect_id.ok_or(Reported)?,
        bcast: bcast
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or(Reported)?,
    }))
}

/// How it reconnects, with a manager's retries or a slot's backoff.
fn reconnect(
    r: &mut Reader,
    mode: Mode,
    delay: SimDuration,
    delay_max: SimDuration,
) -> Result<Reconnect, Reported> {
    Ok(match mode {
        Mode::Always => Reconnect::Always,
        Mode::Never => Reconnect::Never,
        Mode::Manager => Reconnect::Manager {
            retries: r
                .count("reconnect_retries", None)?
                .expect("declared with a default"),
        },
        // Checked above: a delay is longer than zero and at most the maximum.
        Mode::Slot => {
            match ReconnectConfig::new(delay.max(SimDuration::from_nanos(1)), delay_max.max(delay))
            {
                Ok(config) => Reconnect::Slot(config),
                Err(error) => return Err(r.refuse("reconnect", error.reason)),
            }
        }
    })
}
