//! The `bench` job: every cell of the plan that the journal does not have yet, each in a child
//! process, each record appended as it ends. Also the list of missing cells, for a scheduler.

use super::devices::{machine_gpus, select};
use super::journal::{append, cell_journal, main_journal, mend_tail, read_folder};
use super::lanes::{run_in_lanes, DeviceUsage, Lanes};
use super::lock::{cell_lock_path, CellLock, FolderLock, Lock};
use super::plan::{CellSpec, Plan};
use super::record::{CellRecord, Status};
use super::slurm::SlurmJob;
use super::supervise::{run_child, Supervisor};
use crate::cuda::info::driver_info;
use crate::digest::file_sha256;
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Instant;

/// The GPU that cells on `device_id` run on, as keys name it (`none` without one).
pub(crate) fn gpu_name(device_id: usize) -> String {
    driver_info()
        .gpus
        .get(device_id)
        .map(|g| g.name.clone())
        .unwrap_or_else(|| "none".into())
}

/// The plan's cells on this machine, and which of them the journal already has.
pub struct Matrix {
    /// Every cell.
    pub cells: Vec<CellSpec>,
    /// Those the journal has (measured, or failed and not retried).
    pub done: Vec<bool>,
}

impl Matrix {
    /// Expands `plan` for this machine and reads its journal.
    pub(crate) fn expand(plan: &Plan, retry_failed: bool) -> Result<Matrix> {
        Self::expand_on(plan, retry_failed, &gpu_name(plan.settings.device_id))
    }

    /// Expands `plan` for cells that run on `gpu` (a GPU model, as keys name it) and reads its
    /// journal.
    pub(crate) fn expand_on(plan: &Plan, retry_failed: bool, gpu: &str) -> Result<Matrix> {
        Self::expand_with(plan, retry_failed, gpu, false, true)
    }

    /// Expands `plan` on a machine that hands its cells to others (a cluster's login node, with
    /// another GPU or none): a cell is done when the journal has it measured on any GPU model.
    pub(crate) fn expand_for_cluster(plan: &Plan, retry_failed: bool) -> Result<Matrix> {
        let gpu = gpu_name(plan.settings.device_id);
        Self::expand_with(plan, retry_failed, &gpu, true, true)
    }

    /// `warn`: say the journal's lines that are not records.
    fn expand_with(
        plan: &Plan,
        retry_failed: bool,
        gpu: &str,
        site_free: bool,
        warn: bool,
    ) -> Result<Matrix> {
        let hashes = plan
            .models
            .iter()
            .map(|m| file_sha256(m))
            .collect::<Result<Vec<_>>>()?;
        let cells = plan.cells(&hashes, gpu);
        let done = done_of(&cells, plan, retry_failed, site_free, warn)?;
        Ok(Matrix { cells, done })
    }

    /// Reads the journal again (the cells stay): what other runs recorded since; says the lines
    /// that are not records.
    pub(crate) fn reread(&mut self, plan: &Plan, retry_failed: bool) -> Result<()> {
        self.done = done_of(&self.cells, plan, retry_failed, false, true)?;
        Ok(())
    }

    /// The cells still to run.
    pub fn missing(&self) -> Vec<&CellSpec> {
        self.cells
            .iter()
            .zip(&self.done)
            .filter(|(_, d)| !**d)
            .map(|(c, _)| c)
            .collect()
    }

    /// The cell named `which`: its label (`model/precision/bBATCH[/AXIS=SIZE…]/target`) or its
    /// id.
    pub fn find(&self, which: &str) -> Result<&CellSpec> {
        match self.cells.iter().find(|c| c.label() == which || c.id == which) {
            Some(c) => Ok(c),
            None => bail!(
                "no cell {which:?} in this plan (cells are named model/precision/bBATCH/target, with /AXIS=SIZE after the batch for a swept axis; e.g. {})",
                self.cells.first().map(|c| c.label()).unwrap_or_default()
            ),
        }
    }
}

/// Which of `cells` the journal of `plan`'s folder has; `warn` says the lines that are not
/// records.
fn done_of(
    cells: &[CellSpec],
    plan: &Plan,
    retry_failed: bool,
    site_free: bool,
    warn: bool,
) -> Result<Vec<bool>> {
    let journal = read_folder(&plan.folder)?;
    for s in journal.skipped.iter().filter(|_| warn) {
        tracing::warn!("{s}: not a journal record; skipped");
    }
    let done = if site_free {
        let done_ids = journal.done_site_free(retry_failed);
        cells
            .iter()
            .map(|c| done_ids.contains(&c.key.site_free_id()))
            .collect()
    } else {
        let done_ids = journal.done(retry_failed);
        cells.iter().map(|c| done_ids.contains(&c.id)).collect()
    };
    Ok(done)
}

/// What one `bench` run did.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchReport {
    /// The results folder.
    pub folder: String,
    /// The journal appended to.
    pub journal: String,
    /// Cells in the plan.
    pub cells: usize,
    /// Cells the journal already had.
    pub already_done: usize,
    /// Cells run now.
    pub ran: usize,
    /// Of those, measured.
    pub ok: usize,
    /// Of those, failed.
    pub failed: usize,
    /// `label: reason` of each failure now.
    pub failures: Vec<String>,
    /// Wall time of this run, seconds.
    pub wall_s: f64,
    /// Seconds of the cells' own work (inside their processes, preparing and measuring).
    pub(crate) cells_work_s: f64,
    /// Wall time of the child processes as the parent saw them, seconds.
    pub(crate) cells_wall_s: f64,
    /// Share of the wall time that was not the cells' own work (process start, journal,
    /// supervision), %; with several lanes, the share of the cells' processes' time.
    pub(crate) machinery_pct: f64,
    /// How each GPU of a `--devices` run was used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceUsage>,
    /// The SLURM array a `--slurm` run submitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmJob>,
}

