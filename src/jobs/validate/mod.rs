//! The `validate` job: accuracy of a model on labelled images (top-1/top-5 on an ImageNet-style
//! folder, mIoU against masks, COCO mAP against annotated boxes), with images/s and per-batch
//! latency (all = preprocessed batch in → outputs out; model = inference only), measured after
//! a warm-up. [`feed`] moves the batches (host or GPU ring), [`scoring`] turns outputs into
//! the task's metrics.

pub mod feed;
pub(crate) mod scoring;

use crate::backend::cpu_split::{beside_loader, reported, CpuSplit};
use crate::backend::open;
use crate::backend::select::{BackendKind, BackendOptions};
use crate::backend::Backend;
use crate::backend::Device;
use crate::data::dataset::{Dataset, DatasetOptions, Sample};
use crate::data::loader::{Failure, Loader, LoaderStats};
use crate::data::preprocess::{Layout, Preprocess, PreprocessRequest};
use crate::error::{kind_of, ErrorKind, Hint, Setting, TypedError};
use crate::metrics::accuracy::TopKAccuracy;
use crate::metrics::detection::outputs::DetectOptions;
use crate::metrics::latency::BatchLatency;
use crate::metrics::segmentation::SegmentAccuracy;
use crate::onnx::shape::{DimSpec, InputShape, ShapeRequest};
use crate::progress::Progress;
use crate::tensor::{Dim, ElemType, HostTensor, IoSpec, TensorData};
use anyhow::{bail, Result};
pub(crate) use feed::TimeSplit;
use feed::{run_batches, Chosen, Feeding, ImageInput, Retune};
use half::slice::HalfFloatSliceExt;
pub(crate) use scoring::Prediction;
use scoring::{task_truth, ClassScorer, DetectAccuracy, Scored, Scorer, TaskTruth};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How many batches at the start are left out of the latency figures.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WarmupBatches {
    /// This many batches.
    Count(usize),
    /// This fraction of the batches, rounded down (always leaving one measured batch).
    Fraction(f64),
}

/// Everything a validation run needs.
#[derive(Clone, Debug)]
pub struct ValidateConfig {
    /// The model (ONNX) or engine file.
    pub model: PathBuf,
    /// The dataset folder.
    pub dataset: PathBuf,
    /// Labels and class map of the dataset.
    pub dataset_options: DatasetOptions,
    /// Shuffle the images with this seed before limiting.
    pub shuffle_seed: Option<u64>,
    /// Use only the first N images.
    pub limit: Option<usize>,
    /// Images per batch.
    pub batch_size: usize,
    /// The backend for an ONNX model.
    pub backend: BackendOptions,
    /// Warm-up batches left out of the latency figures.
    pub warmup: WarmupBatches,
    /// How images become model input (unset fields follow the model).
    pub preprocess: PreprocessRequest,
    /// Batches kept ready ahead of inference.
    pub prefetch: usize,
    /// Keep every image's top-5 classes in [`ValidateReport::predictions`].
    pub keep_predictions: bool,
    /// How detections are decoded and filtered (COCO annotations only).
    pub detect: DetectOptions,
}

/// What `validate` reports.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ValidateReport {
    /// The model file.
    pub model: String,
    /// The backend that ran it.
    pub backend: String,
    /// The dataset folder.
    pub dataset: String,
    /// Images classified.
    pub images: u64,
    /// Images skipped (unreadable or undecodable).
    pub skipped: usize,
    /// The skipped images and why.
    pub skipped_images: Vec<Failure>,
    /// Top-1 accuracy in [0,1] (0 for segmentation and detection).
    pub top1: f64,
    /// Top-5 accuracy in [0,1].
    pub top5: f64,
    /// Hit counts.
    pub counts: TopKAccuracy,
    /// mIoU and pixel accuracy, against masks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<SegmentAccuracy>,
    /// COCO mAP, against annotated boxes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detect: Option<DetectAccuracy>,
    /// Batch size.
    pub batch_size: usize,
    /// Batches run.
    pub batches: usize,
    /// Batches excluded from latency as warm-up.
    pub(crate) warmup_batches: usize,
    /// Images per second over the whole run (decode, preprocess and inference overlapped).
    pub images_per_s: f64,
    /// Seconds the whole run took.
    pub wall_s: f64,
    /// Images per second after the warm-up batches: the rate a longer run settles at.
    #[serde(default)]
    pub steady_images_per_s: f64,
    /// Where the wall time went.
    #[serde(default)]
    pub time_split: TimeSplit,
    /// The loader's own figures: its threads, and the images per second it decodes while busy.
    #[serde(default)]
    pub loader: LoaderStats,
    /// How the loader and the model shared the cores (a CPU backend only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_split: Option<CpuSplit>,
    /// How the batches reached the model: `host tensors`, `pinned ring → GPU, 2 streams`, or
    /// `pinned ring → GPU, 2 copy streams around one inference stream`.
    #[serde(default)]
    pub data_path: String,
    /// The GPU's first inference per stream, before any batch (where a library sets up lazily,
    /// it happens here), in ms; part of the set-up in the time split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) first_inference_ms: Option<f64>,
    /// Peak resident memory of the process, bytes (Linux).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
    /// Preprocessed batch in → outputs out, per batch, after warm-up.
    pub latency_all: BatchLatency,
    /// Inference only, per batch, after warm-up.
    pub latency_model: BatchLatency,
    /// The preprocessing applied.
    pub preprocess: Preprocess,
    /// Every image's top-5 (only when asked for; not part of the JSON report).
    #[serde(skip)]
    pub predictions: Vec<Prediction>,
}

