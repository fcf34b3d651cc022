//! A `TensorProto`'s values as host data, whichever field holds them: `raw_data`
//! (little-endian) or the typed field of its element type. ONNX's test-data files and the
//! small constants a rewrite reads (scales, shapes, axes, weights to pack) both go through here.

use super::dtype::elem_type;
use super::pb::TensorProto;
use crate::tensor::{ElemType, TensorData};
use anyhow::{bail, Context, Result};
use half::f16;

/// The values of `t`; `what` names it in errors (an element type trtkit does not carry, raw
/// data that is not a whole number of elements).
pub(crate) fn tensor_values(t: &TensorProto, what: &str) -> Result<TensorData> {
    let elem = elem_type(t.data_type).with_context(|| {
        format!(
            "{what}: element type code {} is not supported by trtkit",
            t.data_type
        )
    })?;
    if !t.raw_data.is_empty() {
        if !t.raw_data.len().is_multiple_of(elem.size()) {
            bail!("{what}: raw data is not a whole number of {elem} elements");
        }
        return Ok(TensorData::from_le_bytes(elem, &t.raw_data));
    }
    Ok(match elem {
        ElemType::F32 => TensorData::F32(t.float_data.clone()),
        ElemType::F64 => TensorData::F64(t.double_data.clone()),
        ElemType::I64 => TensorData::I64(t.int64_data.clone()),
        ElemType::I32 => TensorData::I32(t.int32_data.clone()),
        ElemType::I8 => TensorData::I8(t.int32_data.iter().map(|&v| v as i8).collect()),
        ElemType::U8 => TensorData::U8(t.int32_data.iter().map(|&v| v as u8).collect()),
        ElemType::Bool => TensorData::Bool(t.int32_data.iter().map(|&v| v != 0).collect()),
        ElemType::F16 => TensorData::F16(
            t.int32_data
                .iter()
                .map(|&v| f16::from_bits(v as u16))
                .collect(),
        ),
    })
}
