//! The FP16 rewrite inside subgraphs (an `If`'s branches, a `Loop`'s or `Scan`'s body). The node
//! holding them stays float32 at its boundary; each subgraph is converted like a graph of its
//! own whose inputs and outputs are float32, reading the values around it in whatever precision
//! the rewrite gave them, behind a Cast where its readers need the other one.

use super::fp16_values::FileWeights;
use super::fresh_names::FreshNames;
use super::report::Fp16Report;
use crate::onnx::graph_builder::cast_node;
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::{GraphProto, NodeProto};
use crate::onnx::subgraphs::{outer_reads, subgraphs_mut};
use anyhow::Result;
use std::collections::{HashMap, HashSet};

/// Where a graph being converted sits, and what its conversion needs from around it.
pub(super) struct Around<'a> {
    /// The model's own graph: its outputs keep their names (a subgraph's are matched by
    /// position, so a subgraph hands on a cast of its output instead).
    pub main: bool,
    /// The graph's float inputs and outputs in float16 (the main graph's, when asked).
    pub fp16_io: bool,
    /// Where the graph's weights still are in the model file's bytes.
    pub file: Option<FileWeights<'a>>,
    /// The element type of every value of the graphs around it, as the model had them.
    pub types: &'a HashMap<String, DataType>,
    /// The precision every float value of the graphs around it has after the rewrite.
    pub home: &'a HashMap<String, DataType>,
}

/// The conversion of one graph ([`super::fp16`]'s), which converts its subgraphs in turn.
pub(super) type ConvertGraph = fn(
    &mut GraphProto,
    &dyn Fn(&NodeProto) -> bool,
    Around,
    &mut FreshNames,
    &mut Fp16Report,
) -> Result<()>;

/// What the subgraphs of `g`'s nodes read from around them, each read with whether it wants
/// float16: a reader `chosen` keeps, a slot that must stay float32 (`fp32_slot`), and a value a
/// subgraph hands on as its (float32) output want float32.
pub(super) fn reads_by_subgraphs(
    g: &GraphProto,
    chosen: &dyn Fn(&NodeProto) -> bool,
    fp32_slot: impl Fn(&str, usize) -> bool,
) -> Vec<(String, bool)> {
    g.node
        .iter()
        .flat_map(outer_reads)
        .map(|read| {
            let wants16 = read
                .reader
                .is_some_and(|(n, slot)| !chosen(n) && !fp32_slot(&n.op_type, slot));
            (read.name.to_string(), wants16)
        })
        .collect()
}

/// A subgraph's float outputs are float32, as the node holding it is: an output made in
/// float16 is cast, and the subgraph hands on the cast in its place (subgraph outputs are
/// matched by position, not by name). The casts join `cast_at_start` (a value from around or an
/// input) or `cast_after` (a value a node of the subgraph makes).
pub(super) fn cast_subgraph_outputs(
    g: &mut GraphProto,
    home: &HashMap<String, DataType>,
    (cast_at_start, cast_after): (&mut Vec<NodeProto>, &mut HashMap<String, Vec<NodeProto>>),
    names: &mut FreshNames,
    report: &mut Fp16Report,
) {
    let made_here: HashSet<String> = g.node.iter().flat_map(|n| n.output.clone()).collect();
    for v in g.output.iter_mut() {
        if home.get(&v.name) != Some(&DataType::Float16) {
            continue;
        }
        let handed_on = names.fresh(format!("{}_fp32", v.name));
        let cast = cast_node(&v.name, &handed_on, DataType::Float);
        if made_here.contains(&v.name) {
            cast_after.entry(v.name.clone()).or_default().push(cast);
        } else {
            cast_at_start.push(cast);
        }
        v.name = handed_on;
        report.casts += 1;
    }
}

/// Converts the subgraphs of `g`'s nodes; `(types, home)`: the element type and the precision
/// of the values of `g` and the graphs around it.
pub(super) fn convert_subgraphs(
    g: &mut GraphProto,
    chosen: &dyn Fn(&NodeProto) -> bool,
    (types, home): (&HashMap<String, DataType>, &HashMap<String, DataType>),
    names: &mut FreshNames,
    report: &mut Fp16Report,
    convert_graph: ConvertGraph,
) -> Result<()> {
    for node in g.node.iter_mut() {
        for sub in subgraphs_mut(node) {
            let around = Around {
                main: false,
                fp16_io: false,
                file: None,
                types,
                home,
            };
            convert_graph(sub, chosen, around, names, report)?;
        }
    }
    Ok(())
}
