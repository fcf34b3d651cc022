//! The INT8 triage of `quantize`: the sensitivity scan finds the node that breaks the model,
//! the accuracy target leaves that node (and not the rest) in float, exclusions and the FP16
//! fallback write models that run, and the search is kept under its key.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use support::{assert_clean_error, save, stdout_of_success, trtkit};
use trtkit::onnx::test_models;

/// The channel-scaled model and a min-max calibration cache of it.
fn model_and_cache(dir: &Path) -> (PathBuf, String) {
    support::scaled_model_and_cache(dir)
}

/// `trtkit quantize MODEL --int8 --calibration-cache CACHE ARGS… --json`.
fn int8(model: &str, cache: &str, args: &[&str]) -> std::process::Output {
    trtkit(
        &[
            &["quantize", model, "--int8", "--calibration-cache", cache][..],
            args,
            &["--json"],
        ]
        .concat(),
    )
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_str(&support::stdout_of_success(out)).unwrap()
}

#[test]
fn sensitivity_ranks_the_scaled_conv_first_and_the_target_leaves_only_it_in_float() {
    let dir = tempfile::tempdir().unwrap();
    let (model, cache) = model_and_cache(dir.path());
    let m = model.to_str().unwrap();
    let eval = ["--eval-data", "synthetic:7", "--eval-samples", "32"];
    let scan = json(&int8(m, &cache, &[&["--sensitivity"][..], &eval].concat()));
    let nodes = scan["nodes"].as_array().unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert_eq!(names[0], "conv_2", "{scan:#}");
    let first = &nodes[0];
    let second = &nodes[1];
    assert!(
        first["alone"]["cosine"].as_f64().unwrap()
            < second["alone"]["cosine"].as_f64().unwrap() - 0.01,
        "{scan:#}"
    );
    assert!(first["recovery"].as_f64().unwrap() > 0.0);
    assert!(first["macs"].as_u64().unwrap() == 8 * 8 * 8 * 8 * 9);
    let full = scan["full_int8"]["cosine"].as_f64().unwrap();
    assert!(
        full < 0.99,
        "the full INT8 model must miss the target: {full}"
    );

    // The target: only conv_2 in float, the cosine met, most of the MACs still INT8.
    let out_model = dir.path().join("int8.onnx");
    let target = |extra: &[&str]| {
        let o = out_model.to_str().unwrap();
        int8(
            m,
            &cache,
            &[&["--target-cosine", "0.99", "-o", o][..], &eval, extra].concat(),
        )
    };
    let found = json(&target(&[]));
    assert_eq!(
        found["float_nodes"],
        serde_json::json!(["conv_2"]),
        "{found:#}"
    );
    assert_eq!(found["met"], true);
    assert!(found["score"]["cosine"].as_f64().unwrap() >= 0.99);
    let share = found["int8_share"].as_f64().unwrap();
    let conv2 = (8 * 8 * 8 * 8 * 9) as f64;
    let total = conv2 + (8 * 8 * 8 * 4 * 9 + 8 * 8 * 8 * 8 + 80) as f64;
    assert!((share - (1.0 - conv2 / total)).abs() < 1e-9, "{share}");
    assert_eq!(found["reused"], false);
    assert!(out_model.is_file());
    // The written model reads its float conv without Q/DQ: conv_2's inputs are plain tensors.
    let written = trtkit::onnx::OnnxModel::load(&out_model).unwrap();
    let conv2_node = written
        .graph()
        .node
        .iter()
        .find(|n| n.name == "conv_2")
        .unwrap();
    assert_eq!(conv2_node.input, ["t2", "w2"]);
    // The same question again is answered from the kept search.
    let again = json(&target(&[]));
    assert_eq!(again["reused"], true);
    assert_eq!(again["float_nodes"], found["float_nodes"]);
    assert!(Path::new(again["result"].as_str().unwrap()).is_file());
    // A kept result changed since it was written is not trusted: the search runs again.
    let kept = PathBuf::from(again["result"].as_str().unwrap());
    let mut changed: Value = serde_json::from_slice(&std::fs::read(&kept).unwrap()).unwrap();
    changed["float_nodes"] = serde_json::json!([]);
    std::fs::write(&kept, serde_json::to_vec_pretty(&changed).unwrap()).unwrap();
    let redone = json(&target(&[]));
    assert_eq!(redone["reused"], false, "{redone:#}");
    assert_eq!(redone["float_nodes"], found["float_nodes"]);
    let notes = redone["notes"].to_string();
    assert!(
        notes.contains("tampered") && notes.contains(kept.to_str().unwrap()),
        "{notes}"
    );
    assert_eq!(json(&target(&[]))["reused"], true);
    // The default search is greedy: the full model, ranking 4 nodes, one greedy step of 4,
    // giving conv_2 back: 10 variants.
    assert_eq!(found["strategy"], "greedy");
    assert_eq!(found["variants"], 10, "{found:#}");
    // Bisection finds the same node, and is kept under its own key.
    let bisect = json(&target(&["--search", "bisect"]));
    assert_eq!(bisect["strategy"], "bisect");
    assert_eq!(bisect["reused"], false);
    assert_eq!(bisect["float_nodes"], serde_json::json!(["conv_2"]));
    assert_ne!(bisect["result"], found["result"]);
}

