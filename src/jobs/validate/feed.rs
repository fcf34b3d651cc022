//! The batch loops of `validate`: images from the loader's ring straight into the backend, and
//! the outputs to the scorer, with where the time went. Host backends get the ring's buffer
//! moved into their input tensor (no copy); GPU backends get page-locked buffers that the batch
//! feed copies to the device on its own streams, the next batch's copy overlapping the current
//! batch's inference.

use super::scoring::Scorer;
use crate::backend::batch_memory::check_gpu;
use crate::backend::cpu_split::{changes, choose, Choice, Pilot, Stretch};
use crate::backend::Backend;
use crate::cuda::device::Gpu;
use crate::cuda::feed::{BatchFeed, Finished, PinnedBatch};
use crate::data::batch_axis::truncate;
use crate::data::dataset::Sample;
use crate::data::loader::{ring_len, Failure, HostBatch, Loaded, Loader, LoaderStats};
use crate::data::preprocess::Preprocess;
use crate::progress::Progress;
use crate::tensor::{ElemType, HostTensor, IoSpec};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::{Duration, Instant};

/// Where the wall time of a validation went, in seconds. `setup_s` is the time before the first
/// batch (the ring's buffers, a GPU backend's streams and first inference); `wait_images_s` the time the
/// consumer waited for the loader (the disk and the decoder bound the run when it is large);
/// `h2d_s`, `model_s` and `d2h_s` are GPU-clock sums for a GPU backend (`model_s` alone, by the
/// wall clock, for a host one); `scoring_s` is the time spent scoring outputs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeSplit {
    /// Before the first batch: the ring's buffers, a GPU backend's streams and first inference.
    #[serde(default)]
    pub setup_s: f64,
    /// Waiting for the loader to hand over a batch.
    pub wait_images_s: f64,
    /// Host→device copies of the images.
    pub h2d_s: f64,
    /// Inference.
    pub model_s: f64,
    /// Device→host copies of the outputs.
    pub d2h_s: f64,
    /// Scoring the outputs against the ground truth.
    pub scoring_s: f64,
}

/// The model's image input, as the loop feeds it.
pub(crate) struct ImageInput {
    /// The input's spec (its name and element type).
    pub spec: IoSpec,
    /// The dims of one image (C×H×W or H×W×C).
    pub(crate) per_image: Vec<usize>,
}

impl ImageInput {
    fn values(&self) -> usize {
        self.per_image.iter().product()
    }

    fn shape(&self, rows: usize) -> Vec<usize> {
        std::iter::once(rows)
            .chain(self.per_image.iter().copied())
            .collect()
    }
}

/// What one loop is asked to do.
pub(crate) struct Feeding<'a> {
    /// The model file, for error messages.
    pub model: &'a Path,
    /// The samples, in order.
    pub samples: Vec<Sample>,
    /// Their preprocessing.
    pub pre: Preprocess,
    /// Images per batch.
    pub batch: usize,
    /// Batches kept ready ahead of inference.
    pub prefetch: usize,
    /// Batches left out of the latency figures and the steady rate.
    pub warmup: usize,
    /// Advances by images.
    pub progress: &'a dyn Progress,
    /// When the run started: the time to the first batch is its set-up.
    pub started: Instant,
    /// Choose the model's threads after the first stretch (host runs on the CPU only).
    pub retune: Option<Retune<'a>>,
}

/// How a host run on the CPU chooses the model's threads and spinning after its first stretch
/// (see [`crate::backend::cpu_split`]).
pub(crate) struct Retune<'a> {
    /// The model's threads during the first stretch (with ONNX Runtime's default spinning).
    pub threads: usize,
    /// Opens the model again on this many threads, spinning or not.
    pub reopen: &'a dyn Fn(usize, bool) -> Result<Box<dyn Backend>>,
}

/// What a retuned run chose, and the backend opened on it (`None`: the first one kept).
pub(crate) struct Chosen {
    /// The model's threads and spinning, and why.
    pub choice: Choice,
    /// The model opened again as `choice` says; it ran the rest of the batches.
    pub backend: Option<Box<dyn Backend>>,
}

