//! The ONNX Runtime backend (`--backend ort`): the reference most users already trust. The
//! library is loaded at run time, never downloaded at build time: `ORT_DYLIB_PATH`, else the
//! `libonnxruntime.so.*` shipped in the `onnxruntime` Python package's `capi/` folder.

use super::{Backend, OutputVisitor, RunOutput};
use crate::onnx::rewrite::pass::Pass;
use crate::onnx::shape::{Batch, FixBatch, InputShapes, ShapeRequest};
use crate::onnx::OnnxModel;
use crate::tensor::Dim;
use crate::tensor::{check_input_count, ElemType, HostTensor, IoSpec, TensorData};
use anyhow::{anyhow, bail, Context, Result};
use ort::session::{builder::GraphOptimizationLevel, Session, SessionInputValue, SessionOutputs};
use ort::value::{DynValue, Tensor, TensorElementType, ValueType};
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How to prepare a model for ONNX Runtime.
#[derive(Clone, Debug, Default)]
pub struct OrtOptions {
    /// `--input-shape` overrides.
    pub input_shapes: ShapeRequest,
    /// Fix the batch axis to this size.
    pub batch: Option<usize>,
    /// Intra-op threads; `None` lets ONNX Runtime use all cores.
    pub threads: Option<usize>,
}

/// How to get the library, said when it cannot be found.
pub const HOW_TO_GET: &str = "install it with `python3 -m pip install onnxruntime` or set ORT_DYLIB_PATH to libonnxruntime.so";

fn capi_library(package_dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(package_dir.join("capi"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libonnxruntime.so"))
        })
        .collect();
    found.sort();
    found.pop()
}

/// Finds the ONNX Runtime shared library: `ORT_DYLIB_PATH`, else the Python package.
pub fn locate_library() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!(
                "ORT_DYLIB_PATH={} does not exist; {HOW_TO_GET}",
                p.display()
            );
        }
        return Ok(p);
    }
    let probe = std::process::Command::new("python3")
        .args([
            "-c",
            "import onnxruntime, os; print(os.path.dirname(onnxruntime.__file__))",
        ])
        .stderr(std::process::Stdio::null())
        .output();
    if let Some(out) = probe.ok().filter(|o| o.status.success()) {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if let Some(lib) = capi_library(&dir) {
            return Ok(lib);
        }
    }
    bail!("ONNX Runtime library not found (no ORT_DYLIB_PATH, no onnxruntime Python package); {HOW_TO_GET}")
}

/// Loads the library once per process; later calls return the first outcome.
fn ensure_loaded() -> Result<&'static Path> {
    static LOADED: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    let outcome = LOADED.get_or_init(|| {
        let path = locate_library().map_err(|e| format!("{e:#}"))?;
        let builder = ort::init_from(&path).map_err(|e| {
            format!(
                "{}: cannot load ONNX Runtime: {e}; {HOW_TO_GET}",
                path.display()
            )
        })?;
        builder.with_name("trtkit").commit();
        tracing::info!("ONNX Runtime loaded from {}", path.display());
        Ok(path)
    });
    match outcome {
        Ok(p) => Ok(p.as_path()),
        Err(e) => Err(anyhow!("{e}")),
    }
}

/// Whether ONNX Runtime can be loaded on this machine (for `doctor`), with its path.
pub fn available() -> Result<PathBuf> {
    ensure_loaded().map(Path::to_path_buf)
}

fn elem_of(t: TensorElementType, what: &str) -> Result<ElemType> {
    Ok(match t {
        TensorElementType::Float32 => ElemType::F32,
        TensorElementType::Float16 => ElemType::F16,
        TensorElementType::Float64 => ElemType::F64,
        TensorElementType::Int64 => ElemType::I64,
        TensorElementType::Int32 => ElemType::I32,
        TensorElementType::Int8 => ElemType::I8,
        TensorElementType::Uint8 => ElemType::U8,
        TensorElementType::Bool => ElemType::Bool,
        other => bail!("{what} has element type {other:?}, which trtkit does not carry"),
    })
}

