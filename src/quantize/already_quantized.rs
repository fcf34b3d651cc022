//! Models that already compute in integers: a graph holding quantized ops (Q/DQ pairs, ONNX
//! Runtime's dynamic quantization, the QLinear and Integer ops) has no float weights left for
//! the FP16 or INT8 rewrite to convert, so both refuse it, naming the ops.

use crate::onnx::OnnxModel;
use anyhow::{bail, Result};
use std::collections::BTreeMap;

/// Quantized ops of the ONNX standard and of ONNX Runtime's `com.microsoft` domain, besides
/// every op whose name starts with `QLinear`.
const QUANTIZED_OPS: [&str; 13] = [
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "MatMulInteger",
    "ConvInteger",
    "MatMulIntegerToFloat",
    "DynamicQuantizeMatMul",
    "DynamicQuantizeLSTM",
    "QGemm",
    "QAttention",
    "QEmbedLayerNormalization",
    "MatMulNBits",
    "GatherBlockQuantized",
];

/// Whether `op` computes on quantized integers.
fn is_quantized_op(op: &str) -> bool {
    op.starts_with("QLinear") || op.starts_with("QOrdered") || QUANTIZED_OPS.contains(&op)
}

/// The quantized ops of `model`'s graph with their counts, by op type.
pub(crate) fn quantized_ops(model: &OnnxModel) -> BTreeMap<String, usize> {
    let mut ops = BTreeMap::new();
    for n in &model.graph().node {
        if is_quantized_op(&n.op_type) {
            *ops.entry(n.op_type.clone()).or_insert(0) += 1;
        }
    }
    ops
}

/// An error naming the model and its quantized ops when `model` already holds some: the
/// `rewrite` (`FP16`, `INT8`) needs the float model it was quantized from.
pub(crate) fn refuse_quantized(model: &OnnxModel, rewrite: &str) -> Result<()> {
    let ops = quantized_ops(model);
    if ops.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = ops.iter().map(|(op, n)| format!("{op} ×{n}")).collect();
    bail!(
        "{}: already quantized ({}); the {rewrite} rewrite starts from float weights: give the float model it was quantized from",
        model.path.display(),
        listed.join(", ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::graph_builder::GraphBuilder;
    use crate::onnx::pb::tensor_proto::DataType;
    use crate::onnx::test_models;
    use crate::tensor::Dim;

    #[test]
    fn a_model_with_quantized_ops_is_refused_naming_them_and_a_float_one_is_not() {
        let float = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
        assert!(refuse_quantized(&float, "FP16").is_ok());
        let dims = [Dim::Fixed(1), Dim::Fixed(4)];
        let mut g = GraphBuilder::new("dynamic_quantized");
        g.input("x", DataType::Float, &dims)
            .output("y", DataType::Float, &dims)
            .node("DynamicQuantizeLinear", &["x"], &["xq", "xs", "xz"], vec![])
            .node("MatMulInteger", &["xq", "w", "xz", "wz"], &["m"], vec![])
            .node("MatMulInteger", &["xq", "w", "xz", "wz"], &["m2"], vec![])
            .node("Cast", &["m"], &["y"], vec![]);
        let q = OnnxModel::from_proto(g.build(), "rec-q.onnx");
        let err = refuse_quantized(&q, "FP16").unwrap_err().to_string();
        assert_eq!(
            err,
            "rec-q.onnx: already quantized (DynamicQuantizeLinear ×1, MatMulInteger ×2); the FP16 rewrite starts from float weights: give the float model it was quantized from"
        );
        assert!(is_quantized_op("QLinearConv") && !is_quantized_op("Conv"));
    }
}
