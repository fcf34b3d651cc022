use super::*;
use crate::onnx::graph_builder::{attr_int, GraphBuilder};
use crate::onnx::pb::ModelProto;
use crate::onnx::test_models;
use crate::tensor::Dim;
use tract_onnx::prelude::*;

fn tensor_f16(name: &str, values: &[f32]) -> TensorProto {
    let mut t = crate::onnx::graph_builder::tensor_f32(name, &[values.len() as i64], values);
    let h: Vec<f16> = values.iter().map(|&v| f16::from_f32(v)).collect();
    super::super::initializer::set_f16(&mut t, &h);
    t
}

/// x (float32) → Cast to float16 → Mul by k (float16) → m → Add the float16 input z → y
/// (a float16 output, also read) → Cast to float32 → y32.
fn tiny(k: &[f32]) -> ModelProto {
    let n = Dim::Fixed(k.len() as i64);
    let mut b = GraphBuilder::new("tiny");
    b.input("x", DataType::Float, std::slice::from_ref(&n))
        .input("z", DataType::Float16, std::slice::from_ref(&n))
        .output("y", DataType::Float16, std::slice::from_ref(&n))
        .output("y32", DataType::Float, std::slice::from_ref(&n))
        .initializer(tensor_f16("k", k))
        .node(
            "Cast",
            &["x"],
            &["xh"],
            vec![attr_int("to", DataType::Float16 as i64)],
        )
        .node("Mul", &["xh", "k"], &["m"], vec![])
        .node("Add", &["m", "z"], &["y"], vec![])
        .node(
            "Cast",
            &["y"],
            &["y32"],
            vec![attr_int("to", DataType::Float as i64)],
        );
    b.build()
}

/// Runs `proto` on tract (CPU) with float32 `x` and float16 zeros for `z`; returns `y` and `y32`
/// as float32.
fn run_tiny(proto: &ModelProto, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let plan = tract_onnx::onnx()
        .with_ignore_value_info(true)
        .parse(proto, None)
        .unwrap()
        .model
        .into_optimized()
        .unwrap()
        .into_runnable()
        .unwrap();
    let xt = Tensor::from_shape(&[x.len()], x).unwrap();
    let zt = Tensor::from_shape(&[x.len()], &vec![f16::ZERO; x.len()]).unwrap();
    let out = plan.run(tvec!(xt.into(), zt.into())).unwrap();
    let y: Vec<f32> = out[0]
        .try_as_plain_ram()
        .unwrap()
        .as_slice::<f16>()
        .unwrap()
        .iter()
        .map(|h| h.to_f32())
        .collect();
    let y32 = out[1]
        .try_as_plain_ram()
        .unwrap()
        .as_slice::<f32>()
        .unwrap()
        .to_vec();
    (y, y32)
}

/// What float16 holds for `v`.
fn as_f16(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}

#[test]
fn every_float16_tensor_holds_what_float16_would() {
    let x = [7000.0, 1e-4, 1e-3, 1.0007, -7000.0];
    let k = [10.0, 1e-4, 1e-2, 1.0, 10.0];
    let m = OnnxModel::from_proto(tiny(&k), "tiny.onnx");
    assert!(has_float16_compute(&m));
    let (e, report) = match Fp16Emulation.run(m).unwrap() {
        (e, PassReport::Fp16Emulation(r)) => (e, r),
        other => panic!("{other:?}"),
    };
    assert_eq!(report.converted_initializers, 1);
    assert_eq!(report.rounded, 3, "{report:?}");
    let (y, y32) = run_tiny(&e.proto, &x);
    let want: Vec<f32> = x
        .iter()
        .zip(&k)
        .map(|(&a, &b)| as_f16(as_f16(a) * as_f16(b)))
        .collect();
    // 70000 is past float16's 65504: infinity, with its sign.
    assert_eq!(y[0], f32::INFINITY);
    assert_eq!(y[4], f32::NEG_INFINITY);
    // 1e-8 is below half of float16's smallest subnormal (5.96e-8): zero.
    assert_eq!(y[1], 0.0);
    // 1e-5 is a float16 subnormal: a multiple of 2^-24, not 1e-5 itself.
    assert_eq!(y[2], want[2]);
    assert!(y[2] != 1e-5 && y[2] > 0.0 && y[2] < 6.1e-5, "{}", y[2]);
    assert_eq!(y[2] / 2f32.powi(-24), (y[2] / 2f32.powi(-24)).round());
    // 1.0007 rounds to float16's nearest: 1 + 2^-10.
    assert_eq!(y[3], 1.0 + 2f32.powi(-10));
    assert_eq!(y, want);
    assert_eq!(y32, want);
}

