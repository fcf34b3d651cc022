//! The matrix to run: from flags, from a TOML plan file with the same fields, or both (flags
//! win). A checked [`Plan`] expands into [`CellSpec`]s, one per model × precision × batch ×
//! swept axis size × target, each self-contained: the child process that runs a cell needs
//! nothing else.

use super::devices::{DeviceRequest, GpuSlot};
use super::dims::{checked_dims, dims_of_model};
use super::key::{hex16, CellKey};
use super::target::Target;
use crate::data::dataset::Annotations;
use crate::data::preprocess::PreprocessRequest;
use crate::onnx::shape::{dim_points, parse_input_shapes, DimSweep, NamedDim, ShapeRequest};
use crate::tensor::Precision;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A plan as written: every field optional, so a file and flags can be layered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// Name of the run: results go to `<results>/<name>/`.
    pub name: Option<String>,
    /// Folder holding every run's results folder (default `results`).
    pub results: Option<PathBuf>,
    /// ONNX models (FP32).
    pub models: Option<Vec<PathBuf>>,
    /// `fp32`, `fp16`, `int8`.
    pub precisions: Option<Vec<Precision>>,
    /// Batch sizes.
    pub batch_sizes: Option<Vec<usize>>,
    /// Input shapes as `--input-shape` takes them (`input_ids:-1x128`), for every cell.
    pub input_shapes: Option<Vec<String>>,
    /// Named axes to sweep, a `[dims]` table (`seq = [64, 128, 256, 512]`): every model whose
    /// inputs carry the axis runs at each size.
    pub dims: Option<BTreeMap<String, Vec<i64>>>,
    /// `trt`, `tract-cpu`, `tract-cuda`, `ort-cpu`.
    pub targets: Option<Vec<Target>>,
    /// ImageNet-style folder for top-1/top-5 (or the images of `masks` / `coco`).
    pub dataset: Option<PathBuf>,
    /// Segmentation: a folder of PNG masks named after the dataset's images (accuracy = mIoU).
    pub masks: Option<PathBuf>,
    /// Detection: COCO-format annotations of the dataset's images (accuracy = mAP).
    pub coco: Option<PathBuf>,
    /// Images of the dataset per cell.
    pub limit: Option<usize>,
    /// Compare each cell's outputs with the FP32 model on the reference target.
    pub compare: Option<bool>,
    /// Where the FP32 reference of `compare` runs (default `tract-cpu`).
    pub reference: Option<Target>,
    /// Samples compared per cell (default: the batch size, at least 8).
    pub compare_samples: Option<usize>,
    /// INT8 calibration data: a folder of images or .npy/.npz, or `synthetic:SEED`.
    pub calib_data: Option<String>,
    /// Calibration samples (default: all; 512 for synthetic data).
    pub calib_samples: Option<usize>,
    /// Warm-up iterations per cell.
    pub warmup: Option<u64>,
    /// Measured iterations per cell (instead of `duration`).
    pub iterations: Option<u64>,
    /// Seconds measured per cell (default 2; at least one iteration runs).
    pub duration: Option<f64>,
    /// Time limit of one cell, seconds, its preparation included (default 600).
    pub cell_timeout: Option<f64>,
    /// NVML sampling rate, Hz (0 = off; default 20).
    pub nvml_hz: Option<f64>,
    /// CPU threads of CPU targets (default: every core).
    pub threads: Option<usize>,
    /// The GPU (default 0).
    pub device_id: Option<usize>,
    /// Several GPUs at once (`[0, 1]` or `"all"`): GPU cells run concurrently, one per board.
    pub devices: Option<DeviceRequest>,
    /// CPU-target cells run at once beside the GPU cells of a `devices` run (default 1).
    pub cpu_cells: Option<usize>,
    /// Folder holding the TensorRT libraries.
    pub tensorrt_dir: Option<PathBuf>,
    /// How images become model input, for the dataset and image calibration data (a
    /// `[preprocess]` table with `validate`'s settings; unset ones follow the model's input).
    pub preprocess: Option<PreprocessRequest>,
}

