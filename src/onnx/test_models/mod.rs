//! Small ONNX models built in code, with deterministic weights, for tests: every test that
//! needs a model builds one here, so the repository holds no binary model files. Compiled for
//! the crate's own tests and, through the `test-support` feature, for its integration tests
//! and benchmarks; the binary does not carry them.

mod encoder;
mod paddle;
mod paddle_axes;
mod quantized;
mod sequence;
mod tasks;

pub use super::small_classifier::{classifier, classifier_sized, deterministic_weights};
pub use encoder::{encoder, EncoderSize, EncoderStyle, ENCODER_HEADS, ENCODER_HIDDEN};
pub use paddle::paddle_style_pyramid;
pub use paddle_axes::{paddle_style, PADDLE_CLASSES};
pub use quantized::dynamic_quantized_matmul;
pub use sequence::{recogniser, RECOGNISER_HEIGHT};
pub use tasks::{segmenter, segmenter_3d, yolo_head, YoloStyle};

use super::small_classifier::batch_dim;

use crate::onnx::graph_builder::{attr_int, attr_ints, tensor_f32, tensor_i64, GraphBuilder};
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::ModelProto;
use crate::tensor::Dim;

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
pub(crate) const TOKEN_VOCAB: i64 = 50;

/// Hidden size of [`token_classifier`].
pub(crate) const TOKEN_HIDDEN: i64 = 16;

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
