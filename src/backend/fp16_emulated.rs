//! FP16 numerics on backends that widen float16: ONNX Runtime's CPU build and tract run a float16
//! graph's ops in float32 and keep the chain wide, so an overflow (or a lost subnormal) that FP16
//! hardware would show never happens there. Such a model is opened through
//! [`emulate_fp16`](crate::onnx::rewrite::fp16_emulate::emulate_fp16) (in memory; the file is
//! untouched) and its backend's name says so.

use super::{Backend, OutputVisitor, RunOutput};
use crate::tensor::{HostTensor, IoSpec};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How a CPU backend computes a model's float16 tensors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fp16Compute {
    /// Computed in float32 and rounded to float16 after every node, as FP16 hardware holds them
    /// (on ONNX Runtime's CPU build and on tract; ONNX Runtime's CUDA provider computes FP16
    /// itself).
    #[default]
    Emulate,
    /// As the backend does it: ONNX Runtime's CPU build and tract compute them in float32.
    Backend,
}

/// What a backend's name gains when it runs the emulated graph.
pub(crate) const NAME_NOTE: &str = "fp16 emulated";

/// A backend opened on an emulated model: everything as the backend does it, its name with
/// [`NAME_NOTE`] added (`ort-cpu, fp16 emulated`). Every method of [`Backend`] is passed on,
/// those with a default too: a method added to the trait must be passed on here as well.
pub(crate) struct Emulated(pub Box<dyn Backend>);

impl Backend for Emulated {
    fn name(&self) -> String {
        format!("{}, {NAME_NOTE}", self.0.name())
    }

    fn inputs(&self) -> &[IoSpec] {
        self.0.inputs()
    }

    fn outputs(&self) -> &[IoSpec] {
        self.0.outputs()
    }

    fn run(&mut self, inputs: &[HostTensor]) -> Result<RunOutput> {
        self.0.run(inputs)
    }

    fn run_visit(&mut self, inputs: &[HostTensor], visit: &OutputVisitor) -> Result<Duration> {
        self.0.run_visit(inputs, visit)
    }

    fn gpu(&mut self) -> Option<&mut dyn crate::cuda::enqueue::GpuEnqueue> {
        self.0.gpu()
    }

    fn finish(&mut self) -> Result<Vec<String>> {
        self.0.finish()
    }

    fn fixed_batch(&self) -> Option<usize> {
        self.0.fixed_batch()
    }

    fn runs_short_batch(&self, n: usize) -> bool {
        self.0.runs_short_batch(n)
    }

    fn batch_axes(&self) -> crate::tensor::BatchAxes {
        self.0.batch_axes()
    }
}
