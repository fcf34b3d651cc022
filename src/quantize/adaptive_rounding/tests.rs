//! Adaptive rounding end to end on small ONNX models: the chosen values, the errors reported
//! against the layers' outputs computed directly, and the errors a caller can make.

use super::patches::naive_conv;
use super::*;
use crate::onnx::graph_builder::{attr_int, attr_ints, tensor_f32, GraphBuilder};
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::rewrite::plan::plan_int8;
use crate::onnx::test_models::deterministic_weights;
use crate::tensor::Dim;

fn fixed(dims: &[i64]) -> Vec<Dim> {
    dims.iter().map(|&d| Dim::Fixed(d)).collect()
}

/// The weights of [`layers_model`]: name, dims.
const WEIGHTS: [(&str, [i64; 4]); 6] = [
    ("w1", [6, 4, 3, 3]),
    ("w2", [6, 1, 3, 3]),
    ("w3", [4, 3, 1, 1]),
    ("wm", [8, 6, 0, 0]),
    ("wg", [5, 6, 0, 0]),
    ("wt", [4, 2, 3, 3]),
];

/// A conv (stride 2, padded), a depthwise conv, a grouped 1×1 conv, a MatMul (`[K, N]`), a
/// Gemm (`transB`, `[N, K]`), a ConvTranspose and a second MatMul reading the first's
/// weight.
fn layers_model() -> OnnxModel {
    let f = DataType::Float;
    let mut g = GraphBuilder::new("rounding");
    g.input("x", f, &fixed(&[3, 4, 7, 7]))
        .input("t", f, &fixed(&[3, 5, 8]))
        .input("v", f, &fixed(&[10, 6]))
        .input("t2", f, &fixed(&[4, 8]));
    for out in ["c", "u", "z", "ct", "u2"] {
        g.output(out, f, &[]);
    }
    for (seed, (name, dims)) in WEIGHTS.iter().enumerate() {
        let dims: Vec<i64> = dims.iter().copied().filter(|&d| d > 0).collect();
        let n = dims.iter().product::<i64>() as usize;
        let w = deterministic_weights(seed as u64 + 10, n, 0.3);
        g.initializer(tensor_f32(name, &dims, &w));
    }
    let pads = || attr_ints("pads", &[1, 1, 1, 1]);
    g.node(
        "Conv",
        &["x", "w1"],
        &["a"],
        vec![attr_ints("strides", &[2, 2]), pads()],
    )
    .node(
        "Conv",
        &["a", "w2"],
        &["b"],
        vec![attr_int("group", 6), pads()],
    )
    .node("Conv", &["b", "w3"], &["c"], vec![attr_int("group", 2)])
    .node("MatMul", &["t", "wm"], &["u"], vec![])
    .node("Gemm", &["v", "wg"], &["z"], vec![attr_int("transB", 1)])
    .node("ConvTranspose", &["x", "wt"], &["ct"], vec![])
    .node("MatMul", &["t2", "wm"], &["u2"], vec![]);
    OnnxModel::from_proto(g.build(), "rounding.onnx")
}

/// Random captured inputs of `shapes` (name, shape), each in two batches along axis 0.
fn captured(shapes: &[(&str, &[usize])]) -> BTreeMap<String, Vec<HostTensor>> {
    let mut out = BTreeMap::new();
    for (seed, (name, shape)) in shapes.iter().enumerate() {
        let batches = (0..2)
            .map(|b| {
                let mut s = shape.to_vec();
                s[0] = if b == 0 { 1 } else { shape[0] - 1 };
                let n = s.iter().product();
                let v = deterministic_weights(seed as u64 * 2 + b + 1, n, 1.0);
                HostTensor::new(*name, s, TensorData::F32(v)).unwrap()
            })
            .collect();
        out.insert(name.to_string(), batches);
    }
    out
}

