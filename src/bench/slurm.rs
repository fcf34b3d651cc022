//! A SLURM job array for the missing cells of a plan: the sbatch script (one array task per
//! cell, each running the plan's command with `--cell` into its own journal), and what
//! `squeue` and a task's log say about how a task ended. SLURM places the tasks, retries them
//! (`--requeue` where asked) and keeps the accounts; trtkit only writes the script and reads
//! what SLURM reports. Submitting and following the array is in [`super::slurm_follow`].

use super::record::FailureKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// What the array asks SLURM for.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlurmOptions {
    /// `--partition`.
    pub(crate) partition: Option<String>,
    /// `--gres` (e.g. `gpu:1`).
    pub(crate) gres: Option<String>,
    /// `--time` (e.g. `00:30:00`).
    pub time: Option<String>,
    /// `--requeue`: SLURM may run a task again after a node failure or preemption.
    pub(crate) requeue: bool,
    /// More `#SBATCH` options, as sbatch takes them (`--account=ml`).
    pub extra: Vec<String>,
}

/// The array a run submitted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlurmJob {
    /// SLURM's job id of the array.
    pub(crate) job_id: String,
    /// The sbatch script, kept in the results folder.
    pub script: String,
    /// Array tasks (one per cell).
    pub tasks: usize,
    /// The folder of the tasks' logs (`JOB_TASK.log`).
    pub logs: String,
}

/// The job name of a results folder's arrays: how a later run finds one still queued.
pub(crate) fn job_name(run_name: &str) -> String {
    format!("trtkit-{run_name}")
}

/// A word quoted for bash when it needs it.
pub fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The sbatch script: array task `i` runs `command` (the plan's `trtkit bench` command line,
/// without scheduling flags) with `--cell cells[i]`, from `workdir`, its output in `logs`.
pub(crate) fn array_script(
    run_name: &str,
    command: &[String],
    cells: &[String],
    workdir: &Path,
    logs: &Path,
    options: &SlurmOptions,
) -> String {
    let mut s = String::from("#!/bin/bash\n");
    s.push_str(&format!(
        "# trtkit bench, run {run_name}: {} cell{}, one per array task; each writes journal-<cell>.jsonl\n",
        cells.len(),
        if cells.len() == 1 { "" } else { "s" }
    ));
    let mut directive = |d: String| s.push_str(&format!("#SBATCH {d}\n"));
    directive(format!("--job-name={}", shell_word(&job_name(run_name))));
    directive(format!("--array=0-{}", cells.len().saturating_sub(1)));
    directive("--ntasks=1".into());
    directive(format!(
        "--output={}",
        shell_word(&logs.join("%A_%a.log").display().to_string())
    ));
    directive(format!(
        "--chdir={}",
        shell_word(&workdir.display().to_string())
    ));
    if let Some(p) = &options.partition {
        directive(format!("--partition={}", shell_word(p)));
    }
    if let Some(g) = &options.gres {
        directive(format!("--gres={}", shell_word(g)));
    }
    if let Some(t) = &options.time {
        directive(format!("--time={}", shell_word(t)));
    }
    directive(if options.requeue {
        "--requeue".into()
    } else {
        "--no-requeue".into()
    });
    for extra in &options.extra {
        directive(shell_word(extra));
    }
    s.push_str("\ncells=(\n");
    for cell in cells {
        s.push_str(&format!("  {}\n", shell_word(cell)));
    }
    s.push_str(")\n\n");
    let words: Vec<String> = command.iter().map(|w| shell_word(w)).collect();
    s.push_str(&format!(
        "exec {} --cell \"${{cells[$SLURM_ARRAY_TASK_ID]}}\"\n",
        words.join(" ")
    ));
    s
}

/// An array task as `squeue` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TaskState {
    /// `PENDING`, `RUNNING`, `COMPLETED`, `CANCELLED`, …
    pub state: String,
    /// SLURM's reason (why pending, or how it ended).
    pub reason: String,
}

impl TaskState {
    /// Whether the task has ended for good (a requeued task goes back to pending).
    pub fn ended(&self) -> bool {
        !matches!(
            self.state.as_str(),
            "PENDING"
                | "RUNNING"
                | "CONFIGURING"
                | "COMPLETING"
                | "REQUEUED"
                | "REQUEUE_FED"
                | "REQUEUE_HOLD"
                | "RESIZING"
                | "SIGNALING"
                | "STAGE_OUT"
                | "SUSPENDED"
                | "STOPPED"
        )
    }

    /// Whether it is running now.
    pub fn running(&self) -> bool {
        matches!(
            self.state.as_str(),
            "RUNNING" | "COMPLETING" | "CONFIGURING"
        )
    }
}

