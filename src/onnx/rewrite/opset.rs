//! Raising a model's default-domain opset (9 to 12) to 13, the first with per-channel
//! QuantizeLinear/DequantizeLinear, where every node keeps its meaning: many exporters (Paddle,
//! tf2onnx, older PyTorch) still write opset 9 or 11. Between those opsets most ops changed only
//! their types; the ones that moved an attribute to an input (Slice at 10, Pad and Clip at 11,
//! TopK at 10, Squeeze, Unsqueeze, ReduceSum and Split at 13) get the input, made from the
//! attribute. Softmax, LogSoftmax and Hardmax changed meaning at 13 (one axis instead of
//! everything from the axis on): they are kept only where the two agree, on the input's last
//! axis. Anything else that changed (Dropout's ratio, Upsample, Scatter, Resize before 11, ops
//! with subgraphs) is refused, naming the node. Node indices do not change.

use crate::onnx::attributes::int_attr;
use crate::onnx::graph_builder::{tensor_f32, tensor_i64};
use crate::onnx::pb::{GraphProto, NodeProto, TensorProto};
use crate::onnx::rewrite::plan::node_label;
use crate::onnx::subgraphs::holds_subgraph;
use crate::onnx::tensor_info::TensorInfo;
use crate::onnx::OnnxModel;
use anyhow::{bail, Result};

/// The oldest opset raised.
pub(crate) const OLDEST_RAISED: i64 = 9;

/// The IR version that goes with opset 13.
const IR_FOR_OPSET_13: i64 = 7;

/// Raises the default-domain opset of `model` to `to` (at most 13) when it is older and every
/// node keeps its meaning; returns the old opset when it was raised, `None` when it was already
/// new enough, and an error naming the node that stops it.
pub(crate) fn raise_opset(model: &mut OnnxModel, to: i64) -> Result<Option<i64>> {
    let from = model.opset();
    if from >= to {
        return Ok(None);
    }
    if from < OLDEST_RAISED || to > 13 {
        bail!("the model has opset {from}; trtkit raises opsets {OLDEST_RAISED}–12 to 13 only: re-export it with opset {to} or newer");
    }
    let graph = model.graph_mut();
    let mut added = vec![];
    for i in 0..graph.node.len() {
        let label = node_label(graph, i);
        let node = &graph.node[i];
        if !(node.domain.is_empty() || node.domain == "ai.onnx") {
            continue;
        }
        let why = |what: &str| {
            anyhow::anyhow!(
                "cannot raise the model's opset {from} to {to} for INT8 Q/DQ: {} '{label}' {what}; re-export it with opset {to} or newer",
                node.op_type
            )
        };
        if holds_subgraph(node) {
            return Err(why("has a subgraph"));
        }
        match node.op_type.as_str() {
            "Softmax" | "LogSoftmax" | "Hardmax" if !softmax_keeps_meaning(graph, node) => {
                return Err(why("changed meaning at opset 13 (it works on one axis now) and its axis is not the input's known last one"));
            }
            "Dropout" | "Upsample" | "Scatter" => return Err(why("changed or was removed")),
            "Resize" if from < 11 => return Err(why("changed its inputs at opset 11")),
            "Resize"
                if crate::onnx::attributes::string_attr(node, "coordinate_transformation_mode")
                    .as_deref()
                    == Some("tf_half_pixel_for_nn") =>
            {
                return Err(why("uses a mode opset 13 removed"))
            }
            _ => {}
        }
        let moves = attribute_inputs(&node.op_type, from);
        let node = &mut graph.node[i];
        for (slot, attr, kind) in moves {
            if let Some(t) = take_attribute(node, attr, kind, &format!("{label}.{attr}")) {
                // Optional inputs before it that the node lacks are named "" (omitted).
                if node.input.len() <= slot {
                    node.input.resize(slot + 1, String::new());
                }
                node.input[slot] = t.name.clone();
                added.push(t);
            }
        }
    }
    graph.initializer.extend(added);
    for o in model.proto.opset_import.iter_mut() {
        if o.domain.is_empty() || o.domain == "ai.onnx" {
            o.version = to;
        }
    }
    model.proto.ir_version = model.proto.ir_version.max(IR_FOR_OPSET_13);
    Ok(Some(from))
}

/// How an attribute's values become an input tensor.
#[derive(Clone, Copy)]
enum Kind {
    /// int64 list, 1-D.
    Ints,
    /// One int64, as a 1-D tensor of one.
    IntOne,
    /// One float, as a scalar.
    Float,
}

/// The attributes of `op` that became inputs after opset `from`, by 13: `(input slot, name,
/// kind)`, in slot order.
fn attribute_inputs(op: &str, from: i64) -> Vec<(usize, &'static str, Kind)> {
    match op {
        "Slice" if from < 10 => vec![
            (1, "starts", Kind::Ints),
            (2, "ends", Kind::Ints),
            (3, "axes", Kind::Ints),
        ],
        "TopK" if from < 10 => vec![(1, "k", Kind::IntOne)],
        "Pad" if from < 11 => vec![(1, "pads", Kind::Ints), (2, "value", Kind::Float)],
        "Clip" if from < 11 => vec![(1, "min", Kind::Float), (2, "max", Kind::Float)],
        "Squeeze" | "Unsqueeze" | "ReduceSum" => vec![(1, "axes", Kind::Ints)],
        "Split" => vec![(1, "split", Kind::Ints)],
        _ => vec![],
    }
}

