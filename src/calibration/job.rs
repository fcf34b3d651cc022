//! The calibration job: a model and a source of batches in, one keyed cache per range
//! algorithm out (reused when its key matches, rewritten with the reasons when it does not).
//! `trtkit calibrate` and `trtkit build --int8` both run it.

use super::cache::{self, CacheKey, CalibrationTable};
use super::collect::{collect, compute_ranges, TensorRange};
use super::image_source::{has_images, ImageBatches};
use super::multi_input::MultiInputBatches;
use super::range::Algorithm;
use super::sample_source::{ArrayBatches, CalibrationBatches, SyntheticBatches};
use crate::backend::batch_runner::run_batched;
use crate::backend::open;
use crate::backend::select::BackendOptions;
use crate::data::preprocess::{preprocess_fields, Preprocess, PreprocessRequest};
use crate::digest::file_sha256;
use crate::error::{fix_with, Setting};
use crate::error::{kind_of, ErrorKind};
use crate::keyed_artifact::Lookup;
use crate::onnx::dtype::elem_type;
use crate::onnx::input_roles::int_input_roles;
use crate::onnx::rewrite::pass::Pass;
use crate::onnx::rewrite::plan::plan_int8;
use crate::onnx::shape::{model_batch_axes, model_inputs, InputShapes};
use crate::onnx::OnnxModel;
use crate::progress::{NoProgress, Progress};
use crate::tensor::{BatchAxes, BatchAxisRequest, Dim, ElemType, IntInput, IoSpec};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Everything a calibration run needs; no flag names here.
#[derive(Clone, Debug)]
pub struct CalibrateConfig {
    /// The FP32 ONNX model.
    pub model: PathBuf,
    /// A folder of images, a folder of .npy/.npz, one such file, or `synthetic:SEED`.
    pub(crate) calib_data: String,
    /// Batch size the model runs at; part of the cache key.
    pub batch_size: usize,
    /// Use at most this many images (default: all; 512 for synthetic data).
    pub(crate) num_images: Option<usize>,
    /// Range algorithms, each once; one cache each.
    pub(crate) algorithms: Vec<Algorithm>,
    /// Calibrate even if a cache with the same key exists.
    pub recalibrate: bool,
    /// Folder of calibration caches.
    pub cache_dir: PathBuf,
    /// Also time the plain model over the same batches (the overhead baseline).
    pub(crate) measure_plain: bool,
    /// The reference backend that runs the model (its batch is set to `batch_size`).
    pub backend: BackendOptions,
    /// How images are preprocessed (image folders only).
    pub preprocess: PreprocessRequest,
}

/// What `calibrate` reports.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CalibrateReport {
    /// The model.
    pub model: String,
    /// One entry per requested algorithm, in the order given.
    pub caches: Vec<CacheReport>,
    /// How the calibration inputs were made: the image preprocessing applied, setting by
    /// setting, or how arrays and synthetic data were taken.
    pub preprocessing: String,
    /// What the user should know about the data (e.g. images calibrated with the ImageNet
    /// defaults for a model whose input is not ImageNet-sized).
    pub warnings: Vec<String>,
    /// The backend that ran the model (absent when every cache was reused).
    pub backend: Option<String>,
    /// Timings in seconds (absent when every cache was reused).
    pub timing: Option<Timing>,
    /// How the image loader and the model shared the cores (images on a CPU backend only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_split: Option<crate::backend::cpu_split::CpuSplit>,
    /// Samples the source has beyond those used (left out by the sample limit).
    #[serde(default)]
    pub samples_left_out: usize,
}

/// One algorithm's cache: reused or written by this run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CacheReport {
    /// The range algorithm.
    pub algorithm: String,
    /// The cache file.
    pub cache: String,
    /// Whether an existing cache was reused.
    pub reused: bool,
    /// Why an existing cache was not reused (empty when there was none or it was reused).
    pub recalibrated_because: Vec<String>,
    /// The full key.
    pub key: CacheKey,
    /// Per-tensor ranges.
    pub tensors: Vec<TensorRange>,
}

