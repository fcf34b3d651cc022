//! The `validate` job: accuracy of a model on labelled images (top-1/top-5 on an ImageNet-style
//! folder, mIoU against masks, COCO mAP against annotated boxes), with images/s and per-batch
//! latency (all = preprocessed batch in → outputs out; model = inference only), measured after
//! a warm-up.

use crate::backend::batch_runner::run_batched;
use crate::backend::select::BackendOptions;
use crate::backend::Backend;
use crate::data::dataset::{Dataset, DatasetOptions};
use crate::data::loader::{Failure, Loader};
use crate::data::preprocess::{Layout, Preprocess, PreprocessRequest};
use crate::jobs::open::open_backend;
pub use crate::jobs::validate_scoring::Prediction;
use crate::jobs::validate_scoring::{task_dataset, ClassScorer, DetectAccuracy, Scored, Scorer};
use crate::metrics::accuracy::TopKAccuracy;
use crate::metrics::detection::outputs::DetectOptions;
use crate::metrics::latency::BatchLatency;
use crate::metrics::segmentation::SegmentAccuracy;
use crate::progress::{NoProgress, Progress};
use crate::tensor::{Dim, ElemType, HostTensor, TensorData};
use anyhow::{bail, Context, Result};
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
    pub warmup_batches: usize,
    /// Images per second over the whole run (decode, preprocess and inference overlapped).
    pub images_per_s: f64,
    /// Seconds the whole run took.
    pub wall_s: f64,
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

/// The preprocessing request could not be resolved against the model's input (a setting the
/// user gave is wrong, not the model).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadPreprocess(pub String);

/// What the model expects of its image input.
struct InputPlan {
    name: String,
    layout: Layout,
    height: usize,
    width: usize,
    elem_type: ElemType,
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
        name: input.name.clone(),
        layout,
        height,
        width,
        elem_type: input.elem_type,
        classes,
    })
}