/// The outputs of layer `node` of [`layers_model`] with weights `w` on input `x`.
fn outputs(node: usize, x: &HostTensor, w: &[f32]) -> Vec<f64> {
    let TensorData::F32(data) = &x.data else {
        unreachable!()
    };
    let conv = |group, in_per_group, kernel, strides, pads| Conv2d {
        group,
        in_per_group,
        kernel,
        strides,
        dilations: [1, 1],
        padding: Padding::Explicit(pads),
    };
    let dense = |k: usize, n: usize, kn: bool| {
        let mut y = vec![];
        for row in data.chunks(k) {
            for o in 0..n {
                let at = |i: usize| if kn { w[i * n + o] } else { w[o * k + i] };
                y.push((0..k).map(|i| row[i] as f64 * at(i) as f64).sum());
            }
        }
        y
    };
    match node {
        0 => naive_conv(&conv(1, 4, [3, 3], [2, 2], [1; 4]), data, &x.shape, w, 6),
        1 => naive_conv(&conv(6, 1, [3, 3], [1, 1], [1; 4]), data, &x.shape, w, 6),
        2 => naive_conv(&conv(2, 3, [1, 1], [1, 1], [0; 4]), data, &x.shape, w, 4),
        3 => dense(8, 6, true),
        _ => dense(6, 5, false),
    }
}

/// The relative output error of int8 values `q` with `scales` against float `w`, computed
/// from the layer's outputs on all of `batches`.
fn direct_error(
    node: usize,
    batches: &[HostTensor],
    w: &[f32],
    q: &[i8],
    scales: &[f32],
    axis: usize,
    dims: &[i64],
) -> f64 {
    let inner: usize = dims[axis + 1..].iter().product::<i64>() as usize;
    let deq: Vec<f32> = (0..w.len())
        .map(|i| q[i] as f32 * scales[(i / inner) % scales.len()])
        .collect();
    let (mut err, mut energy) = (0.0, 0.0);
    for x in batches {
        for (a, b) in outputs(node, x, &deq).iter().zip(outputs(node, x, w)) {
            err += (a - b) * (a - b);
            energy += b * b;
        }
    }
    err / energy
}

/// (a) On random layers (conv, depthwise, grouped, MatMul, Gemm) the chosen values never
/// give a higher output error than nearest's, and lower it in total; the reported errors
/// are the layers' own (computed here from direct convolutions and products, which a wrong
/// layout would miss). (d) Every value is the floor or the ceiling of `w / s` within
/// [-127, 127] (±127 where `|w / s| ≥ 127`), with `quantize_weights`' scales.
#[test]
fn random_layers_never_get_worse_and_keep_floor_or_ceil() {
    let m = layers_model();
    let plan = plan_int8(m.graph());
    let names = rounding_inputs(&m, &plan);
    assert_eq!(names, ["x", "a", "b", "t", "v"]);
    // Enough patches for every layer: at least MIN_PATCHES_PER_INPUT per input of a channel.
    let shapes: [&[usize]; 5] = [
        &[10, 4, 7, 7],
        &[3, 6, 4, 4],
        &[3, 6, 4, 4],
        &[3, 11, 8],
        &[25, 6],
    ];
    let named: Vec<(&str, &[usize])> = names.iter().map(String::as_str).zip(shapes).collect();
    let inputs = captured(&named);
    for clip in [WeightClip::Max, WeightClip::Mse] {
        let (chosen, report) = round_adaptively(&m, &plan, clip, &inputs).unwrap();
        let nodes: Vec<&str> = report.layers.iter().map(|l| l.node.as_str()).collect();
        assert_eq!(nodes, ["conv_0", "conv_1", "conv_2", "matmul_3", "gemm_4"]);
        let kept: Vec<&str> = report
            .kept_nearest
            .iter()
            .map(|k| k.node.as_str())
            .collect();
        assert_eq!(kept, ["convtranspose_5", "matmul_6"]);
        assert!(
            report.kept_nearest[1].reason.contains("'matmul_3'"),
            "{report:?}"
        );
        assert!(report.changed > 0, "{report:?}");
        assert!(
            report.mean_adaptive_error < 0.95 * report.mean_nearest_error,
            "{report:?}"
        );
        for (node, layer) in report.layers.iter().enumerate() {
            assert!(layer.adaptive_error <= layer.nearest_error, "{layer:?}");
            let site = &plan.weights[node];
            let init = m
                .graph()
                .initializer
                .iter()
                .find(|t| t.name == site.tensor)
                .unwrap();
            let (w, dims, axis) = (read_f32(init).unwrap(), &init.dims, site.axis as usize);
            let (near, scales) = quantize_weights(&w, dims, axis, clip);
            let got = &chosen[&site.tensor];
            assert_eq!(got.scales, scales, "{}", layer.node);
            let inner: usize = dims[axis + 1..].iter().product::<i64>() as usize;
            for (i, &v) in got.values.iter().enumerate() {
                let r = w[i] / scales[(i / inner) % scales.len()];
                let ok = if r.abs() >= 127.0 {
                    v == near[i]
                } else {
                    v as f32 == r.floor() || v as f32 == r.ceil()
                };
                assert!(
                    ok && v >= -127,
                    "{}: {} / s = {r} became {v}",
                    layer.node,
                    w[i]
                );
            }
            let batches = &inputs[&m.graph().node[node].input[0]];
            for (q, reported) in [
                (&near, layer.nearest_error),
                (&got.values, layer.adaptive_error),
            ] {
                // The direct outputs dequantize in float32 as a model does (the solver in
                // float64): they agree to about 1e-6; a wrong layout would be off by far more.
                let direct = direct_error(node, batches, &w, q, &scales, axis, dims);
                assert!(
                    (direct - reported).abs() <= 1e-4 * direct,
                    "{}: {direct} vs {reported}",
                    layer.node
                );
            }
        }
        let json = serde_json::to_string(&report).unwrap();
        assert_eq!(
            serde_json::from_str::<RoundingReport>(&json).unwrap(),
            report
        );
    }
}

