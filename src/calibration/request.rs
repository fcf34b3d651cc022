//! What a calibration is asked ([`CalibrateConfig`]) and what it reports ([`CalibrateReport`]),
//! and the batches it reads a model's inputs from ([`open_samples`]); the run itself is the
//! `calibrate` job (`jobs::calibrate`), which `trtkit calibrate` and `trtkit build --int8` run.
//! These types live below the jobs because an INT8 precision plan carries a calibration request.

use super::cache::CacheKey;
use super::collect::TensorRange;
use super::image_source::{has_images, ImageBatches};
use super::multi_input::MultiInputBatches;
use super::range::Algorithm;
use super::sample_source::{ArrayBatches, CalibrationBatches, SyntheticBatches};
use crate::backend::select::BackendOptions;
use crate::data::preprocess::PreprocessRequest;
use crate::error::{fix_with, Setting};
use crate::onnx::dtype::elem_type;
use crate::onnx::input_roles::int_input_roles;
use crate::onnx::shape::{model_batch_axes, model_inputs};
use crate::onnx::OnnxModel;
use crate::tensor::{BatchAxes, BatchAxisRequest, Dim, ElemType, IntInput, IoSpec};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
pub(crate) enum CalibrationInputs {
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
pub(crate) fn calibration_inputs(
    model: &OnnxModel,
    request: &BatchAxisRequest,
) -> Result<CalibrationInputs> {
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
pub(crate) fn open_batches(
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
