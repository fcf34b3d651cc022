//! Device buffers, page-locked (pinned) host buffers and asynchronous copies between them: the
//! types that own a sized allocation, and the only copies that touch one, so the rest of trtkit
//! reaches GPU memory through a buffer it cannot outlive or overrun.

use super::device::{driver_err, Gpu, Stream};
use crate::error::{ErrorKind, TypedError};
use crate::units::bytes;
use anyhow::{bail, Result};
use cudarc::driver::{result, safe, sys};
use std::sync::Arc;

/// Device memory of a fixed size, freed on drop.
#[derive(Debug)]
pub struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    len: usize,
    ctx: Arc<safe::CudaContext>,
}

// SAFETY: the buffer is a plain device address; the driver API may use it from any thread
// once the owning context is bound there, which every method here does.
unsafe impl Send for DeviceBuffer {}
// SAFETY: as above; `&DeviceBuffer` only exposes the address and the length.
unsafe impl Sync for DeviceBuffer {}

fn oom_or(what: &str, asked: usize, gpu: &Gpu, e: result::DriverError) -> anyhow::Error {
    if e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
        let free = gpu.mem_info().map(|m| bytes(m.free)).unwrap_or("?".into());
        let message = format!(
            "out of GPU memory on GPU {}: {what} asked for {} but only {free} is free",
            gpu.id(),
            bytes(asked as u64)
        );
        TypedError::new(ErrorKind::OutOfMemory, message).into()
    } else {
        driver_err(what, e)
    }
}

