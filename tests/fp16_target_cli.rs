//! The FP16 target search of `quantize`: on a model whose one MatMul overflows float16, the
//! search keeps that MatMul in float32 (and says it overflows), meets the target on the check
//! samples, and keeps its result under a key: reused when unchanged, searched again when
//! tampered with.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use support::{assert_clean_error, save, trtkit};
use trtkit::onnx::test_models;
use trtkit::quantize::search_report::SearchReport;

/// `trtkit quantize MODEL --fp16 -o OUT --eval-data … ARGS… --json`.
fn search(model: &Path, out: &Path, args: &[&str]) -> std::process::Output {
    trtkit(
        &[
            &[
                "quantize",
                model.to_str().unwrap(),
                "--fp16",
                "-o",
                out.to_str().unwrap(),
                "--eval-data",
                "synthetic:7",
                "--eval-samples",
                "32",
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

#[test]
fn the_overflowing_matmul_is_kept_in_float32_and_the_target_met_on_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "ov.onnx", test_models::fp16_overflow());
    let out = dir.path().join("ov-fp16.onnx");
    let target = |extra: &[&str]| {
        search(
            &model,
            &out,
            &[&["--target-cosine", "0.999"][..], extra].concat(),
        )
    };
    let found = json(&target(&[]));
    assert_eq!(
        found["float_nodes"],
        serde_json::json!(["matmul_0"]),
        "{found:#}"
    );
    assert_eq!(found["met"], true, "{found:#}");
    assert_eq!(found["emulated"], true);
    assert_eq!(found["samples"]["check"], 8, "{found:#}");
    assert!(
        found["check"]["cosine"].as_f64().unwrap() >= 0.999,
        "{found:#}"
    );
    // All in FP16 the output is not finite: the cosine is NaN, never met.
    assert_eq!(found["full_fp16"]["cosine"], "NaN", "{found:#}");
    let kept = &found["kept"][0];
    assert_eq!(kept["name"], "matmul_0");
    assert_eq!(kept["op"], "MatMul");
    assert_eq!(kept["reason"], "overflow");
    assert!(kept["max_abs"].as_f64().unwrap() > 65504.0, "{kept:#}");
    assert_eq!(found["reused"], false);
    // The JSON reads back into the report and writes out the same.
    let back: SearchReport = serde_json::from_value(found.clone()).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), found);
    // The written model computes matmul_0 in float32 and the head in float16.
    let written = trtkit::onnx::OnnxModel::load(&out).unwrap();
    let dtype = |name: &str| {
        written
            .graph()
            .initializer
            .iter()
            .find(|t| t.name == name)
            .unwrap()
            .data_type
    };
    assert_eq!((dtype("w_big"), dtype("w_head")), (1, 10));
    // The text report says why.
    let text = trtkit(&[
        "quantize",
        model.to_str().unwrap(),
        "--fp16",
        "-o",
        out.to_str().unwrap(),
        "--eval-data",
        "synthetic:7",
        "--eval-samples",
        "32",
        "--target-cosine",
        "0.999",
    ]);
    let text = support::stdout_of_success(&text);
    assert!(text.contains("matmul_0 (MatMul): overflow"), "{text}");
    assert!(text.contains("reused the search kept in"), "{text}");

    // The same question again is answered from the kept result.
    let again = json(&target(&[]));
    assert_eq!(again["reused"], true);
    assert_eq!(again["float_nodes"], found["float_nodes"]);
    // A kept result changed since it was written is not trusted.
    let kept_file = PathBuf::from(again["result"].as_str().unwrap());
    assert!(kept_file.is_file());
    let mut changed: Value = serde_json::from_slice(&std::fs::read(&kept_file).unwrap()).unwrap();
    changed["float_nodes"] = serde_json::json!([]);
    std::fs::write(&kept_file, serde_json::to_vec_pretty(&changed).unwrap()).unwrap();
    let redone = json(&target(&[]));
    assert_eq!(redone["reused"], false, "{redone:#}");
    assert_eq!(redone["float_nodes"], found["float_nodes"]);
    let notes = redone["notes"].to_string();
    assert!(notes.contains("tampered"), "{notes}");
    // Bisection finds the same node, under its own key; the user's keep list is in the key.
    let bisect = json(&target(&["--search", "bisect"]));
    assert_eq!(bisect["float_nodes"], serde_json::json!(["matmul_0"]));
    assert_ne!(bisect["result"], found["result"]);
    let user = json(&target(&["--keep-fp32-nodes", "matmul_0"]));
    assert_eq!(user["reused"], false);
    assert_eq!(user["float_nodes"], serde_json::json!([]), "{user:#}");
    assert_eq!(user["met"], true);
    // Kept by the user, matmul_0 alone fixes the emulated FP16 model: no candidate overflows.
    assert!(
        user["full_fp16"]["cosine"].as_f64().unwrap() >= 0.999,
        "{user:#}"
    );
    // A pattern that keeps nothing is said once, not for every variant measured.
    let unmatched = target(&["--keep-fp32-regex", "nothing"]);
    let stderr = String::from_utf8_lossy(&unmatched.stderr);
    assert_eq!(
        stderr.matches("no node name matches 'nothing'").count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        json(&unmatched)["float_nodes"],
        serde_json::json!(["matmul_0"])
    );
    let by_regex = json(&target(&["--keep-fp32-regex", "matmul_[0]"]));
    assert_eq!(
        by_regex["float_nodes"],
        serde_json::json!([]),
        "{by_regex:#}"
    );
    assert!(by_regex["full_fp16"]["cosine"].as_f64().unwrap() >= 0.999);
    // Top-1 agreement is a target too.
    let agreement = json(&search(&model, &out, &["--target-agreement", "99"]));
    assert_eq!(agreement["goal"], serde_json::json!({"agreement": 99.0}));
    assert_eq!(agreement["float_nodes"], serde_json::json!(["matmul_0"]));
    assert_eq!(agreement["met"], true);
}

