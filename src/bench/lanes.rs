//! Cells side by side: one lane per GPU of `--devices`, each running GPU cells one after another
//! in child processes pinned to its board, and `cpu_cells` lanes for the CPU-target cells, so
//! those never outnumber what the GPU cells' feeding threads can spare. Each lane's child can
//! crash or run out of memory without stopping the others; this thread alone appends to the
//! journal, as each cell ends. While the lanes run, NVML samples every board, so the summary
//! can say how busy each one was.

use super::devices::GpuSlot;
use super::journal::append;
use super::monitor::{Monitor, NvmlGpu};
use super::plan::CellSpec;
use super::record::{CellRecord, Status};
use super::supervise::{run_child, Supervisor};
use crate::progress::Progress;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::Instant;

/// Where cells run at once.
#[derive(Clone, Debug)]
pub(crate) struct Lanes {
    /// One lane per GPU.
    pub gpus: Vec<GpuSlot>,
    /// Lanes for CPU-target cells.
    pub(crate) cpu_cells: usize,
    /// NVML sampling rate of the run-wide utilisation readings, Hz (0 = off).
    pub(crate) nvml_hz: f64,
}

/// How one GPU was used by a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceUsage {
    /// The board.
    pub gpu: GpuSlot,
    /// Cells it ran.
    pub cells: usize,
    /// Of those, failed.
    pub failed: usize,
    /// Seconds a cell's process held it.
    pub(crate) busy_s: f64,
    /// `busy_s` as a share of the run's wall time, %.
    pub(crate) busy_pct: f64,
    /// Mean SM utilisation over the whole run, as NVML sampled it, % (`None` without NVML).
    pub sm_util_mean_pct: Option<f64>,
}

/// What a lane tells the thread that owns the journal.
enum Event {
    Started(usize, String),
    Ended(usize, Box<Result<CellRecord>>),
}

/// One lane: takes cells from `queue` until it is empty or `stop` is set, each pinned to `gpu`.
fn lane(
    lane_id: usize,
    gpu: Option<&GpuSlot>,
    queue: &Mutex<VecDeque<&CellSpec>>,
    run: &(dyn Fn(&CellSpec) -> Result<CellRecord> + Sync),
    stop: &AtomicBool,
    events: mpsc::Sender<Event>,
) {
    while !stop.load(Ordering::Relaxed) {
        let Some(cell) = queue.lock().ok().and_then(|mut q| q.pop_front()) else {
            break;
        };
        let mut cell = cell.clone();
        if let Some(gpu) = gpu {
            cell.gpu = Some(gpu.clone());
            // The pinned process sees its board alone, as CUDA device 0.
            cell.settings.device_id = 0;
        }
        let label = match gpu {
            Some(g) => format!("gpu{} {}", g.index, cell.label()),
            None => format!("cpu {}", cell.label()),
        };
        let _ = events.send(Event::Started(lane_id, label));
        let _ = events.send(Event::Ended(lane_id, Box::new(run(&cell))));
    }
}

/// Samples every board's utilisation through the run (nothing where NVML is not readable).
fn monitor_boards(gpus: &[GpuSlot], rate_hz: f64) -> Vec<Option<Monitor>> {
    gpus.iter()
        .map(|g| Monitor::start(&NvmlGpu::Uuid(g.uuid.clone()), rate_hz).ok())
        .collect()
}

/// Runs `cells` in `lanes`, appending each record to `journal` as it ends; `on_record` sees each
/// one. Returns the records, the wall time and each GPU's use. A cell that fails is a record; a
/// lane that cannot start a child at all stops every lane from taking new cells, and that error
/// is returned once the cells in flight have ended.
pub(crate) fn run_in_lanes(
    cells: &[&CellSpec],
    lanes: &Lanes,
    supervisor: &Supervisor,
    journal: &Path,
    progress: &dyn Progress,
    on_record: &dyn Fn(&CellRecord),
) -> Result<(Vec<CellRecord>, f64, Vec<DeviceUsage>)> {
    let run = |cell: &CellSpec| run_child(supervisor, cell);
    run_lanes_with(cells, lanes, &run, journal, progress, on_record)
}

