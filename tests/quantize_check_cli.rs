//! The rewrite's check opens the result where such a model runs by default (ONNX Runtime on the
//! CPU where it is installed, else tract), at the sizes given for the axes a model leaves free;
//! a refusal names the backend, the free axes and the flags. Already-quantized models are
//! refused by the FP16 and INT8 rewrites, naming the ops.

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use support::{assert_clean_error, save, stdout_of_success, trtkit, trtkit_in};
use trtkit::onnx::test_models;

/// `trtkit -q ARGS…` with ONNX Runtime out of reach (tract stands in).
fn without_ort(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trtkit"))
        .arg("-q")
        .args(args)
        .env("ORT_DYLIB_PATH", "/nonexistent/libonnxruntime.so")
        .output()
        .unwrap()
}

fn json(out: &Output) -> Value {
    serde_json::from_str(&stdout_of_success(out)).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_model_tract_cannot_analyse_at_free_sizes_is_checked_where_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(dir.path(), "det.onnx", test_models::paddle_style_pyramid());
    let out = dir.path().join("det-fp16.onnx");
    let rewrite = ["quantize", s(&model), "--fp16", "-o", s(&out)];
    if trtkit::backend::ort::available().is_ok() {
        // ONNX Runtime opens it with height and width free.
        let r = json(&trtkit(&[&rewrite[..], &["--json"]].concat()));
        assert_eq!(r["checked"], true, "{r:#}");
        assert_eq!(r["checked_on"], "ort-cpu", "{r:#}");
        assert!(out.is_file());
        let text = stdout_of_success(&trtkit(&rewrite));
        assert!(text.contains("checked: it opens on ort-cpu"), "{text}");
        std::fs::remove_file(&out).unwrap();
    }
    // tract cannot unify the upsampled map's size with the finer one's while they are free:
    // the refusal names tract, the free axes and the flags, and nothing is written.
    let refused = without_ort(&rewrite);
    assert_clean_error(
        &refused,
        1,
        &[
            "does not load in tract-cpu at batch 1 with free axes x[2] (height), x[3] (width); nothing written",
            "--input-shape",
            "--no-check writes it unchecked",
        ],
    );
    assert!(!out.exists());
    // Sizes for the check: tract opens it, and the model written keeps its free axes.
    let sized = without_ort(&[&rewrite[..], &["--input-shape", "x:-1x3x32x48", "--json"]].concat());
    let r = json(&sized);
    assert_eq!(r["checked_on"], "tract-cpu", "{r:#}");
    let written = trtkit::onnx::OnnxModel::load(&out).unwrap();
    let dims = format!("{:?}", trtkit::onnx::shape::model_inputs(&written)[0].dims);
    assert!(dims.contains("height") && dims.contains("width"), "{dims}");
    // `--no-check` writes it unchecked; shapes for a check that does not run are refused.
    let r = json(&without_ort(
        &[&rewrite[..], &["--no-check", "--json"]].concat(),
    ));
    assert_eq!(r["checked"], false, "{r:#}");
    assert!(r.get("checked_on").is_none(), "{r:#}");
    let both = trtkit(&[&rewrite[..], &["--no-check", "--dim", "height=32"]].concat());
    assert_clean_error(&both, 2, &["leave out --no-check"]);
    // Shapes that do not fit the model are said as such.
    let wrong = trtkit(&[&rewrite[..], &["--input-shape", "y:1x3x32x48"]].concat());
    assert_eq!(wrong.status.code(), Some(1));
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(!err.contains("does not load"), "{err}");
}

#[test]
fn an_already_quantized_model_is_refused_naming_its_ops() {
    let dir = tempfile::tempdir().unwrap();
    let model = save(
        dir.path(),
        "rec-q.onnx",
        test_models::dynamic_quantized_matmul(),
    );
    let out = dir.path().join("rec-q-fp16.onnx");
    let ops = "rec-q.onnx: already quantized (DynamicQuantizeLinear ×1, MatMulInteger ×1)";
    let fp16 = trtkit(&["quantize", s(&model), "--fp16", "-o", s(&out)]);
    assert_clean_error(&fp16, 1, &[ops, "the FP16 rewrite", "give the float model"]);
    let cache = dir.path().join("rec-q.cache");
    std::fs::write(&cache, "TRT-8601-EntropyCalibration2\nx: 3c010a14\n").unwrap();
    let int8 = trtkit(&[
        "quantize",
        s(&model),
        "--int8",
        "--calibration-cache",
        s(&cache),
        "-o",
        s(&out),
    ]);
    assert_clean_error(&int8, 1, &[ops, "the INT8 rewrite", "give the float model"]);
    assert!(!out.exists());
    // `build` refuses it the same way, before calibrating.
    for precision in [&["--fp16"][..], &["--int8", "--calib-data", "synthetic:0"]] {
        let built = trtkit_in(
            dir.path(),
            &[&["build", s(&model), "-o", "e.engine"][..], precision].concat(),
        );
        assert_clean_error(&built, 1, &[ops, "give the float model"]);
    }
    // The float model it stands for rewrites.
    let float = save(dir.path(), "c.onnx", test_models::classifier(None));
    stdout_of_success(&trtkit(&["quantize", s(&float), "--fp16", "-o", s(&out)]));
}
