//! One journal line: a cell's key, and either what it measured or why it failed. This is the
//! whole contract between `bench` (which appends lines) and `report` (which reads them).

use super::key::CellKey;
use crate::backend::select::Runtime;
use crate::metrics::latency::Stats;
use crate::tensor::Precision;
use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in seconds since the Unix epoch: the clock of every `*_unix_s` a record holds.
pub(crate) fn now_unix_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// How a cell ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// It measured.
    Ok,
    /// It did not (see [`CellFailure`]).
    Failed,
}

/// One line of `journal.jsonl`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CellRecord {
    /// [`CellKey::id`] of `key`.
    pub id: String,
    /// The cell's identity.
    pub key: CellKey,
    /// The model's file name without its extension (what tables call it).
    pub model: String,
    /// The model path as the plan gave it.
    pub model_path: String,
    /// How it ended.
    pub status: Status,
    /// What it measured (when it ran).
    pub metrics: Option<CellMetrics>,
    /// Why it failed (when it did not).
    pub failure: Option<CellFailure>,
    /// When the cell started, seconds since the Unix epoch.
    pub started_unix_s: f64,
    /// Wall time of the child process as the parent saw it, seconds.
    pub wall_s: f64,
    /// The machine that ran it.
    pub host: String,
    /// The GPU it was pinned to, when the run spread its cells over several (`--devices`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<super::devices::GpuSlot>,
}

impl CellRecord {
    /// Whether it was stopped from outside before it could end.
    pub fn interrupted(&self) -> bool {
        self.failure
            .as_ref()
            .is_some_and(|f| f.kind == FailureKind::Interrupted)
    }

    /// The precision of the cell.
    pub fn precision(&self) -> Precision {
        self.key.precision
    }

    /// The target of the cell.
    pub fn target(&self) -> Runtime {
        self.key.target
    }

    /// The batch size of the cell.
    pub fn batch(&self) -> usize {
        self.key.batch
    }

    /// The batch and swept axis sizes of the cell.
    pub(crate) fn point(&self) -> super::key::Point {
        self.key.point()
    }

    /// How people name the cell: `model/precision/bBATCH[/AXIS=SIZE…]/target` (as `bench --cell`
    /// takes it).
    pub fn label(&self) -> String {
        super::key::cell_label(&self.model, &self.key)
    }
}

/// The kinds of failure a table can name in a word or two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// Out of GPU or host memory.
    Oom,
    /// Ran past the cell's time limit and was killed.
    Timeout,
    /// Killed by a signal (a crash).
    Signal,
    /// The engine cannot run on this GPU (TensorRT-RTX on compute capability 9.0, …).
    UnsupportedGpu,
    /// A library the target needs is missing (TensorRT, CUDA, ONNX Runtime).
    Missing,
    /// The model file could not be parsed or converted.
    Parser,
    /// The model refuses this batch size.
    Batch,
    /// Stopped from outside before it could end (cancelled, preempted, its node lost): not the
    /// cell's own failure, so the next run measures it again.
    Interrupted,
    /// Any other error.
    Error,
}

impl FailureKind {
    /// What a table cell says for it.
    pub fn short(self) -> &'static str {
        match self {
            FailureKind::Oom => "OOM",
            FailureKind::Timeout => "timeout",
            FailureKind::Signal => "crashed",
            FailureKind::UnsupportedGpu => "unsupported GPU",
            FailureKind::Missing => "not installed",
            FailureKind::Parser => "parser error",
            FailureKind::Batch => "batch refused",
            FailureKind::Interrupted => "interrupted",
            FailureKind::Error => "error",
        }
    }
}

/// Why a cell produced no numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellFailure {
    /// The kind, for tables.
    pub kind: FailureKind,
    /// One line: the error the child printed, or what happened to it.
    pub reason: String,
    /// The child's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// The last lines of the child's stderr.
    pub stderr_tail: String,
    /// The child's whole log, relative to the results folder.
    pub log: Option<String>,
}

/// Latency figures of one span, milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl From<&Stats> for Latency {
    fn from(s: &Stats) -> Self {
        Latency {
            mean: s.mean,
            p50: s.p50,
            p99: s.p99,
            max: s.max,
        }
    }
}

