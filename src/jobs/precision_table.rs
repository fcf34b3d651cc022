//! Every precision of one model side by side, the tables the public TensorRT benchmark projects
//! print: `validate` over the ONNX model and each engine built from it (and, where an engine
//! cannot run here, the rewritten graph its build kept: on ONNX Runtime where it is installed,
//! its CUDA provider where that runs here, else on the reference backend), and `compare`
//! of each against the FP32 ONNX model. Built on the `validate` and `compare` jobs; which
//! engines belong to the model is `trt::built_engines`' answer.

use crate::backend::ort_cuda::ort_cuda_usable;
use crate::backend::select::{BackendKind, BackendOptions};
use crate::backend::Device;
use crate::data::npz;
use crate::jobs::compare::{compare, CompareConfig, InputSource, SideConfig};
use crate::jobs::validate::{dataset_tensor, validate, ValidateConfig, ValidateReport};
use crate::metrics::closeness::Tolerance;
use crate::metrics::latency::BatchLatency;
use crate::metrics::task::TaskComparison;
use crate::metrics::topk::RankRow;
use crate::onnx::shape::fixed_batch;
use crate::onnx::OnnxModel;
use crate::progress::Progress;
use crate::tensor::Precision;
use crate::trt::built_engines::{list, Artifacts};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What one row of a table runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowKind {
    /// The FP32 ONNX model on the reference backend.
    Onnx,
    /// A TensorRT engine.
    Engine,
    /// The rewritten ONNX graph an engine's build kept, on ONNX Runtime where it is installed,
    /// else on the reference backend.
    Graph,
}

/// One model file to run, and how it is labelled.
#[derive(Clone, Debug)]
struct Candidate {
    kind: RowKind,
    precision: Precision,
    path: PathBuf,
    layers: Option<usize>,
    parameters: Option<u64>,
    /// The batch every input of an ONNX file is fixed to (it runs at that batch only).
    fixed_batch: Option<usize>,
}

impl Candidate {
    fn label(&self) -> String {
        match self.kind {
            RowKind::Onnx => format!("{} onnx", self.precision),
            RowKind::Engine => format!("{} engine", self.precision),
            RowKind::Graph => format!("{} graph", self.precision),
        }
    }
}

/// What the tables say of an ONNX file: its nodes, its parameters and the batch its inputs are
/// fixed to (all `None` when it does not load; running it will say why).
struct OnnxFacts {
    nodes: Option<usize>,
    parameters: Option<u64>,
    fixed_batch: Option<usize>,
}

fn onnx_facts(path: &Path) -> OnnxFacts {
    let Ok(m) = OnnxModel::load(path) else {
        return OnnxFacts {
            nodes: None,
            parameters: None,
            fixed_batch: None,
        };
    };
    OnnxFacts {
        nodes: Some(m.graph().node.len()),
        parameters: Some(m.parameters()),
        fixed_batch: fixed_batch(&m),
    }
}

/// The model's candidates: the ONNX model (`with_onnx`), then per engine built from it the
/// engine and, where its build kept one, its rewritten graph.
fn candidates(model: &Path, artifacts: &Artifacts, with_onnx: bool) -> Vec<Candidate> {
    let mut out = vec![];
    if with_onnx {
        let facts = onnx_facts(model);
        out.push(Candidate {
            kind: RowKind::Onnx,
            precision: Precision::Fp32,
            path: model.to_path_buf(),
            layers: facts.nodes,
            parameters: facts.parameters,
            fixed_batch: facts.fixed_batch,
        });
    }
    for b in &artifacts.current {
        out.push(Candidate {
            kind: RowKind::Engine,
            precision: b.precision(),
            path: b.engine.clone(),
            layers: Some(b.sidecar.facts.network_layers),
            parameters: Some(b.sidecar.facts.parameters),
            fixed_batch: None,
        });
        if let Some(g) = &b.graph {
            let facts = onnx_facts(g);
            out.push(Candidate {
                kind: RowKind::Graph,
                precision: b.precision(),
                path: g.clone(),
                layers: facts.nodes,
                parameters: Some(b.sidecar.facts.parameters),
                fixed_batch: facts.fixed_batch,
            });
        }
    }
    out
}