/// x (float32) → Cast to float16 → Mul by k → m → Mul by s → q → Cast to float32 → out: `m` is
/// float16 only inside the graph.
fn chained(k: &[f32], s: &[f32]) -> ModelProto {
    let n = [Dim::Fixed(k.len() as i64)];
    let mut b = GraphBuilder::new("chained");
    b.input("x", DataType::Float, &n)
        .output("out", DataType::Float, &n)
        .initializer(tensor_f16("k", k))
        .initializer(tensor_f16("s", s))
        .node(
            "Cast",
            &["x"],
            &["xh"],
            vec![attr_int("to", DataType::Float16 as i64)],
        )
        .node("Mul", &["xh", "k"], &["m"], vec![])
        .node("Mul", &["m", "s"], &["q"], vec![])
        .node(
            "Cast",
            &["q"],
            &["out"],
            vec![attr_int("to", DataType::Float as i64)],
        );
    b.build()
}

#[test]
fn a_rounding_inside_the_graph_reaches_the_output_on_tract() {
    // 7000 × 10 overflows float16 in `m`: infinity, whatever the 1e-3 after it; 1e-3 × 3e-4 is a
    // float16 subnormal in `m` (3e-7 held as 5 × 2^-24), which the 1000 after it makes visible.
    let x = [7000.0f32, 1e-3, 1.0];
    let k = [10.0, 3e-4, 1.0];
    let s = [1e-3, 1e3, 1.0];
    let e = emulate_fp16(OnnxModel::from_proto(chained(&k, &s), "c.onnx")).unwrap();
    let plan = tract_onnx::onnx()
        .with_ignore_value_info(true)
        .parse(&e.proto, None)
        .unwrap()
        .model
        .into_optimized()
        .unwrap()
        .into_runnable()
        .unwrap();
    let out = plan
        .run(tvec!(Tensor::from_shape(&[3], &x).unwrap().into()))
        .unwrap();
    let out = out[0]
        .try_as_plain_ram()
        .unwrap()
        .as_slice::<f32>()
        .unwrap()
        .to_vec();
    assert_eq!(out[0], f32::INFINITY);
    let m1 = as_f16(as_f16(1e-3) * as_f16(3e-4));
    assert_eq!(out[1], as_f16(m1 * as_f16(1e3)));
    let widened = as_f16(as_f16(1e-3) * as_f16(3e-4) * as_f16(1e3));
    assert_ne!(out[1], widened, "the subnormal was not rounded");
    assert_eq!(out[2], 1.0);
}

#[test]
fn names_and_io_types_are_kept() {
    let before = tiny(&[1.0, 2.0]);
    let e = emulate_fp16(OnnxModel::from_proto(before.clone(), "tiny.onnx")).unwrap();
    let g = e.graph();
    let io = |vs: &[crate::onnx::pb::ValueInfoProto]| -> Vec<(String, Option<DataType>)> {
        vs.iter()
            .map(|v| (v.name.clone(), declared_type(v)))
            .collect()
    };
    let bg = before.graph.as_ref().unwrap();
    assert_eq!(io(&g.input), io(&bg.input));
    assert_eq!(io(&g.output), io(&bg.output));
    let made: HashSet<&str> = g
        .node
        .iter()
        .flat_map(|n| n.output.iter().map(String::as_str))
        .collect();
    for name in bg.node.iter().flat_map(|n| &n.output) {
        assert!(made.contains(name.as_str()), "'{name}' is gone");
    }
    let types = infer_elem_types(g);
    // Inside, every tensor the float16 graph held is float32, rounded under its own name.
    assert_eq!(types["xh"], DataType::Float);
    assert_eq!(types["m"], DataType::Float);
    assert_eq!(types["k"], DataType::Float);
    assert_eq!(types["y"], DataType::Float16);
    let m_maker = g.node.iter().find(|n| n.output[0] == "m").unwrap();
    assert_eq!(m_maker.op_type, "Cast");
    let mul = g.node.iter().find(|n| n.op_type == "Mul").unwrap();
    assert!(
        mul.input.iter().all(|i| types[i] == DataType::Float),
        "{mul:?}"
    );
    // The float16 input is read through a cast to float32.
    let add = g.node.iter().find(|n| n.op_type == "Add").unwrap();
    assert_eq!(types[&add.input[1]], DataType::Float);
    // No cast is named as ONNX Runtime names the casts it may remove.
    assert!(g
        .node
        .iter()
        .all(|n| !n.name.starts_with("InsertedPrecisionFreeCast_")));
}

