//! The one place a file given to a command is told apart and opened: an ONNX model goes to the
//! reference backend the options name (tract or ONNX Runtime), a TensorRT engine to TensorRT,
//! and saved tensors (`.npz`/`.npy`) are read as they are.

use crate::backend::select::{open, BackendOptions};
use crate::backend::Backend;
use crate::data::npz;
use crate::jobs::batch_memory::{check_host, model_sample_bytes, specs_sample_bytes};
use crate::onnx::OnnxModel;
use crate::setting::Setting;
use crate::tensor::HostTensor;
use crate::trt::backend::{TrtBackend, TrtOptions};
use crate::trt::engine_file::{file_flavour, is_engine_name};
use anyhow::Result;
use std::path::Path;

/// What a file given to a command is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// An ONNX model (`.onnx`).
    Onnx,
    /// A serialized TensorRT engine (`.engine`, `.plan`, `.trt`, or any name with the magic).
    Engine,
    /// Saved tensors: an `.npz`, or an `.npy` holding one.
    Saved,
}

impl FileKind {
    /// The kind of `path`: an engine by its first bytes (`ftrt`/`vtrt`, whatever its name) or by
    /// its name; saved tensors and ONNX models by their extension. `None` for any other name.
    pub(crate) fn from_path(path: &Path) -> Option<FileKind> {
        if path.is_file() && matches!(file_flavour(path), Ok(Some(_))) {
            return Some(FileKind::Engine);
        }
        if is_engine_name(path) {
            return Some(FileKind::Engine);
        }
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "onnx" => Some(FileKind::Onnx),
            "npz" | "npy" => Some(FileKind::Saved),
            _ => None,
        }
    }

    /// Whether `path` is something that runs (a model or an engine), as opposed to saved
    /// tensors or a file of no known kind.
    pub fn runs(path: &Path) -> bool {
        matches!(
            FileKind::from_path(path),
            Some(FileKind::Onnx | FileKind::Engine)
        )
    }
}

/// A file opened by its kind.
pub(crate) enum Opened {
    /// An ONNX model, loaded but on no backend yet (its shapes and batch are the caller's).
    Model(Box<OnnxModel>),
    /// A TensorRT engine on its backend.
    Engine(Box<dyn Backend>),
    /// Saved tensors.
    Saved(Vec<HostTensor>),
}

/// Opens `path` by its kind ([`FileKind::from_path`]); a file of no known kind is read as ONNX (so a
/// model saved without the extension still opens).
pub(crate) fn open_file(path: &Path, options: &BackendOptions) -> Result<Opened> {
    Ok(match FileKind::from_path(path) {
        Some(FileKind::Engine) => Opened::Engine(open_engine(path, options)?),
        Some(FileKind::Saved) => Opened::Saved(npz::load(path)?),
        Some(FileKind::Onnx) | None => Opened::Model(Box::new(OnnxModel::load(path)?)),
    })
}

/// Opens the backend that runs the model at `path`, choosing by file kind. Anything but an
/// engine is read as ONNX (so a model saved without the extension still opens). A fixed batch
/// (`options.batch`) is first checked against the host memory left ([`check_host`]): for a
/// model before it is prepared, for an engine once its I/O is known.
pub fn open_backend(path: &Path, options: &BackendOptions) -> Result<Box<dyn Backend>> {
    if FileKind::from_path(path) == Some(FileKind::Engine) {
        let engine = open_engine(path, options)?;
        if let Some(batch) = options.batch {
            let per_sample = specs_sample_bytes(engine.inputs().iter().chain(engine.outputs()));
            check_host(Setting::BatchSize, batch, per_sample)?;
        }
        return Ok(engine);
    }
    let model = OnnxModel::load(path)?;
    if let Some(batch) = options.batch {
        check_host(Setting::BatchSize, batch, model_sample_bytes(&model))?;
    }
    open_model(&model, options)
}

/// Opens the TensorRT engine at `path` on the GPU the options name.
fn open_engine(path: &Path, options: &BackendOptions) -> Result<Box<dyn Backend>> {
    let trt = TrtOptions {
        device_id: options.device_id.unwrap_or(0),
        tensorrt_dir: options.tensorrt_dir.clone(),
    };
    Ok(Box::new(TrtBackend::open(path, &trt)?))
}

/// Opens an ONNX model already in memory (after a shape override or a rewrite).
pub(crate) fn open_model(model: &OnnxModel, options: &BackendOptions) -> Result<Box<dyn Backend>> {
    open(model, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_extension_and_magic() {
        assert_eq!(
            FileKind::from_path(Path::new("a/m.ENGINE")),
            Some(FileKind::Engine)
        );
        assert_eq!(
            FileKind::from_path(Path::new("m.plan")),
            Some(FileKind::Engine)
        );
        assert_eq!(
            FileKind::from_path(Path::new("m.onnx")),
            Some(FileKind::Onnx)
        );
        assert_eq!(
            FileKind::from_path(Path::new("m.npz")),
            Some(FileKind::Saved)
        );
        assert_eq!(
            FileKind::from_path(Path::new("m.npy")),
            Some(FileKind::Saved)
        );
        assert_eq!(FileKind::from_path(Path::new("m.bin")), None);
        let dir = tempfile::tempdir().unwrap();
        let named_onnx = dir.path().join("m.onnx");
        std::fs::write(&named_onnx, b"vtrt rest of an engine").unwrap();
        assert_eq!(FileKind::from_path(&named_onnx), Some(FileKind::Engine));
        assert!(FileKind::runs(&named_onnx));
        assert!(!FileKind::runs(Path::new("out.npz")));
    }
}