/// The backend a row runs on. A graph an engine's build kept (because the engine cannot run
/// here) goes to ONNX Runtime wherever it is installed: to its CUDA provider where that can run
/// on this machine's GPU (fast, and FP16 graphs in real FP16 arithmetic), else, on a CPU run, to
/// its CPU build, which runs an FP16 graph about as fast as the FP32 model (a float16 node
/// without a float16 kernel computes in float32 between casts) where tract's CPU runtime,
/// computing in float16, is a hundred times slower. Everything else, and a graph where ONNX
/// Runtime is not installed, runs on `base`.
fn row_backend(kind: &RowKind, base: &BackendOptions) -> BackendOptions {
    if *kind != RowKind::Graph {
        return base.clone();
    }
    if ort_cuda_usable(base.device_id.unwrap_or(0)) {
        return BackendOptions {
            kind: BackendKind::Ort,
            device: Device::Cuda,
            kind_is_default: true,
            ..base.clone()
        };
    }
    if base.device == Device::Cpu && crate::backend::ort::available().is_ok() {
        return BackendOptions {
            kind: BackendKind::Ort,
            kind_is_default: true,
            ..base.clone()
        };
    }
    base.clone()
}

/// Why a row could not run, in a few words (the whole message is kept beside it).
pub fn short_reason(message: &str) -> String {
    let m = message.to_ascii_lowercase();
    let known = [
        ("cannot run on gpu", "this GPU cannot run it"),
        ("has none usable", "no usable GPU here"),
        ("running it needs", "TensorRT not found"),
        (
            "outside the engine's optimization profile",
            "batch outside its profile",
        ),
        ("out of gpu memory", "out of GPU memory"),
    ];
    known
        .iter()
        .find(|(k, _)| m.contains(k))
        .map(|(_, s)| s.to_string())
        .unwrap_or_else(|| message.chars().take(60).collect())
}

/// The engines in the folder that were not run, with why (for every table's notes).
fn skipped_lines(artifacts: &Artifacts) -> Vec<String> {
    artifacts
        .skipped
        .iter()
        .map(|s| format!("{}: {}", s.engine.display(), s.why))
        .collect()
}

/// What a row of either table is: the file that ran (or could not), and how it went.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowSource {
    /// `fp32 onnx`, `fp16 engine`, `fp16 graph`, …
    pub label: String,
    /// What ran.
    pub kind: RowKind,
    /// Its precision.
    pub precision: Precision,
    /// The file.
    pub file: String,
    /// The backend that ran it (empty when it could not run).
    pub backend: String,
    /// Why it could not run, in a few words.
    pub unavailable: Option<String>,
    /// The whole reason.
    pub detail: Option<String>,
}

impl RowSource {
    /// The label with the backend that ran it, as the tables show it.
    pub fn shown(&self) -> String {
        if self.backend.is_empty() {
            self.label.clone()
        } else {
            format!("{} ({})", self.label, self.backend)
        }
    }

    /// The row of `c` labelled `label`: ran on `backend`, or failed with `error`.
    fn from_outcome(
        c: &Candidate,
        label: String,
        outcome: Result<String, &anyhow::Error>,
    ) -> RowSource {
        let (backend, unavailable, detail) = match outcome {
            Ok(backend) => (backend, None, None),
            Err(e) => {
                let whole = format!("{e:#}");
                (String::new(), Some(short_reason(&whole)), Some(whole))
            }
        };
        RowSource {
            label,
            kind: c.kind.clone(),
            precision: c.precision,
            file: c.path.display().to_string(),
            backend,
            unavailable,
            detail,
        }
    }
}

