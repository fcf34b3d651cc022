//! `trtkit validate MODEL --dataset DIR`: top-1/top-5 accuracy on an ImageNet-style folder,
//! with images/s and per-batch latency (all = preprocessed batch in → outputs out; model =
//! inference only), measured after a warm-up.

use crate::atomic_file::write_atomic_with;
use crate::backend::select::open;
use crate::backend::Backend;
use crate::cli::backend_args::BackendArgs;
use crate::cli::preprocess_args::PreprocessArgs;
use crate::cli::UsageError;
use crate::data::dataset::{Dataset, DatasetOptions};
use crate::data::loader::{Failure, Loader};
use crate::data::preprocess::{Layout, Preprocess};
use crate::metrics::accuracy::TopKAccuracy;
use crate::onnx::OnnxModel;
use crate::report::format::json;
use crate::report::table::{Align, Table};
use crate::tensor::Dim;
use crate::tensor::{ElemType, HostTensor, TensorData};
use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Flags of `validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The model to validate (ONNX).
    pub model: PathBuf,
    /// Dataset folder: one sub-folder per class (ImageFolder), or flat with --labels.
    #[arg(long)]
    pub dataset: PathBuf,
    /// Images per batch.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Backend, device and threads (the image loader uses rayon's pool besides).
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Labels for a flat folder: `file,label` CSV, or one label per line in sorted file order.
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// One class name per line (line i = model class i); maps folder or label names to indices.
    #[arg(long)]
    pub class_map: Option<PathBuf>,
    /// Use only the first N images (after shuffling, if --shuffle-seed is given).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Shuffle the images with this seed (the same seed picks the same subset everywhere).
    #[arg(long)]
    pub shuffle_seed: Option<u64>,
    /// Fraction of batches excluded from latency figures as warm-up.
    #[arg(long, default_value_t = 0.1)]
    pub warmup: f64,
    /// How images become model input.
    #[command(flatten)]
    pub preprocess: PreprocessArgs,
    /// Batches kept ready ahead of inference.
    #[arg(long, default_value_t = 4)]
    pub prefetch: usize,
    /// Write one line per image (file, label, top-5 classes) to this CSV file.
    #[arg(long)]
    pub save_predictions: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print the summary as a markdown table.
    #[arg(long)]
    pub markdown: bool,
}

/// Mean and max of a set of durations, in milliseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LatencyStats {
    /// Batches measured.
    pub batches: usize,
    /// Mean, ms.
    pub mean_ms: f64,
    /// Max, ms.
    pub max_ms: f64,
}

impl LatencyStats {
    fn of(samples: &[Duration]) -> Self {
        if samples.is_empty() {
            return LatencyStats::default();
        }
        let ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        LatencyStats {
            batches: ms.len(),
            mean_ms: ms.iter().sum::<f64>() / ms.len() as f64,
            max_ms: ms.iter().cloned().fold(0.0, f64::max),
        }
    }
}

/// What `validate` reports.
#[derive(Clone, Debug, Serialize)]
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
    /// Top-1 accuracy in [0,1].
    pub top1: f64,
    /// Top-5 accuracy in [0,1].
    pub top5: f64,
    /// Hit counts.
    pub counts: TopKAccuracy,
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
    pub latency_all: LatencyStats,
    /// Inference only, per batch, after warm-up.
    pub latency_model: LatencyStats,
    /// The preprocessing applied.
    pub preprocess: Preprocess,
}

/// The backend that runs the model. The one place where a backend is chosen: new backends
/// (ONNX Runtime, TensorRT engines) are added here.
pub fn open_backend(args: &ValidateArgs) -> Result<Box<dyn Backend>> {
    let onnx = OnnxModel::load(&args.model)?;
    open(&onnx, &args.backend.options(args.batch_size))
}

/// What the model expects of its image input.
struct InputPlan {
    name: String,
    layout: Layout,
    height: usize,
    width: usize,
    batch: usize,
    elem_type: ElemType,
    classes: usize,
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
    let out_dims: Vec<usize> = output
        .dims
        .iter()
        .skip(1)
        .map(|d| match d {
            Dim::Fixed(n) => Ok(*n as usize),
            other => bail!(
                "{shown}: output '{}' has a non-fixed class axis '{other}'",
                output.name
            ),
        })
        .collect::<Result<_>>()?;
    let classes: usize = out_dims.iter().product();
    if classes == 0 {
        bail!("{shown}: output '{}' has no classes", output.name);
    }
    Ok(InputPlan {
        name: input.name.clone(),
        layout,
        height,
        width,
        batch: dims[0],
        elem_type: input.elem_type,
        classes,
    })
}

fn preprocess_for(args: &ValidateArgs, plan: &InputPlan) -> Result<Preprocess> {
    args.preprocess
        .request()
        .resolve(&plan.name, plan.layout, plan.height, plan.width)
        .map_err(|e| UsageError(format!("{e:#}")).into())
}

/// One batch's input tensor, padded with zeros to the model's fixed batch.
fn input_tensor(plan: &InputPlan, data: Vec<f32>, per_image: usize) -> Result<HostTensor> {
    let mut data = data;
    data.resize(plan.batch * per_image, 0.0);
    let shape = match plan.layout {
        Layout::Nchw => vec![plan.batch, 3, plan.height, plan.width],
        Layout::Nhwc => vec![plan.batch, plan.height, plan.width, 3],
    };
    let data = match plan.elem_type {
        ElemType::F16 => TensorData::F16(data.into_iter().map(half::f16::from_f32).collect()),
        _ => TensorData::F32(data),
    };
    HostTensor::new(plan.name.clone(), shape, data)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Runs `validate`.
pub fn run(args: ValidateArgs) -> Result<()> {
    if args.batch_size == 0 {
        return Err(UsageError("--batch-size must be at least 1".into()).into());
    }
    if !(0.0..1.0).contains(&args.warmup) {
        return Err(UsageError(format!("--warmup {} is not in [0, 1)", args.warmup)).into());
    }
    let mut dataset = Dataset::open(
        &args.dataset,
        &DatasetOptions {
            labels: args.labels.clone(),
            class_map: args.class_map.clone(),
        },
    )?;
    if let Some(seed) = args.shuffle_seed {
        dataset.shuffle(seed);
    }
    if let Some(n) = args.limit {
        if n == 0 {
            return Err(UsageError("--limit must be at least 1".into()).into());
        }
        dataset.limit(n);
    }
    let mut backend = open_backend(&args)?;
    let plan = plan_input(backend.as_ref(), &args.model, args.batch_size)?;
    if let Some(s) = dataset.max_label() {
        if s.label >= plan.classes {
            bail!(
                "{}: label {} is beyond the model's {} classes (outputs 0..{})",
                s.path.display(),
                s.label,
                plan.classes,
                plan.classes - 1
            );
        }
    }
    let pre = preprocess_for(&args, &plan)?;
    let per_image = pre.elements();
    let total = dataset.samples.len();
    let batches = total.div_ceil(args.batch_size);
    let warmup = ((batches as f64 * args.warmup).floor() as usize).min(batches.saturating_sub(1));
    tracing::info!(
        "{} images, {batches} batches of {}, {warmup} warm-up batches, backend {}",
        total,
        args.batch_size,
        backend.name()
    );

    let bar = if args.json || args.markdown {
        ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::hidden())
    } else {
        ProgressBar::new(total as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} images  {per_sec}  {msg}  eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );

    let mut acc = TopKAccuracy::default();
    let mut failures: Vec<Failure> = Vec::new();
    let mut lat_all = Vec::new();
    let mut lat_model = Vec::new();
    let mut predictions: Vec<(PathBuf, usize, Vec<usize>)> = Vec::new();
    let mut ran = 0usize;
    let start = Instant::now();
    let loader = Loader::spawn(
        dataset.samples.clone(),
        pre.clone(),
        args.batch_size,
        args.prefetch,
    )?;
    for (index, batch) in loader.enumerate() {
        for f in &batch.failures {
            tracing::warn!("skipped {}: {}", f.path.display(), f.reason);
        }
        failures.extend(batch.failures.iter().cloned());
        bar.inc(batch.failures.len() as u64);
        if batch.samples.is_empty() {
            continue;
        }
        let t0 = Instant::now();
        let tensor = input_tensor(&plan, batch.data, per_image)?;
        let out = backend
            .run(std::slice::from_ref(&tensor))
            .with_context(|| format!("{}: inference failed", args.model.display()))?;
        let all = t0.elapsed();
        if index >= warmup {
            lat_all.push(all);
            lat_model.push(out.elapsed);
        }
        ran += 1;
        let logits = out.outputs[0].data.to_f64();
        for (i, s) in batch.samples.iter().enumerate() {
            let row: Vec<f32> = logits[i * plan.classes..(i + 1) * plan.classes]
                .iter()
                .map(|&v| v as f32)
                .collect();
            let top = acc.update(&row, s.label);
            if args.save_predictions.is_some() {
                predictions.push((s.path.clone(), s.label, top));
            }
        }
        bar.inc(batch.samples.len() as u64);
        bar.set_message(format!(
            "top-1 {:.2}%  top-5 {:.2}%",
            acc.top1() * 100.0,
            acc.top5() * 100.0
        ));
    }
    let wall = start.elapsed();
    bar.finish_and_clear();
    if acc.total == 0 {
        bail!(
            "{}: none of the {} images could be read ({} skipped); first: {}: {}",
            args.dataset.display(),
            total,
            failures.len(),
            failures
                .first()
                .map(|f| f.path.display().to_string())
                .unwrap_or_default(),
            failures.first().map(|f| f.reason.as_str()).unwrap_or("")
        );
    }

    if let Some(path) = &args.save_predictions {
        write_atomic_with(path, |w| {
            writeln!(w, "file,label,top1,top2,top3,top4,top5")?;
            for (file, label, top) in &predictions {
                let mut cells: Vec<String> = top.iter().map(|c| c.to_string()).collect();
                cells.resize(5, String::new());
                writeln!(
                    w,
                    "{},{label},{}",
                    csv_field(&file.display().to_string()),
                    cells.join(",")
                )?;
            }
            Ok(())
        })?;
    }

    let report = ValidateReport {
        model: args.model.display().to_string(),
        backend: backend.name(),
        dataset: args.dataset.display().to_string(),
        images: acc.total,
        skipped: failures.len(),
        skipped_images: failures,
        top1: acc.top1(),
        top5: acc.top5(),
        counts: acc.clone(),
        batch_size: args.batch_size,
        batches: ran,
        warmup_batches: warmup.min(ran),
        images_per_s: acc.total as f64 / wall.as_secs_f64(),
        wall_s: wall.as_secs_f64(),
        latency_all: LatencyStats::of(&lat_all),
        latency_model: LatencyStats::of(&lat_model),
        preprocess: pre,
    };
    let text = if args.json {
        json(&report)?
    } else {
        render(&report, args.markdown)
    };
    print!("{text}");
    Ok(())
}

/// The terminal (or markdown) rendering of a validation report.
pub fn render(r: &ValidateReport, markdown: bool) -> String {
    let mut t = Table::new(&["metric", "value"]).with_align(&[Align::Left, Align::Right]);
    let pct = |v: f64| format!("{:.2}%", v * 100.0);
    let ms = |s: &LatencyStats| {
        if s.batches == 0 {
            "n/a".to_string()
        } else {
            format!("{:.3} / {:.3} ms", s.mean_ms, s.max_ms)
        }
    };
    t.row(vec!["top-1".into(), pct(r.top1)]);
    t.row(vec!["top-5".into(), pct(r.top5)]);
    t.row(vec!["images".into(), r.images.to_string()]);
    t.row(vec!["skipped".into(), r.skipped.to_string()]);
    t.row(vec!["images/s".into(), format!("{:.1}", r.images_per_s)]);
    t.row(vec![
        "batches (warm-up)".into(),
        format!("{} ({}) of {}", r.batches, r.warmup_batches, r.batch_size),
    ]);
    t.row(vec!["latency-all mean / max".into(), ms(&r.latency_all)]);
    t.row(vec![
        "latency-model mean / max".into(),
        ms(&r.latency_model),
    ]);
    let mut out = format!(
        "model    {}\nbackend  {}\ndataset  {}\n\n",
        r.model, r.backend, r.dataset
    );
    out += &if markdown {
        t.render_markdown()
    } else {
        t.render()
    };
    if !r.skipped_images.is_empty() {
        out += &format!("\nskipped {} images:\n", r.skipped);
        for f in r.skipped_images.iter().take(20) {
            out += &format!("  {}: {}\n", f.path.display(), f.reason);
        }
        if r.skipped > 20 {
            out += &format!("  ... and {} more (--json lists all)\n", r.skipped - 20);
        }
    }
    out
}
