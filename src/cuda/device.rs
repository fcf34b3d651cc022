//! One GPU opened for work: its context, streams, events and memory information.
//!
//! Built on cudarc's safe context, stream and event types. cudarc's automatic event tracking
//! (an event recorded around every buffer use) is turned off when a GPU is opened: the harness
//! orders its own work on its own streams, and the extra events would be timed too.

use super::identity::{nvml_uuid, NvmlGpu};
use super::info::describe;
use super::sys::{driver_present, elapsed_ms, init_and_count, open_context};
use crate::error::{fix_with, Setting};
use anyhow::{bail, Context, Result};
use cudarc::driver::{result, safe, sys};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Free and total device memory in bytes, as `cuMemGetInfo` reports it (device-wide: other
/// processes' allocations count as used).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemInfo {
    /// Free bytes.
    pub free: u64,
    /// Total bytes.
    pub total: u64,
}

impl MemInfo {
    /// Used bytes (`total - free`).
    pub fn used(&self) -> u64 {
        self.total.saturating_sub(self.free)
    }
}

/// Turns a driver error into an `anyhow` error naming what was being done.
pub(crate) fn driver_err(what: &str, e: result::DriverError) -> anyhow::Error {
    anyhow::anyhow!("{what}: {}", describe(&e))
}

/// An opened GPU: the primary context of one device.
#[derive(Clone, Debug)]
pub struct Gpu {
    ctx: Arc<safe::CudaContext>,
    name: String,
}

/// Runs `f`, turning a panic (cudarc panics when a driver symbol is missing) into an error.
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        bail!("{what}: the CUDA driver lacks a function trtkit needs (driver too old?)")
    })
}

impl Gpu {
    /// Opens GPU `device_id`. Errors (never panics) when there is no driver, no GPU, or the
    /// id is out of range.
    pub fn open(device_id: usize) -> Result<Gpu> {
        if !driver_present() {
            bail!("no CUDA driver (libcuda.so) could be loaded; a GPU backend needs an NVIDIA driver (the tract CPU backend runs without one)");
        }
        guarded("opening the GPU", || {
            let count =
                init_and_count().map_err(|(call, e)| driver_err(&format!("{call} failed"), e))?;
            if count <= 0 {
                bail!("the CUDA driver sees no GPU");
            }
            if device_id >= count as usize {
                return Err(fix_with(
                    Setting::DeviceId,
                    format!(
                        "GPU {device_id} is out of range: this machine has {count} GPU{} (ids 0..={})",
                        if count == 1 { "" } else { "s" },
                        count - 1
                    ),
                ));
            }
            let ctx = open_context(device_id)
                .map_err(|e| driver_err(&format!("cannot open GPU {device_id}"), e))?;
            let name = ctx.name().unwrap_or_else(|_| format!("GPU {device_id}"));
            Ok(Gpu { ctx, name })
        })
    }

    /// Device ordinal.
    pub fn id(&self) -> usize {
        self.ctx.ordinal()
    }

    /// Device name, e.g. `NVIDIA H100 80GB HBM3`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The board's UUID as NVML and `nvidia-smi -L` write it (`GPU-1a2b3c4d-…`): the one name of
    /// a GPU that CUDA's numbering (`CUDA_VISIBLE_DEVICES`, device order) does not change.
    pub(crate) fn uuid(&self) -> Option<String> {
        let raw = self.ctx.uuid().ok()?;
        Some(nvml_uuid(&raw.bytes.map(|b| b as u8)))
    }

    /// This GPU as NVML finds it: by its UUID, else by its CUDA ordinal.
    pub fn nvml(&self) -> NvmlGpu {
        NvmlGpu::of_cuda_ordinal(self.id(), self.uuid())
    }

    /// The cudarc context (for code inside `cuda/` that needs it).
    pub(crate) fn context(&self) -> &Arc<safe::CudaContext> {
        &self.ctx
    }

    /// Makes this GPU's context current on the calling thread.
    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver_err("cannot bind the CUDA context", e))
    }

    /// Free and total device memory now.
    pub fn mem_info(&self) -> Result<MemInfo> {
        let (free, total) = self
            .ctx
            .mem_get_info()
            .map_err(|e| driver_err("cuMemGetInfo failed", e))?;
        Ok(MemInfo {
            free: free as u64,
            total: total as u64,
        })
    }

    /// An integer device attribute.
    pub fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32> {
        self.ctx
            .attribute(attr)
            .map_err(|e| driver_err("cuDeviceGetAttribute failed", e))
    }

    /// A new non-blocking stream.
    pub fn new_stream(&self) -> Result<Stream> {
        let inner = self
            .ctx
            .new_stream()
            .map_err(|e| driver_err("cannot create a CUDA stream", e))?;
        Ok(Stream { inner })
    }

    /// A new event that records time.
    pub(crate) fn new_event(&self) -> Result<Event> {
        let inner = self
            .ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| driver_err("cannot create a CUDA event", e))?;
        Ok(Event { inner })
    }

    /// Waits for all work on the device.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.ctx
            .synchronize()
            .map_err(|e| driver_err("cuCtxSynchronize failed", e))
    }
}

