//! `compare --layerwise` end to end: identical graphs agree everywhere, a planted INT8 failure
//! and a planted FP16 overflow are named as the first divergence, the report round-trips
//! through JSON, grouped runs give the figures of one group, and an engine is refused.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use support::{assert_clean_error, save, stdout_of_success, trtkit};
use trtkit::jobs::layerwise::LayerwiseReport;
use trtkit::onnx::graph_builder::{attr_int, tensor_f32, GraphBuilder};
use trtkit::onnx::pb::tensor_proto::DataType;
use trtkit::onnx::pb::ModelProto;
use trtkit::onnx::test_models;
use trtkit::tensor::Dim;

/// `trtkit compare --layerwise A B ARGS… --json`, which must succeed, parsed.
fn layerwise(a: &Path, b: &Path, args: &[&str]) -> Value {
    let head = [
        "compare",
        "--layerwise",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--num-samples",
        "16",
        "--batch-size",
        "4",
    ];
    let out = trtkit(&[&head[..], args, &["--json"]].concat());
    serde_json::from_str(&stdout_of_success(&out)).unwrap()
}

fn first(v: &Value) -> &Value {
    &v["first_divergence"]
}

fn tensor<'v>(v: &'v Value, name: &str) -> &'v Value {
    v["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tensor {name} in {v:#}"))
}

/// `x` [N,16] → Relu (`h`) → MatMul with weights around 12,500 (`big`, sums near 10⁵, beyond
/// float16's 65504) → LayerNormalization (`normed`, back in range) → Add (`out`).
fn overflowing_matmul() -> ModelProto {
    let n = Dim::Symbol("batch".into());
    let w: Vec<f32> = test_models::deterministic_weights(3, 256, 1.0)
        .iter()
        .map(|v| 12_500.0 + 5_000.0 * v)
        .collect();
    let mut g = GraphBuilder::new("overflow");
    g.input("x", DataType::Float, &[n.clone(), Dim::Fixed(16)])
        .output("out", DataType::Float, &[n, Dim::Fixed(16)])
        .initializer(tensor_f32("w", &[16, 16], &w))
        .initializer(tensor_f32("gamma", &[16], &[1.0; 16]))
        .initializer(tensor_f32("beta", &[16], &[0.0; 16]))
        .initializer(tensor_f32("shift", &[16], &[0.5; 16]))
        .node("Relu", &["x"], &["h"], vec![])
        .node("MatMul", &["h", "w"], &["big"], vec![])
        .node(
            "LayerNormalization",
            &["big", "gamma", "beta"],
            &["normed"],
            vec![attr_int("axis", -1)],
        )
        .node("Add", &["normed", "shift"], &["out"], vec![]);
    g.build()
}

/// `trtkit quantize MODEL ARGS… -o OUT`, which must succeed.
fn quantize(model: &Path, args: &[&str], out: &Path) -> PathBuf {
    let head = ["quantize", model.to_str().unwrap()];
    let o = trtkit(&[&head[..], args, &["-o", out.to_str().unwrap()]].concat());
    stdout_of_success(&o);
    out.to_path_buf()
}

#[test]
fn identical_graphs_agree_everywhere_and_the_report_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "c.onnx", test_models::classifier(None));
    let plot = dir.path().join("plot.svg");
    let v = layerwise(&m, &m, &["--plot", plot.to_str().unwrap()]);
    let tensors = v["tensors"].as_array().unwrap();
    assert!(tensors.len() >= 5, "{v:#}");
    for t in tensors {
        assert_eq!(t["cosine"].as_f64(), Some(1.0), "{t:#}");
        assert_eq!(t["max_abs_err"].as_f64(), Some(0.0), "{t:#}");
    }
    assert!(first(&v).is_null(), "{v:#}");
    assert_eq!(tensors.last().unwrap()["name"], "logits");
    assert_eq!(v["samples"], 16);
    assert!(v["memory"]["peak_marked_bytes"].as_u64().unwrap() > 0);
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("depth"), "{svg}");
    // JSON round trip: read back, written again, the same document.
    let report: LayerwiseReport = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(serde_json::to_value(&report).unwrap(), v);
    // The table names the outcome.
    let out = trtkit(&[
        "compare",
        "--layerwise",
        m.to_str().unwrap(),
        m.to_str().unwrap(),
    ]);
    let text = stdout_of_success(&out);
    assert!(text.contains("no divergence"), "{text}");
}

#[test]
fn a_planted_int8_failure_is_the_first_divergence_and_groups_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (model, cache) = support::scaled_model_and_cache(dir.path());
    let int8 = quantize(
        &model,
        &["--int8", "--calibration-cache", &cache],
        &dir.path().join("int8.onnx"),
    );
    let v = layerwise(&int8, &model, &[]);
    // conv_2 reads the channel-scaled tensor whose INT8 scale zeroes seven channels of eight.
    assert_eq!(first(&v)["tensor"], "t3", "{v:#}");
    assert_eq!(first(&v)["op"], "Conv");
    assert_eq!(first(&v)["node"], "conv_2");
    assert_eq!(tensor(&v, "t2")["matched"], "t2_dequantized");
    assert!(tensor(&v, "t1")["cosine"].as_f64().unwrap() >= 0.999);
    assert!(tensor(&v, "t3")["cosine"].as_f64().unwrap() < 0.99, "{v:#}");
    assert_eq!(v["memory"]["groups"], 1);

    // One tensor per group: each group is its own marked model, which the backend may fuse
    // otherwise (a Conv whose output is no graph output), so figures agree to float rounding.
    let grouped = layerwise(&int8, &model, &["--layerwise-group-bytes", "1"]);
    let n = v["tensors"].as_array().unwrap().len();
    assert_eq!(grouped["memory"]["groups"].as_u64(), Some(n as u64));
    assert!(
        grouped["memory"]["peak_marked_bytes"].as_u64() < v["memory"]["peak_marked_bytes"].as_u64()
    );
    for (one, many) in v["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .zip(grouped["tensors"].as_array().unwrap())
    {
        assert_eq!(one["name"], many["name"]);
        assert_eq!(one["elements"], many["elements"]);
        for k in ["cosine", "max_abs_err", "max_rel_err", "close_pct"] {
            let (x, y) = (one[k].as_f64().unwrap(), many[k].as_f64().unwrap());
            assert!(
                (x - y).abs() <= 1e-5 * x.abs().max(1.0),
                "{k}: {one:#} {many:#}"
            );
        }
    }
    assert_eq!(first(&grouped), first(&v));
}