/// [`run_in_lanes`] with the way one cell runs given (a test runs cells in threads).
pub(crate) fn run_lanes_with(
    cells: &[&CellSpec],
    lanes: &Lanes,
    run: &(dyn Fn(&CellSpec) -> Result<CellRecord> + Sync),
    journal: &Path,
    progress: &dyn Progress,
    on_record: &dyn Fn(&CellRecord),
) -> Result<(Vec<CellRecord>, f64, Vec<DeviceUsage>)> {
    let start = Instant::now();
    let (gpu_cells, cpu_cells): (VecDeque<&CellSpec>, VecDeque<&CellSpec>) =
        cells.iter().partition(|c| c.key.target.on_gpu());
    let gpu_queue = Mutex::new(gpu_cells);
    let cpu_queue = Mutex::new(cpu_cells);
    let cpu_lanes = if cpu_queue.lock().map(|q| q.is_empty()).unwrap_or(true) {
        0
    } else {
        lanes.cpu_cells.max(1)
    };
    let monitors = monitor_boards(&lanes.gpus, lanes.nvml_hz.min(4.0));
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel();
    let mut records = vec![];
    let mut error = None;
    progress.start("bench", Some(cells.len() as u64));
    std::thread::scope(|s| {
        let gpu_lanes = if gpu_queue.lock().map(|q| q.is_empty()).unwrap_or(true) {
            &[][..]
        } else {
            &lanes.gpus[..]
        };
        for (i, gpu) in gpu_lanes.iter().enumerate() {
            let (tx, queue, stop) = (tx.clone(), &gpu_queue, &stop);
            s.spawn(move || lane(i, Some(gpu), queue, run, stop, tx));
        }
        for i in 0..cpu_lanes {
            let (tx, queue, stop) = (tx.clone(), &cpu_queue, &stop);
            s.spawn(move || lane(gpu_lanes.len() + i, None, queue, run, stop, tx));
        }
        drop(tx);
        let mut running: BTreeMap<usize, String> = BTreeMap::new();
        for event in rx {
            match event {
                Event::Started(lane, label) => {
                    running.insert(lane, label);
                }
                Event::Ended(lane, outcome) => {
                    running.remove(&lane);
                    progress.advance(1);
                    match (*outcome).and_then(|r| append(journal, &r).map(|_| r)) {
                        Ok(record) => {
                            on_record(&record);
                            records.push(record);
                        }
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            error.get_or_insert(e);
                        }
                    }
                }
            }
            progress.status(running.values().cloned().collect::<Vec<_>>().join(" · "));
        }
    });
    progress.finish();
    let wall_s = start.elapsed().as_secs_f64();
    if let Some(e) = error {
        monitors.into_iter().flatten().for_each(|m| drop(m.stop()));
        return Err(e);
    }
    let usage = usage(&lanes.gpus, monitors, &records, wall_s);
    Ok((records, wall_s, usage))
}