/// A CUDA stream: work on it runs in order, asynchronously to the host.
#[derive(Clone, Debug)]
pub struct Stream {
    inner: Arc<safe::CudaStream>,
}

impl Stream {
    /// The raw `CUstream` handle, for a backend that enqueues through another library
    /// (TensorRT's `enqueueV3` takes it). The stream stays owned by this value.
    pub fn raw(&self) -> sys::CUstream {
        self.inner.cu_stream()
    }

    /// The cudarc stream (for code inside `cuda/`).
    pub(crate) fn cudarc(&self) -> &Arc<safe::CudaStream> {
        &self.inner
    }

    /// Waits for all work queued on this stream.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.inner
            .synchronize()
            .map_err(|e| driver_err("cuStreamSynchronize failed", e))
    }

    /// Makes work queued on this stream from now on wait until `event` completes (the host
    /// does not wait): how one stream's copy orders another stream's inference.
    pub(crate) fn wait_for(&self, event: &Event) -> Result<()> {
        self.inner
            .wait(&event.inner)
            .map_err(|e| driver_err("cuStreamWaitEvent failed", e))
    }

    /// Starts capturing the work queued on this stream into a graph (nothing runs until the
    /// graph is launched). Relaxed mode: a library may allocate device memory while its work is
    /// captured (ONNX Runtime's arena grows on the captured run); the allocation is not part of
    /// the graph and stays with the library, which runs nothing else while the graph replays.
    pub(crate) fn begin_capture(&self) -> Result<()> {
        self.inner
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
            .map_err(|e| driver_err("cuStreamBeginCapture failed", e))
    }

    /// Ends a capture and instantiates the captured work as a graph that replays on this
    /// stream.
    pub(crate) fn end_capture(&self) -> Result<Graph> {
        let g = self
            .inner
            .end_capture(sys::CUgraphInstantiate_flags(0))
            .map_err(|e| driver_err("cuStreamEndCapture failed", e))?
            .context("the CUDA graph capture recorded no work")?;
        g.upload()
            .map_err(|e| driver_err("cuGraphUpload failed", e))?;
        Ok(Graph { inner: g })
    }
}

/// A captured, instantiated CUDA graph bound to the stream it was captured on.
pub struct Graph {
    inner: safe::CudaGraph,
}

impl Graph {
    /// Replays the graph on its stream.
    pub fn launch(&self) -> Result<()> {
        self.inner
            .launch()
            .map_err(|e| driver_err("cuGraphLaunch failed", e))
    }
}

/// A timing event.
#[derive(Debug)]
pub(crate) struct Event {
    inner: safe::CudaEvent,
}

impl Event {
    /// Records the event on `stream`: it completes when the stream reaches it.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.inner
            .record(&stream.inner)
            .map_err(|e| driver_err("cuEventRecord failed", e))
    }

    /// Waits until the event completed.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.inner
            .synchronize()
            .map_err(|e| driver_err("cuEventSynchronize failed", e))
    }

    /// Milliseconds from `start` to this event, both already complete (a later event on the
    /// same stream was synchronized): no waiting, one driver call.
    pub(crate) fn elapsed_since_completed(&self, start: &Event) -> Result<f64> {
        elapsed_ms(&start.inner, &self.inner)
            .map(f64::from)
            .map_err(|e| driver_err("cuEventElapsedTime failed", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_a_missing_gpu_is_an_error_not_a_panic() {
        // Without a driver: the no-driver message; with one: id 4096 is out of range.
        let err = format!("{:#}", Gpu::open(4096).unwrap_err());
        assert!(
            err.contains("no CUDA driver")
                || err.contains("GPU 4096 is out of range")
                || err.contains("sees no GPU"),
            "{err}"
        );
    }

    #[test]
    fn used_memory_is_total_minus_free() {
        let m = MemInfo {
            free: 30,
            total: 80,
        };
        assert_eq!(m.used(), 50);
    }
}
