//! The `doctor --check` job: on every GPU, a small classifier goes end to end through every GPU
//! backend trtkit has (a TensorRT engine, ONNX Runtime's CUDA provider, tract's CUDA runtime)
//! and is compared with tract on the CPU; each backend passes, fails, or is skipped with the
//! one-line reason it cannot run there.

use crate::backend::open;
use crate::backend::select::{BackendKind, BackendOptions};
use crate::backend::Device;
use crate::cuda::device::Gpu;
use crate::cuda::harness::{self, Amount, HarnessOptions};
use crate::cuda::info::{driver_info, GpuInfo};
use crate::data::synthetic::{InputDistribution, RandomInputs};
use crate::jobs::compare::{compare, CompareConfig, InputSource, Saves, SideConfig};
use crate::metrics::closeness::Tolerance;
use crate::metrics::latency::SpanStats;
use crate::onnx::{small_classifier, OnnxModel};
use crate::progress::NoProgress;
use crate::trt::loader::{can_run_on, BOUND};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The batch the check runs at, and the samples it compares.
const BATCH: usize = 8;
const SAMPLES: usize = 64;

/// What one backend did on one GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// Ran and agreed with the CPU reference.
    Pass,
    /// Ran and disagreed, or should have run and failed.
    Fail,
    /// Cannot run on this machine (the reason says why); not a failure of trtkit.
    Skip,
}

/// One backend on one GPU.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BackendCheck {
    /// `tensorrt-rtx`, `ort-cuda`, `tract-cuda`.
    pub backend: String,
    /// Pass, fail or skip.
    pub status: CheckStatus,
    /// The figures, or why it failed or was skipped.
    pub detail: String,
    /// Top-1 agreement with tract on the CPU, percent.
    pub top1_agreement_pct: Option<f64>,
    /// Largest absolute difference from tract on the CPU.
    pub max_abs_err: Option<f64>,
    /// Mean latency-model through trtkit's harness, milliseconds (backends that enqueue on
    /// trtkit's streams).
    pub latency_model_ms: Option<f64>,
    /// Wall time of this backend's check, seconds.
    pub seconds: f64,
}

/// Every backend on one GPU.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GpuCheck {
    /// The GPU.
    pub gpu: GpuInfo,
    /// One entry per GPU backend.
    pub backends: Vec<BackendCheck>,
}

/// The report of `doctor --check`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckReport {
    /// What ran: the model, batch, samples and the pass rule.
    pub setup: String,
    /// One entry per GPU (empty without a driver or GPU).
    pub gpus: Vec<GpuCheck>,
    /// Why no GPU was checked, when none was.
    pub no_gpu: Option<String>,
}

/// What `doctor --check --json` prints: the machine, then the check.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DoctorCheck {
    /// What `doctor` alone reports.
    pub doctor: crate::jobs::doctor::DoctorReport,
    /// The check of every GPU backend.
    pub check: CheckReport,
}

impl CheckReport {
    /// Whether any backend failed (skips are not failures).
    pub fn failed(&self) -> bool {
        self.gpus
            .iter()
            .flat_map(|g| &g.backends)
            .any(|b| b.status == CheckStatus::Fail)
    }
}

/// The pass rule: every sample's top-1 class as on the CPU and every element close at
/// `rtol 1e-2, atol 1e-3` (TF32 and cuDNN's algorithms move the last digits, not the answer).
fn tolerance() -> Tolerance {
    Tolerance {
        rtol: 1e-2,
        atol: 1e-3,
        equal_nan: false,
    }
}

