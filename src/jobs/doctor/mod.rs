//! What this machine offers trtkit: the CUDA driver and GPUs, the TensorRT libraries, and which
//! TensorRT flavour's engines run on which GPU (the report of `trtkit doctor`); [`check`] is
//! `doctor --check`, a small network through every GPU backend found.

pub mod check;

use crate::backend::ort_libs::{self, OrtProbe};
use crate::backend::tract_kernels::{self, KernelModel};
use crate::cuda::info::{driver_info, DriverInfo, GpuInfo};
use crate::data::decode::{jpeg_decoder, JpegDecoder};
use crate::trt::flavour::{fix, needed_for_text, this_binary, Needed};
use crate::trt::loader::{can_run_on, probe_tensorrt, Flavour, LibraryProbe};
use serde::{Deserialize, Serialize};

/// Everything `doctor` found: this binary, the driver and GPUs, the TensorRT libraries, which
/// engines run on which GPU, and the compiled-in backends.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DoctorReport {
    /// Version of this trtkit binary.
    pub trtkit_version: String,
    /// Git commit the binary was built from.
    pub(crate) git_commit: String,
    /// CUDA driver and GPUs.
    pub cuda: DriverInfo,
    /// TensorRT libraries.
    pub tensorrt: Vec<LibraryProbe>,
    /// ONNX Runtime and its CUDA provider's libraries.
    pub onnxruntime: OrtProbe,
    /// Per found TensorRT flavour and GPU: whether its engines run there, and why not.
    pub(crate) engine_support: Vec<EngineSupport>,
    /// The TensorRT this binary loads, the one each GPU needs, and how to get it where they
    /// differ.
    pub tensorrt_flavour: FlavourFit,
    /// Execution backends compiled into this binary.
    pub backends: Vec<String>,
    /// The JPEG decoder compiled in, and whether it has its SIMD code.
    pub jpeg_decoder: JpegDecoder,
    /// The cost model tract picks its x86-64 matrix kernels with (`None` off x86-64).
    pub tract_kernels: Option<KernelModel>,
}

/// Whether one TensorRT flavour's engines run on one GPU.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct EngineSupport {
    /// The flavour.
    pub flavour: String,
    /// The GPU's index.
    pub gpu: i32,
    /// Whether its engines run there.
    pub runs: bool,
    /// The sentence saying so (and what to do when not).
    pub reason: String,
}

/// The TensorRT flavour this binary loads against the one each GPU of the machine needs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FlavourFit {
    /// What this binary loads: `tensorrt-rtx` (the default build) or `tensorrt` (built with
    /// `--features tensorrt`).
    pub binary: Needed,
    /// Per GPU, what it needs.
    pub gpus: Vec<GpuFlavour>,
}

/// The TensorRT one GPU needs, by its compute capability.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GpuFlavour {
    /// The GPU's index.
    pub gpu: i32,
    /// Its compute capability, `major.minor`.
    pub compute_capability: String,
    /// The TensorRT whose engines run there: `tensorrt-rtx`, `tensorrt` or `none`.
    pub needs: Needed,
    /// What to run to get a trtkit for it, where this binary loads another flavour.
    pub(crate) fix: Option<String>,
}

impl FlavourFit {
    /// True when this binary's engines run on every GPU that any TensorRT runs on.
    pub fn fits(&self) -> bool {
        self.gpus.iter().all(|g| g.fix.is_none())
    }
}

/// What a binary of flavour `binary` says about these GPUs (pure: tests pass made-up GPUs).
pub(crate) fn flavour_fit(binary: Flavour, gpus: &[GpuInfo]) -> FlavourFit {
    FlavourFit {
        binary: binary.into(),
        gpus: gpus
            .iter()
            .map(|g| {
                let needs = needed_for_text(&g.compute_capability);
                GpuFlavour {
                    gpu: g.index,
                    compute_capability: g.compute_capability.clone(),
                    needs,
                    fix: fix(binary, needs),
                }
            })
            .collect(),
    }
}

