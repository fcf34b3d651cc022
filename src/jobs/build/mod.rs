//! The build job: an ONNX model and trtkit's options in, a keyed engine on disk out.
//!
//! The pipeline is a chain of passes: load and hash the model; apply `--input-shape`; resolve
//! the optimization profile; for INT8, calibrate (or reuse the keyed cache); look the engine up
//! by its key (reuse it, or say why not); rewrite the graph for the precision (FP16 autocast or
//! Q/DQ, since TensorRT 11 and TensorRT-RTX have no precision flags); parse and build with
//! TensorRT-RTX; write the engine and its sidecar atomically.

mod landing;
mod lock;
pub(crate) mod report;

use crate::jobs::calibrate::int8_scales;
use crate::onnx::deferred_weights::DeferredWeights;
use crate::onnx::external::is_external;
use crate::onnx::rewrite::pass::{run_passes, Pass, PassReport};
use crate::onnx::shape::{
    check_named_axes, model_inputs, Batch, DimSpec, FixBatch, InputShape, InputShapes, NamedDim,
    ShapeRequest,
};
use crate::onnx::OnnxModel;
use crate::progress::Progress;
use crate::quantize::already_quantized::refuse_quantized;
use crate::quantize::plan::{Fallback, Int8Rewrite, Int8Scales, PrecisionPlan};
use crate::tensor::{Dim, Precision};
use crate::trt::engine_builder::{BuildLog, Loading};
use crate::trt::engine_file::{engine_path, BuilderSettings, EngineKey};
use crate::trt::loader::{TrtLibraries, BOUND};
use crate::trt::model_file::ModelFile;
use crate::trt::profile::{resolve_profile, AxisRange, BatchRequest, ExplicitShapes, ShapeProfile};
use anyhow::{Context, Result};
use landing::{build_with_kept_graph, check_writable, explain_pinned_batch, land, Landing};
use lock::{reuse_engine, BuildLock};
use report::{new_report, tensorrt_used};
pub use report::{BuildReport, BuildTiming, Int8Summary, TensorRtUsed};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// The named-axis sizes the INT8 calibration of a build runs at: the build's fixed ones
/// (`fixed`, its input shape request), and each profile range's opt. (The input shapes stay the
/// engine's: calibration sets the batch itself, and a `-1` batch on a model exported with a
/// fixed one is a build-only rewrite.)
pub(crate) fn calibration_shapes(fixed: &ShapeRequest, axes: &[AxisRange]) -> ShapeRequest {
    let opt: Vec<NamedDim> = axes
        .iter()
        .map(|a| NamedDim {
            symbol: a.symbol.clone(),
            size: a.range.opt,
        })
        .collect();
    ShapeRequest {
        shapes: vec![],
        dims: fixed.dims.clone(),
    }
    .with_dims(&opt)
}

/// Everything a build needs; no flag names here.
#[derive(Clone, Debug)]
pub struct BuildConfig {
    /// The ONNX model.
    pub model: PathBuf,
    /// `--input-shape` overrides applied to the model before anything else (`-1` = dynamic).
    pub input_shapes: ShapeRequest,
    /// Batch range for a dynamic batch axis.
    pub batch: BatchRequest,
    /// Explicit min/opt/max shapes per input (win over the batch range).
    pub explicit_shapes: ExplicitShapes,
    /// The precision rewrite: FP16 options, or INT8 scales (required for INT8), exclusions
    /// and fallback.
    pub plan: PrecisionPlan,
    /// Builder settings.
    pub builder: BuilderSettings,
    /// Where to write the engine (default: a keyed name in `engine_dir`).
    pub output: Option<PathBuf>,
    /// Folder of keyed engines.
    pub engine_dir: PathBuf,
    /// Build even if an engine with the same key exists.
    pub rebuild: bool,
    /// Folder holding the TensorRT-RTX libraries (else `TRTKIT_TENSORRT_DIR`, the system, the
    /// Python package).
    pub tensorrt_dir: Option<PathBuf>,
}

/// What a build needs to tell as it goes.
pub struct BuildObservers<'a> {
    /// The calibration run over batches.
    pub calibration: &'a dyn Progress,
    /// TensorRT's builder phases.
    pub builder: Arc<dyn Progress>,
    /// One-line notes as they happen (reusing a cache, recalibrating and why, …).
    pub note: &'a dyn Fn(&str),
}

/// The summary of the INT8 `scales` of a build with `plan`, for its report.
fn int8_summary(scales: &Int8Scales, plan: &PrecisionPlan) -> Int8Summary {
    Int8Summary {
        cache: scales.cache.clone(),
        calibration: scales.calibration.clone(),
        rewrite: Int8Rewrite {
            fallback: plan
                .int8()
                .map(|p| p.fallback)
                .filter(|f| *f != Fallback::Fp32),
            ..Int8Rewrite::default()
        },
    }
}

