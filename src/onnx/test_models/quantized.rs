//! A model as ONNX Runtime's dynamic quantization writes one: its MatMul replaced by
//! `DynamicQuantizeLinear` → `MatMulInteger` on uint8 weights → `Cast` → rescale.

use crate::onnx::graph_builder::{attr_int, tensor_f32, GraphBuilder};
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::{ModelProto, TensorProto};
use crate::tensor::Dim;

/// A uint8 tensor of `dims`.
fn tensor_u8(name: &str, dims: &[i64], data: &[u8]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: DataType::Uint8 as i32,
        raw_data: data.to_vec(),
        ..Default::default()
    }
}

/// `x` [N,4] → `DynamicQuantizeLinear` → `MatMulInteger` with a uint8 [4,3] weight → `Cast` to
/// float → times the input's and the weight's scales → `y` [N,3].
pub fn dynamic_quantized_matmul() -> ModelProto {
    let n = Dim::Symbol("N".into());
    let mut g = GraphBuilder::new("dynamic_quantized_matmul");
    g.input("x", DataType::Float, &[n.clone(), Dim::Fixed(4)])
        .output("y", DataType::Float, &[n, Dim::Fixed(3)])
        .initializer(tensor_u8(
            "w_quantized",
            &[4, 3],
            &[130, 120, 128, 140, 110, 129, 127, 131, 125, 128, 128, 133],
        ))
        .initializer(tensor_u8("w_zero_point", &[], &[128]))
        .initializer(tensor_f32("w_scale", &[], &[0.02]))
        .node(
            "DynamicQuantizeLinear",
            &["x"],
            &["x_quantized", "x_scale", "x_zero_point"],
            vec![],
        )
        .node(
            "MatMulInteger",
            &["x_quantized", "w_quantized", "x_zero_point", "w_zero_point"],
            &["m_int32"],
            vec![],
        )
        .node(
            "Cast",
            &["m_int32"],
            &["m_float"],
            vec![attr_int("to", DataType::Float as i64)],
        )
        .node("Mul", &["x_scale", "w_scale"], &["scale"], vec![])
        .node("Mul", &["m_float", "scale"], &["y"], vec![]);
    g.build()
}