/// Where calibration time went, in seconds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Timing {
    /// Batches run.
    pub batches: usize,
    /// Inside the backend running the capture model, histograms of its outputs included.
    pub model_s: f64,
    /// Thread-time spent counting histograms, summed over threads (runs inside `model_s`).
    pub(crate) histogram_cpu_s: f64,
    /// Range search over all tensors, every algorithm.
    pub(crate) search_s: f64,
    /// Wall time of the run over the batches (loading, model, histograms).
    pub(crate) collect_wall_s: f64,
    /// Total wall time of the calibration (collect + search + writing the caches).
    pub total_s: f64,
    /// Wall time of the plain model over the same batches (with --measure-plain).
    pub(crate) plain_wall_s: Option<f64>,
    /// Of which inside the backend (with --measure-plain).
    pub(crate) plain_model_s: Option<f64>,
    /// `(collect_wall_s + search_s) / plain_wall_s - 1`, in percent: what the histograms and
    /// the range search add to running the model over the same batches (neither side counts
    /// preparing its model).
    pub overhead_percent: Option<f64>,
}

/// What calibration feeds the model.
enum CalibrationInputs {
    /// One float input, as images, numpy arrays or synthetic normal data: its name and the
    /// dims of one sample.
    Single { input: String, sample: Vec<usize> },
    /// Several inputs, or integer ones (token models): every input, each batch holding all,
    /// each input batched on its own axis (or not at all).
    Multi {
        specs: Vec<IoSpec>,
        roles: BTreeMap<String, IntInput>,
        axes: BatchAxes,
    },
}

/// The model's inputs as calibration feeds them, batched as `request` and the model's named axes
/// say; every axis but the batch must be fixed.
fn calibration_inputs(model: &OnnxModel, request: &BatchAxisRequest) -> Result<CalibrationInputs> {
    let inputs = model_inputs(model);
    let shown = model.path.display();
    if inputs.is_empty() {
        bail!("{shown}: the model has no inputs to feed");
    }
    let axes = model_batch_axes(model, request)?;
    let mut specs = Vec::with_capacity(inputs.len());
    for input in &inputs {
        let dims = input.dims.clone().unwrap_or_default();
        let axis = axes.axis(&input.name)?.filter(|_| !dims.is_empty());
        if axis.is_some() && dims.len() < 2 {
            bail!(
                "{shown}: input '{}' has no batch axis and sample dims",
                input.name
            );
        }
        if let Some((axis, other)) = dims
            .iter()
            .enumerate()
            .filter(|(k, _)| Some(*k) != axis)
            .find(|(_, d)| !matches!(d, Dim::Fixed(_)))
        {
            return Err(fix_with(
                Setting::InputShape,
                format!(
                    "{shown}: input '{}' axis {axis} ('{other}') is not fixed; calibration needs fixed sample dims",
                    input.name
                ),
            ));
        }
        let elem_type = elem_type(input.dtype_code).with_context(|| {
            format!(
                "{shown}: input '{}' is {}, which calibration cannot feed",
                input.name, input.dtype
            )
        })?;
        specs.push(IoSpec {
            name: input.name.clone(),
            elem_type,
            dims,
        });
    }
    let on_0 = |s: &IoSpec| matches!(axes.axis(&s.name), Ok(Some(0)));
    Ok(match specs.as_slice() {
        [one] if one.elem_type == ElemType::F32 && on_0(one) => CalibrationInputs::Single {
            input: one.name.clone(),
            sample: one.concrete_shape(1)?[1..].to_vec(),
        },
        _ => CalibrationInputs::Multi {
            specs,
            roles: int_input_roles(model),
            axes,
        },
    })
}

/// The seed of `synthetic:SEED`, if that is the source.
fn synthetic_seed(calib_data: &str) -> Result<Option<u64>> {
    let Some(seed) = calib_data.strip_prefix("synthetic:") else {
        return Ok(None);
    };
    seed.parse().map(Some).map_err(|_| {
        fix_with(
            Setting::CalibData,
            format!("calibration data {calib_data}: the seed after 'synthetic:' is not a number"),
        )
    })
}

