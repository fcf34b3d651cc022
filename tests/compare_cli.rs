//! `trtkit compare`: equal runs, saved outputs, gating, and every bad input it must refuse.

mod support;

use support::{assert_clean_error, save, trtkit};
use trtkit::data::npz;
use trtkit::onnx::graph_builder::GraphBuilder;
use trtkit::onnx::pb::tensor_proto::DataType;
use trtkit::onnx::test_models::classifier;
use trtkit::tensor::Dim;
use trtkit::tensor::{HostTensor, TensorData};

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The classifier with its first conv weight scaled: close to the original, not equal.
fn perturbed_classifier() -> trtkit::onnx::pb::ModelProto {
    let mut m = classifier(None);
    let g = m.graph.as_mut().unwrap();
    let w = g
        .initializer
        .iter_mut()
        .find(|t| t.name == "conv.weight")
        .unwrap();
    let vals: Vec<f32> = w
        .raw_data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()) * 1.05)
        .collect();
    w.raw_data = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    m
}

#[test]
fn a_model_equals_itself_with_full_tables() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "c.onnx", classifier(None));
    let m = m.to_str().unwrap();
    let out = trtkit(&["compare", m, m, "--num-inputs", "10", "--batch", "4"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("logits") && text.contains("100.00"), "{text}");
    assert!(
        text.contains("top-10 of 'logits'") && text.contains("top-1 agreement 100.00%"),
        "{text}"
    );
    let md = trtkit(&["compare", m, m, "--num-inputs", "3", "--markdown"]);
    assert!(String::from_utf8_lossy(&md.stdout).contains("| :--- |"));
    let v = json(&trtkit(&[
        "compare",
        m,
        m,
        "--num-inputs",
        "5",
        "--a-threads",
        "1",
        "--json",
    ]));
    let o = &v["outputs"][0];
    assert_eq!(o["closeness"]["equal_pct"], 100.0);
    assert_eq!(o["closeness"]["samples"], 5);
    assert_eq!(o["topk"]["ranks"].as_array().unwrap().len(), 10);
    assert_eq!(v["sides"][0]["samples"], 5);
}

