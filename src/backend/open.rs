//! The one place a model is opened. A file given to a command is told apart by its kind: an
//! ONNX model goes to the reference backend the options name (tract or ONNX Runtime, a float16
//! graph through the FP16 emulation where that backend would widen it), a TensorRT engine to the
//! engine backend, and saved tensors (`.npz`/`.npy`) are read as they are. An ONNX model already
//! in memory (after a shape override or a rewrite) opens through the same [`open`].

use super::batch_memory::{check_host, model_sample_bytes, specs_sample_bytes};
use super::engine::{TrtBackend, TrtOptions};
use super::fp16_emulated;
use super::ort::{OrtBackend, OrtOptions};
use super::ort_cuda::{OrtCudaBackend, OrtCudaOptions};
use super::select::{BackendKind, BackendOptions, Fp16Compute, TransformerFusionPolicy};
use super::tract::{TractBackend, TractOptions};
use super::{Backend, Device};
use crate::data::npz;
use crate::error::Setting;
use crate::onnx::rewrite::fp16_emulate::{has_float16_compute, Fp16Emulation};
use crate::onnx::rewrite::pass::run_pass;
use crate::onnx::rewrite::transformer_fusion::TransformerFusion;
use crate::onnx::OnnxModel;
use crate::tensor::HostTensor;
use crate::trt::engine_file::{file_flavour, is_engine_name};
use anyhow::{anyhow, Result};
use std::path::{Path, PathBuf};

/// What a backend opens: a file (an ONNX model or an engine, told apart by
/// [`FileKind::from_path`]) or an ONNX model in memory.
#[derive(Clone, Copy, Debug)]
pub enum ModelSource<'a> {
    /// A file; anything but an engine is read as ONNX (so a model saved without the extension
    /// still opens).
    File(&'a Path),
    /// A model in memory, its shapes and batch still the options' to set.
    Model(&'a OnnxModel),
}

impl<'a> From<&'a Path> for ModelSource<'a> {
    fn from(path: &'a Path) -> Self {
        ModelSource::File(path)
    }
}

impl<'a> From<&'a PathBuf> for ModelSource<'a> {
    fn from(path: &'a PathBuf) -> Self {
        ModelSource::File(path)
    }
}

impl<'a> From<&'a OnnxModel> for ModelSource<'a> {
    fn from(model: &'a OnnxModel) -> Self {
        ModelSource::Model(model)
    }
}

/// Opens the backend that runs `source` as `options` say. For a file, a fixed batch
/// (`options.batch`) is first checked against the host memory left ([`check_host`]): for a model
/// before it is prepared, for an engine once its I/O is known.
pub fn open<'a>(
    source: impl Into<ModelSource<'a>>,
    options: &BackendOptions,
) -> Result<Box<dyn Backend>> {
    let path = match source.into() {
        ModelSource::Model(model) => return open_visiting(model, options, None),
        ModelSource::File(path) => path,
    };
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
    open_visiting(&model, options, None)
}

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

/// Opens the TensorRT engine at `path` on the GPU the options name.
fn open_engine(path: &Path, options: &BackendOptions) -> Result<Box<dyn Backend>> {
    let trt = TrtOptions {
        device_id: options.device_id.unwrap_or(0),
        tensorrt_dir: options.tensorrt_dir.clone(),
    };
    Ok(Box::new(TrtBackend::open(path, &trt)?))
}

/// Opens a model whose outputs from index `from` on are only visited through
/// [`Backend::run_visit`] (the calibration run's captured activations): on tract's CPU each is
/// freed after its last reader instead of being kept to the end of every run (see
/// [`TractOptions::visit_only_from`]); other backends keep them as outputs.
pub(crate) fn open_capture(
    model: &OnnxModel,
    options: &BackendOptions,
    from: usize,
) -> Result<Box<dyn Backend>> {
    open_visiting(model, options, Some(from))
}

/// Opens `model` on the backend `options` names; a float16 model on a backend that would widen
/// it runs through the FP16 emulation (see [`super::fp16_emulated`]).
fn open_visiting(
    model: &OnnxModel,
    options: &BackendOptions,
    visit_only_from: Option<usize>,
) -> Result<Box<dyn Backend>> {
    let kind = kind_for(model, options);
    if !emulates_fp16(model, kind, options) {
        return open_kind(model, kind, options, visit_only_from);
    }
    let emulated = run_pass(model.clone(), &Fp16Emulation).map_err(|e| {
        anyhow!(
            "{e:#}; --fp16-compute backend runs it as the backend computes float16 (in float32)"
        )
    })?;
    // The emulation's rounding Casts are the point of it: no fused node may step over them.
    let unfused = BackendOptions {
        transformer_fusion: TransformerFusionPolicy::Off,
        ..options.clone()
    };
    let backend = open_kind(&emulated, kind, &unfused, visit_only_from)?;
    Ok(Box::new(fp16_emulated::Emulated(backend)))
}

