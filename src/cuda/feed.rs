//! The batch feed: runs loaded image batches through a GPU backend on the harness's own
//! streams. The loader decodes each batch straight into page-locked memory ([`PinnedBatch`]);
//! the feed copies its rows into the input's device buffer on the slot's stream, queues the
//! inference over bound device buffers ([`GpuEnqueue`]), and copies the outputs back, all timed
//! with events as the `run` harness times them. Two slots, each with its own copy stream and
//! buffers, alternate: while one batch computes, the next one's copy is already queued on the
//! other slot's copy stream, so the copy of batch k+1 overlaps the inference of batch k, and the
//! host only waits when it needs a slot back. The inferences run on the streams the backend
//! gives ([`GpuEnqueue::prepare_in_turn`]): one per slot, or one for both where the backend
//! serves both slots from one execution slot (one ONNX Runtime session, so one copy of the
//! weights and one first inference); events order each copy in before its inference and each
//! copy out after it.

use super::device::{Event, Gpu, Stream};
use super::enqueue::{GpuEnqueue, IoBindings};
use super::harness::bound_buffer;
use super::memory::{copy_d2h_async, copy_h2d_prefix_async, DeviceBuffer, PinnedBuffer};
use crate::data::loader::{BatchMemory, Loaded, ValuesMut};
use crate::metrics::latency::EventTimes;
use crate::tensor::{ElemType, HostTensor, IoSpec, TensorData};
use anyhow::{bail, Context, Result};
use std::sync::Arc;
use std::time::Instant;

/// Slots the feed alternates between.
const SLOTS: usize = 2;

/// A batch buffer in page-locked host memory: the loader decodes into it and the feed copies it
/// to the GPU from where it lies.
#[derive(Debug)]
pub(crate) struct PinnedBatch {
    buffer: PinnedBuffer,
    elem: ElemType,
}

impl PinnedBatch {
    /// `values` values of `elem` (float32 or float16) of page-locked memory on `gpu`'s context.
    pub fn new(gpu: &Gpu, elem: ElemType, values: usize) -> Result<PinnedBatch> {
        if !matches!(elem, ElemType::F32 | ElemType::F16) {
            bail!("images load as float32 or float16, not {elem}");
        }
        Ok(PinnedBatch {
            buffer: PinnedBuffer::new(gpu, values * elem.size())?,
            elem,
        })
    }
}

impl BatchMemory for PinnedBatch {
    fn values_mut(&mut self) -> ValuesMut<'_> {
        match self.elem {
            ElemType::F16 => ValuesMut::F16(self.buffer.as_f16_mut()),
            _ => ValuesMut::F32(self.buffer.as_f32_mut()),
        }
    }
}

/// One batch back from the GPU.
pub(crate) struct Finished {
    /// The loaded batch (dropping it gives its buffer back to the loader).
    pub batch: Loaded<PinnedBatch>,
    /// The outputs of the batch's rows, in the backend's output order.
    pub outputs: Vec<HostTensor>,
    /// Event times: t0 before the copy in, t1 when the inference starts (the copy in done and
    /// the inference stream free), t2 after it, t3 after the copies out (milliseconds from t0).
    pub times: EventTimes,
    /// Milliseconds of the copy in alone.
    pub h2d_ms: f64,
}

/// The events of one batch, in the order they complete: before the copy in (on the copy
/// stream), after it, when the inference starts and ends (on the inference stream), after the
/// copies out (on the copy stream again, which waited for the inference).
const BEFORE_COPY: usize = 0;
const COPIED_IN: usize = 1;
const INFERENCE_STARTS: usize = 2;
const INFERENCE_ENDS: usize = 3;
const COPIED_OUT: usize = 4;

/// One slot: its copy stream, the stream its inferences run on, device buffers, page-locked
/// outputs, events and the batch in flight.
struct Slot {
    copies: Stream,
    compute: Stream,
    input: Arc<DeviceBuffer>,
    outputs_dev: Vec<Arc<DeviceBuffer>>,
    outputs_host: Vec<PinnedBuffer>,
    io: IoBindings,
    events: [Event; 5],
    in_flight: Option<Loaded<PinnedBatch>>,
}