#[test]
fn a_planted_fp16_overflow_is_the_first_divergence() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "overflow.onnx", overflowing_matmul());
    let fp16 = quantize(&model, &["--fp16"], &dir.path().join("fp16.onnx"));
    let v = layerwise(&fp16, &model, &[]);
    assert_eq!(first(&v)["tensor"], "big", "{v:#}");
    assert_eq!(first(&v)["op"], "MatMul");
    let big = tensor(&v, "big");
    assert!(big["beyond_fp16_pct"].as_f64().unwrap() > 0.0, "{big:#}");
    assert!(tensor(&v, "h")["cosine"].as_f64().unwrap() >= 0.999);
    assert_eq!(tensor(&v, "h")["beyond_fp16_pct"].as_f64(), Some(0.0));
    // Only the tensors asked for.
    let only = layerwise(&fp16, &model, &["--tensors", "^(h|normed)$"]);
    let names: Vec<&str> = only["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["h", "normed"]);
}

#[test]
fn an_engine_or_saved_outputs_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "c.onnx", test_models::classifier(None));
    let saved = dir.path().join("out.npz");
    std::fs::write(&saved, b"not used").unwrap();
    let out = trtkit(&[
        "compare",
        "--layerwise",
        saved.to_str().unwrap(),
        m.to_str().unwrap(),
    ]);
    assert_clean_error(&out, 1, &["out.npz", "layerwise needs two ONNX graphs"]);
    let engine = dir.path().join("c.engine");
    std::fs::write(&engine, b"vtrt and more").unwrap();
    let out = trtkit(&[
        "compare",
        "--layerwise",
        engine.to_str().unwrap(),
        m.to_str().unwrap(),
    ]);
    assert_clean_error(&out, 1, &["c.engine", "the graph its build kept"]);
    let out = trtkit(&[
        "compare",
        "--layerwise",
        m.to_str().unwrap(),
        m.to_str().unwrap(),
        "--tensors",
        "(",
    ]);
    assert_clean_error(&out, 1, &["--tensors"]);
}

#[test]
fn in_a_workspace_each_kept_graph_is_compared_with_the_model() {
    let dir = tempfile::tempdir().unwrap();
    save(dir.path(), "clf.onnx", test_models::classifier(None));
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let run = |args: &[&str]| stdout_of_success(&support::trtkit_in(&ws, args));
    run(&["init", "../clf.onnx", "--calib-data", "synthetic:1"]);
    // No kept graph yet: one line saying what to build.
    let out = support::trtkit_in(&ws, &["compare", "--layerwise"]);
    assert_clean_error(&out, 1, &["kept its graph", "trtkit build --fp16"]);
    run(&["build", "--fp16", "--input-shape", "-1", "3", "16", "16"]);
    let plot = dir.path().join("layers.svg");
    let v: Value = serde_json::from_str(&run(&[
        "compare",
        "--layerwise",
        "--num-samples",
        "8",
        "--plot",
        plot.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    let graphs = v["graphs"].as_array().unwrap();
    assert_eq!(graphs.len(), 1, "{v:#}");
    assert_eq!(graphs[0]["precision"], "fp16");
    let report = &graphs[0]["report"];
    assert!(
        report["a"].as_str().unwrap().ends_with(".engine.onnx"),
        "{report:#}"
    );
    assert!(report["tensors"].as_array().unwrap().len() >= 5);
    assert!(first(report).is_null(), "{report:#}");
    let engine = Path::new(graphs[0]["engine"].as_str().unwrap());
    let svg = dir.path().join(format!(
        "layers-{}.svg",
        engine.file_name().unwrap().to_str().unwrap()
    ));
    assert!(std::fs::read_to_string(svg).unwrap().starts_with("<svg"));
}

#[test]
fn tensors_without_a_batch_axis_are_left_out_and_said() {
    // `x` [N,16] → Relu (`h`) → Add of a scalar that two initializers make (`s`, shape []) and
    // of a [16] row they make (`row`): neither carries the batch axis.
    let n = Dim::Symbol("batch".into());
    let mut g = GraphBuilder::new("shape_arithmetic");
    g.input("x", DataType::Float, &[n.clone(), Dim::Fixed(16)])
        .output("out", DataType::Float, &[n, Dim::Fixed(16)])
        .initializer(tensor_f32("two", &[], &[2.0]))
        .initializer(tensor_f32("half", &[16], &[0.5; 16]))
        .node("Relu", &["x"], &["h"], vec![])
        .node("Mul", &["two", "two"], &["s"], vec![])
        .node("Mul", &["half", "s"], &["row"], vec![])
        .node("Add", &["h", "row"], &["out"], vec![]);
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "s.onnx", g.build());
    let v = layerwise(&m, &m, &[]);
    let names: Vec<&str> = v["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["h", "out"], "{v:#}");
    assert_eq!(v["same_for_every_sample"], serde_json::json!(["s", "row"]));
    assert_eq!(v["samples"], 16);
    assert!(first(&v).is_null(), "{v:#}");
}
