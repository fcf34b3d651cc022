//! Small ONNX models built in code, with deterministic weights, for tests and demos.
//!
//! No binary blobs: every test that needs a model builds one here.

mod tasks;

pub use tasks::{segmenter, segmenter_3d, yolo_head, YoloStyle};

use crate::onnx::graph_builder::{
    attr_float, attr_int, attr_ints, tensor_f32, tensor_i64, GraphBuilder,
};
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::ModelProto;
use crate::tensor::Dim;

/// Number of classes of the test classifier.
pub const CLASSIFIER_CLASSES: i64 = 10;
/// Channels, height and width of the test classifier's input.
pub const CLASSIFIER_CHW: [i64; 3] = [3, 16, 16];

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

/// A two-input model: `a` [N,4] and `b` [N,4] → `sum` = relu(a + b) and `prod` = a·b.
pub fn two_input(batch: Option<i64>) -> ModelProto {
    let n = batch_dim(batch);
    let dims = [n, Dim::Fixed(4)];
    let mut g = GraphBuilder::new("trtkit_two_input");
    g.input("a", DataType::Float, &dims)
        .input("b", DataType::Float, &dims)
        .output("sum", DataType::Float, &dims)
        .output("prod", DataType::Float, &dims)
        .node("Add", &["a", "b"], &["add_out"], vec![])
        .node("Relu", &["add_out"], &["sum"], vec![])
        .node("Mul", &["a", "b"], &["prod"], vec![]);
    g.build()
}

/// Vocabulary of [`token_classifier`].
pub const TOKEN_VOCAB: i64 = 50;

/// Hidden size of [`token_classifier`].
pub const TOKEN_HIDDEN: i64 = 16;