/// `validate` over every precision of a model.
#[derive(Clone, Debug)]
pub struct ValidateAllConfig {
    /// The FP32 ONNX model.
    pub model: PathBuf,
    /// The folder of engines built from it.
    pub engines: PathBuf,
    /// Batch sizes, one table each.
    pub batch_sizes: Vec<usize>,
    /// Everything else (its model and batch size are replaced per row).
    pub base: ValidateConfig,
}

/// Accuracy and latency of a row that ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowAccuracy {
    /// Per batch, preprocessed batch in → outputs out.
    pub latency_all: BatchLatency,
    /// Per batch, inference only.
    pub latency_model: BatchLatency,
    /// Top-1 accuracy, 0–1.
    pub top1: f64,
    /// Top-5 accuracy, 0–1.
    pub top5: f64,
    /// Images classified.
    pub images: u64,
    /// mIoU and pixel accuracy (0–1), against masks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<(Option<f64>, f64)>,
    /// mAP@0.5:0.95 and mAP@0.5, against COCO annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detect: Option<(f64, f64)>,
}

/// One row of the validate table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidateRow {
    /// What ran, and whether it could.
    #[serde(flatten)]
    pub source: RowSource,
    /// File size.
    pub size_bytes: u64,
    /// Layers (engine) or nodes (ONNX).
    pub layers: Option<usize>,
    /// Parameters of the source model.
    pub parameters: Option<u64>,
    /// The figures, when it ran.
    pub accuracy: Option<RowAccuracy>,
}

/// The validate table of one batch size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidateTable {
    /// Batch size.
    pub batch: usize,
    /// One row per model file.
    pub rows: Vec<ValidateRow>,
}

/// Everything `validate` found over the precisions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidateAllReport {
    /// The FP32 ONNX model.
    pub model: String,
    /// The dataset.
    pub dataset: String,
    /// One table per batch size.
    pub tables: Vec<ValidateTable>,
    /// Engines in the folder that were not validated, and why.
    pub skipped: Vec<String>,
}

fn accuracy_of(r: &ValidateReport) -> RowAccuracy {
    RowAccuracy {
        latency_all: r.latency_all.clone(),
        latency_model: r.latency_model.clone(),
        top1: r.top1,
        top5: r.top5,
        images: r.images,
        segment: r.segment.as_ref().map(|m| (m.miou, m.pixel_accuracy)),
        detect: r.detect.as_ref().map(|d| (d.map.map50_95, d.map.map50)),
    }
}

/// Validates the model and everything built from it at every batch size.
pub fn validate_all(
    config: &ValidateAllConfig,
    progress: &dyn Progress,
) -> Result<ValidateAllReport> {
    let artifacts = list(&config.engines, &config.model)?;
    let runs = candidates(&config.model, &artifacts, true);
    let mut tables = vec![];
    for &batch in &config.batch_sizes {
        let mut rows = vec![];
        for c in &runs {
            // An ONNX file with a fixed batch runs at that batch only; its row says so.
            let run_at = c.fixed_batch.unwrap_or(batch);
            let job = ValidateConfig {
                model: c.path.clone(),
                batch_size: run_at,
                backend: row_backend(&c.kind, &config.base.backend),
                ..config.base.clone()
            };
            let outcome = validate(&job, progress);
            let label = if run_at == batch {
                c.label()
            } else {
                format!("{} at its fixed batch {run_at}", c.label())
            };
            let (source, accuracy) = match outcome {
                Ok(r) => (
                    RowSource::from_outcome(c, label, Ok(r.backend.clone())),
                    Some(accuracy_of(&r)),
                ),
                // The ONNX model failing is a failure of the whole run, not a row.
                Err(e) if c.kind == RowKind::Onnx => return Err(e),
                Err(e) => (RowSource::from_outcome(c, label, Err(&e)), None),
            };
            rows.push(ValidateRow {
                source,
                size_bytes: std::fs::metadata(&c.path).map(|m| m.len()).unwrap_or(0),
                layers: c.layers,
                parameters: c.parameters,
                accuracy,
            });
        }
        tables.push(ValidateTable { batch, rows });
    }
    Ok(ValidateAllReport {
        model: config.model.display().to_string(),
        dataset: config.base.dataset.display().to_string(),
        tables,
        skipped: skipped_lines(&artifacts),
    })
}