/// What a loop measured.
#[derive(Default)]
pub(crate) struct Measured {
    /// Images skipped by the loader.
    pub failures: Vec<Failure>,
    /// Latency-all per batch after the warm-up, ms.
    pub(crate) lat_all: Vec<f64>,
    /// Latency-model per batch after the warm-up, ms.
    pub(crate) lat_model: Vec<f64>,
    /// Batches run.
    pub batches: usize,
    /// Where the time went.
    pub split: TimeSplit,
    /// Images scored after the warm-up batches, and the seconds they took.
    pub(crate) steady: (u64, f64),
    /// The loader's own figures.
    pub loader: LoaderStats,
    /// The GPU's first inference per slot, before any batch (GPU backends).
    pub(crate) first_inference_ms: Option<f64>,
    /// The model's threads chosen after the first stretch (a retuned host run that got that far).
    pub(crate) chosen: Option<Chosen>,
}

/// The choice after a complete first stretch `stretch` with `remaining` batches left, and the
/// model opened again where it changes anything.
fn retuned(retune: &Retune, stretch: &Stretch, remaining: usize) -> Result<Chosen> {
    let mut choice = choose(stretch, retune.threads, remaining);
    let mut backend = None;
    if changes(&choice, retune.threads) {
        let started = Instant::now();
        backend = Some((retune.reopen)(choice.threads, choice.spinning)?);
        choice.why.push_str(&format!(
            "; opened again in {:.0} ms",
            started.elapsed().as_secs_f64() * 1e3
        ));
    }
    Ok(Chosen { choice, backend })
}

/// Per-batch bookkeeping shared by both loops.
struct Tally<'a> {
    m: Measured,
    warmup: usize,
    steady_from: Option<Instant>,
    progress: &'a dyn Progress,
}

impl<'a> Tally<'a> {
    fn new(warmup: usize, progress: &'a dyn Progress) -> Self {
        Tally {
            m: Measured::default(),
            warmup,
            steady_from: (warmup == 0).then(Instant::now),
            progress,
        }
    }

    fn skipped(&mut self, failures: &[Failure]) {
        for f in failures {
            tracing::warn!("skipped {}: {}", f.path.display(), f.reason);
        }
        self.m.failures.extend(failures.iter().cloned());
        self.progress.advance(failures.len() as u64);
    }

    /// Scores a batch's outputs and counts it.
    fn scored(
        &mut self,
        scorer: &mut dyn Scorer,
        samples: &[Sample],
        outputs: &[HostTensor],
        latency_ms: (f64, f64),
        model: &Path,
    ) -> Result<()> {
        let start = Instant::now();
        scorer
            .score(samples, outputs)
            .with_context(|| model.display().to_string())?;
        self.m.split.scoring_s += start.elapsed().as_secs_f64();
        let index = self.m.batches;
        self.m.batches += 1;
        if index >= self.warmup {
            self.m.lat_all.push(latency_ms.0);
            self.m.lat_model.push(latency_ms.1);
            self.m.steady.0 += samples.len() as u64;
        }
        if index + 1 == self.warmup {
            self.steady_from = Some(Instant::now());
        }
        self.progress.advance(samples.len() as u64);
        self.progress.status(scorer.status());
        Ok(())
    }

    fn finish(mut self, loader: LoaderStats) -> Measured {
        self.m.steady.1 = self.steady_from.map_or(0.0, |t| t.elapsed().as_secs_f64());
        self.m.loader = loader;
        self.m
    }
}

