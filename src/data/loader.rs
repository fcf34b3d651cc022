//! The parallel loader: reads, decodes and preprocesses images on rayon's pool, in dataset
//! order, straight into a small ring of reusable batch buffers that the backend reads as they
//! are (host vectors for CPU backends, page-locked memory for GPU ones). A full buffer goes to
//! the consumer; when the consumer drops it (or gives it back), it returns to the ring. No batch
//! is allocated or copied after the ring is made, and memory stays bounded by the ring,
//! whatever the dataset's size. An image that cannot be read or decoded is reported and skipped;
//! the run goes on.

use super::dataset::Sample;
use super::preprocess::Preprocess;
use crate::tensor::{ElemType, TensorData};
use anyhow::{bail, Context, Result};
use half::f16;
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) use super::walk::Failure;

/// A batch buffer's values (or one row of them), as the element type the model reads.
pub enum ValuesMut<'a> {
    /// float32 values.
    F32(&'a mut [f32]),
    /// float16 values (converted from float32 on the loader's threads).
    F16(&'a mut [f16]),
}

impl ValuesMut<'_> {
    fn len(&self) -> usize {
        match self {
            ValuesMut::F32(v) => v.len(),
            ValuesMut::F16(v) => v.len(),
        }
    }
}

/// Memory one batch is decoded into: a buffer of `batch × elements` values that the loader
/// fills row by row and the backend reads where it lies.
pub trait BatchMemory: Send + 'static {
    /// Every value of the buffer.
    fn values_mut(&mut self) -> ValuesMut<'_>;
}

/// A batch buffer in ordinary host memory, for backends that take host tensors.
#[derive(Debug)]
pub(crate) struct HostBatch {
    data: TensorData,
}

impl HostBatch {
    /// A zeroed buffer of `len` values of `elem` (float32 or float16).
    pub fn new(elem: ElemType, len: usize) -> Result<HostBatch> {
        let data = match elem {
            ElemType::F32 => TensorData::F32(vec![0.0; len]),
            ElemType::F16 => TensorData::F16(vec![f16::ZERO; len]),
            other => bail!("images load as float32 or float16, not {other}"),
        };
        Ok(HostBatch { data })
    }

    /// The values (the first rows hold the batch's images).
    pub fn data(&self) -> &TensorData {
        &self.data
    }

    /// The first `len` values, to move into a host tensor without a copy: the buffer keeps its
    /// allocation, and [`HostBatch::from_data`] takes the values back.
    pub(crate) fn into_values(self, len: usize) -> TensorData {
        let mut data = self.data;
        match &mut data {
            TensorData::F32(v) => v.truncate(len),
            TensorData::F16(v) => v.truncate(len),
            _ => {}
        }
        data
    }

    /// A buffer made of values that came from [`HostBatch::into_values`]; its length is set back
    /// to `len` (a short batch may have been cut), without reallocating.
    pub(crate) fn from_data(mut data: TensorData, len: usize) -> Result<HostBatch> {
        match &mut data {
            TensorData::F32(v) => v.resize(len, 0.0),
            TensorData::F16(v) => v.resize(len, f16::ZERO),
            other => bail!(
                "a batch buffer holds float32 or float16, not {}",
                other.elem_type()
            ),
        }
        Ok(HostBatch { data })
    }
}

impl BatchMemory for HostBatch {
    fn values_mut(&mut self) -> ValuesMut<'_> {
        match &mut self.data {
            TensorData::F16(v) => ValuesMut::F16(v),
            TensorData::F32(v) => ValuesMut::F32(v),
            // `new` and `from_data` only make float32 and float16 buffers.
            _ => ValuesMut::F32(&mut []),
        }
    }
}

