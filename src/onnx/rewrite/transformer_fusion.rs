//! The transformer fusion pass: the self-attention blocks of exported encoders become ONNX
//! Runtime's fused `com.microsoft.Attention` (one packed Q/K/V projection, the heads, the scale,
//! the padding mask and the softmax in one kernel that never writes the `[batch, heads, seq,
//! seq]` scores out in float16), and residual adds followed by a LayerNorm become
//! `com.microsoft.SkipLayerNormalization`. ONNX Runtime fuses GELU and its bias by itself.
//!
//! An attention softmax whose block the fused operator would not compute the same (another
//! mask, scores read elsewhere, cross-attention, V scaled) is left as it is, and the report
//! says why. The fused graph is for ONNX Runtime only: TensorRT fuses attention itself and
//! cannot parse `com.microsoft` operators.

mod attention;
mod graph_view;
mod pack;
mod skip_norm;

use super::fresh_names::FreshNames;
use super::pass::{Pass, PassReport};
use super::report::TransformerFusionReport;
use super::types::infer_elem_types;
use crate::onnx::graph_builder::{attr_float, attr_int, cast_node};
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::{GraphProto, NodeProto, OperatorSetIdProto, TensorProto};
use crate::onnx::OnnxModel;
use anyhow::Result;
use attention::{find_block, AttentionBlock, Found};
use graph_view::GraphView;
use skip_norm::{find_skip_norm, SkipNorm};
use std::collections::{HashMap, HashSet};

/// The domain of ONNX Runtime's own operators.
const MS_DOMAIN: &str = "com.microsoft";

/// The transformer fusion pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct TransformerFusion {
    /// Fuse blocks that compute in float16 too (ONNX Runtime's CUDA provider has float16
    /// kernels for the fused operators; its CPU build has float32 ones only).
    pub float16: bool,
}

impl Pass for TransformerFusion {
    fn name(&self) -> &'static str {
        "transformer-fusion"
    }

    fn run(&self, mut model: OnnxModel) -> Result<(OnnxModel, PassReport)> {
        let mut report = TransformerFusionReport::default();
        if !well_formed(model.graph()) {
            // ONNX Runtime refuses such a graph itself, in its own words.
            return Ok((model, PassReport::TransformerFusion(report)));
        }
        let graph = model.graph_mut();
        // Read once, before any fused node (whose types the inference does not know) is in:
        // the fused nodes keep the names of the tensors they replace.
        let types = infer_elem_types(graph);
        fuse_attention(graph, &types, self.float16, &mut report);
        fuse_skip_norms(graph, &types, self.float16, &mut report);
        if report.attention + report.skip_layer_norms > 0 {
            remove_dead(graph);
            let imports = &mut model.proto.opset_import;
            if !imports.iter().any(|o| o.domain == MS_DOMAIN) {
                imports.push(OperatorSetIdProto {
                    domain: MS_DOMAIN.into(),
                    version: 1,
                });
            }
        }
        Ok((model, PassReport::TransformerFusion(report)))
    }
}

/// The fewest inputs each op the search reads takes (every one makes at least one output).
const ARITY: &[(&str, usize)] = &[
    ("Softmax", 1),
    ("Cast", 1),
    ("MatMul", 2),
    ("Transpose", 1),
    ("Reshape", 2),
    ("Split", 1),
    ("Add", 2),
    ("Mul", 2),
    ("Div", 2),
    ("Sub", 2),
    ("Unsqueeze", 1),
    ("LayerNormalization", 2),
    ("Identity", 1),
    ("Concat", 1),
    ("Shape", 1),
    ("Gather", 2),
];

/// Whether every node of an op the search reads has the inputs and output it indexes (a
/// crafted graph may not; the search then leaves the graph alone rather than read past them).
fn well_formed(graph: &GraphProto) -> bool {
    graph.node.iter().all(|n| {
        ARITY
            .iter()
            .find(|(op, _)| *op == n.op_type)
            .is_none_or(|&(_, inputs)| n.input.len() >= inputs && !n.output.is_empty())
    })
}

