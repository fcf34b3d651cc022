//! `run`, `validate` and `compare` on TensorRT engines, on a machine with no GPU (CI): a real
//! engine built with TensorRT-RTX is taken by every command (the file type picks the engine
//! backend) and refused in one line that says why it cannot run here and what would run it;
//! truncated, foreign and wrong-flavour engines are refused before TensorRT is asked anything.
//! The GPU side of the engine backend is in `examples/gpu_suite.rs`.
//!
//! Needs TensorRT-RTX (`python3 -m pip install tensorrt-rtx-cu13-libs==1.7.1.116`; CI installs it).

mod support;

use std::path::{Path, PathBuf};
use support::{assert_clean_error, save, trtkit_in, write_jpeg};
use trtkit::onnx::test_models;

/// Builds the test classifier's dynamic-batch FP32 engine in `dir`; returns the engine and the
/// model.
fn built_engine(dir: &Path) -> (PathBuf, PathBuf) {
    let model = save(dir, "clf.onnx", test_models::classifier(None));
    let out = trtkit_in(
        dir,
        &[
            "build",
            "clf.onnx",
            "--input-shape",
            "-1",
            "3",
            "16",
            "16",
            "--max-batch",
            "8",
            "--opt-batch",
            "4",
            "--json",
            "-q",
        ],
    );
    assert!(
        out.status.success(),
        "build failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (dir.join(r["engine"].as_str().unwrap()), model)
}

/// A class-folder dataset of two images for `validate`.
fn dataset(dir: &Path) -> PathBuf {
    let root = dir.join("val");
    for (class, rgb) in [("a", [200, 30, 30]), ("b", [30, 200, 30])] {
        std::fs::create_dir_all(root.join(class)).unwrap();
        write_jpeg(&root.join(class).join("x.jpg"), 20, 20, rgb, 1);
    }
    root
}

/// Whether this machine has a GPU TensorRT-RTX engines run on (then the refusals below do not
/// apply, and the GPU suite is where the engine path is checked).
fn machine_runs_rtx_engines() -> bool {
    trtkit::cuda::info::driver_info()
        .gpus
        .iter()
        .any(|g| trtkit::trt::loader::rtx_runs_on(&g.compute_capability))
}

#[test]
fn every_command_takes_an_engine_and_says_why_it_cannot_run_here() {
    if machine_runs_rtx_engines() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (engine, model) = built_engine(d);
    let e = engine.to_str().unwrap();
    let val = dataset(d);
    let no_gpu = trtkit::cuda::info::driver_info().gpus.is_empty();
    // Without a GPU: no usable GPU, and which ones run the engine. With an unsupported GPU
    // (Hopper): that GPU, its compute capability, and the same list.
    let needles: &[&str] = if no_gpu {
        &[
            e,
            "TensorRT-RTX engine runs on an NVIDIA GPU",
            "8.0, 8.6, 8.9 or 12.x",
        ]
    } else {
        &[
            e,
            "cannot run on GPU",
            "compute capability",
            "8.0, 8.6, 8.9 and 12.x",
        ]
    };
    let commands: [Vec<&str>; 4] = [
        vec!["run", e, "--batch-size", "1,4"],
        vec!["run", e, "--cuda-graph", "--streams", "2"],
        vec!["validate", e, "--dataset", val.to_str().unwrap()],
        vec!["compare", e, model.to_str().unwrap(), "--num-samples", "4"],
    ];
    for args in commands {
        let out = trtkit_in(d, &args);
        assert_clean_error(&out, 1, needles);
    }
    // The engine and its sidecar are untouched, and no runtime cache was written for a run
    // that never happened.
    let names: Vec<String> = std::fs::read_dir(engine.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

#[test]
fn a_truncated_engine_is_refused_before_tensorrt_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (engine, model) = built_engine(d);
    let bytes = std::fs::read(&engine).unwrap();
    std::fs::write(&engine, &bytes[..bytes.len() / 2]).unwrap();
    let e = engine.to_str().unwrap();
    let half = (bytes.len() / 2).to_string();
    let val = dataset(d);
    for args in [
        vec!["run", e],
        vec!["compare", e, model.to_str().unwrap()],
        vec!["validate", e, "--dataset", val.to_str().unwrap()],
    ] {
        let out = trtkit_in(d, &args);
        assert_clean_error(
            &out,
            1,
            &[
                e,
                &half,
                "its sidecar describes",
                "truncated",
                "trtkit build",
            ],
        );
    }
}

#[test]
fn inspect_refuses_an_engine_its_sidecar_does_not_describe() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (engine, _) = built_engine(d);
    let e = engine.to_str().unwrap();
    let whole = trtkit_in(d, &["inspect", e]);
    assert!(
        whole.status.success(),
        "{}",
        String::from_utf8_lossy(&whole.stderr)
    );
    let bytes = std::fs::read(&engine).unwrap();
    // Cut short: the size differs from the sidecar's.
    std::fs::write(&engine, &bytes[..bytes.len() / 2]).unwrap();
    let half = (bytes.len() / 2).to_string();
    let out = trtkit_in(d, &["inspect", e]);
    assert_clean_error(&out, 1, &[e, &half, "its sidecar describes", "truncated"]);
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Same size, one byte changed: the hash differs.
    let mut changed = bytes.clone();
    *changed.last_mut().unwrap() ^= 0xff;
    std::fs::write(&engine, &changed).unwrap();
    let out = trtkit_in(d, &["inspect", e, "--json"]);
    assert_clean_error(
        &out,
        1,
        &[e, "another SHA-256", "changed after trtkit built it"],
    );
}

/// A sidecar edited by hand (another precision, another batch range) is not believed:
/// `inspect` shows no key or facts from it and says why, and a rebuild replaces the engine.
#[test]
fn an_edited_sidecar_is_not_believed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (engine, _) = built_engine(d);
    let e = engine.to_str().unwrap();
    let side = PathBuf::from(format!("{e}.json"));
    let text = std::fs::read_to_string(&side).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["key"]["precision"], "fp32", "{text}");
    v["key"]["precision"] = "int8".into();
    std::fs::write(&side, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let out = trtkit_in(d, &["inspect", e, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(shown["sidecar"].is_null(), "{shown}");
    let problem = shown["sidecar_problem"].as_str().unwrap();
    assert!(problem.contains("edited after the build"), "{problem}");
    // Put back as written, it is believed again.
    std::fs::write(&side, &text).unwrap();
    let out = trtkit_in(d, &["inspect", e, "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["sidecar"]["key"]["precision"], "fp32", "{shown}");
}

#[test]
fn foreign_and_other_flavour_files_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = save(d, "clf.onnx", test_models::classifier(None));
    std::fs::write(d.join("png.plan"), b"\x89PNG\r\n\x1a\nrest of it").unwrap();
    let out = trtkit_in(d, &["run", "png.plan"]);
    assert_clean_error(
        &out,
        1,
        &["png.plan", "not a TensorRT engine", "a PNG image"],
    );

    std::fs::write(
        d.join("trt.engine"),
        b"ftrt\x00\x00\x00\x00rest of an engine",
    )
    .unwrap();
    let out = trtkit_in(d, &["compare", "trt.engine", model.to_str().unwrap()]);
    assert_clean_error(
        &out,
        1,
        &[
            "trt.engine",
            "TensorRT (libnvinfer) engine",
            "--features tensorrt",
        ],
    );
}

#[test]
fn missing_tensorrt_is_named_for_an_engine() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (engine, _) = built_engine(d);
    let empty = d.join("no-tensorrt-here");
    std::fs::create_dir(&empty).unwrap();
    let out = trtkit_in(
        d,
        &[
            "run",
            engine.to_str().unwrap(),
            "--tensorrt-dir",
            empty.to_str().unwrap(),
        ],
    );
    assert_clean_error(
        &out,
        1,
        &[
            "no-tensorrt-here",
            "tensorrt-rtx-cu13-libs==1.7.1.116",
            "running it needs TensorRT-RTX",
        ],
    );
}

#[test]
fn input_shape_overrides_do_not_apply_to_an_engine() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (engine, model) = built_engine(d);
    let out = trtkit_in(
        d,
        &[
            "compare",
            engine.to_str().unwrap(),
            model.to_str().unwrap(),
            "--input-shape",
            "2x3x16x16",
        ],
    );
    assert_clean_error(&out, 1, &["--input-shape applies to ONNX models only"]);
}