/// The input whose fixed batch axis a `-1` in `shapes` asks to make dynamic, if any.
fn fixed_batch_made_dynamic(model: &OnnxModel, shapes: &[InputShape]) -> Option<String> {
    let inputs = model_inputs(model);
    shapes.iter().find_map(|s| {
        let input = match &s.name {
            Some(n) => inputs.iter().find(|i| &i.name == n)?,
            None if inputs.len() == 1 => &inputs[0],
            None => return None,
        };
        let fixed = matches!(input.dims.as_deref(), Some([Dim::Fixed(_), ..]));
        (fixed && s.dims.first() == Some(&DimSpec::Dynamic)).then(|| input.name.clone())
    })
}

/// The passes on the input declarations, run at load (the profile and the engine key are read
/// from their result): release a fixed batch that `-1` asks to make dynamic, then the input
/// shapes.
fn shape_passes(config: &BuildConfig, released_batch: bool) -> Vec<Box<dyn Pass>> {
    let mut passes: Vec<Box<dyn Pass>> = Vec::new();
    if released_batch {
        passes.push(Box::new(FixBatch::new(Batch::Dynamic)));
    }
    if !config.input_shapes.is_empty() {
        passes.push(Box::new(InputShapes(config.input_shapes.clone())));
    }
    passes
}

/// Runs the build (or reuses the engine whose key matches).
pub fn build(config: &BuildConfig, observers: &BuildObservers) -> Result<BuildReport> {
    if config.plan.search_result().is_none() {
        return build_with_plan(config, observers);
    }
    let config = BuildConfig {
        plan: config.plan.with_search_result()?,
        ..config.clone()
    };
    build_with_plan(&config, observers)
}

/// The model read and shaped, and TensorRT's libraries: loaded, or still loading where they are
/// needed only `late`.
struct Started {
    file: ModelFile,
    deferred: DeferredWeights,
    shaped: ShapedModel,
    libs: Option<TrtLibraries>,
    loading: Option<Loading>,
    /// Forced into a named file, the model's hash and TensorRT's version are needed only for
    /// the sidecar: both come late, while the model is rewritten and TensorRT builds.
    late: bool,
}

/// Reads the model while TensorRT's libraries are found and loaded (their errors come first),
/// waiting for them unless they are needed only late.
fn start_build(config: &BuildConfig, observers: &BuildObservers) -> Result<Started> {
    let late =
        config.rebuild && config.output.is_some() && config.plan.precision() != Precision::Int8;
    let loading = Loading::start(config.tensorrt_dir.as_deref());
    let read = read_model(config, observers, !late);
    let (libs, loading) = if late {
        (None, Some(loading))
    } else {
        (Some(loading.wait()?), None)
    };
    let (file, deferred, shaped) = read?;
    Ok(Started {
        file,
        deferred,
        shaped,
        libs,
        loading,
        late,
    })
}

