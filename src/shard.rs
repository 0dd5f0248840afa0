//! `--shard K/N` and `--shard auto`: which slice of a study's runs (or an exploration's
//! schedules) this process takes. `auto` reads the index and count from the scheduler that
//! started it, so one command line serves every task of an array job:
//!
//! - a Kubernetes Indexed Job: `JOB_COMPLETION_INDEX` (from 0, set by Kubernetes in every
//!   pod) and `JOB_COMPLETIONS` (the job's `completions`, which the manifest passes down as an
//!   environment variable: Kubernetes does not set one);
//! - a Slurm job array: `SLURM_ARRAY_TASK_ID`, from `SLURM_ARRAY_TASK_MIN`, with
//!   `SLURM_ARRAY_TASK_COUNT` tasks (an array with a step, `--array=0-15:4`, is refused: its
//!   ids are not one slice each).

use outagelab_report::study::Shard;

/// The most shards one study is cut into.
pub const SHARDS_MAX: u64 = 100_000;

/// Reads `--shard`: `K/N` with `1 <= K <= N`, or `auto` from `env` (the process environment,
/// or a test's).
pub fn parse(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Shard, String> {
    if text.trim() == "auto" {
        return auto(env);
    }
    let shape = || {
        format!(
            "`{text}` is not a shard: write K/N with 1 <= K <= N, e.g. 2/8, or `auto` in a \
             Kubernetes Indexed Job or a Slurm array"
        )
    };
    let (index, count) = text.split_once('/').ok_or_else(shape)?;
    let index: u64 = index.trim().parse().map_err(|_| shape())?;
    let count: u64 = count.trim().parse().map_err(|_| shape())?;
    if index == 0 || index > count || count > SHARDS_MAX {
        return Err(shape());
    }
    Ok(Shard { index, count })
}

/// The shard this task of an array job is.
fn auto(env: &dyn Fn(&str) -> Option<String>) -> Result<Shard, String> {
    let number = |name: &str| -> Result<Option<u64>, String> {
        match env(name) {
            None => Ok(None),
            Some(value) => value
                .trim()
                .parse::<u64>()
                .map(Some)
                .map_err(|_| format!("--shard auto: {name}={value:?} is not a whole number")),
        }
    };
    let shard = if let Some(index) = number("JOB_COMPLETION_INDEX")? {
        let count = number("JOB_COMPLETIONS")?.ok_or(
            "--shard auto: JOB_COMPLETION_INDEX is set (a Kubernetes Indexed Job) but \
             JOB_COMPLETIONS is not: pass the job's completions to the pod as JOB_COMPLETIONS \
             (docs/commands.md has a manifest)",
        )?;
        (index.saturating_add(1), count, "JOB_COMPLETION_INDEX")
    } else if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
        let count = number("SLURM_ARRAY_TASK_COUNT")?
            .ok_or("--shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not")?;
        let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
        if number("SLURM_ARRAY_TASK_STEP")?.is_some_and(|step| step != 1) {
            return Err(
                "--shard auto: the Slurm array has a step (--array=A-B:S): each task \
                        must be one slice, so use consecutive ids (--array=A-B)"
                    .to_owned(),
            );
        }
        let index = id.checked_sub(min).ok_or(format!(
            "--shard auto: SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}"
        ))?;
        (index.saturating_add(1), count, "SLURM_ARRAY_TASK_ID")
    } else {
        return Err(
            "--shard auto: neither a Kubernetes Indexed Job (JOB_COMPLETION_INDEX) nor a \
                    Slurm array (SLURM_ARRAY_TASK_ID) started this process: give --shard K/N"
                .to_owned(),
        );
    };
    let (index, count, from) = shard;
    if count == 0 || index > count || count > SHARDS_MAX {
        return Err(format!(
            "--shard auto: {from} gives shard {index} of {count}, which is not a slice \
             (1 <= K <= N <= {SHARDS_MAX})"
        ));
    }
    Ok(Shard { index, count })
}