/// GPU memory around a cell, MiB: what the cell's process held (NVML's per-process count) or,
/// where that cannot be read, the whole device (NVML, or the CUDA driver's count).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuMemory {
    /// Used before the model was opened.
    pub before_mib: f64,
    /// Highest used while it ran.
    pub peak_mib: f64,
    /// How it was read.
    pub method: String,
}

/// Accuracy on the dataset: top-k for a classifier, mIoU against masks, mAP against boxes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellAccuracy {
    /// Images scored.
    pub images: u64,
    /// Top-1, % (0 when scored against masks or boxes).
    pub top1_pct: f64,
    /// Top-5, % (0 when scored against masks or boxes).
    pub top5_pct: f64,
    /// Mean IoU against masks, %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miou_pct: Option<f64>,
    /// COCO mAP@0.5:0.95 against boxes, %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_pct: Option<f64>,
}

impl CellAccuracy {
    /// Whether this is top-k of a classifier (not mIoU or mAP).
    pub(crate) fn is_top_k(&self) -> bool {
        self.miou_pct.is_none() && self.map_pct.is_none()
    }

    /// The figure that stands for accuracy, with its name: mAP, mIoU or top-1.
    pub(crate) fn headline(&self) -> (&'static str, f64) {
        match (self.map_pct, self.miou_pct) {
            (Some(map), _) => ("mAP@0.5:0.95 %", map),
            (_, Some(miou)) => ("mIoU %", miou),
            _ => ("top-1 %", self.top1_pct),
        }
    }
}

/// Closeness to the FP32 ONNX model on the reference target (first output).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellCloseness {
    /// What ran the reference.
    pub reference: String,
    /// Samples compared.
    pub samples: usize,
    /// Elements within tolerance, %.
    pub equal_pct: f64,
    /// Samples whose top-1 class agrees, % (`[batch, classes]` outputs).
    pub top1_agreement_pct: Option<f64>,
    /// Largest absolute difference (NaN or +Inf where an output disagrees in non-finite values).
    #[serde(with = "crate::metrics::non_finite")]
    pub max_abs_err: f64,
    /// Detection: the FP32 boxes matched at IoU 0.5, %; segmentation: pixels of the same
    /// class, %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_agreement_pct: Option<f64>,
}

/// The file the cell ran: an ONNX model (the original or a rewrite) or an engine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Artifact {
    /// Its path.
    pub file: String,
    /// `onnx` or `engine`.
    pub kind: String,
    /// Size on disk, bytes.
    pub bytes: u64,
    /// Parameters (weights' elements).
    pub parameters: Option<u64>,
    /// Nodes of the ONNX graph, or layers of the engine's network.
    pub layers: Option<usize>,
}

/// One NVML reading during the measured phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MonitorSample {
    /// Seconds since sampling began.
    pub t_s: f64,
    /// Board power, watts.
    pub power_w: Option<f64>,
    /// SM (GPU) utilisation, %.
    pub sm_util_pct: Option<f64>,
    /// Device memory used, MiB.
    pub memory_used_mib: Option<f64>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<f64>,
    /// Memory clock, MHz.
    pub mem_clock_mhz: Option<f64>,
    /// GPU temperature, °C.
    pub temperature_c: Option<f64>,
}

/// Power and utilisation over the measured phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PowerSummary {
    /// Readings taken.
    pub samples: usize,
    /// Sampling rate asked for, Hz.
    pub rate_hz: f64,
    /// Mean board power, watts.
    pub mean_w: Option<f64>,
    /// Highest board power, watts.
    pub max_w: Option<f64>,
    /// Energy per sample (mean power ÷ samples/s), joules.
    pub energy_per_sample_j: Option<f64>,
    /// Samples/s per watt of mean power.
    pub samples_per_s_per_w: Option<f64>,
    /// Mean SM utilisation, %.
    pub sm_util_mean_pct: Option<f64>,
    /// Mean SM clock, MHz.
    pub sm_clock_mean_mhz: Option<f64>,
    /// Mean memory clock, MHz.
    pub mem_clock_mean_mhz: Option<f64>,
    /// Highest temperature, °C.
    pub temperature_max_c: Option<f64>,
}