/// A BERT-shaped classifier over token ids: int64 `input_ids` and `attention_mask`, both
/// `[batch, seq]` (symbolic), an embedding `Gather`, `LayerNormalization`, one single-head
/// self-attention block whose padding mask is added to the scores the way Hugging Face models
/// do it (`(1 - mask) * float32 min`, beyond the float16 range), `Softmax`, a residual and a
/// second `LayerNormalization`, mean pooling over the unpadded tokens, a `Gemm` → `logits`
/// `[batch, 4]`.
pub fn token_classifier() -> ModelProto {
    let (h, classes) = (TOKEN_HIDDEN, 4i64);
    let b = Dim::Symbol("batch".into());
    let s = Dim::Symbol("seq".into());
    let square = |name: &str, seed: u64| {
        tensor_f32(
            name,
            &[h, h],
            &deterministic_weights(seed, (h * h) as usize, 0.5),
        )
    };
    let ones = vec![1.0f32; h as usize];
    let zeros = vec![0.0f32; h as usize];
    let mut g = GraphBuilder::new("trtkit_test_token_classifier");
    g.input("input_ids", DataType::Int64, &[b.clone(), s.clone()])
        .input("attention_mask", DataType::Int64, &[b.clone(), s])
        .output("logits", DataType::Float, &[b, Dim::Fixed(classes)])
        .initializer(tensor_f32(
            "embeddings",
            &[TOKEN_VOCAB, h],
            &deterministic_weights(11, (TOKEN_VOCAB * h) as usize, 1.0),
        ))
        .initializer(tensor_f32("ln1.weight", &[h], &ones))
        .initializer(tensor_f32("ln1.bias", &[h], &zeros))
        .initializer(tensor_f32("ln2.weight", &[h], &ones))
        .initializer(tensor_f32("ln2.bias", &[h], &zeros))
        .initializer(square("wq", 21))
        .initializer(square("wk", 22))
        .initializer(square("wv", 23))
        .initializer(square("wo", 24))
        .initializer(tensor_f32("score_scale", &[], &[1.0 / (h as f32).sqrt()]))
        .initializer(tensor_f32("one", &[], &[1.0]))
        .initializer(tensor_f32("mask_value", &[], &[f32::MIN]))
        .initializer(tensor_i64("axis2", &[1], &[2]))
        .initializer(tensor_i64("axis1", &[1], &[1]))
        .initializer(tensor_f32(
            "fc.weight",
            &[classes, h],
            &deterministic_weights(12, (classes * h) as usize, 0.5),
        ))
        .initializer(tensor_f32(
            "fc.bias",
            &[classes],
            &deterministic_weights(13, classes as usize, 0.1),
        ))
        .node("Gather", &["embeddings", "input_ids"], &["emb"], vec![])
        .node(
            "LayerNormalization",
            &["emb", "ln1.weight", "ln1.bias"],
            &["x"],
            vec![attr_int("axis", -1)],
        )
        .node("MatMul", &["x", "wq"], &["q"], vec![])
        .node("MatMul", &["x", "wk"], &["k"], vec![])
        .node("MatMul", &["x", "wv"], &["v"], vec![])
        .node(
            "Transpose",
            &["k"],
            &["k_t"],
            vec![attr_ints("perm", &[0, 2, 1])],
        )
        .node("MatMul", &["q", "k_t"], &["scores"], vec![])
        .node("Mul", &["scores", "score_scale"], &["scaled"], vec![])
        .node(
            "Cast",
            &["attention_mask"],
            &["mask_f"],
            vec![attr_int("to", DataType::Float as i64)],
        )
        .node("Unsqueeze", &["mask_f", "axis1"], &["mask_keys"], vec![])
        .node("Sub", &["one", "mask_keys"], &["padding"], vec![])
        .node("Mul", &["padding", "mask_value"], &["mask_bias"], vec![])
        .node("Add", &["scaled", "mask_bias"], &["biased"], vec![])
        .node(
            "Softmax",
            &["biased"],
            &["attn"],
            vec![attr_int("axis", -1)],
        )
        .node("MatMul", &["attn", "v"], &["context"], vec![])
        .node("MatMul", &["context", "wo"], &["projected"], vec![])
        .node("Add", &["x", "projected"], &["residual"], vec![])
        .node(
            "LayerNormalization",
            &["residual", "ln2.weight", "ln2.bias"],
            &["y"],
            vec![attr_int("axis", -1)],
        )
        .node("Unsqueeze", &["mask_f", "axis2"], &["mask_tokens"], vec![])
        .node("Mul", &["y", "mask_tokens"], &["masked"], vec![])
        .node(
            "ReduceSum",
            &["masked", "axis1"],
            &["summed"],
            vec![attr_int("keepdims", 0)],
        )
        .node(
            "ReduceSum",
            &["mask_f", "axis1"],
            &["tokens"],
            vec![attr_int("keepdims", 1)],
        )
        .node("Div", &["summed", "tokens"], &["pooled"], vec![])
        .node(
            "Gemm",
            &["pooled", "fc.weight", "fc.bias"],
            &["logits"],
            vec![attr_int("transB", 1)],
        );
    g.build()
}

