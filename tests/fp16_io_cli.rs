//! A graph with float16 inputs and outputs (`quantize --fp16 --fp16-io`) goes through every
//! command as its float32 source does: `compare` converts the inputs each side takes (and says
//! so), `run` and `validate` feed it float16, float16 outputs compare with float32 ones, and
//! `calibrate` refuses it in one line. On tract and ONNX Runtime's CPU build.
//!
//! Needs the `onnxruntime` Python package (CI installs it) or ORT_DYLIB_PATH.

mod support;

use std::path::{Path, PathBuf};
use support::{assert_clean_error, save, stdout_of_success, trtkit, write_jpeg};
use trtkit::data::npz;
use trtkit::onnx::rewrite::fp16::{Fp16, Fp16Options};
use trtkit::onnx::rewrite::pass::Pass;
use trtkit::onnx::test_models::classifier;
use trtkit::onnx::OnnxModel;
use trtkit::tensor::{ElemType, HostTensor, TensorData};

/// The backends every case runs on, as `--backend` names them.
const BACKENDS: [&str; 2] = ["tract", "ort"];

/// The test classifier saved as `fp32.onnx` under `dir`, and its FP16 rewrite with float16
/// inputs and outputs as `io.onnx`.
fn fp32_and_io(dir: &Path) -> (String, String) {
    let fp32 = save(dir, "fp32.onnx", classifier(None));
    let options = Fp16Options {
        fp16_io: true,
        ..Default::default()
    };
    let (io, _) = Fp16(options).run(OnnxModel::load(&fp32).unwrap()).unwrap();
    let io_path = dir.join("io.onnx");
    io.save(&io_path).unwrap();
    let text = |p: &Path| p.to_str().unwrap().to_string();
    (text(&fp32), text(&io_path))
}

/// `samples` float32 inputs of the classifier in [0, 1), saved as `x.npz` under `dir`.
fn float32_inputs(dir: &Path, samples: usize) -> String {
    let n = samples * 3 * 16 * 16;
    let values = (0..n)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0)
        .collect();
    let x = HostTensor::new("input", vec![samples, 3, 16, 16], TensorData::F32(values)).unwrap();
    let path = dir.join("x.npz");
    npz::save(&path, &[x]).unwrap();
    path.to_str().unwrap().to_string()
}

fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&stdout_of_success(&trtkit(args))).unwrap()
}

/// The notes of a compare report.
fn notes(report: &serde_json::Value) -> Vec<String> {
    report["notes"]
        .as_array()
        .map(|n| n.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// The first output's closeness to the reference: it is the FP16 form of the same model.
fn assert_close(report: &serde_json::Value, samples: u64) {
    let o = &report["outputs"][0];
    assert_eq!(o["closeness"]["samples"], samples, "{report}");
    let cosine = o["closeness"]["cosine"].as_f64().unwrap();
    assert!(cosine > 0.9999, "cosine {cosine}: {report}");
    assert!(o["closeness"]["max_abs_err"].as_f64().unwrap() < 0.05);
    assert_eq!(o["topk"]["top1_agreement_pct"], 100.0, "{report}");
}

#[test]
fn compare_converts_an_npz_of_float32_inputs_for_the_float16_side() {
    let dir = tempfile::tempdir().unwrap();
    let (fp32, io) = fp32_and_io(dir.path());
    let x = float32_inputs(dir.path(), 6);
    for backend in BACKENDS {
        let args = ["--inputs", &x, "--backend", backend, "--json"];
        let r = json(&[&["compare", &io, &fp32][..], &args].concat());
        assert_close(&r, 6);
        assert_eq!(r["outputs"][0]["dtype_a"], "float16");
        assert_eq!(r["outputs"][0]["dtype_b"], "float32");
        assert_eq!(
            notes(&r),
            ["inputs converted float32 → float16 for A"],
            "{backend}"
        );
        // The other way round: the reference takes float16, the side under test the file's
        // float32 as it is.
        let r = json(&[&["compare", &fp32, &io][..], &args].concat());
        assert_close(&r, 6);
        assert_eq!(notes(&r), ["inputs converted float32 → float16 for B"]);
        // The FP32 model against itself converts nothing and says nothing.
        let r = json(&[&["compare", &fp32, &fp32][..], &args].concat());
        assert!(notes(&r).is_empty(), "{r}");
    }
}

#[test]
fn compare_on_random_inputs_makes_them_for_the_first_side_and_converts_for_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let (fp32, io) = fp32_and_io(dir.path());
    let saved = dir.path().join("inputs.npz");
    for backend in BACKENDS {
        let r = json(&[
            "compare",
            &io,
            &fp32,
            "--num-samples",
            "5",
            "--backend",
            backend,
            "--save-inputs",
            saved.to_str().unwrap(),
            "--json",
        ]);
        assert_close(&r, 5);
        // Drawn as A takes them (float16), widened exactly for B.
        assert_eq!(notes(&r), ["inputs converted float16 → float32 for B"]);
        let inputs = npz::load(&saved).unwrap();
        assert_eq!(inputs[0].elem_type(), ElemType::F16);
        assert_eq!(inputs[0].shape, [5, 3, 16, 16]);
    }
}

#[test]
fn layerwise_compares_the_float16_graph_with_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let (fp32, io) = fp32_and_io(dir.path());
    for backend in BACKENDS {
        let r = json(&[
            "compare",
            &io,
            &fp32,
            "--layerwise",
            "--num-samples",
            "3",
            "--backend",
            backend,
            "--json",
        ]);
        let inputs = r["inputs"].as_str().unwrap();
        assert!(
            inputs.ends_with("; inputs converted float32 → float16 for A"),
            "{inputs}"
        );
        assert!(r["first_divergence"].is_null(), "{r}");
        let logits = r["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "logits")
            .expect("the graph output is compared");
        assert!(logits["cosine"].as_f64().unwrap() > 0.9999, "{logits}");
    }
}

#[test]
fn run_times_the_float16_graph_on_float16_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let (_, io) = fp32_and_io(dir.path());
    for backend in BACKENDS {
        let r = json(&[
            "run",
            &io,
            "--backend",
            backend,
            "--batch-size",
            "1,3",
            "--iterations",
            "2",
            "--warmup",
            "0",
            "--json",
        ]);
        let results = r["results"].as_array().unwrap();
        assert_eq!(results.len(), 2, "{r}");
        assert!(results[1]["throughput"].as_f64().unwrap() > 0.0, "{r}");
    }
}