/// Whether `model` opens through the FP16 emulation on the backend of `kind`: it computes in
/// float16, `options` asks for the emulation, and the backend would widen float16 (everything
/// but ONNX Runtime's CUDA provider).
fn emulates_fp16(model: &OnnxModel, kind: BackendKind, options: &BackendOptions) -> bool {
    options.fp16_compute == Fp16Compute::Emulate
        && !(kind == BackendKind::Ort && options.device == Device::Cuda)
        && has_float16_compute(model)
}

fn open_kind(
    model: &OnnxModel,
    kind: BackendKind,
    options: &BackendOptions,
    visit_only_from: Option<usize>,
) -> Result<Box<dyn Backend>> {
    Ok(match kind {
        BackendKind::Tract => Box::new(TractBackend::load(
            model,
            &TractOptions {
                input_shapes: options.input_shapes.clone(),
                batch: options.batch,
                batch_axes: options.batch_axes.clone(),
                device: options.device,
                threads: options.threads,
                visit_only_from,
            },
        )?),
        BackendKind::Ort => {
            let model_options = OrtOptions {
                input_shapes: options.input_shapes.clone(),
                batch: options.batch,
                batch_axes: options.batch_axes.clone(),
                threads: options.threads,
                transformer_fusion: (options.transformer_fusion == TransformerFusionPolicy::On)
                    .then_some(TransformerFusion {
                        float16: options.device == Device::Cuda,
                    }),
                spinning: options.spinning,
                op_profile: options
                    .op_profile
                    .then(super::ort_profile::ProfileFolder::new)
                    .transpose()?,
            };
            match options.device {
                Device::Cpu => Box::new(OrtBackend::load(model, &model_options)?),
                Device::Cuda => Box::new(OrtCudaBackend::load(
                    model,
                    &OrtCudaOptions {
                        model: model_options,
                        device_id: options.device_id.unwrap_or(0),
                        tuning: options.cuda_tuning,
                    },
                )?),
            }
        }
    })
}

/// The backend that opens `model`: the one `options` names, except that tract stands in, with a
/// warning, for a default ONNX Runtime that cannot read the model.
fn kind_for(model: &OnnxModel, options: &BackendOptions) -> BackendKind {
    if options.kind != BackendKind::Ort || !options.kind_is_default {
        return options.kind;
    }
    match super::ort_ir::refusal(model) {
        Some(why) => {
            tracing::warn!(
                "{}: tract runs the model: ONNX Runtime cannot ({why})",
                model.path.display()
            );
            BackendKind::Tract
        }
        None => BackendKind::Ort,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::rewrite::fp16::Fp16;
    use crate::onnx::rewrite::pass::Pass;

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

    #[test]
    fn float16_models_are_emulated_where_the_backend_would_widen_them() {
        let fp32 = OnnxModel::from_proto(crate::onnx::test_models::classifier(None), "c.onnx");
        let fp16 = Fp16::default().run(fp32.clone()).unwrap().0;
        let options = |kind, device, fp16_compute| BackendOptions {
            kind,
            device,
            fp16_compute,
            ..Default::default()
        };
        let emulate = Fp16Compute::Emulate;
        for (kind, device, want) in [
            (BackendKind::Ort, Device::Cpu, true),
            (BackendKind::Tract, Device::Cpu, true),
            (BackendKind::Tract, Device::Cuda, true),
            (BackendKind::Ort, Device::Cuda, false),
        ] {
            let o = options(kind, device, emulate);
            assert_eq!(emulates_fp16(&fp16, kind, &o), want, "{kind:?} {device:?}");
            assert!(!emulates_fp16(&fp32, kind, &o), "{kind:?} {device:?}");
            let o = options(kind, device, Fp16Compute::Backend);
            assert!(!emulates_fp16(&fp16, kind, &o), "{kind:?} {device:?}");
        }
        let cpu = options(BackendKind::Tract, Device::Cpu, emulate);
        let backend = open(&fp16, &cpu).unwrap();
        assert!(
            backend.name().ends_with(", fp16 emulated"),
            "{}",
            backend.name()
        );
        assert!(!open(&fp32, &cpu).unwrap().name().contains("emulated"));
    }
}