/// Runs `cells` one after another in child processes, appending each record to `journal` as it
/// ends; `on_record` sees each one (for printing).
pub(crate) fn run_cells(
    cells: &[&CellSpec],
    supervisor: &Supervisor,
    journal: &std::path::Path,
    progress: &dyn Progress,
    on_record: &dyn Fn(&CellRecord),
) -> Result<(Vec<CellRecord>, f64)> {
    let start = Instant::now();
    let mut records = vec![];
    progress.start("bench", Some(cells.len() as u64));
    for cell in cells {
        progress.status(cell.label());
        let record = run_child(supervisor, cell)?;
        append(journal, &record)?;
        on_record(&record);
        records.push(record);
        progress.advance(1);
    }
    progress.finish();
    Ok((records, start.elapsed().as_secs_f64()))
}

/// The report of a run of `records` over `wall_s` seconds.
pub fn summarize(
    plan: &Plan,
    journal: PathBuf,
    matrix: &Matrix,
    records: &[CellRecord],
    wall_s: f64,
    devices: Vec<DeviceUsage>,
) -> BenchReport {
    let cells_wall_s: f64 = records.iter().map(|r| r.wall_s).sum();
    // Cells side by side overlap: their own time is measured against their processes' time.
    let span = if devices.is_empty() {
        wall_s
    } else {
        cells_wall_s
    };
    let work: f64 = records
        .iter()
        .map(|r| match &r.metrics {
            Some(m) => m.work_s,
            None => r.wall_s,
        })
        .sum();
    let failures = records
        .iter()
        .filter_map(|r| {
            let f = r.failure.as_ref()?;
            let label = matrix.cells.iter().find(|c| c.id == r.id)?.label();
            Some(format!("{label}: {} — {}", f.kind.short(), f.reason))
        })
        .collect();
    let ok = records.iter().filter(|r| r.status == Status::Ok).count();
    BenchReport {
        folder: plan.folder.display().to_string(),
        journal: journal.display().to_string(),
        cells: matrix.cells.len(),
        already_done: matrix.done.iter().filter(|d| **d).count(),
        ran: records.len(),
        ok,
        failed: records.len() - ok,
        failures,
        wall_s,
        cells_work_s: work,
        cells_wall_s,
        machinery_pct: if span > 0.0 {
            100.0 * (span - work).max(0.0) / span
        } else {
            0.0
        },
        devices,
        slurm: None,
    }
}

/// The lanes of a `--devices` run (none for one cell, or without `--devices`): the boards are
/// checked here, before anything is written.
fn lanes_of(plan: &Plan, only: Option<&str>) -> Result<Option<Lanes>> {
    let (Some(request), None) = (&plan.devices, only) else {
        return Ok(None);
    };
    Ok(Some(Lanes {
        gpus: select(
            request,
            &machine_gpus()?,
            std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref(),
        )?,
        cpu_cells: plan.cpu_cells,
        nvml_hz: plan.settings.nvml_hz,
    }))
}

/// Runs every missing cell of `plan` (or only `only`), appending to the run's journal (or,
/// for one cell, to its own journal, so machines sharing the folder never write one file).
/// Every flag is checked before the results folder is made; a whole run holds the folder's lock
/// ([`FolderLock`]) until its last cell has ended, and mends a cut last journal line first.
pub fn bench(
    plan: &Plan,
    retry_failed: bool,
    only: Option<&str>,
    progress: &dyn Progress,
    on_record: &dyn Fn(&CellRecord),
) -> Result<BenchReport> {
    let lanes = lanes_of(plan, only)?;
    let gpu = match &lanes {
        Some(l) => l.gpus[0].name.clone(),
        None => gpu_name(plan.settings.device_id),
    };
    // Nothing is said of the journal yet: it is read again once its tail is mended.
    let mut matrix = Matrix::expand_with(plan, retry_failed, &gpu, false, false)?;
    let journal = match only {
        Some(which) => cell_journal(&plan.folder, &matrix.find(which)?.key),
        None => main_journal(&plan.folder),
    };
    let exe = std::env::current_exe().context("cannot find trtkit's own executable")?;
    std::fs::create_dir_all(&plan.folder).with_context(|| {
        format!(
            "{}: cannot create the results folder",
            plan.folder.display()
        )
    })?;
    let lock = match only {
        Some(which) => {
            let key = &matrix.find(which)?.key;
            Lock::Cell(CellLock::take(
                &plan.folder,
                &cell_lock_path(&plan.folder, key),
                which,
            )?)
        }
        None => Lock::Folder(FolderLock::take(&plan.folder)?),
    };
    if let Some(note) = mend_tail(&journal)? {
        tracing::warn!("{note}");
    }
    // Read again under the lock: what a run that held it until now recorded.
    matrix.reread(plan, retry_failed)?;
    let cells = match only {
        Some(which) => vec![matrix.find(which)?],
        None => matrix.missing(),
    };
    let supervisor = Supervisor {
        exe,
        timeout_s: plan.cell_timeout_s,
        lock: Some(lock.handle()),
    };
    let (records, wall_s, devices) = match &lanes {
        Some(l) => run_in_lanes(&cells, l, &supervisor, &journal, progress, on_record)?,
        None => {
            let (records, wall_s) = run_cells(&cells, &supervisor, &journal, progress, on_record)?;
            (records, wall_s, vec![])
        }
    };
    Ok(summarize(plan, journal, &matrix, &records, wall_s, devices))
}
