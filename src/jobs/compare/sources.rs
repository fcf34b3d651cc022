//! What runs in a comparison: a source is a file (an ONNX model on a reference backend, a
//! TensorRT engine, or an `.npz` of saved outputs) with a label and, for a model, the graph
//! passes applied after loading it and before opening it on its backend.

use crate::backend::open::{open_file, FileKind, Opened};
use crate::backend::select::BackendOptions;
use crate::backend::Backend;
use crate::error::{Hint, TypedError};
use crate::onnx::rewrite::pass::{run_pass, run_passes, Pass};
use crate::onnx::shape::{fixed_batch, model_inputs, InputShapes, ShapeRequest};
use crate::onnx::OnnxModel;
use crate::tensor::{HostTensor, IoSpec};
use anyhow::{bail, Context, Result};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One side of a comparison: the file and, for a model, the backend that runs it.
#[derive(Clone, Debug)]
pub struct SideConfig {
    /// An `.onnx` model, a TensorRT engine, or an `.npz`/`.npy` of saved outputs.
    pub path: PathBuf,
    /// The backend for a model (its batch is decided by the runner).
    pub backend: BackendOptions,
}

/// A source the runner runs: a labelled side and the graph passes its model goes through.
#[derive(Clone)]
pub struct SourceConfig {
    /// How the reports name it (`A`, `B`, `fp16 engine`, …).
    pub label: String,
    /// The file and its backend.
    pub side: SideConfig,
    /// Passes applied to a model after the shared input shapes and before it is opened (an
    /// engine or saved outputs with passes is refused).
    pub passes: Vec<Arc<dyn Pass>>,
}

impl SourceConfig {
    /// `side` labelled `label`, with no passes of its own.
    pub fn new(label: impl Into<String>, side: SideConfig) -> SourceConfig {
        SourceConfig {
            label: label.into(),
            side,
            passes: vec![],
        }
    }
}

impl fmt::Debug for SourceConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let passes: Vec<&str> = self.passes.iter().map(|p| p.name()).collect();
        f.debug_struct("SourceConfig")
            .field("label", &self.label)
            .field("side", &self.side)
            .field("passes", &passes)
            .finish()
    }
}

/// Whether `path` is a model or an engine (as opposed to saved outputs).
pub(crate) fn is_model(path: &Path) -> bool {
    FileKind::runs(path)
}

/// A source loaded and ready to run (a model is opened on its backend only once the batch is
/// known).
pub enum Loaded {
    /// An ONNX model after its passes, and the backend options it will open with.
    Model(Box<(OnnxModel, BackendOptions)>),
    /// A TensorRT engine on its backend.
    Engine(Box<dyn Backend>),
    /// Saved outputs.
    Saved(Vec<HostTensor>),
}

impl Loaded {
    /// The ONNX model, when the source is one.
    pub fn model(&self) -> Option<&OnnxModel> {
        match self {
            Loaded::Model(boxed) => Some(&boxed.0),
            _ => None,
        }
    }

    /// The inputs the source takes and the batch they are fixed to (`None` when dynamic);
    /// `None` for saved outputs.
    pub fn inputs(&self) -> Option<Result<(Vec<IoSpec>, Option<usize>)>> {
        match self {
            Loaded::Model(boxed) => {
                Some(declared_inputs(&boxed.0).map(|specs| (specs, fixed_batch(&boxed.0))))
            }
            Loaded::Engine(backend) => Some(Ok((backend.inputs().to_vec(), backend.fixed_batch()))),
            Loaded::Saved(_) => None,
        }
    }
}

/// Loads one source by its kind ([`open_file`]); a model goes through the input shape overrides
/// `shapes`, then the source's own passes. An engine takes no per-input shapes (they were fixed
/// when it was built); named-axis sizes apply to the ONNX side only, so an engine built at
/// `seq=128` compares with its model at `--dim seq=128` (an engine built at another size
/// refuses the inputs, naming its shapes).
pub fn load(source: &SourceConfig, shapes: &ShapeRequest) -> Result<Loaded> {
    let path = &source.side.path;
    let Some(kind) = FileKind::from_path(path) else {
        return Err(TypedError::hinted(
            Hint::Usage,
            format!(
                "{}: expected an .onnx model, a TensorRT engine (.engine/.plan) or an .npz of saved outputs",
                path.display()
            ),
        )
        .into());
    };
    if kind == FileKind::Engine && !shapes.shapes.is_empty() {
        bail!(
            "{}: an engine's input shapes were fixed when it was built; --input-shape applies to ONNX models only",
            path.display()
        );
    }
    if kind != FileKind::Onnx && !source.passes.is_empty() {
        let names: Vec<&str> = source.passes.iter().map(|p| p.name()).collect();
        bail!(
            "{}: graph passes ({}) apply to ONNX models only",
            path.display(),
            names.join(", ")
        );
    }
    Ok(match open_file(path, &source.side.backend)? {
        Opened::Model(model) => {
            let mut model = *model;
            if !shapes.is_empty() {
                model = run_pass(model, &InputShapes(shapes.clone()))?;
            }
            if !source.passes.is_empty() {
                let passes: Vec<&dyn Pass> = source.passes.iter().map(|p| p.as_ref()).collect();
                model = run_passes(model, &passes)
                    .with_context(|| path.display().to_string())?
                    .0;
            }
            Loaded::Model(Box::new((model, source.side.backend.clone())))
        }
        Opened::Engine(backend) => Loaded::Engine(backend),
        Opened::Saved(tensors) => Loaded::Saved(tensors),
    })
}

/// The inputs `model` declares (names, dtypes, dims), read without preparing it.
pub fn declared_inputs(model: &OnnxModel) -> Result<Vec<IoSpec>> {
    model_inputs(model)
        .into_iter()
        .map(|i| {
            let elem_type = crate::onnx::dtype::elem_type(i.dtype_code).with_context(|| {
                format!(
                    "{}: input '{}' is {}, which trtkit cannot feed",
                    model.path.display(),
                    i.name,
                    i.dtype
                )
            })?;
            let dims = i.dims.ok_or_else(|| {
                TypedError::hinted(
                    Hint::GiveShape,
                    format!(
                        "{}: input '{}' declares no shape",
                        model.path.display(),
                        i.name
                    ),
                )
            })?;
            Ok(IoSpec {
                name: i.name,
                elem_type,
                dims,
            })
        })
        .collect()
}