/// Everything a cell that ran measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellMetrics {
    /// The backend that ran it, as it names itself.
    pub backend: String,
    /// `cuda-events` or `wall-clock`.
    pub timing: String,
    /// Measured iterations.
    pub iterations: usize,
    /// Latency-all (host tensors in to host tensors out, or first H2D to last D2H).
    pub latency_all_ms: Latency,
    /// Latency-model (inference only; event-timed backends only).
    pub latency_model_ms: Option<Latency>,
    /// Mean latency-all divided by the batch size.
    pub ms_per_sample: f64,
    /// Samples per second over the measured phase.
    pub samples_per_s: f64,
    /// The first inference, timed on its own and left out of the statistics.
    pub first_iteration_ms: f64,
    /// Where the time before the first measured iteration went: opening the backend, the
    /// harness's preparation (GPU targets), the first inference, and their total (as `run`
    /// reports it). Not to be confused with `prepare_s`, the time making the file that ran.
    /// `None` in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<crate::metrics::setup::SetupTimes>,
    /// GPU memory (GPU targets).
    pub gpu_memory: Option<GpuMemory>,
    /// Peak resident memory of the cell's process, MiB.
    pub host_rss_peak_mib: Option<f64>,
    /// Top-k on the dataset (with a dataset).
    pub accuracy: Option<CellAccuracy>,
    /// Closeness to FP32 (with the comparison asked for).
    pub closeness: Option<CellCloseness>,
    /// The file that ran.
    pub artifact: Artifact,
    /// Power and utilisation (where NVML is readable).
    pub power: Option<PowerSummary>,
    /// The NVML readings behind `power`.
    pub monitor: Vec<MonitorSample>,
    /// Seconds making the file that ran (rewrite, calibration, engine build, or 0 when reused).
    pub prepare_s: f64,
    /// Seconds of the cell's own work inside its process (preparing and measuring).
    pub work_s: f64,
    /// What each number covers, and anything worth knowing (NVML absent, …).
    pub notes: Vec<String>,
}

/// Records for tests of everything that reads journals.
#[cfg(test)]
pub mod fixtures {
    use super::*;

    /// A key for `model` (its hash is derived from the name).
    pub fn key(model: &str, precision: Precision, batch: usize, target: Runtime) -> CellKey {
        CellKey {
            model_sha256: crate::digest::sha256_hex16(model.as_bytes()).repeat(4),
            precision,
            batch,
            dims: Default::default(),
            target,
            trtkit_version: "0.1.0".into(),
            gpu: "none".into(),
            settings: "s".into(),
        }
    }