/// What the model expects of its image input.
struct InputPlan {
    /// The input's spec (its name and element type).
    spec: IoSpec,
    layout: Layout,
    height: usize,
    width: usize,
    /// Scores per image of the first output, when its dims are fixed.
    classes: Option<usize>,
}

fn plan_input(backend: &dyn Backend, model: &Path, batch: usize) -> Result<InputPlan> {
    let shown = model.display();
    let [input] = backend.inputs() else {
        bail!(
            "{shown}: validate needs a model with one image input; this one has {}",
            backend.inputs().len()
        );
    };
    let dims = input.concrete_shape(batch)?;
    if dims.len() != 4 {
        bail!(
            "{shown}: input '{}' has {} dims; validate needs N×C×H×W or N×H×W×C",
            input.name,
            dims.len()
        );
    }
    let (layout, height, width) = match (dims[1], dims[3]) {
        (3, _) => (Layout::Nchw, dims[2], dims[3]),
        (_, 3) => (Layout::Nhwc, dims[1], dims[2]),
        _ => bail!(
            "{shown}: input '{}' has shape {dims:?}, with 3 channels neither at axis 1 nor 3",
            input.name
        ),
    };
    if !matches!(input.elem_type, ElemType::F32 | ElemType::F16) {
        bail!(
            "{shown}: input '{}' is {}; validate feeds float32 or float16",
            input.name,
            input.elem_type
        );
    }
    let Some(output) = backend.outputs().first() else {
        bail!("{shown}: the model has no outputs");
    };
    let classes = output
        .dims
        .iter()
        .skip(1)
        .map(|d| match d {
            Dim::Fixed(n) => Some(*n as usize),
            _ => None,
        })
        .product::<Option<usize>>();
    Ok(InputPlan {
        spec: input.clone(),
        layout,
        height,
        width,
        classes,
    })
}

impl InputPlan {
    /// The dims of one image.
    fn per_image(&self) -> Vec<usize> {
        match self.layout {
            Layout::Nchw => vec![3, self.height, self.width],
            Layout::Nhwc => vec![self.height, self.width, 3],
        }
    }
}

/// `samples` loaded images as the model's input tensor.
fn input_tensor(plan: &InputPlan, data: Vec<f32>, samples: usize) -> Result<HostTensor> {
    let shape = std::iter::once(samples).chain(plan.per_image()).collect();
    let data = match plan.spec.elem_type {
        ElemType::F16 => {
            let mut narrow = vec![half::f16::ZERO; data.len()];
            narrow.convert_from_f32_slice(&data);
            TensorData::F16(narrow)
        }
        _ => TensorData::F32(data),
    };
    HostTensor::new(plan.spec.name.clone(), shape, data)
}

/// The samples the config picks: shuffled, then limited.
fn pick(mut dataset: Dataset, config: &ValidateConfig) -> Dataset {
    if let Some(seed) = config.shuffle_seed {
        dataset.shuffle(seed);
    }
    if let Some(n) = config.limit {
        dataset.limit(n);
    }
    dataset
}

/// Opens the class-labelled dataset as the config says: shuffled, then limited.
fn open_dataset(config: &ValidateConfig) -> Result<Dataset> {
    Ok(pick(
        Dataset::open(&config.dataset, &config.dataset_options)?,
        config,
    ))
}

