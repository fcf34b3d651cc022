//! The FP16 rewrite: float32 initializers and computation become float16; chosen ops stay in
//! float32 behind Casts; graph inputs and outputs stay float32 unless asked otherwise.
//!
//! Every float tensor gets a precision where it is made (float16 unless a kept op makes it, or
//! it is a float32 graph input) and every node input a precision it needs (float32 for kept
//! ops and for the inputs ONNX requires in float32); a Cast is inserted wherever the two differ.

pub use super::fp16_keep::KeepNodeError;
use super::fp16_keep::{
    float16_reads, kept_names, resolve_kept_nodes, unread_constant, wide_batchnorms,
};
use super::fp16_subgraphs::{cast_subgraph_outputs, convert_subgraphs, reads_by_subgraphs, Around};
use super::fp16_values::{convert_tensors, to_f16_clamped, FileWeights};
use super::fresh_names::FreshNames;
use super::gemm_to_matmul::gemm_to_matmul;
use super::initializer::{read_f32, set_f16};
use super::pass::{Pass, PassReport};
pub(crate) use super::report::Fp16Report;
use super::types::{infer_elem_types, infer_elem_types_within};
use crate::onnx::deferred_weights::DeferredWeights;
use crate::onnx::dtype::{data_type, data_type_attr};
use crate::onnx::graph_builder::cast_node;
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::{GraphProto, NodeProto};
use crate::onnx::subgraphs::holds_subgraph;
use crate::onnx::tensor_info::tensor_type_mut;
use crate::onnx::OnnxModel;
use anyhow::{bail, Result};
use std::collections::{HashMap, HashSet};

/// Ops kept in float32 by default: those whose float16 result overflows or loses precision.
///
/// - `Exp`, `Pow`: overflow (float16 tops out at 65504; exp(11.1) is already past it).
/// - `Log`, `Reciprocal`, `Sqrt`-free normalizations: lose precision near zero.
/// - Reductions that accumulate (`ReduceSum`, `ReduceMean`, `ReduceProd`, `ReduceSumSquare`,
///   `ReduceL1`, `ReduceL2`, `ReduceLogSum`, `ReduceLogSumExp`, `CumSum`): sums of many terms
///   overflow or swamp small terms.
/// - `Softmax`, `LogSoftmax`: exp and a sum over a whole axis.
/// - `LayerNormalization`, `InstanceNormalization`, `GroupNormalization`: a variance over a
///   whole axis (sum of squares) overflows in float16.
///
/// Convolutions, Gemm, BatchNormalization, pooling and activations are fine in float16 (TensorRT
/// accumulates convolutions in float32 anyway).
pub const DEFAULT_KEEP_FP32: &[&str] = &[
    "Exp",
    "Log",
    "Pow",
    "Reciprocal",
    "ReduceSum",
    "ReduceMean",
    "ReduceProd",
    "ReduceSumSquare",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "CumSum",
    "Softmax",
    "LogSoftmax",
    "LayerNormalization",
    "InstanceNormalization",
    "GroupNormalization",
];

/// Ops that ONNX defines for no float16 type: always computed in float32, whatever the keep
/// list says (`Range`, which YOLOv8 exports use to lay out their anchor grid, takes float,
/// double and integers only; ONNX Runtime refuses a float16 one when it loads the model).
pub(crate) const NO_FLOAT16: &[&str] = &["Range"];

/// Options of the FP16 rewrite.
#[derive(Clone, Debug)]
pub struct Fp16Options {
    /// Op types computed in float32.
    pub keep_fp32: Vec<String>,
    /// Make graph inputs and outputs float16 too (no Cast at the boundary).
    pub fp16_io: bool,
    /// Nodes computed in float32 whatever their op, by name or `#INDEX` (the INT8 nodes of a
    /// Q/DQ graph whose float part runs in FP16; `--keep-fp32-nodes`). A name no node has is a
    /// [`KeepNodeError`].
    pub keep_nodes: Vec<String>,
    /// Regular expressions over whole node names: the nodes they match are computed in float32
    /// (`--keep-fp32-regex`; one that matches nothing is a warning).
    pub keep_regex: Vec<String>,
}

