//! The enqueue interface: what a GPU backend gives the timing harness.
//!
//! The harness owns everything that is timed: streams, events, device and pinned buffers.
//! A backend only *queues one inference* on a stream the harness hands it, reading its inputs
//! from and writing its outputs to device buffers the harness bound (a binding holds its
//! buffer, never a bare address, so a backend checks sizes it can trust). This is exactly the
//! shape of TensorRT's `IExecutionContext`: `setInputShape` + `setTensorAddress` per tensor,
//! then `enqueueV3(stream)`; one execution context per concurrent stream (a *slot* here).

use super::device::{Gpu, Stream};
use super::memory::DeviceBuffer;
use anyhow::Result;
use std::sync::Arc;

/// One tensor bound to device memory for an inference: its name, its shape at this batch, and
/// the device allocation that holds it. A binding is made only from a live [`DeviceBuffer`],
/// which it keeps alive, so a backend can trust the address it binds and the size it checks
/// against the tensor; no raw address can be handed in.
#[derive(Clone, Debug)]
pub struct TensorBinding {
    /// Tensor name, as in the backend's I/O specs.
    pub name: String,
    /// Concrete shape for this batch size.
    pub shape: Vec<usize>,
    buffer: Arc<DeviceBuffer>,
}

impl TensorBinding {
    /// Binds tensor `name` of `shape` to `buffer`.
    pub fn new(name: impl Into<String>, shape: Vec<usize>, buffer: Arc<DeviceBuffer>) -> Self {
        TensorBinding {
            name: name.into(),
            shape,
            buffer,
        }
    }

    /// Size of the bound allocation in bytes.
    pub fn bytes(&self) -> usize {
        self.buffer.len()
    }

    /// The bound allocation.
    pub fn buffer(&self) -> &DeviceBuffer {
        &self.buffer
    }
}

/// The device buffers of one inference, in the backend's input and output order.
#[derive(Clone, Debug)]
pub struct IoBindings {
    /// Inputs, in the order of `Backend::inputs`.
    pub inputs: Vec<TensorBinding>,
    /// Outputs, in the order of `Backend::outputs`.
    pub outputs: Vec<TensorBinding>,
}

/// A backend that can queue an inference on a caller's CUDA stream.
pub trait GpuEnqueue {
    /// Prepares `slots` independent execution slots on `gpu` for batch size `batch` and returns
    /// the stream each slot runs on (TensorRT: one execution context per slot, input shapes set,
    /// on new streams; ONNX Runtime: one session per slot, each made with its stream). Called
    /// once per batch size, before any [`GpuEnqueue::enqueue`]; errors when the batch is outside
    /// what the model allows.
    fn prepare(&mut self, gpu: &Gpu, batch: usize, slots: usize) -> Result<Vec<Stream>>;

    /// Prepares `slots` slots that one host thread uses in turn (the batch feed), and returns
    /// the stream each slot's inference runs on. Unlike [`GpuEnqueue::prepare`], slots may
    /// share one stream and one execution slot: a backend whose every slot would hold its own
    /// copy of the model (ONNX Runtime: a session each, with its own weights, memory arena and
    /// first inference) serves them all from one. The caller orders its copies around the
    /// inferences with events, so a shared stream still overlaps one batch's copies with
    /// another's inference. By default, the slots of [`GpuEnqueue::prepare`].
    fn prepare_in_turn(&mut self, gpu: &Gpu, batch: usize, slots: usize) -> Result<Vec<Stream>> {
        self.prepare(gpu, batch, slots)
    }

    /// Queues one inference of slot `slot` on `stream` (the one [`GpuEnqueue::prepare`] gave
    /// for that slot) over `io`. Must not wait for the GPU
    /// and must be capturable into a CUDA graph (no synchronizing calls, no allocation).
    fn enqueue(&mut self, slot: usize, stream: &Stream, io: &IoBindings) -> Result<()>;
}