/// (b) A dense layer built to need it: its inputs come in identical pairs and the two
/// weights of a pair sit at the same `n + 0.4` steps, so rounding both to nearest adds
/// their errors (`-0.8` of a step on the pair's input) while one up and one down nearly
/// cancel (`+0.2`). Adaptive rounding finds that.
#[test]
fn correlated_inputs_let_rounding_cancel_errors() {
    let (pairs, n, rows) = (6usize, 4usize, 64usize);
    let k = 1 + 2 * pairs;
    let steps = deterministic_weights(3, pairs * n, 60.0);
    let mut w = vec![1.27f32; k * n];
    for j in 0..pairs {
        for o in 0..n {
            let v = (steps[j * n + o].round() + 0.4) * 0.01;
            (w[(1 + 2 * j) * n + o], w[(2 + 2 * j) * n + o]) = (v, v);
        }
    }
    let noise = deterministic_weights(4, rows * (1 + pairs), 1.0);
    let x: Vec<f32> = noise
        .chunks(1 + pairs)
        .flat_map(|r| std::iter::once(r[0]).chain(r[1..].iter().flat_map(|&v| [v, v])))
        .collect();
    let f = DataType::Float;
    let mut g = GraphBuilder::new("pairs");
    g.input("x", f, &fixed(&[rows as i64, k as i64]))
        .output("y", f, &[])
        .initializer(tensor_f32("w", &[k as i64, n as i64], &w))
        .node("MatMul", &["x", "w"], &["y"], vec![]);
    let m = OnnxModel::from_proto(g.build(), "pairs.onnx");
    let plan = plan_int8(m.graph());
    let x = HostTensor::new("x", vec![rows, k], TensorData::F32(x)).unwrap();
    let inputs = BTreeMap::from([("x".to_string(), vec![x])]);
    let (_, report) = round_adaptively(&m, &plan, WeightClip::Max, &inputs).unwrap();
    let layer = &report.layers[0];
    // One weight of each pair flips, per channel: about (0.2 / 0.8)² = 1/16 of the error.
    assert!(
        layer.adaptive_error < 0.1 * layer.nearest_error,
        "{layer:?}"
    );
    assert_eq!(layer.changed, pairs * n, "{layer:?}");
}

#[test]
fn missing_or_non_float_inputs_are_errors_naming_the_layer() {
    let m = layers_model();
    let plan = plan_int8(m.graph());
    let err = round_adaptively(&m, &plan, WeightClip::Max, &BTreeMap::new()).unwrap_err();
    let text = format!("{err:#}");
    assert!(text.contains("'conv_0'") && text.contains("'x'"), "{text}");
    let x = HostTensor::new("x", vec![1, 4, 7, 7], TensorData::F64(vec![0.0; 196])).unwrap();
    let inputs = BTreeMap::from([("x".to_string(), vec![x])]);
    let err = round_adaptively(&m, &plan, WeightClip::Max, &inputs).unwrap_err();
    assert!(format!("{err:#}").contains("not float32"), "{err:#}");
}
