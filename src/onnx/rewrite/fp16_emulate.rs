//! FP16 numerics on a backend that computes float16 graphs in float32: the graph is rewritten to
//! compute in float32 and to round every tensor the float16 graph holds in float16 to float16.
//!
//! ONNX Runtime's CPU build runs the float16 ops it has no kernel for through casts to float32 and
//! keeps the chain wide; tract widens too. A float16 graph run there never overflows, never loses
//! a subnormal: it compares as a float32 model would. After this pass every tensor that is float16
//! in the original graph holds, under its original name, exactly the value float16 would hold
//! (range, overflow to ±inf, subnormals, round to nearest even): the node writes a float32 tensor
//! under a new name, then `Cast(to=FLOAT16)` and `Cast(to=FLOAT)` back under the original name.
//!
//! Neither backend folds that round trip: ONNX Runtime's duplicate-cast removal keeps a cast pair
//! that loses precision on the way (wide → narrow → wide), and its cast chain elimination is off
//! unless a session asks for it; tract only drops a cast to the type its input already has.
//! The command-line tests check it on a model whose float16 tensors overflow.
//!
//! Float16 initializers and the values of `Constant` / `ConstantOfShape` become float32 (exactly
//! the same numbers); `dtype` attributes that say float16 (`EyeLike`, `RandomNormal`, …) say
//! float32. Graph inputs and outputs keep their declared element types: a float16 input is cast to
//! float32 after entry, a float16 output is the final `Cast(to=FLOAT16)` itself.
//!
//! Subgraphs (`If` branches, `Loop` and `Scan` bodies) are rewritten the same way, with one
//! difference: their float16 inputs and outputs become float32 too (holding float16 values), as
//! the node around them hands them values of the main graph's rewrite and rounds what they give
//! back; the values they read from around them are read under the names that hold float32.

use super::fresh_names::FreshNames;
use super::pass::{Pass, PassReport};
pub(crate) use super::report::Fp16EmulationReport;
use super::types::{infer_elem_types, infer_elem_types_within};
use crate::onnx::dtype::{data_type, data_type_attr};
use crate::onnx::pb::tensor_proto::{DataLocation, DataType};
use crate::onnx::pb::{GraphProto, NodeProto, TensorProto};
use crate::onnx::subgraphs::{subgraphs, subgraphs_mut};
use crate::onnx::OnnxModel;
use anyhow::{bail, Context, Result};
use half::f16;
use std::collections::{HashMap, HashSet};

/// The FP16 emulation pass (see the module comment): a model with float16 compute becomes a
/// float32 model that rounds every float16 tensor to float16; a model without is left as it is.
/// A model without float16 compute is left as it is, so running it twice is harmless.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Fp16Emulation;

impl Pass for Fp16Emulation {
    fn name(&self) -> &'static str {
        "fp16-emulation"
    }

    fn run(&self, model: OnnxModel) -> Result<(OnnxModel, PassReport)> {
        let (model, report) = emulate_with_report(model)?;
        Ok((model, PassReport::Fp16Emulation(report)))
    }
}

/// The emulated model, the pass's report left out: what the tests compare.
#[cfg(test)]
pub(crate) fn emulate_fp16(model: OnnxModel) -> Result<OnnxModel> {
    Ok(Fp16Emulation.run(model)?.0)
}

/// Whether `model` computes anything in float16: a float16 input, initializer or node output,
/// in the main graph or in a subgraph.
pub(crate) fn has_float16_compute(model: &OnnxModel) -> bool {
    graph_has_float16(model.graph())
}

fn graph_has_float16(g: &GraphProto) -> bool {
    infer_elem_types(g)
        .values()
        .any(|&t| t == DataType::Float16)
        || g.output
            .iter()
            .chain(&g.value_info)
            .any(|v| declared_type(v) == Some(DataType::Float16))
        || g.node.iter().flat_map(subgraphs).any(graph_has_float16)
}

fn declared_type(v: &crate::onnx::pb::ValueInfoProto) -> Option<DataType> {
    crate::onnx::tensor_info::tensor_type(v).and_then(|t| data_type(t.elem_type))
}