#[test]
fn exclusions_and_the_fp16_fallback_write_models_that_run() {
    let dir = tempfile::tempdir().unwrap();
    let (model, cache) = model_and_cache(dir.path());
    let m = model.to_str().unwrap();
    let out = dir.path().join("x.onnx");
    let o = out.to_str().unwrap();
    let q = |extra: &[&str]| int8(m, &cache, &[&["-o", o][..], extra].concat());
    let by_name = json(&q(&["--exclude", "conv_2,#7"]));
    assert_eq!(
        by_name["float_nodes"],
        serde_json::json!(["conv_2", "gemm_7"])
    );
    let by_op = json(&q(&["--exclude-op", "Gemm"]));
    assert_eq!(by_op["float_nodes"], serde_json::json!(["gemm_7"]));
    let by_regex = json(&q(&["--exclude-regex", "conv_[24]"]));
    assert_eq!(
        by_regex["float_nodes"],
        serde_json::json!(["conv_2", "conv_4"])
    );
    // FP16 fallback: the float part is float16, the INT8 convs and their Q/DQ stay float32.
    let fp16 = json(&q(&["--exclude", "conv_2", "--fallback", "fp16"]));
    assert_eq!(fp16["fallback"], "fp16");
    let written = trtkit::onnx::OnnxModel::load(&out).unwrap();
    let g = written.graph();
    let w2 = g.initializer.iter().find(|t| t.name == "w2").unwrap();
    assert_eq!(w2.data_type, 10, "the float conv's weights are float16");
    assert!(g.node.iter().any(|n| n.op_type == "DequantizeLinear"));
    assert!(g.node.iter().any(|n| n.op_type == "Cast"));
    for bad in [
        (&["--exclude", "conv_9"][..], "no node is named 'conv_9'"),
        (&["--exclude-op", "LSTM"][..], "no node is a 'LSTM' op"),
        (&["--exclude-regex", "("][..], "is not a regular expression"),
    ] {
        assert_clean_error(&q(bad.0), 1, &[bad.1]);
    }
    assert_clean_error(
        &trtkit(&[
            "quantize",
            m,
            "--int8",
            "--calibration-cache",
            &cache,
            "--target-cosine",
            "2",
            "--eval-data",
            "synthetic:1",
            "-o",
            o,
        ]),
        2,
        &["--target-cosine 2: a cosine lies in [0, 1]"],
    );
}

/// Bias correction: with only `conv_4` in INT8 (its input is a Relu's, mean far from zero), the
/// corrected bias cancels the mean shift of its rounded weights and the model's output moves
/// measurably closer to the float one.
/// `quantize --int8 --eval-data` of `model` with `exclude` in float, written to `out`, with
/// `extra` flags: its JSON report.
fn measured(model: &Path, cache: &str, exclude: &str, out: &Path, extra: &[&str]) -> Value {
    let args = [
        "--exclude",
        exclude,
        "--eval-data",
        "synthetic:7",
        "--eval-samples",
        "32",
        "-o",
        out.to_str().unwrap(),
    ];
    json(&int8(
        model.to_str().unwrap(),
        cache,
        &[&args[..], extra].concat(),
    ))
}

#[test]
fn bias_correction_lowers_the_error_of_a_conv_quantized_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (model, cache) = model_and_cache(dir.path());
    let out = dir.path().join("bc.onnx");
    let measure = |extra: &[&str]| measured(&model, &cache, "conv_0,conv_2,gemm_7", &out, extra);
    let plain = measure(&["--scale-search", "off"]);
    let corrected = measure(&["--scale-search", "off", "--bias-correction"]);
    assert_eq!(corrected["bias_correction"], true);
    let (p, c) = (
        plain["score"]["mae"].as_f64().unwrap(),
        corrected["score"]["mae"].as_f64().unwrap(),
    );
    assert!(c < 0.8 * p, "plain {p}, corrected {c}");
    let written = trtkit::onnx::OnnxModel::load(&out).unwrap();
    let conv4 = written
        .graph()
        .node
        .iter()
        .find(|n| n.name == "conv_4")
        .unwrap();
    assert_eq!(conv4.input[2], "conv_4.bias_corrected");
}

