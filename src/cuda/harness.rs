//! The timing harness: runs a [`GpuEnqueue`] backend on raw streams and times every iteration
//! with events on the GPU clock.
//!
//! Per iteration, on one stream: event `t0`, host→device copies of every input, event `t1`,
//! the inference, event `t2`, device→host copies of every output, event `t3`. latency-model is
//! `t2 - t1`, latency-all is `t3 - t0`; the host time to queue all of it is measured too.
//! Iterations go round-robin over `--streams K` streams, each with its own buffers and slot
//! (the backend says which stream each slot runs on: ONNX Runtime's sessions are made with
//! theirs); event sets are reused from a small ring per stream so the host queues ahead of the
//! GPU. GPU memory is polled with `cuMemGetInfo` from a side thread every
//! [`MEMORY_POLL_INTERVAL`] while iterations run, and what this process holds from NVML.

use super::device::{Gpu, MemInfo, Stream};
use super::enqueue::{GpuEnqueue, IoBindings, TensorBinding};
use super::memory::{copy_d2h_async, copy_h2d_async, DeviceBuffer, PinnedBuffer};
use crate::data::synthetic::timing_inputs;
use crate::metrics::latency::{throughput, EventTimes, IterationSpans};
use crate::tensor::{HostTensor, IoSpec};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the side thread reads free GPU memory while the harness runs.
pub(crate) const MEMORY_POLL_INTERVAL: Duration = Duration::from_millis(5);

/// The side thread reads this process's memory from NVML every this many polls.
const PROCESS_POLL_EVERY: u64 = 10;

/// Event sets per stream: how far the host may queue ahead of the GPU.
const RING: usize = 4;

/// How much to run: a number of iterations or a wall-clock duration.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Amount {
    /// This many iterations (over all streams together).
    Iterations(u64),
    /// Iterations until this many seconds have passed.
    Seconds(f64),
}

/// What the harness does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HarnessOptions {
    /// Warm-up before measuring (not recorded).
    pub warmup: Amount,
    /// What is measured.
    pub measure: Amount,
    /// Copy inputs in and outputs out every iteration; `false` is `--no-transfers`
    /// (device-resident inputs, compute only).
    pub transfers: bool,
    /// Capture each stream's inference into a CUDA graph once and replay it.
    pub cuda_graph: bool,
    /// Concurrent streams, each with its own buffers and execution slot.
    pub streams: usize,
}

/// GPU memory around a harness run (device-wide figures from `cuMemGetInfo`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MemoryReport {
    /// Before the backend was prepared and buffers allocated.
    pub(crate) before_setup: MemInfo,
    /// After preparation and allocation.
    pub(crate) after_setup: MemInfo,
    /// Highest used bytes seen while iterations ran.
    pub(crate) peak_used: u64,
    /// Highest device memory this process held while iterations ran, as NVML reports it per
    /// process (the VRAM figure users publish); `None` where NVML cannot say.
    #[serde(default)]
    pub process_peak: Option<u64>,
    /// How the peak was observed.
    pub(crate) peak_method: String,
}

/// Everything one harness run measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HarnessReport {
    /// Batch size.
    pub batch: usize,
    /// Every measured iteration, in completion order per stream.
    pub iterations: Vec<IterationSpans>,
    /// Wall time of the measured phase, first enqueue to last completion, in seconds.
    pub wall_s: f64,
    /// Samples processed in the measured phase (iterations × batch).
    pub samples: u64,
    /// Samples per second over the measured wall time.
    pub throughput: f64,
    /// Wall time of the very first inference (queued and waited for on its own, before the
    /// warm-up; where a library compiles or sets up lazily, as TensorRT-RTX does, it happens
    /// here). Not part of any statistic.
    pub first_iteration_ms: f64,
    /// Wall time of the preparation before it, and of what follows it before the warm-up:
    /// `prepare` for the batch and every stream, buffers allocated and filled, the other
    /// streams' first runs and any CUDA graph capture. Not part of any statistic.
    #[serde(default)]
    pub(crate) prepare_ms: f64,
    /// GPU memory.
    pub memory: MemoryReport,
}