/// One loaded batch as the model's input tensor (`samples` images; the runner pads).
fn input_tensor(plan: &InputPlan, data: Vec<f32>, samples: usize) -> Result<HostTensor> {
    let shape = match plan.layout {
        Layout::Nchw => vec![samples, 3, plan.height, plan.width],
        Layout::Nhwc => vec![samples, plan.height, plan.width, 3],
    };
    let data = match plan.elem_type {
        ElemType::F16 => TensorData::F16(data.into_iter().map(half::f16::from_f32).collect()),
        _ => TensorData::F32(data),
    };
    HostTensor::new(plan.name.clone(), shape, data)
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
/// warning. What `compare` feeds when it compares over real images.
pub fn dataset_tensor(config: &ValidateConfig) -> Result<HostTensor> {
    let (_, plan) = open_planned(config)?;
    let pre = resolve_preprocess(config, &plan)?;
    let annotations = &config.dataset_options.annotations;
    let dataset = match task_dataset(&config.dataset, annotations, &pre, config.detect)? {
        Some((dataset, _)) => pick(dataset, config),
        None => open_dataset(config)?,
    };
    let loader = Loader::spawn(dataset.samples, pre, config.batch_size, config.prefetch)?;
    let (mut data, mut count) = (vec![], 0);
    for batch in loader {
        for f in &batch.failures {
            tracing::warn!("skipped {}: {}", f.path.display(), f.reason);
        }
        count += batch.samples.len();
        data.extend(batch.data);
    }
    if count == 0 {
        bail!("{}: no image could be read", config.dataset.display());
    }
    input_tensor(&plan, data, count)
}

/// The model's backend opened at the configured batch, and what it expects of its image input.
fn open_planned(config: &ValidateConfig) -> Result<(Box<dyn Backend>, InputPlan)> {
    let options = BackendOptions {
        batch: Some(config.batch_size),
        ..config.backend.clone()
    };
    let backend = open_backend(&config.model, &options)?;
    let plan = plan_input(backend.as_ref(), &config.model, config.batch_size)?;
    Ok((backend, plan))
}

/// The configured preprocessing resolved against the model's input (a wrong setting is the
/// user's, not the model's).
fn resolve_preprocess(config: &ValidateConfig, plan: &InputPlan) -> Result<Preprocess> {
    config
        .preprocess
        .resolve(&plan.name, plan.layout, plan.height, plan.width)
        .map_err(|e| BadPreprocess(format!("{e:#}")).into())
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

/// The dataset (shuffled and limited as the config says) and the scorer its ground truth needs.
fn dataset_and_scorer(
    config: &ValidateConfig,
    plan: &InputPlan,
    pre: &Preprocess,
) -> Result<(Dataset, Box<dyn Scorer>)> {
    let annotations = &config.dataset_options.annotations;
    let Some((dataset, scorer)) = task_dataset(&config.dataset, annotations, pre, config.detect)?
    else {
        let dataset = open_dataset(config)?;
        let classes = check_labels(&dataset, plan, &config.model)?;
        let scorer = ClassScorer::new(classes, config.keep_predictions);
        return Ok((dataset, Box::new(scorer)));
    };
    Ok((pick(dataset, config), scorer))
}

/// The warm-up batches (left out of the latencies) among `batches`: at least one is timed.
fn warmup_batches(warmup: WarmupBatches, batches: usize) -> usize {
    match warmup {
        WarmupBatches::Count(n) => n,
        WarmupBatches::Fraction(f) => (batches as f64 * f).floor() as usize,
    }
    .min(batches.saturating_sub(1))
}

/// Runs the validation: `progress` advances by images, with the running accuracy as status.
pub fn validate(config: &ValidateConfig, progress: &dyn Progress) -> Result<ValidateReport> {
    if config.batch_size == 0 {
        bail!("the batch size must be at least 1");
    }
    let (mut backend, plan) = open_planned(config)?;
    let pre = resolve_preprocess(config, &plan)?;
    let (dataset, mut scorer) = dataset_and_scorer(config, &plan, &pre)?;
    let run_batch = backend.fixed_batch().unwrap_or(config.batch_size);
    let total = dataset.samples.len();
    let batches = total.div_ceil(config.batch_size);
    let warmup = warmup_batches(config.warmup, batches);
    tracing::info!(
        "{total} images, {batches} batches of {}, {warmup} warm-up batches, backend {}",
        config.batch_size,
        backend.name()
    );
    progress.start("images", Some(total as u64));
    let mut failures: Vec<Failure> = Vec::new();
    let mut lat_all = Vec::new();
    let mut lat_model = Vec::new();
    let mut ran = 0usize;
    let start = Instant::now();
    let loader = Loader::spawn(
        dataset.samples.clone(),
        pre.clone(),
        config.batch_size,
        config.prefetch,
    )?;
    for (index, batch) in loader.enumerate() {
        for f in &batch.failures {
            tracing::warn!("skipped {}: {}", f.path.display(), f.reason);
        }
        failures.extend(batch.failures.iter().cloned());
        progress.advance(batch.failures.len() as u64);
        if batch.samples.is_empty() {
            continue;
        }
        let t0 = Instant::now();
        let tensor = input_tensor(&plan, batch.data, batch.samples.len())?;
        let out = run_batched(
            backend.as_mut(),
            std::slice::from_ref(&tensor),
            run_batch,
            &NoProgress,
        )
        .with_context(|| format!("{}: inference failed", config.model.display()))?;
        if index >= warmup {
            lat_all.push(t0.elapsed().as_secs_f64() * 1e3);
            lat_model.push(out.inference.as_secs_f64() * 1e3);
        }
        ran += 1;
        scorer
            .score(&batch.samples, &out.outputs)
            .with_context(|| config.model.display().to_string())?;
        progress.advance(batch.samples.len() as u64);
        progress.status(scorer.status());
    }
    let wall = start.elapsed();
    progress.finish();
    for note in backend.finish()? {
        tracing::info!("{}: {note}", config.model.display());
    }
    let images = scorer.images();
    if images == 0 {
        let first = failures.first();
        bail!(
            "{}: none of the {total} images could be read ({} skipped); first: {}: {}",
            config.dataset.display(),
            failures.len(),
            first
                .map(|f| f.path.display().to_string())
                .unwrap_or_default(),
            first.map(|f| f.reason.as_str()).unwrap_or("")
        );
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
        batch_size: config.batch_size,
        batches: ran,
        warmup_batches: warmup.min(ran),
        images_per_s: images as f64 / wall.as_secs_f64(),
        wall_s: wall.as_secs_f64(),
        latency_all: BatchLatency::of_ms(&lat_all),
        latency_model: BatchLatency::of_ms(&lat_model),
        preprocess: pre,
        predictions,
    })
}
