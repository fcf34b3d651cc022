//! FP16 computed as FP16 on the CPU backends: a float16 model on ONNX Runtime's CPU build or on
//! tract runs with every float16 tensor rounded to float16, so an overflow that FP16 hardware
//! shows shows here too; `--fp16-compute backend` keeps the backends' own widened float32.
//!
//! Needs the `onnxruntime` Python package (CI installs it) or ORT_DYLIB_PATH.

mod support;

use std::path::Path;
use support::{save, trtkit};
use trtkit::onnx::graph_builder::{tensor_f32, GraphBuilder};
use trtkit::onnx::pb::tensor_proto::DataType;
use trtkit::onnx::pb::ModelProto;
use trtkit::onnx::test_models::deterministic_weights;
use trtkit::tensor::Dim;

const WIDTH: usize = 64;
const CLASSES: usize = 8;

/// x [N,64] → MatMul → Add → Mul by 1e-3 → Relu → MatMul → out [N,8]. With `planted`, the first
/// MatMul's first column weighs 2800 throughout: on inputs in [0, 1) it reaches ~9e4, past FP16's
/// 65504, and FP16 holds infinity there (and every output after it); in float32 the Mul brings it
/// back to ~90.
fn planted(planted: bool) -> ModelProto {
    let mut w1 = deterministic_weights(1, WIDTH * WIDTH, 0.1);
    if planted {
        for row in 0..WIDTH {
            w1[row * WIDTH] = 2800.0;
        }
    }
    let n = Dim::Symbol("batch".into());
    let (w, c) = (WIDTH as i64, CLASSES as i64);
    let mut g = GraphBuilder::new("planted_overflow");
    g.input("x", DataType::Float, &[n.clone(), Dim::Fixed(w)])
        .output("out", DataType::Float, &[n, Dim::Fixed(c)])
        .initializer(tensor_f32("w1", &[w, w], &w1))
        .initializer(tensor_f32(
            "b1",
            &[w],
            &deterministic_weights(2, WIDTH, 0.1),
        ))
        .initializer(tensor_f32("scale", &[], &[1e-3]))
        .initializer(tensor_f32(
            "w2",
            &[w, c],
            &deterministic_weights(3, WIDTH * CLASSES, 0.5),
        ))
        .node("MatMul", &["x", "w1"], &["mm1"], vec![])
        .node("Add", &["mm1", "b1"], &["add1"], vec![])
        .node("Mul", &["add1", "scale"], &["scaled"], vec![])
        .node("Relu", &["scaled"], &["relu"], vec![])
        .node("MatMul", &["relu", "w2"], &["out"], vec![]);
    g.build()
}

