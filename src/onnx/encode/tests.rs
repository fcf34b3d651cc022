use super::*;
use crate::onnx::graph_builder::{tensor_f32, tensor_i64};
use crate::onnx::pb::{
    NodeProto, OperatorSetIdProto, StringStringEntryProto, TrainingInfoProto, ValueInfoProto,
};
use proptest::prelude::*;

fn floats(n: usize, seed: f32) -> Vec<f32> {
    (0..n).map(|i| (i as f32 * 0.37 + seed).sin()).collect()
}

/// A model with fields on both sides of the graph and of its initializers.
fn model_with(initializers: Vec<TensorProto>, tails: bool) -> ModelProto {
    let entry = |k: &str| StringStringEntryProto {
        key: k.into(),
        value: "v".into(),
    };
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
            doc_string: if tails { "after".into() } else { String::new() },
            input: if tails {
                vec![ValueInfoProto {
                    name: "x".into(),
                    ..Default::default()
                }]
            } else {
                vec![]
            },
            ..Default::default()
        }),
        metadata_props: if tails { vec![entry("a")] } else { vec![] },
        training_info: if tails {
            vec![TrainingInfoProto::default()]
        } else {
            vec![]
        },
        ..Default::default()
    }
}

/// Raw, listed and int64 tensors, sized around the one- and two-byte length boundaries.
fn mixed(sizes: &[usize]) -> Vec<TensorProto> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| match i % 3 {
            0 => tensor_f32(&format!("w{i}"), &[n as i64], &floats(n, i as f32)),
            1 => tensor_i64(&format!("s{i}"), &[n as i64], &vec![i as i64; n]),
            _ => {
                let mut t = tensor_f32(&format!("l{i}"), &[n as i64], &floats(n, 1.0));
                t.float_data = floats(n, 1.0);
                t.raw_data.clear();
                t
            }
        })
        .collect()
}

#[test]
fn parallel_bytes_are_prosts_with_and_without_fields_after_the_initializers() {
    for tails in [false, true] {
        let model = model_with(mixed(&[0, 1, 31, 32, 4095, 4096, 70_000]), tails);
        let graph = model.graph.as_ref().unwrap();
        assert_eq!(encode_in_parallel(&model, graph), model.encode_to_vec());
    }
}

#[test]
fn a_graph_without_initializers_and_a_model_without_graph_encode_as_prost_does() {
    let model = model_with(vec![], true);
    let graph = model.graph.as_ref().unwrap();
    assert_eq!(encode_in_parallel(&model, graph), model.encode_to_vec());
    let no_graph = ModelProto {
        graph: None,
        ..model
    };
    assert_eq!(encode_model(&no_graph), no_graph.encode_to_vec());
}

#[test]
fn a_large_model_takes_the_parallel_path_and_round_trips() {
    let n = (PARALLEL_FROM_BYTES / 4) / 3 + 1;
    let model = model_with(mixed(&[n, 8, n, 16, n, n]), true);
    let bytes = encode_model(&model);
    assert_eq!(bytes, model.encode_to_vec());
    assert_eq!(ModelProto::decode(bytes.as_slice()).unwrap(), model);
}

#[test]
fn the_split_is_before_the_first_higher_field() {
    let model = model_with(vec![], true);
    let bytes = model_without_graph(&model).encode_to_vec();
    let at = fields_below(&bytes, GRAPH_FIELD);
    // opset_import (8), metadata_props (14) and training_info (20) follow the graph's place;
    // the key of field 8 is 8 << 3 | 2.
    assert_eq!(bytes[at], (8 << 3 | 2) as u8);
    assert_eq!(fields_below(&bytes, 100), bytes.len());
    assert_eq!(fields_below(&bytes, 0), 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn any_initializer_sizes_encode_as_prost_does(
        sizes in proptest::collection::vec(0usize..300, 0..12),
        tails: bool,
    ) {
        let model = model_with(mixed(&sizes), tails);
        let graph = model.graph.as_ref().unwrap();
        prop_assert_eq!(encode_in_parallel(&model, graph), model.encode_to_vec());
    }
}
