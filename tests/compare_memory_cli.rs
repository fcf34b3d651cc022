//! `trtkit compare` holds one batch at a time: peak memory does not grow with `--num-samples`,
//! and the tensors it saves stream to their `.npz` files whole and in order.

mod support;

use std::path::Path;
use support::{save, trtkit};
use trtkit::data::npz;
use trtkit::onnx::graph_builder::GraphBuilder;
use trtkit::onnx::pb::tensor_proto::DataType;
use trtkit::onnx::pb::ModelProto;
use trtkit::tensor::Dim;

/// `x` [N, 8, 64, 64] → Relu → `y` of the same shape: 128 KiB in and out per sample.
fn wide_relu() -> ModelProto {
    let dims = [
        Dim::Symbol("N".into()),
        Dim::Fixed(8),
        Dim::Fixed(64),
        Dim::Fixed(64),
    ];
    let mut g = GraphBuilder::new("wide_relu");
    g.input("x", DataType::Float, &dims)
        .output("y", DataType::Float, &dims)
        .node("Relu", &["x"], &["y"], vec![]);
    g.build()
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = trtkit(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Peak RSS of `compare m m` over `samples` random samples, 32 at a time, and the report.
fn compare_peak(model: &str, samples: usize) -> (u64, serde_json::Value) {
    let n = samples.to_string();
    let v = json(&[
        "compare",
        model,
        model,
        "--backend",
        "tract",
        "--num-samples",
        &n,
        "--batch-size",
        "32",
        "--json",
    ]);
    let peak = v["peak_rss_bytes"].as_u64().expect("the report has a peak");
    (peak, v)
}

#[test]
fn peak_memory_does_not_grow_with_the_number_of_samples() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "relu.onnx", wide_relu());
    let m = m.to_str().unwrap();
    let (small, _) = compare_peak(m, 32);
    let (large, v) = compare_peak(m, 512);
    assert_eq!(v["sides"][0]["samples"], 512);
    assert_eq!(
        v["outputs"][0]["shape"],
        serde_json::json!([512, 8, 64, 64])
    );
    assert_eq!(v["outputs"][0]["closeness"]["equal_pct"], 100.0);
    // Kept whole, 512 samples would hold 64 MiB of inputs and 64 MiB per side's outputs (and
    // twice that again as float64 for the metrics): over 400 MiB more than 32 samples. What may
    // grow: the first side's outputs kept in memory before they go to a file (8 MiB), and the
    // allocator's slack over 16 batches instead of one (about 30 MiB seen).
    let grew = large.saturating_sub(small);
    assert!(
        grew < 96 << 20,
        "peak RSS grew by {} MiB from 32 to 512 samples ({small} → {large} bytes)",
        grew >> 20
    );
}

#[test]
fn saved_tensors_stream_whole_and_random_inputs_do_not_depend_on_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "relu.onnx", wide_relu());
    let m = m.to_str().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (inputs, a, b) = (path("in.npz"), path("a.npz"), path("b.npz"));
    let v = json(&[
        "compare",
        m,
        m,
        "--backend",
        "tract",
        "--num-samples",
        "40",
        "--batch-size",
        "16",
        "--save-inputs",
        &inputs,
        "--save-outputs",
        &a,
        "--save-reference",
        &b,
        "--json",
    ]);
    assert_eq!(v["sides"][1]["batch"], 16);
    let x = npz::load(inputs.as_ref()).unwrap();
    let (ya, yb) = (
        npz::load(a.as_ref()).unwrap(),
        npz::load(b.as_ref()).unwrap(),
    );
    assert_eq!(x[0].shape, [40, 8, 64, 64]);
    assert_eq!(ya, yb);
    // Relu of the saved inputs, sample by sample, in order.
    let relu: Vec<f64> = x[0].data.to_f64().iter().map(|v| v.max(0.0)).collect();
    assert_eq!(ya[0].data.to_f64(), relu);

    // The same seed at another batch size draws the same samples.
    let other = path("in7.npz");
    json(&[
        "compare",
        m,
        m,
        "--backend",
        "tract",
        "--num-samples",
        "40",
        "--batch-size",
        "7",
        "--save-inputs",
        &other,
        "--json",
    ]);
    assert_eq!(npz::load(other.as_ref()).unwrap(), x);

    // Saved outputs are cut into the same windows as the model's run.
    let v = json(&[
        "compare",
        m,
        &b,
        "--backend",
        "tract",
        "--inputs",
        &inputs,
        "--batch-size",
        "6",
        "--json",
    ]);
    assert_eq!(v["outputs"][0]["closeness"]["equal_pct"], 100.0);
    assert_eq!(v["outputs"][0]["shape"], serde_json::json!([40, 8, 64, 64]));
}

#[test]
fn saved_outputs_of_another_run_length_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "relu.onnx", wide_relu());
    let m = m.to_str().unwrap();
    let b = dir.path().join("b.npz");
    let b = b.to_str().unwrap();
    json(&[
        "compare",
        m,
        m,
        "--backend",
        "tract",
        "--num-samples",
        "5",
        "--save-reference",
        b,
        "--json",
    ]);
    // Stamped with its inputs, the archive is refused for them (5 samples drawn, 8 now)...
    let out = trtkit(&["compare", m, b, "--backend", "tract", "--num-samples", "8"]);
    support::assert_clean_error(&out, 1, &[b, "5 random samples", "8 random samples"]);
    // ...and without the stamp, as numpy would save it, for its length.
    let mut arrays = npz::load(Path::new(b)).unwrap();
    arrays.retain(|t| t.name != "trtkit.inputs");
    npz::save(Path::new(b), &arrays).unwrap();
    let out = trtkit(&["compare", m, b, "--backend", "tract", "--num-samples", "8"]);
    support::assert_clean_error(
        &out,
        1,
        &[
            b,
            "saved output 'y'",
            "holds 5 samples on axis 0, the inputs 8",
        ],
    );
}
