//! Where a cell runs: TensorRT, tract on the CPU or on CUDA, or ONNX Runtime on the CPU or on
//! its CUDA provider.

use crate::backend::select::{BackendKind, BackendOptions};
use crate::backend::Device;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// One runtime column of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
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

impl Target {
    /// Every target, in the order tables list them.
    pub const ALL: [Target; 5] = [
        Target::Trt,
        Target::OrtCuda,
        Target::TractCuda,
        Target::TractCpu,
        Target::OrtCpu,
    ];

    /// The name used on the command line, in plans, journals and tables.
    pub fn name(self) -> &'static str {
        match self {
            Target::Trt => "trt",
            Target::TractCpu => "tract-cpu",
            Target::TractCuda => "tract-cuda",
            Target::OrtCpu => "ort-cpu",
            Target::OrtCuda => "ort-cuda",
        }
    }

    /// The reference backend that runs an ONNX model for this target (`None` for TensorRT,
    /// which runs an engine).
    pub fn backend(self) -> Option<BackendOptions> {
        let (kind, device) = match self {
            Target::Trt => return None,
            Target::TractCpu => (BackendKind::Tract, Device::Cpu),
            Target::TractCuda => (BackendKind::Tract, Device::Cuda),
            Target::OrtCpu => (BackendKind::Ort, Device::Cpu),
            Target::OrtCuda => (BackendKind::Ort, Device::Cuda),
        };
        Some(BackendOptions {
            kind,
            device,
            ..Default::default()
        })
    }

    /// Whether the target runs on the GPU.
    pub fn on_gpu(self) -> bool {
        matches!(self, Target::Trt | Target::TractCuda | Target::OrtCuda)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A target name that is not one of [`Target::ALL`].
#[derive(Debug, thiserror::Error)]
#[error("unknown target {0:?}: expected one of trt, ort-cuda, tract-cuda, tract-cpu, ort-cpu")]
pub struct UnknownTarget(pub String);

impl FromStr for Target {
    type Err = UnknownTarget;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Target::ALL
            .into_iter()
            .find(|t| t.name() == s.trim())
            .ok_or_else(|| UnknownTarget(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_refused() {
        for t in Target::ALL {
            assert_eq!(t.name().parse::<Target>().unwrap(), t);
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, format!("\"{}\"", t.name()));
        }
        let err = "tract-gpu".parse::<Target>().unwrap_err();
        assert!(err.to_string().contains("tract-gpu"));
        assert!(Target::Trt.backend().is_none());
        assert_eq!(Target::OrtCpu.backend().unwrap().kind, BackendKind::Ort);
        let gpu = Target::OrtCuda.backend().unwrap();
        assert_eq!((gpu.kind, gpu.device), (BackendKind::Ort, Device::Cuda));
        assert!(Target::OrtCuda.on_gpu() && !Target::OrtCpu.on_gpu());
    }
}
