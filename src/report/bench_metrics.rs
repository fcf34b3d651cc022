//! The metrics of a bench report: for each, its table title, its CSV column and how to read it
//! from a cell's measured metrics, in the order the tables list them.

use crate::bench::record::{CellMetrics, CellRecord};

/// Where a metric's value is read.
#[derive(Clone, Copy)]
pub enum Read {
    /// From what the cell measured (none for a failed cell).
    Metrics(fn(&CellMetrics) -> Option<f64>),
    /// From the journal line itself (what the parent saw, failed cells included).
    Record(fn(&CellRecord) -> Option<f64>),
}

/// One metric: its table title, its CSV column and how to read it from a cell's record.
#[derive(Clone, Copy)]
pub(crate) struct Metric {
    /// The table's title.
    pub title: &'static str,
    /// The CSV column.
    pub column: &'static str,
    /// How its value is read.
    pub get: Read,
}

impl Metric {
    /// The value of this metric in `r`, where it has one.
    pub fn value(&self, r: &CellRecord) -> Option<f64> {
        match self.get {
            Read::Metrics(f) => r.metrics.as_ref().and_then(f),
            Read::Record(f) => f(r),
        }
    }
}

/// Every metric, in the order the tables come.
pub(crate) const METRICS: &[Metric] = &[
    Metric {
        title: "samples/s",
        column: "samples_per_s",
        get: Read::Metrics(|m| Some(m.samples_per_s)),
    },
    Metric {
        title: "ms per sample",
        column: "ms_per_sample",
        get: Read::Metrics(|m| Some(m.ms_per_sample)),
    },
    Metric {
        title: "latency-all mean (ms)",
        column: "latency_all_mean_ms",
        get: Read::Metrics(|m| Some(m.latency_all_ms.mean)),
    },
    Metric {
        title: "latency-all p99 (ms)",
        column: "latency_all_p99_ms",
        get: Read::Metrics(|m| Some(m.latency_all_ms.p99)),
    },
    Metric {
        title: "latency-model mean (ms)",
        column: "latency_model_mean_ms",
        get: Read::Metrics(|m| m.latency_model_ms.as_ref().map(|l| l.mean)),
    },
    Metric {
        title: "GPU memory peak (MiB)",
        column: "gpu_memory_peak_mib",
        get: Read::Metrics(|m| m.gpu_memory.as_ref().map(|g| g.peak_mib)),
    },
    Metric {
        title: "host RSS peak (MiB)",
        column: "host_rss_peak_mib",
        get: Read::Metrics(|m| m.host_rss_peak_mib),
    },
    Metric {
        title: "set-up before measuring (s)",
        column: "setup_s",
        get: Read::Metrics(|m| m.setup.as_ref().map(|s| s.total_s())),
    },
    Metric {
        title: "cell wall time (s)",
        column: "cell_wall_s",
        get: Read::Record(|r| Some(r.wall_s)),
    },
    Metric {
        title: "top-1 %",
        column: "top1_pct",
        get: Read::Metrics(|m| {
            m.accuracy
                .as_ref()
                .filter(|a| a.is_top_k())
                .map(|a| a.top1_pct)
        }),
    },
    Metric {
        title: "top-5 %",
        column: "top5_pct",
        get: Read::Metrics(|m| {
            m.accuracy
                .as_ref()
                .filter(|a| a.is_top_k())
                .map(|a| a.top5_pct)
        }),
    },
    Metric {
        title: "mIoU %",
        column: "miou_pct",
        get: Read::Metrics(|m| m.accuracy.as_ref().and_then(|a| a.miou_pct)),
    },
    Metric {
        title: "mAP@0.5:0.95 %",
        column: "map_pct",
        get: Read::Metrics(|m| m.accuracy.as_ref().and_then(|a| a.map_pct)),
    },
    Metric {
        title: "equal % vs FP32",
        column: "equal_pct",
        get: Read::Metrics(|m| m.closeness.as_ref().map(|c| c.equal_pct)),
    },
    Metric {
        title: "top-1 agreement % vs FP32",
        column: "top1_agreement_pct",
        get: Read::Metrics(|m| m.closeness.as_ref().and_then(|c| c.top1_agreement_pct)),
    },
    Metric {
        title: "boxes or pixels agreeing % vs FP32",
        column: "task_agreement_pct",
        get: Read::Metrics(|m| m.closeness.as_ref().and_then(|c| c.task_agreement_pct)),
    },
    Metric {
        title: "artifact size (MB)",
        column: "artifact_mb",
        get: Read::Metrics(|m| Some(m.artifact.bytes as f64 / 1e6)),
    },
    Metric {
        title: "samples/s per W",
        column: "samples_per_s_per_w",
        get: Read::Metrics(|m| m.power.as_ref().and_then(|p| p.samples_per_s_per_w)),
    },
    Metric {
        title: "energy per sample (mJ)",
        column: "energy_per_sample_mj",
        get: Read::Metrics(|m| {
            m.power
                .as_ref()
                .and_then(|p| p.energy_per_sample_j)
                .map(|j| j * 1e3)
        }),
    },
    Metric {
        title: "mean power (W)",
        column: "power_mean_w",
        get: Read::Metrics(|m| m.power.as_ref().and_then(|p| p.mean_w)),
    },
    Metric {
        title: "SM util %",
        column: "sm_util_mean_pct",
        get: Read::Metrics(|m| m.power.as_ref().and_then(|p| p.sm_util_mean_pct)),
    },
];
