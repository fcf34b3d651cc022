//! Every precision of one model side by side, the tables the public TensorRT benchmark projects
//! print: `validate` over the ONNX model and each engine built from it (and, where an engine
//! cannot run here, the rewritten graph its build kept: on ONNX Runtime where it is installed,
//! its CUDA provider where that runs here, else on the reference backend); the rows are shared
//! with `compare` of each against the FP32 ONNX model ([`super::precision_compare`]). Built on
//! the `validate` job; which engines belong to the model is `trt::built_engines`' answer.

use crate::backend::ort_cuda::ort_cuda_usable;
use crate::backend::select::{BackendOptions, Runtime};
use crate::backend::Device;
use crate::error::{kind_of, ErrorKind};
use crate::jobs::validate::{validate, ValidateConfig, ValidateReport};
use crate::metrics::latency::BatchLatency;
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
pub(crate) enum RowKind {
    /// The FP32 ONNX model on the reference backend.
    Onnx,
    /// A TensorRT engine.
    Engine,
    /// The rewritten ONNX graph an engine's build kept, on ONNX Runtime where it is installed,
    /// else on the reference backend.
    Graph,
}

impl RowKind {
    #[cfg(test)]
    /// The runtime a row of this kind runs on where the table's ONNX rows run on `base`: an
    /// engine on TensorRT, a kept graph where [`row_backend`] sends it.
    pub fn runtime(&self, base: &BackendOptions) -> Runtime {
        match self {
            RowKind::Engine => Runtime::Trt,
            RowKind::Onnx => base.runtime(),
            RowKind::Graph => graph_runtime(base).unwrap_or_else(|| base.runtime()),
        }
    }
}

/// Where ONNX Runtime takes a kept graph from `base`: its CUDA provider where that can run on
/// this machine's GPU, else its CPU build on a CPU run where it is installed (`None`: the graph
/// stays on `base`).
fn graph_runtime(base: &BackendOptions) -> Option<Runtime> {
    if ort_cuda_usable(base.device_id.unwrap_or(0)) {
        return Some(Runtime::OrtCuda);
    }
    (base.device == Device::Cpu && crate::backend::ort::available().is_ok())
        .then_some(Runtime::OrtCpu)
}

/// One model file to run, and how it is labelled.
#[derive(Clone, Debug)]
pub(super) struct Candidate {
    pub(super) kind: RowKind,
    pub(super) precision: Precision,
    pub(super) path: PathBuf,
    layers: Option<usize>,
    parameters: Option<u64>,
    /// The batch every input of an ONNX file is fixed to (it runs at that batch only).
    fixed_batch: Option<usize>,
}

