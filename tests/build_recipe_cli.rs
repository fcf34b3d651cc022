//! `build --int8` takes the INT8 options `quantize` takes (`--exclude…`, `--fallback`,
//! `--weight-clip`), and builds from the graph `quantize` writes with the same options; they
//! are part of the engine's key, so an engine built with others is not reused.
//!
//! Needs TensorRT-RTX (`python3 -m pip install tensorrt-rtx-cu13-libs==1.7.1.116`).

mod support;

use serde_json::Value;
use std::path::Path;
use support::{assert_clean_error, int8_json, scaled_model_and_cache, stdout_of_success};
use trtkit::onnx::OnnxModel;

/// `trtkit build MODEL --int8 --calibration-cache CACHE ARGS… --json` run in `dir`.
fn build_int8(dir: &Path, model: &Path, cache: &str, args: &[&str]) -> std::process::Output {
    let head = [
        "build",
        model.to_str().unwrap(),
        "--int8",
        "--calibration-cache",
        cache,
    ];
    support::trtkit_in(dir, &[&head[..], args, &["--json"]].concat())
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_str(&stdout_of_success(out)).unwrap()
}

#[test]
fn build_leaves_the_excluded_nodes_in_float16_as_quantize_does() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (model, cache) = scaled_model_and_cache(d);
    let recipe = ["--exclude", "conv_2", "--fallback", "fp16"];
    let q = d.join("q.onnx");
    let quantized = int8_json(
        &model,
        &cache,
        &[&recipe[..], &["-o", q.to_str().unwrap()]].concat(),
    );
    assert_eq!(quantized["float_nodes"], serde_json::json!(["conv_2"]));

    let engine = d.join("e/m.engine");
    let built = json(&build_int8(
        d,
        &model,
        &cache,
        &[&recipe[..], &["-o", engine.to_str().unwrap()]].concat(),
    ));
    assert_eq!(built["key"]["precision"], "int8", "{built:#}");
    let int8 = &built["int8"];
    assert_eq!(
        int8["float_nodes"],
        serde_json::json!(["conv_2"]),
        "{built:#}"
    );
    assert_eq!(int8["fallback"], "fp16", "{built:#}");
    assert_eq!(
        int8["quantized_activations"], quantized["quantized_activations"],
        "{built:#}"
    );
    assert_eq!(int8["quantized_weights"], quantized["quantized_weights"]);
    let rewrite = built["key"]["rewrite"].as_str().unwrap_or_default();
    assert!(
        rewrite.contains("exclude=conv_2") && rewrite.contains("fallback=fp16"),
        "{built:#}"
    );

    let text = support::trtkit_in(
        d,
        &[
            &[
                "build",
                model.to_str().unwrap(),
                "--int8",
                "--calibration-cache",
                &cache,
            ][..],
            &recipe[..],
            &["-o", engine.to_str().unwrap(), "--rebuild"],
        ]
        .concat(),
    );
    let text = stdout_of_success(&text);
    assert!(
        text.contains("left out of INT8 (computing in fp16): conv_2"),
        "{text}"
    );

    // TensorRT parsed the very graph quantize wrote: the float conv's weights in float16.
    let kept = d.join("e/m.engine.onnx");
    assert_eq!(std::fs::read(&kept).unwrap(), std::fs::read(&q).unwrap());
    let graph = OnnxModel::load(&kept).unwrap();
    let g = graph.graph();
    let w2 = g.initializer.iter().find(|t| t.name == "w2").unwrap();
    assert_eq!(w2.data_type, 10, "the excluded conv's weights are float16");
    let conv_2 = g.node.iter().find(|n| n.name == "conv_2").unwrap();
    let made_by_dq = |tensor: &str| {
        g.node
            .iter()
            .any(|n| n.op_type == "DequantizeLinear" && n.output.iter().any(|o| o == tensor))
    };
    assert!(
        !conv_2.input.iter().any(|i| made_by_dq(i)),
        "conv_2 reads no Q/DQ pair: {:?}",
        conv_2.input
    );
    assert!(g
        .node
        .iter()
        .filter(|n| n.op_type == "Conv" && n.name != "conv_2")
        .all(|n| made_by_dq(&n.input[0])));
}

