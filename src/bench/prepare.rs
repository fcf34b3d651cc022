//! The file a cell runs: the FP32 model itself, its FP16 or INT8 rewrite (made once per model and
//! kept in the results folder, so reference targets measure the same graphs TensorRT builds), or
//! a TensorRT engine built once per model × precision × batch range × swept axis size through
//! `build`'s keyed engines (each engine is static in the swept axes, as published per-length
//! figures are measured). Everything is written atomically under a keyed name, so the second cell that needs
//! it, in this process or another, finds it.

use super::plan::CellSpec;
use crate::atomic_file::FileLock;
use crate::backend::select::BackendOptions;
use crate::backend::select::Runtime;
use crate::calibration::range::Algorithm;
use crate::digest::sha256_hex16;
use crate::jobs::build::{build, BuildConfig, BuildObservers};
use crate::jobs::calibrate::{calibrate, CalibrateConfig};
use crate::jobs::quantize::{quantize, QuantizeConfig, Rewrite};
use crate::onnx::shape::fixed_batch;
use crate::onnx::OnnxModel;
use crate::progress::NoProgress;
use crate::quantize::plan::{Fp16Plan, Int8Plan, Int8Source, PrecisionPlan};
use crate::tensor::Precision;
use crate::trt::engine_file::BuilderSettings;
use crate::trt::profile::{BatchRequest, ExplicitShapes};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// What a cell runs, and what making it cost.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The ONNX model or engine.
    pub path: PathBuf,
    /// Seconds spent making it (0 when it was there already).
    pub seconds: f64,
    /// What was made or reused, for the record's notes.
    pub notes: Vec<String>,
}

/// Batch size calibration runs at: the model's fixed batch, else 8.
fn calibration_batch(model: &Path) -> usize {
    let Ok(m) = OnnxModel::load(model) else {
        return 8;
    };
    fixed_batch(&m).filter(|&n| n > 0).unwrap_or(8)
}

/// The calibration job of a cell's model (the same for every cell of the model: its swept
/// axes at their largest size).
fn calibration(spec: &CellSpec) -> Result<CalibrateConfig> {
    let s = &spec.settings;
    let largest = spec
        .key
        .dims
        .keys()
        .filter_map(|symbol| Some((symbol.clone(), *s.dim_max.get(symbol)?)))
        .collect();
    Ok(CalibrateConfig {
        model: spec.model.clone(),
        calib_data: s.calib_data.clone(),
        batch_size: calibration_batch(&spec.model),
        num_images: s.calib_samples,
        algorithms: vec![Algorithm::Entropy],
        recalibrate: false,
        cache_dir: spec.folder.join("calibration"),
        measure_plain: false,
        backend: BackendOptions {
            threads: s.threads,
            input_shapes: s.shape_request(&largest)?,
            ..Default::default()
        },
        preprocess: s.preprocess.clone(),
    })
}

/// Holds the results folder's lock on what the cells of `spec`'s model and precision share (its
/// rewrite, calibration cache and engines), so that of several cells running at once (other
/// GPUs, other nodes of a cluster) one makes them and the others wait, then reuse them.
fn lock_shared_files(spec: &CellSpec, notes: &mut Vec<String>) -> Result<FileLock> {
    let dir = spec.folder.join("locks");
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let hash8 = &spec.key.model_sha256[..8.min(spec.key.model_sha256.len())];
    let name = format!("{}-{hash8}-{}.lock", spec.model_name(), spec.key.precision);
    let lock = FileLock::acquire(&dir.join(name))?;
    if lock.waited_s >= 0.5 {
        notes.push(format!(
            "waited {:.1} s for another cell making this model's {} files",
            lock.waited_s, spec.key.precision
        ));
    }
    Ok(lock)
}