impl Default for Fp16Options {
    fn default() -> Self {
        Fp16Options {
            keep_fp32: DEFAULT_KEEP_FP32.iter().map(|s| s.to_string()).collect(),
            fp16_io: false,
            keep_nodes: vec![],
            keep_regex: vec![],
        }
    }
}

/// Whether an input slot of an op must be float32 whatever the graph's precision.
fn needs_fp32_slot(op: &str, slot: usize) -> bool {
    matches!(
        (op, slot),
        ("Resize", 1)
            | ("Resize", 2)
            | ("Upsample", 1)
            | ("QuantizeLinear", 1)
            | ("DequantizeLinear", 1)
    )
}

/// The FP16 pass: the model becomes float16 as its options say (see the module comment).
///
/// Errors if the model already holds float16 tensors or has no float32 ones.
#[derive(Clone, Debug, Default)]
pub struct Fp16(pub Fp16Options);

impl Pass for Fp16 {
    fn name(&self) -> &'static str {
        "fp16"
    }

    fn run(&self, model: OnnxModel) -> Result<(OnnxModel, PassReport)> {
        let (model, report) = to_fp16(model, &self.0)?;
        Ok((model, PassReport::Fp16(report)))
    }
}

/// The FP16 rewrite of a model whose large weights are still in its file's bytes `file` (see
/// [`crate::onnx::deferred_weights`]): the weights the rewrite reads before converting
/// (a Gemm's, a BatchNormalization's statistics) are put back first; every other one goes from
/// the file's float32 bytes straight to float16, without a float32 copy in between.
pub(crate) fn to_fp16_deferred(
    model: OnnxModel,
    options: &Fp16Options,
    deferred: DeferredWeights,
    file: &[u8],
) -> Result<(OnnxModel, Fp16Report)> {
    let mut model = model;
    let read_first: HashSet<String> = model
        .graph()
        .node
        .iter()
        .filter(|n| matches!(n.op_type.as_str(), "Gemm" | "BatchNormalization"))
        .flat_map(|n| n.input.iter().skip(1).cloned())
        .collect();
    let mut deferred = deferred;
    deferred.restore_named(model.graph_mut(), file, &read_first);
    let ranges = deferred.into_named(model.graph());
    to_fp16_from(model, options, Some((&ranges, file)))
}

/// Rewrites `model` to float16. Errors if the model already holds float16 tensors.
fn to_fp16(model: OnnxModel, options: &Fp16Options) -> Result<(OnnxModel, Fp16Report)> {
    to_fp16_from(model, options, None)
}

/// [`to_fp16`], with the weights still in the model file given by `file`.
fn to_fp16_from(
    model: OnnxModel,
    options: &Fp16Options,
    file: Option<FileWeights>,
) -> Result<(OnnxModel, Fp16Report)> {
    check_convertible(&infer_elem_types(model.graph()))?;
    let keep_ops: HashSet<&str> = options.keep_fp32.iter().map(String::as_str).collect();
    let mut out = model;
    let (named, warnings) =
        resolve_kept_nodes(out.graph_mut(), &options.keep_nodes, &options.keep_regex)?;
    for w in &warnings {
        tracing::warn!("{}: {w}", out.path.display());
    }
    let keep_nodes = kept_names(&named);
    gemm_to_matmul(out.graph_mut())?;
    let wide = wide_batchnorms(out.graph());
    // A node holding subgraphs (If, Loop, Scan) meets them in float32: each subgraph is
    // converted inside, behind its own Casts.
    let chosen = |node: &NodeProto| {
        keep_ops.contains(node.op_type.as_str())
            || NO_FLOAT16.contains(&node.op_type.as_str())
            || (!node.name.is_empty() && keep_nodes.contains(node.name.as_str()))
            || node.output.first().is_some_and(|o| wide.contains(o))
            || holds_subgraph(node)
    };
    let mut report = Fp16Report {
        kept_nodes: named,
        warnings,
        ..Default::default()
    };
    let nothing = HashMap::new();
    let main = Around {
        main: true,
        fp16_io: options.fp16_io,
        file,
        types: &nothing,
        home: &nothing,
    };
    let mut names = FreshNames::of(out.graph());
    convert_graph(out.graph_mut(), &chosen, main, &mut names, &mut report)?;
    Ok((out, report))
}