#[test]
fn the_int8_options_key_the_engine_and_need_int8() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (model, cache) = scaled_model_and_cache(d);
    let plain = json(&build_int8(d, &model, &cache, &[]));
    assert_eq!(plain["reused"], false);
    assert!(plain["key"]["rewrite"].is_null(), "{plain:#}");
    assert!(plain["int8"].get("float_nodes").is_none(), "{plain:#}");
    // Same keyed name, another key: the engine is built again, saying why, and not reused
    // for the plain recipe afterwards.
    let excluded = json(&build_int8(d, &model, &cache, &["--exclude-op", "Gemm"]));
    assert_eq!(excluded["engine"], plain["engine"]);
    assert_eq!(excluded["reused"], false, "another recipe, another engine");
    assert!(
        excluded["rebuilt_because"].to_string().contains("rewrite"),
        "{excluded:#}"
    );
    assert_eq!(excluded["int8"]["float_nodes"].as_array().unwrap().len(), 1);
    let again = json(&build_int8(d, &model, &cache, &["--exclude-op", "Gemm"]));
    assert_eq!(again["reused"], true);
    assert_eq!(json(&build_int8(d, &model, &cache, &[]))["reused"], false);

    let out = build_int8(d, &model, &cache, &["--exclude", "conv_9"]);
    assert_clean_error(&out, 1, &["no node is named 'conv_9'"]);
    for recipe in [["--fallback", "fp16"], ["--exclude-op", "Gemm"]] {
        let args = [
            &["build", model.to_str().unwrap(), "--fp16"][..],
            &recipe[..],
        ]
        .concat();
        let out = support::trtkit_in(d, &args);
        assert_clean_error(&out, 2, &["give --int8"]);
    }
}

#[test]
fn a_target_search_result_leaves_its_nodes_in_float_in_build_and_quantize() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (model, cache) = scaled_model_and_cache(d);
    let searched = d.join("searched.onnx");
    let result = int8_json(
        &model,
        &cache,
        &[
            "--target-cosine",
            "0.9999",
            "--eval-data",
            "synthetic:7",
            "--eval-samples",
            "32",
            "-o",
            searched.to_str().unwrap(),
        ],
    );
    let float_nodes = result["float_nodes"].clone();
    assert!(!float_nodes.as_array().unwrap().is_empty(), "{result:#}");
    let report = d.join("result.json");
    std::fs::write(&report, result.to_string()).unwrap();
    let from = ["--float-nodes-from", report.to_str().unwrap()];

    let engine = d.join("e/m.engine");
    let built = json(&build_int8(
        d,
        &model,
        &cache,
        &[&from[..], &["-o", engine.to_str().unwrap()]].concat(),
    ));
    assert_eq!(built["int8"]["float_nodes"], float_nodes, "{built:#}");
    let q = d.join("q.onnx");
    let quantized = int8_json(
        &model,
        &cache,
        &[&from[..], &["-o", q.to_str().unwrap()]].concat(),
    );
    assert_eq!(quantized["float_nodes"], float_nodes);
    assert_eq!(
        std::fs::read(d.join("e/m.engine.onnx")).unwrap(),
        std::fs::read(&q).unwrap()
    );

    let fp16 = support::trtkit_in(
        d,
        &[&["build", model.to_str().unwrap(), "--fp16"][..], &from[..]].concat(),
    );
    assert_clean_error(&fp16, 1, &["an INT8 target search, for an FP16 model"]);
    let not_a_result = d.join("cache.json");
    std::fs::write(&not_a_result, "{\"float_nodes\": []}").unwrap();
    let out = build_int8(
        d,
        &model,
        &cache,
        &["--float-nodes-from", not_a_result.to_str().unwrap()],
    );
    assert_clean_error(&out, 1, &["not the result of a target search"]);
}