#[test]
fn float32_models_are_left_as_they_are_and_twice_is_harmless() {
    let m = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
    assert!(!has_float16_compute(&m));
    let out = emulate_fp16(m.clone()).unwrap();
    assert_eq!(out.proto, m.proto);
    let once = emulate_fp16(OnnxModel::from_proto(tiny(&[10.0]), "t.onnx")).unwrap();
    assert!(has_float16_compute(&once), "its float16 I/O stays");
    let twice = emulate_fp16(once.clone()).unwrap();
    let x = [7000.0f32];
    assert_eq!(run_tiny(&twice.proto, &x), run_tiny(&once.proto, &x));
}

#[test]
fn constants_dtypes_and_subgraphs() {
    let mut b = GraphBuilder::new("c");
    let mut value = tensor_f16("", &[0.5, 3.0]);
    value.name.clear();
    b.input("x", DataType::Float, &[Dim::Fixed(2)])
        .output("y", DataType::Float, &[Dim::Fixed(2)])
        .node(
            "Constant",
            &[],
            &["c"],
            vec![crate::onnx::pb::AttributeProto {
                name: "value".into(),
                r#type: crate::onnx::pb::attribute_proto::AttributeType::Tensor as i32,
                t: Some(value),
                ..Default::default()
            }],
        )
        .node(
            "EyeLike",
            &["x"],
            &["eye"],
            vec![attr_int("dtype", DataType::Float16 as i64)],
        )
        .node(
            "Cast",
            &["c"],
            &["y"],
            vec![attr_int("to", DataType::Float as i64)],
        );
    let e = emulate_fp16(OnnxModel::from_proto(b.build(), "c.onnx")).unwrap();
    let types = infer_elem_types(e.graph());
    assert_eq!(types["c"], DataType::Float);
    assert_eq!(types["eye"], DataType::Float);
    let c = e
        .graph()
        .node
        .iter()
        .find(|n| n.op_type == "Constant")
        .unwrap();
    let t = c.attribute[0].t.as_ref().unwrap();
    assert_eq!(
        super::super::initializer::read_f32(t).unwrap(),
        vec![0.5, 3.0]
    );

    // An If whose branch reads the float16 `xh` from around it and makes a float16 value: the
    // branch's output becomes float32, and it reads `xh`, which holds float32 now.
    let mut with_if = tiny(&[1.0]);
    let mut branch = GraphBuilder::new("then_branch");
    branch
        .output("w_branch", DataType::Float16, &[Dim::Fixed(1)])
        .node("Neg", &["xh"], &["w_branch"], vec![]);
    let branch = branch.build().graph.unwrap();
    with_if.graph.as_mut().unwrap().node.push(NodeProto {
        name: "branch".into(),
        op_type: "If".into(),
        input: vec!["cond".into()],
        output: vec!["w".into()],
        attribute: vec![crate::onnx::pb::AttributeProto {
            name: "then_branch".into(),
            g: Some(branch),
            ..Default::default()
        }],
        ..Default::default()
    });
    let e = emulate_fp16(OnnxModel::from_proto(with_if, "if.onnx")).unwrap();
    let node = e.graph().node.iter().find(|n| n.op_type == "If").unwrap();
    let sub = node.attribute[0].g.as_ref().unwrap();
    assert_eq!(
        declared_type(&sub.output[0]),
        Some(DataType::Float),
        "{:?}",
        sub.output
    );
    let outside = infer_elem_types(e.graph());
    assert_eq!(outside["xh"], DataType::Float);
    let inside = super::super::types::infer_elem_types_within(sub, &outside);
    let neg = sub.node.iter().find(|n| n.op_type == "Neg").unwrap();
    assert_eq!(inside[&neg.input[0]], DataType::Float);
    assert_eq!(inside[&sub.output[0].name], DataType::Float);
    // The branch still rounds its own value to float16 on the way.
    assert!(sub.node.iter().any(|n| n.op_type == "Cast"));
}