/// Converts one graph: each float tensor gets its precision where it is made, a Cast goes
/// wherever a reader needs the other one, then its subgraphs are converted in turn.
pub(super) fn convert_graph(
    g: &mut GraphProto,
    chosen: &dyn Fn(&NodeProto) -> bool,
    around: Around,
    names: &mut FreshNames,
    report: &mut Fp16Report,
) -> Result<()> {
    let types = infer_elem_types_within(g, around.types);
    let is_float = |n: &str| types.get(n) == Some(&DataType::Float);
    let outer = reads_by_subgraphs(g, chosen, needs_fp32_slot);
    let mut reads16 = float16_reads(g, &chosen, needs_fp32_slot);
    reads16.extend(outer.iter().filter(|r| r.1).map(|r| r.0.clone()));
    let keep = |node: &NodeProto| chosen(node) || unread_constant(node, &reads16);
    let mut home = around.home.clone();
    home.extend(float_homes(g, &is_float, &keep, around.fp16_io));
    convert_initializers(g, &keep, &outer, &mut home, around.file, report)?;
    convert_typed_attributes(g, &keep, report)?;
    let (mut cast_at_start, mut cast_after) = cast_for_readers(g, &keep, &home, names, report);
    let renames = if around.main {
        cast_outputs(g, &home, around.fp16_io, &mut cast_after, names, report)
    } else {
        let casts = (&mut cast_at_start, &mut cast_after);
        cast_subgraph_outputs(g, &home, casts, names, report);
        HashMap::new()
    };
    if around.fp16_io {
        for v in g.input.iter_mut() {
            if is_float(&v.name) {
                if let Some(t) = tensor_type_mut(v) {
                    t.elem_type = DataType::Float16 as i32;
                }
            }
        }
    }
    place_casts(g, &renames, cast_after, cast_at_start);
    g.value_info.clear();
    convert_subgraphs(g, chosen, (&types, &home), names, report, convert_graph)
}

/// Refuses a model that already holds float16 tensors or has no float32 ones (`types`: the
/// element type of each tensor).
fn check_convertible(types: &HashMap<String, DataType>) -> Result<()> {
    let already: Vec<&String> = types
        .iter()
        .filter(|(_, &t)| t == DataType::Float16)
        .map(|(n, _)| n)
        .collect();
    if !already.is_empty() {
        let mut names: Vec<&String> = already.clone();
        names.sort();
        bail!(
            "the model is already FP16: {} tensors are float16 (e.g. '{}'); nothing to convert",
            already.len(),
            names[0]
        );
    }
    if !types.values().any(|&t| t == DataType::Float) {
        bail!("the model has no float32 tensors; nothing to convert to FP16");
    }
    Ok(())
}

/// Where each float tensor is made, and in which precision: graph inputs in float16 only with
/// `fp16_io`, node outputs in float32 where `keep` keeps the node.
fn float_homes(
    g: &GraphProto,
    is_float: &impl Fn(&str) -> bool,
    keep: &impl Fn(&NodeProto) -> bool,
    fp16_io: bool,
) -> HashMap<String, DataType> {
    let mut home: HashMap<String, DataType> = HashMap::new();
    for v in &g.input {
        if is_float(&v.name) {
            home.insert(
                v.name.clone(),
                if fp16_io {
                    DataType::Float16
                } else {
                    DataType::Float
                },
            );
        }
    }
    for node in &g.node {
        let p = if keep(node) {
            DataType::Float
        } else {
            DataType::Float16
        };
        for o in &node.output {
            if is_float(o) {
                home.insert(o.clone(), p);
            }
        }
    }
    home
}

