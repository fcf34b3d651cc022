//! The test kernels' CUDA source, compiled with NVRTC, and their launches: the one place their
//! argument lists meet the kernels' signatures, so every launch here is sound for any caller.

use super::device::{driver_err, Gpu, Stream};
use super::memory::{copy_to_host, DeviceBuffer};
use super::sys::nvrtc_present;
use anyhow::{bail, Result};
use cudarc::driver::{safe, LaunchConfig, PushKernelArg};
use std::sync::Arc;

const SOURCE: &str = r#"
extern "C" __global__ void trtkit_empty() {}

extern "C" __global__ void trtkit_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}

extern "C" __global__ void trtkit_copy(const unsigned int* __restrict__ src,
                                       unsigned int* __restrict__ dst,
                                       unsigned long long words) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < words; i += stride) {
        dst[i] = src[i];
    }
}

extern "C" __global__ void trtkit_clock_probe(unsigned long long* out, long long cycles) {
    unsigned long long t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    long long c0 = clock64();
    while (clock64() - c0 < cycles) {}
    long long c1 = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    out[0] = (unsigned long long)(c1 - c0);
    out[1] = t1 - t0;
}
"#;

/// The compiled test kernels, loaded into one GPU's context.
pub struct Kernels {
    empty: safe::CudaFunction,
    spin: safe::CudaFunction,
    copy: safe::CudaFunction,
    probe: safe::CudaFunction,
    gpu: Gpu,
}

impl Kernels {
    /// Compiles the kernels with NVRTC and loads them on `gpu`.
    pub fn compile(gpu: &Gpu) -> Result<Arc<Kernels>> {
        if !nvrtc_present() {
            bail!("NVRTC (libnvrtc.so) could not be loaded; add the CUDA toolkit's lib folder to LD_LIBRARY_PATH");
        }
        let ptx = std::panic::catch_unwind(|| cudarc::nvrtc::compile_ptx(SOURCE))
            .map_err(|_| anyhow::anyhow!("NVRTC lacks a function trtkit needs"))?
            .map_err(|e| anyhow::anyhow!("NVRTC could not compile the test kernels: {e:?}"))?;
        let module = gpu
            .context()
            .load_module(ptx)
            .map_err(|e| driver_err("cuModuleLoadData failed", e))?;
        let f = |name: &str| {
            module
                .load_function(name)
                .map_err(|e| driver_err(&format!("kernel {name}"), e))
        };
        Ok(Arc::new(Kernels {
            empty: f("trtkit_empty")?,
            spin: f("trtkit_spin")?,
            copy: f("trtkit_copy")?,
            probe: f("trtkit_clock_probe")?,
            gpu: gpu.clone(),
        }))
    }

    /// Measures the SM clock in cycles per nanosecond: one thread spins `cycles` clock ticks
    /// and reads `%globaltimer` (nanoseconds) around the spin.
    pub fn measure_clock_ghz(&self, stream: &Stream, cycles: i64) -> Result<f64> {
        let out = DeviceBuffer::new(&self.gpu, 16)?;
        let ptr = out.device_ptr();
        let mut b = stream.cudarc().launch_builder(&self.probe);
        b.arg(&ptr).arg(&cycles);
        // SAFETY: `trtkit_clock_probe` takes (u64*, i64) and writes two u64 into `out`, which
        // holds 16 bytes and lives until the copy below has synchronized the stream.
        unsafe { b.launch(LaunchConfig::for_num_elems(1)) }
            .map_err(|e| driver_err("clock probe launch", e))?;
        let mut host = [0u8; 16];
        copy_to_host(&out, &mut host, stream).map_err(|e| e.context("clock probe copy"))?;
        let word = |i: usize| u64::from_ne_bytes(host[i * 8..i * 8 + 8].try_into().unwrap());
        let (ticks, nanos) = (word(0), word(1));
        if nanos == 0 {
            bail!("the clock probe measured no time");
        }
        Ok(ticks as f64 / nanos as f64)
    }

    /// Queues one empty kernel on `stream`.
    pub(super) fn launch_empty(&self, stream: &Stream) -> Result<()> {
        let s = stream.cudarc();
        // SAFETY: `trtkit_empty` takes no arguments and touches no memory.
        unsafe {
            s.launch_builder(&self.empty)
                .launch(LaunchConfig::for_num_elems(1))
        }
        .map(|_| ())
        .map_err(|e| driver_err("kernel launch", e))
    }

    /// Queues one thread spinning `cycles` SM clock cycles on `stream`.
    pub(super) fn launch_spin(&self, stream: &Stream, cycles: i64) -> Result<()> {
        let s = stream.cudarc();
        // SAFETY: `trtkit_spin` takes one i64 by value and touches no memory.
        unsafe {
            s.launch_builder(&self.spin)
                .arg(&cycles)
                .launch(LaunchConfig::for_num_elems(1))
        }
        .map(|_| ())
        .map_err(|e| driver_err("kernel launch", e))
    }

    /// Queues a copy of the first `min(src, dst)` bytes (whole 32-bit words) of `src` into
    /// `dst` on `stream`. Both buffers must outlive the queued work (the harness synchronizes
    /// before dropping them).
    pub(super) fn launch_copy(
        &self,
        stream: &Stream,
        src: &DeviceBuffer,
        dst: &DeviceBuffer,
    ) -> Result<()> {
        let words = (src.len().min(dst.len()) / 4) as u64;
        let (x, y) = (src.device_ptr(), dst.device_ptr());
        let cfg = LaunchConfig {
            grid_dim: (132 * 8, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let s = stream.cudarc();
        // SAFETY: `trtkit_copy` takes (const u32*, u32*, u64) and reads and writes `words` u32,
        // which both buffers hold (`words` is the smaller length over 4); the buffers are
        // borrowed live allocations that the caller keeps until the stream passed the copy.
        unsafe {
            s.launch_builder(&self.copy)
                .arg(&x)
                .arg(&y)
                .arg(&words)
                .launch(cfg)
        }
        .map(|_| ())
        .map_err(|e| driver_err("kernel launch", e))
    }
}