/// Each GPU's share of the run: the cells it ran, the time they held it, its mean utilisation.
fn usage(
    gpus: &[GpuSlot],
    monitors: Vec<Option<Monitor>>,
    records: &[CellRecord],
    wall_s: f64,
) -> Vec<DeviceUsage> {
    gpus.iter()
        .zip(monitors)
        .map(|(gpu, monitor)| {
            let mine: Vec<&CellRecord> = records
                .iter()
                .filter(|r| r.device.as_ref() == Some(gpu))
                .collect();
            let busy_s: f64 = mine.iter().map(|r| r.wall_s).sum();
            let sm_util_mean_pct = monitor.and_then(|m| {
                let (samples, _, _) = m.stop();
                let util: Vec<f64> = samples.iter().filter_map(|s| s.sm_util_pct).collect();
                (!util.is_empty()).then(|| util.iter().sum::<f64>() / util.len() as f64)
            });
            DeviceUsage {
                gpu: gpu.clone(),
                cells: mine.len(),
                failed: mine.iter().filter(|r| r.status != Status::Ok).count(),
                busy_s,
                busy_pct: if wall_s > 0.0 {
                    100.0 * busy_s / wall_s
                } else {
                    0.0
                },
                sm_util_mean_pct,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::select::Runtime;
    use crate::bench::plan::{Plan, PlanFile};
    use crate::bench::record::{fixtures, FailureKind};
    use crate::progress::NoProgress;
    use crate::tensor::Precision;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    /// 4 batch sizes × (2 GPU targets + 2 CPU targets) of one small model.
    fn cells(dir: &Path) -> Vec<CellSpec> {
        let model = dir.join("m.onnx");
        crate::onnx::OnnxModel::from_proto(crate::onnx::test_models::classifier(None), &model)
            .save(&model)
            .unwrap();
        let plan = Plan::from_file(PlanFile {
            models: Some(vec![model]),
            precisions: Some(vec![Precision::Fp32]),
            batch_sizes: Some(vec![1, 2, 4, 8]),
            targets: Some(vec![
                Runtime::OrtCuda,
                Runtime::Trt,
                Runtime::TractCpu,
                Runtime::OrtCpu,
            ]),
            results: Some(dir.to_path_buf()),
            ..Default::default()
        })
        .unwrap();
        plan.cells(&["ab".repeat(32)], "H100")
    }

    fn gpu(index: usize) -> GpuSlot {
        GpuSlot {
            index,
            uuid: format!("GPU-{index}"),
            name: "H100".into(),
        }
    }

    /// What the fake cells saw: how many ran at once, on each board and on the CPU.
    #[derive(Default)]
    struct Seen {
        per_gpu: [AtomicUsize; 3],
        most_per_gpu: AtomicUsize,
        cpu: AtomicUsize,
        most_cpu: AtomicUsize,
        gpu: AtomicUsize,
        most_gpu: AtomicUsize,
    }

    fn enter(now: &AtomicUsize, most: &AtomicUsize) -> usize {
        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(n, Ordering::SeqCst);
        n
    }

    /// A cell that takes 30 ms and records what else ran; batch 4 on GPU 1 "runs out of memory".
    fn fake_run(seen: &Seen, cell: &CellSpec) -> Result<CellRecord> {
        let (counter, most) = match &cell.gpu {
            Some(g) => {
                assert_eq!(
                    cell.settings.device_id, 0,
                    "a pinned cell sees CUDA device 0"
                );
                let n = enter(&seen.per_gpu[g.index], &seen.most_per_gpu);
                assert_eq!(n, 1, "two cells at once on GPU {}", g.index);
                enter(&seen.gpu, &seen.most_gpu);
                (&seen.per_gpu[g.index], Some(&seen.gpu))
            }
            None => {
                assert!(!cell.key.target.on_gpu(), "a GPU cell without a GPU");
                enter(&seen.cpu, &seen.most_cpu);
                (&seen.cpu, None)
            }
        };
        std::thread::sleep(Duration::from_millis(30));
        counter.fetch_sub(1, Ordering::SeqCst);
        if let Some(g) = most {
            g.fetch_sub(1, Ordering::SeqCst);
        }
        let (p, b, t) = (cell.key.precision, cell.key.batch, cell.key.target);
        let oom = cell.gpu.as_ref().is_some_and(|g| g.index == 1) && b == 4;
        let mut r = if oom {
            fixtures::failed("m", p, b, t, FailureKind::Oom)
        } else {
            fixtures::ok("m", p, b, t, 1.0)
        };
        r.id = cell.id.clone();
        r.key = cell.key.clone();
        r.device = cell.gpu.clone();
        r.wall_s = 0.03;
        Ok(r)
    }

    #[test]
    fn gpu_cells_run_one_per_board_and_cpu_cells_in_their_own_lanes() {
        let dir = tempfile::tempdir().unwrap();
        let cells = cells(dir.path());
        let refs: Vec<&CellSpec> = cells.iter().collect();
        let lanes = Lanes {
            gpus: vec![gpu(0), gpu(1), gpu(2)],
            cpu_cells: 1,
            nvml_hz: 0.0,
        };
        let seen = Seen::default();
        let run = |c: &CellSpec| fake_run(&seen, c);
        let journal = dir.path().join("journal.jsonl");
        let (records, _, usage) =
            run_lanes_with(&refs, &lanes, &run, &journal, &NoProgress, &|_| {}).unwrap();
        assert_eq!(records.len(), 16, "every cell ran, the failed ones too");
        assert_eq!(seen.most_per_gpu.load(Ordering::SeqCst), 1);
        assert_eq!(seen.most_cpu.load(Ordering::SeqCst), 1, "the CPU limit");
        assert!(
            seen.most_gpu.load(Ordering::SeqCst) >= 2,
            "GPU cells side by side"
        );
        let written = crate::bench::journal::read_folder(dir.path()).unwrap();
        assert_eq!(written.records.len(), 16);
        assert_eq!(usage.len(), 3);
        assert_eq!(usage.iter().map(|u| u.cells).sum::<usize>(), 8);
        let failed: usize = usage.iter().map(|u| u.failed).sum();
        assert_eq!(
            failed,
            records.iter().filter(|r| r.status != Status::Ok).count()
        );
        assert!(usage.iter().all(|u| u.busy_pct > 0.0 && u.busy_s > 0.0));
        let pinned = records.iter().filter(|r| r.device.is_some()).count();
        assert_eq!(pinned, 8, "GPU cells say their board; CPU cells none");
    }

    /// A lane that cannot start a cell stops every lane taking new ones; the error comes back
    /// after the cells in flight are journaled.
    #[test]
    fn a_cell_that_cannot_start_stops_the_run_with_its_error() {
        let dir = tempfile::tempdir().unwrap();
        let cells = cells(dir.path());
        let refs: Vec<&CellSpec> = cells.iter().collect();
        let lanes = Lanes {
            gpus: vec![gpu(0), gpu(1)],
            cpu_cells: 2,
            nvml_hz: 0.0,
        };
        let seen = Seen::default();
        let started = AtomicUsize::new(0);
        let run = |c: &CellSpec| {
            if started.fetch_add(1, Ordering::SeqCst) == 2 {
                anyhow::bail!("cannot start the cell's process");
            }
            fake_run(&seen, c)
        };
        let journal = dir.path().join("journal.jsonl");
        let err = run_lanes_with(&refs, &lanes, &run, &journal, &NoProgress, &|_| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot start"), "{err}");
        let ran = started.load(Ordering::SeqCst);
        assert!(ran < 16, "{ran} cells started after the error");
        let written = crate::bench::journal::read_folder(dir.path()).unwrap();
        assert_eq!(written.records.len(), ran - 1);
    }
}
