//! The one place a backend is opened from a file: an ONNX model goes to the reference backend
//! the options name (tract or ONNX Runtime), a TensorRT engine to TensorRT.

use crate::backend::select::{open, BackendOptions};
use crate::backend::Backend;
use crate::onnx::OnnxModel;
use crate::trt::backend::{TrtBackend, TrtOptions};
use crate::trt::engine_file::is_engine_name;
use anyhow::Result;
use std::path::Path;

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
    pub fn from_path(path: &Path) -> Option<ModelFile> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        if ext == "onnx" {
            Some(ModelFile::Onnx)
        } else if is_engine_name(path) {
            Some(ModelFile::Engine)
        } else {
            None
        }
    }
}

/// Opens the backend that runs the model at `path`, choosing by file type. Anything but an
/// engine is read as ONNX (so a model saved without the extension still opens).
pub fn open_backend(path: &Path, options: &BackendOptions) -> Result<Box<dyn Backend>> {
    if ModelFile::from_path(path) == Some(ModelFile::Engine) {
        let trt = TrtOptions {
            device_id: options.device_id.unwrap_or(0),
            tensorrt_dir: options.tensorrt_dir.clone(),
        };
        return Ok(Box::new(TrtBackend::open(path, &trt)?));
    }
    open_model(&OnnxModel::load(path)?, options)
}

/// Opens an ONNX model already in memory (after a shape override or a rewrite).
pub fn open_model(model: &OnnxModel, options: &BackendOptions) -> Result<Box<dyn Backend>> {
    open(model, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_extension() {
        assert_eq!(
            ModelFile::from_path(Path::new("a/m.ENGINE")),
            Some(ModelFile::Engine)
        );
        assert_eq!(
            ModelFile::from_path(Path::new("m.plan")),
            Some(ModelFile::Engine)
        );
        assert_eq!(
            ModelFile::from_path(Path::new("m.onnx")),
            Some(ModelFile::Onnx)
        );
        assert_eq!(ModelFile::from_path(Path::new("m.npz")), None);
    }
}