    /// A measured cell: `ms` mean latency-all per batch, and made-up but consistent figures
    /// around it (p99 = 1.2 × mean; two NVML readings).
    pub fn ok(
        model: &str,
        precision: Precision,
        batch: usize,
        target: Runtime,
        ms: f64,
    ) -> CellRecord {
        let key = key(model, precision, batch, target);
        let latency = Latency {
            mean: ms,
            p50: ms,
            p99: ms * 1.2,
            max: ms * 1.5,
        };
        let samples_per_s = batch as f64 * 1e3 / ms;
        CellRecord {
            id: key.id(),
            key,
            model: model.into(),
            model_path: format!("{model}.onnx"),
            status: Status::Ok,
            metrics: Some(CellMetrics {
                backend: target.name().into(),
                timing: "wall-clock".into(),
                iterations: 10,
                latency_all_ms: latency.clone(),
                latency_model_ms: target.on_gpu().then_some(latency),
                ms_per_sample: ms / batch as f64,
                samples_per_s,
                first_iteration_ms: ms * 3.0,
                setup: Some(crate::metrics::setup::SetupTimes::new(
                    400.0,
                    target.on_gpu().then_some(100.0),
                    ms * 3.0,
                )),
                gpu_memory: target.on_gpu().then(|| GpuMemory {
                    before_mib: 500.0,
                    peak_mib: 500.0 + 10.0 * batch as f64,
                    method: "nvml".into(),
                }),
                host_rss_peak_mib: Some(100.0),
                accuracy: Some(CellAccuracy {
                    images: 10,
                    top1_pct: 70.0,
                    top5_pct: 90.0,
                    miou_pct: None,
                    map_pct: None,
                }),
                closeness: Some(CellCloseness {
                    reference: "tract-cpu fp32".into(),
                    samples: batch,
                    equal_pct: 99.0,
                    top1_agreement_pct: Some(100.0),
                    task_agreement_pct: None,
                    max_abs_err: 1e-3,
                }),
                artifact: Artifact {
                    file: format!("{model}.onnx"),
                    kind: "onnx".into(),
                    bytes: 1000,
                    parameters: Some(250),
                    layers: Some(7),
                },
                power: target.on_gpu().then(|| PowerSummary {
                    samples: 2,
                    rate_hz: 20.0,
                    mean_w: Some(200.0),
                    max_w: Some(210.0),
                    energy_per_sample_j: Some(200.0 / samples_per_s),
                    samples_per_s_per_w: Some(samples_per_s / 200.0),
                    sm_util_mean_pct: Some(80.0),
                    sm_clock_mean_mhz: Some(1900.0),
                    mem_clock_mean_mhz: Some(2600.0),
                    temperature_max_c: Some(50.0),
                }),
                monitor: if target.on_gpu() {
                    (0..2)
                        .map(|i| MonitorSample {
                            t_s: i as f64 * 0.05,
                            power_w: Some(190.0 + 20.0 * i as f64),
                            sm_util_pct: Some(80.0),
                            memory_used_mib: Some(600.0),
                            sm_clock_mhz: Some(1900.0),
                            mem_clock_mhz: Some(2600.0),
                            temperature_c: Some(50.0),
                        })
                        .collect()
                } else {
                    vec![]
                },
                prepare_s: 0.0,
                work_s: 1.0,
                notes: vec![],
            }),
            failure: None,
            started_unix_s: 1.7e9,
            wall_s: 1.1,
            host: "test".into(),
            device: None,
        }
    }

    /// A failed cell of `kind`.
    pub fn failed(
        model: &str,
        precision: Precision,
        batch: usize,
        target: Runtime,
        kind: FailureKind,
    ) -> CellRecord {
        let key = key(model, precision, batch, target);
        CellRecord {
            id: key.id(),
            key,
            model: model.into(),
            model_path: format!("{model}.onnx"),
            status: Status::Failed,
            metrics: None,
            failure: Some(CellFailure {
                kind,
                reason: format!("{} happened", kind.short()),
                exit_code: Some(1),
                signal: None,
                stderr_tail: String::new(),
                log: None,
            }),
            started_unix_s: 1.7e9,
            wall_s: 0.5,
            host: "test".into(),
            device: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::ok;
    use super::*;
    use crate::metrics::setup::SetupTimes;

    /// A journal line written before the set-up was kept still reads, without one; a line with
    /// it reads back the same.
    #[test]
    fn records_without_a_set_up_still_read() {
        let record = ok("net", Precision::Fp32, 4, Runtime::OrtCuda, 2.0);
        let line = serde_json::to_string(&record).unwrap();
        assert!(line.contains(r#""setup":{"open_ms":400.0,"prepare_ms":100.0,"first_iteration_ms":6.0,"total_ms":506.0}"#), "{line}");
        let back: CellRecord = serde_json::from_str(&line).unwrap();
        assert_eq!(
            back.metrics.as_ref().and_then(|m| m.setup),
            Some(SetupTimes::new(400.0, Some(100.0), 6.0))
        );
        let mut old: serde_json::Value = serde_json::from_str(&line).unwrap();
        old["metrics"]
            .as_object_mut()
            .unwrap()
            .remove("setup")
            .unwrap();
        let old_line = serde_json::to_string(&old).unwrap();
        assert!(!old_line.contains("setup"));
        let read: CellRecord = serde_json::from_str(&old_line).unwrap();
        let metrics = read.metrics.unwrap();
        assert_eq!(metrics.setup, None);
        assert_eq!(metrics.first_iteration_ms, 6.0);
        // Written again, it stays without one.
        assert!(!serde_json::to_string(&metrics).unwrap().contains("setup"));
    }
}
