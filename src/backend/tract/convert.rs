//! Tensors between trtkit and tract: element types and I/O specs read from tract's facts, host
//! tensors into tract's and back, and one run of a prepared plan on host tensors.

use crate::tensor::Dim;
use crate::tensor::{ElemType, HostTensor, IoSpec, TensorData};
use anyhow::{bail, Context, Result};
use tract_onnx::prelude::*;

/// trtkit's element type for tract's `dt`; `what` names the tensor in the error.
pub(super) fn elem_type_of(dt: DatumType, what: &str) -> Result<ElemType> {
    Ok(match dt {
        DatumType::F32 => ElemType::F32,
        DatumType::F16 => ElemType::F16,
        DatumType::F64 => ElemType::F64,
        DatumType::I64 => ElemType::I64,
        DatumType::I32 => ElemType::I32,
        DatumType::I8 => ElemType::I8,
        DatumType::U8 => ElemType::U8,
        DatumType::Bool => ElemType::Bool,
        other => bail!("{what} has element type {other:?}, which trtkit does not carry"),
    })
}

/// The I/O spec of tensor `name` from tract's fact (a symbolic axis keeps its symbol).
pub(super) fn spec_of(name: &str, fact: &TypedFact) -> Result<IoSpec> {
    let dims = fact
        .shape
        .iter()
        .map(|d| match d.to_i64() {
            Ok(n) => Dim::Fixed(n),
            Err(_) => Dim::Symbol(d.to_string()),
        })
        .collect();
    Ok(IoSpec {
        name: name.to_string(),
        elem_type: elem_type_of(fact.datum_type, name)?,
        dims,
    })
}

/// A host tensor as a tract tensor (copied).
pub(super) fn to_tract(t: &HostTensor) -> Result<Tensor> {
    let shape = &t.shape;
    Ok(match &t.data {
        TensorData::F32(v) => Tensor::from_shape(shape, v)?,
        TensorData::F16(v) => Tensor::from_shape(shape, v)?,
        TensorData::F64(v) => Tensor::from_shape(shape, v)?,
        TensorData::I64(v) => Tensor::from_shape(shape, v)?,
        TensorData::I32(v) => Tensor::from_shape(shape, v)?,
        TensorData::I8(v) => Tensor::from_shape(shape, v)?,
        TensorData::U8(v) => Tensor::from_shape(shape, v)?,
        TensorData::Bool(v) => Tensor::from_shape(shape, v)?,
    })
}

/// A tract tensor as host tensor `name` (copied).
pub(super) fn from_tract(name: &str, t: &Tensor) -> Result<HostTensor> {
    let shape = t.shape().to_vec();
    let plain = t
        .try_as_plain_ram()
        .map_err(|e| anyhow::anyhow!("output '{name}': {e}"))?;
    let data = match t.datum_type() {
        DatumType::F32 => TensorData::F32(plain.as_slice::<f32>()?.to_vec()),
        DatumType::F16 => TensorData::F16(plain.as_slice::<half::f16>()?.to_vec()),
        DatumType::F64 => TensorData::F64(plain.as_slice::<f64>()?.to_vec()),
        DatumType::I64 => TensorData::I64(plain.as_slice::<i64>()?.to_vec()),
        DatumType::I32 => TensorData::I32(plain.as_slice::<i32>()?.to_vec()),
        DatumType::I8 => TensorData::I8(plain.as_slice::<i8>()?.to_vec()),
        DatumType::U8 => TensorData::U8(plain.as_slice::<u8>()?.to_vec()),
        DatumType::Bool => TensorData::Bool(plain.as_slice::<bool>()?.to_vec()),
        other => bail!("output '{name}' has element type {other:?}, which trtkit does not carry"),
    };
    HostTensor::new(name, shape, data)
}

/// Runs `plan` on host tensors and returns tract's values (no copy out).
pub(super) fn run_plan(plan: &dyn Runnable, inputs: &[HostTensor]) -> Result<TVec<TValue>> {
    let values: TVec<TValue> = inputs
        .iter()
        .map(|t| Ok(to_tract(t)?.into()))
        .collect::<Result<_>>()?;
    // tract-cuda can panic on storage it cannot read back; turn that into an error.
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| plan.run(values)))
        .map_err(|p| {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            anyhow::anyhow!("tract panicked: {msg}")
        })?
        .map_err(|e| anyhow::anyhow!("{e:#}"))
        .context("tract inference failed")?;
    Ok(out)
}

/// Copies tract's output values into host tensors named by `specs`.
pub(super) fn to_host(out: &TVec<TValue>, specs: &[IoSpec]) -> Result<Vec<HostTensor>> {
    out.iter()
        .zip(specs)
        .map(|(t, spec)| from_tract(&spec.name, t))
        .collect()
}