/// One stream's share of a run: its device and pinned buffers, their bindings, the CUDA graph
/// captured on it, and the ring of events of the iterations in flight.
struct StreamWork {
    stream: Stream,
    inputs_dev: Vec<Arc<DeviceBuffer>>,
    outputs_dev: Vec<Arc<DeviceBuffer>>,
    inputs_host: Vec<PinnedBuffer>,
    outputs_host: Vec<PinnedBuffer>,
    io: IoBindings,
    graph: Option<super::device::Graph>,
    events: Vec<[super::device::Event; 4]>,
    pending: VecDeque<(usize, f64)>,
    next: usize,
}

/// A device buffer for `spec` (an `input` or `output`, as `role` says) at `batch`, and its
/// binding (name, concrete shape, the buffer).
pub(crate) fn bound_buffer(
    spec: &IoSpec,
    role: &str,
    batch: usize,
    gpu: &Gpu,
) -> Result<(TensorBinding, Arc<DeviceBuffer>)> {
    let shape = spec.concrete_shape(batch)?;
    let bytes = shape.iter().product::<usize>() * spec.elem_type.size();
    let buffer = DeviceBuffer::new(gpu, bytes)
        .with_context(|| format!("{role} '{}' at batch {batch}", spec.name))?;
    let buffer = Arc::new(buffer);
    let binding = TensorBinding::new(spec.name.clone(), shape, buffer.clone());
    Ok((binding, buffer))
}

/// The bytes copied into each input's buffers: [`timing_inputs`], the inputs the CPU
/// measurement feeds too, so both paths run the same data for the same model.
pub(crate) fn input_bytes(inputs: &[IoSpec], batch: usize) -> Result<Vec<Vec<u8>>> {
    Ok(timing_inputs(inputs, batch)?
        .iter()
        .map(HostTensor::to_le_bytes)
        .collect())
}

/// Waits for the last of an iteration's four events (before the copies in, before and after the
/// inference, after the copies out; all on one stream) and reads the times from the first.
fn wait_for_times(ev: &[super::device::Event; 4]) -> Result<EventTimes> {
    // Events on one stream complete in order: once t3 is done, t0..t2 are too.
    ev[3].synchronize()?;
    Ok(EventTimes {
        t0: 0.0,
        t1: ev[1].elapsed_since_completed(&ev[0])?,
        t2: ev[2].elapsed_since_completed(&ev[0])?,
        t3: ev[3].elapsed_since_completed(&ev[0])?,
    })
}

impl StreamWork {
    fn new(
        gpu: &Gpu,
        stream: Stream,
        inputs: &[IoSpec],
        input_data: &[Vec<u8>],
        outputs: &[IoSpec],
        batch: usize,
    ) -> Result<StreamWork> {
        let mut work = StreamWork {
            stream,
            inputs_dev: vec![],
            outputs_dev: vec![],
            inputs_host: vec![],
            outputs_host: vec![],
            io: IoBindings {
                inputs: vec![],
                outputs: vec![],
            },
            graph: None,
            events: vec![],
            pending: VecDeque::new(),
            next: 0,
        };
        for (spec, data) in inputs.iter().zip(input_data) {
            let (binding, dev) = bound_buffer(spec, "input", batch, gpu)?;
            let n = binding.bytes();
            let mut host = PinnedBuffer::new(gpu, n)?;
            if data.len() != n {
                bail!(
                    "input '{}': {} bytes of data for a {n}-byte buffer",
                    spec.name,
                    data.len()
                );
            }
            host.as_mut_slice().copy_from_slice(data);
            work.io.inputs.push(binding);
            work.inputs_dev.push(dev);
            work.inputs_host.push(host);
        }
        for spec in outputs {
            let (binding, dev) = bound_buffer(spec, "output", batch, gpu)?;
            work.outputs_host
                .push(PinnedBuffer::new(gpu, binding.bytes())?);
            work.io.outputs.push(binding);
            work.outputs_dev.push(dev);
        }
        for _ in 0..RING {
            work.events.push([
                gpu.new_event()?,
                gpu.new_event()?,
                gpu.new_event()?,
                gpu.new_event()?,
            ]);
        }
        // Device-resident inputs for --no-transfers (and a defined state for the first run).
        for (h, d) in work.inputs_host.iter().zip(&work.inputs_dev) {
            copy_h2d_async(h, d, &work.stream)?;
        }
        work.stream.synchronize()?;
        Ok(work)
    }

