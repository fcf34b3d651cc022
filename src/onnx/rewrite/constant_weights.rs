//! Weights held by `Constant` nodes (as Paddle and some TensorFlow exports write them) moved into
//! initializers, so that the INT8 rewrite quantizes them like any other weight: the plan, the
//! Q/DQ pass, bias correction and adaptive rounding read weights from initializers. A Constant
//! is moved only where it feeds a Conv, ConvTranspose, Gemm or MatMul's weight (input 1) or a
//! Conv's bias (input 2), holds a `value` tensor and is not a graph output; the model computes
//! the same. Node indices after it shift down by the moved nodes, so every INT8 path moves them
//! first, and a `#INDEX` label names the node in the model with its weights moved.

use super::pass::{Pass, PassReport};
use crate::onnx::attributes::attribute;
use crate::onnx::pb::GraphProto;
use crate::onnx::OnnxModel;
use anyhow::Result;
use std::collections::HashSet;

/// The smallest IR version whose initializers need not also be graph inputs.
const MIN_IR_VERSION: i64 = 4;

/// The indices of the `Constant` nodes of `graph` that hold weights: each feeds a Conv,
/// ConvTranspose, Gemm or MatMul's weight (input 1) or a Conv's bias (input 2), holds a `value`
/// tensor and is not a graph output. `inspect` counts their elements as parameters; the INT8
/// rewrite moves them into initializers, and the FP16 rewrite converts them like initializers.
pub(crate) fn weight_constants(graph: &GraphProto) -> Vec<usize> {
    let weight_inputs: HashSet<&str> = graph
        .node
        .iter()
        .flat_map(|n| {
            let slots: &[usize] = match n.op_type.as_str() {
                "Conv" => &[1, 2],
                "ConvTranspose" | "Gemm" | "MatMul" => &[1],
                _ => &[],
            };
            slots
                .iter()
                .filter_map(|&i| n.input.get(i).map(String::as_str))
        })
        .collect();
    let outputs: HashSet<&str> = graph.output.iter().map(|o| o.name.as_str()).collect();
    graph
        .node
        .iter()
        .enumerate()
        .filter(|(_, n)| n.op_type == "Constant" && n.output.len() == 1)
        .filter(|(_, n)| {
            let out = n.output[0].as_str();
            weight_inputs.contains(out) && !outputs.contains(out)
        })
        .filter(|(_, n)| attribute(n, "value").and_then(|a| a.t.as_ref()).is_some())
        .map(|(i, _)| i)
        .collect()
}

/// The pass that moves the Constant weights of a model ([`weight_constants`]) into initializers,
/// where the INT8 rewrite and its evaluation find them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LiftConstantWeights;

impl Pass for LiftConstantWeights {
    fn name(&self) -> &'static str {
        "lift-constant-weights"
    }

    fn run(&self, mut model: OnnxModel) -> Result<(OnnxModel, PassReport)> {
        let lifted = lift_constant_weights(&mut model);
        Ok((model, PassReport::LiftConstantWeights { lifted }))
    }
}

/// Moves the Constant weights of `model` ([`weight_constants`]) into initializers; returns how
/// many were moved.
fn lift_constant_weights(model: &mut OnnxModel) -> usize {
    if model.proto.ir_version < MIN_IR_VERSION {
        return 0;
    }
    let movable = weight_constants(model.graph());
    let graph = model.graph_mut();
    for &i in movable.iter().rev() {
        let node = graph.node.remove(i);
        let name = node.output[0].clone();
        if let Some(mut t) = node
            .attribute
            .into_iter()
            .find(|a| a.name == "value")
            .and_then(|a| a.t)
        {
            t.name = name;
            graph.initializer.push(t);
        }
    }
    movable.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::graph_builder::{tensor_f32, GraphBuilder};
    use crate::onnx::pb::attribute_proto::AttributeType;
    use crate::onnx::pb::tensor_proto::DataType;
    use crate::onnx::pb::{AttributeProto, TensorProto};
    use crate::onnx::rewrite::plan::plan_int8;
    use crate::tensor::Dim;

    fn attr_tensor(name: &str, t: TensorProto) -> AttributeProto {
        AttributeProto {
            name: name.into(),
            r#type: AttributeType::Tensor as i32,
            t: Some(t),
            ..Default::default()
        }
    }

    /// A conv whose weight and bias are Constant nodes.
    fn constant_conv() -> OnnxModel {
        let mut g = GraphBuilder::new("constant_weights");
        g.input(
            "x",
            DataType::Float,
            &[Dim::Fixed(1), Dim::Fixed(2), Dim::Fixed(4), Dim::Fixed(4)],
        )
        .output("y", DataType::Float, &[Dim::Fixed(1), Dim::Fixed(48)])
        .node(
            "Constant",
            &[],
            &["w"],
            vec![attr_tensor(
                "value",
                tensor_f32("", &[3, 2, 3, 3], &[0.1; 54]),
            )],
        )
        .node(
            "Constant",
            &[],
            &["b"],
            vec![attr_tensor("value", tensor_f32("", &[3], &[0.5; 3]))],
        )
        .node("Conv", &["x", "w", "b"], &["c"], vec![])
        .node("Flatten", &["c"], &["y"], vec![]);
        OnnxModel::from_proto(g.build(), "c.onnx")
    }

    #[test]
    fn constant_weights_become_initializers_the_plan_quantizes() {
        let mut m = constant_conv();
        let before = crate::backend::tract::first_output(&m, "x", &[1, 2, 4, 4], 3);
        assert!(plan_int8(m.graph()).weights.is_empty());
        assert_eq!(lift_constant_weights(&mut m), 2);
        let names: Vec<&str> = m
            .graph()
            .initializer
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(names, ["b", "w"]);
        assert!(m.graph().node.iter().all(|n| n.op_type != "Constant"));
        assert_eq!(plan_int8(m.graph()).weights.len(), 1);
        let after = crate::backend::tract::first_output(&m, "x", &[1, 2, 4, 4], 3);
        assert_eq!(before, after);
        assert_eq!(lift_constant_weights(&mut m), 0, "nothing left to move");
    }
}
