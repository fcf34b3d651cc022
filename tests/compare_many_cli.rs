//! `trtkit compare A B C …`: every side compared with the last, the reference, which runs once;
//! the two-side report per comparison, saved outputs, and the flags that apply to every
//! comparison or are refused.

mod support;

use serde_json::Value;
use support::{assert_clean_error, save, trtkit};
use trtkit::onnx::test_models::classifier;

fn json(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The classifier with its classifier bias shifted per class: same shape, other logits, and a
/// different top class for some samples.
fn shifted_classifier() -> trtkit::onnx::pb::ModelProto {
    let mut m = classifier(None);
    let g = m.graph.as_mut().unwrap();
    let bias = g
        .initializer
        .iter_mut()
        .find(|t| t.name == "fc.bias")
        .expect("the classifier has a bias for its Gemm");
    let shifted: Vec<u8> = bias
        .raw_data
        .chunks_exact(4)
        .enumerate()
        .flat_map(|(i, c)| {
            let v = f32::from_le_bytes(c.try_into().unwrap());
            (v + 0.05 * i as f32).to_le_bytes()
        })
        .collect();
    bias.raw_data = shifted;
    m
}

/// The closeness figures of a two-side report, without the timings.
fn figures(report: &Value) -> Value {
    report["outputs"].clone()
}

#[test]
fn each_side_is_compared_with_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let c = save(dir.path(), "c.onnx", classifier(None));
    let s = save(dir.path(), "s.onnx", shifted_classifier());
    let (c, s) = (c.to_str().unwrap(), s.to_str().unwrap());
    let common = ["--num-samples", "6", "--seed", "3", "--json"];
    let many = json(&trtkit(&[&["compare", s, c, c][..], &common].concat()));
    assert_eq!(many["reference"], "C");
    let comparisons = many["comparisons"].as_array().unwrap();
    assert_eq!(comparisons.len(), 2);
    let pairs: Vec<(&str, &str)> = comparisons
        .iter()
        .map(|r| {
            (
                r["sides"][0]["label"].as_str().unwrap(),
                r["sides"][1]["label"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(pairs, [("A", "C"), ("B", "C")]);
    // The shifted model differs from the reference, the model itself does not.
    let equal = |r: &Value| r["outputs"][0]["closeness"]["equal_pct"].as_f64().unwrap();
    assert!(equal(&comparisons[0]) < 100.0, "{}", comparisons[0]);
    assert_eq!(equal(&comparisons[1]), 100.0);
    // The reference ran once: both comparisons show the one run.
    assert_eq!(comparisons[0]["sides"][1], comparisons[1]["sides"][1]);
    // Each comparison is the two-side report `compare A C` prints.
    let two = json(&trtkit(&[&["compare", s, c][..], &common].concat()));
    assert_eq!(figures(&comparisons[0]), figures(&two));
    assert_eq!(comparisons[0]["inputs"], two["inputs"]);

    let text = trtkit(&["compare", s, c, c, "--num-samples", "6"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("A vs C (the reference)") && text.contains("B vs C (the reference)"),
        "{text}"
    );
    assert!(text.contains("isclose: |B - C|"), "{text}");
}

#[test]
fn fail_below_applies_to_every_comparison() {
    let dir = tempfile::tempdir().unwrap();
    let c = save(dir.path(), "c.onnx", classifier(None));
    let s = save(dir.path(), "s.onnx", shifted_classifier());
    let (c, s) = (c.to_str().unwrap(), s.to_str().unwrap());
    // A equals the reference; B, the second, is below the threshold.
    let out = trtkit(&[
        "compare",
        c,
        s,
        c,
        "--num-samples",
        "6",
        "--fail-below",
        "99",
        "--json",
    ]);
    assert_clean_error(&out, 1, &["B vs C", "below --fail-below 99"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["comparisons"].as_array().unwrap().len(), 2);
    let passes = trtkit(&[
        "compare",
        c,
        c,
        c,
        "--num-samples",
        "3",
        "--fail-below",
        "99",
    ]);
    assert!(passes.status.success());
}

#[test]
fn the_saved_reference_compares_as_the_live_one() {
    let dir = tempfile::tempdir().unwrap();
    let c = save(dir.path(), "c.onnx", classifier(None));
    let s = save(dir.path(), "s.onnx", shifted_classifier());
    let (c, s) = (c.to_str().unwrap(), s.to_str().unwrap());
    let reference = dir.path().join("reference.npz");
    let inputs = dir.path().join("inputs.npz");
    let live = json(&trtkit(&[
        "compare",
        s,
        c,
        c,
        "--num-samples",
        "5",
        "--save-reference",
        reference.to_str().unwrap(),
        "--save-inputs",
        inputs.to_str().unwrap(),
        "--json",
    ]));
    // The shifted model on the saved inputs against the saved reference outputs.
    let replayed = json(&trtkit(&[
        "compare",
        s,
        reference.to_str().unwrap(),
        "--inputs",
        inputs.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(replayed["sides"][1]["backend"], "saved outputs");
    assert_eq!(figures(&live["comparisons"][0]), figures(&replayed));
}

#[test]
fn save_outputs_names_one_side_and_is_refused_with_three() {
    let dir = tempfile::tempdir().unwrap();
    let c = save(dir.path(), "c.onnx", classifier(None));
    let c = c.to_str().unwrap();
    let out_file = dir.path().join("out.npz");
    let out = trtkit(&[
        "compare",
        c,
        c,
        c,
        "--save-outputs",
        out_file.to_str().unwrap(),
    ]);
    assert_clean_error(&out, 2, &["--save-outputs", "3 sides"]);
    assert!(!out_file.exists());
}