/// Runs loaded batches through a GPU backend, two slots overlapped.
pub(crate) struct BatchFeed {
    slots: Vec<Slot>,
    next: usize,
    batch: usize,
    input_elem: ElemType,
    outputs: Vec<IoSpec>,
    /// Milliseconds of the first inference of each slot, queued and waited for on its own
    /// (where a library sets up lazily, it happens here), before any batch is fed.
    pub(crate) first_inference_ms: f64,
    /// Whether both slots' inferences run on one stream (one execution slot of the backend).
    pub(crate) one_inference_stream: bool,
}

impl Slot {
    fn new(
        gpu: &Gpu,
        compute: Stream,
        input: &IoSpec,
        outputs: &[IoSpec],
        batch: usize,
    ) -> Result<Slot> {
        let (input_binding, input_dev) = bound_buffer(input, "input", batch, gpu)?;
        input_dev.fill_async(0, &compute)?;
        let mut slot = Slot {
            copies: gpu.new_stream()?,
            compute,
            input: input_dev,
            outputs_dev: vec![],
            outputs_host: vec![],
            io: IoBindings {
                inputs: vec![input_binding],
                outputs: vec![],
            },
            events: [
                gpu.new_event()?,
                gpu.new_event()?,
                gpu.new_event()?,
                gpu.new_event()?,
                gpu.new_event()?,
            ],
            in_flight: None,
        };
        for spec in outputs {
            let (b, dev) = bound_buffer(spec, "output", batch, gpu)?;
            slot.outputs_host.push(PinnedBuffer::new(gpu, b.bytes())?);
            slot.io.outputs.push(b);
            slot.outputs_dev.push(dev);
        }
        Ok(slot)
    }
}

impl BatchFeed {
    /// Prepares `backend` on `gpu` for batches of `batch` with two slots used in turn,
    /// allocates their buffers and runs one inference on each (waited for, not timed with the
    /// batches). The backend must have one input, `input`, of float32 or float16.
    pub fn new(
        gpu: &Gpu,
        backend: &mut dyn GpuEnqueue,
        input: &IoSpec,
        outputs: &[IoSpec],
        batch: usize,
    ) -> Result<BatchFeed> {
        gpu.bind()?;
        let streams = backend
            .prepare_in_turn(gpu, batch, SLOTS)
            .with_context(|| format!("batch {batch}"))?;
        if streams.len() != SLOTS {
            bail!(
                "the backend prepared {} streams for {SLOTS} slots",
                streams.len()
            );
        }
        let one_inference_stream = streams.iter().all(|s| s.raw() == streams[0].raw());
        let mut slots = streams
            .into_iter()
            .map(|stream| Slot::new(gpu, stream, input, outputs, batch))
            .collect::<Result<Vec<_>>>()?;
        let start = Instant::now();
        let mut each_ms = Vec::with_capacity(SLOTS);
        for (k, slot) in slots.iter_mut().enumerate() {
            let first = Instant::now();
            backend
                .enqueue(k, &slot.compute, &slot.io)
                .context("the first inference")?;
            slot.compute.synchronize()?;
            each_ms.push(format!("{:.0} ms", first.elapsed().as_secs_f64() * 1e3));
        }
        tracing::info!(
            "GPU feed: first inference of each slot {} ({})",
            each_ms.join(", "),
            if one_inference_stream {
                "both on one inference stream"
            } else {
                "an inference stream each"
            }
        );
        Ok(BatchFeed {
            slots,
            next: 0,
            batch,
            input_elem: input.elem_type,
            outputs: outputs.to_vec(),
            first_inference_ms: start.elapsed().as_secs_f64() * 1e3,
            one_inference_stream,
        })
    }

    /// How batches reach the model, for the report.
    pub(crate) fn path_said(&self) -> String {
        if self.one_inference_stream {
            format!("pinned ring → GPU, {SLOTS} copy streams around one inference stream")
        } else {
            format!("pinned ring → GPU, {SLOTS} streams")
        }
    }