#[test]
fn saved_outputs_compare_with_a_model_and_gate_on_fail_below() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "c.onnx", classifier(None));
    let p = save(dir.path(), "p.onnx", perturbed_classifier());
    let (m, p) = (m.to_str().unwrap(), p.to_str().unwrap());
    let saved = dir.path().join("out.npz");
    let inputs = dir.path().join("in.npz");
    let s = saved.to_str().unwrap();
    let out = trtkit(&[
        "compare",
        m,
        m,
        "--num-inputs",
        "6",
        "--seed",
        "3",
        "--save-outputs",
        s,
        "--save-inputs",
        inputs.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let arrays = npz::load(&saved).unwrap();
    assert_eq!(arrays[0].name, "logits");
    assert_eq!(arrays[0].shape, vec![6, 10]);
    // Same seed → same inputs → the saved outputs equal a fresh run.
    let v = json(&trtkit(&[
        "compare",
        m,
        s,
        "--num-inputs",
        "6",
        "--seed",
        "3",
        "--json",
    ]));
    assert_eq!(v["outputs"][0]["closeness"]["equal_pct"], 100.0);
    // Saved inputs replay the same.
    let v = json(&trtkit(&[
        "compare",
        s,
        m,
        "--inputs",
        inputs.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(v["outputs"][0]["closeness"]["equal_pct"], 100.0);
    // A perturbed model is close but not equal; --fail-below gates on it.
    let v = json(&trtkit(&["compare", p, m, "--num-inputs", "6", "--json"]));
    let eq = v["outputs"][0]["closeness"]["equal_pct"].as_f64().unwrap();
    assert!(eq < 100.0, "{eq}");
    assert!(
        v["outputs"][0]["closeness"]["max_abs_err"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    let out = trtkit(&["compare", p, m, "--num-inputs", "6", "--fail-below", "100"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("logits"));
    assert_clean_error(&out, 1, &["'logits'", "below --fail-below 100"]);
}

/// Saved outputs with one overflowed value (an Inf where the model gives a finite logit): the
/// cosine is NaN, not 1, and --fail-below fails the run however low its threshold.
#[test]
fn an_inf_in_saved_outputs_makes_the_cosine_nan_and_fails_fail_below() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "c.onnx", classifier(None));
    let m = m.to_str().unwrap();
    let saved = dir.path().join("out.npz");
    let s = saved.to_str().unwrap();
    let run = ["compare", m, m, "--num-inputs", "6", "--seed", "3"];
    assert!(trtkit(&[&run[..], &["--save-outputs", s]].concat())
        .status
        .success());
    let mut arrays = npz::load(&saved).unwrap();
    let TensorData::F32(values) = &mut arrays[0].data else {
        panic!("float32 logits expected");
    };
    values[7] = f32::INFINITY;
    npz::save(&saved, &arrays).unwrap();
    let with_inf = ["compare", m, s, "--num-inputs", "6", "--seed", "3"];
    let v = json(&trtkit(&[&with_inf[..], &["--json"]].concat()));
    let c = &v["outputs"][0]["closeness"];
    assert_eq!(c["cosine"], "NaN");
    assert_eq!(c["max_abs_err"], "inf");
    assert_eq!(c["inf_b"], 1);
    let table = trtkit(&with_inf);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("NaN") && !text.contains("1.000000"), "{text}");
    let out = trtkit(&[&with_inf[..], &["--fail-below", "50"]].concat());
    assert_clean_error(
        &out,
        1,
        &["'logits'", "cosine NaN", "below --fail-below 50"],
    );
}

#[test]
fn ort_and_tract_agree_on_the_classifier() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "c.onnx", classifier(None));
    let m = m.to_str().unwrap();
    let v = json(&trtkit(&[
        "compare",
        m,
        m,
        "--a-backend",
        "ort",
        "--b-backend",
        "tract",
        "--num-inputs",
        "8",
        "--fail-below",
        "99",
        "--json",
    ]));
    assert!(v["sides"][0]["backend"]
        .as_str()
        .unwrap()
        .starts_with("ort"));
    assert!(v["sides"][1]["backend"]
        .as_str()
        .unwrap()
        .starts_with("tract"));
    assert_eq!(v["outputs"][0]["topk"]["top1_agreement_pct"], 100.0);
}

#[test]
fn bad_inputs_fail_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "c.onnx", classifier(None));
    let ms = m.to_str().unwrap();
    // Shape mismatch between A and B.
    let wrong = dir.path().join("wrong.npz");
    let t = HostTensor::new("logits", vec![3, 10], TensorData::F32(vec![0.5; 30])).unwrap();
    npz::save(&wrong, &[t]).unwrap();
    let out = trtkit(&["compare", ms, wrong.to_str().unwrap(), "--num-inputs", "4"]);
    assert_clean_error(
        &out,
        1,
        &[
            "wrong.npz",
            "'logits' [3, 10]",
            "holds 3 samples",
            "the inputs 4",
        ],
    );
    // dtype mismatch.
    let ints = dir.path().join("ints.npz");
    let t = HostTensor::new("logits", vec![4, 10], TensorData::I64(vec![1; 40])).unwrap();
    npz::save(&ints, &[t]).unwrap();
    let out = trtkit(&["compare", ms, ints.to_str().unwrap(), "--num-inputs", "4"]);
    assert_clean_error(&out, 1, &["'logits'", "int64", "float32"]);
    // An .npz missing an input.
    let other = dir.path().join("other.npz");
    let t = HostTensor::new("image", vec![1, 3, 16, 16], TensorData::F32(vec![0.0; 768])).unwrap();
    npz::save(&other, &[t]).unwrap();
    let out = trtkit(&["compare", ms, ms, "--inputs", other.to_str().unwrap()]);
    assert_clean_error(&out, 1, &["other.npz", "'input'", "image"]);
    // A model whose input shape cannot be fixed (a symbolic non-batch axis).
    let mut g = GraphBuilder::new("free");
    let dims = [Dim::Symbol("n".into()), Dim::Symbol("width".into())];
    g.input("x", DataType::Float, &dims)
        .output("y", DataType::Float, &dims)
        .node("Relu", &["x"], &["y"], vec![]);
    let free = save(dir.path(), "free.onnx", g.build());
    let out = trtkit(&["compare", free.to_str().unwrap(), free.to_str().unwrap()]);
    assert_clean_error(&out, 1, &["'x'", "width", "--input-shape"]);
    // An op tract does not know: the op and the node are named.
    let mut g = GraphBuilder::new("odd");
    let dims = [Dim::Symbol("n".into()), Dim::Fixed(4)];
    g.input("x", DataType::Float, &dims)
        .output("y", DataType::Float, &dims)
        .node("FrobnicateTensor", &["x"], &["y"], vec![]);
    let odd = save(dir.path(), "odd.onnx", g.build());
    let out = trtkit(&["compare", odd.to_str().unwrap(), odd.to_str().unwrap()]);
    assert_clean_error(
        &out,
        1,
        &["odd.onnx", "FrobnicateTensor", "frobnicatetensor_0"],
    );
    // All-NaN outputs: sqrt of negative inputs. The tables print, then the run fails.
    let mut g = GraphBuilder::new("nan");
    let dims = [Dim::Symbol("n".into()), Dim::Fixed(4)];
    g.input("x", DataType::Float, &dims)
        .output("y", DataType::Float, &dims)
        .node("Sqrt", &["x"], &["y"], vec![]);
    let nan = save(dir.path(), "nan.onnx", g.build());
    let n = nan.to_str().unwrap();
    let out = trtkit(&["compare", n, n, "--range", "-2", "-1", "--num-inputs", "3"]);
    assert_clean_error(
        &out,
        1,
        &["nan.onnx: output 'y' of A is all NaN", "--layerwise"],
    );
    // CUDA where there is none, and a file that is neither a model nor outputs.
    if !std::path::Path::new("/dev/nvidia0").exists() {
        let out = trtkit(&["compare", ms, ms, "--a-device", "cuda", "--num-inputs", "2"]);
        assert_clean_error(&out, 1, &["--device cuda", "--device cpu"]);
    }
    let out = trtkit(&["compare", "model.txt", ms]);
    assert_clean_error(&out, 2, &["model.txt", ".onnx"]);
    if !std::path::Path::new("/dev/nvidia0").exists() {
        let out = trtkit(&[
            "compare",
            ms,
            ms,
            "--a-backend",
            "ort",
            "--a-device",
            "cuda",
        ]);
        assert_clean_error(&out, 1, &["ort-cuda", "needs an NVIDIA GPU"]);
    }
}

