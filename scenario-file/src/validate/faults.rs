//! A `[faults.<name>]` table read through its kind's declaration (`crate::fault_kinds`): the
//! keys every fault has (target, start, duration) here, the kind's own keys through
//! [`FaultReader`], which applies what each key declares (its default, its range, the message
//! when a required one is missing) and reports every problem at the value, or at `kind`.

use outagelab_model::time::{SimDuration, SimTime};
use outagelab_sim::scenario::{
    ByteRate, ConnectionId, FaultSpec, FaultTarget, KeyFamilyId, ServerId,
};
use serde::de::Error as _;
use toml::Spanned;

use super::table::respan;
use super::{Validator, since_zero};
use crate::fault_kinds::{self, COMMON_KEYS, FaultKindSpec, On};
use crate::keys::{KeyDefault, KeySpec, Range, Value, default_value};
use crate::kinds::Names;
use crate::raw::{RawFault, RawValue};

/// A problem with a fault's key, already reported where it is.
#[derive(Debug)]
pub(crate) struct Reported;

impl Validator<'_> {
    pub(super) fn fault(
        &mut self,
        name: &str,
        raw: &RawFault,
        names: &Names,
        horizon: Option<SimTime>,
    ) -> Option<FaultSpec> {
        let target = self.fault_target(name, raw, names);
        let at = self.fault_start(name, raw, horizon)?;
        let kind = raw.kind.get_ref().0;
        let errors_before = self.errors.len();
        self.refuse_keys_of_other_kinds(name, raw, kind);
        let mut reader = FaultReader {
            validator: self,
            name,
            raw,
            names,
            kind,
        };
        let built = (kind.build)(&mut reader).ok()?;
        // The declaration and the simulator agree on what the kind is.
        debug_assert_eq!(kind.name, built.name());
        debug_assert_eq!(kind.instant.is_some(), built.is_instant(), "{}", kind.name);
        debug_assert_eq!(
            kind.on == On::Database,
            built.on_database(),
            "{}",
            kind.name
        );
        let fits = self.fault_fits(name, raw, target);
        if self.errors.len() > errors_before || !fits {
            return None;
        }
        let duration = self.fault_duration(name, raw, kind)?;
        Some(FaultSpec {
            name: name.to_owned(),
            target: target?,
            kind: built,
            at,
            duration,
        })
    }

    /// What the fault acts on; a connection's id is set once the services are expanded.
    fn fault_target(&mut self, name: &str, raw: &RawFault, names: &Names) -> Option<FaultTarget> {
        let key = format!("faults.{name}.target");
        let target_name = raw.target.get_ref();
        // A connection is named as the file writes it, or as `name@k` for instance k's copy
        // in a service: resolved once the services are expanded (`resolve_fault_targets`).
        let base = target_name
            .rsplit_once('@')
            .map_or(target_name.as_str(), |(base, _)| base);
        let on_connection =
            names.connections.contains(target_name) || names.connections.contains(base);
        if on_connection {
            self.fault_targets
                .push((name.to_owned(), raw.target.clone(), key));
            self.used.insert(("connections", base.to_owned()));
            Some(FaultTarget::Connection(ConnectionId(u32::MAX)))
        } else if !names.servers.contains(target_name)
            && (names.databases.contains(target_name) || raw.kind.get_ref().0.on == On::Database)
        {
            // A database, or an unknown name where a database fault looks for one.
            self.resolve(&names.databases, &raw.target, &key)
                .map(FaultTarget::Database)
        } else {
            self.resolve(&names.servers, &raw.target, &key)
                .map(FaultTarget::Server)
        }
    }

    fn fault_start(
        &mut self,
        name: &str,
        raw: &RawFault,
        horizon: Option<SimTime>,
    ) -> Option<SimTime> {
        let key = format!("faults.{name}.at");
        let at = SimTime::ZERO.saturating_add(self.duration(&raw.at, &key)?);
        if let Some(horizon) = horizon
            && at > horizon
        {
            let message = format!(
                "starts at {}, after the horizon {}: it would never happen",
                since_zero(at),
                since_zero(horizon)
            );
            self.error(Some(raw.at.span()), key, message);
        }
        Some(at)
    }

    /// A key of another kind, refused with the keys this kind takes.
    fn refuse_keys_of_other_kinds(&mut self, name: &str, raw: &RawFault, kind: &FaultKindSpec) {
        for (key, value) in &raw.keys {
            if kind.key(key).is_some() {
                continue;
            }
            let owners: Vec<String> = fault_kinds::kinds_taking(key)
                .iter()
                .map(|owner| format!("`{owner}`"))
                .collect();
            let takes = if kind.keys.is_empty() {
                format!("a `{}` fault takes no keys of its own", kind.name)
            } else {
                let own: Vec<String> = kind.keys.iter().map(|k| format!("`{}`", k.name)).collect();
                format!("a `{}` fault takes {}", kind.name, own.join(", "))
            };
            let message = format!(
                "only a {} fault takes `{key}`, not a `{}` one ({takes})",
                owners.join(" or "),
                kind.name
            );
            self.error(Some(value.span()), format!("faults.{name}.{key}"), message);
        }
    }

    /// Whether the kind acts on what the fault targets; if not, says what it acts on.
    fn fault_fits(&mut self, name: &str, raw: &RawFault, target: Option<FaultTarget>) -> bool {
        // An unknown target: said where it was resolved.
        let Some(target) = target else { return true };
        let kind = raw.kind.get_ref().0;
        let k = kind.name;
        let refusal = match (kind.on, target) {
            (On::Database, FaultTarget::Database(_)) => return true,
            (On::Database, _) => {
                format!("a `{k}` fault acts on a database: target one of [databases]")
            }
            (On::Connection { .. }, FaultTarget::Connection(_)) => return true,
            (On::Connection { refusal }, _) => format!("a `{k}` fault {refusal}"),
            (_, FaultTarget::Database(_)) => format!(
                "a `{k}` fault acts on Redis: a database takes {}",
                fault_kinds::kinds_on(|on| on == On::Database)
            ),
            (On::Server, FaultTarget::Connection(_)) => format!(
                "a `{k}` fault acts on a server: a connection takes {}",
                fault_kinds::kinds_on(|on| matches!(
                    on,
                    On::Connection { .. } | On::ServerOrConnection
                ))
            ),
            _ => return true,
        };
        self.error(
            Some(raw.target.span()),
            format!("faults.{name}.target"),
            refusal,
        );
        false
    }

    /// How long the fault lasts: an instant kind ends where it starts, and refuses a
    /// duration; `None`: it never ends.
    fn fault_duration(
        &mut self,
        name: &str,
        raw: &RawFault,
        kind: &FaultKindSpec,
    ) -> Option<Option<SimDuration>> {
        let key = format!("faults.{name}.duration");
        match (&raw.duration, kind.instant) {
            (Some(duration), Some(what)) => {
                self.error(
                    Some(duration.span()),
                    key,
                    format!("{what}: leave duration out"),
                );
                None
            }
            (None, Some(_)) => Some(Some(SimDuration::ZERO)),
            (Some(duration), None) => {
                let declared = COMMON_KEYS.iter().find(|k| k.name == "duration");
                let Some(KeySpec {
                    range: Range::Longer { why },
                    ..
                }) = declared
                else {
                    unreachable!("a fault's duration is declared longer than zero")
                };
                Some(Some(self.positive_duration(duration, &key, why)?))
            }
            (None, None) => Some(None),
        }
    }
}

