//! Reading float32 initializers and writing float16/int8 ones, whichever way they are stored.

use crate::onnx::dtype::data_type;
use crate::onnx::pb::tensor_proto::{DataLocation, DataType};
use crate::onnx::pb::TensorProto;
use anyhow::{bail, Result};
use half::f16;

/// The values of a float32 tensor (raw little-endian data or `float_data`).
pub(crate) fn read_f32(t: &TensorProto) -> Result<Vec<f32>> {
    if data_type(t.data_type) != Some(DataType::Float) {
        bail!("initializer '{}' is not float32", t.name);
    }
    if t.data_location == Some(DataLocation::External as i32) {
        bail!(
            "initializer '{}' is stored as external data; inline it first",
            t.name
        );
    }
    if !t.raw_data.is_empty() {
        if !t.raw_data.len().is_multiple_of(4) {
            bail!(
                "initializer '{}': raw data is not a whole number of float32",
                t.name
            );
        }
        return Ok(t
            .raw_data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect());
    }
    Ok(t.float_data.clone())
}

/// Replaces a tensor's content with float16 values (raw data), keeping name and dims.
pub(crate) fn set_f16(t: &mut TensorProto, values: &[f16]) {
    t.data_type = DataType::Float16 as i32;
    t.float_data.clear();
    t.int32_data.clear();
    t.raw_data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
}

/// An int8 tensor stored as raw data.
pub(crate) fn tensor_i8(name: &str, dims: &[i64], data: &[i8]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: DataType::Int8 as i32,
        raw_data: data.iter().map(|&v| v as u8).collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::graph_builder::tensor_f32;

    #[test]
    fn reads_raw_and_float_data() {
        let t = tensor_f32("w", &[2], &[1.5, -2.0]);
        assert_eq!(read_f32(&t).unwrap(), vec![1.5, -2.0]);
        let t = TensorProto {
            name: "v".into(),
            dims: vec![1],
            data_type: DataType::Float as i32,
            float_data: vec![3.0],
            ..Default::default()
        };
        assert_eq!(read_f32(&t).unwrap(), vec![3.0]);
        let mut t = t;
        set_f16(&mut t, &[f16::from_f32(0.5)]);
        assert_eq!(t.raw_data, f16::from_f32(0.5).to_le_bytes().to_vec());
    }
}
