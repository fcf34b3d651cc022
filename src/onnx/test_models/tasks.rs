//! Small detection and segmentation models built in code: a YOLO-style raw head in both common
//! layouts, a 2-D segmenter and a 3-D (volume) segmenter. Deterministic weights, any batch.

use super::{batch_dim, deterministic_weights};
use crate::onnx::graph_builder::{attr_int, attr_ints, tensor_f32, tensor_i64, GraphBuilder};
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::ModelProto;
use crate::tensor::Dim;

/// The layout of a raw YOLO head's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YoloStyle {
    /// `[N, anchors, 5 + classes]`: cx, cy, w, h, objectness, class scores (YOLOv5).
    V5,
    /// `[N, 4 + classes, anchors]`: cx, cy, w, h, class scores, no objectness (YOLOv8).
    V8,
}

/// Channel widths of the YOLO-style backbone: strides 2, 4, 8 (P3), 16 (P4), 32 (P5).
const BACKBONE: [i64; 5] = [16, 32, 64, 128, 128];

/// Adds a 3×3 convolution (`stride`, padding 1) with bias and a ReLU: `input` → `output`.
fn conv_relu(g: &mut GraphBuilder, name: &str, io: (&str, &str), shape: (i64, i64), stride: i64) {
    let (cin, cout) = shape;
    let seed = name.bytes().map(u64::from).sum::<u64>() * 31 + cout as u64;
    let scale = (2.0 / (9.0 * cin as f32)).sqrt() * 1.7;
    let (w, b, pre) = (
        format!("{name}.weight"),
        format!("{name}.bias"),
        format!("{name}.pre"),
    );
    g.initializer(tensor_f32(
        &w,
        &[cout, cin, 3, 3],
        &deterministic_weights(seed, (cout * cin * 9) as usize, scale),
    ))
    .initializer(tensor_f32(
        &b,
        &[cout],
        &deterministic_weights(seed + 1, cout as usize, 0.05),
    ))
    .node(
        "Conv",
        &[io.0, &w, &b],
        &[&pre],
        vec![
            attr_ints("kernel_shape", &[3, 3]),
            attr_ints("pads", &[1, 1, 1, 1]),
            attr_ints("strides", &[stride, stride]),
        ],
    )
    .node("Relu", &[&pre], &[io.1], vec![]);
}

/// A YOLO-style detector with a raw head: `images` [N,3,size,size] → five stride-2 convolutions
/// → 1×1 heads on strides 8, 16 and 32 with 3 anchors per cell → sigmoid, boxes scaled to
/// pixels. `size` 320 gives 6,300 anchors (the `[N, 6300, 85]` of a YOLOv5 export at 80
/// classes); `size` must be a multiple of 32.
///
/// Boxes are centre-size (cx, cy in [0, size], w, h in [0, size/4]); objectness and class
/// scores lean low, so a confidence of 0.25 keeps a few boxes per image, as trained detectors
/// do. `V5` outputs `output0` [N, anchors, 5 + classes]; `V8` the same predictions without the
/// objectness channel (its class scores already multiplied by it) as [N, 4 + classes, anchors].
pub fn yolo_head(style: YoloStyle, size: i64, classes: i64, batch: Option<i64>) -> ModelProto {
    let n = batch_dim(batch);
    let k = 5 + classes;
    let mut g = GraphBuilder::new("trtkit_test_yolo");
    g.input(
        "images",
        DataType::Float,
        &[n.clone(), Dim::Fixed(3), Dim::Fixed(size), Dim::Fixed(size)],
    );
    let mut prev = ("images".to_string(), 3);
    for (i, &c) in BACKBONE.iter().enumerate() {
        let out = format!("p{}", i + 1);
        conv_relu(
            &mut g,
            &format!("backbone{i}"),
            (&prev.0, &out),
            (prev.1, c),
            2,
        );
        prev = (out, c);
    }
    let mut heads = vec![];
    let mut anchors = 0;
    for (level, stride) in [(3usize, 8i64), (4, 16), (5, 32)] {
        let cells = (size / stride) * (size / stride);
        anchors += 3 * cells;
        let cin = BACKBONE[level - 1];
        let name = format!("head{level}");
        // Biases lean the objectness and class logits low, like a trained detector's.
        let mut bias = deterministic_weights(70 + level as u64, (3 * k) as usize, 0.3);
        for a in 0..3 {
            bias[(a * k + 4) as usize] -= 2.5;
            for c in 5..k {
                bias[(a * k + c) as usize] -= 0.5;
            }
        }
        g.initializer(tensor_f32(
            &format!("{name}.weight"),
            &[3 * k, cin, 1, 1],
            &deterministic_weights(60 + level as u64, (3 * k * cin) as usize, 0.25),
        ))
        .initializer(tensor_f32(&format!("{name}.bias"), &[3 * k], &bias))
        .initializer(tensor_i64(
            &format!("{name}.split"),
            &[4],
            &[0, 3, k, cells],
        ))
        .initializer(tensor_i64(
            &format!("{name}.flat"),
            &[3],
            &[0, 3 * cells, k],
        ))
        .node(
            "Conv",
            &[
                &format!("p{level}"),
                &format!("{name}.weight"),
                &format!("{name}.bias"),
            ],
            &[&format!("{name}.raw")],
            vec![attr_ints("kernel_shape", &[1, 1])],
        )
        .node(
            "Reshape",
            &[&format!("{name}.raw"), &format!("{name}.split")],
            &[&format!("{name}.grid")],
            vec![],
        )
        .node(
            "Transpose",
            &[&format!("{name}.grid")],
            &[&format!("{name}.cells")],
            vec![attr_ints("perm", &[0, 1, 3, 2])],
        )
        .node(
            "Reshape",
            &[&format!("{name}.cells"), &format!("{name}.flat")],
            &[&format!("{name}.out")],
            vec![],
        );
        heads.push(format!("{name}.out"));
    }
    let head_refs: Vec<&str> = heads.iter().map(String::as_str).collect();
    let s = size as f32;
    g.node("Concat", &head_refs, &["logits"], vec![attr_int("axis", 1)])
        .node("Sigmoid", &["logits"], &["probs"], vec![]);
    match style {
        YoloStyle::V5 => {
            let mut scale = vec![s, s, s / 4.0, s / 4.0];
            scale.extend(std::iter::repeat_n(1.0, (k - 4) as usize));
            g.initializer(tensor_f32("box_scale", &[k], &scale))
                .node("Mul", &["probs", "box_scale"], &["output0"], vec![])
                .output(
                    "output0",
                    DataType::Float,
                    &[n, Dim::Fixed(anchors), Dim::Fixed(k)],
                );
        }
        YoloStyle::V8 => v8_tail(&mut g, n, anchors, classes, s),
    }
    g.build()
}

