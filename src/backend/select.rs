//! Opening a backend by name: what the `--backend`/`--device`/`--threads` flags turn into, and
//! [`Runtime`], the one name of what runs a model that bench targets and table rows share.

pub use super::fp16_emulated::Fp16Compute;
use super::ort_cuda_tuning::OrtCudaTuning;
pub use super::ort_fusion::TransformerFusionPolicy;
use super::Device;
use crate::onnx::shape::ShapeRequest;

use crate::tensor::BatchAxisRequest;
use anyhow::Result;
use serde::{Deserialize, Serialize};

/// Which reference backend runs an ONNX model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// tract, embedded (CPU, or CUDA with `--device cuda`).
    #[default]
    Tract,
    /// ONNX Runtime, loaded at run time (CPU, or its CUDA provider with `--device cuda`).
    Ort,
}

/// What runs a model, named once for every place that names one: TensorRT (an engine), or a
/// reference backend on a device. Bench targets and flags (`--targets`, `--reference`), the
/// journal, the report's tables and CSV, and the rows of the precision tables all name it by
/// [`Runtime::name`]; `--backend` × `--device` map to it through [`BackendOptions::runtime`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    /// A TensorRT engine built by `build` from the (rewritten) model.
    Trt,
    /// tract on the CPU.
    TractCpu,
    /// tract's CUDA runtime.
    TractCuda,
    /// ONNX Runtime on the CPU.
    OrtCpu,
    /// ONNX Runtime's CUDA provider, timed by trtkit's harness on its own streams.
    OrtCuda,
}

impl Runtime {
    /// Every runtime, in the order tables list them.
    pub(crate) const ALL: [Runtime; 5] = [
        Runtime::Trt,
        Runtime::OrtCuda,
        Runtime::TractCuda,
        Runtime::TractCpu,
        Runtime::OrtCpu,
    ];

    /// The name used on the command line, in plans, journals, reports and tables.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Trt => "trt",
            Runtime::TractCpu => "tract-cpu",
            Runtime::TractCuda => "tract-cuda",
            Runtime::OrtCpu => "ort-cpu",
            Runtime::OrtCuda => "ort-cuda",
        }
    }

    /// The reference backend of `kind` on `device`.
    pub fn of(kind: BackendKind, device: Device) -> Runtime {
        match (kind, device) {
            (BackendKind::Tract, Device::Cpu) => Runtime::TractCpu,
            (BackendKind::Tract, Device::Cuda) => Runtime::TractCuda,
            (BackendKind::Ort, Device::Cpu) => Runtime::OrtCpu,
            (BackendKind::Ort, Device::Cuda) => Runtime::OrtCuda,
        }
    }

    /// The reference backend and device that run an ONNX model for this runtime (`None` for
    /// TensorRT, which runs an engine).
    pub(crate) fn kind_and_device(self) -> Option<(BackendKind, Device)> {
        match self {
            Runtime::Trt => None,
            Runtime::TractCpu => Some((BackendKind::Tract, Device::Cpu)),
            Runtime::TractCuda => Some((BackendKind::Tract, Device::Cuda)),
            Runtime::OrtCpu => Some((BackendKind::Ort, Device::Cpu)),
            Runtime::OrtCuda => Some((BackendKind::Ort, Device::Cuda)),
        }
    }

    /// The options that open an ONNX model on this runtime, the rest default (`None` for
    /// TensorRT).
    pub fn backend(self) -> Option<BackendOptions> {
        self.kind_and_device().map(|(kind, device)| BackendOptions {
            kind,
            device,
            ..Default::default()
        })
    }

    /// Whether the runtime runs on the GPU.
    pub fn on_gpu(self) -> bool {
        matches!(self, Runtime::Trt | Runtime::TractCuda | Runtime::OrtCuda)
    }
}

impl std::fmt::Display for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A runtime name that is not one of [`Runtime::ALL`].
#[derive(Debug, thiserror::Error)]
#[error("unknown target {0:?}: expected one of trt, ort-cuda, tract-cuda, tract-cpu, ort-cpu")]
pub struct UnknownRuntime(pub String);

impl std::str::FromStr for Runtime {
    type Err = UnknownRuntime;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Runtime::ALL
            .into_iter()
            .find(|r| r.name() == s.trim())
            .ok_or_else(|| UnknownRuntime(s.to_string()))
    }
}

/// The backend that runs an ONNX model on `device` when none is named. On the CPU: ONNX Runtime
/// where it is installed (its kernels run ResNet-50 about twice as fast as tract's), else tract,
/// embedded, which needs nothing. On CUDA: ONNX Runtime's CUDA provider where it can run here,
/// else tract's CUDA runtime. `-v` logs why the fallback was taken.
pub fn default_kind(device: Device) -> BackendKind {
    match device {
        Device::Cpu => match super::ort::available() {
            Ok(_) => BackendKind::Ort,
            // A library the user pointed at that does not load is worth a warning; no ONNX
            // Runtime at all is the ordinary case tract is there for.
            Err(e) if std::env::var_os("ORT_DYLIB_PATH").is_some_and(|p| !p.is_empty()) => {
                tracing::warn!("tract runs the model: ONNX Runtime cannot ({e:#})");
                BackendKind::Tract
            }
            Err(e) => {
                tracing::info!("tract runs the model: ONNX Runtime cannot ({e:#})");
                BackendKind::Tract
            }
        },
        Device::Cuda => match super::ort_cuda::ensure_cuda_provider() {
            Ok(()) => BackendKind::Ort,
            Err(e) => {
                tracing::info!("tract's CUDA runtime runs the model: ONNX Runtime's CUDA provider cannot ({e:#})");
                BackendKind::Tract
            }
        },
    }
}