/// Whether a fused node may compute in `elem`.
fn fusable_type(elem: Option<&DataType>, float16: bool) -> bool {
    match elem {
        Some(DataType::Float) => true,
        Some(DataType::Float16) => float16,
        _ => false,
    }
}

/// Replaces every attention block of `graph` that fuses with one `Attention` node.
fn fuse_attention(
    graph: &mut GraphProto,
    types: &HashMap<String, DataType>,
    float16: bool,
    report: &mut TransformerFusionReport,
) {
    let view = GraphView::of(graph);
    let mut names = FreshNames::of(graph);
    let mut edits = Edits::default();
    let mut mask_casts: HashMap<String, String> = HashMap::new();
    for (i, node) in graph.node.iter().enumerate() {
        if node.op_type != "Softmax" || !node.domain.is_empty() {
            continue;
        }
        let block = match find_block(&view, i) {
            Found::Nothing => continue,
            Found::LeftAlone(why) => {
                report.left_alone.push(format!("{}: {why}", node.output[0]));
                continue;
            }
            Found::Block(block) => block,
        };
        let elem = types.get(&block.input);
        if !fusable_type(elem, float16) || types.get(&block.output) != elem {
            let why = "it computes in a type this backend has no fused attention for";
            report.left_alone.push(format!("{}: {why}", node.output[0]));
            continue;
        }
        let packed_names = (
            names.fresh(format!("{}.qkv_weight", block.output)),
            names.fresh(format!("{}.qkv_bias", block.output)),
        );
        let Some((w, b)) =
            pack::pack_qkv(&block.projections, |n| view.initializer(n), packed_names)
        else {
            let why = "its Q, K and V weights cannot be packed side by side";
            report.left_alone.push(format!("{}: {why}", node.output[0]));
            continue;
        };
        let mask = block.mask.as_ref().map(|m| {
            mask_casts
                .entry(m.raw.clone())
                .or_insert_with(|| names.fresh(format!("{}.int32", m.raw)))
                .clone()
        });
        let fused = attention_node(&block, [&w.name, &b.name], mask, &mut names);
        edits.added.extend([w, b]);
        edits.replaced.insert(block.output_node, fused);
        report.attention += 1;
    }
    drop(view);
    edits.front = mask_casts
        .iter()
        .map(|(raw, cast)| cast_node(raw, cast, DataType::Int32))
        .collect();
    edits.apply(graph);
}

/// The `Attention` node computing `block` from the packed weight and bias `packed` and the
/// int32 mask `mask`.
fn attention_node(
    block: &AttentionBlock,
    packed: [&str; 2],
    mask: Option<String>,
    names: &mut FreshNames,
) -> NodeProto {
    let mut inputs = vec![block.input.clone(), packed[0].into(), packed[1].into()];
    let mut attribute = vec![attr_int("num_heads", block.heads)];
    if let (Some(mask), Some(m)) = (mask, &block.mask) {
        inputs.push(mask);
        attribute.push(attr_float("mask_filter_value", m.filter));
    }
    let default_scale = 1.0 / (block.head_size as f32).sqrt();
    if (block.scale - default_scale).abs() > 1e-6 * default_scale {
        attribute.push(attr_float("scale", block.scale));
    }
    NodeProto {
        name: names.fresh(format!("{}.Attention", block.output)),
        op_type: "Attention".into(),
        domain: MS_DOMAIN.into(),
        input: inputs,
        output: vec![block.output.clone()],
        attribute,
        ..Default::default()
    }
}

/// Replaces every residual add and LayerNorm of `graph` that fuse with one
/// `SkipLayerNormalization` node.
fn fuse_skip_norms(
    graph: &mut GraphProto,
    types: &HashMap<String, DataType>,
    float16: bool,
    report: &mut TransformerFusionReport,
) {
    let view = GraphView::of(graph);
    let mut names = FreshNames::of(graph);
    let mut edits = Edits::default();
    for (i, node) in graph.node.iter().enumerate() {
        if node.op_type != "LayerNormalization" || !node.domain.is_empty() {
            continue;
        }
        let Some(norm) = find_skip_norm(&view, types, i) else {
            continue;
        };
        if !fusable_type(Some(&norm.elem), float16) {
            continue;
        }
        let Some((weights, copies)) = norm_weights(&view, &norm, &mut names) else {
            continue;
        };
        edits.added.extend(copies);
        let fused = skip_norm_node(&norm, weights, &mut names);
        edits.replaced.insert(norm.output_node, fused);
        report.skip_layer_norms += 1;
    }
    drop(view);
    edits.apply(graph);
}