/// Three classes of noisy solid-colour JPEGs, three images each, under `root`.
fn images(root: &Path) -> PathBuf {
    for (c, rgb) in [[200, 30, 30], [30, 200, 30], [30, 30, 200]]
        .iter()
        .enumerate()
    {
        for i in 0..3u64 {
            let path = root.join(format!("{c}_class/img{i}.jpg"));
            write_jpeg(&path, 20 + 4 * i as usize, 18, *rgb, 10 * c as u64 + i);
        }
    }
    root.to_path_buf()
}

/// The top-1 column of a predictions CSV, by file.
fn top1s(csv: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut rows: Vec<(String, String)> = text
        .lines()
        .skip(1)
        .map(|l| {
            let cols: Vec<&str> = l.split(',').collect();
            (cols[0].to_string(), cols[2].to_string())
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn validate_feeds_the_float16_graph_images_and_scores_its_float16_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let (fp32, io) = fp32_and_io(dir.path());
    let data = images(&dir.path().join("val"));
    let data = data.to_str().unwrap();
    for backend in BACKENDS {
        let mut predictions = vec![];
        let mut reports = vec![];
        for (model, name) in [(&fp32, "fp32.csv"), (&io, "io.csv")] {
            let csv = dir.path().join(format!("{backend}-{name}"));
            reports.push(json(&[
                "validate",
                model,
                "--dataset",
                data,
                "--backend",
                backend,
                "--batch-size",
                "4",
                "--save-predictions",
                csv.to_str().unwrap(),
                "--json",
            ]));
            predictions.push(top1s(&csv));
        }
        let (wide, narrow) = (&reports[0], &reports[1]);
        assert_eq!(narrow["images"], 9, "{narrow}");
        assert_eq!(narrow["skipped"], 0, "{narrow}");
        assert_eq!(predictions[1].len(), 9);
        assert_eq!(predictions[0], predictions[1], "{backend}");
        assert_eq!(narrow["counts"], wide["counts"], "{backend}");
    }
}

#[test]
fn calibrate_refuses_the_float16_graph_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (_, io) = fp32_and_io(dir.path());
    let out = trtkit(&[
        "calibrate",
        &io,
        "--calib-data",
        "synthetic:1",
        "--num-samples",
        "4",
        "--batch-size",
        "2",
        "--cache-dir",
        dir.path().join("cal").to_str().unwrap(),
    ]);
    assert_clean_error(&out, 1, &["io.onnx", "input 'input' is float16", "float32"]);
}