#[test]
fn the_fp16_search_refuses_int8_flags_and_a_missing_target() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "ov.onnx", test_models::fp16_overflow());
    let out = dir.path().join("x.onnx");
    assert_clean_error(&search(&model, &out, &[]), 2, &["--target-cosine"]);
    assert_clean_error(
        &search(
            &model,
            &out,
            &["--target-cosine", "0.99", "--bias-correction"],
        ),
        2,
        &["--bias-correction"],
    );
    assert_clean_error(
        &search(&model, &out, &["--target-cosine", "1.5"]),
        2,
        &["--target-cosine 1.5"],
    );
    assert_clean_error(
        &search(
            &model,
            &out,
            &["--target-cosine", "0.99", "--keep-fp32-nodes", "nope"],
        ),
        2,
        &["'nope'", "ov.onnx"],
    );
    assert!(!out.exists());
}

/// Each candidate of the search rewrites the model again; a weight clamped to ±65504 is still
/// said once, not once per rewrite.
#[test]
fn a_clamped_weight_is_said_once_however_many_rewrites_the_search_makes() {
    let dir = tempfile::tempdir().unwrap();
    let mut proto = test_models::fp16_overflow();
    let w = proto
        .graph
        .as_mut()
        .unwrap()
        .initializer
        .first_mut()
        .unwrap();
    assert_eq!(w.data_type, 1, "{}", w.name);
    let name = w.name.clone();
    w.raw_data[0..4].copy_from_slice(&1e5f32.to_le_bytes());
    let model = save(dir.path(), "big.onnx", proto);
    let out = search(
        &model,
        &dir.path().join("big-fp16.onnx"),
        &["--target-cosine", "0.999"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let said = format!("initializer '{name}' has values beyond the float16 range");
    assert_eq!(stderr.matches(&said).count(), 1, "{stderr}");
}