/// Runs the check on every GPU of this machine. `tensorrt_dir` is where TensorRT is, if not
/// in the usual places.
pub(crate) fn check_gpus(tensorrt_dir: Option<PathBuf>) -> Result<CheckReport> {
    let info = driver_info();
    let setup = format!(
        "a conv-bn-relu-pool-gemm classifier at batch {BATCH}, {SAMPLES} seeded random samples, each GPU backend against tract on the CPU; pass = top-1 agreement 100% and every element within rtol 1e-2, atol 1e-3"
    );
    if info.gpus.is_empty() {
        return Ok(CheckReport {
            setup,
            gpus: vec![],
            no_gpu: Some(
                info.error
                    .unwrap_or_else(|| "the CUDA driver sees no GPU".into()),
            ),
        });
    }
    let dir = tempfile::tempdir().context("a temporary folder for the check's model")?;
    let model = dir.path().join("check_classifier.onnx");
    OnnxModel::from_proto(small_classifier::classifier(None), &model).save(&model)?;
    let engine = build_classifier_engine(dir.path(), &model, BATCH, tensorrt_dir.clone(), &|_| {})
        .map_err(|e| format!("the engine could not be built: {e:#}"));
    let mut gpus = vec![];
    for gpu in &info.gpus {
        let ctx = GpuContext {
            info: gpu,
            model: &model,
            tensorrt_dir: tensorrt_dir.clone(),
        };
        // tract first: it opens cuDNN by its own names, and ONNX Runtime then shares the copy
        // already loaded instead of bringing a second one.
        let backends = vec![
            timed("tensorrt-rtx", || ctx.engine(&engine)),
            timed("tract-cuda", || ctx.reference_backend(BackendKind::Tract)),
            timed("ort-cuda", || ctx.reference_backend(BackendKind::Ort)),
        ];
        gpus.push(GpuCheck {
            gpu: gpu.clone(),
            backends,
        });
    }
    Ok(CheckReport {
        setup,
        gpus,
        no_gpu: None,
    })
}

/// Builds an FP32 engine of `model` (batch 1 to `max_batch`, tuned for `max_batch`) into
/// `dir/engines` with the build job (TensorRT-RTX builds without a GPU); `note` hears the
/// build's notes.
pub fn build_classifier_engine(
    dir: &Path,
    model: &Path,
    max_batch: usize,
    tensorrt_dir: Option<PathBuf>,
    note: &dyn Fn(&str),
) -> Result<PathBuf> {
    use crate::jobs::build::{build, BuildConfig, BuildObservers};
    use crate::trt::profile::BatchRequest;
    let config = BuildConfig {
        model: model.to_path_buf(),
        input_shapes: Default::default(),
        batch: BatchRequest {
            min: Some(1),
            opt: Some(max_batch as i64),
            max: Some(max_batch as i64),
        },
        explicit_shapes: Default::default(),
        plan: crate::quantize::plan::PrecisionPlan::Fp32,
        builder: Default::default(),
        output: None,
        engine_dir: dir.join("engines"),
        rebuild: false,
        tensorrt_dir,
    };
    let observers = BuildObservers {
        calibration: &NoProgress,
        builder: std::sync::Arc::new(NoProgress),
        note,
    };
    Ok(PathBuf::from(build(&config, &observers)?.engine))
}

/// A comparison of `a` against `reference` on tract's CPU backend over `samples` seeded
/// uniform [0, 1) samples at `batch`, with a top-5 table.
pub fn against_tract_cpu(
    a: SideConfig,
    reference: &Path,
    batch: usize,
    samples: usize,
    tolerance: Tolerance,
) -> CompareConfig {
    CompareConfig {
        a,
        b: SideConfig {
            path: reference.to_path_buf(),
            backend: BackendOptions::default(),
        },
        input_shapes: Default::default(),
        batch_size: NonZeroUsize::new(batch),
        inputs: InputSource::Random {
            random: RandomInputs {
                dist: InputDistribution::Uniform {
                    low: 0.0,
                    high: 1.0,
                },
                seed: 0,
            },
            int_inputs: Default::default(),
            samples,
        },
        tolerance,
        topk: 5,
        task: Default::default(),
    }
}

/// Runs `f` and stamps its wall time; an error becomes a failed check with its message.
fn timed(backend: &str, f: impl FnOnce() -> Result<BackendCheck>) -> BackendCheck {
    let start = Instant::now();
    let mut check = f().unwrap_or_else(|e| BackendCheck {
        backend: backend.into(),
        status: CheckStatus::Fail,
        detail: format!("{e:#}"),
        top1_agreement_pct: None,
        max_abs_err: None,
        latency_model_ms: None,
        seconds: 0.0,
    });
    check.backend = backend.into();
    check.seconds = start.elapsed().as_secs_f64();
    check
}

