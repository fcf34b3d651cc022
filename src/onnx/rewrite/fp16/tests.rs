use super::*;
use crate::onnx::test_models;

#[test]
fn classifier_becomes_fp16_with_fp32_io() {
    let m = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
    let (f, r) = match Fp16::default().run(m).unwrap() {
        (f, PassReport::Fp16(r)) => (f, r),
        other => panic!("{other:?}"),
    };
    let types = infer_elem_types(f.graph());
    assert_eq!(types["input"], DataType::Float);
    assert_eq!(types["logits"], DataType::Float);
    assert_eq!(types["conv_out"], DataType::Float16);
    assert_eq!(types["flatten.shape"], DataType::Int64);
    assert_eq!(r.casts, 2);
    assert_eq!(r.converted_initializers, 8);
    let err = Fp16::default().run(f).unwrap_err();
    assert!(err.to_string().contains("already FP16"), "{err}");
}

#[test]
fn out_of_range_weights_are_clamped_and_named() {
    let mut p = test_models::classifier(None);
    let g = p.graph.as_mut().unwrap();
    let w = g
        .initializer
        .iter_mut()
        .find(|t| t.name == "fc.bias")
        .unwrap();
    w.raw_data[0..4].copy_from_slice(&1e6f32.to_le_bytes());
    let m = OnnxModel::from_proto(p, "c.onnx");
    let (_, r) = to_fp16(m, &Fp16Options::default()).unwrap();
    assert_eq!(r.clamped, vec!["fc.bias".to_string()]);
}

#[test]
fn range_stays_float32_whatever_the_keep_list() {
    use crate::onnx::graph_builder::{tensor_f32, GraphBuilder};
    use crate::tensor::Dim;
    let mut g = GraphBuilder::new("range");
    g.input("x", DataType::Float, &[Dim::Fixed(2), Dim::Fixed(4)])
        .output("y", DataType::Float, &[Dim::Fixed(2), Dim::Fixed(4)])
        .initializer(tensor_f32("start", &[], &[0.0]))
        .initializer(tensor_f32("limit", &[], &[4.0]))
        .initializer(tensor_f32("delta", &[], &[1.0]))
        .node("Range", &["start", "limit", "delta"], &["grid"], vec![])
        .node("Add", &["x", "grid"], &["y"], vec![]);
    let options = Fp16Options {
        keep_fp32: vec![],
        ..Default::default()
    };
    let (f, _) = to_fp16(OnnxModel::from_proto(g.build(), "r.onnx"), &options).unwrap();
    let types = infer_elem_types(f.graph());
    assert_eq!(types["start"], DataType::Float);
    assert_eq!(types["grid"], DataType::Float);
    let add = f.graph().node.iter().find(|n| n.op_type == "Add").unwrap();
    assert!(
        add.input.iter().all(|i| types[i] == DataType::Float16),
        "{add:?}"
    );
}

/// The classifier at 32×32 with an Add of a [1, 3, 32, 32] float32 map (12 KiB) before its
/// convolution: a weight the FP16 rewrite converts without reading it first.
fn classifier_with_input_map() -> crate::onnx::pb::ModelProto {
    let mut m = test_models::classifier_sized(None, 32);
    let g = m.graph.as_mut().unwrap();
    let map = test_models::deterministic_weights(9, 3 * 32 * 32, 0.5);
    g.initializer.push(crate::onnx::graph_builder::tensor_f32(
        "input_map",
        &[1, 3, 32, 32],
        &map,
    ));
    for n in g.node.iter_mut() {
        for i in n.input.iter_mut().filter(|i| *i == "input") {
            *i = "input_mapped".into();
        }
    }
    g.node.insert(
        0,
        NodeProto {
            name: "map".into(),
            op_type: "Add".into(),
            input: vec!["input".into(), "input_map".into()],
            output: vec!["input_mapped".into()],
            ..Default::default()
        },
    );
    m
}