/// Opens the batches `args` names for what the model takes.
fn open_batches(
    args: &CalibrateConfig,
    feed: &CalibrationInputs,
) -> Result<Box<dyn CalibrationBatches>> {
    if args.batch_size == 0 {
        bail!("the calibration batch size must be at least 1");
    }
    let seed = synthetic_seed(&args.calib_data)?;
    let n = args.num_images.unwrap_or(512);
    let source = Path::new(&args.calib_data);
    let (input, sample) = match feed {
        CalibrationInputs::Single { input, sample } => (input, sample),
        CalibrationInputs::Multi { specs, roles, axes } => {
            return Ok(match seed {
                Some(seed) => Box::new(
                    MultiInputBatches::generated(specs, roles.clone(), args.batch_size, n, seed)?
                        .with_axes(axes.clone()),
                ),
                None if source.is_dir() && has_images(source) => {
                    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
                    return Err(fix_with(
                        Setting::CalibData,
                        format!(
                            "{}: images feed a model with one image input; this one takes {} (give .npz files with an array per input, or synthetic:SEED for generated inputs)",
                            source.display(),
                            names.join(", ")
                        ),
                    ));
                }
                None => Box::new(MultiInputBatches::arrays(
                    source,
                    specs,
                    axes,
                    args.batch_size,
                    args.num_images,
                )?),
            });
        }
    };
    if let Some(seed) = seed {
        return Ok(Box::new(SyntheticBatches::new(
            input,
            sample,
            args.batch_size,
            n,
            seed,
        )?));
    }
    if source.is_dir() && has_images(source) {
        return Ok(Box::new(ImageBatches::open(
            source,
            input,
            sample,
            args.batch_size,
            args.num_images,
            &args.preprocess,
        )?));
    }
    Ok(Box::new(ArrayBatches::open(
        source,
        input,
        sample,
        args.batch_size,
        args.num_images,
    )?))
}

/// The samples `args` names (its `calib_data`, batch size, sample count and preprocessing), as
/// batches for what `model` takes (the model with `args`' input shapes applied): the data
/// other jobs measure on, read the way calibration reads it.
pub(crate) fn open_samples(
    model: &OnnxModel,
    args: &CalibrateConfig,
) -> Result<Box<dyn CalibrationBatches>> {
    open_batches(args, &calibration_inputs(model, &args.backend.batch_axes)?)
}

/// One requested algorithm: its key, its cache file and what the lookup found.
struct RequestedCache {
    algo: Algorithm,
    key: CacheKey,
    path: PathBuf,
    found: Option<CalibrationTable>,
    because: Vec<String>,
}

/// Each requested algorithm's cache: its key (from the model and `batches`), its path, and
/// what looking it up found.
fn algorithm_caches(
    args: &CalibrateConfig,
    batches: &dyn CalibrationBatches,
) -> Result<Vec<RequestedCache>> {
    let model_sha256 = file_sha256(&args.model)?;
    let stem = args
        .model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    let algos = &args.algorithms;
    let pending: Vec<RequestedCache> = algos
        .iter()
        .map(|&algo| {
            let key = CacheKey {
                model_sha256: model_sha256.clone(),
                preprocessing: batches.preprocessing(),
                dataset_fingerprint: batches.fingerprint(),
                image_count: batches.image_count(),
                algorithm: algo.to_string(),
                batch_size: args.batch_size,
                trtkit_version: env!("CARGO_PKG_VERSION").into(),
            };
            let path = cache::cache_path(&args.cache_dir, &stem, &key, &algo.file_tag());
            let (found, because) = look_up(&path, &key, args.recalibrate);
            RequestedCache {
                algo,
                key,
                path,
                found,
                because,
            }
        })
        .collect();
    Ok(pending)
}

/// Refuses a graph with a float16 input (one written with `--fp16-io`): INT8 calibration
/// measures the float32 model's ranges, and this graph computes in float16.
fn refuse_fp16_inputs(model: &OnnxModel) -> Result<()> {
    let float16 = crate::onnx::pb::tensor_proto::DataType::Float16 as i32;
    match model_inputs(model).iter().find(|i| i.dtype_code == float16) {
        Some(input) => bail!(
            "{}: input '{}' is float16, an FP16 graph; INT8 calibration reads the float32 model it was made from: calibrate that one",
            model.path.display(),
            input.name
        ),
        None => Ok(()),
    }
}

