//! A small text recogniser built in code: an image in, class scores per step out (`[N, T, C]`,
//! a softmax over the classes at each step), as a CTC-trained recogniser gives them.

use super::{batch_dim, deterministic_weights};
use crate::onnx::graph_builder::{attr_int, attr_ints, tensor_f32, tensor_i64, GraphBuilder};
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::ModelProto;
use crate::tensor::Dim;

/// Image height of [`recogniser`]; its width is 4 pixels per step.
pub const RECOGNISER_HEIGHT: i64 = 8;

/// Features per step of [`recogniser`].
const FEATURES: i64 = 16;

/// A recogniser: `x` [N,3,8,4·steps] → an 8×4 convolution at stride 8×4 (one column of 16
/// features per step) → ReLU → [N, steps, 16] → MatMul to `classes` → `probs` [N, steps,
/// classes], a softmax per step. Class 0 (the CTC blank) leans high, so random images read as
/// a few symbols between blanks.
pub fn recogniser(steps: i64, classes: i64, batch: Option<i64>) -> ModelProto {
    let n = batch_dim(batch);
    let width = 4 * steps;
    let mut g = GraphBuilder::new("trtkit_test_recogniser");
    g.input(
        "x",
        DataType::Float,
        &[
            n.clone(),
            Dim::Fixed(3),
            Dim::Fixed(RECOGNISER_HEIGHT),
            Dim::Fixed(width),
        ],
    )
    .output(
        "probs",
        DataType::Float,
        &[n, Dim::Fixed(steps), Dim::Fixed(classes)],
    );
    let taps = (3 * RECOGNISER_HEIGHT * 4) as usize;
    let mut bias = deterministic_weights(41, classes as usize, 0.5);
    bias[0] += 1.5;
    g.initializer(tensor_f32(
        "col.weight",
        &[FEATURES, 3, RECOGNISER_HEIGHT, 4],
        &deterministic_weights(40, FEATURES as usize * taps, 0.6),
    ))
    .initializer(tensor_i64("flat", &[3], &[0, FEATURES, steps]))
    .initializer(tensor_f32(
        "cls.weight",
        &[FEATURES, classes],
        &deterministic_weights(42, (FEATURES * classes) as usize, 1.5),
    ))
    .initializer(tensor_f32("cls.bias", &[classes], &bias))
    .node(
        "Conv",
        &["x", "col.weight"],
        &["col"],
        vec![
            attr_ints("kernel_shape", &[RECOGNISER_HEIGHT, 4]),
            attr_ints("strides", &[RECOGNISER_HEIGHT, 4]),
        ],
    )
    .node("Relu", &["col"], &["col_relu"], vec![])
    .node("Reshape", &["col_relu", "flat"], &["features_t"], vec![])
    .node(
        "Transpose",
        &["features_t"],
        &["features"],
        vec![attr_ints("perm", &[0, 2, 1])],
    )
    .node("MatMul", &["features", "cls.weight"], &["scores"], vec![])
    .node("Add", &["scores", "cls.bias"], &["logits"], vec![])
    .node(
        "Softmax",
        &["logits"],
        &["probs"],
        vec![attr_int("axis", -1)],
    );
    g.build()
}