/// The images of `config.dataset` (shuffled and limited as it says) as one input tensor for
/// `config.model`'s image input, preprocessed as it says; unreadable images are skipped with a
/// warning.
pub(crate) fn dataset_tensor(config: &ValidateConfig) -> Result<HostTensor> {
    let (dataset, _) = read_dataset(config)?;
    for f in &dataset.skipped {
        tracing::warn!("skipped {}: {}", f.path.display(), f.reason);
    }
    samples_tensor(config, dataset.samples)
}

/// Every image under `config.dataset` (any layout: labels are not read), in the folder walk's
/// order, the first `config.limit` of them, as [`dataset_tensor`] makes it. What `compare`
/// feeds when it compares over real images.
pub(crate) fn folder_tensor(config: &ValidateConfig) -> Result<HostTensor> {
    let walked = crate::data::walk::walk(&config.dataset)?;
    for f in &walked.skipped {
        tracing::warn!("skipped {}: {}", f.path.display(), f.reason);
    }
    let take = config.limit.unwrap_or(usize::MAX);
    let samples: Vec<Sample> = walked
        .files
        .into_iter()
        .take(take)
        .map(|path| Sample { path, label: 0 })
        .collect();
    if samples.is_empty() {
        bail!("{}: holds no images", config.dataset.display());
    }
    samples_tensor(config, samples)
}

/// `samples` decoded and preprocessed for `config.model`'s image input, as one tensor.
fn samples_tensor(config: &ValidateConfig, samples: Vec<Sample>) -> Result<HostTensor> {
    let batch = batch_for(config.batch_size, samples.len());
    let (_, plan) = open_planned(config, batch)?;
    let pre = resolve_preprocess(config, &plan)?;
    let per = pre.elements();
    let loader = Loader::host(samples, pre, batch, config.prefetch, ElemType::F32)?;
    let (mut data, mut count) = (vec![], 0);
    for batch in loader {
        for f in &batch.failures {
            tracing::warn!("skipped {}: {}", f.path.display(), f.reason);
        }
        let rows = batch.samples.len();
        count += rows;
        data.extend_from_slice(&batch.memory().data().as_f32()[..rows * per]);
    }
    if count == 0 {
        bail!("{}: no image could be read", config.dataset.display());
    }
    input_tensor(&plan, data, count)
}

/// The model's backend opened at `batch`, and what it expects of its image input. An input
/// whose height and width are not fixed takes the size of the images fed: the crop.
fn open_planned(config: &ValidateConfig, batch: usize) -> Result<(Box<dyn Backend>, InputPlan)> {
    let options = BackendOptions {
        batch: Some(batch),
        ..config.backend.clone()
    };
    let named = |e: anyhow::Error| {
        if kind_of(&e) == Some(ErrorKind::TooLargeForMemory) {
            e.context(config.model.display().to_string())
        } else {
            e
        }
    };
    let backend = open(&config.model, &options).map_err(named)?;
    match plan_input(backend.as_ref(), &config.model, batch) {
        Err(e) if kind_of(&e) == Some(ErrorKind::UnfixedAxis) => {
            let fixed = image_sized(backend.inputs(), config.preprocess.crop, &config.model)?;
            drop(backend);
            let options = BackendOptions {
                input_shapes: ShapeRequest::shapes(vec![fixed]),
                ..options
            };
            let backend = open(&config.model, &options)?;
            let plan = plan_input(backend.as_ref(), &config.model, batch)?;
            Ok((backend, plan))
        }
        planned => Ok((backend, planned?)),
    }
}

/// The shape that fixes the height and width of a one-image-input model to a `crop`×`crop`
/// image; without a crop, an error saying how to give one (the setting `validate` has).
fn image_sized(inputs: &[IoSpec], crop: Option<usize>, model: &Path) -> Result<InputShape> {
    let [input] = inputs else {
        bail!(
            "{}: validate needs a model with one image input; this one has {}",
            model.display(),
            inputs.len()
        );
    };
    let three = |axis: usize| input.dims.get(axis) == Some(&Dim::Fixed(3));
    let channels_first = match (input.dims.len(), three(1), three(3)) {
        (4, true, _) => true,
        (4, false, true) => false,
        _ => bail!(
            "{}: input '{}' has dims {:?}; validate needs N×3×H×W or N×H×W×3",
            model.display(),
            input.name,
            input.dims
        ),
    };
    let Some(size) = crop else {
        bail!(
            "{}: input '{}' has no fixed height and width; validate feeds images of the size --crop N gives (crop = N under [preprocess] in trtkit.toml)",
            model.display(),
            input.name
        );
    };
    let side = DimSpec::Fixed(size as i64);
    let dims = if channels_first {
        vec![DimSpec::Dynamic, DimSpec::Fixed(3), side, side]
    } else {
        vec![DimSpec::Dynamic, side, side, DimSpec::Fixed(3)]
    };
    Ok(InputShape { name: None, dims })
}

