//! Execution backends: one trait, several implementations (tract on the CPU or CUDA, ONNX Runtime
//! on the CPU or CUDA, and TensorRT engines in `engine`, over the calls `trt/` wraps). Commands
//! hold a `Box<dyn Backend>` and do not care which one it is; [`open()`] is the one way to get
//! one, from an ONNX file, an engine or a model in memory.

pub mod batch_memory;
pub(crate) mod batch_runner;
pub mod cpu_split;
pub mod engine;
pub(crate) mod fp16_emulated;
pub mod mac_count;
pub mod open;
pub mod ort;
pub mod ort_cuda;
pub(crate) mod ort_cuda_autotune;
pub mod ort_cuda_tuning;
pub mod ort_fusion;
pub(crate) mod ort_ir;
pub(crate) mod ort_libs;
pub(crate) mod ort_placement;
pub(crate) mod ort_profile;
pub mod select;
pub mod tract;
pub mod tract_kernels;

pub use open::{open, FileKind, ModelSource};

use crate::tensor::{BatchAxes, Dim, HostTensor, IoSpec, TensorData};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What one call to [`Backend::run`] returns.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// Output tensors, in the backend's output order.
    pub outputs: Vec<HostTensor>,
    /// Wall-clock time of the inference itself (host tensors in → host tensors out).
    pub elapsed: Duration,
}

/// Receives float32 outputs from [`Backend::run_visit`]: `(output index, values)`. It may be
/// called several times for one output (once per piece of the batch a backend ran on its
/// own) and from several threads at once.
pub(crate) type OutputVisitor<'v> = dyn Fn(usize, &[f32]) -> Result<()> + Sync + 'v;

/// An execution backend: reports its I/O and runs a batch of host tensors.
pub trait Backend: Send {
    /// Short name for reports, e.g. `tract-cpu`.
    fn name(&self) -> String;
    /// Inputs, in the order `run` takes them.
    fn inputs(&self) -> &[IoSpec];
    /// Outputs, in the order `run` returns them.
    fn outputs(&self) -> &[IoSpec];
    /// Runs one batch: `inputs` in the order of [`Backend::inputs`].
    fn run(&mut self, inputs: &[HostTensor]) -> Result<RunOutput>;
    /// Runs one batch and hands every float32 output to `visit` where it lies, without
    /// copying it into host tensors first (outputs of other types are not visited). For
    /// callers that only read the outputs, like calibration's histograms of captured tensors.
    /// Returns the wall time of the run, visits included. The default runs [`Backend::run`].
    fn run_visit(&mut self, inputs: &[HostTensor], visit: &OutputVisitor) -> Result<Duration> {
        let start = std::time::Instant::now();
        let out = self.run(inputs)?;
        for (i, t) in out.outputs.iter().enumerate() {
            if let TensorData::F32(values) = &t.data {
                visit(i, values)?;
            }
        }
        Ok(start.elapsed())
    }

    /// The enqueue-on-a-stream side of a GPU backend, for the event-timed `run` harness;
    /// `None` (the default) for backends that only run host tensors.
    fn gpu(&mut self) -> Option<&mut dyn crate::cuda::enqueue::GpuEnqueue> {
        None
    }

    /// Called by a job when it is done with the backend: saves what the backend learned while
    /// running (TensorRT-RTX's compiled kernels) and returns notes for the report (what was
    /// reused or saved, and where). The default has nothing to save.
    fn finish(&mut self) -> Result<Vec<String>> {
        Ok(vec![])
    }

    /// The batch size every input's axis 0 is fixed to, if they all agree on one; `None` when
    /// the batch is dynamic (any size runs).
    fn fixed_batch(&self) -> Option<usize> {
        let mut sizes = self.inputs().iter().map(|s| match s.dims.first() {
            Some(Dim::Fixed(n)) => Some(*n as usize),
            _ => None,
        });
        let first = sizes.next()??;
        sizes.all(|s| s == Some(first)).then_some(first)
    }

    /// Whether a batch of `n` samples, fewer than it was prepared for, runs as it is and costs no
    /// more than the full batch would. A backend prepared for one batch size (an optimized plan,
    /// a session with a static shape) needs that size, so the batch runner pads a short last
    /// batch to it; one that cuts every batch into pieces prepared for the piece's size runs
    /// only the pieces `n` samples fill, and padding would only add work.
    fn runs_short_batch(&self, _n: usize) -> bool {
        false
    }

    /// Where each input and output holds its samples: found from the model's named axes when
    /// it was opened (the model's, not the fixed dims it runs at). The default: axis 0 of every
    /// tensor.
    fn batch_axes(&self) -> BatchAxes {
        BatchAxes::default()
    }
}

/// Where a backend runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    /// The host CPU.
    #[default]
    Cpu,
    /// An NVIDIA GPU through CUDA.
    Cuda,
}