/// The TensorRT the first of these GPUs needs (`Needed::Unsupported` for none): what
/// `trtkit doctor --tensorrt-flavour` prints.
pub(crate) fn first_gpu_needs(gpus: &[GpuInfo]) -> Needed {
    gpus.first()
        .map(|g| needed_for_text(&g.compute_capability))
        .unwrap_or(Needed::Unsupported)
}

/// [`first_gpu_needs`] on this machine's GPUs, read from the driver alone (no library probes).
pub(crate) fn gpu0_needs() -> Needed {
    first_gpu_needs(&driver_info().gpus)
}

/// Execution backends compiled into this binary: the reference backends and the engine
/// backend of the TensorRT flavour this binary binds.
pub(crate) fn compiled_backends() -> Vec<String> {
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
        tensorrt_flavour: flavour_fit(this_binary(), &cuda.gpus),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A made-up GPU (no GPU in CI).
    fn gpu(index: i32, name: &str, cc: &str) -> GpuInfo {
        GpuInfo {
            index,
            name: name.into(),
            memory_bytes: 80 << 30,
            compute_capability: cc.into(),
            uuid: None,
        }
    }

    #[test]
    fn each_gpu_gets_its_flavour_and_a_fix_where_this_binary_differs() {
        let gpus = [
            gpu(0, "NVIDIA H100 80GB HBM3", "9.0"),
            gpu(1, "NVIDIA L4", "8.9"),
            gpu(2, "Tesla P100", "6.0"),
        ];
        let rtx = flavour_fit(Flavour::TensorRtRtx, &gpus);
        assert_eq!(rtx.binary, Needed::TensorRtRtx);
        let needs: Vec<Needed> = rtx.gpus.iter().map(|g| g.needs).collect();
        assert_eq!(
            needs,
            [Needed::TensorRt, Needed::TensorRtRtx, Needed::Unsupported]
        );
        assert!(rtx.gpus[0]
            .fix
            .as_ref()
            .unwrap()
            .contains("--features tensorrt"));
        assert!(rtx.gpus[1].fix.is_none() && rtx.gpus[2].fix.is_none());
        assert!(!rtx.fits());
        let trt = flavour_fit(Flavour::TensorRt, &gpus);
        assert!(trt.gpus[0].fix.is_none());
        assert!(trt.gpus[1]
            .fix
            .as_ref()
            .unwrap()
            .contains("tensorrt-rtx-cu13-libs"));
        assert!(flavour_fit(Flavour::TensorRtRtx, &gpus[1..]).fits());
    }

    #[test]
    fn the_json_carries_the_words() {
        let fit = flavour_fit(Flavour::TensorRtRtx, &[gpu(0, "NVIDIA H200", "9.0")]);
        let v = serde_json::to_value(&fit).unwrap();
        assert_eq!(v["binary"], "tensorrt-rtx");
        assert_eq!(v["gpus"][0]["needs"], "tensorrt");
        assert_eq!(v["gpus"][0]["compute_capability"], "9.0");
        assert!(v["gpus"][0]["fix"]
            .as_str()
            .unwrap()
            .contains("scripts/install.sh"));
        let back: FlavourFit = serde_json::from_value(v).unwrap();
        assert_eq!(back.gpus[0].needs, Needed::TensorRt);
    }

    #[test]
    fn the_first_gpu_decides_and_no_gpu_is_none() {
        assert_eq!(first_gpu_needs(&[]), Needed::Unsupported);
        let gpus = [
            gpu(0, "NVIDIA RTX 4090", "8.9"),
            gpu(1, "NVIDIA H100", "9.0"),
        ];
        assert_eq!(first_gpu_needs(&gpus), Needed::TensorRtRtx);
        assert_eq!(first_gpu_needs(&gpus[1..]), Needed::TensorRt);
    }
}