fn emulate_with_report(model: OnnxModel) -> Result<(OnnxModel, Fp16EmulationReport)> {
    if !has_float16_compute(&model) {
        return Ok((model, Fp16EmulationReport::default()));
    }
    let path = model.path.display().to_string();
    let mut model = model;
    let external_f16 = model.graph().initializer.iter().any(|t| {
        t.data_type == DataType::Float16 as i32
            && t.data_location == Some(DataLocation::External as i32)
    });
    if external_f16 {
        model.inline_external_data()?;
    }
    let report = rewrite(model.graph_mut())
        .with_context(|| format!("{path}: cannot emulate FP16 in float32"))?;
    Ok((model, report))
}

fn cast(input: &str, output: &str, to: DataType) -> NodeProto {
    let suffix = if to == DataType::Float16 {
        "to_fp16"
    } else {
        "to_fp32"
    };
    NodeProto {
        name: format!("{output}_{suffix}"),
        op_type: "Cast".into(),
        input: vec![input.to_string()],
        output: vec![output.to_string()],
        attribute: vec![crate::onnx::graph_builder::attr_int("to", to as i64)],
        ..Default::default()
    }
}

/// The float32 values of a float16 tensor (raw data or `int32_data`), as the same tensor in
/// float32.
fn widen_tensor(t: &mut TensorProto) -> Result<()> {
    if t.data_location == Some(DataLocation::External as i32) {
        bail!("tensor '{}' is stored as external data", t.name);
    }
    let halves: Vec<f16> = if !t.raw_data.is_empty() {
        if !t.raw_data.len().is_multiple_of(2) {
            bail!(
                "tensor '{}': raw data is not a whole number of float16",
                t.name
            );
        }
        t.raw_data
            .chunks_exact(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]]))
            .collect()
    } else {
        // ONNX keeps float16 values in int32_data, one per element, in the low 16 bits.
        t.int32_data
            .iter()
            .map(|&v| f16::from_bits(v as u16))
            .collect()
    };
    t.data_type = DataType::Float as i32;
    t.int32_data.clear();
    t.float_data.clear();
    t.raw_data = halves
        .iter()
        .flat_map(|h| h.to_f32().to_le_bytes())
        .collect();
    Ok(())
}

/// Float16 values held in a node's attributes (`Constant`, `ConstantOfShape`) and `dtype`s that
/// say float16 become float32; true if the node's outputs are exact float16 values already.
fn widen_attributes(node: &mut NodeProto) -> Result<bool> {
    let constant = matches!(node.op_type.as_str(), "Constant" | "ConstantOfShape");
    for a in node.attribute.iter_mut() {
        if let Some(t) =
            a.t.as_mut()
                .filter(|t| t.data_type == DataType::Float16 as i32)
        {
            widen_tensor(t).with_context(|| format!("node '{}'", node.name))?;
        }
        if a.name == "dtype" && data_type_attr(a.i) == Some(DataType::Float16) {
            a.i = DataType::Float as i64;
        }
    }
    Ok(constant)
}

/// The rewrite itself (see the module comment).
fn rewrite(g: &mut GraphProto) -> Result<Fp16EmulationReport> {
    let mut names = FreshNames::of(g);
    let main = Outside {
        types: &HashMap::new(),
        wide: &HashMap::new(),
        main: true,
    };
    rewrite_graph(g, &main, &mut names)
}

/// Rewrites the subgraphs `node` holds, adding what they did to `report`.
fn rewrite_subgraphs(
    node: &mut NodeProto,
    around: &Outside,
    names: &mut FreshNames,
    report: &mut Fp16EmulationReport,
) -> Result<()> {
    for sub in subgraphs_mut(node) {
        let inner = rewrite_graph(sub, around, names)?;
        report.rounded += inner.rounded;
        report.converted_initializers += inner.converted_initializers;
        report.casts += inner.casts;
    }
    Ok(())
}

/// What a graph's rewrite needs from the graphs around it.
struct Outside<'a> {
    /// The element type of their values, as the model had them.
    types: &'a HashMap<String, DataType>,
    /// Their float16 values whose float32 copy has another name.
    wide: &'a HashMap<String, String>,
    /// The model's own graph (its float16 inputs and outputs stay float16).
    main: bool,
}