/// The tasks of `squeue -h -r -t all -j JOB -o '%K|%T|%r'` output, by array index.
pub(crate) fn parse_squeue(text: &str) -> BTreeMap<usize, TaskState> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.trim().splitn(3, '|');
            let index = parts.next()?.trim().parse().ok()?;
            let state = parts.next()?.trim().to_string();
            let reason = parts.next().unwrap_or("").trim().to_string();
            Some((index, TaskState { state, reason }))
        })
        .collect()
}

/// How a task that ended without a record of its cell failed, from its SLURM state: the time
/// limit and memory are the cell's own failures; anything else stopped it from outside.
pub(crate) fn failure_kind(state: &str) -> FailureKind {
    match state {
        "TIMEOUT" | "DEADLINE" => FailureKind::Timeout,
        "OUT_OF_MEMORY" => FailureKind::Oom,
        "FAILED" | "COMPLETED" => FailureKind::Error,
        _ => FailureKind::Interrupted,
    }
}

/// The line of a task's log that says why it ended: slurmstepd's `*** JOB … CANCELLED AT … ***`
/// notice, else the last `error:` line, else the last line.
pub(crate) fn log_reason(log: &str) -> Option<String> {
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if let Some(notice) = lines
        .iter()
        .rev()
        .find_map(|l| l.find("***").map(|i| &l[i..]))
    {
        return Some(notice.to_string());
    }
    let pick = lines
        .iter()
        .rev()
        .find(|l| l.contains("error:"))
        .or(lines.last())?;
    Some(pick.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_runs_one_cell_per_task_with_the_asked_resources() {
        let command: Vec<String> = ["/opt/trtkit", "bench", "plan.toml", "--name", "my run"]
            .map(String::from)
            .into();
        let cells = ["net/fp16/b8/ort-cuda", "net/fp32/b1/seq=128/trt"].map(String::from);
        let options = SlurmOptions {
            partition: Some("gpu".into()),
            gres: Some("gpu:1".into()),
            time: Some("00:20:00".into()),
            requeue: true,
            extra: vec!["--account=ml team".into()],
        };
        let s = array_script(
            "r1",
            &command,
            &cells,
            Path::new("/home/u"),
            Path::new("/res/r1/slurm"),
            &options,
        );
        for line in [
            "#SBATCH --job-name=trtkit-r1",
            "#SBATCH --array=0-1",
            "#SBATCH --output=/res/r1/slurm/%A_%a.log",
            "#SBATCH --chdir=/home/u",
            "#SBATCH --partition=gpu",
            "#SBATCH --gres=gpu:1",
            "#SBATCH --time=00:20:00",
            "#SBATCH --requeue",
            "#SBATCH '--account=ml team'",
            "  net/fp16/b8/ort-cuda",
            "exec /opt/trtkit bench plan.toml --name 'my run' --cell \"${cells[$SLURM_ARRAY_TASK_ID]}\"",
        ] {
            assert!(s.lines().any(|l| l == line), "no line {line:?} in\n{s}");
        }
        let plain = array_script(
            "r1",
            &command,
            &cells[..1],
            Path::new("/"),
            Path::new("/l"),
            &SlurmOptions::default(),
        );
        assert!(plain.contains("#SBATCH --array=0-0\n") && plain.contains("--no-requeue"));
        assert!(!plain.contains("--partition") && !plain.contains("--gres"));
    }

    #[test]
    fn squeue_lines_become_task_states() {
        let text =
            "0|COMPLETED|None\n1|CANCELLED|None\n2|RUNNING|None\n3|PENDING|Resources\nnoise\n";
        let tasks = parse_squeue(text);
        assert_eq!(tasks.len(), 4);
        assert!(tasks[&0].ended() && tasks[&1].ended());
        assert!(!tasks[&2].ended() && tasks[&2].running());
        assert!(!tasks[&3].ended() && !tasks[&3].running());
        assert_eq!(tasks[&3].reason, "Resources");
        assert_eq!(failure_kind("CANCELLED"), FailureKind::Interrupted);
        assert_eq!(failure_kind("NODE_FAIL"), FailureKind::Interrupted);
        assert_eq!(failure_kind("TIMEOUT"), FailureKind::Timeout);
        assert_eq!(failure_kind("OUT_OF_MEMORY"), FailureKind::Oom);
    }

    #[test]
    fn a_log_says_why_its_task_ended() {
        let log = "running cell\nslurmstepd-n1: error: *** JOB 12 ON n1 CANCELLED AT 2026-11-26T12:00:00 ***\n";
        assert_eq!(
            log_reason(log).unwrap(),
            "*** JOB 12 ON n1 CANCELLED AT 2026-11-26T12:00:00 ***"
        );
        assert_eq!(
            log_reason("a\nerror: m.onnx: not found\nbye\n").unwrap(),
            "error: m.onnx: not found"
        );
        assert_eq!(log_reason("a\nlast\n").unwrap(), "last");
        assert_eq!(log_reason(""), None);
    }
}
