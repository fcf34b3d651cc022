//! The Q/DQ pass and its weight quantization: the plan quantized, each weight's ranges by its
//! rule (one for all, or its op type's), per-channel scales.

use super::*;

use crate::onnx::rewrite::plan::plan_int8;
use crate::onnx::test_models;

fn classifier() -> OnnxModel {
    OnnxModel::from_proto(test_models::classifier(None), "c.onnx")
}

fn pass_for(m: &OnnxModel, scales: &[(&str, f32)]) -> Qdq {
    Qdq {
        plan: plan_int8(m.graph()),
        scales: scales.iter().map(|(n, s)| (n.to_string(), *s)).collect(),
        weights: WeightQuant::default(),
    }
}

#[test]
fn qdq_pass_quantizes_the_plan() {
    let m = classifier();
    let pass = pass_for(&m, &[("input", 0.02), ("flat", 0.1)]);
    assert_eq!(pass.name(), "qdq");
    let (q, report) = pass.run(m).unwrap();
    assert_eq!(
        report,
        PassReport::Qdq {
            activations: 2,
            weights: 2
        }
    );
    let ops = |op: &str| q.graph().node.iter().filter(|n| n.op_type == op).count();
    assert_eq!(ops("QuantizeLinear"), 2);
    assert_eq!(ops("DequantizeLinear"), 4);
    assert!(!q
        .graph()
        .initializer
        .iter()
        .any(|t| t.name == "conv.weight"));
    let err = pass.run(q).unwrap_err();
    assert!(err.to_string().contains("already quantized"), "{err}");
}

#[test]
fn qdq_pass_refuses_missing_scales_and_foreign_plans() {
    let m = classifier();
    let err = pass_for(&m, &[("input", 0.02)]).run(m.clone()).unwrap_err();
    assert!(
        err.to_string().contains("no scale for tensor 'flat'"),
        "{err}"
    );
    let err = pass_for(&m, &[("input", 0.02), ("flat", 0.1), ("ghost", 1.0)])
        .run(m.clone())
        .unwrap_err();
    assert!(err.to_string().contains("'ghost'"), "{err}");
    let mut pass = pass_for(&m, &[("input", 0.02), ("flat", 0.1)]);
    pass.plan.activations[0].consumers.push((99, 0));
    let err = pass.run(m).unwrap_err();
    assert!(err.to_string().contains("another graph"), "{err}");
}

#[test]
fn scale_is_amax_over_127() {
    assert_eq!(scale_of(12.7), 0.1);
    assert_eq!(scale_of(0.0), 1.0);
    assert_eq!(scale_of(f32::INFINITY), 1.0);
}

/// Choosing each channel's range by squared error never does worse than its largest
/// magnitude (1.00 is a candidate), and clips the far tail of a heavy-tailed channel so
/// its many small weights get finer steps; an even channel keeps (about) its range.
#[test]
fn mse_clipping_lowers_the_rounding_error_of_a_heavy_tailed_channel() {
    const N: usize = 4000;
    let unit = test_models::deterministic_weights(3, N, 1.0);
    // Channel 0: Laplace-like (-ln u, random sign); channel 1: uniform.
    let mut w: Vec<f32> = unit
        .iter()
        .map(|&u| u.signum() * -(u.abs().max(1e-6)).ln() * 0.01)
        .collect();
    w.extend(test_models::deterministic_weights(4, N, 0.05));
    let dims = [2, N as i64];
    let error = |clip| {
        let (q, s) = quantize_weights(&w, &dims, 0, clip);
        (0..2)
            .map(|c| {
                (0..N)
                    .map(|i| {
                        let k = c * N + i;
                        ((w[k] - q[k] as f32 * s[c]) as f64).powi(2)
                    })
                    .sum::<f64>()
            })
            .collect::<Vec<f64>>()
    };
    let (max, mse) = (error(WeightClip::Max), error(WeightClip::Mse));
    assert!(mse[0] < max[0], "{mse:?} vs {max:?}");
    assert!(mse[1] <= max[1], "{mse:?} vs {max:?}");
    let (_, s_max) = quantize_weights(&w, &dims, 0, WeightClip::Max);
    let (_, s_mse) = quantize_weights(&w, &dims, 0, WeightClip::Mse);
    assert!(s_mse[0] < s_max[0]);
}

#[test]
fn per_channel_weights_round_trip_within_half_a_step() {
    let dims = [2i64, 3];
    let w = [0.5f32, -1.0, 0.25, 10.0, 5.0, -2.5];
    let (q, s) = quantize_per_channel(&w, &dims, 0);
    assert_eq!(s, vec![1.0 / 127.0, 10.0 / 127.0]);
    assert_eq!(q[1], -127);
    assert_eq!(q[3], 127);
    for (i, (&qv, &wv)) in q.iter().zip(&w).enumerate() {
        let back = qv as f32 * s[i / 3];
        assert!((back - wv).abs() <= s[i / 3] / 2.0 + 1e-6);
    }
    let (_, s) = quantize_per_channel(&w, &dims, 1);
    assert_eq!(s, vec![10.0 / 127.0, 5.0 / 127.0, 2.5 / 127.0]);
}

#[test]
fn an_op_type_rule_overrides_the_general_one_and_a_lone_rule_keys_as_before() {
    let uniform = WeightClipping::uniform(WeightClip::Max);
    assert_eq!(serde_json::to_string(&uniform).unwrap(), r#""max""#);
    let mixed = WeightClipping {
        all: WeightClip::Mse,
        by_op: [("Gemm".to_string(), WeightClip::Max)].into(),
    };
    assert_eq!(mixed.of_op("Gemm"), WeightClip::Max);
    assert_eq!(mixed.of_op("Conv"), WeightClip::Mse);
    assert_eq!(
        serde_json::to_string(&mixed).unwrap(),
        r#"{"all":"mse","by_op":{"Gemm":"max"}}"#
    );
    // Many weights spread over [-1, 1] and one a little beyond: MSE clips that one for
    // finer steps over the rest, max keeps it.
    let mut w: Vec<f32> = (0..4096).map(|i| i as f32 / 2048.0 - 1.0).collect();
    w[0] = -1.05;
    let quant = WeightQuant::nearest(mixed);
    let (_, gemm) = quant.quantize("w", "Gemm", &w, &[1, 4096], 0);
    let (_, conv) = quant.quantize("w", "Conv", &w, &[1, 4096], 0);
    assert_eq!(gemm, vec![scale_of(1.05)]);
    assert!(conv[0] < gemm[0], "{conv:?} vs {gemm:?}");
}
