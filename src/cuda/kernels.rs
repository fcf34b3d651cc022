//! Workloads of known cost, compiled at run time with NVRTC, that drive the harness through
//! the enqueue interface: the GPU test suite (`examples/gpu_suite.rs`) measures the harness
//! itself with them. NVRTC is loaded dynamically like the driver; its absence is an error.

use super::device::{driver_err, Gpu, Stream};
use super::enqueue::{GpuEnqueue, IoBindings};
use super::memory::DeviceBuffer;
use crate::tensor::Dim;
use crate::tensor::{ElemType, IoSpec};
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
        // SAFETY: only tries to dlopen libnvrtc under its usual names; loads no symbol.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
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
        let ptr = out.ptr();
        let mut b = stream.cudarc().launch_builder(&self.probe);
        b.arg(&ptr).arg(&cycles);
        // SAFETY: the kernel writes two u64 into `out`, which holds 16 bytes and lives until
        // the stream is synchronized below.
        unsafe { b.launch(LaunchConfig::for_num_elems(1)) }
            .map_err(|e| driver_err("clock probe launch", e))?;
        stream.synchronize()?;
        let mut host = [0u64; 2];
        // SAFETY: copies 16 bytes from `out` into `host`, synchronously.
        unsafe { cudarc::driver::result::memcpy_dtoh_sync(&mut host, ptr) }
            .map_err(|e| driver_err("clock probe copy", e))?;
        if host[1] == 0 {
            bail!("the clock probe measured no time");
        }
        Ok(host[0] as f64 / host[1] as f64)
    }
}

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
        let s = stream.cudarc();
        // SAFETY (all three launches): the arguments match the kernels' signatures in SOURCE;
        // the copy reads and writes `words` u32 inside buffers of at least that size, which
        // the harness keeps alive until the stream is synchronized.
        let launched = match self.work {
            // SAFETY: `empty` takes no arguments.
            Work::Empty => unsafe {
                s.launch_builder(&k.empty)
                    .launch(LaunchConfig::for_num_elems(1))
            },
            // SAFETY: `spin` takes one u64 cycle count, passed by value.
            Work::Spin { cycles } => unsafe {
                s.launch_builder(&k.spin)
                    .arg(&cycles)
                    .launch(LaunchConfig::for_num_elems(1))
            },
            Work::Copy { .. } => {
                let (x, y) = (&io.inputs[0], &io.outputs[0]);
                let words = (x.bytes.min(y.bytes) / 4) as u64;
                let cfg = LaunchConfig {
                    grid_dim: (132 * 8, 1, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                };
                // SAFETY: `copy` takes (src, dst, words); both buffers hold at least `words` u32.
                unsafe {
                    s.launch_builder(&k.copy)
                        .arg(&x.ptr)
                        .arg(&y.ptr)
                        .arg(&words)
                        .launch(cfg)
                }
            }
        };
        launched
            .map(|_| ())
            .map_err(|e| driver_err("kernel launch", e))
    }
}