/// Calibrates (or reuses caches) and returns what happened, telling `progress` how far the
/// run over the batches has got.
pub fn calibrate(args: &CalibrateConfig, progress: &dyn Progress) -> Result<CalibrateReport> {
    let algos = &args.algorithms;
    if algos.is_empty() {
        bail!("no range algorithm given");
    }
    let mut model = OnnxModel::load(&args.model)?;
    let shown = args.model.display().to_string();
    if !args.backend.input_shapes.is_empty() {
        model = InputShapes(args.backend.input_shapes.clone())
            .run(model)
            .with_context(|| shown.clone())?
            .0;
    }
    refuse_fp16_inputs(&model)?;
    let plan = plan_int8(model.graph());
    if plan.is_empty() {
        bail!("{shown}: no quantizable ops (Conv, ConvTranspose, Gemm, MatMul, residual Add); nothing to calibrate, no cache written");
    }
    let feed = calibration_inputs(&model, &args.backend.batch_axes)?;
    let mut batches = open_batches(args, &feed)?;
    let pending = algorithm_caches(args, batches.as_ref())?;
    let (preprocessing, warnings) = describe_inputs(&batches.preprocessing(), &args.preprocess);
    let samples_left_out = batches.summary().available - batches.image_count();
    if pending.iter().all(|p| p.found.is_some()) {
        return Ok(CalibrateReport {
            samples_left_out,
            model: shown,
            preprocessing,
            warnings,
            caches: pending
                .into_iter()
                .filter_map(|mut p| p.found.take().map(|t| reused(p, t)))
                .collect(),
            backend: None,
            timing: None,
            cpu_split: None,
        });
    }
    let total = Instant::now();
    progress.start("calibrating", Some(batches.batch_count() as u64));
    // The model already has the requested shapes; a batch size beyond the samples runs them
    // at their number (the key still says what was asked).
    let options = BackendOptions {
        batch: Some(args.batch_size.min(batches.image_count().max(1))),
        input_shapes: Default::default(),
        ..args.backend.clone()
    };
    let collected = collect(&model, &plan, batches.as_mut(), &options, &|| {
        progress.advance(1)
    })
    .map_err(|e| {
        // A backend that refuses the model names it already.
        match kind_of(&e) {
            Some(ErrorKind::BackendRefusedModel) => e,
            _ => e.context(shown.clone()),
        }
    })?;
    progress.finish();
    let t_search = Instant::now();
    let mut caches = Vec::with_capacity(pending.len());
    for mut p in pending {
        if let Some(table) = p.found.take() {
            caches.push(reused(p, table));
            continue;
        }
        let ranges = compute_ranges(&collected.histograms, p.algo);
        let table = CalibrationTable {
            calibrator: p.algo.trt_calibrator().into(),
            scales: ranges.iter().map(|r| (r.tensor.clone(), r.scale)).collect(),
        };
        cache::store(&p.path, &p.key, &table)?;
        caches.push(CacheReport {
            algorithm: p.algo.to_string(),
            cache: p.path.display().to_string(),
            reused: false,
            recalibrated_because: p.because,
            key: p.key,
            tensors: ranges,
        });
    }
    let search_s = t_search.elapsed().as_secs_f64();
    let total_s = total.elapsed().as_secs_f64();
    let plain = if args.measure_plain {
        // The plain model shares the cores as the calibration's did.
        let options = match &collected.cpu_split {
            Some(split) => BackendOptions {
                threads: Some(split.model_threads),
                spinning: Some(split.spinning),
                ..options
            },
            None => options,
        };
        Some(time_plain(&model, args, &feed, &options)?)
    } else {
        None
    };
    Ok(CalibrateReport {
        samples_left_out,
        model: shown,
        preprocessing,
        warnings,
        caches,
        backend: Some(collected.backend.clone()),
        cpu_split: collected.cpu_split.clone(),
        timing: Some(Timing {
            batches: collected.batches,
            model_s: collected.model_time.as_secs_f64(),
            histogram_cpu_s: collected.histogram_time.as_secs_f64(),
            search_s,
            collect_wall_s: collected.wall_time.as_secs_f64(),
            total_s,
            plain_wall_s: plain.map(|p| p.1),
            plain_model_s: plain.map(|p| p.0),
            overhead_percent: plain
                .map(|p| ((collected.wall_time.as_secs_f64() + search_s) / p.1 - 1.0) * 100.0),
        }),
    })
}