fn spec_of(name: &str, ty: &ValueType) -> Result<IoSpec> {
    let ValueType::Tensor {
        ty,
        shape,
        dimension_symbols,
    } = ty
    else {
        bail!("'{name}' is not a tensor ({ty:?}); trtkit only moves tensors");
    };
    let dims = shape
        .iter()
        .enumerate()
        .map(|(i, &d)| {
            if d >= 0 {
                Dim::Fixed(d)
            } else {
                match dimension_symbols.get(i).filter(|s| !s.is_empty()) {
                    Some(s) => Dim::Symbol(s.to_string()),
                    None => Dim::Symbol("?".into()),
                }
            }
        })
        .collect();
    Ok(IoSpec {
        name: name.to_string(),
        elem_type: elem_of(*ty, name)?,
        dims,
    })
}

fn to_value(t: &HostTensor) -> Result<DynValue> {
    let shape = t.shape.clone();
    let v = match &t.data {
        TensorData::F32(v) => Tensor::from_array((shape, v.clone()))?.into_dyn(),
        TensorData::F16(v) => Tensor::from_array((shape, v.clone()))?.into_dyn(),
        TensorData::F64(v) => Tensor::from_array((shape, v.clone()))?.into_dyn(),
        TensorData::I64(v) => Tensor::from_array((shape, v.clone()))?.into_dyn(),
        TensorData::I32(v) => Tensor::from_array((shape, v.clone()))?.into_dyn(),
        TensorData::I8(v) => Tensor::from_array((shape, v.clone()))?.into_dyn(),
        TensorData::U8(v) => Tensor::from_array((shape, v.clone()))?.into_dyn(),
        TensorData::Bool(v) => Tensor::from_array((shape, v.clone()))?.into_dyn(),
    };
    Ok(v)
}

fn from_value(name: &str, v: &DynValue) -> Result<HostTensor> {
    let ValueType::Tensor { ty, .. } = v.dtype() else {
        bail!("output '{name}' is not a tensor");
    };
    macro_rules! take {
        ($t:ty, $variant:ident) => {{
            let (shape, data) = v.try_extract_tensor::<$t>()?;
            (shape.to_vec(), TensorData::$variant(data.to_vec()))
        }};
    }
    let (shape, data) = match elem_of(*ty, &format!("output '{name}'"))? {
        ElemType::F32 => take!(f32, F32),
        ElemType::F16 => take!(half::f16, F16),
        ElemType::F64 => take!(f64, F64),
        ElemType::I64 => take!(i64, I64),
        ElemType::I32 => take!(i32, I32),
        ElemType::I8 => take!(i8, I8),
        ElemType::U8 => take!(u8, U8),
        ElemType::Bool => take!(bool, Bool),
    };
    let shape = shape.iter().map(|&d| d.max(0) as usize).collect();
    HostTensor::new(name, shape, data)
}

/// A model prepared for ONNX Runtime on the CPU.
pub struct OrtBackend {
    session: Session,
    inputs: Vec<IoSpec>,
    outputs: Vec<IoSpec>,
}

impl OrtBackend {
    /// Loads the library if needed and creates a session for `model`.
    pub fn load(model: &OnnxModel, options: &OrtOptions) -> Result<Self> {
        ensure_loaded()?;
        let mut model = model.clone();
        if !options.input_shapes.is_empty() {
            model = InputShapes(options.input_shapes.clone()).run(model)?.0;
        }
        if let Some(n) = options.batch {
            model = FixBatch(Batch::Static(n as i64)).run(model)?.0;
        }
        model.inline_external_data()?;
        let shown = model.path.display().to_string();
        let ort_err = |e: ort::Error| anyhow!("{e}");
        let mut builder = Session::builder()
            .map_err(ort_err)?
            .with_optimization_level(GraphOptimizationLevel::All)
            .map_err(|e| anyhow!("{e}"))?;
        if let Some(n) = options.threads {
            builder = builder.with_intra_threads(n).map_err(|e| anyhow!("{e}"))?;
        }
        let session = builder
            .commit_from_memory(&model.to_bytes())
            .map_err(ort_err)
            .with_context(|| format!("{shown}: ONNX Runtime cannot load the model"))?;
        let inputs = session
            .inputs()
            .iter()
            .map(|o| spec_of(o.name(), o.dtype()))
            .collect::<Result<Vec<_>>>()
            .with_context(|| shown.clone())?;
        let outputs = session
            .outputs()
            .iter()
            .map(|o| spec_of(o.name(), o.dtype()))
            .collect::<Result<Vec<_>>>()
            .with_context(|| shown.clone())?;
        Ok(OrtBackend {
            session,
            inputs,
            outputs,
        })
    }
}

