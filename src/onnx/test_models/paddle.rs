//! A model in the manner of Paddle's ONNX exports: weights held in `Constant` nodes, free height
//! and width, and a feature pyramid whose upsampled map is concatenated with a finer one, so the
//! two maps agree in size only for some input sizes. ONNX Runtime runs it at those sizes; tract
//! cannot prove the sizes equal with height and width left symbolic.

use super::deterministic_weights;
use crate::onnx::graph_builder::{attr_float, attr_int, attr_ints, tensor_f32, GraphBuilder};
use crate::onnx::pb::attribute_proto::AttributeType;
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::{AttributeProto, ModelProto};
use crate::tensor::Dim;

/// A `Constant` node's `value` attribute holding `data` of `dims`.
fn constant_value(dims: &[i64], data: &[f32]) -> AttributeProto {
    AttributeProto {
        name: "value".into(),
        r#type: AttributeType::Tensor as i32,
        t: Some(tensor_f32("", dims, data)),
        ..Default::default()
    }
}

/// A string attribute.
fn attr_string(name: &str, value: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::String as i32,
        s: value.as_bytes().to_vec(),
        ..Default::default()
    }
}

/// Adds a 3×3 convolution with the given stride, its weight and bias in `Constant` nodes.
fn constant_conv(
    g: &mut GraphBuilder,
    name: &str,
    io: (&str, &str),
    shape: (i64, i64),
    stride: i64,
) {
    let (cin, cout) = shape;
    let seed = name.len() as u64 * 17 + cout as u64;
    let (w, b) = (format!("{name}.w_0"), format!("{name}.b_0"));
    let scale = (2.0 / (9.0 * cin as f32)).sqrt();
    let weights = deterministic_weights(seed, (cout * cin * 9) as usize, scale);
    g.node(
        "Constant",
        &[],
        &[&w],
        vec![constant_value(&[cout, cin, 3, 3], &weights)],
    )
    .node(
        "Constant",
        &[],
        &[&b],
        vec![constant_value(
            &[cout],
            &deterministic_weights(seed + 1, cout as usize, 0.1),
        )],
    )
    .node(
        "Conv",
        &[io.0, &w, &b],
        &[io.1],
        vec![
            attr_ints("kernel_shape", &[3, 3]),
            attr_ints("pads", &[1, 1, 1, 1]),
            attr_ints("strides", &[stride, stride]),
        ],
    );
}

/// `x` [N,3,height,width] → a stride-2 convolution (`c1`, 8 channels) → a stride-2 convolution
/// (`c2`, 8 channels) upsampled ×2 (nearest `Resize`) → `Concat` with `c1` on channels → a
/// convolution → `HardSigmoid` → `y` [N,1,height/2,width/2]. Height and width must be
/// multiples of 4 for the two maps to agree; every weight is a `Constant` node's.
pub fn paddle_style_pyramid() -> ModelProto {
    let (n, h, w) = (
        Dim::Symbol("N".into()),
        Dim::Symbol("height".into()),
        Dim::Symbol("width".into()),
    );
    let mut g = GraphBuilder::new("paddle_style_pyramid");
    g.input("x", DataType::Float, &[n.clone(), Dim::Fixed(3), h, w])
        .output(
            "y",
            DataType::Float,
            &[
                n,
                Dim::Fixed(1),
                Dim::Symbol("out_h".into()),
                Dim::Symbol("out_w".into()),
            ],
        );
    constant_conv(&mut g, "conv1", ("x", "c1"), (3, 8), 2);
    constant_conv(&mut g, "conv2", ("c1", "c2"), (8, 8), 2);
    g.node(
        "Constant",
        &[],
        &["scales"],
        vec![constant_value(&[4], &[1.0, 1.0, 2.0, 2.0])],
    )
    .node(
        "Resize",
        &["c2", "", "scales"],
        &["up"],
        vec![
            attr_string("mode", "nearest"),
            attr_string("coordinate_transformation_mode", "asymmetric"),
            attr_string("nearest_mode", "floor"),
        ],
    )
    .node("Concat", &["c1", "up"], &["cat"], vec![attr_int("axis", 1)]);
    constant_conv(&mut g, "conv3", ("cat", "c3"), (16, 1), 1);
    g.node(
        "HardSigmoid",
        &["c3"],
        &["y"],
        vec![attr_float("alpha", 0.2), attr_float("beta", 0.5)],
    );
    g.build()
}
