//! ONNX `TensorProto` files (the `input_*.pb` / `output_*.pb` of ONNX's test data) as host
//! tensors.

use crate::onnx::pb::TensorProto;
use crate::onnx::tensor_values::tensor_values;
use crate::tensor::HostTensor;
use anyhow::{Context, Result};
use prost::Message;
use std::path::Path;

/// Converts a decoded `TensorProto` (raw or typed fields) to a host tensor.
pub(crate) fn to_host(t: &TensorProto, what: &str) -> Result<HostTensor> {
    let data = tensor_values(t, what)?;
    let shape = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).with_context(|| format!("{what}: negative dim {d}")))
        .collect::<Result<Vec<_>>>()?;
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
    use crate::tensor::TensorData;

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