/// `compare` of everything built from a model against the FP32 ONNX model.
#[derive(Clone, Debug)]
pub struct CompareAllConfig {
    /// The FP32 ONNX model: the reference.
    pub model: PathBuf,
    /// The folder of engines built from it.
    pub engines: PathBuf,
    /// Everything else: `b` is the reference's backend; `a`'s backend runs each engine or
    /// graph (their paths are replaced per row).
    pub base: CompareConfig,
    /// Compare over these images (preprocessed for the model) instead of `base.inputs`.
    pub images: Option<ValidateConfig>,
}

/// One row of the closeness table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompareRow {
    /// What ran, and whether it could.
    #[serde(flatten)]
    pub source: RowSource,
    /// isclose %, all elements of the first output.
    pub equal_pct: Option<f64>,
    /// Samples whose every element is close, %.
    pub all_close_samples_pct: Option<f64>,
    /// Largest |A − B| (NaN or +Inf where the two disagree in non-finite values).
    #[serde(default, with = "crate::metrics::non_finite::option")]
    pub max_abs_err: Option<f64>,
    /// Mean |A − B| (NaN or +Inf as `max_abs_err`).
    #[serde(default, with = "crate::metrics::non_finite::option")]
    pub mean_abs_err: Option<f64>,
    /// Top-1 agreement with the reference, % (`[batch, classes]` outputs).
    pub top1_agreement_pct: Option<f64>,
    /// NaN elements of this side's output, % (100 means the run is broken).
    pub nan_pct: Option<f64>,
    /// The rank table (MAE and disagreement per rank).
    pub ranks: Vec<RankRow>,
    /// The task-aware agreement (matched boxes, pixel agreement), when a task applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskComparison>,
}

/// Everything `compare` found over the precisions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompareAllReport {
    /// The reference model.
    pub reference: String,
    /// The reference's backend.
    pub reference_backend: String,
    /// Where the inputs came from.
    pub inputs: String,
    /// Tolerances used.
    pub tolerance: Tolerance,
    /// The first output's name, the one compared.
    pub output: String,
    /// One row per engine or graph.
    pub rows: Vec<CompareRow>,
    /// Engines in the folder that were not compared, and why.
    pub skipped: Vec<String>,
}

/// The reference's inputs and outputs, saved after the first row that ran, replayed for the rest.
struct SavedReference {
    inputs: PathBuf,
    outputs: PathBuf,
    backend: String,
    inputs_note: String,
    output: String,
}

