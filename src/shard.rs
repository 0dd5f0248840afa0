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
}
