//! `--weight-clip-op OP=RULE`: the weights read by nodes of one op type take their own range rule
//! beside `--weight-clip`'s, in the graph `quantize` writes and in the engine key `build` uses; a
//! rule no INT8 weight takes is a warning, one given twice or without `--int8` a usage error.
//!
//! The build half needs TensorRT-RTX (`python3 -m pip install tensorrt-rtx-cu13-libs==1.7.1.116`).

mod support;

use std::path::Path;
use support::{assert_clean_error, int8_json, scaled_model_and_cache, stdout_of_success, trtkit};
use trtkit::onnx::OnnxModel;

/// The per-channel weight scales of every Gemm and Conv of the quantized model at `path`, by the
/// node's op type and name.
fn weight_scales(path: &Path) -> Vec<(String, String, Vec<f32>)> {
    let m = OnnxModel::load(path).unwrap();
    let g = m.graph();
    let mut out = vec![];
    for n in g
        .node
        .iter()
        .filter(|n| n.op_type == "Gemm" || n.op_type == "Conv")
    {
        let Some(dq) = g
            .node
            .iter()
            .find(|d| d.op_type == "DequantizeLinear" && d.output.first() == n.input.get(1))
        else {
            continue;
        };
        let scale = g
            .initializer
            .iter()
            .find(|t| t.name == dq.input[1])
            .unwrap();
        let values = if scale.float_data.is_empty() {
            scale
                .raw_data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        } else {
            scale.float_data.clone()
        };
        out.push((n.op_type.clone(), n.name.clone(), values));
    }
    out
}

/// `quantize --int8` of `model` with `args`, written to `dir/name`; its weight scales.
fn quantized(
    dir: &Path,
    model: &Path,
    cache: &str,
    name: &str,
    args: &[&str],
) -> Vec<(String, String, Vec<f32>)> {
    let out = dir.join(name);
    int8_json(
        model,
        cache,
        &[args, &["-o", out.to_str().unwrap()]].concat(),
    );
    weight_scales(&out)
}

/// The scales of the nodes of type `op` in `scales`.
fn of_op(scales: &[(String, String, Vec<f32>)], op: &str) -> Vec<Vec<f32>> {
    scales
        .iter()
        .filter(|(o, _, _)| o == op)
        .map(|(_, _, s)| s.clone())
        .collect()
}

#[test]
fn an_op_type_takes_its_own_rule_and_the_others_keep_the_general_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (model, cache) = scaled_model_and_cache(d);
    let max = quantized(d, &model, &cache, "max.onnx", &[]);
    let mse = quantized(d, &model, &cache, "mse.onnx", &["--weight-clip", "mse"]);
    let mixed = quantized(
        d,
        &model,
        &cache,
        "mixed.onnx",
        &["--weight-clip", "mse", "--weight-clip-op", "Gemm=max"],
    );
    assert!(!of_op(&max, "Gemm").is_empty() && !of_op(&max, "Conv").is_empty());
    // MSE clips some channel of this model's Gemm, so the rules can be told apart.
    assert_ne!(of_op(&mse, "Gemm"), of_op(&max, "Gemm"));
    assert_eq!(of_op(&mixed, "Gemm"), of_op(&max, "Gemm"));
    assert_eq!(of_op(&mixed, "Conv"), of_op(&mse, "Conv"));

    // Every op type named with MSE over a general max is the general MSE rule.
    let every_op = quantized(
        d,
        &model,
        &cache,
        "every_op.onnx",
        &["--weight-clip-op", "Conv=mse,Gemm=mse"],
    );
    assert_eq!(every_op, mse);
}

#[test]
fn a_rule_no_weight_takes_warns_and_bad_rules_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (model, cache) = scaled_model_and_cache(d);
    let m = model.to_str().unwrap();
    let out = d.join("q.onnx");
    let head = ["quantize", m, "--int8", "--calibration-cache", &cache];
    let o = out.to_str().unwrap();
    let run = trtkit(&[&head[..], &["--weight-clip-op", "Gem=max", "-o", o]].concat());
    stdout_of_success(&run);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("op type 'Gem' changes nothing"), "{stderr}");
    let twice = trtkit(
        &[
            &head[..],
            &["--weight-clip-op", "Gemm=max,Gemm=mse", "-o", o],
        ]
        .concat(),
    );
    assert_clean_error(&twice, 2, &["--weight-clip-op names Gemm twice"]);
    let bad_rule = trtkit(&[&head[..], &["--weight-clip-op", "Gemm=p99", "-o", o]].concat());
    assert_eq!(bad_rule.status.code(), Some(2));
    let said = String::from_utf8_lossy(&bad_rule.stderr);
    assert!(
        said.contains("'p99' is not a weight clip rule (max or mse)"),
        "{said}"
    );
    let no_op = trtkit(&[&head[..], &["--weight-clip-op", "=max", "-o", o]].concat());
    assert_eq!(no_op.status.code(), Some(2));
    let without_int8 = trtkit(&[
        "quantize",
        m,
        "--fp16",
        "--weight-clip-op",
        "Gemm=max",
        "-o",
        o,
    ]);
    assert_eq!(without_int8.status.code(), Some(2));
}

#[test]
fn the_rules_key_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (model, cache) = scaled_model_and_cache(d);
    let build = |args: &[&str]| {
        let head = [
            "build",
            model.to_str().unwrap(),
            "--int8",
            "--calibration-cache",
            &cache,
            "--json",
        ];
        let out = support::trtkit_in(d, &[&head[..], args].concat());
        serde_json::from_str::<serde_json::Value>(&stdout_of_success(&out)).unwrap()
    };
    let mse = build(&["--weight-clip", "mse"]);
    let rewrite = mse["key"]["rewrite"].as_str().unwrap();
    assert!(rewrite.ends_with("weight_clip=\"mse\""), "{rewrite}");
    let mixed = build(&["--weight-clip", "mse", "--weight-clip-op", "Gemm=max"]);
    assert_eq!(mixed["engine"], mse["engine"]);
    assert_eq!(mixed["reused"], false, "another rule, another engine");
    let rewrite = mixed["key"]["rewrite"].as_str().unwrap();
    assert!(
        rewrite.ends_with(r#"weight_clip={"all":"mse","by_op":{"Gemm":"max"}}"#),
        "{rewrite}"
    );
    assert_eq!(
        build(&["--weight-clip", "mse", "--weight-clip-op", "Gemm=max"])["reused"],
        true
    );
}