/// Compares every engine built from the model (or its kept graph) with the model. The reference
/// runs once, with the first row that opens: its inputs and outputs are saved then and replayed
/// for every later row (a row that cannot open fails before anything runs).
pub fn compare_all(config: &CompareAllConfig, progress: &dyn Progress) -> Result<CompareAllReport> {
    let artifacts = list(&config.engines, &config.model)?;
    let saved = tempfile::tempdir()?;
    let (live_inputs, images_note) = match &config.images {
        Some(images) => {
            let tensor = dataset_tensor(images)?;
            let file = saved.path().join("images.npz");
            let note = format!(
                "{} images of {}, preprocessed for the model",
                tensor.shape[0],
                images.dataset.display()
            );
            npz::save(&file, &[tensor])?;
            (InputSource::File(file), Some(note))
        }
        None => (config.base.inputs.clone(), None),
    };
    let mut replay: Option<SavedReference> = None;
    let mut rows = vec![];
    for c in candidates(&config.model, &artifacts, false) {
        let engine_ran = rows.iter().any(|r: &CompareRow| {
            r.source.precision == c.precision && r.source.unavailable.is_none()
        });
        if c.kind == RowKind::Graph && engine_ran {
            continue; // the engine itself was compared
        }
        let (b, inputs) = match &replay {
            Some(r) => (
                SideConfig {
                    path: r.outputs.clone(),
                    backend: config.base.b.backend.clone(),
                },
                InputSource::File(r.inputs.clone()),
            ),
            None => (
                SideConfig {
                    path: config.model.clone(),
                    backend: config.base.b.backend.clone(),
                },
                live_inputs.clone(),
            ),
        };
        let job = CompareConfig {
            a: SideConfig {
                path: c.path.clone(),
                backend: row_backend(&c.kind, &config.base.a.backend),
            },
            b,
            inputs,
            input_shapes: Default::default(),
            ..config.base.clone()
        };
        let outcome = compare(&job, progress);
        if let (None, Ok((report, tensors))) = (&replay, &outcome) {
            let r = SavedReference {
                inputs: saved.path().join("inputs.npz"),
                outputs: saved.path().join("reference.npz"),
                backend: report.sides[1].backend.clone(),
                inputs_note: images_note.clone().unwrap_or_else(|| report.inputs.clone()),
                output: report
                    .outputs
                    .first()
                    .map(|o| o.name.clone())
                    .unwrap_or_default(),
            };
            npz::save(&r.inputs, tensors.inputs.as_deref().unwrap_or_default())?;
            npz::save(&r.outputs, &tensors.b)?;
            replay = Some(r);
        }
        let ran = outcome.as_ref().map(|(r, _)| r.sides[0].backend.clone());
        let mut row = CompareRow {
            source: RowSource::from_outcome(&c, c.label(), ran.clone()),
            equal_pct: None,
            all_close_samples_pct: None,
            max_abs_err: None,
            mean_abs_err: None,
            top1_agreement_pct: None,
            nan_pct: None,
            ranks: vec![],
            task: None,
        };
        if let Some(o) = outcome.as_ref().ok().and_then(|(r, _)| r.outputs.first()) {
            row.equal_pct = Some(o.closeness.equal_pct);
            row.all_close_samples_pct = Some(o.closeness.all_close_samples_pct);
            row.max_abs_err = Some(o.closeness.max_abs_err);
            row.mean_abs_err = Some(o.closeness.mean_abs_err);
            row.top1_agreement_pct = o.topk.as_ref().map(|k| k.top1_agreement_pct);
            let elements = o.closeness.elements.max(1) as f64;
            row.nan_pct = Some(o.closeness.nan_a as f64 * 100.0 / elements);
            row.ranks = o.topk.as_ref().map(|k| k.ranks.clone()).unwrap_or_default();
        }
        row.task = outcome.as_ref().ok().and_then(|(r, _)| r.task.clone());
        rows.push(row);
    }
    let (reference_backend, inputs, output) = match replay {
        Some(r) => (r.backend, r.inputs_note, r.output),
        None => (
            String::new(),
            "none: no engine or graph could run, so the reference was not run".into(),
            String::new(),
        ),
    };
    Ok(CompareAllReport {
        reference: config.model.display().to_string(),
        reference_backend,
        inputs,
        tolerance: config.base.tolerance,
        output,
        rows,
        skipped: skipped_lines(&artifacts),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_said_in_a_few_words() {
        assert_eq!(
            short_reason("engines/x.engine cannot run on GPU 0: TensorRT-RTX engines cannot run on NVIDIA H200: …"),
            "this GPU cannot run it"
        );
        assert_eq!(
            short_reason("x.engine: a TensorRT-RTX engine runs on an NVIDIA GPU, and this machine has none usable (no CUDA driver)"),
            "no usable GPU here"
        );
        let odd = "a".repeat(100);
        assert_eq!(short_reason(&odd).len(), 60);
    }
}