    /// Queues `batch` on the next slot: its rows' copy in, the inference and the copies out.
    /// When that slot still holds an earlier batch, waits for it first and returns it.
    pub(crate) fn submit(
        &mut self,
        backend: &mut dyn GpuEnqueue,
        batch: Loaded<PinnedBatch>,
    ) -> Result<Option<Finished>> {
        let rows = batch.samples.len();
        if rows == 0 || rows > self.batch {
            bail!("a batch of {rows} images for a feed of {}", self.batch);
        }
        let index = self.next;
        let finished = self.finish_slot(index)?;
        let per_row = self.slots[index].input.len() / self.batch;
        let slot = &mut self.slots[index];
        if batch.memory().elem != self.input_elem {
            bail!(
                "a {} batch for a {} input",
                batch.memory().elem,
                self.input_elem
            );
        }
        let ev = &slot.events;
        ev[BEFORE_COPY].record(&slot.copies)?;
        copy_h2d_prefix_async(
            &batch.memory().buffer,
            rows * per_row,
            &slot.input,
            &slot.copies,
        )?;
        ev[COPIED_IN].record(&slot.copies)?;
        slot.compute.wait_for(&ev[COPIED_IN])?;
        ev[INFERENCE_STARTS].record(&slot.compute)?;
        backend.enqueue(index, &slot.compute, &slot.io)?;
        ev[INFERENCE_ENDS].record(&slot.compute)?;
        slot.copies.wait_for(&ev[INFERENCE_ENDS])?;
        for (d, h) in slot.outputs_dev.iter().zip(slot.outputs_host.iter_mut()) {
            copy_d2h_async(d, h, &slot.copies)?;
        }
        ev[COPIED_OUT].record(&slot.copies)?;
        slot.in_flight = Some(batch);
        self.next = (index + 1) % SLOTS;
        Ok(finished)
    }

    /// Waits for the oldest batch still on the GPU and returns it; `None` when none is left.
    pub(crate) fn drain(&mut self) -> Result<Option<Finished>> {
        for _ in 0..SLOTS {
            let index = self.next;
            self.next = (index + 1) % SLOTS;
            if let Some(done) = self.finish_slot(index)? {
                return Ok(Some(done));
            }
        }
        Ok(None)
    }

    /// Waits for slot `index`'s batch, if it has one, and reads its outputs.
    fn finish_slot(&mut self, index: usize) -> Result<Option<Finished>> {
        let slot = &mut self.slots[index];
        let Some(batch) = slot.in_flight.take() else {
            return Ok(None);
        };
        let ev = &slot.events;
        // The last copy out waited for the inference, which waited for the copy in: once it
        // is done, every event of the batch is.
        ev[COPIED_OUT].synchronize()?;
        let since_start = |k: usize| ev[k].elapsed_since_completed(&ev[BEFORE_COPY]);
        let times = EventTimes {
            t0: 0.0,
            t1: since_start(INFERENCE_STARTS)?,
            t2: since_start(INFERENCE_ENDS)?,
            t3: since_start(COPIED_OUT)?,
        };
        let h2d_ms = since_start(COPIED_IN)?;
        let rows = batch.samples.len();
        let outputs = self
            .outputs
            .iter()
            .zip(&slot.io.outputs)
            .zip(&slot.outputs_host)
            .map(|((spec, b), host)| {
                let mut shape = b.shape.clone();
                let bytes = b.bytes() / self.batch * rows;
                if let Some(n) = shape.first_mut() {
                    *n = rows;
                }
                let data = TensorData::from_le_bytes(spec.elem_type, &host.as_slice()[..bytes]);
                HostTensor::new(spec.name.clone(), shape, data)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(Finished {
            batch,
            outputs,
            times,
            h2d_ms,
        }))
    }
}

impl Drop for BatchFeed {
    fn drop(&mut self) {
        // Buffers a batch still in flight reads or writes must outlive its copies.
        for slot in &self.slots {
            let _ = slot.copies.synchronize();
            let _ = slot.compute.synchronize();
        }
    }
}