    /// Queues one iteration on backend slot `index` and remembers its host enqueue time.
    fn enqueue(
        &mut self,
        index: usize,
        backend: &mut dyn GpuEnqueue,
        transfers: bool,
    ) -> Result<()> {
        let slot = self.next;
        let start = Instant::now();
        let ev = &self.events[slot];
        ev[0].record(&self.stream)?;
        if transfers {
            for (h, d) in self.inputs_host.iter().zip(&self.inputs_dev) {
                copy_h2d_async(h, d, &self.stream)?;
            }
        }
        ev[1].record(&self.stream)?;
        match &self.graph {
            Some(g) => g.launch()?,
            None => backend.enqueue(index, &self.stream, &self.io)?,
        }
        ev[2].record(&self.stream)?;
        if transfers {
            for (d, h) in self.outputs_dev.iter().zip(self.outputs_host.iter_mut()) {
                copy_d2h_async(d, h, &self.stream)?;
            }
        }
        ev[3].record(&self.stream)?;
        let host_ms = start.elapsed().as_secs_f64() * 1e3;
        self.pending.push_back((slot, host_ms));
        self.next = (slot + 1) % RING;
        Ok(())
    }

    /// Waits for the oldest pending iteration and returns its spans.
    fn complete_oldest(&mut self, stream_index: usize) -> Result<Option<IterationSpans>> {
        let Some((slot, host_ms)) = self.pending.pop_front() else {
            return Ok(None);
        };
        let times = wait_for_times(&self.events[slot])?;
        IterationSpans::from_events(stream_index, times, host_ms)
            .map(Some)
            .map_err(|e| anyhow::anyhow!(e))
    }
}

/// Polls free memory from a side thread until dropped; keeps the lowest free seen, and the
/// most this process held (NVML's per-process count, where NVML answers).
struct MemoryPoller {
    stop: Arc<AtomicBool>,
    min_free: Arc<AtomicU64>,
    process_peak: Arc<AtomicU64>,
    handle: Option<std::thread::JoinHandle<()>>,
}

/// Device memory this process holds on GPU `index` now, per NVML.
fn process_memory(device: &nvml_wrapper::Device) -> Option<u64> {
    use nvml_wrapper::enums::device::UsedGpuMemory;
    let me = std::process::id();
    let processes = device.running_compute_processes().ok()?;
    processes
        .iter()
        .find(|p| p.pid == me)
        .and_then(|p| match p.used_gpu_memory {
            UsedGpuMemory::Used(b) => Some(b),
            UsedGpuMemory::Unavailable => None,
        })
}