/// The next batch from `loader`, with the time waited for it added to `waited`.
fn next_batch<M: crate::data::loader::BatchMemory>(
    loader: &mut Loader<M>,
    waited: &mut f64,
) -> Option<Loaded<M>> {
    let start = Instant::now();
    let batch = loader.next();
    *waited += start.elapsed().as_secs_f64();
    batch
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs the samples through a backend that takes host tensors: each batch's ring buffer moves
/// into the input tensor and back, uncopied; a short last batch runs as it is where the backend
/// allows, else at the full batch (the rows past the images hold an earlier batch's values, and
/// their outputs are dropped).
pub(crate) fn run_host(
    backend: &mut dyn Backend,
    input: &ImageInput,
    feeding: Feeding,
    scorer: &mut dyn Scorer,
) -> Result<Measured> {
    let full = feeding.batch * input.values();
    let batches = loader_batches(feeding.batch, feeding.samples.len());
    let mut loader = Loader::host(
        feeding.samples,
        feeding.pre,
        feeding.batch,
        feeding.prefetch,
        input.spec.elem_type,
    )?;
    let mut tally = Tally::new(feeding.warmup, feeding.progress);
    tally.m.split.setup_s = feeding.started.elapsed().as_secs_f64();
    let mut pilot = Pilot::default();
    let mut reopened: Option<Box<dyn Backend>> = None;
    let mut waited = 0.0;
    loop {
        let before = waited;
        let Some(mut loaded) = next_batch(&mut loader, &mut waited) else {
            break;
        };
        tally.skipped(&loaded.failures);
        let rows = loaded.samples.len();
        if rows == 0 {
            continue;
        }
        let backend: &mut dyn Backend = match reopened.as_mut() {
            Some(b) => b.as_mut(),
            None => &mut *backend,
        };
        let start = Instant::now();
        let run_rows = if rows < feeding.batch && !backend.runs_short_batch(rows) {
            feeding.batch
        } else {
            rows
        };
        let values = loaded.take_memory().into_values(run_rows * input.values());
        let tensor = HostTensor::new(input.spec.name.clone(), input.shape(run_rows), values)?;
        let ran = backend.run(std::slice::from_ref(&tensor));
        loaded.put_back(HostBatch::from_data(tensor.data, full)?);
        let out = ran.with_context(|| format!("{}: inference failed", feeding.model.display()))?;
        let outputs = if run_rows > rows {
            out.outputs
                .into_iter()
                .map(|t| truncate(t, rows))
                .collect::<Result<Vec<_>>>()?
        } else {
            out.outputs
        };
        let all = ms(start.elapsed());
        tally.m.split.model_s += out.elapsed.as_secs_f64();
        let latency = (all, ms(out.elapsed));
        tally.scored(scorer, &loaded.samples, &outputs, latency, feeding.model)?;
        let measured = pilot.batch(out.elapsed.as_secs_f64(), waited - before);
        if let (Some(stretch), Some(retune)) = (measured, &feeding.retune) {
            let mut chosen = retuned(retune, &stretch, batches.saturating_sub(tally.m.batches))?;
            reopened = chosen.backend.take();
            tally.m.chosen = Some(chosen);
        }
    }
    if let Some(chosen) = tally.m.chosen.as_mut() {
        chosen.backend = reopened;
    }
    tally.m.split.wait_images_s = waited;
    Ok(tally.finish(loader.stats()))
}

/// Batches of `batch` over `samples` images.
fn loader_batches(batch: usize, samples: usize) -> usize {
    samples.div_ceil(batch.max(1))
}

/// Runs the batches through the backend by the fastest path it has: page-locked buffers and the
/// GPU feed where it can queue on a stream, host tensors elsewhere (and where the feed cannot
/// take the model, with a warning saying why).
pub(crate) fn run_batches(
    device_id: Option<usize>,
    backend: &mut dyn Backend,
    input: &ImageInput,
    feeding: Feeding,
    scorer: &mut dyn Scorer,
) -> Result<(Measured, String)> {
    if feeds_gpu(backend) {
        let gpu = Gpu::open(device_id.unwrap_or(0))?;
        // Two streams, each with its batch on the device.
        check_gpu(
            &gpu,
            (backend.inputs(), backend.outputs()),
            feeding.batch,
            2,
        )
        .with_context(|| feeding.model.display().to_string())?;
        // The loader starts first: its first batches decode while the GPU sets up.
        let loader = spawn_pinned_loader(&gpu, input, &feeding)?;
        match prepare_feed(&gpu, backend, input, feeding.batch) {
            Ok(feed) => {
                let path = feed.path_said();
                let measured = run_gpu(feed, loader, backend, feeding, scorer)?;
                return Ok((measured, path));
            }
            Err(e) => {
                drop(loader);
                let why = format!("{e:#}");
                tracing::warn!(
                    "{}: the GPU feed cannot take this model ({why}); running host tensors",
                    feeding.model.display()
                );
                let measured = run_host(backend, input, feeding, scorer)?;
                return Ok((measured, format!("host tensors (GPU feed refused: {why})")));
            }
        }
    }
    Ok((
        run_host(backend, input, feeding, scorer)?,
        "host tensors".into(),
    ))
}

/// Prepares the batch feed of a GPU backend for batches of `batch` (its streams, buffers and a
/// first inference per slot). It fails where the model's outputs are not one row per image
/// at a size known before the run (a detector's own NMS, say): the caller then runs host tensors.
pub(crate) fn prepare_feed(
    gpu: &Gpu,
    backend: &mut dyn Backend,
    input: &ImageInput,
    batch: usize,
) -> Result<BatchFeed> {
    let outputs = backend.outputs().to_vec();
    let enqueue = backend
        .gpu()
        .context("the backend has no GPU side to feed")?;
    BatchFeed::new(gpu, enqueue, &input.spec, &outputs, batch)
}

/// The loader of `feeding`'s samples, decoding into a ring of page-locked buffers on `gpu`.
fn spawn_pinned_loader(
    gpu: &Gpu,
    input: &ImageInput,
    feeding: &Feeding,
) -> Result<Loader<PinnedBatch>> {
    let ring = (0..ring_len(feeding.batch, feeding.prefetch, feeding.samples.len()))
        .map(|_| PinnedBatch::new(gpu, input.spec.elem_type, feeding.batch * input.values()))
        .collect::<Result<Vec<_>>>()?;
    Loader::spawn(
        feeding.samples.clone(),
        feeding.pre.clone(),
        feeding.batch,
        ring,
    )
}

/// Runs the samples through a GPU backend and its prepared `feed`, from `loader` (decoding
/// into page-locked buffers): the feed copies each batch to the device, runs it and copies its
/// outputs back, two batches in flight.
pub(crate) fn run_gpu(
    mut feed: BatchFeed,
    mut loader: Loader<PinnedBatch>,
    backend: &mut dyn Backend,
    feeding: Feeding,
    scorer: &mut dyn Scorer,
) -> Result<Measured> {
    let mut tally = Tally::new(feeding.warmup, feeding.progress);
    tally.m.first_inference_ms = Some(feed.first_inference_ms);
    tally.m.split.setup_s = feeding.started.elapsed().as_secs_f64();
    let mut waited = 0.0;
    let model = feeding.model;
    let mut score = |tally: &mut Tally, done: Finished| -> Result<()> {
        let t = done.times;
        tally.m.split.h2d_s += done.h2d_ms / 1e3;
        tally.m.split.model_s += (t.t2 - t.t1) / 1e3;
        tally.m.split.d2h_s += (t.t3 - t.t2) / 1e3;
        let latency = (t.t3 - t.t0, t.t2 - t.t1);
        tally.scored(scorer, &done.batch.samples, &done.outputs, latency, model)
    };
    while let Some(loaded) = next_batch(&mut loader, &mut waited) {
        tally.skipped(&loaded.failures);
        if loaded.samples.is_empty() {
            continue;
        }
        let enqueue = backend.gpu().context("the backend has no GPU side")?;
        let finished = feed
            .submit(enqueue, loaded)
            .with_context(|| format!("{}: inference failed", model.display()))?;
        if let Some(done) = finished {
            score(&mut tally, done)?;
        }
    }
    while let Some(done) = feed.drain()? {
        score(&mut tally, done)?;
    }
    tally.m.split.wait_images_s = waited;
    Ok(tally.finish(loader.stats()))
}

/// Whether `backend` takes the GPU loop: it can queue on a stream, and its one input is an
/// image of float32 or float16.
pub(crate) fn feeds_gpu(backend: &mut dyn Backend) -> bool {
    let one_float_input =
        matches!(backend.inputs(), [i] if matches!(i.elem_type, ElemType::F32 | ElemType::F16));
    one_float_input && backend.gpu().is_some()
}

#[cfg(test)]
mod tests;
