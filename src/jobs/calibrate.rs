//! The calibrate job: a model and a source of batches in, one keyed cache per range algorithm
//! out (reused when its key matches, rewritten with the reasons when it does not). `trtkit
//! calibrate` runs it; `build --int8` and `quantize` run it through [`int8_scales`] when their
//! INT8 plan asks for calibration rather than giving a cache.

use crate::backend::batch_runner::run_batched;
use crate::backend::open;
use crate::backend::select::BackendOptions;
use crate::calibration::cache::{self, check_cache_model, CacheKey, CalibrationTable};
use crate::calibration::collect::{collect, compute_ranges, TensorRange};
use crate::calibration::range::Algorithm;
use crate::calibration::request::{calibration_inputs, open_batches, CalibrationInputs};
use crate::calibration::sample_source::CalibrationBatches;
use crate::data::preprocess::{preprocess_fields, Preprocess, PreprocessRequest};
use crate::digest::{file_sha256, sha256_hex};
use crate::error::{kind_of, ErrorKind};
use crate::keyed_artifact::Lookup;
use crate::onnx::rewrite::pass::run_pass;
use crate::onnx::rewrite::plan::plan_int8;
use crate::onnx::shape::{model_inputs, InputShapes};
use crate::onnx::OnnxModel;
use crate::progress::{NoProgress, Progress};
use crate::quantize::plan::{Int8Scales, Int8Source, PrecisionPlan};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::Instant;

pub use crate::calibration::request::{CacheReport, CalibrateConfig, CalibrateReport, Timing};

/// The INT8 scales of `model` (its file's SHA-256 `model_sha256`): calibrated (or the keyed
/// cache reused), or read from the cache given, which must have been made for this model.
/// `None` for a plan that is not INT8.
pub(crate) fn int8_scales(
    plan: &PrecisionPlan,
    model: &Path,
    model_sha256: &str,
    progress: &dyn Progress,
) -> Result<Option<Int8Scales>> {
    let Some(int8) = plan.int8() else {
        return Ok(None);
    };
    match &int8.scales {
        Int8Source::Cache(path) => {
            let table = CalibrationTable::load(path)?;
            check_cache_model(path, model, model_sha256)?;
            let bytes =
                std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
            Ok(Some(Int8Scales {
                scales: table.scales,
                cache: path.display().to_string(),
                key_hash: sha256_hex(&bytes),
                calibration: None,
            }))
        }
        Int8Source::Calibrate(cal) => {
            let cal = CalibrateConfig {
                model: model.to_path_buf(),
                ..(**cal).clone()
            };
            if cal.algorithms.len() != 1 {
                bail!(
                    "an INT8 build takes one range algorithm, {} were given",
                    cal.algorithms.len()
                );
            }
            let report = calibrate(&cal, progress)?;
            // The scales and the key are in the report, whether the cache was reused or
            // written.
            let cache = &report.caches[0];
            Ok(Some(Int8Scales {
                scales: cache
                    .tensors
                    .iter()
                    .map(|t| (t.tensor.clone(), t.scale))
                    .collect(),
                cache: cache.cache.clone(),
                key_hash: sha256_hex(serde_json::to_string(&cache.key)?.as_bytes()),
                calibration: Some(report),
            }))
        }
    }
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
        model = run_pass(model, &InputShapes(args.backend.input_shapes.clone()))
            .with_context(|| shown.clone())?;
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
