//! What `bench` prints as it goes and when it ends: a line per cell, then the run's summary.

use crate::bench::matrix::BenchReport;
use crate::bench::record::{CellRecord, Status};
use crate::metrics::setup::duration;
use crate::report::format::count;

/// One line for a finished cell: its label and its headline figures, or its failure.
pub(crate) fn cell_line(label: &str, r: &CellRecord) -> String {
    match (&r.status, &r.metrics, &r.failure) {
        (Status::Ok, Some(m), _) => {
            let mut line = format!(
                "ok      {label}: {:.1} samples/s, {:.3} ms/sample, latency-all p99 {:.2} ms",
                m.samples_per_s, m.ms_per_sample, m.latency_all_ms.p99
            );
            if let Some(w) = m.power.as_ref().and_then(|p| p.mean_w) {
                line.push_str(&format!(", {w:.0} W"));
            }
            if let Some(c) = &m.closeness {
                line.push_str(&format!(", {:.2}% equal to FP32", c.equal_pct));
            }
            if let Some(a) = &m.accuracy {
                let (what, value) = a.headline();
                line.push_str(&format!(", {} {value:.2}%", what.trim_end_matches(" %")));
            }
            if let Some(s) = &m.setup {
                line.push_str(&format!(
                    "; set-up {} of the cell's {}",
                    duration(s.total_ms),
                    duration(r.wall_s * 1e3)
                ));
            }
            line
        }
        (_, _, Some(f)) => format!("FAILED  {label}: {} — {}", f.kind.short(), f.reason),
        _ => format!("?       {label}: no metrics and no failure recorded"),
    }
}

/// The summary after the run.
pub fn render(r: &BenchReport) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "\n{} cells in the plan: {} already in the journal, {} run now ({} ok, {} failed)\n",
        count(r.cells as u64),
        count(r.already_done as u64),
        count(r.ran as u64),
        count(r.ok as u64),
        count(r.failed as u64)
    ));
    if r.ran > 0 {
        out.push_str(&format!(
            "wall {:.1} s, cells' own work {:.1} s: machinery (process start, journal, supervision) {:.2}% of the wall time\n",
            r.wall_s, r.cells_work_s, r.machinery_pct
        ));
    }
    for d in &r.devices {
        out.push_str(&format!(
            "GPU {} ({}): {} cells{}, busy {:.0}% of the wall time{}\n",
            d.gpu.index,
            d.gpu.name,
            d.cells,
            if d.failed > 0 {
                format!(" ({} failed)", d.failed)
            } else {
                String::new()
            },
            d.busy_pct,
            d.sm_util_mean_pct
                .map(|u| format!(", SM utilisation {u:.0}% on average"))
                .unwrap_or_default()
        ));
    }
    if let Some(job) = &r.slurm {
        out.push_str(&format!(
            "SLURM array {} ({} tasks): script {}, task logs in {}/\n",
            job.job_id, job.tasks, job.script, job.logs
        ));
    }
    out.push_str(&format!("journal: {}\n", r.journal));
    out.push_str(&format!(
        "tables, plots and an HTML page: trtkit report {} -o {}/report.html\n",
        r.folder, r.folder
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::devices::GpuSlot;
    use crate::bench::lanes::DeviceUsage;
    use crate::bench::slurm::SlurmJob;

    fn report() -> BenchReport {
        BenchReport {
            folder: "results/r".into(),
            journal: "results/r/journal.jsonl".into(),
            cells: 4,
            already_done: 0,
            ran: 4,
            ok: 3,
            failed: 1,
            failures: vec![],
            wall_s: 10.0,
            cells_work_s: 18.0,
            cells_wall_s: 19.0,
            machinery_pct: 5.3,
            devices: vec![],
            slurm: None,
        }
    }

    #[test]
    fn a_cell_line_says_its_set_up_against_its_wall_time() {
        use crate::backend::select::Runtime;
        use crate::bench::record::fixtures::ok;
        use crate::tensor::Precision;
        let mut r = ok("net", Precision::Fp16, 8, Runtime::OrtCuda, 2.0);
        r.wall_s = 8.1;
        let line = cell_line("net/fp16/b8/ort-cuda", &r);
        assert!(
            line.ends_with("; set-up 506.0 ms of the cell's 8.10 s"),
            "{line}"
        );
        r.metrics.as_mut().unwrap().setup = None;
        assert!(!cell_line("x", &r).contains("set-up"));
    }

    #[test]
    fn the_summary_says_how_busy_each_gpu_was_and_names_the_array() {
        let plain = render(&report());
        assert!(
            !plain.contains("GPU ") && !plain.contains("SLURM"),
            "{plain}"
        );
        let gpu = |index, failed, util| DeviceUsage {
            gpu: GpuSlot {
                index,
                uuid: format!("GPU-{index}"),
                name: "NVIDIA H100 80GB HBM3".into(),
            },
            cells: 2,
            failed,
            busy_s: 9.1,
            busy_pct: 91.0,
            sm_util_mean_pct: util,
        };
        let r = BenchReport {
            devices: vec![gpu(0, 0, Some(64.4)), gpu(1, 1, None)],
            slurm: Some(SlurmJob {
                job_id: "812".into(),
                script: "results/r/slurm/array-1.sbatch".into(),
                tasks: 4,
                logs: "results/r/slurm".into(),
            }),
            ..report()
        };
        let text = render(&r);
        for line in [
            "GPU 0 (NVIDIA H100 80GB HBM3): 2 cells, busy 91% of the wall time, SM utilisation 64% on average",
            "GPU 1 (NVIDIA H100 80GB HBM3): 2 cells (1 failed), busy 91% of the wall time",
            "SLURM array 812 (4 tasks): script results/r/slurm/array-1.sbatch, task logs in results/r/slurm/",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
    }
}
