//! The calibration run: the model with its quantized tensors exposed runs batch after batch on
//! a reference backend, and every captured tensor is folded into its histogram where the
//! backend left it (no copy), inside the backend's own workers where it has them (on tract's
//! CPU plan right after the node that made it, while it is still in that core's cache); then
//! the range search runs per tensor in parallel.

use super::histogram::{Counter, Histogram, DEFAULT_BINS};
use super::range::Algorithm;
use super::sample_source::CalibrationBatches;
use crate::backend::batch_runner::run_visit_short;
use crate::backend::cpu_split::{beside_loader, changes, choose, reported, CpuSplit, Pilot};
use crate::backend::open::open_capture;
use crate::backend::select::{BackendKind, BackendOptions};
use crate::backend::Device;
use crate::onnx::rewrite::capture::{Capture, Source};
use crate::onnx::rewrite::pass::{Pass, PassReport};
use crate::onnx::rewrite::plan::QuantPlan;
use crate::onnx::OnnxModel;
use crate::tensor::{HostTensor, TensorData};
use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Histograms of every quantized tensor and where the time went.
#[derive(Debug)]
pub struct Collected {
    /// `(tensor, histogram of |x|)`, in the plan's order.
    pub histograms: Vec<(String, Histogram)>,
    /// Batches run.
    pub batches: usize,
    /// The backend that ran the model.
    pub backend: String,
    /// Time inside the backend's runs, histograms of the captured outputs included.
    pub(crate) model_time: Duration,
    /// Thread-time spent counting histograms (summed over threads; overlaps the runs).
    pub(crate) histogram_time: Duration,
    /// Wall time of the whole run over the batches.
    pub(crate) wall_time: Duration,
    /// How the image loader and the model shared the cores (images on a CPU backend only).
    pub cpu_split: Option<CpuSplit>,
}

fn f32_data<'a>(t: &'a HostTensor, name: &str) -> Result<&'a [f32]> {
    match &t.data {
        TensorData::F32(v) => Ok(v),
        other => bail!(
            "tensor '{name}' is {}, not float32; it cannot be calibrated",
            other.elem_type()
        ),
    }
}

/// Histograms filled from several threads. Each tensor has one [`Counter`] per core (up to
/// [`MAX_STRIPES`], each made when first used): a thread counts into the first of them it
/// finds free, so the backend's workers, which reach the same tensors at about the same time,
/// seldom wait for each other, and a sample's piece is counted where it was computed with no
/// allocation or merge per piece. The counters of a tensor are merged once, at the end.
struct SharedHistograms {
    counters: Vec<Vec<Mutex<Option<Counter>>>>,
    /// Threads inside [`SharedHistograms::add`] now, and the most seen at once.
    active: AtomicUsize,
    most_active: AtomicUsize,
    busy_ns: AtomicU64,
}

/// The first counter a thread tries (threads are numbered as they first count).
fn first_stripe(stripes: usize) -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    SLOT.with(|s| *s) % stripes
}

impl SharedHistograms {
    fn new(n: usize) -> Self {
        let stripes = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(MAX_STRIPES);
        SharedHistograms {
            counters: (0..n)
                .map(|_| (0..stripes).map(|_| Mutex::new(None)).collect())
                .collect(),
            active: AtomicUsize::new(0),
            most_active: AtomicUsize::new(0),
            busy_ns: Default::default(),
        }
    }

    /// Counts a backend output's `values` into tensor `i`'s histogram, on the calling thread
    /// once several threads have been seen counting at the same time (the backend's workers
    /// then keep the cores busy, and the piece is still in this core's cache); until then a
    /// large tensor is split across rayon's threads.
    fn add(&self, i: usize, values: &[f32]) -> Result<()> {
        let now = self.active.fetch_add(1, Ordering::AcqRel) + 1;
        let most = self.most_active.fetch_max(now, Ordering::AcqRel).max(now);
        let counted = self.count(i, values, most == 1);
        self.active.fetch_sub(1, Ordering::AcqRel);
        counted
    }

    /// Counts a graph input's `values` (between the runs, when nothing else is counting: a
    /// large one is split across rayon's threads).
    fn add_input(&self, i: usize, values: &[f32]) -> Result<()> {
        self.count(i, values, true)
    }