impl Candidate {
    pub(super) fn label(&self) -> String {
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
pub(super) fn candidates(model: &Path, artifacts: &Artifacts, with_onnx: bool) -> Vec<Candidate> {
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
pub(super) fn row_backend(kind: &RowKind, base: &BackendOptions) -> BackendOptions {
    if let (RowKind::Graph, Some(runtime)) = (kind, graph_runtime(base)) {
        let chosen = BackendOptions {
            kind_is_default: true,
            ..base.clone()
        };
        return chosen.on(runtime);
    }
    base.clone()
}

/// Why a row could not run, in a few words, said by the error's kind; an error of no kind is
/// said by the first 60 characters of its message (the whole message is kept beside it).
pub(crate) fn short_reason(err: &anyhow::Error) -> String {
    let known = match kind_of(err) {
        Some(ErrorKind::GpuCannotRunEngine) => "this GPU cannot run it",
        Some(ErrorKind::NoGpu) => "no usable GPU here",
        Some(ErrorKind::TensorRtMissing) => "TensorRT not found",
        Some(ErrorKind::BatchOutsideProfile) => "batch outside its profile",
        Some(ErrorKind::OutOfMemory) => "out of GPU memory",
        Some(ErrorKind::BackendRefusedModel) => "the backend refused the model",
        Some(ErrorKind::TooLargeForMemory | ErrorKind::UnfixedAxis | ErrorKind::NoWorkspace)
        | None => return format!("{err:#}").chars().take(60).collect(),
    };
    known.to_string()
}

/// The engines in the folder that were not run, with why (for every table's notes).
pub(super) fn skipped_lines(artifacts: &Artifacts) -> Vec<String> {
    artifacts
        .skipped
        .iter()
        .map(|s| format!("{}: {}", s.engine.display(), s.why))
        .collect()
}

/// What a row of either table is: the file that ran (or could not), and how it went.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RowSource {
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
    pub(super) fn from_outcome(
        c: &Candidate,
        label: String,
        outcome: Result<String, &anyhow::Error>,
    ) -> RowSource {
        let (backend, unavailable, detail) = match outcome {
            Ok(backend) => (backend, None, None),
            Err(e) => (String::new(), Some(short_reason(e)), Some(format!("{e:#}"))),
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
pub(crate) struct ValidateAllConfig {
    /// The FP32 ONNX model.
    pub model: PathBuf,
    /// The folder of engines built from it.
    pub engines: PathBuf,
    /// Batch sizes, one table each.
    pub(crate) batch_sizes: Vec<usize>,
    /// Everything else (its model and batch size are replaced per row).
    pub base: ValidateConfig,
}

/// Accuracy and latency of a row that ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RowAccuracy {
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
pub(crate) struct ValidateRow {
    /// What ran, and whether it could.
    #[serde(flatten)]
    pub source: RowSource,
    /// File size.
    pub(crate) size_bytes: u64,
    /// Layers (engine) or nodes (ONNX).
    pub layers: Option<usize>,
    /// Parameters of the source model.
    pub parameters: Option<u64>,
    /// The figures, when it ran.
    pub accuracy: Option<RowAccuracy>,
}

/// The validate table of one batch size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ValidateTable {
    /// Batch size.
    pub batch: usize,
    /// One row per model file.
    pub rows: Vec<ValidateRow>,
}

/// Everything `validate` found over the precisions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ValidateAllReport {
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
pub(crate) fn validate_all(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TypedError;

    #[test]
    fn reasons_are_said_in_a_few_words() {
        let typed = |kind, message: &str| anyhow::Error::from(TypedError::new(kind, message));
        let refused = typed(
            ErrorKind::GpuCannotRunEngine,
            "engines/x.engine cannot run on GPU 0: TensorRT-RTX engines cannot run on NVIDIA H200: …",
        );
        assert_eq!(short_reason(&refused), "this GPU cannot run it");
        let none = typed(
            ErrorKind::NoGpu,
            "x.engine: a TensorRT-RTX engine runs on an NVIDIA GPU, and this machine has none usable (no CUDA driver)",
        );
        assert_eq!(
            short_reason(&none.context("validate")),
            "no usable GPU here"
        );
        let batch = typed(ErrorKind::BatchOutsideProfile, "x.engine: batch 9");
        assert_eq!(short_reason(&batch), "batch outside its profile");
        let odd = anyhow::anyhow!("{}", "a".repeat(100));
        assert_eq!(short_reason(&odd).len(), 60);
        // The words alone decide nothing: an untyped error is said by its text.
        let words = anyhow::anyhow!("this machine has none usable");
        assert_eq!(short_reason(&words), "this machine has none usable");
    }

    #[test]
    fn rows_run_on_one_of_the_runtimes() {
        let base = Runtime::TractCpu.backend().unwrap();
        assert_eq!(RowKind::Engine.runtime(&base), Runtime::Trt);
        assert_eq!(RowKind::Onnx.runtime(&base), Runtime::TractCpu);
        let graph = RowKind::Graph.runtime(&base);
        let options = row_backend(&RowKind::Graph, &base);
        assert_eq!(options.runtime(), graph);
        assert_eq!(options.kind_is_default, graph != Runtime::TractCpu);
        assert!(!row_backend(&RowKind::Onnx, &base).kind_is_default);
    }
}