/// [`build`], with the nodes of the plan's search result among its own.
fn build_with_plan(config: &BuildConfig, observers: &BuildObservers) -> Result<BuildReport> {
    let start = Instant::now();
    let shown = config.model.display().to_string();
    let precision = config.plan.precision();
    let Started {
        mut file,
        deferred,
        shaped,
        libs,
        loading,
        late,
    } = start_build(config, observers)?;
    let ShapedModel {
        model,
        released_batch,
        reshaped,
        changed,
        profile,
    } = shaped;
    let default_batch_range =
        !config.batch.is_set() && !config.explicit_shapes.is_set() && !profile.is_static();
    let model_sha256 = if late {
        String::new()
    } else {
        file.sha256().to_string()
    };
    let load_s = start.elapsed().as_secs_f64();

    let t_cal = Instant::now();
    let scales = int8_scales(
        &config.plan,
        &config.model,
        &model_sha256,
        observers.calibration,
    )?;
    let calibrate_s = t_cal.elapsed().as_secs_f64();

    let key = engine_key(
        config,
        model_sha256,
        scales.as_ref(),
        profile,
        libs.as_ref(),
    );
    let path = output_path(config, &key, reshaped);
    let mut report = new_report(
        &shown,
        &path,
        key.clone(),
        default_batch_range,
        tensorrt_used(libs.as_ref()),
        scales.as_ref().map(|s| int8_summary(s, &config.plan)),
        BuildTiming {
            load_s,
            calibrate_s,
            ..Default::default()
        },
    );

    // A second build waits here, then reuses; a folder that cannot hold the lock still reuses.
    let lock = BuildLock::acquire(&path, observers.note);
    let t_look = Instant::now();
    if reuse_engine(config.rebuild, &path, &key, &mut report) {
        report.timing.write_s = t_look.elapsed().as_secs_f64();
        report.timing.total_s = start.elapsed().as_secs_f64();
        return Ok(report);
    }
    let lookup_s = t_look.elapsed().as_secs_f64();
    check_writable(&path)?;
    let _lock = lock?;

    let t_rewrite = Instant::now();
    let parameters: u64 = model.parameters();
    let (model, rewritten) = rewrite_precision(
        config,
        model,
        scales.as_ref(),
        changed,
        (deferred, file.bytes()),
        &mut report,
    )?;
    file.start_hashing(); // if late: while TensorRT builds, off the rewrite's cores
    let onnx_bytes = rewritten.as_deref().unwrap_or(file.bytes());
    report.timing.rewrite_s = t_rewrite.elapsed().as_secs_f64();

    let mut key = key;
    if let Some(loading) = loading {
        wait_late(loading, &mut key, &mut report)?;
    }
    let log = BuildLog::new()?;
    let (built, kept_graph) = build_with_kept_graph(
        &log,
        precision,
        &config.builder,
        &model,
        onnx_bytes,
        &key,
        &path,
        observers.builder.clone(),
    );
    let built = built
        .map_err(|e| explain_pinned_batch(e, &released_batch))
        .with_context(|| shown.clone())?;
    let kept_graph = kept_graph.transpose()?;
    report.timing.parse_s = built.parse_s;
    report.timing.build_s = built.build_s;
    let t_write = Instant::now();
    if late {
        key.model_sha256 = file.sha256().to_string();
        report.key.model_sha256.clone_from(&key.model_sha256);
    }
    let landing = Landing {
        path: &path,
        source_model: shown.clone(),
        onnx_nodes: model.graph().node.len(),
        parameters,
    };
    // The model, its rewritten bytes and the mapped file (hundreds of MB for a large model)
    // are freed on another thread while the engine is written and hashed.
    let written = std::thread::scope(|s| {
        s.spawn(move || drop((model, rewritten, file)));
        land(landing, kept_graph, built, key)
    })?;
    report.engine_bytes = written.facts.engine_bytes;
    report.facts = written.facts;
    report.timing.write_s = lookup_s + t_write.elapsed().as_secs_f64();
    report.timing.total_s = start.elapsed().as_secs_f64();
    Ok(report)
}

/// Maps the model file (hashing it from now on with `hash_now`), decodes it with its large weights left in the file's bytes
/// (until a step reads them: an FP32 build at the model's own shapes never does), and applies
/// the build's shapes.
fn read_model(
    config: &BuildConfig,
    observers: &BuildObservers,
    hash_now: bool,
) -> Result<(ModelFile, DeferredWeights, ShapedModel)> {
    let file = ModelFile::open(&config.model, hash_now)?;
    let (model, deferred) = OnnxModel::from_bytes_deferring(&config.model, file.bytes())?;
    // An FP16 or INT8 rewrite needs float weights; refused before any calibration.
    let precision = config.plan.precision();
    if precision != Precision::Fp32 {
        refuse_quantized(&model, &precision.to_string().to_uppercase())?;
    }
    let shaped = shape_model(config, model, observers)?;
    Ok((file, deferred, shaped))
}

/// Waits for TensorRT's libraries where the build did not need them before building, and puts
/// their version in the engine's `key` and the `report`.
fn wait_late(loading: Loading, key: &mut EngineKey, report: &mut BuildReport) -> Result<()> {
    let libs = loading.wait()?;
    key.tensorrt_version.clone_from(&libs.version);
    report.key.tensorrt_version.clone_from(&libs.version);
    report.tensorrt = tensorrt_used(Some(&libs));
    Ok(())
}

