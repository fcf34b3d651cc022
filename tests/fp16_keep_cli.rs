//! Single nodes of an FP16 model kept in float32: `--keep-fp32-nodes` and `--keep-fp32-regex`
//! on `quantize --fp16` and `build --fp16` keep exactly the nodes named, a name no node has is a
//! usage error, and a pattern that matches nothing is a warning.

mod support;

use serde_json::Value;
use std::path::Path;
use support::{assert_clean_error, save, trtkit};
use trtkit::onnx::test_models;
use trtkit::onnx::OnnxModel;

/// `trtkit quantize MODEL --fp16 -o OUT ARGS… --json`.
fn fp16(model: &Path, out: &Path, args: &[&str]) -> std::process::Output {
    trtkit(
        &[
            &[
                "quantize",
                model.to_str().unwrap(),
                "--fp16",
                "-o",
                out.to_str().unwrap(),
            ][..],
            args,
            &["--json"],
        ]
        .concat(),
    )
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_str(&support::stdout_of_success(out)).unwrap()
}

/// The ONNX element type of initializer `name` in the model at `path` (1 float, 10 float16).
fn initializer_type(path: &Path, name: &str) -> i32 {
    let m = OnnxModel::load(path).unwrap();
    m.graph()
        .initializer
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no initializer {name}"))
        .data_type
}

#[test]
fn a_node_kept_by_name_or_pattern_stays_float32_and_the_model_matches_fp32() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "ov.onnx", test_models::fp16_overflow());
    let out = dir.path().join("ov-fp16.onnx");
    // The report is printed even when the run then fails for outputs that are all NaN.
    let cosine_vs_fp32 = |path: &Path| {
        let out = trtkit(&[
            "compare",
            path.to_str().unwrap(),
            model.to_str().unwrap(),
            "--num-inputs",
            "16",
            "--json",
        ]);
        let compare: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        compare["outputs"][0]["closeness"]["cosine"].clone()
    };
    // Without: both MatMuls compute in float16, and matmul_0 overflows (the CPU backend runs
    // the FP16 graph emulated): the cosine is NaN.
    let plain = json(&fp16(&model, &out, &[]));
    assert!(plain["fp16"].get("kept_nodes").is_none(), "{plain:#}");
    assert_eq!(initializer_type(&out, "w_big"), 10);
    assert_eq!(initializer_type(&out, "w_head"), 10);
    assert_eq!(cosine_vs_fp32(&out), "NaN");
    // By name: only matmul_0.
    let named = json(&fp16(&model, &out, &["--keep-fp32-nodes", "matmul_0"]));
    assert_eq!(named["fp16"]["kept_nodes"], serde_json::json!(["matmul_0"]));
    assert_eq!(initializer_type(&out, "w_big"), 1);
    assert_eq!(initializer_type(&out, "w_head"), 10);
    let cosine = cosine_vs_fp32(&out);
    assert!(cosine.as_f64().unwrap() >= 0.999, "{cosine}");
    // By pattern, whole names only: `matmul_.` keeps both, `matmul` neither (a warning).
    let both = json(&fp16(&model, &out, &["--keep-fp32-regex", "matmul_."]));
    assert_eq!(
        both["fp16"]["kept_nodes"],
        serde_json::json!(["matmul_0", "matmul_2"])
    );
    assert_eq!(initializer_type(&out, "w_head"), 1);
    let none = fp16(&model, &out, &["--keep-fp32-regex", "matmul"]);
    let report = json(&none);
    let stderr = String::from_utf8_lossy(&none.stderr);
    assert!(stderr.contains("no node name matches 'matmul'"), "{stderr}");
    assert!(
        report["fp16"]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("'matmul'"),
        "{report:#}"
    );
    assert_eq!(initializer_type(&out, "w_big"), 10);
    // The text report names the kept nodes.
    let text = trtkit(&[
        "quantize",
        model.to_str().unwrap(),
        "--fp16",
        "--keep-fp32-nodes",
        "#2",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(support::stdout_of_success(&text).contains("(by name: matmul_2)"));
}

#[test]
fn an_unknown_node_or_a_bad_pattern_is_a_usage_error_naming_it_and_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "ov.onnx", test_models::fp16_overflow());
    let out = dir.path().join("x.onnx");
    assert_clean_error(
        &fp16(&model, &out, &["--keep-fp32-nodes", "matmul_0,nope"]),
        2,
        &["'nope'", "ov.onnx"],
    );
    assert_clean_error(
        &fp16(&model, &out, &["--keep-fp32-regex", "("]),
        2,
        &["'('", "not a regular expression", "ov.onnx"],
    );
    assert!(!out.exists());
    // Only with --fp16.
    let err = trtkit(&[
        "quantize",
        model.to_str().unwrap(),
        "--equalize",
        "--keep-fp32-nodes",
        "matmul_0",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(err.status.code(), Some(2));
    // The same flags on build: an unknown node is refused before any engine is written.
    let engines = dir.path().join("engines");
    let build = support::trtkit_in(
        dir.path(),
        &[
            "build",
            model.to_str().unwrap(),
            "--fp16",
            "--input-shape",
            "-1",
            "16",
            "--keep-fp32-nodes",
            "nope",
            "--engine-dir",
            engines.to_str().unwrap(),
        ],
    );
    assert_clean_error(&build, 2, &["'nope'", "ov.onnx"]);
    assert!(support::files(&engines).is_empty());
}
