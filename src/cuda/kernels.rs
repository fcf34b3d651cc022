//! Workloads of known cost, compiled at run time with NVRTC, that drive the harness through
//! the enqueue interface: the GPU test suite (`examples/gpu_suite.rs`) measures the harness
//! itself with them. NVRTC is loaded dynamically like the driver; its absence is an error.

use super::device::{Gpu, Stream};
use super::enqueue::{GpuEnqueue, IoBindings};
pub use super::launch::Kernels;
use crate::tensor::Dim;
use crate::tensor::{ElemType, IoSpec};
use anyhow::{bail, Result};
use std::sync::Arc;

/// What a [`KernelWorkload`] runs per inference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Work {
    /// One empty kernel launch (harness overhead).
    Empty,
    /// One thread spinning this many SM clock cycles.
    Spin {
        /// Cycles per inference.
        cycles: i64,
    },
    /// Copy `bytes` per sample from input `x` to output `y` (multiple of 4).
    Copy {
        /// Bytes per sample.
        bytes: usize,
    },
}

/// A workload of known cost implementing [`GpuEnqueue`].
pub struct KernelWorkload {
    kernels: Arc<Kernels>,
    work: Work,
}

impl KernelWorkload {
    /// A workload running `work` with `kernels`.
    pub fn new(kernels: Arc<Kernels>, work: Work) -> Self {
        KernelWorkload { kernels, work }
    }

    /// The I/O specs of the workload: `x` → `y` of `[batch, bytes]` u8 for a copy, none
    /// otherwise.
    pub fn io(&self) -> (Vec<IoSpec>, Vec<IoSpec>) {
        match self.work {
            Work::Copy { bytes } => {
                let spec = |name: &str| IoSpec {
                    name: name.into(),
                    elem_type: ElemType::U8,
                    dims: vec![Dim::Symbol("batch".into()), Dim::Fixed(bytes as i64)],
                };
                (vec![spec("x")], vec![spec("y")])
            }
            _ => (vec![], vec![]),
        }
    }
}

impl GpuEnqueue for KernelWorkload {
    fn prepare(&mut self, gpu: &Gpu, batch: usize, slots: usize) -> Result<Vec<Stream>> {
        if let Work::Copy { bytes } = self.work {
            if bytes % 4 != 0 || batch == 0 {
                bail!("the copy workload needs a positive batch and a multiple of 4 bytes");
            }
        }
        (0..slots).map(|_| gpu.new_stream()).collect()
    }

    fn enqueue(&mut self, _slot: usize, stream: &Stream, io: &IoBindings) -> Result<()> {
        let k = &self.kernels;
        match self.work {
            Work::Empty => k.launch_empty(stream),
            Work::Spin { cycles } => k.launch_spin(stream, cycles),
            Work::Copy { .. } => {
                let (Some(x), Some(y)) = (io.inputs.first(), io.outputs.first()) else {
                    bail!("the copy workload needs one input and one output buffer");
                };
                k.launch_copy(stream, x.buffer(), y.buffer())
            }
        }
    }
}