/// One fault's own keys, read as its kind declares them; what a kind's `build` function
/// reads through. Each getter reports its problem (a bad value, one out of the declared
/// range, a required key missing) and returns [`Reported`].
pub(crate) struct FaultReader<'v, 'a, 'r> {
    validator: &'v mut Validator<'a>,
    name: &'r str,
    raw: &'r RawFault,
    /// The scenario's resources, for a kind that checks its target's (a pool's size).
    pub names: &'r Names<'r>,
    kind: &'static FaultKindSpec,
}

impl<'r> FaultReader<'_, '_, 'r> {
    /// The target as written.
    pub fn target_name(&self) -> &'r str {
        self.raw.target.get_ref()
    }

    /// Refuses the target: the kind does not act on it.
    pub fn refuse_target<T>(&mut self, message: impl Into<String>) -> Result<T, Reported> {
        let key = format!("faults.{}.target", self.name);
        self.validator
            .error(Some(self.raw.target.span()), key, message);
        Err(Reported)
    }

    /// Refuses the key `name`'s value.
    pub fn refuse<T>(&mut self, name: &str, message: impl Into<String>) -> Result<T, Reported> {
        let span = self
            .raw
            .key(name)
            .map_or(self.raw.kind.span(), Spanned::span);
        let key = self.field(name);
        self.validator.error(Some(span), key, message);
        Err(Reported)
    }

    pub fn duration(&mut self, name: &str) -> Result<Option<SimDuration>, Reported> {
        let Some(value) = self.value(name) else {
            return Ok(None);
        };
        let text = respan(value, |raw| match raw {
            RawValue::Text(text) => text,
            _ => unreachable!("a duration is read as text"),
        });
        let key = self.field(name);
        let duration = match self.declared(name).range {
            Range::Longer { why } => self.validator.positive_duration(&text, &key, why),
            _ => self.validator.duration(&text, &key),
        };
        duration.map(Some).ok_or(Reported)
    }

    /// A duration that is written or has a default.
    pub fn need_duration(&mut self, name: &str) -> Result<SimDuration, Reported> {
        self.duration(name)?.ok_or_else(|| self.missing(name))
    }

    pub fn bandwidth(&mut self, name: &str) -> Result<ByteRate, Reported> {
        let value = respan(self.need(name)?, |raw| match raw {
            RawValue::Text(text) => text,
            _ => unreachable!("a bandwidth is read as text"),
        });
        let key = self.field(name);
        self.validator.bandwidth(&value, &key).ok_or(Reported)
    }

    /// A size in bytes, of any magnitude.
    pub fn size(&mut self, name: &str) -> Result<u64, Reported> {
        let value = respan(self.need(name)?, |raw| match raw {
            RawValue::Size(size) => size,
            _ => unreachable!("a size is read as a size"),
        });
        let key = self.field(name);
        self.validator.size_any(&value, &key).ok_or(Reported)
    }

    /// A number in its declared range.
    pub fn number(&mut self, name: &str) -> Result<f64, Reported> {
        let value = self.number_value(name)?;
        self.in_range(name, *value.get_ref())?;
        Ok(*value.get_ref())
    }

    /// A number in its declared range, in thousandths (to 0.001).
    pub fn thousandths(&mut self, name: &str) -> Result<u32, Reported> {
        let value = self.number_value(name)?;
        self.in_range(name, *value.get_ref())?;
        let key = self.field(name);
        let thousandths = self.validator.thousandths(&value, &key).ok_or(Reported)?;
        // Rounded to a thousandth, a value may fall on a bound it is above.
        if self.in_bounds(name, f64::from(thousandths) / 1000.0) {
            Ok(thousandths)
        } else {
            self.refuse(name, self.out_of_range(name, *value.get_ref()))
        }
    }

    /// A whole number from the declared minimum to `max`; `None` when left out.
    pub fn whole(&mut self, name: &str, max: u32) -> Result<Option<u32>, Reported> {
        let Some(value) = self.value(name) else {
            return Ok(None);
        };
        let value = respan(value, |raw| match raw {
            RawValue::Whole(whole) => whole,
            _ => unreachable!("a count is read as a whole number"),
        });
        let Range::Whole { min, why, over, .. } = self.declared(name).range else {
            unreachable!("a count declares its range")
        };
        let written = value.get_ref().0;
        if written > i64::from(max) {
            let message = over
                .replace("{value}", &written.to_string())
                .replace("{max}", &max.to_string());
            return self.refuse(name, message);
        }
        let min = u32::try_from(min).expect("a count's minimum fits");
        let key = self.field(name);
        self.validator
            .whole(&value, &key, min..=max, why)
            .map(Some)
            .ok_or(Reported)
    }

    pub fn flag(&mut self, name: &str) -> Result<bool, Reported> {
        match self.need(name)?.into_inner() {
            RawValue::Bool(flag) => Ok(flag),
            _ => unreachable!("a flag is read as a boolean"),
        }
    }

    /// One of the declared words; `None` when left out without a default.
    pub fn word(&mut self, name: &str) -> Result<Option<String>, Reported> {
        let Some(value) = self.value(name) else {
            return Ok(None);
        };
        let RawValue::Word(word) = value.get_ref() else {
            unreachable!("a word is read as a string")
        };
        let message = match self.declared(name).value {
            Value::Enum(values) if !values.contains(&word.as_str()) => {
                serde::de::value::Error::unknown_variant(word, values).to_string()
            }
            Value::OneOf {
                values,
                noun,
                plural,
            } if !values.contains(&word.as_str()) => {
                format!("unknown {noun} `{word}` ({plural}: {})", values.join(", "))
            }
            _ => return Ok(Some(word.clone())),
        };
        self.refuse(name, message)
    }

    pub fn need_word(&mut self, name: &str) -> Result<String, Reported> {
        self.word(name)?.ok_or_else(|| self.missing(name))
    }

    /// The server `name` names, and its name.
    pub fn server(&mut self, name: &str) -> Result<(ServerId, &'r str), Reported> {
        let (written, server) = self.reference(name)?;
        let id = self
            .validator
            .resolve(&self.names.servers, &written, &self.field(name));
        Ok((id.ok_or(Reported)?, server))
    }

    /// The key family `name` names.
    pub fn key_family(&mut self, name: &str) -> Result<KeyFamilyId, Reported> {
        let (written, _) = self.reference(name)?;
        let id = self
            .validator
            .resolve(&self.names.keys, &written, &self.field(name));
        id.ok_or(Reported)
    }

    /// The name the key `name` gives, as written, and with its span for `resolve`.
    fn reference(&mut self, name: &str) -> Result<(Spanned<String>, &'r str), Reported> {
        debug_assert!(matches!(self.declared(name).value, Value::Ref(_)));
        let raw: &'r RawFault = self.raw;
        let Some(value) = raw.key(name) else {
            return Err(self.missing(name));
        };
        let RawValue::Word(word) = value.get_ref() else {
            unreachable!("a reference is read as a string")
        };
        Ok((Spanned::new(value.span(), word.clone()), word.as_str()))
    }

    fn number_value(&mut self, name: &str) -> Result<Spanned<f64>, Reported> {
        Ok(respan(self.need(name)?, |raw| match raw {
            RawValue::Number(number) => number,
            _ => unreachable!("a number is read as a float"),
        }))
    }

    fn in_bounds(&self, name: &str, value: f64) -> bool {
        match self.declared(name).range {
            Range::Numbers { low, high, .. } => low.admits(value) && high.admits(value),
            _ => true,
        }
    }

    fn in_range(&mut self, name: &str, value: f64) -> Result<(), Reported> {
        if self.in_bounds(name, value) {
            return Ok(());
        }
        self.refuse(name, self.out_of_range(name, value))
    }

    fn out_of_range(&self, name: &str, value: f64) -> String {
        let range = self.declared(name).range;
        let Range::Numbers { refusal, .. } = range else {
            unreachable!("only a declared range refuses")
        };
        refusal
            .replace("{value}", &value.to_string())
            .replace("{range}", &range.describe())
    }

    fn declared(&self, name: &str) -> &'static KeySpec {
        self.kind
            .key(name)
            .unwrap_or_else(|| panic!("`{}` reads its declared keys, not `{name}`", self.kind.name))
    }

    fn field(&self, name: &str) -> String {
        format!("faults.{}.{name}", self.name)
    }

    /// The key as written, else its declared default (placed at `kind`).
    fn value(&self, name: &str) -> Option<Spanned<RawValue>> {
        let declared = self.declared(name);
        if let Some(value) = self.raw.key(name) {
            return Some(value.clone());
        }
        match declared.default {
            KeyDefault::Is(text) => Some(Spanned::new(
                self.raw.kind.span(),
                default_value(declared.value, text),
            )),
            KeyDefault::Required(_) | KeyDefault::Otherwise(_) | KeyDefault::Preset(_) => None,
        }
    }

    fn need(&mut self, name: &str) -> Result<Spanned<RawValue>, Reported> {
        self.value(name).ok_or_else(|| self.missing(name))
    }

    /// Reports the required key `name` missing, at the fault's `kind`.
    fn missing(&mut self, name: &str) -> Reported {
        let KeyDefault::Required(message) = self.declared(name).default else {
            unreachable!("`{name}` has a default")
        };
        let key = self.field(name);
        self.validator
            .error(Some(self.raw.kind.span()), key, message);
        Reported
    }
}
