//! `bench --slurm`: the missing cells submitted as one SLURM job array, then followed until every
//! task has ended: progress, done and failed counts, and for a task that ended without a record
//! of its cell (cancelled, preempted, its node lost, killed at SLURM's time limit) a failure
//! recorded in that cell's journal with the reason its log gives. A second run submits only what
//! is still missing.

use super::journal::{append, cell_journal, read_files};
use super::matrix::{summarize, BenchReport, Matrix};
use super::plan::{CellSpec, Plan};
use super::record::{now_unix_s, CellFailure, CellRecord, Status};
use super::slurm::{
    array_script, failure_kind, job_name, log_reason, parse_squeue, SlurmJob, SlurmOptions,
};
use crate::atomic_file::write_atomic;
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How to submit.
#[derive(Clone, Debug)]
pub(crate) struct SlurmRequest {
    /// What the array asks SLURM for.
    pub options: SlurmOptions,
    /// The command each task runs with `--cell LABEL` after it: trtkit's absolute path and the
    /// plan's `bench` arguments, without scheduling flags.
    pub command: Vec<String>,
    /// Print the script; submit nothing.
    pub(crate) dry_run: bool,
    /// Seconds between two looks at the queue.
    pub(crate) poll_s: f64,
}

/// What `bench --slurm` did.
pub(crate) enum SlurmOutcome {
    /// `--dry-run`: the script that would be submitted.
    Script(String),
    /// The array ran (or nothing was missing): the run's report, naming the array.
    Ran(Box<BenchReport>),
}

/// Runs a SLURM command, its stdout on success; one line naming it and its complaint otherwise.
fn slurm_command(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program).args(args).output().map_err(|e| {
        anyhow::anyhow!(
            "{program}: cannot run it ({e}); --slurm needs SLURM's client commands (sbatch, squeue) on this machine"
        )
    })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        bail!(
            "{program} {}: {}",
            args.join(" "),
            err.trim()
                .lines()
                .last()
                .unwrap_or("failed without a message")
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn absolute(path: &Path) -> Result<PathBuf> {
    Ok(if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    })
}

/// Submits the missing cells of `plan` as an array (or prints its script) and follows it.
pub(crate) fn bench_slurm(
    plan: &Plan,
    retry_failed: bool,
    request: &SlurmRequest,
    progress: &dyn Progress,
    on_record: &dyn Fn(&CellRecord),
) -> Result<SlurmOutcome> {
    let folder = absolute(&plan.folder)?;
    let matrix = Matrix::expand_for_cluster(plan, retry_failed)?;
    let missing = matrix.missing();
    let labels: Vec<String> = missing.iter().map(|c| c.label()).collect();
    let logs = folder.join("slurm");
    let workdir = std::env::current_dir().context("cannot read the current folder")?;
    let script = array_script(
        &plan.name,
        &request.command,
        &labels,
        &workdir,
        &logs,
        &request.options,
    );
    if request.dry_run {
        return Ok(SlurmOutcome::Script(if missing.is_empty() {
            format!(
                "# nothing to submit: the journals of run {} have every cell\n",
                plan.name
            )
        } else {
            script
        }));
    }
    if missing.is_empty() {
        let journal = folder.join("journal-*.jsonl");
        return Ok(SlurmOutcome::Ran(Box::new(summarize(
            plan,
            journal,
            &matrix,
            &[],
            0.0,
            vec![],
        ))));
    }
    let name = job_name(&plan.name);
    let queued = slurm_command("squeue", &["-h", "-n", &name, "-o", "%A"])?;
    if let Some(job) = queued.split_whitespace().next() {
        bail!("SLURM array {job} of run {} is still queued: wait for it, or cancel it with `scancel {job}`, before submitting the missing cells again", plan.name);
    }
    std::fs::create_dir_all(&logs).with_context(|| format!("{}: cannot create", logs.display()))?;
    let script_path = logs.join(format!("array-{}.sbatch", now_unix_s() as u64));
    write_atomic(&script_path, script.as_bytes())?;
    let before: Vec<usize> = missing
        .iter()
        .map(|c| records_of(&folder, c).len())
        .collect();
    let submitted = slurm_command("sbatch", &["--parsable", &script_path.to_string_lossy()])?;
    let job_id = submitted.trim().split(';').next().unwrap_or("").to_string();
    if job_id.is_empty() {
        bail!(
            "sbatch accepted {} but printed no job id",
            script_path.display()
        );
    }
    let job = SlurmJob {
        job_id,
        script: script_path.display().to_string(),
        tasks: missing.len(),
        logs: logs.display().to_string(),
    };
    let start = Instant::now();
    let records = follow(
        &job,
        &folder,
        &missing,
        &before,
        request.poll_s,
        progress,
        on_record,
    )?;
    let journal = folder.join("journal-*.jsonl");
    let wall_s = start.elapsed().as_secs_f64();
    let mut report = summarize(plan, journal, &matrix, &records, wall_s, vec![]);
    report.slurm = Some(job);
    Ok(SlurmOutcome::Ran(Box::new(report)))
}