/// Input sides from which the ImageNet evaluation defaults are plausible (224 and the sizes
/// ImageNet models are commonly run at).
const IMAGENET_LIKE_SIDES: std::ops::RangeInclusive<usize> = 160..=320;

/// The preprocessing as people read it (`preprocessing` is the cache key's description: an
/// image preprocessing as JSON, or how arrays were taken), and a warning when images go through
/// the ImageNet defaults (no resize, mean or std asked for) into a model whose input is not
/// ImageNet-sized: its activation ranges would then come from inputs it never sees.
fn describe_inputs(preprocessing: &str, asked: &PreprocessRequest) -> (String, Vec<String>) {
    let Ok(pre) = serde_json::from_str::<Preprocess>(preprocessing) else {
        return (preprocessing.to_string(), Vec::new());
    };
    let described = preprocess_fields(&pre)
        .into_iter()
        .map(|(name, value)| format!("{name} {value}"))
        .collect::<Vec<_>>()
        .join(", ");
    let defaults = asked.resize.is_none() && asked.mean.is_none() && asked.std.is_none();
    let (h, w) = pre.crop;
    let mut warnings = Vec::new();
    if defaults && !(IMAGENET_LIKE_SIDES.contains(&h) && IMAGENET_LIKE_SIDES.contains(&w)) {
        warnings.push(format!(
            "the images are calibrated with the ImageNet evaluation defaults (resize to crop/0.875, ImageNet mean and std) but the model's input is {h}x{w}, not ImageNet-sized: if it was trained with other preprocessing, give the same resize, mean and std as for validation, or the ranges will come from inputs it never sees"
        ));
    }
    (described, warnings)
}

/// Looks a cache up: the table when its key matches (and `--recalibrate` was not given),
/// else the reasons it will be rewritten.
fn look_up(
    path: &Path,
    key: &CacheKey,
    recalibrate: bool,
) -> (Option<CalibrationTable>, Vec<String>) {
    if recalibrate {
        let why = path
            .exists()
            .then(|| "--recalibrate given".to_string())
            .into_iter()
            .collect();
        return (None, why);
    }
    match cache::lookup(path, key) {
        Lookup::Hit(table) => {
            tracing::info!("{}: key matches, reusing", path.display());
            (Some(table), vec![])
        }
        Lookup::Missing => (None, vec![]),
        Lookup::Stale(why) => (None, why.reasons()),
    }
}

/// The report of a cache whose key matched.
fn reused(p: RequestedCache, table: CalibrationTable) -> CacheReport {
    CacheReport {
        algorithm: p.algo.to_string(),
        cache: p.path.display().to_string(),
        reused: true,
        recalibrated_because: vec![],
        key: p.key,
        tensors: table
            .scales
            .iter()
            .map(|(n, &s)| TensorRange {
                tensor: n.clone(),
                amax: s * 127.0,
                scale: s,
                max_abs: f32::NAN,
                count: 0,
            })
            .collect(),
    }
}

/// Runs the unmodified model over the same batches on the same backend (`options`, those the
/// calibration ran with): the baseline its overhead is measured against. Returns (seconds
/// inside the backend, wall).
fn time_plain(
    model: &OnnxModel,
    args: &CalibrateConfig,
    feed: &CalibrationInputs,
    options: &BackendOptions,
) -> Result<(f64, f64)> {
    let mut backend = open(model, options)?;
    let batches = open_batches(args, feed)?;
    let wall = Instant::now();
    let mut model_s = 0.0;
    for b in batches {
        let batch = options.batch.unwrap_or(args.batch_size);
        model_s += run_batched(backend.as_mut(), &b?, batch, &NoProgress)?
            .inference
            .as_secs_f64();
    }
    Ok((model_s, wall.elapsed().as_secs_f64()))
}