impl Backend for OrtBackend {
    fn name(&self) -> String {
        "ort-cpu".into()
    }

    fn inputs(&self) -> &[IoSpec] {
        &self.inputs
    }

    fn outputs(&self) -> &[IoSpec] {
        &self.outputs
    }

    fn run(&mut self, inputs: &[HostTensor]) -> Result<RunOutput> {
        let values = self.input_values(inputs)?;
        let start = Instant::now();
        let out = infer(&mut self.session, values)?;
        let elapsed = start.elapsed();
        let outputs = self
            .outputs
            .iter()
            .map(|spec| from_value(&spec.name, output(&out, &spec.name)?))
            .collect::<Result<_>>()?;
        Ok(RunOutput { outputs, elapsed })
    }

    /// Visits the float32 outputs where ONNX Runtime left them, in parallel across outputs.
    fn run_visit(&mut self, inputs: &[HostTensor], visit: &OutputVisitor) -> Result<Duration> {
        let values = self.input_values(inputs)?;
        let start = Instant::now();
        let out = infer(&mut self.session, values)?;
        let floats = self
            .outputs
            .iter()
            .enumerate()
            .filter(|(_, spec)| spec.elem_type == ElemType::F32)
            .map(|(i, spec)| {
                let (_, data) = output(&out, &spec.name)?.try_extract_tensor::<f32>()?;
                Ok((i, data))
            })
            .collect::<Result<Vec<(usize, &[f32])>>>()?;
        floats
            .par_iter()
            .try_for_each(|&(i, data)| visit(i, data))?;
        Ok(start.elapsed())
    }
}

impl OrtBackend {
    /// The session's named input values for `inputs` (checked against the model's count).
    fn input_values(
        &self,
        inputs: &[HostTensor],
    ) -> Result<Vec<(String, SessionInputValue<'static>)>> {
        check_input_count(&self.inputs, inputs)?;
        inputs
            .iter()
            .zip(&self.inputs)
            .map(|(t, spec)| Ok((spec.name.clone(), to_value(t)?.into())))
            .collect()
    }
}

/// Runs the session on named input values.
fn infer<'s>(
    session: &'s mut Session,
    values: Vec<(String, SessionInputValue<'static>)>,
) -> Result<SessionOutputs<'s>> {
    session
        .run(values)
        .map_err(|e| anyhow!("{e}"))
        .context("ONNX Runtime inference failed")
}

/// One named output of a run, or an error saying ONNX Runtime did not return it.
fn output<'a>(out: &'a SessionOutputs<'_>, name: &str) -> Result<&'a DynValue> {
    out.get(name)
        .with_context(|| format!("ONNX Runtime returned no output '{name}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_library_in_a_python_package_layout() {
        let dir = tempfile::tempdir().unwrap();
        assert!(capi_library(dir.path()).is_none());
        std::fs::create_dir(dir.path().join("capi")).unwrap();
        std::fs::write(dir.path().join("capi/libonnxruntime.so.1.28.0"), b"").unwrap();
        std::fs::write(dir.path().join("capi/other.so"), b"").unwrap();
        assert_eq!(
            capi_library(dir.path()).unwrap(),
            dir.path().join("capi/libonnxruntime.so.1.28.0")
        );
    }
}