#[test]
fn the_flag_after_input_shape_stays_a_flag() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "c.onnx", classifier(None));
    let m = m.to_str().unwrap();
    let saved = dir.path().join("inputs.npz");
    // Named shapes, then another flag and its value: the flag is not taken for a third shape.
    let v = json(&trtkit(&[
        "compare",
        m,
        m,
        "--input-shape",
        "input:2x3x16x16",
        "--save-inputs",
        saved.to_str().unwrap(),
        "--range",
        "-1",
        "1",
        "--json",
    ]));
    assert_eq!(v["outputs"][0]["closeness"]["equal_pct"], 100.0);
    assert!(saved.is_file());
    // `-1` (a dynamic axis) is still a value of --input-shape.
    let out = trtkit(&[
        "compare",
        m,
        m,
        "--input-shape",
        "-1",
        "3",
        "16",
        "16",
        "--json",
    ]);
    json(&out);
}

#[test]
fn token_inputs_are_valid_ids_and_masks_and_tract_agrees_with_ort() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(
        dir.path(),
        "tok.onnx",
        trtkit::onnx::test_models::token_classifier(),
    );
    let m = m.to_str().unwrap();
    let saved = dir.path().join("in.npz");
    let v = json(&trtkit(&[
        "compare",
        m,
        m,
        "--input-shape",
        "input_ids:4x16",
        "attention_mask:4x16",
        "--a-backend",
        "tract",
        "--b-backend",
        "ort",
        "--save-inputs",
        saved.to_str().unwrap(),
        "--json",
    ]));
    let note = v["inputs"].as_str().unwrap();
    assert!(
        note.contains("input_ids: integers in [0, 50)")
            && note.contains("attention_mask: attention mask"),
        "{note}"
    );
    let o = &v["outputs"][0];
    assert!(o["closeness"]["equal_pct"].as_f64().unwrap() > 99.0, "{o}");
    assert_eq!(o["topk"]["top1_agreement_pct"], 100.0);
    let inputs = npz::load(&saved).unwrap();
    let ints = |name: &str| -> Vec<i64> {
        match &inputs.iter().find(|t| t.name == name).unwrap().data {
            TensorData::I64(v) => v.clone(),
            other => panic!("{name}: {other:?}"),
        }
    };
    let ids = ints("input_ids");
    let mut distinct = ids.clone();
    distinct.sort();
    distinct.dedup();
    assert!(
        distinct.len() > 2 && ids.iter().all(|v| (0..50).contains(v)),
        "{distinct:?}"
    );
    for row in ints("attention_mask").chunks(16) {
        let ones = row.iter().take_while(|&&v| v == 1).count();
        assert!(ones >= 8 && row[ones..].iter().all(|&v| v == 0), "{row:?}");
    }
    // --int-range wins over the graph.
    let v = json(&trtkit(&[
        "compare",
        m,
        m,
        "--input-shape",
        "input_ids:2x8",
        "attention_mask:2x8",
        "--int-range",
        "input_ids:3,5",
        "--save-inputs",
        saved.to_str().unwrap(),
        "--json",
    ]));
    assert!(v["inputs"]
        .as_str()
        .unwrap()
        .contains("input_ids: integers in [3, 5)"));
    let inputs = npz::load(&saved).unwrap();
    let ids = match &inputs.iter().find(|t| t.name == "input_ids").unwrap().data {
        TensorData::I64(v) => v.clone(),
        _ => unreachable!(),
    };
    assert!(ids.iter().all(|v| (3..5).contains(v)), "{ids:?}");
    let bad = trtkit(&["compare", m, m, "--int-range", "input_ids:5,3"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("NAME:LO,HI"));
}

