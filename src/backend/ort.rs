//! The ONNX Runtime backend on the CPU (`--backend ort`): the reference most users already
//! trust, and what its CUDA twin (`ort_cuda`) shares with it: the environment, the model as
//! ONNX Runtime gets it, the I/O specs and the runs on host tensors. The library is loaded at
//! run time, never downloaded at build time (`ort_libs` finds it).

use super::ort_fusion::fuse_for_ort;
use super::ort_ir::lower_for_ort;
use super::ort_libs::{locate_library, OrtLibrary, HOW_TO_GET};
use super::ort_profile::{OpTimes, ProfileFolder};
use super::{Backend, OutputVisitor, RunOutput};
use crate::error::{ErrorKind, TypedError};
use crate::onnx::rewrite::fp16_emulate::has_float16_compute;
use crate::onnx::rewrite::transformer_fusion::TransformerFusion;
use crate::onnx::shape::{shaped, ShapeRequest};
use crate::onnx::tensor_info::is_placeholder;
use crate::onnx::tensor_info::tensor_type_mut;
use crate::onnx::OnnxModel;
use crate::tensor::{check_input_count, ElemType, HostTensor, IoSpec, TensorData};
use crate::tensor::{BatchAxes, BatchAxisRequest, Dim};
use anyhow::{anyhow, bail, Context, Result};
use ort::environment::Environment;
use ort::session::builder::{GraphOptimizationLevel, SessionBuilder};
use ort::session::{Session, SessionInputValue, SessionOutputs};
use ort::value::{DynValue, TensorElementType, TensorRef, ValueType};
use rayon::prelude::*;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How to prepare a model for ONNX Runtime.
#[derive(Clone, Debug, Default)]
pub(crate) struct OrtOptions {
    /// `--input-shape` overrides.
    pub input_shapes: ShapeRequest,
    /// Fix the batch axis to this size.
    pub batch: Option<usize>,
    /// Batch axes given by hand, over what the model's named axes say.
    pub batch_axes: BatchAxisRequest,
    /// Intra-op threads; `None` lets ONNX Runtime use all cores.
    pub threads: Option<usize>,
    /// The transformer fusion to run before a session opens; `None` runs none.
    pub transformer_fusion: Option<TransformerFusion>,
    /// Whether the intra- and inter-op pools spin between runs; `None` keeps ONNX Runtime's
    /// default (they do).
    pub spinning: Option<bool>,
    /// Where each session writes ONNX Runtime's profile; `None` profiles nothing.
    pub op_profile: Option<ProfileFolder>,
}

/// The process's ONNX Runtime: the library is located and loaded once; later calls return the
/// first outcome (the environment and the library it loaded, or why not).
fn loaded() -> Result<&'static (Environment, OrtLibrary)> {
    static LOADED: OnceLock<std::result::Result<(Environment, OrtLibrary), String>> =
        OnceLock::new();
    let outcome = LOADED.get_or_init(|| {
        let lib = locate_library().map_err(|e| format!("{e:#}"))?;
        let builder = ort::init_from(&lib.path).map_err(|e| {
            format!(
                "{}: cannot load ONNX Runtime: {e}; {HOW_TO_GET}",
                lib.path.display()
            )
        })?;
        let env = builder
            .with_name("trtkit")
            .build()
            .map_err(|e| format!("{}: {e}", lib.path.display()))?;
        tracing::info!("ONNX Runtime loaded from {}", lib.path.display());
        Ok((env, lib))
    });
    outcome.as_ref().map_err(|e| anyhow!("{e}"))
}

/// The process's ONNX Runtime environment (loading the library on first use).
pub(crate) fn environment() -> Result<&'static Environment> {
    loaded().map(|(env, _)| env)
}

/// The ONNX Runtime library this process loaded (loading it on first use), or why it cannot.
pub fn available() -> Result<&'static OrtLibrary> {
    loaded().map(|(_, lib)| lib)
}

/// A session builder with trtkit's settings for `options` (all graph optimizations, the
/// thread count, spinning).
pub(crate) fn session_builder(options: &OrtOptions) -> Result<SessionBuilder> {
    let mut builder = Session::builder(environment()?)
        .map_err(|e| anyhow!("{e}"))?
        .with_optimization_level(GraphOptimizationLevel::All)
        .map_err(|e| anyhow!("{e}"))?;
    if let Some(n) = options.threads {
        builder = builder.with_intra_threads(n).map_err(|e| anyhow!("{e}"))?;
    }
    if let Some(spin) = options.spinning {
        builder = builder
            .with_intra_op_spinning(spin)
            .map_err(|e| anyhow!("{e}"))?
            .with_inter_op_spinning(spin)
            .map_err(|e| anyhow!("{e}"))?;
    }
    match &options.op_profile {
        Some(folder) => folder.profile(builder),
        None => Ok(builder),
    }
}