/// Initializers: float16 unless every reader needs float32 (`outer`: the reads by subgraphs,
/// each with whether it wants float16); their precision goes into `home`.
fn convert_initializers(
    g: &mut GraphProto,
    keep: &impl Fn(&NodeProto) -> bool,
    outer: &[(String, bool)],
    home: &mut HashMap<String, DataType>,
    file: Option<FileWeights>,
    report: &mut Fp16Report,
) -> Result<()> {
    let mut init_needs: HashMap<String, (bool, bool)> = HashMap::new(); // (needs16, needs32)
    for node in &g.node {
        let kept = keep(node);
        for (slot, i) in node.input.iter().enumerate() {
            let e = init_needs.entry(i.clone()).or_default();
            if kept || needs_fp32_slot(&node.op_type, slot) {
                e.1 = true;
            } else {
                e.0 = true;
            }
        }
    }
    for (name, wants16) in outer {
        let e = init_needs.entry(name.clone()).or_default();
        if *wants16 {
            e.0 = true;
        } else {
            e.1 = true;
        }
    }
    let graph_inputs: HashSet<String> = g.input.iter().map(|v| v.name.clone()).collect();
    let mut convert = Vec::with_capacity(g.initializer.len());
    for init in &g.initializer {
        if data_type(init.data_type) != Some(DataType::Float) || graph_inputs.contains(&init.name) {
            convert.push(false);
            continue;
        }
        let (n16, _) = init_needs.get(&init.name).copied().unwrap_or_default();
        let precision = if n16 {
            DataType::Float16
        } else {
            DataType::Float
        };
        home.insert(init.name.clone(), precision);
        convert.push(n16);
    }
    for name in convert_tensors(&mut g.initializer, &convert, file)? {
        tracing::warn!(
            "initializer '{name}' has values beyond the float16 range (±65504); clamped"
        );
        report.clamped.push(name);
    }
    report.converted_initializers += convert.iter().filter(|&&c| c).count();
    Ok(())
}