/// A calibration cache with every range a tenth of the calibrated one (the way an entropy
/// threshold can clip an activation's tail). Its key file is not copied: it vouches for the
/// calibrated cache's bytes, not these.
fn clipped_cache(cache: &str) -> String {
    let text = std::fs::read_to_string(cache).unwrap();
    let lines: Vec<String> = text
        .lines()
        .map(|l| match l.split_once(": ") {
            Some((name, hex)) => {
                let bits = u32::from_str_radix(hex, 16).unwrap();
                let scale = f32::from_bits(bits) / 10.0;
                format!("{name}: {:08x}", scale.to_bits())
            }
            None => l.to_string(),
        })
        .collect();
    let clipped = cache.replace(".cache", "-clipped.cache");
    std::fs::write(&clipped, lines.join("\n") + "\n").unwrap();
    clipped
}

/// The layer-error scale search starts from the calibrated ranges, never raises a reading
/// layer's error, writes the ranges it chose into the model's Q/DQ scales, and repairs ranges
/// that clip the activations (a cache whose ranges are a tenth of min-max's).
#[test]
fn the_scale_search_lowers_the_reading_layers_error() {
    let dir = tempfile::tempdir().unwrap();
    let (model, cache) = model_and_cache(dir.path());
    let cache = clipped_cache(&cache);
    let out = dir.path().join("ss.onnx");
    let measure = |extra: &[&str]| measured(&model, &cache, "conv_2", &out, extra);
    let plain = measure(&["--scale-search", "off"]);
    assert!(plain.get("scale_search").is_none(), "{plain:#}");
    // The search is the default wherever samples are given.
    let searched = measure(&[]);
    let report = &searched["scale_search"];
    // On the tuning part only: 24 of the 32 samples (a quarter is kept apart for the check).
    assert_eq!(report["samples"], 24, "{report:#}");
    assert_eq!(searched["samples"]["tune"], 24, "{searched:#}");
    let choices = report["choices"].as_array().unwrap();
    assert_eq!(choices.len(), report["tensors"].as_u64().unwrap() as usize);
    assert!(report["changed"].as_u64().unwrap() >= 1, "{report:#}");
    for c in choices {
        assert!(
            c["error"].as_f64().unwrap() <= c["calibrated_error"].as_f64().unwrap(),
            "{c:#}"
        );
    }
    let (p, s) = (
        plain["score"]["mae"].as_f64().unwrap(),
        searched["score"]["mae"].as_f64().unwrap(),
    );
    assert!(s < 0.5 * p, "plain {p}, searched {s}");
    // The written model carries the chosen ranges.
    let written = trtkit::onnx::OnnxModel::load(&out).unwrap();
    let changed = choices
        .iter()
        .find(|c| c["amax"] != c["calibrated_amax"])
        .unwrap();
    let name = format!("{}_scale", changed["tensor"].as_str().unwrap());
    let scale = written
        .graph()
        .initializer
        .iter()
        .find(|t| t.name == name)
        .map(|t| f32::from_le_bytes(t.raw_data[..4].try_into().unwrap()))
        .unwrap();
    let amax = changed["amax"].as_f64().unwrap() as f32;
    assert!(
        (scale - amax / 127.0).abs() <= 1e-6 * amax,
        "{scale} vs {amax}"
    );
    // The search needs samples.
    let (m, o) = (model.to_str().unwrap(), out.to_str().unwrap());
    let err = int8(m, &cache, &["--scale-search", "layer", "-o", o]);
    assert!(!err.status.success());
    assert!(String::from_utf8_lossy(&err.stderr).contains("--eval-data"));
    // A search strategy needs a target.
    let err = int8(
        m,
        &cache,
        &["--eval-data", "synthetic:7", "--search", "bisect", "-o", o],
    );
    assert_clean_error(&err, 2, &["--target-cosine"]);
}