/// `model` as ONNX Runtime gets it: the IR version it reads (see [`lower_for_ort`]), the shape
/// overrides and the fixed batch applied, external data inlined, its transformer blocks fused
/// where the options say; with the fusion's note for the report.
pub(crate) fn prepared_model(
    model: &OnnxModel,
    options: &OrtOptions,
) -> Result<(OnnxModel, Option<String>)> {
    let (model, _, note) = prepared_with_axes(model, options)?;
    Ok((model, note))
}

/// [`prepared_model`] and where its inputs and outputs hold their samples (read before the
/// batch is fixed).
pub(crate) fn prepared_with_axes(
    model: &OnnxModel,
    options: &OrtOptions,
) -> Result<(OnnxModel, BatchAxes, Option<String>)> {
    let mut model = model.clone();
    lower_for_ort(&mut model)?;
    let (mut model, axes, ()) =
        shaped(model, &options.input_shapes, &options.batch_axes, |_, _| {
            (options.batch, ())
        })?;
    model.inline_external_data()?;
    match options.transformer_fusion {
        Some(fusion) => {
            let (model, note) = fuse_for_ort(model, fusion.float16)?;
            Ok((model, axes, note))
        }
        None => Ok((model, axes, None)),
    }
}

/// The session's inputs and outputs as I/O specs.
pub(crate) fn session_io(session: &Session, shown: &str) -> Result<(Vec<IoSpec>, Vec<IoSpec>)> {
    let specs = |outlets: &[ort::value::Outlet]| {
        outlets
            .iter()
            .map(|o| spec_of(o.name(), o.dtype()))
            .collect::<Result<Vec<_>>>()
            .with_context(|| shown.to_string())
    };
    Ok((specs(session.inputs())?, specs(session.outputs())?))
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
                // An axis the model leaves unnamed (or names `?`) has no name a flag could give.
                match dimension_symbols.get(i).filter(|s| !is_placeholder(s)) {
                    Some(s) => Dim::Symbol(s.to_string()),
                    None => Dim::Unknown,
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

/// `t` as an ONNX Runtime input that borrows its elements (no copy of the batch).
fn to_value(t: &HostTensor) -> Result<SessionInputValue<'_>> {
    let shape = t.shape.clone();
    macro_rules! view {
        ($v:expr) => {
            SessionInputValue::from(TensorRef::from_array_view((shape, $v.as_slice()))?.into_dyn())
        };
    }
    Ok(match &t.data {
        TensorData::F32(v) => view!(v),
        TensorData::F16(v) => view!(v),
        TensorData::F64(v) => view!(v),
        TensorData::I64(v) => view!(v),
        TensorData::I32(v) => view!(v),
        TensorData::I8(v) => view!(v),
        TensorData::U8(v) => view!(v),
        TensorData::Bool(v) => view!(v),
    })
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
pub(crate) struct OrtBackend {
    session: Session,
    inputs: Vec<IoSpec>,
    outputs: Vec<IoSpec>,
    batch_axes: BatchAxes,
    /// What the transformer fusion did, for the report.
    fusion_note: Option<String>,
    /// Where the session writes its profile, when it profiles its runs (held for as long as
    /// the session may write there).
    profile: Option<ProfileFolder>,
}

impl OrtBackend {
    /// Loads the library if needed and creates a session for `model`. Where ONNX Runtime refuses
    /// the model at the shapes asked for but opens it as declared (its shape inference can fail
    /// on a branch that those shapes never take, as Silero VAD's 8 kHz `If` branch does), the
    /// session keeps the declared axes and is fed at the shapes asked for, with a warning.
    pub fn load(model: &OnnxModel, options: &OrtOptions) -> Result<Self> {
        let declared = model;
        let (model, batch_axes, fusion_note) = prepared_with_axes(model, options)?;
        let shown = model.path.display().to_string();
        let refused = |e: anyhow::Error| {
            e.context(TypedError::new(
                ErrorKind::BackendRefusedModel,
                format!("{shown}: ONNX Runtime cannot load the model"),
            ))
        };
        let session = match open_session(&model, options) {
            Ok(session) => session,
            Err(e) if options.batch.is_some() || !options.input_shapes.is_empty() => {
                let mut free = declared.clone();
                lower_for_ort(&mut free)?;
                free_every_axis(&mut free);
                free.inline_external_data()?;
                let Ok(session) = open_session(&free, options) else {
                    return Err(refused(e));
                };
                tracing::warn!(
                    "{shown}: ONNX Runtime refuses the model at the shapes asked for ({}); it \
                     runs with every input axis left free, fed at those shapes",
                    e.to_string().lines().next().unwrap_or_default()
                );
                session
            }
            Err(e) => return Err(refused(e)),
        };
        let (inputs, outputs) = session_io(&session, &shown)?;
        Ok(OrtBackend {
            session,
            inputs,
            outputs,
            batch_axes,
            fusion_note,
            profile: options.op_profile.clone(),
        })
    }
}

/// Makes every axis of `model`'s inputs and outputs free (a name of its own) and drops its
/// value_info, so ONNX Runtime infers no concrete shape when it opens it.
fn free_every_axis(model: &mut OnnxModel) {
    use crate::onnx::pb::tensor_shape_proto::dimension::Value;
    let g = model.graph_mut();
    g.value_info.clear();
    for (i, v) in g.input.iter_mut().chain(g.output.iter_mut()).enumerate() {
        let Some(shape) = tensor_type_mut(v).and_then(|t| t.shape.as_mut()) else {
            continue;
        };
        for (k, d) in shape.dim.iter_mut().enumerate() {
            d.value = Some(Value::DimParam(format!("trtkit_free_{i}_{k}")));
        }
    }
}

/// A CPU session of `model` with trtkit's settings; ONNX Runtime's error as it says it.
fn open_session(model: &OnnxModel, options: &OrtOptions) -> Result<Session> {
    let mut builder = session_builder(options)?;
    if has_float16_compute(model) {
        // NCHWc only rewrites float32 convolutions, and ONNX Runtime 1.31's pass crashes
        // (SIGSEGV) on some float16 graphs with free axes (khmersm's FP16 rewrite).
        builder = builder
            .with_config_entry(
                "optimization.disable_specified_optimizers",
                "NchwcTransformer",
            )
            .map_err(|e| anyhow!("{e}"))?;
    }
    builder
        .commit_from_memory(&model.to_bytes())
        .map_err(|e| anyhow!("{e}"))
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
        run_host(&mut self.session, (&self.inputs, &self.outputs), inputs)
    }

    fn batch_axes(&self) -> BatchAxes {
        self.batch_axes.clone()
    }

    fn finish(&mut self) -> Result<Vec<String>> {
        let mut notes: Vec<String> = self
            .fusion_note
            .iter()
            .map(|n| format!("ort-cpu: {n}"))
            .collect();
        if self.profile.is_some() {
            let times = OpTimes::of_session(&mut self.session)?;
            notes.push(format!(
                "ort-cpu: {}",
                times.said("each node's time on the host")
            ));
        }
        Ok(notes)
    }

    fn run_visit(&mut self, inputs: &[HostTensor], visit: &OutputVisitor) -> Result<Duration> {
        run_host_visit(
            &mut self.session,
            (&self.inputs, &self.outputs),
            inputs,
            visit,
        )
    }
}

/// A session's inputs and outputs, in the order trtkit passes and returns them.
pub(crate) type SessionIo<'a> = (&'a [IoSpec], &'a [IoSpec]);

/// Runs `session` on host tensors: ONNX Runtime copies them to wherever its provider computes
/// and the outputs back, and returns when they are on the host.
pub(crate) fn run_host(
    session: &mut Session,
    io: SessionIo,
    inputs: &[HostTensor],
) -> Result<RunOutput> {
    let values = input_values(io.0, inputs)?;
    let start = Instant::now();
    let out = infer(session, values)?;
    let elapsed = start.elapsed();
    let outputs =
        io.1.iter()
            .map(|spec| from_value(&spec.name, output(&out, &spec.name)?))
            .collect::<Result<_>>()?;
    Ok(RunOutput { outputs, elapsed })
}

/// Runs `session` on host tensors and visits the float32 outputs where ONNX Runtime left them,
/// in parallel across outputs.
pub(crate) fn run_host_visit(
    session: &mut Session,
    io: SessionIo,
    inputs: &[HostTensor],
    visit: &OutputVisitor,
) -> Result<Duration> {
    let values = input_values(io.0, inputs)?;
    let start = Instant::now();
    let out = infer(session, values)?;
    let floats =
        io.1.iter()
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

/// The session's named input values for `inputs` (checked against the model's count).
fn input_values<'a>(
    specs: &[IoSpec],
    inputs: &'a [HostTensor],
) -> Result<Vec<(String, SessionInputValue<'a>)>> {
    check_input_count(specs, inputs)?;
    inputs
        .iter()
        .zip(specs)
        .map(|(t, spec)| Ok((spec.name.clone(), to_value(t)?)))
        .collect()
}

/// Runs the session on named input values.
fn infer<'s>(
    session: &'s mut Session,
    values: Vec<(String, SessionInputValue<'_>)>,
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