/// Constants, Casts and ConstantOfShape made in float16 carry their type in attributes.
fn convert_typed_attributes(
    g: &mut GraphProto,
    keep: &impl Fn(&NodeProto) -> bool,
    report: &mut Fp16Report,
) -> Result<()> {
    for node in g.node.iter_mut() {
        if keep(node) {
            report.kept_fp32_nodes += 1;
            continue;
        }
        match node.op_type.as_str() {
            "Constant" | "ConstantOfShape" => {
                for a in node.attribute.iter_mut() {
                    if let Some(t) =
                        a.t.as_mut()
                            .filter(|t| data_type(t.data_type) == Some(DataType::Float))
                    {
                        let (h, clamped) = to_f16_clamped(&read_f32(t)?);
                        if clamped {
                            report.clamped.extend(node.output.first().cloned());
                        }
                        set_f16(t, &h);
                    }
                    if a.name == "value_float" || a.name == "value_floats" {
                        let vals: Vec<f32> = if a.name == "value_float" {
                            vec![a.f]
                        } else {
                            a.floats.clone()
                        };
                        let (h, clamped) = to_f16_clamped(&vals);
                        if clamped {
                            report.clamped.extend(node.output.first().cloned());
                        }
                        let dims = if a.name == "value_float" {
                            vec![]
                        } else {
                            vec![vals.len() as i64]
                        };
                        let mut t = crate::onnx::graph_builder::tensor_f32("", &dims, &vals);
                        set_f16(&mut t, &h);
                        *a = crate::onnx::pb::AttributeProto {
                            name: "value".into(),
                            r#type: crate::onnx::pb::attribute_proto::AttributeType::Tensor as i32,
                            t: Some(t),
                            ..Default::default()
                        };
                    }
                }
            }
            "Cast" => {
                for a in node.attribute.iter_mut().filter(|a| a.name == "to") {
                    if data_type_attr(a.i) == Some(DataType::Float) {
                        a.i = DataType::Float16 as i64;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Casts where a reader needs another precision than the tensor has: the readers are rewired
/// to the cast tensors; returns the casts of graph inputs and initializers (placed first) and,
/// by the tensor they cast, those placed after its producer.
fn cast_for_readers(
    g: &mut GraphProto,
    keep: &impl Fn(&NodeProto) -> bool,
    home: &HashMap<String, DataType>,
    names: &mut FreshNames,
    report: &mut Fp16Report,
) -> (Vec<NodeProto>, HashMap<String, Vec<NodeProto>>) {
    let mut casts: HashMap<(String, DataType), String> = HashMap::new();
    let mut cast_after: HashMap<String, Vec<NodeProto>> = HashMap::new();
    let mut cast_at_start: Vec<NodeProto> = Vec::new();
    let producers: HashSet<String> = g.node.iter().flat_map(|n| n.output.clone()).collect();
    for node in g.node.iter_mut() {
        let kept = keep(node);
        for slot in 0..node.input.len() {
            let name = node.input[slot].clone();
            let Some(&have) = home.get(&name) else {
                continue;
            };
            let want = if kept || needs_fp32_slot(&node.op_type, slot) {
                DataType::Float
            } else {
                DataType::Float16
            };
            if have == want {
                continue;
            }
            let cast_name = casts
                .entry((name.clone(), want))
                .or_insert_with(|| {
                    let suffix = if want == DataType::Float {
                        "fp32"
                    } else {
                        "fp16"
                    };
                    let out_name = names.fresh(format!("{name}_{suffix}"));
                    let c = cast_node(&name, &out_name, want);
                    if producers.contains(&name) {
                        cast_after.entry(name.clone()).or_default().push(c);
                    } else {
                        cast_at_start.push(c);
                    }
                    report.casts += 1;
                    out_name
                })
                .clone();
            node.input[slot] = cast_name;
        }
    }
    (cast_at_start, cast_after)
}

/// Graph outputs: float32 at the boundary unless `fp16_io`. An output made in the other
/// precision is renamed inside the graph and cast to its own name (the cast joins
/// `cast_after`); returns the renames.
fn cast_outputs(
    g: &mut GraphProto,
    home: &HashMap<String, DataType>,
    fp16_io: bool,
    cast_after: &mut HashMap<String, Vec<NodeProto>>,
    names: &mut FreshNames,
    report: &mut Fp16Report,
) -> HashMap<String, String> {
    let want_out = if fp16_io {
        DataType::Float16
    } else {
        DataType::Float
    };
    let mut renames: HashMap<String, String> = HashMap::new();
    for v in g.output.iter_mut() {
        let Some(&have) = home.get(&v.name) else {
            continue;
        };
        if let Some(t) = tensor_type_mut(v) {
            t.elem_type = want_out as i32;
        }
        if have != want_out {
            let suffix = if have == DataType::Float16 {
                "fp16"
            } else {
                "fp32"
            };
            let inner = names.fresh(format!("{}_{suffix}", v.name));
            renames.insert(v.name.clone(), inner.clone());
            cast_after
                .entry(inner.clone())
                .or_default()
                .push(cast_node(&inner, &v.name, want_out));
            report.casts += 1;
        }
    }
    renames
}

/// Applies `renames` to the nodes and the casts, then places the casts: `cast_at_start` first,
/// each of `cast_after` right after the node that makes the tensor it casts.
fn place_casts(
    g: &mut GraphProto,
    renames: &HashMap<String, String>,
    mut cast_after: HashMap<String, Vec<NodeProto>>,
    cast_at_start: Vec<NodeProto>,
) {
    // The producer of a renamed output writes the inner name; readers of the old name too.
    for node in g.node.iter_mut() {
        for o in node.output.iter_mut() {
            if let Some(r) = renames.get(o) {
                *o = r.clone();
            }
        }
        for i in node.input.iter_mut() {
            if let Some(r) = renames.get(i) {
                *i = r.clone();
            }
        }
    }
    for list in cast_after.values_mut() {
        for c in list.iter_mut() {
            if let Some(r) = renames.get(&c.input[0]) {
                c.input[0] = r.clone();
            }
        }
    }
    let mut renamed_after: HashMap<String, Vec<NodeProto>> = HashMap::new();
    for (k, v) in cast_after {
        let k = renames.get(&k).cloned().unwrap_or(k);
        renamed_after.entry(k).or_default().extend(v);
    }
    let mut cast_after = renamed_after;
    let old = std::mem::take(&mut g.node);
    let mut nodes = cast_at_start;
    for n in old {
        let outs = n.output.clone();
        nodes.push(n);
        for o in &outs {
            if let Some(extra) = cast_after.remove(o) {
                nodes.extend(extra);
            }
        }
    }
    g.node = nodes;
}

#[cfg(test)]
mod tests;