    /// Counts `values` into the first free counter of tensor `i` (split across rayon's
    /// threads first when `may_split` and they are many), timing it.
    fn count(&self, i: usize, values: &[f32], may_split: bool) -> Result<()> {
        let t0 = Instant::now();
        let split = (may_split && values.len() > SPLIT_ABOVE)
            .then(|| Histogram::from_values(DEFAULT_BINS, values));
        let stripes = &self.counters[i];
        let first = first_stripe(stripes.len());
        let free = (0..stripes.len())
            .map(|k| &stripes[(first + k) % stripes.len()])
            .find_map(|m| m.try_lock().ok());
        let counted = match free {
            Some(c) => Ok(c),
            None => stripes[first].lock(),
        }
        .map(|mut c| {
            let c = c.get_or_insert_with(|| Counter::new(DEFAULT_BINS));
            match split {
                Some(h) => c.merge(h),
                None => c.add(values),
            }
        });
        counted.map_err(|_| anyhow::anyhow!("a histogram thread panicked"))?;
        self.busy_ns
            .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn into_parts(self) -> Result<(Vec<Histogram>, Duration)> {
        let busy = Duration::from_nanos(self.busy_ns.into_inner());
        let hists = self
            .counters
            .into_iter()
            .map(|stripes| {
                let mut whole = Histogram::new(DEFAULT_BINS);
                for m in stripes {
                    let c = m
                        .into_inner()
                        .map_err(|_| anyhow::anyhow!("a histogram thread panicked"))?;
                    if let Some(c) = c {
                        whole.merge_owned(c.finish());
                    }
                }
                Ok(whole)
            })
            .collect::<Result<_>>()?;
        Ok((hists, busy))
    }
}

/// Values above which a tensor visited by one thread alone is histogrammed on rayon's threads.
const SPLIT_ABOVE: usize = 1 << 18;

/// Counters per tensor at most (each up to 48 KB): on a many-core machine a model with
/// hundreds of quantized tensors would otherwise hold gigabytes of them.
const MAX_STRIPES: usize = 16;

/// Runs `model` over `batches` on the backend `options` describes and histograms the plan's
/// activations (of every sample: a short last batch is padded where the backend needs its
/// full batch, and the padding is not counted).
///
/// `on_batch` is called after each batch (for a progress bar).
pub fn collect(
    model: &OnnxModel,
    plan: &QuantPlan,
    batches: &mut dyn CalibrationBatches,
    options: &BackendOptions,
    on_batch: &(dyn Fn() + Sync),
) -> Result<Collected> {
    let names = plan.activation_names();
    let capture = Capture {
        names: names.clone(),
    };
    let (capture_model, report) = capture.run(model.clone())?;
    let PassReport::Capture { sources } = report else {
        bail!("the capture pass reported no tensor sources");
    };
    // The captured tensors come after the model's own outputs, and are only visited.
    let given = options.threads;
    let beside = batches.decodes_images() && options.device == Device::Cpu;
    let options = &mut beside_loader(options, beside);
    let retune = beside && given.is_none();
    let outputs = model.graph().output.len();
    let mut backend = open_capture(&capture_model, options, outputs)?;
    // Which histogram each backend output feeds, and which histograms read a graph input
    // (found in each batch by name).
    let mut of_output: Vec<Vec<usize>> = vec![vec![]; backend.outputs().len()];
    let mut of_input = vec![];
    for (h, (_, src)) in sources.iter().enumerate() {
        match src {
            Source::Input(_) => of_input.push(h),
            Source::Output(j) => of_output[*j].push(h),
        }
    }
    let shared = SharedHistograms::new(names.len());
    let visit = |j: usize, values: &[f32]| -> Result<()> {
        of_output[j].iter().try_for_each(|&h| shared.add(h, values))
    };
    let started = Instant::now();
    let mut model_time = Duration::ZERO;
    let mut count = 0usize;
    let (mut pilot, mut chosen) = (Pilot::default(), None);
    let total = batches.batch_count();
    let mut waited = Instant::now();
    for (i, input) in std::iter::from_fn(|| batches.next()).enumerate() {
        let wait = waited.elapsed();
        let inputs = input.with_context(|| format!("calibration batch {i}"))?;
        let ran = run_visit_short(backend.as_mut(), &inputs, options.batch, &visit)
            .with_context(|| format!("calibration batch {i}"))?;
        model_time += ran;
        if let Some(stretch) = pilot.batch(ran.as_secs_f64(), wait.as_secs_f64()) {
            let threads = options.threads.unwrap_or(1);
            let choice = choose(&stretch, threads, total.saturating_sub(i + 1));
            if retune && changes(&choice, threads) {
                options.threads = Some(choice.threads);
                options.spinning = Some(choice.spinning);
                drop(backend);
                backend = open_capture(&capture_model, options, outputs)?;
            }
            chosen = retune.then_some(choice);
        }
        of_input.par_iter().try_for_each(|&h| {
            let input = inputs
                .iter()
                .find(|t| t.name == names[h])
                .with_context(|| format!("calibration batch {i} lacks input '{}'", names[h]))?;
            shared.add_input(h, f32_data(input, &names[h])?)
        })?;
        count += 1;
        on_batch();
        waited = Instant::now();
    }
    if count == 0 {
        bail!("no calibration batches");
    }
    let (hists, busy) = shared.into_parts()?;
    if let Some((name, _)) = names
        .iter()
        .zip(&hists)
        .find(|(_, h)| h.total() == 0 && h.non_finite() == 0)
    {
        bail!("tensor '{name}' produced no float32 values; it cannot be calibrated");
    }
    Ok(Collected {
        histograms: names.into_iter().zip(hists).collect(),
        batches: count,
        backend: backend.name(),
        model_time,
        histogram_time: busy,
        wall_time: started.elapsed(),
        cpu_split: beside.then(|| {
            let ort = options.kind == BackendKind::Ort;
            reported(given, options.threads.unwrap_or(1), chosen, ort)
        }),
    })
}

/// The range found for one tensor.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct TensorRange {
    /// Tensor name.
    pub tensor: String,
    /// Clipping threshold.
    pub amax: f32,
    /// INT8 scale, `amax / 127`.
    pub scale: f32,
    /// Largest |x| seen (NaN, written as null, when the range came from a reused cache).
    #[serde(deserialize_with = "nan_when_null")]
    pub max_abs: f32,
    /// Values seen.
    pub count: u64,
}

