//! A model shaped like a Paddle export: weights held in `Constant` nodes (no initializers), and
//! an image input whose height and width are left free, unnamed or with Paddle's dotted names.

use crate::onnx::graph_builder::{attr_ints, tensor_f32, GraphBuilder};
use crate::onnx::pb::attribute_proto::AttributeType;
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::{AttributeProto, ModelProto, TensorProto};
use crate::onnx::small_classifier::deterministic_weights;
use crate::tensor::Dim;

/// Output classes of [`paddle_style`].
pub const PADDLE_CLASSES: i64 = 4;

/// A `Constant` node's `value` attribute.
fn value(t: TensorProto) -> AttributeProto {
    AttributeProto {
        name: "value".into(),
        r#type: AttributeType::Tensor as i32,
        t: Some(t),
        ..Default::default()
    }
}

/// `x` [batch, 3, `h`, `w`] → Conv (3→8, 3×3, padding 1; weight and bias in Constant nodes) →
/// Relu → Conv (8→8, 3×3, stride 2; weight in a Constant) → GlobalAveragePool → Flatten →
/// MatMul (8→4; weight in a Constant) → `probs` [batch, 4]. `batch`, `h` and `w` are what the
/// input declares: [`Dim::Unknown`] for an axis with neither a size nor a name, or a symbol such
/// as `p2o.DynamicDimension.1`. Parameters: 216 + 8 + 576 + 32 = 832, all in Constant nodes.
pub fn paddle_style(batch: Dim, h: Dim, w: Dim) -> ModelProto {
    let unknown_out = [Dim::Unknown, Dim::Fixed(PADDLE_CLASSES)];
    let mut g = GraphBuilder::new("paddle_style");
    g.input("x", DataType::Float, &[batch, Dim::Fixed(3), h, w])
        .output("probs", DataType::Float, &unknown_out)
        .node(
            "Constant",
            &[],
            &["conv1.w"],
            vec![value(tensor_f32(
                "",
                &[8, 3, 3, 3],
                &deterministic_weights(31, 216, 0.4),
            ))],
        )
        .node(
            "Constant",
            &[],
            &["conv1.b"],
            vec![value(tensor_f32(
                "",
                &[8],
                &deterministic_weights(32, 8, 0.1),
            ))],
        )
        .node(
            "Constant",
            &[],
            &["conv2.w"],
            vec![value(tensor_f32(
                "",
                &[8, 8, 3, 3],
                &deterministic_weights(33, 576, 0.3),
            ))],
        )
        .node(
            "Constant",
            &[],
            &["fc.w"],
            vec![value(tensor_f32(
                "",
                &[8, PADDLE_CLASSES],
                &deterministic_weights(34, 32, 0.5),
            ))],
        )
        .node(
            "Conv",
            &["x", "conv1.w", "conv1.b"],
            &["c1"],
            vec![
                attr_ints("kernel_shape", &[3, 3]),
                attr_ints("pads", &[1, 1, 1, 1]),
            ],
        )
        .node("Relu", &["c1"], &["r1"], vec![])
        .node(
            "Conv",
            &["r1", "conv2.w"],
            &["c2"],
            vec![
                attr_ints("kernel_shape", &[3, 3]),
                attr_ints("strides", &[2, 2]),
            ],
        )
        .node("GlobalAveragePool", &["c2"], &["pooled"], vec![])
        .node("Flatten", &["pooled"], &["flat"], vec![])
        .node("MatMul", &["flat", "fc.w"], &["probs"], vec![]);
    g.build()
}