impl PlanFile {
    /// Reads a TOML plan file.
    pub fn load(path: &Path) -> Result<PlanFile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read the plan", path.display()))?;
        let mut plan: PlanFile = toml::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}: not a bench plan: {}",
                path.display(),
                e.to_string().trim().replace('\n', " ")
            )
        })?;
        // Paths in a plan file are relative to the file.
        let base = path.parent().unwrap_or(Path::new(""));
        let rebase = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        plan.models.iter_mut().flatten().for_each(rebase);
        plan.dataset.iter_mut().for_each(rebase);
        plan.masks.iter_mut().for_each(rebase);
        plan.coco.iter_mut().for_each(rebase);
        plan.results.iter_mut().for_each(rebase);
        plan.tensorrt_dir.iter_mut().for_each(rebase);
        if plan.name.is_none() {
            plan.name = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        }
        Ok(plan)
    }

    /// `self` with every field `over` sets replaced by `over`'s.
    /// The swept axes merge axis by axis (`--dim seq=64` replaces the file's `seq` only), and so
    /// do the preprocessing settings.
    pub fn overridden_by(self, over: PlanFile) -> PlanFile {
        let preprocess = match (over.preprocess, self.preprocess) {
            (Some(top), Some(base)) => Some(top.with_defaults_from(&base)),
            (top, base) => top.or(base),
        };
        let dims = match (over.dims, self.dims) {
            (Some(top), Some(mut base)) => {
                base.extend(top);
                Some(base)
            }
            (top, base) => top.or(base),
        };
        macro_rules! pick {
            ($($f:ident),*) => { PlanFile { preprocess, dims, $($f: over.$f.or(self.$f)),* } };
        }
        pick!(
            name,
            results,
            models,
            precisions,
            batch_sizes,
            input_shapes,
            targets,
            dataset,
            masks,
            coco,
            limit,
            compare,
            reference,
            compare_samples,
            calib_data,
            calib_samples,
            warmup,
            iterations,
            duration,
            cell_timeout,
            nvml_hz,
            threads,
            device_id,
            devices,
            cpu_cells,
            tensorrt_dir
        )
    }
}

/// The checked plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Name of the run.
    pub name: String,
    /// `<results>/<name>`: the journal, logs, rewritten models, engines, calibration caches.
    pub folder: PathBuf,
    /// ONNX models.
    pub models: Vec<PathBuf>,
    /// Precisions.
    pub precisions: Vec<Precision>,
    /// Batch sizes, ascending.
    pub batch_sizes: Vec<usize>,
    /// The swept named axes of each model (in the order of `models`): those of the plan's axes
    /// that its inputs carry, each with its sizes, ascending.
    pub model_dims: Vec<DimSweep>,
    /// Targets.
    pub targets: Vec<Target>,
    /// Measurement settings shared by every cell.
    pub settings: CellSettings,
    /// Time limit of one cell, seconds.
    pub cell_timeout_s: f64,
    /// The GPUs to spread GPU cells over (`None`: one cell at a time on `settings.device_id`).
    #[serde(default)]
    pub devices: Option<DeviceRequest>,
    /// CPU-target cells run at once in a `devices` run.
    #[serde(default = "one")]
    pub cpu_cells: usize,
}

fn one() -> usize {
    1
}