/// The configured preprocessing resolved against the model's input (a wrong setting is the
/// user's, not the model's).
fn resolve_preprocess(config: &ValidateConfig, plan: &InputPlan) -> Result<Preprocess> {
    config
        .preprocess
        .resolve(&plan.spec.name, plan.layout, plan.height, plan.width)
        .map_err(|e| TypedError::hinted(Hint::Wrong(Setting::Preprocess), format!("{e:#}")).into())
}

/// The model's classes per image; a dataset whose largest label is beyond them is refused.
fn check_labels(dataset: &Dataset, plan: &InputPlan, model: &Path) -> Result<usize> {
    let classes = match plan.classes {
        Some(0) | None => bail!(
            "{}: its first output has no fixed number of classes; for masks or boxes give --masks or --coco",
            model.display()
        ),
        Some(n) => n,
    };
    if let Some(s) = dataset.max_label() {
        if s.label >= classes {
            bail!(
                "{}: label {} is beyond the model's {classes} classes (outputs 0..{})",
                s.path.display(),
                s.label,
                classes - 1
            );
        }
    }
    Ok(classes)
}

/// The dataset (shuffled and limited as the config says), and its masks or boxes where the
/// config names them.
fn read_dataset(config: &ValidateConfig) -> Result<(Dataset, Option<TaskTruth>)> {
    let annotations = &config.dataset_options.annotations;
    Ok(match task_truth(&config.dataset, annotations)? {
        Some((dataset, truth)) => (pick(dataset, config), Some(truth)),
        None => (open_dataset(config)?, None),
    })
}

/// The scorer of the dataset's ground truth for the model's outputs.
fn scorer_for(
    truth: Option<TaskTruth>,
    dataset: &Dataset,
    plan: &InputPlan,
    pre: &Preprocess,
    config: &ValidateConfig,
) -> Result<Box<dyn Scorer>> {
    Ok(match truth {
        Some(truth) => truth.scorer(pre, config.detect),
        None => {
            let classes = check_labels(dataset, plan, &config.model)?;
            Box::new(ClassScorer::new(classes, config.keep_predictions))
        }
    })
}

/// The warm-up batches (left out of the latencies) among `batches`: at least one is timed.
fn warmup_batches(warmup: WarmupBatches, batches: usize) -> usize {
    match warmup {
        WarmupBatches::Count(n) => n,
        WarmupBatches::Fraction(f) => (batches as f64 * f).floor() as usize,
    }
    .min(batches.saturating_sub(1))
}

/// The batch size a run uses: the one asked for, but no more than the images there are.
fn batch_for(asked: usize, images: usize) -> usize {
    let batch = asked.min(images).max(1);
    if batch < asked {
        tracing::info!("batches of {batch}: the {images} images do not fill a batch of {asked}");
    }
    batch
}

/// The CPU split a run on the CPU reports: `given` the user's `--threads`, `chosen` what the
/// first stretch chose.
fn split_of(config: &ValidateConfig, given: Option<usize>, chosen: Option<&Chosen>) -> CpuSplit {
    let ort = config.backend.kind == BackendKind::Ort;
    let first = config.backend.threads.unwrap_or(1);
    reported(given, first, chosen.map(|c| c.choice.clone()), ort)
}

/// The error of a run in which none of the `total` images could be read.
fn none_read(dataset: &Path, total: usize, failures: &[Failure]) -> anyhow::Error {
    let first = failures.first();
    anyhow::anyhow!(
        "{}: none of the {total} images could be read ({} skipped); first: {}: {}",
        dataset.display(),
        failures.len(),
        first
            .map(|f| f.path.display().to_string())
            .unwrap_or_default(),
        first.map(|f| f.reason.as_str()).unwrap_or("")
    )
}

