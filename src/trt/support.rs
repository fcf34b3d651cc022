//! What this machine offers trtkit: the CUDA driver and GPUs, the TensorRT libraries, and which
//! TensorRT flavour's engines run on which GPU (the report of `trtkit doctor`).

use crate::backend::ort_libs::{self, OrtProbe};
use crate::backend::tract_kernels::{self, KernelModel};
use crate::cuda::info::{driver_info, DriverInfo};
use crate::data::decode::{jpeg_decoder, JpegDecoder};
use crate::trt::loader::{can_run_on, probe_tensorrt, LibraryProbe};
use serde::{Deserialize, Serialize};

/// Everything `doctor` found: this binary, the driver and GPUs, the TensorRT libraries, which
/// engines run on which GPU, and the compiled-in backends.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DoctorReport {
    /// Version of this trtkit binary.
    pub trtkit_version: String,
    /// Git commit the binary was built from.
    pub git_commit: String,
    /// CUDA driver and GPUs.
    pub cuda: DriverInfo,
    /// TensorRT libraries.
    pub tensorrt: Vec<LibraryProbe>,
    /// ONNX Runtime and its CUDA provider's libraries.
    pub onnxruntime: OrtProbe,
    /// Per found TensorRT flavour and GPU: whether its engines run there, and why not.
    pub engine_support: Vec<EngineSupport>,
    /// Execution backends compiled into this binary.
    pub backends: Vec<String>,
    /// The JPEG decoder compiled in, and whether it has its SIMD code.
    pub jpeg_decoder: JpegDecoder,
    /// The cost model tract picks its x86-64 matrix kernels with (`None` off x86-64).
    pub tract_kernels: Option<KernelModel>,
}

/// Whether one TensorRT flavour's engines run on one GPU.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EngineSupport {
    /// The flavour.
    pub flavour: String,
    /// The GPU's index.
    pub gpu: i32,
    /// Whether its engines run there.
    pub runs: bool,
    /// The sentence saying so (and what to do when not).
    pub reason: String,
}

/// Execution backends compiled into this binary: the reference backends and the engine
/// backend of the TensorRT flavour this binary binds.
pub fn compiled_backends() -> Vec<String> {
    let engines = match crate::trt::loader::BOUND.flavour {
        crate::trt::loader::Flavour::TensorRt => "tensorrt (engines)",
        crate::trt::loader::Flavour::TensorRtRtx => "tensorrt-rtx (engines)",
    };
    vec![
        "tract-cpu".into(),
        "tract-cuda".into(),
        "ort-cpu".into(),
        "ort-cuda".into(),
        engines.into(),
    ]
}

/// Looks at this machine; never fails (what is missing is said in the report).
pub fn collect() -> DoctorReport {
    let cuda = driver_info();
    let tensorrt = probe_tensorrt();
    let mut engine_support = Vec::new();
    for lib in tensorrt.iter().filter(|l| l.found) {
        if engine_support
            .iter()
            .any(|e: &EngineSupport| e.flavour == lib.flavour.to_string())
        {
            continue;
        }
        for g in &cuda.gpus {
            let (runs, reason) = can_run_on(lib.flavour, &g.name, &g.compute_capability);
            engine_support.push(EngineSupport {
                flavour: lib.flavour.to_string(),
                gpu: g.index,
                runs,
                reason,
            });
        }
    }
    DoctorReport {
        trtkit_version: env!("CARGO_PKG_VERSION").into(),
        git_commit: env!("TRTKIT_GIT_COMMIT").into(),
        cuda,
        tensorrt,
        onnxruntime: ort_libs::probe(|| crate::backend::ort::available().map(|_| ())),
        engine_support,
        backends: compiled_backends(),
        jpeg_decoder: jpeg_decoder(),
        tract_kernels: tract_kernels::in_use(),
    }
}