/// What the shards of one job must agree on, as FNV-1a of the file's text, the command
/// line's `--set`s and a planted bug: a part whose fingerprint differs is from another job.
pub fn fingerprint(
    text: &str,
    sets: &[outagelab_scenario_file::Override],
    bugs: outagelab_sim::Bugs,
) -> String {
    let mut hash = 0xcbf2_9ce4_8422_2325_u64;
    let mut sets: Vec<String> = sets.iter().map(ToString::to_string).collect();
    // A planted bug changes every run: shards must agree on it too.
    sets.push(format!("{bugs:?}"));
    for byte in text.bytes().chain([0]).chain(sets.join("\n").into_bytes()) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Reads `--shard` against the process environment.
pub fn parse_here(text: &str) -> Result<Shard, String> {
    parse(text, &|name| std::env::var(name).ok())
}

/// The slices given to `--merge`, checked as a set: each part (its path, and the slice it
/// says it is) one of the same count of slices, each slice once, none missing. The count.
pub fn check_slices<'p>(
    command: &str,
    parts: impl IntoIterator<Item = (&'p std::path::Path, Option<Shard>)>,
) -> Result<u64, String> {
    let mut count = None;
    let mut seen = Vec::new();
    for (path, shard) in parts {
        let shard = shard.ok_or(format!(
            "{} is not a shard (written by {command} --shard K/N --json)",
            path.display()
        ))?;
        if !(1..=SHARDS_MAX).contains(&shard.count) {
            return Err(format!(
                "{} says it is one of {} shards: not a slice (1 to {SHARDS_MAX})",
                path.display(),
                shard.count
            ));
        }
        let n = *count.get_or_insert(shard.count);
        if shard.count != n || !(1..=n).contains(&shard.index) {
            return Err(format!("{} is not one of {n} shards", path.display()));
        }
        seen.resize(n as usize, false);
        let slot = &mut seen[(shard.index - 1) as usize];
        if *slot {
            return Err(format!(
                "shard {}/{n} is given twice ({})",
                shard.index,
                path.display()
            ));
        }
        *slot = true;
    }
    let n = count.ok_or("no shard given")?;
    match seen.iter().position(|given| !given) {
        Some(missing) => Err(format!(
            "shard {}/{n} is missing: give every shard's JSON",
            missing + 1
        )),
        None => Ok(n),
    }
}

/// The command line that joins the shards of `command` on `file`: the same `--set`s (and
/// `extra` flags) the slices ran with, which the merge checks.
pub fn merge_command(
    command: &str,
    file: &std::path::Path,
    sets: &[outagelab_scenario_file::Override],
    extra: &[String],
) -> String {
    let mut words = vec![
        "outagelab".to_owned(),
        command.to_owned(),
        crate::shell_word(&file.display().to_string()),
    ];
    for set in sets {
        words.push("--set".to_owned());
        words.push(crate::shell_word(&set.to_string()));
    }
    words.extend(extra.iter().cloned());
    words.push("--merge ...".to_owned());
    words.join(" ")
}

/// A command's `--shard` flag, if given: the slice, or its refusal printed and exit 2.
pub fn from_flag(flag: Option<&str>) -> Result<Option<Shard>, std::process::ExitCode> {
    flag.map(parse_here).transpose().map_err(|message| {
        eprintln!("--shard: {message}");
        std::process::ExitCode::from(2)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn auto_reads_a_kubernetes_indexed_job_and_a_slurm_array() {
        let k8s = with(&[("JOB_COMPLETION_INDEX", "0"), ("JOB_COMPLETIONS", "8")]);
        assert_eq!(parse("auto", &k8s), Ok(Shard { index: 1, count: 8 }));
        let k8s = with(&[("JOB_COMPLETION_INDEX", "7"), ("JOB_COMPLETIONS", "8")]);
        assert_eq!(parse("auto", &k8s), Ok(Shard { index: 8, count: 8 }));
        // `--array=1-4`: ids 1 to 4.
        let slurm = with(&[
            ("SLURM_ARRAY_TASK_ID", "3"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ]);
        assert_eq!(parse("auto", &slurm), Ok(Shard { index: 3, count: 4 }));
        assert_eq!(parse("2/8", &with(&[])), Ok(Shard { index: 2, count: 8 }));
    }

    #[test]
    fn auto_refuses_what_is_not_one_slice_per_task() {
        let refused = |vars: &[(&str, &str)], expected: &str| {
            let error = parse("auto", &with(vars)).unwrap_err();
            assert!(error.contains(expected), "{error}");
        };
        refused(&[], "neither a Kubernetes Indexed Job");
        refused(&[("JOB_COMPLETION_INDEX", "0")], "JOB_COMPLETIONS is not");
        refused(
            &[("JOB_COMPLETION_INDEX", "8"), ("JOB_COMPLETIONS", "8")],
            "gives shard 9 of 8",
        );
        refused(
            &[("JOB_COMPLETION_INDEX", "x"), ("JOB_COMPLETIONS", "8")],
            "not a whole number",
        );
        refused(
            &[
                ("JOB_COMPLETION_INDEX", "18446744073709551615"),
                ("JOB_COMPLETIONS", "8"),
            ],
            "which is not a slice",
        );
        refused(
            &[
                ("SLURM_ARRAY_TASK_ID", "4"),
                ("SLURM_ARRAY_TASK_COUNT", "4"),
                ("SLURM_ARRAY_TASK_STEP", "4"),
            ],
            "has a step",
        );
        assert!(parse("0/8", &with(&[])).is_err());
        assert!(parse("9/8", &with(&[])).is_err());
    }

    /// Every way a set of slices can be wrong is refused, and a whole set in any order
    /// passes.
    #[test]
    fn slices_given_to_a_merge_are_checked_as_a_set() {
        let path = std::path::Path::new("p.json");
        let check = |slices: &[Option<(u64, u64)>]| {
            let parts = slices
                .iter()
                .map(|s| (path, s.map(|(index, count)| Shard { index, count })));
            check_slices("map", parts)
        };
        assert_eq!(check(&[Some((3, 3)), Some((1, 3)), Some((2, 3))]), Ok(3));
        let refused = |slices: &[Option<(u64, u64)>], why: &str| {
            let message = check(slices).expect_err(why);
            assert!(message.contains(why), "{message}, not {why}");
        };
        refused(&[], "no shard given");
        refused(&[None], "is not a shard (written by map --shard");
        refused(&[Some((1, 0))], "one of 0 shards: not a slice");
        refused(&[Some((1, u64::MAX))], "not a slice (1 to 100000)");
        refused(&[Some((0, 2))], "is not one of 2 shards");
        refused(&[Some((1, 2)), Some((2, 3))], "is not one of 2 shards");
        refused(&[Some((1, 2)), Some((1, 2))], "shard 1/2 is given twice");
        refused(&[Some((2, 3)), Some((1, 3))], "shard 3/3 is missing");
    }
}