/// What every cell of a plan measures and how (part of the cell key, except the monitoring
/// rate and the machine-specific paths).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellSettings {
    /// Dataset for top-k (or mIoU, mAP).
    pub dataset: Option<PathBuf>,
    /// PNG masks of the dataset's images (accuracy = mIoU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masks: Option<PathBuf>,
    /// COCO annotations of the dataset's images (accuracy = mAP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coco: Option<PathBuf>,
    /// Images per cell.
    pub limit: Option<usize>,
    /// Compare with FP32 on this target (`None`: no comparison).
    pub compare_on: Option<Target>,
    /// Samples compared (`None`: the batch size, at least 8).
    pub compare_samples: Option<usize>,
    /// INT8 calibration data.
    pub calib_data: String,
    /// Calibration samples.
    pub calib_samples: Option<usize>,
    /// Warm-up iterations.
    pub warmup: u64,
    /// Measured iterations, or …
    pub iterations: Option<u64>,
    /// … measured seconds.
    pub duration_s: f64,
    /// CPU threads.
    pub threads: Option<usize>,
    /// NVML sampling rate, Hz (0 = off).
    #[serde(default)]
    pub nvml_hz: f64,
    /// GPU id.
    pub device_id: usize,
    /// TensorRT libraries.
    pub tensorrt_dir: Option<PathBuf>,
    /// Smallest and largest batch of the plan: the range every engine is built for.
    pub batch_range: (usize, usize),
    /// Input shapes as `--input-shape` takes them, for every cell.
    #[serde(default)]
    pub input_shapes: Vec<String>,
    /// Largest size of each swept axis: calibration runs there, so every cell of a model shares
    /// its INT8 scales.
    #[serde(default)]
    pub dim_max: BTreeMap<String, i64>,
    /// How images become model input (dataset and image calibration data).
    #[serde(default)]
    pub preprocess: PreprocessRequest,
}

/// Where the cells run: `devices` or `device_id`, not both; at least one CPU cell at a time.
fn check_placement(p: &PlanFile) -> Result<()> {
    if p.devices.is_some() && p.device_id.is_some() {
        bail!("devices and device-id are both set: --devices names every GPU to use");
    }
    if p.cpu_cells == Some(0) {
        bail!("cpu-cells must be at least 1");
    }
    if let Some(dir) = p.tensorrt_dir.as_ref().filter(|d| !d.is_dir()) {
        bail!("tensorrt-dir {}: no such folder", dir.display());
    }
    for (what, v) in [
        ("limit", p.limit),
        ("compare-samples", p.compare_samples),
        ("calib-samples", p.calib_samples),
    ] {
        if v == Some(0) {
            bail!("{what} must be at least 1");
        }
    }
    Ok(())
}

/// The dataset folder exists; masks or COCO boxes: one of them, with the folder of their
/// images.
fn check_dataset(p: &PlanFile) -> Result<()> {
    if let Some(d) = &p.dataset {
        if !d.is_dir() {
            bail!("{}: dataset folder not found", d.display());
        }
    }
    if p.masks.is_some() && p.coco.is_some() {
        bail!("masks and coco are both set: a model is scored against one of them");
    }
    if (p.masks.is_some() || p.coco.is_some()) && p.dataset.is_none() {
        bail!("masks and coco need dataset (the folder of their images)");
    }
    if let Some(d) = p.masks.as_ref().filter(|d| !d.is_dir()) {
        bail!("masks {}: no such folder", d.display());
    }
    if let Some(f) = p.coco.as_ref().filter(|f| !f.is_file()) {
        bail!("coco {}: no such file", f.display());
    }
    let calib = p
        .calib_data
        .as_deref()
        .filter(|c| !c.starts_with("synthetic:"));
    if let Some(c) = calib.filter(|c| !Path::new(c).exists()) {
        bail!("calib-data {c}: no such file or folder (or synthetic:SEED)");
    }
    Ok(())
}

impl CellSettings {
    /// The ground truth beside the dataset's images.
    pub fn annotations(&self) -> Annotations {
        match (&self.masks, &self.coco) {
            (Some(dir), _) => Annotations::Masks(dir.clone()),
            (_, Some(file)) => Annotations::Coco(file.clone()),
            _ => Annotations::Classes,
        }
    }

    /// The digest of the settings that change the numbers of a cell on `target`, for its key.
    /// The plan's batch range shapes only the engines TensorRT builds, so it is part of the key
    /// of `trt` cells alone: adding a batch size beyond the range re-measures the engines (built
    /// anew for the wider range) but not the cells of the other backends.
    pub fn digest(&self, target: Target) -> String {
        let mut relevant = serde_json::json!({
            "dataset": self.dataset,
            "limit": self.limit,
            "compare_on": self.compare_on,
            "compare_samples": self.compare_samples,
            "calib_data": self.calib_data,
            "calib_samples": self.calib_samples,
            "warmup": self.warmup,
            "iterations": self.iterations,
            "duration_s": self.duration_s,
            "threads": self.threads,
            "preprocess": self.preprocess,
        });
        if target == Target::Trt {
            relevant["batch_range"] = serde_json::json!(self.batch_range);
        }
        // Only when set, so plans without them keep the keys they had.
        if !self.input_shapes.is_empty() {
            relevant["input_shapes"] = serde_json::json!(self.input_shapes);
        }
        if !self.dim_max.is_empty() {
            relevant["dim_max"] = serde_json::json!(self.dim_max);
        }
        if let Some(masks) = &self.masks {
            relevant["masks"] = serde_json::json!(masks);
        }
        if let Some(coco) = &self.coco {
            relevant["coco"] = serde_json::json!(coco);
        }
        hex16(relevant.to_string().as_bytes())
    }