/// The backend a calibration runs on when none is named: tract on the CPU, wherever ONNX
/// Runtime is. Tract hands each captured activation to its histogram as the node that made it
/// runs, and frees it after its last reader; ONNX Runtime returns every captured activation of
/// a batch at once (18 MB per image for MobileNetV3-Large, over half a GB at batch 32). On
/// CUDA, as [`default_kind`].
pub fn default_calibration_kind(device: Device) -> BackendKind {
    match device {
        Device::Cpu => BackendKind::Tract,
        Device::Cuda => default_kind(device),
    }
}

/// Everything needed to open a backend on an ONNX model.
#[derive(Clone, Debug, Default)]
pub struct BackendOptions {
    /// Which backend.
    pub kind: BackendKind,
    /// Where it runs.
    pub device: Device,
    /// CPU threads; `None` uses every core.
    pub threads: Option<usize>,
    /// Whether ONNX Runtime's CPU thread pools spin between runs (its
    /// `session.intra_op.allow_spinning` and `session.inter_op.allow_spinning`); `None` keeps
    /// ONNX Runtime's default (they spin). Off where an image loader shares the cores (see
    /// [`super::cpu_split`]).
    pub spinning: Option<bool>,
    /// `--input-shape` overrides.
    pub input_shapes: ShapeRequest,
    /// Fix the batch axis to this size.
    pub batch: Option<usize>,
    /// Batch axes given by hand (`--batch-axis`), over what the model's named axes say.
    pub batch_axes: BatchAxisRequest,
    /// GPU that runs a TensorRT engine (or times a GPU backend); `None` is GPU 0.
    pub device_id: Option<usize>,
    /// Folder holding the TensorRT libraries, for engines; `None` searches the usual places.
    pub tensorrt_dir: Option<std::path::PathBuf>,
    /// ONNX Runtime's CUDA provider: the layout policy and cuDNN settings.
    pub cuda_tuning: OrtCudaTuning,
    /// The kind was trtkit's default, not the user's choice: tract stands in for ONNX Runtime
    /// on a model ONNX Runtime cannot read (see [`super::ort_ir::refusal`]).
    pub kind_is_default: bool,
    /// How a backend that widens float16 (ONNX Runtime's CPU build, tract) computes a float16
    /// model: emulated FP16 (the default) or as the backend does it.
    pub fp16_compute: Fp16Compute,
    /// Whether ONNX Runtime backends fuse exported transformer blocks first.
    pub transformer_fusion: TransformerFusionPolicy,
    /// Whether ONNX Runtime backends profile their runs and say the time per op type
    /// (`run --op-profile`).
    pub op_profile: bool,
}

impl BackendOptions {
    /// The runtime these options open an ONNX model on.
    pub fn runtime(&self) -> Runtime {
        Runtime::of(self.kind, self.device)
    }

    /// These options moved to `runtime`'s backend and device (unchanged for TensorRT, which
    /// runs an engine on the GPU these options name).
    pub fn on(self, runtime: Runtime) -> BackendOptions {
        match runtime.kind_and_device() {
            Some((kind, device)) => BackendOptions {
                kind,
                device,
                ..self
            },
            None => self,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtimes_are_named_once_and_map_to_backend_and_device() {
        let names: Vec<&str> = Runtime::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(
            names,
            ["trt", "ort-cuda", "tract-cuda", "tract-cpu", "ort-cpu"]
        );
        for r in Runtime::ALL {
            assert_eq!(r.name().parse::<Runtime>().unwrap(), r);
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{}\"", r.name()));
            assert_eq!(r.to_string(), r.name());
            match r.kind_and_device() {
                Some((kind, device)) => {
                    assert_eq!(Runtime::of(kind, device), r);
                    let options = r.backend().unwrap();
                    assert_eq!(options.runtime(), r);
                    assert_eq!(r.on_gpu(), device == Device::Cuda, "{r}");
                    let moved = BackendOptions::default().on(r);
                    assert_eq!((moved.kind, moved.device), (kind, device));
                }
                None => {
                    assert_eq!(r, Runtime::Trt);
                    assert!(r.backend().is_none() && r.on_gpu());
                }
            }
        }
        let err = "tract-gpu".parse::<Runtime>().unwrap_err();
        assert!(err.to_string().contains("tract-gpu"));
        // Runtimes sort in their declaration order, whatever order a table lists them in.
        let mut sorted = Runtime::ALL;
        sorted.sort();
        assert_eq!(
            sorted,
            [
                Runtime::Trt,
                Runtime::TractCpu,
                Runtime::TractCuda,
                Runtime::OrtCpu,
                Runtime::OrtCuda
            ]
        );
    }
}