/// The records in a cell's own journal.
fn records_of(folder: &Path, cell: &CellSpec) -> Vec<CellRecord> {
    let path = cell_journal(folder, &cell.key);
    if !path.is_file() {
        return vec![];
    }
    read_files(&[path]).map(|j| j.records).unwrap_or_default()
}

/// The failure of a task that ended as `state` without a record of its cell, said from its log.
fn lost_task(job: &SlurmJob, task: usize, cell: &CellSpec, state: &str) -> CellRecord {
    let log = Path::new(&job.logs).join(format!("{}_{task}.log", job.job_id));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let why = log_reason(&text).unwrap_or_else(|| "its log says nothing".into());
    let tail: Vec<&str> = text.lines().rev().take(8).collect();
    CellRecord {
        id: cell.id.clone(),
        key: cell.key.clone(),
        model: cell.model_name(),
        model_path: cell.model.display().to_string(),
        status: Status::Failed,
        metrics: None,
        failure: Some(CellFailure {
            kind: failure_kind(state),
            reason: format!(
                "SLURM task {}_{task} ended {state} before the cell could: {why}",
                job.job_id
            ),
            exit_code: None,
            signal: None,
            stderr_tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
            log: Some(format!("slurm/{}_{task}.log", job.job_id)),
        }),
        started_unix_s: now_unix_s(),
        wall_s: 0.0,
        host: format!("slurm task {}_{task}", job.job_id),
        device: None,
    }
}

/// Times in a row `squeue` may fail before following gives up.
const SQUEUE_RETRIES: u32 = 5;

/// Looks at the queue every `poll_s` until every task has ended; returns each task's record.
fn follow(
    job: &SlurmJob,
    folder: &Path,
    cells: &[&CellSpec],
    before: &[usize],
    poll_s: f64,
    progress: &dyn Progress,
    on_record: &dyn Fn(&CellRecord),
) -> Result<Vec<CellRecord>> {
    let mut ended: Vec<Option<CellRecord>> = vec![None; cells.len()];
    // Looks at which a task was seen ended without a record: a record written just before
    // the task ended may take a moment to show on a shared file system.
    let mut ended_looks = vec![0u32; cells.len()];
    progress.start(
        &format!("SLURM array {}", job.job_id),
        Some(cells.len() as u64),
    );
    let pause = Duration::from_secs_f64(poll_s.max(0.05));
    let mut squeue_failures = 0;
    while ended.iter().any(Option::is_none) {
        let queue = match slurm_command(
            "squeue",
            &["-h", "-r", "-t", "all", "-j", &job.job_id, "-o", "%K|%T|%r"],
        ) {
            Ok(text) => {
                squeue_failures = 0;
                parse_squeue(&text)
            }
            // A controller that restarts does not answer for a moment; the array goes on.
            Err(e) if squeue_failures < SQUEUE_RETRIES => {
                squeue_failures += 1;
                tracing::warn!("{e:#}; trying again");
                std::thread::sleep(pause.max(Duration::from_secs(2)));
                continue;
            }
            Err(e) => {
                return Err(e.context(format!(
                    "cannot follow SLURM array {} (it goes on; `squeue -j {}` shows it)",
                    job.job_id, job.job_id
                )))
            }
        };
        for (task, cell) in cells.iter().enumerate() {
            if ended[task].is_some() {
                continue;
            }
            let mut records = records_of(folder, cell);
            let record = if records.len() > before[task] {
                records.pop()
            } else {
                let state = queue.get(&task);
                if state.is_none_or(|s| s.ended()) {
                    ended_looks[task] += 1;
                }
                let state = state.map(|s| s.state.as_str()).unwrap_or("GONE");
                (ended_looks[task] >= 3)
                    .then(|| {
                        let r = lost_task(job, task, cell, state);
                        append(&cell_journal(folder, &cell.key), &r).map(|_| r)
                    })
                    .transpose()?
            };
            if let Some(r) = record {
                on_record(&r);
                progress.advance(1);
                ended[task] = Some(r);
            }
        }
        let running = queue.values().filter(|s| s.running()).count();
        let waiting = queue
            .values()
            .filter(|s| !s.ended() && !s.running())
            .count();
        progress.status(format!("{running} running, {waiting} pending"));
        if ended.iter().any(Option::is_none) {
            std::thread::sleep(pause);
        }
    }
    progress.finish();
    Ok(ended.into_iter().flatten().collect())
}
