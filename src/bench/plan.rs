//! The matrix to run: from flags, from a TOML plan file with the same fields, or both (flags
//! win). A checked [`Plan`] expands into [`CellSpec`]s, one per model × precision × batch ×
//! swept axis size × target, each self-contained: the child process that runs a cell needs
//! nothing else.

use super::devices::{DeviceRequest, GpuSlot};
use super::dims::{checked_dims, dims_of_model};
use super::key::CellKey;
use super::settings::{seconds, Derived};
pub(crate) use super::settings::{CellSettings, PlanFile, SettingFlags};
use crate::backend::select::Runtime;
use crate::onnx::shape::{dim_points, parse_input_shapes, DimSweep};
use crate::tensor::Precision;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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
    pub(crate) batch_sizes: Vec<usize>,
    /// The swept named axes of each model (in the order of `models`): those of the plan's axes
    /// that its inputs carry, each with its sizes, ascending.
    pub(crate) model_dims: Vec<DimSweep>,
    /// Targets.
    pub targets: Vec<Runtime>,
    /// Measurement settings shared by every cell.
    pub settings: CellSettings,
    /// Time limit of one cell, seconds.
    pub(crate) cell_timeout_s: f64,
    /// The GPUs to spread GPU cells over (`None`: one cell at a time on `settings.device_id`).
    #[serde(default)]
    pub devices: Option<DeviceRequest>,
    /// CPU-target cells run at once in a `devices` run.
    #[serde(default = "one")]
    pub(crate) cpu_cells: usize,
}

fn one() -> usize {
    1
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
    pub(crate) fn from_file(p: PlanFile) -> Result<Plan> {
        let p = PlanFile::run_defaults().overridden_by(p);
        check_dataset(&p)?;
        check_placement(&p)?;
        let models = dedup(nonempty(
            p.models.clone(),
            "models",
            "--models a.onnx b.onnx",
        )?);
        for m in &models {
            if !m.is_file() {
                bail!("{}: model not found", m.display());
            }
        }
        let precisions = dedup(nonempty(
            p.precisions.clone(),
            "precisions",
            "--precisions fp32,fp16",
        )?);
        let mut batch_sizes = dedup(nonempty(
            p.batch_sizes.clone(),
            "batch sizes",
            "--batch-sizes 1,16",
        )?);
        if batch_sizes.contains(&0) {
            bail!("batch sizes must be at least 1");
        }
        batch_sizes.sort_unstable();
        let targets = dedup(nonempty(
            p.targets.clone(),
            "targets",
            "--targets tract-cpu,ort-cpu",
        )?);
        let cell_timeout_s = seconds(p.cell_timeout.unwrap_or_default(), "cell-timeout")?;
        if cell_timeout_s == 0.0 {
            bail!("cell-timeout must be more than 0 s: every cell would be killed at its start");
        }
        if p.iterations == Some(0) {
            bail!("iterations must be at least 1");
        }
        let name = p.name.clone().unwrap_or_else(|| "bench".into());
        if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
            bail!("{name:?} cannot name a results folder (no slashes, not empty)");
        }
        let folder = p
            .results
            .clone()
            .unwrap_or_else(|| PathBuf::from("results"))
            .join(&name);
        let batch_range = (batch_sizes[0], *batch_sizes.last().unwrap_or(&1));
        let input_shapes = p.input_shapes.clone().unwrap_or_default();
        parse_input_shapes(&input_shapes).context("input shapes")?;
        let dims = checked_dims(p.dims.clone())?;
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
            settings: CellSettings::from_plan(
                &p,
                Derived {
                    compare_on: p.compare.unwrap_or(false).then_some(p.reference).flatten(),
                    batch_range,
                    input_shapes,
                    dim_max,
                    preprocess: p.preprocess.clone().unwrap_or_default(),
                },
            )?,
            cell_timeout_s,
            devices: p.devices.clone(),
            cpu_cells: p.cpu_cells.unwrap_or_default(),
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
    pub(crate) fn model_name(&self) -> String {
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
