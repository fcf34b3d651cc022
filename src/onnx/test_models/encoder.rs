//! A small transformer encoder written the way `torch.onnx.export` writes BERT-style layers:
//! Q/K/V projections as MatMul + Add (separate, or one packed projection and a `Split`), heads
//! split by `Reshape` to shapes computed from `Shape` at run time and `Transpose`, the scores
//! scaled, a padding mask added as `(1 − mask) × float32 min`, `Softmax`, the heads merged
//! back, residual adds and `LayerNormalization`, GELU as `Erf`. Two layers, four heads, hidden
//! 64, feed-forward 128 by default ([`EncoderSize`]; DistilBERT's sizes for benchmarks);
//! deterministic weights.

use crate::onnx::graph_builder::{
    attr_float, attr_int, attr_ints, tensor_f32, tensor_i64, GraphBuilder,
};
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::ModelProto;
use crate::onnx::small_classifier::deterministic_weights;
use crate::tensor::Dim;

/// Hidden width of [`encoder`] (its input's and output's last axis).
pub const ENCODER_HIDDEN: i64 = 64;
/// Attention heads of [`encoder`].
pub const ENCODER_HEADS: i64 = 4;

/// The sizes of an encoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncoderSize {
    /// Hidden width.
    pub hidden: i64,
    /// Attention heads.
    pub heads: i64,
    /// Feed-forward width.
    pub ffn: i64,
    /// Layers.
    pub layers: usize,
}

impl Default for EncoderSize {
    /// Two layers, four heads, hidden 64, feed-forward 128.
    fn default() -> Self {
        EncoderSize {
            hidden: ENCODER_HIDDEN,
            heads: ENCODER_HEADS,
            ffn: 128,
            layers: 2,
        }
    }
}

impl EncoderSize {
    /// DistilBERT's: six layers, twelve heads, hidden 768, feed-forward 3072.
    pub fn distilbert() -> Self {
        EncoderSize {
            hidden: 768,
            heads: 12,
            ffn: 3072,
            layers: 6,
        }
    }
}

/// How [`encoder`] writes its layers.
#[derive(Clone, Copy, Debug, Default)]
pub struct EncoderStyle {
    /// An int64 `attention_mask` input `[batch, seq]` added to the scores as padding.
    pub mask: bool,
    /// One `[hidden, 3·hidden]` projection split into Q, K and V (else three projections).
    pub packed_qkv: bool,
    /// Q divided by √d before Q·Kᵀ (DistilBERT), else the scores divided (BERT).
    pub scale_on_q: bool,
    /// LayerNorm before each sublayer, the residual added after (ViT), else after the add.
    pub pre_norm: bool,
    /// The scores multiplied by a per-head factor too, which the fused operator has no room for.
    pub per_head_scale: bool,
    /// The sizes.
    pub size: EncoderSize,
}

/// The encoder: float `hidden` `[batch, seq, hidden]` (and `attention_mask` where the style
/// says) → `encoded` `[batch, seq, hidden]`; batch and seq symbolic.
pub fn encoder(style: EncoderStyle) -> ModelProto {
    let EncoderSize {
        hidden: h, heads, ..
    } = style.size;
    let (b, s) = (Dim::Symbol("batch".into()), Dim::Symbol("seq".into()));
    let mut g = GraphBuilder::new("trtkit_test_encoder");
    let hidden = [b.clone(), s.clone(), Dim::Fixed(h)];
    g.input("hidden", DataType::Float, &hidden)
        .output("encoded", DataType::Float, &hidden)
        .initializer(tensor_f32("one", &[], &[1.0]))
        .initializer(tensor_f32("half", &[], &[0.5]))
        .initializer(tensor_f32("sqrt2", &[], &[std::f32::consts::SQRT_2]))
        .initializer(tensor_f32("sqrt_d", &[], &[((h / heads) as f32).sqrt()]))
        .initializer(tensor_i64("index0", &[], &[0]))
        .initializer(tensor_i64("index1", &[], &[1]))
        .initializer(tensor_i64("axis0", &[1], &[0]))
        .initializer(tensor_i64("axis1", &[1], &[1]))
        .initializer(tensor_i64("axis2", &[1], &[2]))
        .initializer(tensor_i64("heads", &[1], &[heads]))
        .initializer(tensor_i64("head_size", &[1], &[h / heads]))
        .initializer(tensor_i64("width", &[1], &[h]))
        .initializer(tensor_i64("qkv_split", &[3], &[h; 3]));
    if style.mask {
        g.input("attention_mask", DataType::Int64, &[b, s])
            .initializer(tensor_f32("mask_value", &[], &[f32::MIN]))
            .node(
                "Cast",
                &["attention_mask"],
                &["mask_f"],
                vec![attr_int("to", 1)],
            )
            .node("Unsqueeze", &["mask_f", "axis1"], &["mask_1"], vec![])
            .node("Unsqueeze", &["mask_1", "axis2"], &["mask_11"], vec![])
            .node("Sub", &["one", "mask_11"], &["padding"], vec![])
            .node("Mul", &["padding", "mask_value"], &["mask_bias"], vec![]);
    }
    let mut x = "hidden".to_string();
    for layer in 0..style.size.layers {
        x = encoder_layer(&mut g, style, layer, &x);
    }
    if style.pre_norm {
        layer_norm(&mut g, h, "final", &x, "encoded");
    } else {
        g.node("Identity", &[&x], &["encoded"], vec![]);
    }
    g.build()
}