/// What the loader did, on its own threads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoaderStats {
    /// Threads decoding (rayon's pool).
    pub threads: usize,
    /// Images read, decoded and preprocessed (skipped ones included).
    pub images: u64,
    /// Seconds the pool spent on them.
    pub(crate) busy_s: f64,
    /// Seconds the loader waited for the consumer to give a buffer back.
    pub(crate) waited_for_buffers_s: f64,
    /// Images per second while the pool was busy: what the disk and decoder can give.
    pub images_per_s: f64,
}

/// One batch of preprocessed images in a ring buffer. Dropping it gives the buffer back to
/// the loader.
pub struct Loaded<M: BatchMemory> {
    /// The samples whose images fill the first rows, in order.
    pub samples: Vec<Sample>,
    /// Images of this batch's share of the dataset that were skipped.
    pub failures: Vec<Failure>,
    memory: Option<M>,
    home: Sender<M>,
}

impl<M: BatchMemory> Loaded<M> {
    /// The buffer (the first `samples.len()` rows hold the images).
    pub fn memory(&self) -> &M {
        self.memory
            .as_ref()
            .expect("a loaded batch holds its buffer until taken")
    }

    /// Takes the buffer out (to move it into a tensor); [`Loaded::put_back`] returns it. A
    /// buffer taken and never put back leaves the ring one buffer smaller.
    pub(crate) fn take_memory(&mut self) -> M {
        self.memory
            .take()
            .expect("a loaded batch's buffer is taken once")
    }

    /// Puts the buffer back, so that dropping the batch returns it to the ring.
    pub(crate) fn put_back(&mut self, memory: M) {
        self.memory = Some(memory);
    }
}

impl<M: BatchMemory> Drop for Loaded<M> {
    fn drop(&mut self) {
        if let Some(m) = self.memory.take() {
            let _ = self.home.send(m); // the loader may be gone already
        }
    }
}

/// Reads, decodes and preprocesses one image into `out`.
pub fn load_one(path: &std::path::Path, pre: &Preprocess, out: &mut [f32]) -> Result<()> {
    let bytes = std::fs::read(path).context("cannot read the file")?;
    pre.apply_encoded(&bytes, out)
}