/// A scan with `--exclude` starts from the model with those nodes in float: they are not
/// rows, the baseline is better than the all-INT8 one, and each row's recovery is measured
/// from it.
#[test]
fn a_scan_with_exclusions_starts_from_them_in_float() {
    let dir = tempfile::tempdir().unwrap();
    let (model, cache) = model_and_cache(dir.path());
    let scan = |extra: &[&str]| {
        let args = [
            "--sensitivity",
            "--eval-data",
            "synthetic:7",
            "--eval-samples",
            "16",
        ];
        json(&int8(
            model.to_str().unwrap(),
            &cache,
            &[&args[..], extra].concat(),
        ))
    };
    let all = scan(&[]);
    let from = scan(&["--exclude", "conv_2"]);
    assert_eq!(from["excluded"], serde_json::json!(["conv_2"]));
    let names: Vec<&str> = from["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(!names.contains(&"conv_2"));
    let cos = |v: &Value| v["full_int8"]["cosine"].as_f64().unwrap();
    assert!(
        cos(&from) > cos(&all) + 0.01,
        "{} vs {}",
        cos(&from),
        cos(&all)
    );
    for n in from["nodes"].as_array().unwrap() {
        let recovery = n["left_float"]["cosine"].as_f64().unwrap() - cos(&from);
        assert!((n["recovery"].as_f64().unwrap() - recovery).abs() < 1e-12);
    }
}

/// `quantize --equalize` writes a float model with its Conv → Relu → Conv pair equalised
/// (calibration and quantization then take it as any model), and takes no other rewrite.
#[test]
fn equalize_writes_a_float_model_that_calibrates() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(
        dir.path(),
        "scaled.onnx",
        test_models::channel_scaled_convs(),
    );
    let out = dir.path().join("eq.onnx");
    let report = json(&trtkit(&[
        "quantize",
        model.to_str().unwrap(),
        "--equalize",
        "-o",
        out.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(report["precision"], "fp32");
    assert_eq!(
        report["equalize"]["pairs"],
        serde_json::json!([["conv_2", "conv_4"]])
    );
    let cal = trtkit(&[
        "calibrate",
        out.to_str().unwrap(),
        "--calib-data",
        "synthetic:1",
        "--num-samples",
        "16",
        "--batch-size",
        "8",
        "--cache-dir",
        dir.path().join("cal").to_str().unwrap(),
    ]);
    assert!(
        cal.status.success(),
        "{}",
        String::from_utf8_lossy(&cal.stderr)
    );
    let both = trtkit(&[
        "quantize",
        model.to_str().unwrap(),
        "--equalize",
        "--fp16",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(both.status.code(), Some(2));
}

/// The triage of a token model: samples are made at `--dim seq=16`, the scan and the measured
/// model work, and the written model keeps its dynamic `seq` axis.
#[test]
fn a_token_model_is_triaged_at_a_named_length() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "tok.onnx", test_models::token_classifier());
    let m = model.to_str().unwrap();
    let cal = json(&trtkit(&[
        "calibrate",
        m,
        "--calib-data",
        "synthetic:1",
        "--dim",
        "seq=16",
        "--batch-size",
        "8",
        "--num-samples",
        "16",
        "--cache-dir",
        dir.path().join("cal").to_str().unwrap(),
        "--json",
    ]));
    let cache = cal["caches"][0]["cache"].as_str().unwrap().to_string();
    let eval = [
        "--eval-data",
        "synthetic:2",
        "--eval-samples",
        "16",
        "--dim",
        "seq=16",
    ];
    let scan = json(&int8(m, &cache, &[&["--sensitivity"][..], &eval].concat()));
    let nodes = scan["nodes"].as_array().unwrap();
    assert!(nodes.iter().any(|n| n["op"] == "MatMul"), "{scan:#}");
    assert!(
        scan["full_int8"]["cosine"].as_f64().unwrap() > 0.5,
        "{scan:#}"
    );
    let out = dir.path().join("q.onnx");
    let o = out.to_str().unwrap();
    let measured = json(&int8(m, &cache, &[&["-o", o][..], &eval].concat()));
    assert!(
        measured["int8_share"].as_f64().unwrap() > 0.5,
        "{measured:#}"
    );
    let written = trtkit::onnx::OnnxModel::load(&out).unwrap();
    let ids = format!("{:?}", written.graph().input[0]);
    assert!(ids.contains("seq"), "{ids}");
    // Without samples, a size is the one the check opens the rewritten model at; the model
    // written keeps its named axis.
    let plain = [
        "quantize",
        m,
        "--int8",
        "--calibration-cache",
        &cache,
        "--dim",
        "seq=16",
        "-o",
        out.to_str().unwrap(),
    ];
    stdout_of_success(&trtkit(&plain));
    let written = trtkit::onnx::OnnxModel::load(&out).unwrap();
    let ids = format!("{:?}", trtkit::onnx::shape::model_inputs(&written)[0].dims);
    assert!(ids.contains("seq"), "{ids}");
    // With no check, such a size has nothing to apply to.
    let err = trtkit(&[&plain[..], &["--no-check"]].concat());
    assert_clean_error(&err, 2, &["leave out --no-check"]);
}