impl DeviceBuffer {
    /// Allocates `len` bytes (at least one) on `gpu`. Out of memory is an error that says how
    /// much was asked and how much is free.
    pub fn new(gpu: &Gpu, len: usize) -> Result<DeviceBuffer> {
        gpu.bind()?;
        // SAFETY: the context is current; the returned memory is uninitialised device bytes,
        // which trtkit only ever treats as bytes.
        let ptr = unsafe { result::malloc_sync(len.max(1)) }
            .map_err(|e| oom_or("a device buffer", len, gpu, e))?;
        Ok(DeviceBuffer {
            ptr,
            len,
            ctx: gpu.context().clone(),
        })
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The CUDA ordinal of the GPU the buffer lives on.
    pub fn device_id(&self) -> usize {
        self.ctx.ordinal()
    }

    /// The device address (what a kernel or TensorRT's `setTensorAddress` takes), for the
    /// foreign calls that are handed this buffer; valid for `len` bytes while `self` lives.
    pub(crate) fn device_ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// Sets every byte to `value`, in order on `stream`.
    pub(crate) fn fill_async(&self, value: u8, stream: &Stream) -> Result<()> {
        // SAFETY: `ptr` holds `len` bytes owned by this buffer, which outlives the queued
        // work because the harness synchronizes before dropping buffers.
        unsafe { result::memset_d8_async(self.ptr, value, self.len, stream.raw()) }
            .map_err(|e| driver_err("cuMemsetD8Async failed", e))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: `ptr` came from cuMemAlloc and is freed once, here.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

/// Page-locked host memory (fast, asynchronous copies), freed on drop.
#[derive(Debug)]
pub(crate) struct PinnedBuffer {
    ptr: *mut u8,
    len: usize,
    ctx: Arc<safe::CudaContext>,
}

// SAFETY: the memory is owned by this value and only reached through `&self`/`&mut self`.
unsafe impl Send for PinnedBuffer {}
// SAFETY: shared access only reads the bytes.
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    /// Allocates `len` bytes (at least one) of zeroed page-locked host memory.
    pub fn new(gpu: &Gpu, len: usize) -> Result<PinnedBuffer> {
        gpu.bind()?;
        let n = len.max(1);
        // SAFETY: the context is current; flags 0 is a plain portable-less pinned allocation.
        let ptr = unsafe { result::malloc_host(n, 0) }.map_err(|e| {
            if e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
                anyhow::anyhow!("cannot pin {} of host memory", bytes(n as u64))
            } else {
                driver_err("cuMemHostAlloc failed", e)
            }
        })? as *mut u8;
        // SAFETY: `ptr` points at `n` writable bytes just allocated.
        unsafe { std::ptr::write_bytes(ptr, 0, n) };
        Ok(PinnedBuffer {
            ptr,
            len,
            ctx: gpu.context().clone(),
        })
    }

    /// The bytes (do not read while a copy into them is in flight).
    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` holds `len` initialised bytes owned by this value.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes, writable.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl PinnedBuffer {
    /// The bytes as float32 values (a trailing partial value is left out); for the image
    /// loader to decode into.
    pub(crate) fn as_f32_mut(&mut self) -> &mut [f32] {
        // SAFETY: cuMemHostAlloc returns page-aligned memory, so `ptr` is aligned for f32; it
        // holds `len` initialised bytes owned by this value, and `&mut self` makes this the only
        // reference. Every bit pattern is a valid f32.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut f32, self.len / 4) }
    }

    /// The bytes as float16 values (a trailing odd byte is left out).
    pub(crate) fn as_f16_mut(&mut self) -> &mut [half::f16] {
        // SAFETY: as in `as_f32_mut`; f16 needs 2-byte alignment and every bit pattern is valid.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut half::f16, self.len / 2) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: `ptr` came from cuMemHostAlloc and is freed once, here.
        let _ = unsafe { result::free_host(self.ptr as *mut _) };
    }
}

/// Copies `src`, ordinary host memory, into `dst` on `stream` and waits until it is done (for
/// backends that take host tensors, where the copy is not what is timed).
pub(crate) fn copy_from_host(src: &[u8], dst: &DeviceBuffer, stream: &Stream) -> Result<()> {
    if src.len() != dst.len {
        bail!(
            "host→device copy of {} bytes into a {} byte buffer",
            src.len(),
            dst.len
        );
    }
    // SAFETY: `dst` holds `len` bytes owned by a live buffer and `src` is borrowed until the
    // stream is synchronized below, so neither is freed or changed while the copy runs.
    unsafe { result::memcpy_htod_async(dst.ptr, src, stream.raw()) }
        .map_err(|e| driver_err("cuMemcpyHtoDAsync failed", e))?;
    stream.synchronize()
}

/// Copies all of `src` into `dst`, ordinary host memory, on `stream` and waits until it is done.
pub(crate) fn copy_to_host(src: &DeviceBuffer, dst: &mut [u8], stream: &Stream) -> Result<()> {
    if src.len != dst.len() {
        bail!(
            "device→host copy of {} bytes into a {} byte buffer",
            src.len,
            dst.len()
        );
    }
    // SAFETY: as in `copy_from_host`: both regions live and are borrowed until the stream is
    // synchronized below.
    unsafe { result::memcpy_dtoh_async(dst, src.ptr, stream.raw()) }
        .map_err(|e| driver_err("cuMemcpyDtoHAsync failed", e))?;
    stream.synchronize()
}

/// Queues a copy of all of `src` into `dst` on `stream`. The caller keeps both alive and
/// `src` unchanged until the stream passed the copy (the harness synchronizes before reuse).
pub(crate) fn copy_h2d_async(
    src: &PinnedBuffer,
    dst: &DeviceBuffer,
    stream: &Stream,
) -> Result<()> {
    if src.len != dst.len {
        bail!(
            "host→device copy of {} bytes into a {} byte buffer",
            src.len,
            dst.len
        );
    }
    // SAFETY: both regions hold `len` bytes and are owned by live values; pinned memory makes
    // the copy truly asynchronous, and the caller keeps them alive until the stream is done.
    unsafe { result::memcpy_htod_async(dst.ptr, src.as_slice(), stream.raw()) }
        .map_err(|e| driver_err("cuMemcpyHtoDAsync failed", e))
}

/// Queues a copy of all of `src` into `dst` on `stream`; same contract as [`copy_h2d_async`].
pub(crate) fn copy_d2h_async(
    src: &DeviceBuffer,
    dst: &mut PinnedBuffer,
    stream: &Stream,
) -> Result<()> {
    if src.len != dst.len {
        bail!(
            "device→host copy of {} bytes into a {} byte buffer",
            src.len,
            dst.len
        );
    }
    // SAFETY: as in `copy_h2d_async`.
    unsafe { result::memcpy_dtoh_async(dst.as_mut_slice(), src.ptr, stream.raw()) }
        .map_err(|e| driver_err("cuMemcpyDtoHAsync failed", e))
}

/// Queues a copy of the first `len` bytes of `src` into the start of `dst` on `stream` (a short
/// batch's rows); same contract as [`copy_h2d_async`].
pub(crate) fn copy_h2d_prefix_async(
    src: &PinnedBuffer,
    len: usize,
    dst: &DeviceBuffer,
    stream: &Stream,
) -> Result<()> {
    if len > src.len || len > dst.len {
        bail!(
            "host→device copy of {len} bytes from a {}-byte buffer into a {}-byte one",
            src.len,
            dst.len
        );
    }
    // SAFETY: as in `copy_h2d_async`; both regions hold at least `len` bytes (checked above).
    unsafe { result::memcpy_htod_async(dst.ptr, &src.as_slice()[..len], stream.raw()) }
        .map_err(|e| driver_err("cuMemcpyHtoDAsync failed", e))
}