/// What identifies the engine this build makes (see [`EngineKey`]); `libs`: `None` while not
/// yet waited for (the version is then filled in before the engine is written).
fn engine_key(
    config: &BuildConfig,
    model_sha256: String,
    scales: Option<&Int8Scales>,
    profile: ShapeProfile,
    libs: Option<&TrtLibraries>,
) -> EngineKey {
    EngineKey {
        model_sha256,
        precision: config.plan.precision(),
        rewrite: config.plan.tag(),
        calibration: scales.map(|s| s.key_hash.clone()),
        profile,
        builder: config.builder.clone(),
        tensorrt_flavour: BOUND.flavour,
        tensorrt_version: libs.map(|l| l.version.clone()).unwrap_or_default(),
        trtkit_version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// Where the engine goes: `--output`, else its keyed name in the engine folder.
fn output_path(config: &BuildConfig, key: &EngineKey, reshaped: bool) -> PathBuf {
    let stem = config
        .model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    config
        .output
        .clone()
        .unwrap_or_else(|| engine_path(&config.engine_dir, &stem, key, reshaped))
}

/// The model with its shapes as the build asks, and what that changed.
struct ShapedModel {
    model: OnnxModel,
    /// The input whose fixed batch was made dynamic, if one was.
    released_batch: Option<String>,
    /// Whether an input-shapes pass changed a declaration.
    reshaped: bool,
    /// Whether any pass changed the model (then it is serialized again).
    changed: bool,
    profile: ShapeProfile,
}

/// Runs the shape passes of `config` on `model` and resolves its optimization profile.
fn shape_model(
    config: &BuildConfig,
    model: OnnxModel,
    observers: &BuildObservers,
) -> Result<ShapedModel> {
    let shown = config.model.display().to_string();
    let mut model = model;
    let released_batch = fixed_batch_made_dynamic(&model, &config.input_shapes.shapes);
    if let Some(fixed) = &released_batch {
        (observers.note)(&format!(
            "{shown}: input '{fixed}' was exported with a fixed batch; its batch axis is made dynamic"
        ));
    }
    let passes = shape_passes(config, released_batch.is_some());
    let (shaped, reports) =
        run_passes(model, &passes.iter().map(AsRef::as_ref).collect::<Vec<_>>())
            .with_context(|| shown.clone())?;
    model = shaped;
    // `-1 3 224 224` on a model that is already dynamic in batch changes nothing: the
    // file's own bytes go to TensorRT then, without serializing the model again.
    let reshaped = reports
        .iter()
        .any(|r| matches!(r, PassReport::InputShapes { changed } if !changed.is_empty()));
    let changed = reports.iter().any(|r| match r {
        PassReport::FixBatch { .. } => true,
        PassReport::InputShapes { changed } => !changed.is_empty(),
        _ => false,
    });
    check_named_axes(
        &model,
        config
            .explicit_shapes
            .axes
            .iter()
            .map(|a| a.symbol.as_str()),
    )
    .with_context(|| shown.clone())?;
    let profile: ShapeProfile = resolve_profile(
        &model_inputs(&model),
        &config.batch,
        &config.explicit_shapes,
    )
    .with_context(|| shown.clone())?;
    Ok(ShapedModel {
        model,
        released_batch,
        reshaped,
        changed,
        profile,
    })
}

/// Applies the build's precision plan to `model` (recording what it did in `report`) and
/// returns it with the bytes TensorRT parses, or `None` where those are the file's own: when
/// nothing changed and no data is external. `weights`: the weights still in the file's bytes,
/// put back where a step reads them (the FP16 rewrite converts them straight from the file).
fn rewrite_precision(
    config: &BuildConfig,
    model: OnnxModel,
    scales: Option<&Int8Scales>,
    changed: bool,
    weights: (DeferredWeights, &[u8]),
    report: &mut BuildReport,
) -> Result<(OnnxModel, Option<Vec<u8>>)> {
    let shown = config.model.display().to_string();
    let (mut deferred, file) = weights;
    let t_passes = Instant::now();
    let (model, changed) = match config.plan.precision() {
        Precision::Fp32 => {
            let mut model = model;
            if changed || model.graph().initializer.iter().any(is_external) {
                deferred.restore(model.graph_mut(), file);
            }
            (model, changed)
        }
        Precision::Fp16 => {
            let applied = config
                .plan
                .apply(model, scales, Some((deferred, file)), false)
                .context("fp16 pass")
                .with_context(|| shown.clone())?;
            report.fp16 = applied.fp16;
            (applied.model, true)
        }
        Precision::Int8 => {
            let applied = config
                .plan
                .apply(model, scales, Some((deferred, file)), false)?;
            if let (Some(s), Some(int8)) = (report.int8.as_mut(), applied.int8) {
                s.rewrite.quantized_activations = Some(int8.activations);
                s.rewrite.quantized_weights = Some(int8.weights);
                s.rewrite.float_nodes = Some(int8.float_nodes).filter(|f| !f.is_empty());
            }
            (applied.model, true)
        }
    };
    tracing::debug!(
        "precision passes: {:.3} s",
        t_passes.elapsed().as_secs_f64()
    );
    let mut model = model;
    let has_external = model.graph().initializer.iter().any(is_external);
    if !(changed || has_external) {
        return Ok((model, None));
    }
    model
        .inline_external_data()
        .with_context(|| shown.clone())?;
    let t_encode = Instant::now();
    let bytes = model.to_bytes();
    tracing::debug!(
        "graph serialized: {} bytes in {:.3} s",
        bytes.len(),
        t_encode.elapsed().as_secs_f64()
    );
    Ok((model, Some(bytes)))
}
