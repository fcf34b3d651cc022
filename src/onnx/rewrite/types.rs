//! Element types of every tensor in a graph, propagated op by op (no shapes needed).
//!
//! Rewrites need to know which tensors are float32 (to quantize or convert them) and which are
//! shape arithmetic in int64 (to leave alone). ONNX value_info is optional and often stale, so
//! the types are propagated from inputs, initializers and per-op rules.

use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::{GraphProto, NodeProto};
use std::collections::HashMap;

/// The ONNX element type code of an attribute-less float32 tensor.
pub const FLOAT: i32 = DataType::Float as i32;
/// float16.
pub const FLOAT16: i32 = DataType::Float16 as i32;

fn attr_i(node: &NodeProto, name: &str) -> Option<i64> {
    node.attribute.iter().find(|a| a.name == name).map(|a| a.i)
}

fn attr_tensor_type(node: &NodeProto, name: &str) -> Option<i32> {
    node.attribute
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| a.t.as_ref())
        .map(|t| t.data_type)
}

/// Output element types of `node` given the types known so far (`None` where unknown).
fn output_types(node: &NodeProto, known: &HashMap<String, i32>) -> Vec<Option<i32>> {
    let input = |i: usize| -> Option<i32> {
        node.input
            .get(i)
            .filter(|n| !n.is_empty())
            .and_then(|n| known.get(n).copied())
    };
    let first_known = || (0..node.input.len()).find_map(input);
    let n = node.output.len();
    let all = |t: Option<i32>| vec![t; n];
    let int64 = Some(DataType::Int64 as i32);
    let boolean = Some(DataType::Bool as i32);
    match node.op_type.as_str() {
        "Constant" => {
            let t = attr_tensor_type(node, "value").or_else(|| {
                node.attribute.iter().find_map(|a| match a.name.as_str() {
                    "value_float" | "value_floats" => Some(FLOAT),
                    "value_int" | "value_ints" => int64,
                    _ => None,
                })
            });
            all(t)
        }
        "Cast" => all(attr_i(node, "to").map(|t| t as i32)),
        "CastLike" => all(input(1)),
        "Shape" | "Size" | "NonZero" | "ArgMax" | "ArgMin" => all(int64),
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "Not" | "And" | "Or"
        | "Xor" | "IsNaN" | "IsInf" => all(boolean),
        "ConstantOfShape" => all(attr_tensor_type(node, "value").or(Some(FLOAT))),
        "TopK" | "MaxPool" | "Unique" => {
            let mut v = all(int64);
            v[0] = input(0);
            v
        }
        "QuantizeLinear" => all(input(2).or(Some(DataType::Uint8 as i32))),
        "DequantizeLinear" => all(input(1).or(Some(FLOAT))),
        "Where" => all(input(1).or(input(2))),
        "RandomNormal" | "RandomUniform" | "EyeLike" | "RandomNormalLike" | "RandomUniformLike" => {
            all(attr_i(node, "dtype").map(|t| t as i32).or(Some(FLOAT)))
        }
        _ => all(first_known()),
    }
}

/// The element type of every tensor the graph names, where it can be told.
pub fn infer_elem_types(graph: &GraphProto) -> HashMap<String, i32> {
    let mut known: HashMap<String, i32> = HashMap::new();
    for vi in graph.input.iter().chain(&graph.value_info) {
        let t = crate::onnx::tensor_info::tensor_type(vi).map(|t| t.elem_type);
        if let Some(t) = t.filter(|&t| t != 0) {
            known.insert(vi.name.clone(), t);
        }
    }
    for init in &graph.initializer {
        known.insert(init.name.clone(), init.data_type);
    }
    for node in &graph.node {
        for (name, t) in node.output.iter().zip(output_types(node, &known)) {
            if let (Some(t), false) = (t, name.is_empty()) {
                known.insert(name.clone(), t);
            }
        }
    }
    known
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::test_models;

    #[test]
    fn classifier_types() {
        let m = test_models::classifier(None);
        let t = infer_elem_types(m.graph.as_ref().unwrap());
        assert_eq!(t["flat"], FLOAT);
        assert_eq!(t["logits"], FLOAT);
        assert_eq!(t["flatten.shape"], DataType::Int64 as i32);
    }
}
