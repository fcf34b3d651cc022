//! A model ONNX Runtime refuses at the shapes asked for but opens with its axes free: its shape
//! inference checks a branch the inputs never take (Silero VAD's 8 kHz `If` branch has an LSTM
//! that, at a 16 kHz chunk's fixed size, gets an input of the wrong rank). trtkit then runs the
//! model with every input axis free, fed at the shapes asked for, and says so.
//!
//! Needs the `onnxruntime` Python package (CI installs it) or ORT_DYLIB_PATH.

mod support;

use support::{save, trtkit};
use trtkit::onnx::graph_builder::{tensor_f32, GraphBuilder};
use trtkit::onnx::pb::attribute_proto::AttributeType;
use trtkit::onnx::pb::tensor_proto::DataType;
use trtkit::onnx::pb::{AttributeProto, GraphProto, ModelProto};
use trtkit::tensor::Dim;

fn branch(name: &str, build: impl Fn(&mut GraphBuilder)) -> AttributeProto {
    let mut b = GraphBuilder::new(name);
    build(&mut b);
    let g: GraphProto = b.build().graph.unwrap();
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Graph as i32,
        g: Some(g),
        ..Default::default()
    }
}

/// `x` [N, 4] → `y` = x when sum(x) < 1e9 (always, on inputs in [0, 1)); the other branch
/// squeezes `x` and convolves it, which at a fixed N = 1 is a rank-1 input to a Conv: ONNX
/// Runtime's shape inference refuses it, though no input ever runs it.
fn dead_branch_model() -> ModelProto {
    let n = Dim::Symbol("N".into());
    let mut g = GraphBuilder::new("dead_branch");
    g.input("x", DataType::Float, &[n.clone(), Dim::Fixed(4)])
        .output("y", DataType::Float, &[n, Dim::Fixed(4)])
        .initializer(tensor_f32("huge", &[], &[1e9]))
        .node("ReduceSum", &["x"], &["total"], vec![])
        .node("Greater", &["total", "huge"], &["odd"], vec![])
        .node(
            "If",
            &["odd"],
            &["y"],
            vec![
                branch("then_branch", |b| {
                    b.output("conv", DataType::Float, &[])
                        .initializer(tensor_f32("w", &[1, 1, 1], &[1.0]))
                        .node("Squeeze", &["x"], &["flat"], vec![])
                        .node("Conv", &["flat", "w"], &["conv"], vec![]);
                }),
                branch("else_branch", |b| {
                    b.output("same", DataType::Float, &[]).node(
                        "Identity",
                        &["x"],
                        &["same"],
                        vec![],
                    );
                }),
            ],
        );
    g.build()
}

#[test]
fn a_model_refused_at_fixed_shapes_runs_with_its_axes_free_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let m = save(dir.path(), "dead.onnx", dead_branch_model());
    let m = m.to_str().unwrap();
    let out = trtkit(&[
        "compare",
        m,
        m,
        "--backend",
        "ort",
        "--num-samples",
        "3",
        "--batch-size",
        "1",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("refuses the model at the shapes asked for")
            && stderr.contains("every input axis left free"),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["outputs"][0]["closeness"]["equal_pct"], 100.0, "{v}");
}