/// The file cell `spec` runs, made if it is not there yet.
pub fn prepare(spec: &CellSpec) -> Result<Prepared> {
    let start = Instant::now();
    let mut notes = vec![];
    let precision = spec.key.precision;
    let _shared = match (spec.key.target, precision) {
        (Runtime::Trt, _) | (_, Precision::Fp16 | Precision::Int8) => {
            Some(lock_shared_files(spec, &mut notes)?)
        }
        _ => None,
    };
    let path = match (spec.key.target, precision) {
        (Runtime::Trt, _) => build_engine(spec, &mut notes)?,
        (_, Precision::Fp32) => spec.model.clone(),
        (_, Precision::Fp16) => rewrite(
            spec,
            Rewrite::Precision(Box::new(PrecisionPlan::Fp16(Fp16Plan::default()))),
            "fp16",
            &mut notes,
        )?,
        (_, Precision::Int8) => {
            let report = calibrate(&calibration(spec)?, &NoProgress)
                .with_context(|| format!("{}: INT8 calibration", spec.model.display()))?;
            let cache = report
                .caches
                .first()
                .map(|c| PathBuf::from(&c.cache))
                .context("calibration wrote no cache")?;
            notes.push(format!(
                "int8 scales: {} ({})",
                cache.display(),
                if report.caches[0].reused {
                    "reused"
                } else {
                    "calibrated"
                }
            ));
            let tag = format!("int8-{}", &sha256_hex16(&std::fs::read(&cache)?)[..8]);
            let how = Rewrite::Precision(Box::new(PrecisionPlan::Int8(Int8Plan::new(
                Int8Source::Cache(cache),
            ))));
            rewrite(spec, how, &tag, &mut notes)?
        }
    };
    Ok(Prepared {
        path,
        seconds: start.elapsed().as_secs_f64(),
        notes,
    })
}

/// The rewritten model `<folder>/models/<stem>-<hash8>-<tag>.onnx`, made once.
fn rewrite(spec: &CellSpec, how: Rewrite, tag: &str, notes: &mut Vec<String>) -> Result<PathBuf> {
    let dir = spec.folder.join("models");
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let hash8 = &spec.key.model_sha256[..8.min(spec.key.model_sha256.len())];
    let out = dir.join(format!("{}-{hash8}-{tag}.onnx", spec.model_name()));
    if out.is_file() {
        notes.push(format!("{tag} model reused: {}", out.display()));
        return Ok(out);
    }
    quantize(&QuantizeConfig {
        model: spec.model.clone(),
        rewrite: how,
        output: out.clone(),
        check: false,
        check_shapes: Default::default(),
    })
    .with_context(|| format!("{}: {tag} rewrite", spec.model.display()))?;
    notes.push(format!("{tag} model written: {}", out.display()));
    Ok(out)
}

/// The engine for the cell's model and precision over the plan's batch range, at the cell's
/// swept axis sizes, through `build` (which reuses an engine with the same key).
fn build_engine(spec: &CellSpec, notes: &mut Vec<String>) -> Result<PathBuf> {
    let s = &spec.settings;
    let precision = spec.key.precision;
    let (min, max) = s.batch_range;
    let config = BuildConfig {
        model: spec.model.clone(),
        input_shapes: s.shape_request(&spec.key.dims)?,
        batch: BatchRequest {
            min: Some(min as i64),
            opt: Some(max as i64),
            max: Some(max as i64),
        },
        explicit_shapes: ExplicitShapes::default(),
        plan: match precision {
            Precision::Fp32 => PrecisionPlan::Fp32,
            Precision::Fp16 => PrecisionPlan::Fp16(Fp16Plan::default()),
            Precision::Int8 => PrecisionPlan::Int8(Int8Plan::new(Int8Source::Calibrate(Box::new(
                calibration(spec)?,
            )))),
        },
        builder: BuilderSettings::default(),
        output: None,
        engine_dir: spec.folder.join("engines"),
        rebuild: false,
        tensorrt_dir: s.tensorrt_dir.clone(),
    };
    let note = |_: &str| {};
    let report = build(
        &config,
        &BuildObservers {
            calibration: &NoProgress,
            builder: Arc::new(NoProgress),
            note: &note,
        },
    )?;
    notes.push(format!(
        "engine {}: {}",
        if report.reused { "reused" } else { "built" },
        report.engine
    ));
    Ok(PathBuf::from(report.engine))
}