/// The FP32 model and its FP16 rewrite by `trtkit quantize --fp16`, under `dir`.
fn fp32_and_fp16(dir: &Path, overflow: bool) -> (String, String) {
    let fp32 = save(dir, "fp32.onnx", planted(overflow));
    let fp16 = dir.join("fp16.onnx");
    let out = trtkit(&[
        "quantize",
        fp32.to_str().unwrap(),
        "--fp16",
        "-o",
        fp16.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "quantize --fp16: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        fp16.to_str().unwrap().to_string(),
        fp32.to_str().unwrap().to_string(),
    )
}

/// What `compare fp16 fp32` says.
struct Compared {
    /// Side A's backend, as the report names it.
    backend: String,
    /// The output's cosine (NaN when one side holds Inf or NaN).
    cosine: f64,
    /// Infinities and NaNs in side A's output.
    non_finite: u64,
    /// Whether `--fail-below 99` failed the run (exit 1).
    failed: bool,
}

/// `compare fp16 fp32` with `extra` flags.
fn compare(fp16: &str, fp32: &str, extra: &[&str]) -> Compared {
    let base = ["compare", fp16, fp32, "--num-inputs", "8"];
    let out = trtkit(&[&base[..], extra, &["--json"]].concat());
    assert!(
        out.status.success(),
        "compare: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let backend = v["sides"][0]["backend"].as_str().unwrap().to_string();
    let c = &v["outputs"][0]["closeness"];
    let cosine = c["cosine"].as_f64().unwrap_or(f64::NAN);
    let non_finite = c["inf_a"].as_u64().unwrap() + c["nan_a"].as_u64().unwrap();
    let gated = trtkit(&[&base[..], extra, &["--fail-below", "99"]].concat());
    let failed = gated.status.code() == Some(1);
    assert!(
        failed || gated.status.success(),
        "compare --fail-below: {}",
        String::from_utf8_lossy(&gated.stderr)
    );
    Compared {
        backend,
        cosine,
        non_finite,
        failed,
    }
}

#[test]
fn the_planted_overflow_shows_on_ort_cpu_and_on_tract() {
    let dir = tempfile::tempdir().unwrap();
    let (fp16, fp32) = fp32_and_fp16(dir.path(), true);
    for backend in ["ort", "tract"] {
        let c = compare(&fp16, &fp32, &["--backend", backend]);
        assert!(
            c.backend.ends_with(", fp16 emulated"),
            "{backend}: {}",
            c.backend
        );
        assert!(c.non_finite > 0, "{backend}: no Inf or NaN");
        assert!(c.cosine.is_nan(), "{backend}: cosine {}", c.cosine);
        assert!(c.failed, "{backend}: --fail-below 99 passed");
    }
    // The default CPU backend (ONNX Runtime where it is installed) emulates too.
    let c = compare(&fp16, &fp32, &[]);
    assert!(c.backend.ends_with(", fp16 emulated"), "{}", c.backend);
    assert!(c.non_finite > 0 && c.failed, "default: cosine {}", c.cosine);
}

#[test]
fn the_backends_own_float16_widens_and_hides_the_overflow() {
    // Why the emulation is the default: ONNX Runtime's CPU build computes the FP16 graph in
    // float32 and compares as the FP32 model does, where FP16 hardware gives infinity.
    let dir = tempfile::tempdir().unwrap();
    let (fp16, fp32) = fp32_and_fp16(dir.path(), true);
    let c = compare(
        &fp16,
        &fp32,
        &["--backend", "ort", "--fp16-compute", "backend"],
    );
    assert_eq!(c.backend, "ort-cpu");
    assert_eq!(c.non_finite, 0);
    assert!(c.cosine > 0.9999, "cosine {}", c.cosine);
}

#[test]
fn emulated_fp16_of_a_model_that_does_not_overflow_stays_close() {
    let dir = tempfile::tempdir().unwrap();
    let (fp16, fp32) = fp32_and_fp16(dir.path(), false);
    for backend in ["ort", "tract"] {
        let c = compare(&fp16, &fp32, &["--backend", backend]);
        assert!(
            c.backend.ends_with(", fp16 emulated"),
            "{backend}: {}",
            c.backend
        );
        assert_eq!(c.non_finite, 0, "{backend}");
        assert!(c.cosine > 0.999, "{backend}: cosine {}", c.cosine);
    }
    // Both backends round the same tensors: their emulated runs agree with each other.
    let c = compare(
        &fp16,
        &fp16,
        &["--a-backend", "ort", "--b-backend", "tract"],
    );
    assert_eq!(c.backend, "ort-cpu, fp16 emulated");
    assert!(c.cosine > 0.9999, "ort vs tract: cosine {}", c.cosine);
    // The FP32 model computes nothing in float16: its backend is named as always.
    let c = compare(&fp32, &fp32, &["--backend", "ort"]);
    assert_eq!(c.backend, "ort-cpu");
}

/// [`planted`] computed inside both branches of an `If` on a boolean input: the branches read
/// `x` and the weights from the main graph, and name their own values apart.
fn planted_in_if(planted_weight: bool) -> ModelProto {
    use trtkit::onnx::pb::attribute_proto::AttributeType;
    use trtkit::onnx::pb::AttributeProto;
    let plain = planted(planted_weight).graph.unwrap();
    let branch = |name: &str| {
        let mut g = plain.clone();
        g.name = name.into();
        g.input.clear();
        let outer: Vec<String> = g.initializer.drain(..).map(|t| t.name).collect();
        for node in g.node.iter_mut() {
            for v in node.input.iter_mut().chain(node.output.iter_mut()) {
                if v != "x" && !outer.contains(v) {
                    *v = format!("{name}_{v}");
                }
            }
        }
        g.output[0].name = format!("{name}_out");
        AttributeProto {
            name: name.into(),
            r#type: AttributeType::Graph as i32,
            g: Some(g),
            ..Default::default()
        }
    };
    let mut model = planted(planted_weight);
    let g = model.graph.as_mut().unwrap();
    let mut flag = GraphBuilder::new("flag");
    flag.input("use_then", DataType::Bool, &[]);
    g.input.extend(flag.build().graph.unwrap().input);
    g.node = vec![trtkit::onnx::pb::NodeProto {
        name: "choose".into(),
        op_type: "If".into(),
        input: vec!["use_then".into()],
        output: vec!["out".into()],
        attribute: vec![branch("then_branch"), branch("else_branch")],
        ..Default::default()
    }];
    model
}

/// The FP16 rewrite converts inside an `If`'s branches, and the emulation rounds there too: the
/// overflow planted in the branches shows, and without it the FP16 model stays close.
#[test]
fn fp16_inside_an_if_is_converted_and_emulated() {
    let dir = tempfile::tempdir().unwrap();
    for overflow in [true, false] {
        let fp32 = save(dir.path(), "if32.onnx", planted_in_if(overflow));
        let fp16 = dir.path().join("if16.onnx");
        let (fp32, fp16) = (fp32.to_str().unwrap(), fp16.to_str().unwrap());
        let out = trtkit(&["quantize", fp32, "--fp16", "-o", fp16]);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The four weights the branches read from the main graph became float16.
        assert!(said.contains("4 initializers converted"), "{said}");
        let c = compare(fp16, fp32, &["--backend", "ort"]);
        assert_eq!(c.backend, "ort-cpu, fp16 emulated");
        if overflow {
            assert!(c.non_finite > 0 && c.failed, "cosine {}", c.cosine);
        } else {
            assert_eq!(c.non_finite, 0);
            assert!(c.cosine > 0.999, "cosine {}", c.cosine);
        }
    }
}