/// [`rewrite`] of one graph, then of its subgraphs.
fn rewrite_graph(
    g: &mut GraphProto,
    outside: &Outside,
    names: &mut FreshNames,
) -> Result<Fp16EmulationReport> {
    let types = infer_elem_types_within(g, outside.types);
    let is16 = |n: &str| types.get(n) == Some(&DataType::Float16);
    let declared16 = |v: &crate::onnx::pb::ValueInfoProto| {
        is16(&v.name) || declared_type(v) == Some(DataType::Float16)
    };
    let mut report = Fp16EmulationReport::default();
    let inputs: HashSet<String> = g.input.iter().map(|v| v.name.clone()).collect();
    let outputs16: HashSet<String> = match outside.main {
        true => g
            .output
            .iter()
            .filter(|v| declared16(v))
            .map(|v| v.name.clone())
            .collect(),
        false => HashSet::new(),
    };
    let read: HashSet<String> = g.node.iter().flat_map(|n| n.input.clone()).collect();
    // A float16 tensor whose float32 value lives under another name than its own.
    let mut wide: HashMap<String, String> = outside.wide.clone();
    let mut nodes: Vec<NodeProto> = Vec::new();
    if outside.main {
        for v in g.input.iter().filter(|v| is16(&v.name)) {
            let w = names.fresh(format!("{}.fp32", v.name));
            nodes.push(cast(&v.name, &w, DataType::Float));
            wide.insert(v.name.clone(), w);
            report.casts += 1;
        }
    } else {
        let boundary = g.input.iter_mut().chain(g.output.iter_mut());
        boundary
            .filter(|v| declared16(v))
            .filter_map(crate::onnx::tensor_info::tensor_type_mut)
            .for_each(|t| t.elem_type = DataType::Float as i32);
    }
    for t in g.initializer.iter_mut() {
        if t.data_type != DataType::Float16 as i32 || inputs.contains(&t.name) {
            continue;
        }
        widen_tensor(t)?;
        report.converted_initializers += 1;
        if outputs16.contains(&t.name) {
            let orig = std::mem::take(&mut t.name);
            let w = names.fresh(format!("{orig}.fp32"));
            nodes.push(cast(&w, &orig, DataType::Float16));
            t.name = w.clone();
            wide.insert(orig, w);
            report.casts += 1;
        }
    }
    for mut node in std::mem::take(&mut g.node) {
        for i in node.input.iter_mut() {
            if let Some(w) = wide.get(i) {
                *i = w.clone();
            }
        }
        let around = Outside {
            types: &types,
            wide: &wide,
            main: false,
        };
        rewrite_subgraphs(&mut node, &around, names, &mut report)?;
        let exact = widen_attributes(&mut node)?;
        let cast16 = node.op_type == "Cast"
            && crate::onnx::attributes::int_attr(&node, "to").and_then(data_type_attr)
                == Some(DataType::Float16);
        let mut after = Vec::new();
        for o in node.output.iter_mut() {
            if o.is_empty() || !(is16(o) || outputs16.contains(o.as_str())) {
                continue;
            }
            let orig = o.clone();
            let is_out = outputs16.contains(&orig);
            let wide_name = if is_out {
                let w = names.fresh(format!("{orig}.fp32"));
                wide.insert(orig.clone(), w.clone());
                w
            } else {
                orig.clone()
            };
            let half = if is_out {
                orig.clone()
            } else {
                names.fresh(format!("{orig}.fp16"))
            };
            report.rounded += 1;
            if exact && !cast16 {
                *o = wide_name.clone();
                if is_out {
                    after.push(cast(&wide_name, &half, DataType::Float16));
                }
                continue;
            }
            if cast16 {
                *o = half.clone();
            } else {
                let pre = names.fresh(format!("{orig}.unrounded"));
                *o = pre.clone();
                after.push(cast(&pre, &half, DataType::Float16));
            }
            if !is_out || read.contains(&orig) {
                after.push(cast(&half, &wide_name, DataType::Float));
            }
        }
        report.casts += after.len();
        nodes.push(node);
        nodes.extend(after);
    }
    g.node = nodes;
    if !outside.main {
        // A subgraph handing on a float16 value from around it hands on its float32 copy.
        g.output
            .iter_mut()
            .filter_map(|v| Some((wide.get(&v.name)?, v)))
            .for_each(|(w, v)| v.name = w.clone());
    }
    g.value_info
        .iter_mut()
        .filter(|v| is16(&v.name) && !outputs16.contains(&v.name))
        .filter_map(crate::onnx::tensor_info::tensor_type_mut)
        .for_each(|t| t.elem_type = DataType::Float as i32);
    g.value_info.retain(|v| !outputs16.contains(&v.name));
    Ok(report)
}

#[cfg(test)]
mod tests;
