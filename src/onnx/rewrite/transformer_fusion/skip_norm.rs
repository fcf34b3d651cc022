//! Finding residual adds followed by a LayerNorm (`LayerNormalization(sublayer + residual)`,
//! the sublayer a MatMul with or without its bias), which ONNX Runtime's
//! `SkipLayerNormalization` computes in one kernel; Casts around the LayerNorm (a float16 graph
//! that kept it in float32) are taken in, the fused node accumulating in float32 itself.

use super::graph_view::GraphView;
use crate::onnx::attributes::{float_attr, int_attr};
use crate::onnx::dtype::data_type_attr;
use crate::onnx::pb::tensor_proto::DataType;
use std::collections::{HashMap, HashSet};

/// One residual add and LayerNorm, as `SkipLayerNormalization` takes them.
#[derive(Clone, Debug)]
pub(super) struct SkipNorm {
    /// The sublayer's output (before its bias, where the bias is folded in).
    pub input: String,
    /// The residual.
    pub skip: String,
    /// The initializer holding the LayerNorm's scale.
    pub gamma: String,
    /// The initializer holding the LayerNorm's shift, where it has one.
    pub beta: Option<String>,
    /// The sublayer's bias, where it is folded in.
    pub bias: Option<String>,
    /// The LayerNorm's epsilon.
    pub epsilon: f32,
    /// The element type the add computes in (the fused node's).
    pub elem: DataType,
    /// The tensor the fused node makes (the LayerNorm's output, or the Cast's after it).
    pub output: String,
    /// The index of the node that makes [`Self::output`].
    pub output_node: usize,
}

/// The residual add and LayerNorm at the `LayerNormalization` node `ln`, if they fuse.
pub(super) fn find_skip_norm(
    view: &GraphView,
    types: &HashMap<String, DataType>,
    ln: usize,
) -> Option<SkipNorm> {
    let node = &view.graph.node[ln];
    let norm_axis = int_attr(node, "axis").unwrap_or(-1);
    let unread_stats = node
        .output
        .iter()
        .skip(1)
        .all(|o| o.is_empty() || view.readers(o).is_empty() && !view.pinned(o));
    if norm_axis != -1 || !unread_stats || node.input.len() < 2 {
        return None;
    }
    let mut within = HashSet::from([ln]);
    let mut sum = node.input[0].as_str();
    let cast_in = view.made_by(sum, "Cast");
    if let Some((ci, cast)) = cast_in {
        within.insert(ci);
        sum = &cast.input[0];
    }
    let (ai, add) = view.made_by(sum, "Add")?;
    if add.input.len() != 2 || !view.read_only_within(sum, &within) {
        return None;
    }
    let elem = *types.get(sum)?;
    if !matches!(elem, DataType::Float | DataType::Float16) {
        return None;
    }
    let (side, input, bias) = (0..2).find_map(|k| sublayer(view, &add.input[k], ai))?;
    let (output, output_node) = match cast_in {
        None => (node.output[0].clone(), ln),
        Some(_) => {
            let [reader] = view.readers(&node.output[0]) else {
                return None;
            };
            let back = &view.graph.node[*reader];
            let to = int_attr(back, "to").and_then(data_type_attr);
            if back.op_type != "Cast" || to != Some(elem) || view.pinned(&node.output[0]) {
                return None;
            }
            (back.output[0].clone(), *reader)
        }
    };
    let weight = |k: usize| Some(view.weight(node.input.get(k)?)?.name.clone());
    let has_beta = node.input.get(2).is_some_and(|b| !b.is_empty());
    if has_beta && weight(2).is_none() {
        return None;
    }
    Some(SkipNorm {
        input,
        skip: add.input[1 - side].clone(),
        gamma: weight(1)?,
        beta: weight(2),
        bias,
        epsilon: float_attr(node, "epsilon").unwrap_or(1e-5),
        elem,
        output,
        output_node,
    })
}

/// Whether `tensor` is a sublayer's output: a MatMul's, or a MatMul's plus a 1-D bias read only
/// by the residual add `add` (the bias then folds into the fused node). Gives the side, the
/// MatMul's output and the bias.
fn sublayer(view: &GraphView, tensor: &str, add: usize) -> Option<(usize, String, Option<String>)> {
    let side = view.graph.node[add]
        .input
        .iter()
        .position(|i| i == tensor)?;
    if view.made_by(tensor, "MatMul").is_some() {
        return Some((side, tensor.to_string(), None));
    }
    let (_, bias_add) = view.made_by(tensor, "Add")?;
    if !view.read_only_within(tensor, &HashSet::from([add])) || bias_add.input.len() != 2 {
        return None;
    }
    (0..2).find_map(|k| {
        let bias = view
            .initializer(&bias_add.input[1 - k])
            .filter(|b| b.dims.len() == 1)?;
        view.made_by(&bias_add.input[k], "MatMul")?;
        Some((side, bias_add.input[k].clone(), Some(bias.name.clone())))
    })
}