impl MemoryPoller {
    fn start(gpu: &Gpu, start_free: u64) -> MemoryPoller {
        let stop = Arc::new(AtomicBool::new(false));
        let min_free = Arc::new(AtomicU64::new(start_free));
        let process_peak = Arc::new(AtomicU64::new(0));
        let (g, s, m, p) = (
            gpu.clone(),
            stop.clone(),
            min_free.clone(),
            process_peak.clone(),
        );
        let handle = std::thread::spawn(move || {
            // By UUID: under CUDA_VISIBLE_DEVICES, CUDA's ordinal is not NVML's index.
            let device = g.nvml().device().ok();
            // NVML's process list is a heavier call than cuMemGetInfo, and a process's own
            // memory moves slowly once set up: read it every PROCESS_POLL_EVERY-th poll (and
            // on the last).
            for n in 0u64.. {
                if let Ok(info) = g.mem_info() {
                    m.fetch_min(info.free, Ordering::Relaxed);
                }
                let last = s.load(Ordering::Relaxed);
                if n % PROCESS_POLL_EVERY == 0 || last {
                    if let Some(held) = device.as_ref().and_then(process_memory) {
                        p.fetch_max(held, Ordering::Relaxed);
                    }
                }
                if last {
                    break;
                }
                std::thread::sleep(MEMORY_POLL_INTERVAL);
            }
        });
        MemoryPoller {
            stop,
            min_free,
            process_peak,
            handle: Some(handle),
        }
    }

    /// Stops polling: the lowest free memory seen, and the most this process held.
    fn finish(mut self) -> (u64, Option<u64>) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let peak = self.process_peak.load(Ordering::Relaxed);
        (
            self.min_free.load(Ordering::Relaxed),
            (peak > 0).then_some(peak),
        )
    }
}