#[test]
fn weights_converted_straight_from_the_file_equal_the_usual_rewrite() {
    use crate::onnx::deferred_weights::decode_deferring;
    use prost::Message;
    let proto = classifier_with_input_map();
    let bytes = proto.encode_to_vec();
    let (lazy, deferred) = decode_deferring(&bytes).unwrap();
    // The map (12 KiB) and the Gemm's weights (80 KiB, put back first) are left in the file.
    assert_eq!(deferred.bytes(), (3 * 32 * 32 + 10 * 8 * 16 * 16) * 4);
    let options = Fp16Options::default();
    let (direct, direct_report) = to_fp16_deferred(
        OnnxModel::from_proto(lazy, "c.onnx"),
        &options,
        deferred,
        &bytes,
    )
    .unwrap();
    let (usual, usual_report) = to_fp16(OnnxModel::from_proto(proto, "c.onnx"), &options).unwrap();
    assert_eq!(direct.proto, usual.proto);
    assert_eq!(direct_report, usual_report);
    let map = direct
        .graph()
        .initializer
        .iter()
        .find(|t| t.name == "input_map")
        .unwrap();
    assert_eq!(map.data_type, DataType::Float16 as i32);
    assert_eq!(map.raw_data.len(), 3 * 32 * 32 * 2);
}

/// `y = Loop(3 times, v ← v · w)(x)`, the body reading the weight `w` from the main graph.
fn scaling_loop() -> crate::onnx::pb::ModelProto {
    use crate::onnx::graph_builder::{tensor_f32, GraphBuilder};
    use crate::onnx::pb::attribute_proto::AttributeType;
    use crate::onnx::pb::{AttributeProto, TensorProto};
    use crate::tensor::Dim;
    let four = [Dim::Fixed(4)];
    let mut body = GraphBuilder::new("body");
    body.input("i", DataType::Int64, &[])
        .input("go", DataType::Bool, &[])
        .input("v", DataType::Float, &four)
        .output("go_on", DataType::Bool, &[])
        .output("v_next", DataType::Float, &four)
        .node("Identity", &["go"], &["go_on"], vec![])
        .node("Mul", &["v", "w"], &["v_next"], vec![]);
    let trips = TensorProto {
        name: "trips".into(),
        data_type: DataType::Int64 as i32,
        int64_data: vec![3],
        ..Default::default()
    };
    let mut g = GraphBuilder::new("looped");
    g.input("x", DataType::Float, &four)
        .output("y", DataType::Float, &four)
        .initializer(tensor_f32("w", &[4], &[0.5, 1.0, 2.0, 4.0]))
        .initializer(trips)
        .node(
            "Loop",
            &["trips", "", "x"],
            &["y"],
            vec![AttributeProto {
                name: "body".into(),
                r#type: AttributeType::Graph as i32,
                g: body.build().graph,
                ..Default::default()
            }],
        );
    g.build()
}

#[test]
fn a_loop_body_computes_in_fp16_behind_float32_boundaries() {
    let m = OnnxModel::from_proto(scaling_loop(), "loop.onnx");
    let (f, r) = to_fp16(m, &Fp16Options::default()).unwrap();
    let main = infer_elem_types(f.graph());
    // The weight only the body reads is converted; the loop's own boundary stays float32.
    assert_eq!(main["w"], DataType::Float16);
    assert_eq!(main["y"], DataType::Float);
    assert_eq!(r.converted_initializers, 1);
    let body = f.graph().node[0].attribute[0].g.as_ref().unwrap();
    let inside = super::super::types::infer_elem_types_within(body, &main);
    let mul = body.node.iter().find(|n| n.op_type == "Mul").unwrap();
    assert_eq!(inside[&mul.input[0]], DataType::Float16);
    assert_eq!(inside[&mul.input[1]], DataType::Float16);
    assert_eq!(inside[&mul.output[0]], DataType::Float16);
    // What the body hands back is a float32 cast of it, matched by position.
    let handed_back = &body.output[1].name;
    assert_ne!(handed_back, &mul.output[0]);
    assert_eq!(inside[handed_back], DataType::Float);
    assert_eq!(inside[&body.input[2].name], DataType::Float);
}
