//! ONNX `TensorProto` files (the `input_*.pb` / `output_*.pb` of ONNX's test data) as host
//! tensors.

use crate::onnx::pb::TensorProto;
use crate::tensor::{ElemType, HostTensor, TensorData};
use anyhow::{bail, Context, Result};
use half::f16;
use prost::Message;
use std::path::Path;

/// Converts a decoded `TensorProto` (raw or typed fields) to a host tensor.
pub(crate) fn to_host(t: &TensorProto, what: &str) -> Result<HostTensor> {
    let elem = crate::onnx::dtype::elem_type(t.data_type).with_context(|| {
        format!(
            "{what}: element type code {} is not supported by trtkit",
            t.data_type
        )
    })?;
    let shape = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).with_context(|| format!("{what}: negative dim {d}")))
        .collect::<Result<Vec<_>>>()?;
    let data = if !t.raw_data.is_empty() {
        if !t.raw_data.len().is_multiple_of(elem.size()) {
            bail!("{what}: raw data is not a whole number of {elem} elements");
        }
        TensorData::from_le_bytes(elem, &t.raw_data)
    } else {
        match elem {
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
        }
    };
    HostTensor::new(t.name.clone(), shape, data).with_context(|| what.to_string())
}

/// Reads one `TensorProto` file.
pub fn load(path: &Path) -> Result<HostTensor> {
    let what = path.display().to_string();
    let bytes = std::fs::read(path).with_context(|| format!("{what}: cannot read"))?;
    let proto = TensorProto::decode(bytes.as_slice())
        .with_context(|| format!("{what}: not a TensorProto"))?;
    to_host(&proto, &what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_raw_and_typed_fields() {
        let raw = TensorProto {
            name: "x".into(),
            dims: vec![2],
            data_type: 1,
            raw_data: [1.5f32, -2.0]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            ..Default::default()
        };
        let t = to_host(&raw, "x.pb").unwrap();
        assert_eq!(t.data, TensorData::F32(vec![1.5, -2.0]));
        let typed = TensorProto {
            dims: vec![1, 3],
            data_type: 7,
            int64_data: vec![4, 5, 6],
            ..Default::default()
        };
        assert_eq!(to_host(&typed, "y.pb").unwrap().shape, vec![1, 3]);
        let short = TensorProto {
            dims: vec![4],
            data_type: 1,
            float_data: vec![1.0],
            ..Default::default()
        };
        assert!(to_host(&short, "z.pb").is_err());
    }
}