thread_local! {
    /// Float32 scratch of a pool thread, for images that land in a float16 buffer.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Loads one image into its row of a batch buffer (float16 rows through a float32 scratch).
fn load_row(path: &std::path::Path, pre: &Preprocess, row: ValuesMut) -> Result<()> {
    match row {
        ValuesMut::F32(out) => load_one(path, pre, out),
        ValuesMut::F16(out) => SCRATCH.with(|s| {
            let mut scratch = s.borrow_mut();
            scratch.resize(out.len(), 0.0);
            load_one(path, pre, &mut scratch)?;
            out.convert_from_f32_slice(&scratch);
            Ok(())
        }),
    }
}

/// The first `count` rows of `n` values of a buffer.
fn rows_of(values: ValuesMut<'_>, n: usize, count: usize) -> Vec<ValuesMut<'_>> {
    match values {
        ValuesMut::F32(v) => v
            .chunks_exact_mut(n)
            .take(count)
            .map(ValuesMut::F32)
            .collect(),
        ValuesMut::F16(v) => v
            .chunks_exact_mut(n)
            .take(count)
            .map(ValuesMut::F16)
            .collect(),
    }
}

/// Moves row `from` to row `to` (rows of `n` values), to close the gap a skipped image left.
fn move_row(values: ValuesMut<'_>, n: usize, from: usize, to: usize) {
    match values {
        ValuesMut::F32(v) => v.copy_within(from * n..(from + 1) * n, to * n),
        ValuesMut::F16(v) => v.copy_within(from * n..(from + 1) * n, to * n),
    }
}

/// Batches decoded together when batches are smaller than the pool: enough images to keep
/// every thread busy twice over.
fn group_batches(batch: usize, threads: usize) -> usize {
    (2 * threads).div_ceil(batch.max(1)).max(1)
}

/// How many buffers a ring needs for `prefetch` ready batches at `batch` images each, over
/// `samples` images: the ready ones, two with the consumer (one running while the next is
/// queued), and those one decoding group fills at once beyond the first; never more than the
/// run has batches (which still covers a whole decoding group, so the loader cannot starve).
pub(crate) fn ring_len(batch: usize, prefetch: usize, samples: usize) -> usize {
    let group = group_batches(batch, rayon::current_num_threads());
    let wanted = prefetch.max(1).saturating_add(2 + group - 1);
    wanted.min(samples.div_ceil(batch.max(1)).max(1))
}

/// What the loader thread shares with the consumer.
struct Shared {
    stop: AtomicBool,
    stats: Mutex<LoaderStats>,
}

/// Yields batches of preprocessed images in ring buffers while the next ones are prepared.
pub struct Loader<M: BatchMemory> {
    rx: Receiver<Loaded<M>>,
    shared: Arc<Shared>,
}

/// The loader thread's side.
struct Worker<M: BatchMemory> {
    samples: Vec<Sample>,
    pre: Preprocess,
    batch: usize,
    free_rx: Receiver<M>,
    home: Sender<M>,
    tx: std::sync::mpsc::SyncSender<Loaded<M>>,
    shared: Arc<Shared>,
}

impl<M: BatchMemory> Worker<M> {
    /// A free buffer, waiting for the consumer to give one back; `None` once the consumer is
    /// gone.
    fn free_buffer(&self) -> Option<M> {
        let start = Instant::now();
        let got = loop {
            if self.shared.stop.load(Ordering::Relaxed) {
                break None;
            }
            match self.free_rx.recv_timeout(Duration::from_millis(50)) {
                Ok(m) => break Some(m),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break None,
            }
        };
        self.shared.stats.lock().unwrap().waited_for_buffers_s += start.elapsed().as_secs_f64();
        got
    }

    fn run(self) {
        let n = self.pre.elements();
        let group = group_batches(self.batch, rayon::current_num_threads());
        for chunk in self.samples.chunks(self.batch * group) {
            let batches: Vec<&[Sample]> = chunk.chunks(self.batch).collect();
            let mut buffers = Vec::with_capacity(batches.len());
            for _ in &batches {
                match self.free_buffer() {
                    Some(m) => buffers.push(m),
                    None => return,
                }
            }
            let start = Instant::now();
            let failed = decode_group(&batches, &mut buffers, &self.pre, n);
            {
                let mut stats = self.shared.stats.lock().unwrap();
                stats.images += chunk.len() as u64;
                stats.busy_s += start.elapsed().as_secs_f64();
            }
            let mut failed = failed.into_iter();
            for (samples, mut memory) in batches.into_iter().zip(buffers) {
                let outcome: Vec<Option<Failure>> = failed.by_ref().take(samples.len()).collect();
                let (samples, failures) = compact(samples, outcome, &mut memory, n);
                let loaded = Loaded {
                    samples,
                    failures,
                    memory: Some(memory),
                    home: self.home.clone(),
                };
                if self.tx.send(loaded).is_err() {
                    return; // the consumer stopped
                }
            }
        }
    }
}

/// The batch of `samples` whose decoding gave `outcome`: the good rows moved up over the
/// skipped ones (only where an image was skipped), and the skipped ones.
fn compact<M: BatchMemory>(
    samples: &[Sample],
    outcome: Vec<Option<Failure>>,
    memory: &mut M,
    n: usize,
) -> (Vec<Sample>, Vec<Failure>) {
    let mut kept = Vec::with_capacity(samples.len());
    let mut failures = Vec::new();
    for (i, (s, f)) in samples.iter().zip(outcome).enumerate() {
        match f {
            Some(f) => failures.push(f),
            None => {
                if kept.len() != i {
                    move_row(memory.values_mut(), n, i, kept.len());
                }
                kept.push(s.clone());
            }
        }
    }
    (kept, failures)
}

/// Decodes every image of `batches` into its row of the matching buffer, in parallel over all
/// of them; the failure of each image in order (`None` where it loaded).
fn decode_group<M: BatchMemory>(
    batches: &[&[Sample]],
    buffers: &mut [M],
    pre: &Preprocess,
    n: usize,
) -> Vec<Option<Failure>> {
    let mut rows: Vec<(ValuesMut, &Sample)> = Vec::new();
    for (samples, memory) in batches.iter().zip(buffers.iter_mut()) {
        let batch_rows = rows_of(memory.values_mut(), n, samples.len());
        rows.extend(batch_rows.into_iter().zip(samples.iter()));
    }
    rows.into_par_iter()
        .map(|(row, s)| {
            load_row(&s.path, pre, row).err().map(|e| Failure {
                path: s.path.clone(),
                reason: format!("{e:#}").replace('\n', " "),
            })
        })
        .collect()
}

impl<M: BatchMemory> Loader<M> {
    /// Starts loading `samples` in batches of `batch_size` into `buffers` (each of at least
    /// `batch_size × pre.elements()` values; [`ring_len`] says how many keep the pool busy).
    /// Decoding runs on rayon's global pool, several batches at a time when batches are smaller
    /// than the pool; at most `buffers.len()` batches exist at once.
    pub fn spawn(
        samples: Vec<Sample>,
        pre: Preprocess,
        batch_size: usize,
        buffers: Vec<M>,
    ) -> Result<Self> {
        let batch = batch_size.max(1);
        if buffers.is_empty() {
            bail!("the loader needs at least one batch buffer");
        }
        let need = batch * pre.elements();
        let (tx, rx) = sync_channel(buffers.len());
        let (home, free_rx) = channel();
        for mut b in buffers {
            let len = b.values_mut().len();
            if len < need {
                bail!("a batch buffer of {len} values for batches of {need}");
            }
            let _ = home.send(b);
        }
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            stats: Mutex::new(LoaderStats {
                threads: rayon::current_num_threads(),
                ..Default::default()
            }),
        });
        let worker = Worker {
            samples,
            pre,
            batch,
            free_rx,
            home,
            tx,
            shared: shared.clone(),
        };
        std::thread::Builder::new()
            .name("trtkit-loader".into())
            .spawn(move || worker.run())
            .context("cannot start the loader thread")?;
        Ok(Loader { rx, shared })
    }

    /// What the loader did so far.
    pub(crate) fn stats(&self) -> LoaderStats {
        let mut s = self.shared.stats.lock().unwrap().clone();
        s.images_per_s = if s.busy_s > 0.0 {
            s.images as f64 / s.busy_s
        } else {
            0.0
        };
        s
    }
}

impl Loader<HostBatch> {
    /// A loader into host buffers of `elem` (float32 or float16), `prefetch` batches ahead. A
    /// batch size above the number of samples makes batches of the samples' number (the buffers
    /// are never larger than the data).
    pub fn host(
        samples: Vec<Sample>,
        pre: Preprocess,
        batch_size: usize,
        prefetch: usize,
        elem: ElemType,
    ) -> Result<Self> {
        let batch_size = batch_size.clamp(1, samples.len().max(1));
        let len = batch_size * pre.elements();
        let buffers = (0..ring_len(batch_size, prefetch, samples.len()))
            .map(|_| HostBatch::new(elem, len))
            .collect::<Result<Vec<_>>>()?;
        Loader::spawn(samples, pre, batch_size, buffers)
    }
}

impl<M: BatchMemory> Iterator for Loader<M> {
    type Item = Loaded<M>;

    fn next(&mut self) -> Option<Loaded<M>> {
        self.rx.recv().ok()
    }
}

impl<M: BatchMemory> Drop for Loader<M> {
    fn drop(&mut self) {
        // The worker sees the flag within one wait, or a closed channel on its next send.
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