impl Drop for MemoryPoller {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Runs `amount` of iterations round-robin over the streams; returns the completed spans when
/// `record` is set, and the wall time from the first enqueue to the last completion.
fn run_iterations(
    streams_work: &mut [StreamWork],
    backend: &mut dyn GpuEnqueue,
    amount: Amount,
    transfers: bool,
    record: bool,
) -> Result<(Vec<IterationSpans>, f64)> {
    let mut spans = Vec::new();
    let start = Instant::now();
    let mut i: u64 = 0;
    loop {
        let done = match amount {
            Amount::Iterations(n) => i >= n,
            Amount::Seconds(s) => start.elapsed().as_secs_f64() >= s,
        };
        if done {
            break;
        }
        let k = (i % streams_work.len() as u64) as usize;
        let work = &mut streams_work[k];
        if work.pending.len() == RING {
            if let Some(s) = work.complete_oldest(k)? {
                if record {
                    spans.push(s);
                }
            }
        }
        work.enqueue(k, backend, transfers)?;
        i += 1;
    }
    for (k, work) in streams_work.iter_mut().enumerate() {
        while let Some(s) = work.complete_oldest(k)? {
            if record {
                spans.push(s);
            }
        }
    }
    Ok((spans, start.elapsed().as_secs_f64()))
}

/// One plain run per stream, each waited for: some libraries (TensorRT-RTX among them) compile
/// kernels or set up lazily on the first enqueue, which must neither count in the statistics nor
/// end up inside a CUDA graph. Returns the first stream's wall time, milliseconds.
fn first_runs(streams_work: &mut [StreamWork], backend: &mut dyn GpuEnqueue) -> Result<f64> {
    let mut first_iteration_ms = 0.0;
    for (k, work) in streams_work.iter_mut().enumerate() {
        let start = Instant::now();
        backend
            .enqueue(k, &work.stream, &work.io)
            .context("the first inference")?;
        work.stream.synchronize()?;
        if k == 0 {
            first_iteration_ms = start.elapsed().as_secs_f64() * 1e3;
        }
    }
    Ok(first_iteration_ms)
}

/// Prepares `backend` for `batch`, allocates every buffer, warms up and measures.
pub fn run(
    gpu: &Gpu,
    backend: &mut dyn GpuEnqueue,
    inputs: &[IoSpec],
    outputs: &[IoSpec],
    batch: usize,
    options: &HarnessOptions,
) -> Result<HarnessReport> {
    if options.streams == 0 {
        bail!("the harness needs at least one stream");
    }
    if let Amount::Iterations(0) = options.measure {
        bail!("the harness needs at least one measured iteration");
    }
    gpu.bind()?;
    let before_setup = gpu.mem_info()?;
    let prepare_start = Instant::now();
    let streams = backend
        .prepare(gpu, batch, options.streams)
        .with_context(|| format!("batch {batch}"))?;
    if streams.len() != options.streams {
        bail!(
            "the backend prepared {} streams for {} slots",
            streams.len(),
            options.streams
        );
    }
    let input_data = input_bytes(inputs, batch)?;
    let mut streams_work = streams
        .into_iter()
        .map(|stream| StreamWork::new(gpu, stream, inputs, &input_data, outputs, batch))
        .collect::<Result<Vec<_>>>()?;
    let first_iteration_ms = first_runs(&mut streams_work, backend)?;
    if options.cuda_graph {
        for (k, work) in streams_work.iter_mut().enumerate() {
            work.stream.begin_capture()?;
            let queued = backend.enqueue(k, &work.stream, &work.io);
            let graph = work.stream.end_capture();
            queued.context("queueing the inference during CUDA graph capture")?;
            work.graph = Some(graph.context("capturing the inference into a CUDA graph")?);
        }
    }
    gpu.synchronize()?;
    let prepare_ms = (prepare_start.elapsed().as_secs_f64() * 1e3 - first_iteration_ms).max(0.0);
    let after_setup = gpu.mem_info()?;
    let poller = MemoryPoller::start(gpu, after_setup.free);
    let outcome = (|| {
        run_iterations(
            &mut streams_work,
            backend,
            options.warmup,
            options.transfers,
            false,
        )?;
        run_iterations(
            &mut streams_work,
            backend,
            options.measure,
            options.transfers,
            true,
        )
    })();
    let (min_free, process_peak) = poller.finish();
    let (iterations, wall_s) = outcome?;
    gpu.synchronize()?;
    let samples = iterations.len() as u64 * batch as u64;
    Ok(HarnessReport {
        batch,
        throughput: throughput(samples, wall_s),
        iterations,
        wall_s,
        samples,
        first_iteration_ms,
        prepare_ms,
        memory: MemoryReport {
            before_setup,
            after_setup,
            peak_used: after_setup.total.saturating_sub(min_free),
            process_peak,
            peak_method: format!(
                "cuMemGetInfo (device-wide) every {} ms and NVML's per-process count every {} ms, from a side thread",
                MEMORY_POLL_INTERVAL.as_millis(),
                MEMORY_POLL_INTERVAL.as_millis() as u64 * PROCESS_POLL_EVERY
            ),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{Dim, ElemType, TensorData};

    fn spec(elem_type: ElemType) -> IoSpec {
        IoSpec {
            name: "x".into(),
            elem_type,
            dims: vec![Dim::Symbol("N".into()), Dim::Fixed(3), Dim::Fixed(5)],
        }
    }

    #[test]
    fn a_float16_input_is_filled_with_the_float32_timing_values_in_two_bytes_each() {
        let narrow = input_bytes(&[spec(ElemType::F16)], 2).unwrap();
        let wide = input_bytes(&[spec(ElemType::F32)], 2).unwrap();
        // Exactly the device buffer's size: two bytes a value, not four.
        assert_eq!(narrow[0].len(), 2 * 3 * 5 * 2);
        assert_eq!(wide[0].len(), 2 * 3 * 5 * 4);
        let narrow = TensorData::from_le_bytes(ElemType::F16, &narrow[0]).to_f64();
        let wide = TensorData::from_le_bytes(ElemType::F32, &wide[0]).to_f64();
        assert!(narrow.iter().all(|v| (0.0..1.0).contains(v)), "{narrow:?}");
        for (n, w) in narrow.iter().zip(&wide) {
            assert!((n - w).abs() <= 1e-3, "float16 {n} for float32 {w}");
        }
        assert!(narrow.iter().any(|&v| v > 0.0), "not all zeros");
    }
}
