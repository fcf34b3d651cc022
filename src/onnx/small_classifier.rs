//! The small classifier `doctor --check` runs through every GPU backend found, built in code
//! with deterministic weights; the test models are made of the same parts.

use crate::onnx::graph_builder::{
    attr_float, attr_int, attr_ints, tensor_f32, tensor_i64, GraphBuilder,
};
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::ModelProto;
use crate::tensor::Dim;

/// Number of classes of the test classifier.
pub(crate) const CLASSIFIER_CLASSES: i64 = 10;
/// Channels, height and width of the test classifier's input.
pub(crate) const CLASSIFIER_CHW: [i64; 3] = [3, 16, 16];

/// Deterministic pseudo-random weights in [-scale, scale) from a seed (a 64-bit LCG).
pub fn deterministic_weights(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
            (unit * 2.0 - 1.0) * scale
        })
        .collect()
}

/// The batch axis of a test model: fixed, or symbolic `batch`.
pub(crate) fn batch_dim(batch: Option<i64>) -> Dim {
    match batch {
        Some(n) => Dim::Fixed(n),
        None => Dim::Symbol("batch".into()),
    }
}

/// A conv-bn-relu-maxpool-gemm classifier: `input` [N,3,16,16] → `logits` [N,10].
///
/// `batch = None` gives a dynamic batch axis named `batch`; `Some(n)` a static one.
pub fn classifier(batch: Option<i64>) -> ModelProto {
    classifier_sized(batch, CLASSIFIER_CHW[1])
}

/// The test classifier at another (even) input size: `input` [N,3,size,size] → `logits` [N,10]
/// (`size` 224 gives an ImageNet-shaped input, for commands typed as users type them).
pub fn classifier_sized(batch: Option<i64>, size: i64) -> ModelProto {
    let [c, h, w] = [CLASSIFIER_CHW[0], size, size];
    let features = 8i64;
    let pooled = features * (h / 2) * (w / 2);
    let n = batch_dim(batch);
    let mut g = GraphBuilder::new("trtkit_test_classifier");
    g.input(
        "input",
        DataType::Float,
        &[n.clone(), Dim::Fixed(c), Dim::Fixed(h), Dim::Fixed(w)],
    )
    .output(
        "logits",
        DataType::Float,
        &[n, Dim::Fixed(CLASSIFIER_CLASSES)],
    )
    .initializer(tensor_f32(
        "conv.weight",
        &[features, c, 3, 3],
        &deterministic_weights(1, (features * c * 9) as usize, 0.3),
    ))
    .initializer(tensor_f32(
        "conv.bias",
        &[features],
        &deterministic_weights(2, features as usize, 0.1),
    ))
    .initializer(tensor_f32(
        "bn.scale",
        &[features],
        &deterministic_weights(3, features as usize, 0.2)
            .iter()
            .map(|v| 1.0 + v)
            .collect::<Vec<_>>(),
    ))
    .initializer(tensor_f32(
        "bn.bias",
        &[features],
        &deterministic_weights(4, features as usize, 0.1),
    ))
    .initializer(tensor_f32(
        "bn.mean",
        &[features],
        &deterministic_weights(5, features as usize, 0.1),
    ))
    .initializer(tensor_f32(
        "bn.var",
        &[features],
        &deterministic_weights(6, features as usize, 0.2)
            .iter()
            .map(|v| 1.0 + v)
            .collect::<Vec<_>>(),
    ))
    .initializer(tensor_i64("flatten.shape", &[2], &[0, -1]))
    .initializer(tensor_f32(
        "fc.weight",
        &[CLASSIFIER_CLASSES, pooled],
        &deterministic_weights(7, (CLASSIFIER_CLASSES * pooled) as usize, 0.05),
    ))
    .initializer(tensor_f32(
        "fc.bias",
        &[CLASSIFIER_CLASSES],
        &deterministic_weights(8, CLASSIFIER_CLASSES as usize, 0.1),
    ))
    .node(
        "Conv",
        &["input", "conv.weight", "conv.bias"],
        &["conv_out"],
        vec![
            attr_ints("kernel_shape", &[3, 3]),
            attr_ints("pads", &[1, 1, 1, 1]),
        ],
    )
    .node(
        "BatchNormalization",
        &["conv_out", "bn.scale", "bn.bias", "bn.mean", "bn.var"],
        &["bn_out"],
        vec![attr_float("epsilon", 1e-5)],
    )
    .node("Relu", &["bn_out"], &["relu_out"], vec![])
    .node(
        "MaxPool",
        &["relu_out"],
        &["pool_out"],
        vec![
            attr_ints("kernel_shape", &[2, 2]),
            attr_ints("strides", &[2, 2]),
        ],
    )
    .node("Reshape", &["pool_out", "flatten.shape"], &["flat"], vec![])
    .node(
        "Gemm",
        &["flat", "fc.weight", "fc.bias"],
        &["logits"],
        vec![attr_int("transB", 1)],
    );
    g.build()
}