/// The YOLOv8-style tail over `probs` [N, anchors, 5 + classes]: class scores times
/// objectness, boxes scaled, objectness dropped, transposed to [N, 4 + classes, anchors].
fn v8_tail(g: &mut GraphBuilder, n: Dim, anchors: i64, classes: i64, size: f32) {
    let k = 5 + classes;
    g.initializer(tensor_i64("v8.split", &[3], &[4, 1, classes]))
        .initializer(tensor_f32(
            "v8.box_scale",
            &[4],
            &[size, size, size / 4.0, size / 4.0],
        ))
        .node(
            "Split",
            &["probs", "v8.split"],
            &["v8.box", "v8.obj", "v8.cls"],
            vec![attr_int("axis", 2)],
        )
        .node("Mul", &["v8.box", "v8.box_scale"], &["v8.pixels"], vec![])
        .node("Mul", &["v8.cls", "v8.obj"], &["v8.scores"], vec![])
        .node(
            "Concat",
            &["v8.pixels", "v8.scores"],
            &["v8.rows"],
            vec![attr_int("axis", 2)],
        )
        .node(
            "Transpose",
            &["v8.rows"],
            &["output0"],
            vec![attr_ints("perm", &[0, 2, 1])],
        )
        .output(
            "output0",
            DataType::Float,
            &[n, Dim::Fixed(k - 1), Dim::Fixed(anchors)],
        );
}

/// A 2-D segmenter: `input` [N,3,size,size] → 3×3 conv (16) → ReLU → 3×3 conv (16) → ReLU →
/// 1×1 conv → `logits` [N, classes, size, size].
pub fn segmenter(classes: i64, size: i64, batch: Option<i64>) -> ModelProto {
    let n = batch_dim(batch);
    let mut g = GraphBuilder::new("trtkit_test_segmenter");
    g.input(
        "input",
        DataType::Float,
        &[n.clone(), Dim::Fixed(3), Dim::Fixed(size), Dim::Fixed(size)],
    )
    .output(
        "logits",
        DataType::Float,
        &[n, Dim::Fixed(classes), Dim::Fixed(size), Dim::Fixed(size)],
    );
    conv_relu(&mut g, "seg0", ("input", "f0"), (3, 16), 1);
    conv_relu(&mut g, "seg1", ("f0", "f1"), (16, 16), 1);
    g.initializer(tensor_f32(
        "cls.weight",
        &[classes, 16, 1, 1],
        &deterministic_weights(90, (classes * 16) as usize, 0.6),
    ))
    .node(
        "Conv",
        &["f1", "cls.weight"],
        &["logits"],
        vec![attr_ints("kernel_shape", &[1, 1])],
    );
    g.build()
}

/// A 3-D (volume) segmenter in the shape of a brain-tumour network: `image` [N,4,size,size,size]
/// (four MRI channels) → 3×3×3 conv (8) → ReLU → 1×1×1 conv → `logits`
/// [N, classes, size, size, size].
pub fn segmenter_3d(classes: i64, size: i64, batch: Option<i64>) -> ModelProto {
    let n = batch_dim(batch);
    let volume = [Dim::Fixed(size), Dim::Fixed(size), Dim::Fixed(size)];
    let mut g = GraphBuilder::new("trtkit_test_segmenter_3d");
    let mut input = vec![n.clone(), Dim::Fixed(4)];
    input.extend(volume.iter().cloned());
    let mut output = vec![n, Dim::Fixed(classes)];
    output.extend(volume.iter().cloned());
    g.input("image", DataType::Float, &input)
        .output("logits", DataType::Float, &output)
        .initializer(tensor_f32(
            "v0.weight",
            &[8, 4, 3, 3, 3],
            &deterministic_weights(91, 8 * 4 * 27, 0.25),
        ))
        .initializer(tensor_f32(
            "v0.bias",
            &[8],
            &deterministic_weights(92, 8, 0.05),
        ))
        .initializer(tensor_f32(
            "v1.weight",
            &[classes, 8, 1, 1, 1],
            &deterministic_weights(93, (classes * 8) as usize, 0.6),
        ))
        .node(
            "Conv",
            &["image", "v0.weight", "v0.bias"],
            &["v0"],
            vec![
                attr_ints("kernel_shape", &[3, 3, 3]),
                attr_ints("pads", &[1, 1, 1, 1, 1, 1]),
            ],
        )
        .node("Relu", &["v0"], &["v0.act"], vec![])
        .node(
            "Conv",
            &["v0.act", "v1.weight"],
            &["logits"],
            vec![attr_ints("kernel_shape", &[1, 1, 1])],
        );
    g.build()
}