/// The gamma and beta the fused node reads, in its type: the LayerNorm's own, or float16
/// copies of float32 ones (with the copies to add).
fn norm_weights(
    view: &GraphView,
    norm: &SkipNorm,
    names: &mut FreshNames,
) -> Option<([String; 2], Vec<TensorProto>)> {
    let mut copies = Vec::new();
    let mut in_type = |name: &str| -> Option<String> {
        let t = view.initializer(name)?;
        if t.data_type == norm.elem as i32 {
            return Some(name.to_string());
        }
        if norm.elem != DataType::Float16 {
            return None;
        }
        let copy = pack::as_float16(t, names.fresh(format!("{name}.fp16")))?;
        let copied = copy.name.clone();
        copies.push(copy);
        Some(copied)
    };
    let gamma = in_type(&norm.gamma)?;
    let beta = match &norm.beta {
        Some(b) => in_type(b)?,
        None => String::new(),
    };
    Some(([gamma, beta], copies))
}

/// The `SkipLayerNormalization` node computing `norm` with `weights` (gamma, beta).
fn skip_norm_node(norm: &SkipNorm, weights: [String; 2], names: &mut FreshNames) -> NodeProto {
    let [gamma, beta] = weights;
    let mut input = vec![norm.input.clone(), norm.skip.clone(), gamma, beta];
    if let Some(bias) = &norm.bias {
        input.push(bias.clone());
    }
    while input.last().is_some_and(String::is_empty) {
        input.pop();
    }
    NodeProto {
        name: names.fresh(format!("{}.SkipLayerNormalization", norm.output)),
        op_type: "SkipLayerNormalization".into(),
        domain: MS_DOMAIN.into(),
        input,
        output: vec![norm.output.clone()],
        attribute: vec![attr_float("epsilon", norm.epsilon)],
        ..Default::default()
    }
}

/// What one fusion changes in a graph: fused nodes in the places of the nodes they replace (by
/// index), new initializers, and nodes reading graph inputs only, to go first.
#[derive(Default)]
struct Edits {
    replaced: HashMap<usize, NodeProto>,
    added: Vec<TensorProto>,
    front: Vec<NodeProto>,
}

impl Edits {
    /// Makes the changes in `graph`.
    fn apply(self, graph: &mut GraphProto) {
        for (i, node) in self.replaced {
            graph.node[i] = node;
        }
        graph.initializer.extend(self.added);
        graph.node.splice(0..0, self.front);
    }
}

/// Removes the nodes nothing reads any more (the fused blocks' old nodes and the shape
/// arithmetic that fed their Reshapes), then the initializers nothing reads.
fn remove_dead(graph: &mut GraphProto) {
    loop {
        let view = GraphView::of(graph);
        let dead: HashSet<usize> = graph
            .node
            .iter()
            .enumerate()
            .filter(|(_, n)| {
                !n.output.is_empty()
                    && n.output
                        .iter()
                        .all(|o| o.is_empty() || (view.readers(o).is_empty() && !view.pinned(o)))
            })
            .map(|(i, _)| i)
            .collect();
        drop(view);
        if dead.is_empty() {
            break;
        }
        let mut i = 0;
        graph.node.retain(|_| {
            i += 1;
            !dead.contains(&(i - 1))
        });
    }
    let view = GraphView::of(graph);
    let declared: HashSet<&str> = graph.input.iter().map(|i| i.name.as_str()).collect();
    let unread: HashSet<String> = graph
        .initializer
        .iter()
        .map(|t| t.name.as_str())
        .filter(|n| view.readers(n).is_empty() && !view.pinned(n) && !declared.contains(n))
        .map(str::to_string)
        .collect();
    drop(view);
    graph.initializer.retain(|t| !unread.contains(&t.name));
}
