//! `[tune]`: the design's own knobs `outagelab tune` searches for settings that survive the
//! worst schedules `[explore]` finds.
//!
//! ```toml
//! [tune]
//! variant = "ours"          # the design tuned (default: the first variant [explore] runs)
//! rounds = 3                # explore, tune, explore again: at most this many tunings
//! candidates = 40           # settings tried in each tuning (default 40)
//!
//! [tune.knobs]
//! "retries.client.budget_percent" = { min = 1, max = 50 }
//! "retries.client.backoff" = { min = "10ms", max = "1s" }
//! ```
//!
//! A knob is a key the file writes (a duration or a number), with a range that holds the
//! file's value: tuning starts from the file's settings and keeps the nearest that survive.

use std::collections::BTreeMap;

use toml::Spanned;

use crate::fit::{End, Unknown, unknown_in};
use crate::raw::{RawTune, RawUnknown};
use crate::{ExploreSpec, Reader, ScenarioFile};

/// `[tune]`, checked against the file and its `[explore]`.
#[derive(Clone, Debug)]
pub struct TuneSpec {
    pub variant: String,
    /// 1 to 20.
    pub rounds: u32,
    /// 1 to 10,000.
    pub candidates: u64,
    /// In key order; 1 to [`crate::fit::UNKNOWNS_MAX`].
    pub knobs: Vec<Unknown>,
}

impl<'t> Reader<'_> {
    pub(crate) fn tune(
        &mut self,
        value: crate::document::Value<'t>,
        file: &ScenarioFile,
        explore: Option<&ExploreSpec>,
        explore_failed: bool,
    ) -> Option<TuneSpec> {
        let raw = self.table::<RawTune>(value, "tune")?;
        let before = self.errors.len();
        if explore.is_none() && !explore_failed {
            let message = "tunes against the schedules explore finds: the file needs an \
                           [explore] table";
            self.refuse(raw.knobs.span(), "tune", message);
        }
        let variant = self.tune_variant(&raw.variant, file, explore);
        let whole = |this: &mut Self,
                     value: &Option<Spanned<crate::raw::Whole>>,
                     key: &str,
                     default: u64,
                     high: u64| {
            match value {
                None => Some(default),
                Some(n) if (1..=high as i64).contains(&n.get_ref().0) => Some(n.get_ref().0 as u64),
                Some(n) => {
                    let message = format!("{} is outside 1..={high}", n.get_ref().0);
                    this.refuse(n.span(), key, message);
                    None
                }
            }
        };
        let rounds = whole(self, &raw.rounds, "tune.rounds", 3, 20);
        let candidates = whole(self, &raw.candidates, "tune.candidates", 40, 10_000);
        let entries = raw.knobs.get_ref();
        if entries.is_empty() || entries.len() > crate::fit::UNKNOWNS_MAX {
            let message = format!(
                "has {} knobs: name between 1 and {} keys to tune",
                entries.len(),
                crate::fit::UNKNOWNS_MAX
            );
            self.refuse(raw.knobs.span(), "tune.knobs", message);
        }
        let settings = (file.variants.iter())
            .find(|v| Some(&v.name) == variant.as_ref())
            .map(|v| &v.settings);
        let mut knobs = Vec::new();
        for (key, entry) in entries {
            knobs.extend(self.tune_knob(key, entry, settings, file, explore));
        }
        if self.errors.len() > before {
            return None;
        }
        Some(TuneSpec {
            variant: variant?,
            rounds: rounds? as u32,
            candidates: candidates?,
            knobs,
        })
    }

    /// The variant tuned: the one named, else the first `[explore]` runs, else the first.
    fn tune_variant(
        &mut self,
        variant: &Option<Spanned<String>>,
        file: &ScenarioFile,
        explore: Option<&ExploreSpec>,
    ) -> Option<String> {
        match variant {
            Some(name) => {
                let known = file.variants.iter().any(|v| &v.name == name.get_ref());
                if !known {
                    let names = file.variants.iter().map(|v| v.name.as_str());
                    self.refuse(
                        name.span(),
                        "tune.variant",
                        crate::not_a_variant(name.get_ref(), names),
                    );
                }
                Some(name.get_ref().clone())
            }
            None => explore
                .and_then(|e| e.variants.first().cloned())
                .or_else(|| file.variants.first().map(|v| v.name.clone())),
        }
    }

    /// One knob: a key the file writes (in the variant tuned), not drawn by `[explore]` nor
    /// swept, with a range that holds the file's value.
    fn tune_knob(
        &mut self,
        key: &str,
        entry: &Spanned<RawUnknown>,
        settings: Option<&BTreeMap<String, String>>,
        file: &ScenarioFile,
        explore: Option<&ExploreSpec>,
    ) -> Option<Unknown> {
        let at = format!("tune.knobs.\"{key}\"");
        let Some(written) = settings.and_then(|s| s.get(key)) else {
            let message = format!(
                "`{key}` is not a key the file writes: write its value in the file, where tuning starts"
            );
            self.refuse(entry.span(), at, message);
            return None;
        };
        if explore.is_some_and(|e| e.params.iter().any(|p| p.key == key)) {
            let message = format!(
                "`{key}` is also in [explore.params]: the explorations tune runs draw it in \
                 every schedule, over the tuned value; tune a key of the design, explore one \
                 of the world"
            );
            self.refuse(entry.span(), at, message);
            return None;
        }
        if let Some(message) = crate::swept_by_the_file(file, key, "tuning it") {
            self.refuse(entry.span(), at, message);
            return None;
        }
        let (min, max) = (&entry.get_ref().min, &entry.get_ref().max);
        match unknown_in(key, written, min.get_ref(), max.get_ref(), self.starts.tune) {
            Ok(knob) => Some(knob),
            Err((which, message)) => {
                let span = match which {
                    End::Min => min.span(),
                    End::Max => max.span(),
                    End::Both => entry.span(),
                };
                self.refuse(span, at, message);
                None
            }
        }
    }
}
