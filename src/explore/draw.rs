//! The schedules: drawn from the seed and their number, checked against the file before
//! anything runs, written into the file's text (what a run reads and a reproducer holds),
//! and described for a reader.

use outagelab_scenario_file::{INSTANT_KINDS, ScenarioFile, set_values};
use outagelab_sim::Stream;

use super::*;

impl Explorer<'_> {
    /// "1 to 2 faults" / "parameters" for the headline.
    pub(super) fn what_varies(&self) -> String {
        let faults = match self.spec.faults_max {
            0 => String::new(),
            1 => "1 fault".to_owned(),
            n => format!("1 to {n} faults"),
        };
        let params = match self.spec.params.len() {
            0 => String::new(),
            1 => "1 parameter".to_owned(),
            n => format!("{n} parameters"),
        };
        let mut varies: Vec<String> = [faults, params]
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect();
        if self.spec.shuffle_ties {
            varies.push("same-instant ties shuffled".to_owned());
        }
        varies.join(" and ")
    }

    /// Every target and kind of every template, at the range's start, must be a fault the
    /// file takes: a template the file refuses would make every schedule refused.
    pub(crate) fn check_templates(&self) -> Result<(), String> {
        let bare = Schedule {
            seed: *self.spec.seeds.start(),
            faults: Vec::new(),
            params: vec![None; self.spec.params.len()],
        };
        self.load(&bare)
            .map_err(|why| format!("[explore]: the file with no drawn fault is refused:\n{why}"))?;
        for (t, template) in self.spec.faults.iter().enumerate() {
            for target in 0..template.targets.len() {
                for kind in 0..template.kinds.len() {
                    // The ranges' starts together, and their ends together.
                    let duration = self.duration_of(t, kind);
                    for (at, length) in [
                        (template.at.0, duration.map(|(low, _)| low)),
                        (template.at.1, duration.map(|(_, high)| high)),
                    ] {
                        let fault = Fault {
                            template: t,
                            target,
                            kind,
                            at,
                            duration: length,
                        };
                        let schedule = Schedule {
                            seed: *self.spec.seeds.start(),
                            faults: vec![fault],
                            params: vec![None; self.spec.params.len()],
                        };
                        if let Err(why) = self.load(&schedule) {
                            return Err(format!(
                                "explore.faults.{}: a {} fault on {} at {}: the file refuses \
                                 it:\n{}",
                                template.name,
                                template.kinds[kind],
                                template.targets[target],
                                seconds(at),
                                self.in_file_terms(&why)
                            ));
                        }
                    }
                }
            }
        }
        for (index, param) in self.spec.params.iter().enumerate() {
            for end in [param.min, param.max] {
                let mut params = vec![None; self.spec.params.len()];
                params[index] = Some(end);
                let schedule = Schedule {
                    seed: *self.spec.seeds.start(),
                    faults: Vec::new(),
                    params,
                };
                let loaded = self.load(&schedule).map_err(|why| {
                    format!(
                        "explore.params.\"{}\" at {}: the file refuses it:\n{}",
                        param.key,
                        param.show(end),
                        self.in_file_terms(&why)
                    )
                })?;
                // A key a variant's patch sets would not change that variant's runs.
                for variant in
                    (loaded.variants.iter()).filter(|v| self.spec.variants.contains(&v.name))
                {
                    if variant.settings.get(&param.key) != Some(&param.toml_value(end)) {
                        return Err(format!(
                            "explore.params.\"{}\": variant \"{}\" sets it in its patch, so \
                             drawing it would not change that variant; draw a key of the base",
                            param.key, variant.name
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// A refusal of a file with drawn faults, in the terms of the user's file: a location on
    /// a line past its end (a drawn fault's) is named as the drawn fault, not as a line the
    /// file does not have.
    pub(super) fn in_file_terms(&self, message: &str) -> String {
        let lines = self.text.lines().count();
        let prefix = format!("{}:", self.file.display());
        (message.lines())
            .map(|line| {
                let located = line.strip_prefix(&prefix).and_then(|rest| {
                    let (number, rest) = rest.split_once(':')?;
                    let (_, rest) = rest.split_once(':')?;
                    let number: usize = number.parse().ok()?;
                    (number > lines).then(|| format!("(a drawn fault):{rest}"))
                });
                located.unwrap_or_else(|| line.to_owned())
            })
            .collect::<Vec<String>>()
            .join("\n")
    }

    /// The range a fault of template `t` and kind `kind` draws its duration from.
    pub(super) fn duration_of(&self, t: usize, kind: usize) -> Option<(u64, u64)> {
        let template = &self.spec.faults[t];
        if INSTANT_KINDS.contains(&template.kinds[kind].as_str()) {
            None
        } else {
            template.duration
        }
    }

    /// Schedule `index` of the exploration seeded `seed`: from a stream of its own.
    pub(crate) fn draw(&self, seed: u64, index: u64) -> Schedule {
        let mut stream = Stream::derive(seed, "explore", &index.to_string());
        let mut pick = |n: usize| stream.below(n as u64) as usize;
        let seeds = self.spec.seeds.clone();
        let run_seed = seeds.start() + pick((seeds.end() - seeds.start() + 1) as usize) as u64;
        let count = match self.spec.faults_max {
            0 => 0,
            n => 1 + pick(n as usize),
        };
        let mut faults = Vec::with_capacity(count);
        for _ in 0..count {
            let t = pick(self.spec.faults.len());
            let template = &self.spec.faults[t];
            let target = pick(template.targets.len());
            let kind = pick(template.kinds.len());
            let mut within = |(low, high): (u64, u64)| {
                // To the millisecond where the range holds whole ones; else its start.
                let (first, last) = (low.div_ceil(MS), high / MS);
                if first > last {
                    low
                } else {
                    (first + pick((last - first + 1) as usize) as u64) * MS
                }
            };
            let at = within(template.at);
            let duration = self.duration_of(t, kind).map(&mut within);
            faults.push(Fault {
                template: t,
                target,
                kind,
                at,
                duration,
            });
        }
        faults.sort_by_key(|f| (f.at, f.template, f.target, f.kind));
        let params = (self.spec.params.iter())
            .map(|param| {
                // A uniform draw in the range, to one part in a million.
                let x = pick(1_000_001) as f64 / 1e6;
                Some(param.round(param.min + x * (param.max - param.min)))
            })
            .collect();
        Schedule {
            seed: run_seed,
            faults,
            params,
        }
    }

    /// The file's text with the schedule's parameters written in and its faults appended.
    pub(super) fn schedule_text(&self, schedule: &Schedule) -> Result<String, String> {
        let edits: Vec<(String, String)> = (self.spec.params.iter().zip(&schedule.params))
            .filter_map(|(param, value)| value.map(|v| (param.key.clone(), param.toml_value(v))))
            .collect();
        let mut text = set_values(self.text, &edits)?;
        if self.spec.shuffle_ties {
            text = with_shuffled_ties(&text)?;
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
        for (index, fault) in schedule.faults.iter().enumerate() {
            let template = &self.spec.faults[fault.template];
            text.push_str(&format!(
                "\n[faults.explored-{}]\ntarget = \"{}\"\nkind = \"{}\"\nat = \"{}\"\n",
                index + 1,
                template.targets[fault.target],
                template.kinds[fault.kind],
                duration_text(fault.at)
            ));
            if let Some(duration) = fault.duration {
                text.push_str(&format!("duration = \"{}\"\n", duration_text(duration)));
            }
            for (key, value) in &template.extra {
                text.push_str(&format!("{key} = {value}\n"));
            }
        }
        Ok(text)
    }

    /// The file under `schedule`, as `run` reads it.
    pub(super) fn load(&self, schedule: &Schedule) -> Result<ScenarioFile, String> {
        let text = self.schedule_text(schedule)?;
        outagelab_scenario_file::parse_with(&text, self.file, self.sets)
            .map_err(|diagnostics| diagnostics.to_string())
    }

    /// `seed 734, 2 faults: kill on redis at 12.3 s; pause on redis at 30 s for 2.3 s;
    /// loads.steady.rate = 1200`.
    pub(crate) fn describe(&self, schedule: &Schedule) -> String {
        let mut parts: Vec<String> = schedule
            .faults
            .iter()
            .map(|fault| {
                let template = &self.spec.faults[fault.template];
                let mut text = format!(
                    "{} on {} at {}",
                    template.kinds[fault.kind],
                    template.targets[fault.target],
                    seconds(fault.at)
                );
                if let Some(duration) = fault.duration {
                    text.push_str(&format!(" for {}", seconds(duration)));
                }
                text
            })
            .collect();
        for (param, value) in self.spec.params.iter().zip(&schedule.params) {
            if let Some(value) = value {
                parts.push(format!("{} = {}", param.key, param.show(*value)));
            }
        }
        let faults = match schedule.faults.len() {
            0 => "no fault".to_owned(),
            1 => "1 fault".to_owned(),
            n => format!("{n} faults"),
        };
        if self.spec.shuffle_ties {
            parts.push("ties shuffled".to_owned());
        }
        if parts.is_empty() {
            format!("seed {}, {faults}", schedule.seed)
        } else {
            format!("seed {}, {faults}: {}", schedule.seed, parts.join("; "))
        }
    }

    /// The scenario file that reproduces `schedule`: the file with its parameters and faults
    /// written in (paths it reads made absolute when written elsewhere), the run seed as its
    /// seed, and a comment that says what it breaks.
    /// The scenario file that reproduces `schedule`, written to `output`: the file with its
    /// parameters and faults written in (paths it reads made absolute when written
    /// elsewhere), the run seed as its seed; and the command that runs it. `header` goes on
    /// top, as comment lines (it may name `{command}`, replaced by the command).
    pub(crate) fn standalone(
        &self,
        schedule: &Schedule,
        output: &Path,
        bug_name: Option<&str>,
        header: &str,
    ) -> Result<Reproducer, String> {
        let mut text = self.schedule_text(schedule)?;
        let mut edits = crate::fit::relocated_paths(&text, self.file, output)?;
        let seed_written = set_values(&text, &[("scenario.seed".to_owned(), "0".to_owned())]);
        if seed_written.is_ok() {
            edits.push(("scenario.seed".to_owned(), schedule.seed.to_string()));
        }
        text = set_values(&text, &edits)?;
        let mut command = format!(
            "outagelab run {}",
            crate::shell_word(&output.display().to_string())
        );
        if seed_written.is_err() {
            command.push_str(&format!(" --seed {}", schedule.seed));
        }
        for set in self.sets {
            command.push_str(&format!(" --set {}", crate::shell_word(&set.to_string())));
        }
        if let Some(bug) = bug_name {
            command.push_str(&format!(" --plant-bug {bug}"));
        }
        let header: String = (header.replace("{command}", &command).lines())
            .map(|line| format!("# {line}\n"))
            .collect();
        Ok(Reproducer {
            text: format!("{header}{text}"),
            command,
        })
    }

    /// The reproducer of a finding: [`Explorer::standalone`] with a header that says what it
    /// breaks and how it was found.
    pub(crate) fn reproducer(
        &self,
        schedule: &Schedule,
        way: &Way,
        output: &Path,
        explore_seed: u64,
        bug_name: Option<&str>,
    ) -> Result<Reproducer, String> {
        let header = format!(
            "Found by `outagelab explore {} --seed {explore_seed}`, shrunk: variant \"{}\" \
             breaks ({})\nunder {} (drawn faults: `[faults.explored-*]`, at the end).\n\
             Reproduce with: {{command}}",
            self.file.display(),
            way.variant,
            way.what,
            self.describe(schedule),
        );
        self.standalone(schedule, output, bug_name, &header)
    }
}

/// `text` with `[run] ties = "shuffled"`: the value replaced where the file writes it, else a
/// line under its `[run]` header, else a `[run]` table at the end.
pub(super) fn with_shuffled_ties(text: &str) -> Result<String, String> {
    const LINE: &str = "ties = \"shuffled\"\n";
    if let Ok(text) = set_values(text, &[("run.ties".to_owned(), "\"shuffled\"".to_owned())]) {
        return Ok(text);
    }
    let mut out = String::with_capacity(text.len() + 32);
    let mut placed = false;
    for line in text.split_inclusive('\n') {
        out.push_str(line);
        let code = line.split('#').next().unwrap_or_default().trim();
        if !placed && code == "[run]" {
            if !line.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(LINE);
            placed = true;
        }
    }
    if !placed {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("\n[run]\n");
        out.push_str(LINE);
    }
    Ok(out)
}

/// A duration as the file writes it: `"1200ms"`, `"1500us"`.
pub(super) fn duration_text(nanos: u64) -> String {
    if nanos.is_multiple_of(MS) {
        format!("{}ms", nanos / MS)
    } else if nanos.is_multiple_of(1000) {
        format!("{}us", nanos / 1000)
    } else {
        format!("{nanos}ns")
    }
}

/// `12.3 s`, `250 ms`.
pub(super) fn seconds(nanos: u64) -> String {
    if nanos >= 1_000 * MS {
        let text = format!("{:.3}", nanos as f64 / 1e9);
        format!("{} s", text.trim_end_matches('0').trim_end_matches('.'))
    } else {
        let text = format!("{:.3}", nanos as f64 / 1e6);
        format!("{} ms", text.trim_end_matches('0').trim_end_matches('.'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffled_ties_are_written_where_the_file_can_take_them() {
        let written = "[run]\nties = \"scheduled\"\n";
        assert_eq!(
            with_shuffled_ties(written).unwrap(),
            "[run]\nties = \"shuffled\"\n"
        );
        let header = "[scenario]\nname = \"x\"\n[run] # limits\nhorizon = \"1s\"\n";
        assert_eq!(
            with_shuffled_ties(header).unwrap(),
            "[scenario]\nname = \"x\"\n[run] # limits\nties = \"shuffled\"\nhorizon = \"1s\"\n"
        );
        let none = "[scenario]\nname = \"x\"";
        assert_eq!(
            with_shuffled_ties(none).unwrap(),
            "[scenario]\nname = \"x\"\n\n[run]\nties = \"shuffled\"\n"
        );
    }

    #[test]
    fn durations_are_written_and_shown_exactly() {
        assert_eq!(duration_text(1_200 * MS), "1200ms");
        assert_eq!(duration_text(1_500_000 + 500), "1500500ns");
        assert_eq!(seconds(12_300 * MS), "12.3 s");
        assert_eq!(seconds(250 * MS), "250 ms");
    }
}