#[test]
fn fp16_of_the_token_model_keeps_its_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(
        dir.path(),
        "tok.onnx",
        trtkit::onnx::test_models::token_classifier(),
    );
    let m = m.to_str().unwrap();
    let half = dir.path().join("tok16.onnx");
    let out = trtkit(&[
        "quantize",
        m,
        "--fp16",
        "-o",
        half.to_str().unwrap(),
        "--no-check",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 64 sequences of 32 tokens, padded at random; both sides on ONNX Runtime.
    let v = json(&trtkit(&[
        "compare",
        m,
        half.to_str().unwrap(),
        "--dim",
        "seq=32",
        "--batch-size",
        "64",
        "--backend",
        "ort",
        "--json",
    ]));
    let o = &v["outputs"][0];
    let cosine = o["closeness"]["cosine"].as_f64().unwrap();
    assert!(cosine >= 0.999, "{o}");
    assert_eq!(o["topk"]["top1_agreement_pct"], 100.0, "{o}");
}

/// Saved outputs say which inputs made them: compared with a run on other inputs (another
/// `--seed`), they are refused in one line naming the file; on the same inputs they compare.
#[test]
fn saved_outputs_of_other_inputs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "m.onnx", classifier(None));
    let m = m.to_str().unwrap();
    let saved = dir.path().join("out.npz");
    let s = saved.to_str().unwrap();
    let run = |extra: &[&str]| {
        let base = ["compare", s, m, "--num-samples", "3"];
        trtkit(&[&base[..], extra].concat())
    };
    let made = trtkit(&["compare", m, m, "--num-samples", "3", "--save-outputs", s]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let stored = npz::load(&saved).unwrap();
    assert!(stored.iter().any(|t| t.name == "trtkit.inputs"));
    let out = run(&["--seed", "1"]);
    assert_clean_error(&out, 1, &["out.npz", "other inputs", "seed 0", "seed 1"]);
    let same = run(&[]);
    assert!(
        same.status.success(),
        "{}",
        String::from_utf8_lossy(&same.stderr)
    );
}