/// Reads a float that JSON may hold as `null` (serde_json writes NaN so) back as NaN.
fn nan_when_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f32, D::Error> {
    Ok(<Option<f32> as serde::Deserialize>::deserialize(d)?.unwrap_or(f32::NAN))
}

/// The range of every tensor under `algo`, searched in parallel across tensors.
pub(crate) fn compute_ranges(
    histograms: &[(String, Histogram)],
    algo: Algorithm,
) -> Vec<TensorRange> {
    histograms
        .par_iter()
        .map(|(name, h)| {
            let amax = algo.amax(h);
            TensorRange {
                tensor: name.clone(),
                amax,
                scale: crate::onnx::rewrite::qdq::scale_of(amax),
                max_abs: h.max_abs(),
                count: h.total(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::sample_source::SyntheticBatches;
    use crate::onnx::rewrite::plan::plan_int8;
    use crate::onnx::test_models;

    #[test]
    fn collects_every_planned_tensor() {
        let m = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
        let plan = plan_int8(m.graph());
        let mut b = SyntheticBatches::new("input", &[3, 16, 16], 4, 12, 7).unwrap();
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let options = BackendOptions {
            batch: Some(4),
            ..Default::default()
        };
        let c = collect(&m, &plan, &mut b, &options, &|| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(c.batches, 3);
        assert_eq!(calls.into_inner(), 3);
        assert_eq!(c.histograms[0].0, "input");
        assert_eq!(c.histograms[0].1.total(), 12 * 768);
        assert_eq!(c.histograms[1].0, "flat");
        assert_eq!(c.histograms[1].1.total(), 12 * 512);
        let r = compute_ranges(&c.histograms, Algorithm::MinMax);
        assert!(r[0].amax > 3.0 && r[0].amax < 6.0, "{:?}", r[0]);
        assert!(r[1].amax > 0.0);
    }
}