/// Three convolutions and a classifier where one tensor's channels differ in scale by 1000×:
/// `input` [N,4,8,8] → `conv_0` (4→8, 3×3) → × per-channel scales (channel 0 × 1000) →
/// `conv_2` (8→8, 3×3; its weights on channel 0 scaled down 1000×, so every channel counts
/// alike in its output) → Relu → `conv_4` (8→8, 1×1) → global average pool → Flatten →
/// `gemm_7` → `logits` [N,10]. A per-tensor INT8 scale on `conv_2`'s input rounds the seven
/// small channels to zero.
pub fn channel_scaled_convs() -> ModelProto {
    let n = batch_dim(None);
    let mut scales = vec![1.0f32; 8];
    scales[0] = 1000.0;
    let mut w2 = deterministic_weights(12, 8 * 8 * 9, 0.3);
    for out in 0..8 {
        for k in 0..9 {
            w2[out * 72 + k] *= 0.001;
        }
    }
    let mut g = GraphBuilder::new("trtkit_channel_scaled");
    g.input(
        "input",
        DataType::Float,
        &[n.clone(), Dim::Fixed(4), Dim::Fixed(8), Dim::Fixed(8)],
    )
    .output("logits", DataType::Float, &[n, Dim::Fixed(10)])
    .initializer(tensor_f32(
        "w1",
        &[8, 4, 3, 3],
        &deterministic_weights(11, 8 * 4 * 9, 0.4),
    ))
    .initializer(tensor_f32("channel_scale", &[1, 8, 1, 1], &scales))
    .initializer(tensor_f32("w2", &[8, 8, 3, 3], &w2))
    .initializer(tensor_f32(
        "w3",
        &[8, 8, 1, 1],
        &deterministic_weights(13, 64, 0.5),
    ))
    .initializer(tensor_f32(
        "fc.weight",
        &[10, 8],
        &deterministic_weights(14, 80, 0.5),
    ))
    .initializer(tensor_f32(
        "fc.bias",
        &[10],
        &deterministic_weights(15, 10, 0.1),
    ));
    let conv3 = vec![
        attr_ints("kernel_shape", &[3, 3]),
        attr_ints("pads", &[1, 1, 1, 1]),
    ];
    g.node("Conv", &["input", "w1"], &["t1"], conv3.clone())
        .node("Mul", &["t1", "channel_scale"], &["t2"], vec![])
        .node("Conv", &["t2", "w2"], &["t3"], conv3)
        .node("Relu", &["t3"], &["t4"], vec![])
        .node(
            "Conv",
            &["t4", "w3"],
            &["t5"],
            vec![attr_ints("kernel_shape", &[1, 1])],
        )
        .node("GlobalAveragePool", &["t5"], &["t6"], vec![])
        .node("Flatten", &["t6"], &["t7"], vec![])
        .node(
            "Gemm",
            &["t7", "fc.weight", "fc.bias"],
            &["logits"],
            vec![attr_int("transB", 1)],
        );
    g.build()
}

/// A model whose float16 form overflows in one node: `input` [N,16] → `matmul_0` (weights up
/// to ±30000, so its outputs on unit-normal inputs pass ±65504) → `layernormalization_1` (kept
/// in float32 by default; it brings the values back to unit size) → `matmul_2` (16→10) →
/// `logits` [N,10]. In float16, `matmul_0`'s output is infinite and the logits NaN; with
/// `matmul_0` alone in float32 the model stays within float16's rounding of the float one.
pub fn fp16_overflow() -> ModelProto {
    let n = batch_dim(None);
    let mut g = GraphBuilder::new("trtkit_fp16_overflow");
    g.input("input", DataType::Float, &[n.clone(), Dim::Fixed(16)])
        .output("logits", DataType::Float, &[n, Dim::Fixed(10)])
        .initializer(tensor_f32(
            "w_big",
            &[16, 16],
            &deterministic_weights(21, 256, 30000.0),
        ))
        .initializer(tensor_f32("ln.scale", &[16], &[1.0; 16]))
        .initializer(tensor_f32("ln.bias", &[16], &[0.0; 16]))
        .initializer(tensor_f32(
            "w_head",
            &[16, 10],
            &deterministic_weights(22, 160, 0.5),
        ));
    g.node("MatMul", &["input", "w_big"], &["big"], vec![])
        .node(
            "LayerNormalization",
            &["big", "ln.scale", "ln.bias"],
            &["normed"],
            vec![attr_int("axis", -1)],
        )
        .node("MatMul", &["normed", "w_head"], &["logits"], vec![]);
    g.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_deterministic_and_bounded() {
        let a = deterministic_weights(42, 1000, 0.5);
        assert_eq!(a, deterministic_weights(42, 1000, 0.5));
        assert_ne!(a, deterministic_weights(43, 1000, 0.5));
        assert!(a.iter().all(|v| (-0.5..0.5).contains(v)));
        let mean = a.iter().sum::<f32>() / a.len() as f32;
        assert!(mean.abs() < 0.05, "mean {mean}");
    }
}