/// Runs the validation: `progress` advances by images, with the running accuracy as status.
/// On a CPU host the model's threads are chosen after the first batches unless `--threads`
/// gives them (see [`crate::backend::cpu_split`]).
pub fn validate(config: &ValidateConfig, progress: &dyn Progress) -> Result<ValidateReport> {
    if config.batch_size == 0 {
        bail!("the batch size must be at least 1");
    }
    let given = config.backend.threads;
    let (dataset, truth) = read_dataset(config)?;
    let total = dataset.samples.len();
    let asked = batch_for(config.batch_size, total);
    let mut backend = beside_loader(&config.backend, true);
    // A fixed amount of work: on ONNX Runtime's CUDA provider, the measured layout that
    // finishes it soonest, set-up included.
    backend.cuda_tuning.planned_batches = Some(total.div_ceil(asked));
    let config = &ValidateConfig {
        backend,
        ..config.clone()
    };
    let (mut backend, plan) = open_planned(config, asked)?;
    let batch = backend.fixed_batch().unwrap_or(asked);
    let pre = resolve_preprocess(config, &plan)?;
    let mut scorer = scorer_for(truth, &dataset, &plan, &pre, config)?;
    let batches = total.div_ceil(batch);
    let warmup = warmup_batches(config.warmup, batches);
    tracing::info!(
        "{total} images, {batches} batches of {batch}, {warmup} warm-up batches, backend {}, loader on {} threads",
        backend.name(),
        rayon::current_num_threads()
    );
    progress.start("images", Some(total as u64));
    let mut failures = dataset.skipped.clone();
    let input = ImageInput {
        spec: plan.spec.clone(),
        per_image: plan.per_image(),
    };
    let first = config.backend.threads.unwrap_or(1);
    // An engine runs on its GPU whatever --device says.
    let cpu = config.backend.device == Device::Cpu && backend.gpu().is_none();
    let reopen = |threads, spinning| {
        let mut config = config.clone();
        (config.backend.threads, config.backend.spinning) = (Some(threads), Some(spinning));
        Ok(open_planned(&config, asked)?.0)
    };
    let feeding = Feeding {
        model: &config.model,
        samples: dataset.samples,
        pre: pre.clone(),
        batch,
        prefetch: config.prefetch,
        warmup,
        progress,
        started: Instant::now(),
        retune: (cpu && given.is_none()).then_some(Retune {
            threads: first,
            reopen: &reopen,
        }),
    };
    let start = feeding.started;
    let (mut m, data_path) = run_batches(
        config.backend.device_id,
        backend.as_mut(),
        &input,
        feeding,
        scorer.as_mut(),
    )?;
    let wall = start.elapsed();
    progress.finish();
    let cpu_split = cpu.then(|| split_of(config, given, m.chosen.as_ref()));
    if let Some(reopened) = m.chosen.take().and_then(|c| c.backend) {
        backend = reopened;
    }
    for note in backend.finish()? {
        tracing::info!("{}: {note}", config.model.display());
    }
    failures.extend(m.failures.iter().cloned());
    let images = scorer.images();
    if images == 0 {
        return Err(none_read(&config.dataset, total, &failures));
    }
    let (mut counts, mut predictions, mut segment, mut detect) = Default::default();
    match scorer.finish()? {
        Scored::Classes(acc, kept) => (counts, predictions) = (acc, kept),
        Scored::Masks(m) => segment = Some(m),
        Scored::Boxes(b) => detect = Some(b),
    }
    Ok(ValidateReport {
        model: config.model.display().to_string(),
        backend: backend.name(),
        dataset: config.dataset.display().to_string(),
        images,
        skipped: failures.len(),
        skipped_images: failures,
        top1: counts.top1(),
        top5: counts.top5(),
        counts,
        segment,
        detect,
        batch_size: batch,
        batches: m.batches,
        warmup_batches: warmup.min(m.batches),
        images_per_s: images as f64 / wall.as_secs_f64(),
        wall_s: wall.as_secs_f64(),
        steady_images_per_s: if m.steady.1 > 0.0 {
            m.steady.0 as f64 / m.steady.1
        } else {
            images as f64 / wall.as_secs_f64()
        },
        time_split: m.split,
        loader: m.loader,
        cpu_split,
        data_path,
        first_inference_ms: m.first_inference_ms,
        peak_rss_bytes: crate::host_memory::peak_rss_bytes(),
        latency_all: BatchLatency::of_ms(&m.lat_all),
        latency_model: BatchLatency::of_ms(&m.lat_model),
        preprocess: pre,
        predictions,
    })
}