    /// The fixed input shapes and these named-axis sizes, as the backends take them.
    pub fn shape_request(&self, dims: &BTreeMap<String, i64>) -> Result<ShapeRequest> {
        let named: Vec<NamedDim> = dims
            .iter()
            .map(|(symbol, &size)| NamedDim {
                symbol: symbol.clone(),
                size,
            })
            .collect();
        Ok(ShapeRequest::shapes(parse_input_shapes(&self.input_shapes)?).with_dims(&named))
    }
}

/// Default calibration data when the plan names none: seeded random inputs.
pub const DEFAULT_CALIB_DATA: &str = "synthetic:0";

fn nonempty<T>(v: Option<Vec<T>>, what: &str, example: &str) -> Result<Vec<T>> {
    match v {
        Some(v) if !v.is_empty() => Ok(v),
        _ => bail!("the plan names no {what} (e.g. {example})"),
    }
}

fn dedup<T: PartialEq + Clone>(v: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = vec![];
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

impl Plan {
    /// Checks a layered plan file and fills the defaults.
    pub fn from_file(p: PlanFile) -> Result<Plan> {
        check_dataset(&p)?;
        check_placement(&p)?;
        let models = dedup(nonempty(p.models, "models", "--models a.onnx b.onnx")?);
        for m in &models {
            if !m.is_file() {
                bail!("{}: model not found", m.display());
            }
        }
        let precisions = dedup(nonempty(
            p.precisions,
            "precisions",
            "--precisions fp32,fp16",
        )?);
        let mut batch_sizes = dedup(nonempty(
            p.batch_sizes,
            "batch sizes",
            "--batch-sizes 1,16",
        )?);
        if batch_sizes.contains(&0) {
            bail!("batch sizes must be at least 1");
        }
        batch_sizes.sort_unstable();
        let targets = dedup(nonempty(
            p.targets,
            "targets",
            "--targets tract-cpu,ort-cpu",
        )?);
        let positive = |v: Option<f64>, what: &str, default: f64| -> Result<f64> {
            let v = v.unwrap_or(default);
            if !(v.is_finite() && v >= 0.0) {
                bail!("{what} must be a non-negative number of seconds, not {v}");
            }
            Ok(v)
        };
        let duration_s = positive(p.duration, "duration", 2.0)?;
        let cell_timeout_s = positive(p.cell_timeout, "cell-timeout", 600.0)?;
        if cell_timeout_s == 0.0 {
            bail!("cell-timeout must be more than 0 s: every cell would be killed at its start");
        }
        let nvml_hz = positive(p.nvml_hz, "nvml-hz", 20.0)?;
        if p.iterations == Some(0) {
            bail!("iterations must be at least 1");
        }
        let name = p.name.unwrap_or_else(|| "bench".into());
        if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
            bail!("{name:?} cannot name a results folder (no slashes, not empty)");
        }
        let folder = p
            .results
            .unwrap_or_else(|| PathBuf::from("results"))
            .join(&name);
        let batch_range = (batch_sizes[0], *batch_sizes.last().unwrap_or(&1));
        let input_shapes = p.input_shapes.unwrap_or_default();
        parse_input_shapes(&input_shapes).context("input shapes")?;
        let dims = checked_dims(p.dims)?;
        let axes: Vec<(Vec<String>, DimSweep)> = if dims.is_empty() {
            vec![(vec![], vec![]); models.len()]
        } else {
            models
                .iter()
                .map(|m| dims_of_model(m, &dims))
                .collect::<Result<Vec<_>>>()?
        };
        for symbol in dims.keys() {
            if !axes
                .iter()
                .any(|(_, sweep)| sweep.iter().any(|(s, _)| s == symbol))
            {
                let named: Vec<String> = models
                    .iter()
                    .zip(&axes)
                    .map(|(m, (symbols, _))| format!("{}: {}", m.display(), symbols.join(", ")))
                    .collect();
                bail!(
                    "no model of the plan has an input axis named '{symbol}' (named axes: {})",
                    named.join("; ")
                );
            }
        }
        let model_dims = axes.into_iter().map(|(_, sweep)| sweep).collect();
        let dim_max = dims
            .iter()
            .map(|(s, sizes)| (s.clone(), *sizes.last().unwrap_or(&1)))
            .collect();
        Ok(Plan {
            name,
            folder,
            models,
            precisions,
            batch_sizes,
            model_dims,
            targets,
            settings: CellSettings {
                dataset: p.dataset,
                masks: p.masks,
                coco: p.coco,
                limit: p.limit,
                compare_on: p
                    .compare
                    .unwrap_or(false)
                    .then(|| p.reference.unwrap_or(Target::TractCpu)),
                compare_samples: p.compare_samples,
                calib_data: p.calib_data.unwrap_or_else(|| DEFAULT_CALIB_DATA.into()),
                calib_samples: p.calib_samples,
                warmup: p.warmup.unwrap_or(3),
                iterations: p.iterations,
                duration_s,
                threads: p.threads,
                nvml_hz,
                device_id: p.device_id.unwrap_or(0),
                tensorrt_dir: p.tensorrt_dir,
                batch_range,
                input_shapes,
                dim_max,
                preprocess: p.preprocess.unwrap_or_default(),
            },
            cell_timeout_s,
            devices: p.devices,
            cpu_cells: p.cpu_cells.unwrap_or(1),
        })
    }

    /// Every cell of the matrix, keyed for this machine (`gpu`) and model hashes (`hashes`, one
    /// per model), in the order they run: model, precision, target, batch, swept sizes.
    pub fn cells(&self, hashes: &[String], gpu: &str) -> Vec<CellSpec> {
        let mut cells = vec![];
        for ((model, hash), sweep) in self.models.iter().zip(hashes).zip(&self.model_dims) {
            let points = dim_points(sweep);
            for &precision in &self.precisions {
                for &target in &self.targets {
                    for &batch in &self.batch_sizes {
                        for point in &points {
                            let key = CellKey {
                                model_sha256: hash.clone(),
                                precision,
                                batch,
                                dims: point.iter().map(|d| (d.symbol.clone(), d.size)).collect(),
                                target,
                                trtkit_version: env!("CARGO_PKG_VERSION").into(),
                                gpu: gpu.into(),
                                settings: self.settings.digest(target),
                            };
                            cells.push(CellSpec {
                                id: key.id(),
                                key,
                                model: model.clone(),
                                folder: self.folder.clone(),
                                settings: self.settings.clone(),
                                gpu: None,
                            });
                        }
                    }
                }
            }
        }
        cells
    }
}

/// One cell, with everything its child process needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellSpec {
    /// The key's id.
    pub id: String,
    /// The key.
    pub key: CellKey,
    /// The FP32 ONNX model.
    pub model: PathBuf,
    /// The run's results folder (rewrites, engines and caches are kept there).
    pub folder: PathBuf,
    /// Measurement settings.
    pub settings: CellSettings,
    /// The GPU the cell is pinned to when a run spreads cells over several (`--devices`); its
    /// process then sees that board alone, as CUDA device 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuSlot>,
}

impl CellSpec {
    /// The model's file name without extension.
    pub fn model_name(&self) -> String {
        self.model
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.model.display().to_string())
    }

    /// How people name the cell: `model/precision/bBATCH[/AXIS=SIZE…]/target`.
    pub fn label(&self) -> String {
        super::key::cell_label(&self.model_name(), &self.key)
    }
}
