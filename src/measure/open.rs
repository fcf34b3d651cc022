//! The one place a backend is opened from a file: an ONNX model goes to the reference backend
//! the options name (tract or ONNX Runtime), a TensorRT engine to TensorRT.

use crate::backend::select::{open, BackendOptions};
use crate::backend::Backend;
use crate::onnx::OnnxModel;
use anyhow::Result;
use std::path::Path;

/// File extensions of serialized TensorRT engines.
pub const ENGINE_EXTENSIONS: [&str; 3] = ["engine", "plan", "trt"];

/// What a model file is, by its extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelFile {
    /// An ONNX model (`.onnx`).
    Onnx,
    /// A serialized TensorRT engine (`.engine`, `.plan`, `.trt`).
    Engine,
}

impl ModelFile {
    /// The kind of `path`, or `None` for an extension trtkit does not run.
    pub fn of(path: &Path) -> Option<ModelFile> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        if ext == "onnx" {
            Some(ModelFile::Onnx)
        } else if ENGINE_EXTENSIONS.contains(&ext.as_str()) {
            Some(ModelFile::Engine)
        } else {
            None
        }
    }
}

/// Opens the backend that runs the model at `path`, choosing by file type. Anything but an
/// engine is read as ONNX (so a model saved without the extension still opens).
pub fn open_backend(path: &Path, options: &BackendOptions) -> Result<Box<dyn Backend>> {
    if ModelFile::of(path) == Some(ModelFile::Engine) {
        return Err(engine_not_runnable(path));
    }
    open_model(&OnnxModel::load(path)?, options)
}

/// Opens an ONNX model already in memory (after a shape override or a rewrite).
pub fn open_model(model: &OnnxModel, options: &BackendOptions) -> Result<Box<dyn Backend>> {
    open(model, options)
}

/// Why an engine file cannot run here: engine execution is not built into trtkit yet, and it
/// needs NVIDIA's TensorRT runtime (`libnvinfer`), which the error says was or was not found.
fn engine_not_runnable(path: &Path) -> anyhow::Error {
    let shown = path.display();
    let probes = crate::trt::loader::probe_tensorrt();
    match probes.iter().find(|p| p.library == "libnvinfer") {
        Some(p) if p.found => anyhow::anyhow!(
            "{shown}: running TensorRT engines is not built into trtkit yet (TensorRT {} was found)",
            p.version.clone().unwrap_or_default()
        ),
        _ => anyhow::anyhow!(
            "{shown}: running a TensorRT engine requires TensorRT (libnvinfer), which was not found on this machine; `trtkit doctor` lists what was tried"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_extension() {
        assert_eq!(
            ModelFile::of(Path::new("a/m.ENGINE")),
            Some(ModelFile::Engine)
        );
        assert_eq!(ModelFile::of(Path::new("m.plan")), Some(ModelFile::Engine));
        assert_eq!(ModelFile::of(Path::new("m.onnx")), Some(ModelFile::Onnx));
        assert_eq!(ModelFile::of(Path::new("m.npz")), None);
    }
}