/// Removes attribute `name` from `node` and returns its values as an initializer called
/// `tensor` (`None` when the node does not have it).
fn take_attribute(
    node: &mut NodeProto,
    name: &str,
    kind: Kind,
    tensor: &str,
) -> Option<TensorProto> {
    let at = node.attribute.iter().position(|a| a.name == name)?;
    let a = node.attribute.remove(at);
    Some(match kind {
        Kind::Ints => tensor_i64(tensor, &[a.ints.len() as i64], &a.ints),
        Kind::IntOne => tensor_i64(tensor, &[1], &[a.i]),
        Kind::Float => tensor_f32(tensor, &[], &[a.f]),
    })
}

/// Whether a Softmax-like node computes the same at opset 13: its axis (default 1 before 13)
/// is -1 or the last of an input whose rank the graph declares (on the input, or on the output,
/// directly or through Identity nodes).
fn softmax_keeps_meaning(graph: &GraphProto, node: &NodeProto) -> bool {
    let axis = int_attr(node, "axis").unwrap_or(1);
    if axis == -1 {
        return true;
    }
    let rank = declared_rank(graph, &node.input[0]).or_else(|| {
        let mut name = node.output.first()?.clone();
        loop {
            if let Some(r) = declared_rank(graph, &name) {
                return Some(r);
            }
            let next = graph
                .node
                .iter()
                .find(|n| n.op_type == "Identity" && n.input.first() == Some(&name))?;
            name = next.output.first()?.clone();
        }
    });
    rank.is_some_and(|r| axis == r as i64 - 1)
}

/// The rank the graph declares for tensor `name` (as an input, output or value_info).
fn declared_rank(graph: &GraphProto, name: &str) -> Option<usize> {
    graph
        .input
        .iter()
        .chain(&graph.output)
        .chain(&graph.value_info)
        .find(|v| v.name == name)
        .and_then(|v| TensorInfo::from_value_info(v).dims)
        .map(|d| d.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::graph_builder::{attr_int, attr_ints, GraphBuilder};
    use crate::onnx::pb::tensor_proto::DataType;
    use crate::onnx::pb::OperatorSetIdProto;
    use crate::tensor::Dim;

    /// Conv → Clip(min, max attributes) → Unsqueeze(axes) → Squeeze(axes) → Flatten →
    /// Softmax(axis 1) on a declared [1, 32] output, at `opset`.
    fn old_model(opset: i64, softmax_axis: i64) -> OnnxModel {
        let mut g = GraphBuilder::new("old");
        let clip = |name: &str, v: f32| crate::onnx::graph_builder::attr_float(name, v);
        g.input(
            "x",
            DataType::Float,
            &[Dim::Fixed(1), Dim::Fixed(2), Dim::Fixed(4), Dim::Fixed(4)],
        )
        .output("y", DataType::Float, &[Dim::Fixed(1), Dim::Fixed(32)])
        .initializer(tensor_f32("w", &[2, 2, 1, 1], &[0.5, -0.2, 0.3, 0.8]))
        .node("Conv", &["x", "w"], &["c"], vec![])
        .node(
            "Clip",
            &["c"],
            &["k"],
            vec![clip("min", -0.1), clip("max", 0.4)],
        )
        .node("Unsqueeze", &["k"], &["u"], vec![attr_ints("axes", &[0])])
        .node("Squeeze", &["u"], &["s"], vec![attr_ints("axes", &[0])])
        .node("Flatten", &["s"], &["f"], vec![])
        .node(
            "Softmax",
            &["f"],
            &["y"],
            vec![attr_int("axis", softmax_axis)],
        );
        let mut proto = g.build();
        proto.ir_version = 4;
        proto.opset_import = vec![OperatorSetIdProto {
            domain: String::new(),
            version: opset,
        }];
        OnnxModel::from_proto(proto, "old.onnx")
    }

    #[test]
    fn an_opset_9_model_is_raised_to_13_and_computes_the_same() {
        let old = old_model(9, 1);
        let before = crate::backend::tract::first_output(&old, "x", &[1, 2, 4, 4], 5);
        let mut new = old.clone();
        assert_eq!(raise_opset(&mut new, 13).unwrap(), Some(9));
        assert_eq!((new.opset(), new.proto.ir_version), (13, 7));
        assert_eq!(new.graph().node.len(), old.graph().node.len());
        let clip = &new.graph().node[1];
        assert!(
            clip.attribute.is_empty() && clip.input.len() == 3,
            "{clip:?}"
        );
        let unsqueeze = &new.graph().node[2];
        assert_eq!(unsqueeze.input.len(), 2);
        let after = crate::backend::tract::first_output(&new, "x", &[1, 2, 4, 4], 5);
        assert_eq!(before, after);
        assert_eq!(raise_opset(&mut new, 13).unwrap(), None, "already 13");
    }

    #[test]
    fn what_changed_meaning_is_refused_naming_the_node() {
        let mut wrong_axis = old_model(11, 0);
        let err = raise_opset(&mut wrong_axis, 13).unwrap_err().to_string();
        assert!(err.contains("Softmax 'softmax_5'"), "{err}");
        let mut ancient = old_model(7, 1);
        assert!(raise_opset(&mut ancient, 13).is_err());
    }
}
