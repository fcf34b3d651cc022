//! Which ONNX IR version a model actually needs, so a model saved with a newer IR version than
//! a runtime reads can be given to it with the version lowered, where nothing newer is used.
//!
//! Each IR version since 9 added element types (onnx.proto's `Version` enum says which); IR 14
//! also made `TypeProto.Opaque` available outside ONNX-ML builds, a type trtkit's decoded
//! model does not carry at all. A model that uses none of a version's additions means the same
//! under the version before it.

use super::dtype::dtype_name;
use super::pb::{AttributeProto, GraphProto, ModelProto, TensorProto, TypeProto};

/// The newest IR version whose additions trtkit knows; a model above it is never lowered.
pub(crate) const NEWEST_KNOWN_IR: i64 = 14;

/// The IR version that introduced element type `code`; `None` for a code trtkit does not
/// know (newer than [`NEWEST_KNOWN_IR`]).
pub(crate) fn ir_of_element_type(code: i32) -> Option<i64> {
    Some(match code {
        0..=16 => 4,
        17..=20 => 9,  // float8 e4m3fn, e4m3fnuz, e5m2, e5m2fnuz
        21 | 22 => 10, // uint4, int4
        23 => 11,      // float4e2m1
        24 => 12,      // float8e8m0
        25 | 26 => 13, // uint2, int2
        27 | 28 => 14, // float6e2m3, float6e3m2
        _ => return None,
    })
}

/// Checks that `model` means the same at IR version `to`; the error says what it uses that
/// `to` lacks.
pub(crate) fn check_lowerable(model: &ModelProto, to: i64) -> Result<(), String> {
    if model.ir_version > NEWEST_KNOWN_IR {
        return Err(format!(
            "its IR version {} is newer than trtkit knows ({NEWEST_KNOWN_IR})",
            model.ir_version
        ));
    }
    let mut codes = vec![];
    if let Some(graph) = &model.graph {
        graph_types(graph, &mut codes);
    }
    for function in &model.functions {
        for node in &function.node {
            node.attribute
                .iter()
                .for_each(|a| attribute_types(a, &mut codes));
        }
    }
    for code in codes {
        match ir_of_element_type(code) {
            Some(ir) if ir <= to => {}
            Some(ir) => {
                return Err(format!(
                    "it uses element type {}, which needs IR version {ir}",
                    dtype_name(code)
                ))
            }
            None => return Err(format!("it uses element type #{code}, unknown to trtkit")),
        }
    }
    Ok(())
}

/// Every element type code `graph` (and its subgraphs) declares or stores.
fn graph_types(graph: &GraphProto, codes: &mut Vec<i32>) {
    let values = graph
        .input
        .iter()
        .chain(&graph.output)
        .chain(&graph.value_info);
    for value in values {
        if let Some(t) = &value.r#type {
            type_codes(t, codes);
        }
    }
    graph.initializer.iter().for_each(|t| tensor_type(t, codes));
    for sparse in &graph.sparse_initializer {
        sparse
            .values
            .iter()
            .chain(&sparse.indices)
            .for_each(|t| tensor_type(t, codes));
    }
    for node in &graph.node {
        node.attribute
            .iter()
            .for_each(|a| attribute_types(a, codes));
    }
}

fn type_codes(t: &TypeProto, codes: &mut Vec<i32>) {
    if let Some(super::pb::type_proto::Value::TensorType(tensor)) = &t.value {
        codes.push(tensor.elem_type);
    }
}

fn tensor_type(t: &TensorProto, codes: &mut Vec<i32>) {
    codes.push(t.data_type);
}

/// Attributes that name an element type (Cast's `to`, the random ops' `dtype`, …) hold it as
/// an integer; tensors, types and subgraphs hold theirs inside.
fn attribute_types(a: &AttributeProto, codes: &mut Vec<i32>) {
    const TYPE_ATTRIBUTES: [&str; 4] = ["to", "dtype", "output_dtype", "stash_type"];
    if TYPE_ATTRIBUTES.contains(&a.name.as_str()) && a.ints.is_empty() {
        if let Ok(code) = i32::try_from(a.i) {
            codes.push(code);
        }
    }
    a.t.iter()
        .chain(&a.tensors)
        .for_each(|t| tensor_type(t, codes));
    if let Some(sparse) = &a.sparse_tensor {
        sparse
            .values
            .iter()
            .chain(&sparse.indices)
            .for_each(|t| tensor_type(t, codes));
    }
    a.type_protos.iter().for_each(|t| type_codes(t, codes));
    a.g.iter()
        .chain(&a.graphs)
        .for_each(|g| graph_types(g, codes));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::graph_builder::tensor_f32;
    use crate::onnx::pb::type_proto::Value;
    use crate::onnx::test_models::classifier;

    fn ir14() -> ModelProto {
        let mut m = classifier(None);
        m.ir_version = 14;
        m
    }

    #[test]
    fn a_model_with_only_old_types_lowers() {
        assert_eq!(check_lowerable(&ir14(), 13), Ok(()));
    }

    #[test]
    fn a_float6_initializer_or_cast_stops_the_lowering() {
        let mut m = ir14();
        let mut t = tensor_f32("w6", &[1], &[0.0]);
        t.data_type = 27;
        m.graph.as_mut().unwrap().initializer.push(t);
        let err = check_lowerable(&m, 13).unwrap_err();
        assert!(
            err.contains("float6e2m3") && err.contains("IR version 14"),
            "{err}"
        );

        let mut m = ir14();
        let node = &mut m.graph.as_mut().unwrap().node[0];
        node.attribute.push(AttributeProto {
            name: "to".into(),
            i: 28,
            r#type: 2,
            ..Default::default()
        });
        assert!(check_lowerable(&m, 13).is_err());
        assert_eq!(check_lowerable(&m, 14), Ok(()));
    }

    #[test]
    fn unknown_types_and_ir_versions_are_not_lowered() {
        let mut m = ir14();
        m.ir_version = 15;
        assert!(check_lowerable(&m, 13)
            .unwrap_err()
            .contains("IR version 15"));
        let mut m = ir14();
        let output = &mut m.graph.as_mut().unwrap().output[0];
        if let Some(Value::TensorType(t)) = output.r#type.as_mut().and_then(|t| t.value.as_mut()) {
            t.elem_type = 40;
        }
        assert!(check_lowerable(&m, 13).unwrap_err().contains("#40"));
    }
}
