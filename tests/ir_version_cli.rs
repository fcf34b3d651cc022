//! Models saved by a current `onnx` (IR version 14) run on the default backend: ONNX Runtime
//! 1.31.1 reads IR versions up to 13, so it gets a copy with the version lowered where the
//! model uses nothing IR 14 added, and tract stands in where it does.

mod support;

use std::path::{Path, PathBuf};
use support::{save, stdout_of_success, trtkit, write_jpeg};
use trtkit::onnx::graph_builder::tensor_f32;
use trtkit::onnx::pb::ModelProto;
use trtkit::onnx::test_models::classifier;

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_str(&stdout_of_success(out)).unwrap()
}

/// The test classifier as a current `onnx` saves it: IR version 14, opset 17.
fn ir14_classifier() -> ModelProto {
    let mut m = classifier(None);
    m.ir_version = 14;
    m.opset_import[0].version = 17;
    m
}

fn saved_ir14(dir: &Path) -> (PathBuf, Vec<u8>) {
    let path = save(dir, "ir14.onnx", ir14_classifier());
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

#[test]
fn an_ir_14_model_runs_on_onnx_runtime_and_the_file_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let (model, bytes) = saved_ir14(dir.path());
    let m = model.to_str().unwrap();
    let out = trtkit(&["run", m, "--iterations", "2", "--json", "-v"]);
    let v = json(&out);
    let backend = v["results"][0]["backend"].as_str().unwrap();
    assert!(backend.starts_with("ort-cpu"), "{backend}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("marked IR 13"), "{stderr}");
    assert_eq!(std::fs::read(&model).unwrap(), bytes);
}

#[test]
fn an_ir_14_model_compares_on_onnx_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = saved_ir14(dir.path());
    let m = model.to_str().unwrap();
    let v = json(&trtkit(&["compare", m, m, "--num-inputs", "4", "--json"]));
    for side in 0..2 {
        let backend = v["sides"][side]["backend"].as_str().unwrap();
        assert!(backend.starts_with("ort-cpu"), "{backend}");
    }
    assert_eq!(v["outputs"][0]["closeness"]["equal_pct"], 100.0);
}

#[test]
fn an_ir_14_model_validates_on_onnx_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = saved_ir14(dir.path());
    let data = dir.path().join("val");
    for (i, class) in ["0_a", "1_b"].iter().enumerate() {
        for k in 0..2u64 {
            let path = data.join(class).join(format!("{k}.jpg"));
            write_jpeg(&path, 24, 24, [200, 40 * i as u8, 30], k);
        }
    }
    let v = json(&trtkit(&[
        "validate",
        model.to_str().unwrap(),
        "--dataset",
        data.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(v["images"], 4);
    let backend = v["backend"].as_str().unwrap();
    assert!(backend.starts_with("ort-cpu"), "{backend}");
}

/// A model ONNX Runtime cannot read even lowered (an opset newer than it runs) runs on tract by
/// default, with a warning saying why.
#[test]
fn a_model_onnx_runtime_cannot_read_runs_on_tract_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let mut proto = ir14_classifier();
    proto.opset_import[0].version = 27;
    let model = save(dir.path(), "new_opset.onnx", proto);
    let out = trtkit(&[
        "run",
        model.to_str().unwrap(),
        "--iterations",
        "1",
        "--json",
    ]);
    let backend = json(&out)["results"][0]["backend"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(backend.starts_with("tract-cpu"), "{backend}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("tract runs the model") && stderr.contains("opset 27"),
        "{stderr}"
    );
}

/// A model that uses an element type IR 13 lacks is not lowered: named, ONNX Runtime's refusal
/// says why and what to try.
#[test]
fn a_model_that_needs_ir_14_is_refused_by_a_named_onnx_runtime_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut proto = ir14_classifier();
    let mut unused = tensor_f32("float6_table", &[1], &[0.0]);
    unused.data_type = 27; // FLOAT6E2M3, added in IR 14
    unused.raw_data = vec![0];
    proto.graph.as_mut().unwrap().initializer.push(unused);
    let model = save(dir.path(), "f6.onnx", proto);
    let m = model.to_str().unwrap();
    let out = trtkit(&["run", m, "--iterations", "1", "--backend", "ort"]);
    support::assert_clean_error(&out, 1, &["f6.onnx", "float6e2m3", "--backend tract"]);
}
