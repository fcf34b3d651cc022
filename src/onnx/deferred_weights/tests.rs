use super::*;
use crate::onnx::graph_builder::{tensor_f32, tensor_i64};
use crate::onnx::pb::{NodeProto, OperatorSetIdProto, TensorProto};
use proptest::prelude::*;

fn model_with(initializers: Vec<TensorProto>) -> ModelProto {
    ModelProto {
        ir_version: 8,
        producer_name: "test".into(),
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            name: "g".into(),
            node: vec![NodeProto {
                op_type: "Identity".into(),
                input: vec!["x".into()],
                output: vec!["y".into()],
                ..Default::default()
            }],
            initializer: initializers,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn floats(n: usize, seed: f32) -> Vec<f32> {
    (0..n).map(|i| (i as f32 * 0.37 + seed).sin()).collect()
}

/// Large and small float32 tensors, an int64 one and one held as float_data (not raw).
fn mixed_model() -> ModelProto {
    let mut listed = tensor_f32("listed", &[2048], &floats(2048, 3.0));
    listed.float_data = floats(2048, 3.0);
    listed.raw_data.clear();
    model_with(vec![
        tensor_f32("big", &[64, 64], &floats(4096, 0.0)),
        tensor_f32("small", &[8], &floats(8, 1.0)),
        tensor_i64("shape", &[1024], &[7; 1024]),
        listed,
        tensor_f32("edge", &[1024], &floats(1024, 2.0)),
    ])
}

#[test]
fn left_out_weights_come_back_as_a_full_decode_has_them() {
    let model = mixed_model();
    let bytes = model.encode_to_vec();
    let (mut lazy, mut deferred) = decode_deferring(&bytes).unwrap();
    // "big" (16 KiB) and "edge" (exactly 4 KiB) are left out; the rest is decoded.
    assert_eq!(deferred.bytes(), 4096 * 4 + 1024 * 4);
    let g = lazy.graph.as_mut().unwrap();
    assert!(g.initializer[0].raw_data.is_empty() && g.initializer[4].raw_data.is_empty());
    assert_eq!(
        g.initializer[1],
        model.graph.as_ref().unwrap().initializer[1]
    );
    assert_eq!(
        g.initializer[2],
        model.graph.as_ref().unwrap().initializer[2]
    );
    assert_ne!(lazy, model);
    deferred.restore(lazy.graph.as_mut().unwrap(), &bytes);
    assert!(deferred.is_empty());
    assert_eq!(lazy, model);
    assert_eq!(lazy.encode_to_vec(), bytes);
}

#[test]
fn a_graph_given_twice_is_decoded_whole() {
    let model = mixed_model();
    let mut bytes = model.encode_to_vec();
    let extra = ModelProto {
        graph: Some(GraphProto {
            name: "second".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    bytes.extend(extra.encode_to_vec());
    let (lazy, deferred) = decode_deferring(&bytes).unwrap();
    assert!(deferred.is_empty());
    assert_eq!(lazy, ModelProto::decode(bytes.as_slice()).unwrap());
}

#[test]
fn a_model_without_large_weights_is_decoded_whole() {
    let model = model_with(vec![tensor_f32("w", &[4], &[1.0, 2.0, 3.0, 4.0])]);
    let bytes = model.encode_to_vec();
    let (lazy, deferred) = decode_deferring(&bytes).unwrap();
    assert!(deferred.is_empty());
    assert_eq!(lazy, model);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Any model, cut anywhere: the deferring decode fails exactly when prost's does, and
    /// otherwise gives the same model once the weights are back.
    #[test]
    fn same_outcome_as_a_full_decode_even_when_cut(
        sizes in proptest::collection::vec(0usize..3000, 0..6),
        cut in proptest::option::of(0.0f64..1.0),
    ) {
        let tensors = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| tensor_f32(&format!("w{i}"), &[n as i64], &floats(n, i as f32)))
            .collect();
        let mut bytes = model_with(tensors).encode_to_vec();
        if let Some(c) = cut {
            bytes.truncate((bytes.len() as f64 * c) as usize);
        }
        let full = ModelProto::decode(bytes.as_slice());
        match decode_deferring(&bytes) {
            Ok((mut lazy, mut deferred)) => {
                let full = full.expect("prost decodes what the deferring decode does");
                if let Some(g) = lazy.graph.as_mut() {
                    deferred.restore(g, &bytes);
                }
                prop_assert_eq!(lazy, full);
            }
            Err(_) => prop_assert!(full.is_err()),
        }
    }
}
