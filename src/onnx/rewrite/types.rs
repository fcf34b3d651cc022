//! Element types of every tensor in a graph, propagated op by op (no shapes needed).
//!
//! Rewrites need to know which tensors are float32 (to quantize or convert them) and which are
//! shape arithmetic in int64 (to leave alone). ONNX value_info is optional and often stale, so
//! the types are propagated from inputs, initializers and per-op rules.

use crate::onnx::attributes::int_attr;
use crate::onnx::dtype::{data_type, data_type_attr};
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::{GraphProto, NodeProto};
use std::collections::HashMap;

fn attr_tensor_type(node: &NodeProto, name: &str) -> Option<DataType> {
    node.attribute
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| a.t.as_ref())
        .and_then(|t| data_type(t.data_type))
}

/// Output element types of `node` given the types known so far (`None` where unknown).
fn output_types(node: &NodeProto, known: &HashMap<String, DataType>) -> Vec<Option<DataType>> {
    let input = |i: usize| -> Option<DataType> {
        node.input
            .get(i)
            .filter(|n| !n.is_empty())
            .and_then(|n| known.get(n).copied())
    };
    let first_known = || (0..node.input.len()).find_map(input);
    let n = node.output.len();
    let all = |t: Option<DataType>| vec![t; n];
    let int64 = Some(DataType::Int64);
    let boolean = Some(DataType::Bool);
    let float = Some(DataType::Float);
    match node.op_type.as_str() {
        "Constant" => {
            let t = attr_tensor_type(node, "value").or_else(|| {
                node.attribute.iter().find_map(|a| match a.name.as_str() {
                    "value_float" | "value_floats" => float,
                    "value_int" | "value_ints" => int64,
                    _ => None,
                })
            });
            all(t)
        }
        "Cast" => all(int_attr(node, "to").and_then(data_type_attr)),
        "CastLike" => all(input(1)),
        "Shape" | "Size" | "NonZero" | "ArgMax" | "ArgMin" => all(int64),
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "Not" | "And" | "Or"
        | "Xor" | "IsNaN" | "IsInf" => all(boolean),
        "ConstantOfShape" => all(attr_tensor_type(node, "value").or(float)),
        "TopK" | "MaxPool" | "Unique" => {
            let mut v = all(int64);
            v[0] = input(0);
            v
        }
        "QuantizeLinear" => all(input(2).or(Some(DataType::Uint8))),
        "DequantizeLinear" => all(input(1).or(float)),
        "Where" => all(input(1).or(input(2))),
        "RandomNormal" | "RandomUniform" | "EyeLike" | "RandomNormalLike" | "RandomUniformLike" => {
            all(int_attr(node, "dtype").and_then(data_type_attr).or(float))
        }
        "If" | "Loop" | "Scan" => control_flow_types(node),
        _ => all(first_known()),
    }
}

/// The declared element type of a subgraph's output `index` (`None` where it declares none).
fn declared_output(g: &GraphProto, index: usize) -> Option<DataType> {
    let v = g.output.get(index)?;
    let t = crate::onnx::tensor_info::tensor_type(v).and_then(|t| data_type(t.elem_type));
    t.filter(|&t| t != DataType::Undefined)
}

/// An `If`'s outputs are its branches' (the first branch that declares one); a `Loop`'s are its
/// body's outputs past the condition; a `Scan`'s are its body's.
fn control_flow_types(node: &NodeProto) -> Vec<Option<DataType>> {
    let graph = |name: &str| {
        node.attribute
            .iter()
            .find(|a| a.name == name)
            .and_then(|a| a.g.as_ref())
    };
    let skip = usize::from(node.op_type == "Loop");
    let bodies: Vec<&GraphProto> = match node.op_type.as_str() {
        "If" => ["then_branch", "else_branch"]
            .iter()
            .filter_map(|b| graph(b))
            .collect(),
        _ => graph("body").into_iter().collect(),
    };
    (0..node.output.len())
        .map(|i| bodies.iter().find_map(|g| declared_output(g, i + skip)))
        .collect()
}

/// The element type of every tensor the graph names, where it can be told.
///
/// Tensors whose type is undefined or a code this ONNX version lacks are left out.
pub(crate) fn infer_elem_types(graph: &GraphProto) -> HashMap<String, DataType> {
    infer_elem_types_within(graph, &HashMap::new())
}

/// [`infer_elem_types`] of a subgraph, which reads the values of the graphs around it
/// (`outside`: their types) as well as its own; the result holds both.
pub(crate) fn infer_elem_types_within(
    graph: &GraphProto,
    outside: &HashMap<String, DataType>,
) -> HashMap<String, DataType> {
    let mut known = outside.clone();
    for vi in graph.input.iter().chain(&graph.value_info) {
        let t = crate::onnx::tensor_info::tensor_type(vi).and_then(|t| data_type(t.elem_type));
        if let Some(t) = t.filter(|&t| t != DataType::Undefined) {
            known.insert(vi.name.clone(), t);
        }
    }
    for init in &graph.initializer {
        if let Some(t) = data_type(init.data_type).filter(|&t| t != DataType::Undefined) {
            known.insert(init.name.clone(), t);
        }
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
        assert_eq!(t["flat"], DataType::Float);
        assert_eq!(t["logits"], DataType::Float);
        assert_eq!(t["flatten.shape"], DataType::Int64);
    }
}
