//! The `inspect` job: the summary of an ONNX model (I/O, opsets, op counts, parameters, MACs),
//! or the description of an engine file (recognised by [`FileKind`], its magic whatever its
//! name).

use crate::backend::mac_count::model_macs;
use crate::backend::FileKind;
use crate::onnx::rewrite::pass::Pass;
use crate::onnx::shape::{InputShapes, ShapeRequest};
use crate::onnx::summary::{summarize, ModelSummary};
use crate::onnx::OnnxModel;
use crate::trt::inspect::{inspect_engine, EngineInspection};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What to inspect.
#[derive(Clone, Debug, Default)]
pub struct InspectConfig {
    /// The ONNX model or engine file.
    pub path: PathBuf,
    /// Also list every node (ONNX) or the engine inspector's layers (engines, where this
    /// machine's GPU can deserialize it).
    pub layers: bool,
    /// Folder holding the TensorRT-RTX libraries (engines with `layers`).
    pub tensorrt_dir: Option<PathBuf>,
    /// Input shapes and axis sizes the MACs are counted at (ONNX models).
    pub shapes: ShapeRequest,
}

/// What `inspect` found: the JSON is the summary or the engine description itself.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum InspectReport {
    /// An ONNX model's summary.
    Onnx(Box<ModelSummary>),
    /// An engine file's description.
    Engine(Box<EngineInspection>),
}

/// Inspects the file `config` names: an engine when [`FileKind`] says so, else an ONNX model
/// (whatever its name).
pub fn inspect(config: &InspectConfig) -> Result<InspectReport> {
    let path = &config.path;
    if FileKind::from_path(path) == Some(FileKind::Engine) {
        let found = inspect_engine(path, config.layers, config.tensorrt_dir.as_deref())?;
        return Ok(InspectReport::Engine(Box::new(found)));
    }
    let model = OnnxModel::load(path)?;
    if !config.shapes.is_empty() {
        // Shapes the model contradicts are the caller's mistake, not MACs left unknown.
        InputShapes(config.shapes.clone())
            .run(model.clone())
            .with_context(|| path.display().to_string())?;
    }
    let summary = summarize(&model, config.layers).with_macs(model_macs(&model, &config.shapes));
    Ok(InspectReport::Onnx(Box::new(summary)))
}