/// One layer reading `x`; returns its output's name.
fn encoder_layer(g: &mut GraphBuilder, style: EncoderStyle, layer: usize, x: &str) -> String {
    let EncoderSize { hidden: h, ffn, .. } = style.size;
    let p = |name: &str| format!("l{layer}.{name}");
    let attn_in = if style.pre_norm {
        layer_norm(g, h, &p("ln_attn"), x, &p("normed"))
    } else {
        x.to_string()
    };
    let context = attention(g, style, &p(""), &attn_in);
    let attn_out = dense(g, &p("out"), &context, h, h, layer * 10 + 4);
    g.node("Add", &[&attn_out, x], &[&p("res1")], vec![]);
    let mid = if style.pre_norm {
        p("res1")
    } else {
        layer_norm(g, h, &p("ln1"), &p("res1"), &p("mid"))
    };
    let ffn_in = if style.pre_norm {
        layer_norm(g, h, &p("ln_ffn"), &mid, &p("ffn_in"))
    } else {
        mid.clone()
    };
    let up = dense(g, &p("ff1"), &ffn_in, h, ffn, layer * 10 + 5);
    g.node("Div", &[&up, "sqrt2"], &[&p("g_div")], vec![])
        .node("Erf", &[&p("g_div")], &[&p("g_erf")], vec![])
        .node("Add", &[&p("g_erf"), "one"], &[&p("g_add")], vec![])
        .node("Mul", &[&up, &p("g_add")], &[&p("g_mul")], vec![])
        .node("Mul", &[&p("g_mul"), "half"], &[&p("gelu")], vec![]);
    let down = dense(g, &p("ff2"), &p("gelu"), ffn, h, layer * 10 + 6);
    g.node("Add", &[&down, &mid], &[&p("res2")], vec![]);
    if style.pre_norm {
        p("res2")
    } else {
        layer_norm(g, h, &p("ln2"), &p("res2"), &p("y"))
    }
}

/// Self-attention over `x` (names prefixed `p`); returns the merged heads' name.
fn attention(g: &mut GraphBuilder, style: EncoderStyle, p: &str, x: &str) -> String {
    let n = |name: &str| format!("{p}{name}");
    let h = style.size.hidden;
    // The Reshape targets, computed from x's shape as exporters write them.
    let dims = |g: &mut GraphBuilder, index: &str, out: &str| {
        g.node(
            "Gather",
            &[&n("shape"), index],
            &[&n(&format!("{out}0"))],
            vec![attr_int("axis", 0)],
        )
        .node(
            "Unsqueeze",
            &[&n(&format!("{out}0")), "axis0"],
            &[&n(out)],
            vec![],
        );
    };
    g.node("Shape", &[x], &[&n("shape")], vec![]);
    dims(g, "index0", "b");
    dims(g, "index1", "s");
    g.node(
        "Concat",
        &[&n("b"), &n("s"), "heads", "head_size"],
        &[&n("split_shape")],
        vec![attr_int("axis", 0)],
    )
    .node(
        "Concat",
        &[&n("b"), &n("s"), "width"],
        &[&n("merge_shape")],
        vec![attr_int("axis", 0)],
    );
    let seed = p.len() * 7;
    let [q, k, v] = if style.packed_qkv {
        let qkv = dense(g, &n("qkv"), x, h, 3 * h, seed);
        g.node(
            "Split",
            &[&qkv, "qkv_split"],
            &[&n("q"), &n("k"), &n("v")],
            vec![attr_int("axis", -1)],
        );
        [n("q"), n("k"), n("v")]
    } else {
        [1, 2, 3].map(|i| dense(g, &n(&format!("w{i}")), x, h, h, seed + i))
    };
    for (t, perm) in [(&q, [0, 2, 1, 3]), (&k, [0, 2, 3, 1]), (&v, [0, 2, 1, 3])] {
        g.node(
            "Reshape",
            &[t, &n("split_shape")],
            &[&format!("{t}_heads")],
            vec![],
        )
        .node(
            "Transpose",
            &[&format!("{t}_heads")],
            &[&format!("{t}_t")],
            vec![attr_ints("perm", &perm)],
        );
    }
    let probs = scores(g, style, p, &format!("{q}_t"), &format!("{k}_t"));
    g.node("MatMul", &[&probs, &format!("{v}_t")], &[&n("ctx")], vec![])
        .node(
            "Transpose",
            &[&n("ctx")],
            &[&n("ctx_t")],
            vec![attr_ints("perm", &[0, 2, 1, 3])],
        )
        .node(
            "Reshape",
            &[&n("ctx_t"), &n("merge_shape")],
            &[&n("context")],
            vec![],
        );
    n("context")
}