fn skipped(reason: String) -> BackendCheck {
    BackendCheck {
        backend: String::new(),
        status: CheckStatus::Skip,
        detail: reason,
        top1_agreement_pct: None,
        max_abs_err: None,
        latency_model_ms: None,
        seconds: 0.0,
    }
}

struct GpuContext<'a> {
    info: &'a GpuInfo,
    model: &'a Path,
    tensorrt_dir: Option<PathBuf>,
}

impl GpuContext<'_> {
    fn options(&self, kind: BackendKind) -> BackendOptions {
        BackendOptions {
            kind,
            device: Device::Cuda,
            device_id: Some(self.info.index as usize),
            tensorrt_dir: self.tensorrt_dir.clone(),
            ..Default::default()
        }
    }

    /// The engine: skipped with the reason where this GPU cannot run it, else timed through
    /// the harness and compared.
    fn engine(&self, engine: &std::result::Result<PathBuf, String>) -> Result<BackendCheck> {
        let (runs, reason) = can_run_on(
            BOUND.flavour,
            &self.info.name,
            &self.info.compute_capability,
        );
        if !runs {
            return Ok(skipped(reason));
        }
        let engine = match engine {
            Ok(p) => p,
            Err(why) => return Ok(skipped(why.clone())),
        };
        self.run_and_compare(engine, self.options(BackendKind::Tract))
    }

    /// ONNX Runtime's CUDA provider or tract's CUDA runtime on the ONNX model; ONNX Runtime
    /// is skipped where it is not installed.
    fn reference_backend(&self, kind: BackendKind) -> Result<BackendCheck> {
        if kind == BackendKind::Ort {
            if let Err(e) = crate::backend::ort_cuda::ensure_cuda_provider() {
                return Ok(skipped(format!("{e:#}")));
            }
        }
        self.run_and_compare(self.model, self.options(kind))
    }

    /// Times `path` through the harness where the backend enqueues on trtkit's streams, then
    /// compares it with tract on the CPU.
    fn run_and_compare(&self, path: &Path, options: BackendOptions) -> Result<BackendCheck> {
        let mut latency_model_ms = None;
        let mut backend = open(
            path,
            &BackendOptions {
                batch: Some(BATCH),
                ..options.clone()
            },
        )?;
        let (inputs, outputs) = (backend.inputs().to_vec(), backend.outputs().to_vec());
        if let Some(enqueue) = backend.gpu() {
            let gpu = Gpu::open(self.info.index as usize)?;
            let harness_options = HarnessOptions {
                warmup: Amount::Iterations(3),
                measure: Amount::Iterations(20),
                transfers: true,
                cuda_graph: false,
                streams: 1,
            };
            let r = harness::run(&gpu, enqueue, &inputs, &outputs, BATCH, &harness_options)
                .context("through trtkit's harness")?;
            latency_model_ms =
                SpanStats::from_iterations(&r.iterations).and_then(|s| s.compute.map(|c| c.mean));
        }
        drop(backend);
        let a = SideConfig {
            path: path.to_path_buf(),
            backend: options,
        };
        let config = against_tract_cpu(a, self.model, BATCH, SAMPLES, tolerance());
        let report = compare(&config, &Saves::default(), &NoProgress)?;
        let out = report.outputs.first().context("the model has no output")?;
        let top1 = out.topk.as_ref().map(|k| k.top1_agreement_pct);
        let pass = top1.is_none_or(|t| t == 100.0) && out.closeness.equal_pct == 100.0;
        Ok(BackendCheck {
            backend: String::new(),
            status: if pass {
                CheckStatus::Pass
            } else {
                CheckStatus::Fail
            },
            detail: format!(
                "top-1 agreement {}, max abs error {:.2e}, {:.2}% of elements close",
                top1.map(|t| format!("{t:.1}%")).unwrap_or("-".into()),
                out.closeness.max_abs_err,
                out.closeness.equal_pct
            ),
            top1_agreement_pct: top1,
            max_abs_err: Some(out.closeness.max_abs_err),
            latency_model_ms,
            seconds: 0.0,
        })
    }
}