/// `softmax(Q·Kᵀ / √d [× per-head factor] [+ mask])` from the split heads; returns its name.
fn scores(g: &mut GraphBuilder, style: EncoderStyle, p: &str, q: &str, k: &str) -> String {
    let n = |name: &str| format!("{p}{name}");
    let mut q = q.to_string();
    if style.scale_on_q {
        g.node("Div", &[&q, "sqrt_d"], &[&n("q_scaled")], vec![]);
        q = n("q_scaled");
    }
    g.node("MatMul", &[&q, k], &[&n("scores")], vec![]);
    let mut scores = n("scores");
    if !style.scale_on_q {
        g.node("Div", &[&scores, "sqrt_d"], &[&n("scaled")], vec![]);
        scores = n("scaled");
    }
    if style.per_head_scale {
        let heads = style.size.heads;
        let factors = deterministic_weights(p.len() as u64 + 3, heads as usize, 1.0);
        let factors: Vec<f32> = factors.iter().map(|f| 1.0 + f.abs()).collect();
        g.initializer(tensor_f32(&n("head_factor"), &[1, heads, 1, 1], &factors))
            .node(
                "Mul",
                &[&scores, &n("head_factor")],
                &[&n("per_head")],
                vec![],
            );
        scores = n("per_head");
    }
    if style.mask {
        g.node("Add", &[&scores, "mask_bias"], &[&n("masked")], vec![]);
        scores = n("masked");
    }
    g.node(
        "Softmax",
        &[&scores],
        &[&n("probs")],
        vec![attr_int("axis", -1)],
    );
    n("probs")
}

/// `x · W + b` with deterministic weights (`[d_in, d_out]`, bias first in the `Add` as
/// TorchScript writes it); returns the output's name.
fn dense(g: &mut GraphBuilder, name: &str, x: &str, d_in: i64, d_out: i64, seed: usize) -> String {
    let scale = 1.0 / (d_in as f32).sqrt();
    let w = deterministic_weights(seed as u64 * 31 + 1, (d_in * d_out) as usize, scale);
    let b = deterministic_weights(seed as u64 * 31 + 2, d_out as usize, 0.1);
    g.initializer(tensor_f32(&format!("{name}.weight"), &[d_in, d_out], &w))
        .initializer(tensor_f32(&format!("{name}.bias"), &[d_out], &b))
        .node(
            "MatMul",
            &[x, &format!("{name}.weight")],
            &[&format!("{name}.mm")],
            vec![],
        )
        .node(
            "Add",
            &[&format!("{name}.bias"), &format!("{name}.mm")],
            &[&format!("{name}.out")],
            vec![],
        );
    format!("{name}.out")
}

/// `LayerNormalization(x)` over the last axis (`width` wide) into `out`, weights near one;
/// returns `out`.
fn layer_norm(g: &mut GraphBuilder, width: i64, name: &str, x: &str, out: &str) -> String {
    let gamma: Vec<f32> = deterministic_weights(name.len() as u64, width as usize, 0.2)
        .iter()
        .map(|v| 1.0 + v)
        .collect();
    let beta = deterministic_weights(name.len() as u64 + 1, width as usize, 0.1);
    g.initializer(tensor_f32(&format!("{name}.gamma"), &[width], &gamma))
        .initializer(tensor_f32(&format!("{name}.beta"), &[width], &beta))
        .node(
            "LayerNormalization",
            &[x, &format!("{name}.gamma"), &format!("{name}.beta")],
            &[out],
            vec![attr_int("axis", -1), attr_float("epsilon", 1e-5)],
        );
    out.to_string()
}
