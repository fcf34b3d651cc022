//! Marking intermediate tensors as graph outputs for a layer-by-layer comparison, each declared
//! with the element type the graph gives it (a float16 graph's tensors come out as float16),
//! and the float tensors a graph makes, in graph order, with the node that makes each.

use super::pass::{Pass, PassReport};
use super::types::infer_elem_types;
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::tensor_info::unshaped_value_info;
use crate::onnx::OnnxModel;
use anyhow::{bail, Result};
use std::collections::{HashMap, HashSet};

/// A float tensor made by a node of the main graph.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ProducedTensor {
    /// The tensor's name.
    pub name: String,
    /// The name of the node that makes it (`#i` for an unnamed node, `i` its place).
    pub node: String,
    /// That node's op type.
    pub op: String,
    /// The node's place in the graph's (topological) node order.
    pub order: usize,
    /// Nodes on the longest path from a graph input or initializer to it, this one included.
    pub depth: usize,
    /// Its element type.
    pub elem_type: DataType,
}

/// Whether `t` is a floating-point element type.
fn is_float(t: DataType) -> bool {
    matches!(
        t,
        DataType::Float | DataType::Float16 | DataType::Double | DataType::Bfloat16
    )
}

/// Every float tensor the main graph's nodes make, in node order (ONNX keeps nodes in
/// topological order); tensors whose element type cannot be told are left out.
pub(crate) fn float_tensors(model: &OnnxModel) -> Vec<ProducedTensor> {
    let g = model.graph();
    let types = infer_elem_types(g);
    let mut depth: HashMap<&str, usize> = HashMap::new();
    let mut out = vec![];
    for (order, node) in g.node.iter().enumerate() {
        let d = 1 + node
            .input
            .iter()
            .filter_map(|i| depth.get(i.as_str()).copied())
            .max()
            .unwrap_or(0);
        for name in node.output.iter().filter(|n| !n.is_empty()) {
            depth.insert(name, d);
            let Some(&elem_type) = types.get(name).filter(|t| is_float(**t)) else {
                continue;
            };
            out.push(ProducedTensor {
                name: name.clone(),
                node: if node.name.is_empty() {
                    format!("#{order}")
                } else {
                    node.name.clone()
                },
                op: node.op_type.clone(),
                order,
                depth: d,
                elem_type,
            });
        }
    }
    out
}

/// The marking pass: every tensor of `names` that a node makes and that is not already a graph
/// output becomes one, declared with the element type [`infer_elem_types`] finds for it
/// (float32 where it cannot be told), with no shape (the backend infers it). The graph's own
/// outputs keep their places; the marked ones follow in the order of `names`.
#[derive(Clone, Debug)]
pub(crate) struct MarkOutputs {
    /// The tensors to mark.
    pub names: Vec<String>,
}

impl Pass for MarkOutputs {
    fn name(&self) -> &'static str {
        "mark-outputs"
    }

    fn run(&self, model: OnnxModel) -> Result<(OnnxModel, PassReport)> {
        let mut model = model;
        let types = infer_elem_types(model.graph());
        let g = model.graph_mut();
        let produced: HashSet<&String> = g.node.iter().flat_map(|n| n.output.iter()).collect();
        let mut outputs: HashSet<String> = g.output.iter().map(|v| v.name.clone()).collect();
        let mut added = vec![];
        for name in &self.names {
            if outputs.contains(name) {
                continue;
            }
            if !produced.contains(name) {
                bail!("tensor '{name}' is not made by any node of the graph");
            }
            let t = types.get(name).copied().unwrap_or(DataType::Float);
            added.push(unshaped_value_info(name, t as i32));
            outputs.insert(name.clone());
        }
        let marked = added.iter().map(|v| v.name.clone()).collect();
        g.output.extend(added);
        Ok((model, PassReport::MarkOutputs { marked }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::rewrite::fp16::Fp16;
    use crate::onnx::test_models;

    #[test]
    fn lists_float_tensors_in_order_and_marks_them_with_their_own_type() {
        let m = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
        let all = float_tensors(&m);
        assert!(all.iter().any(|t| t.name == "flat"));
        assert!(
            all.iter().all(|t| t.name != "flatten.shape"),
            "int64 left out"
        );
        assert!(all.windows(2).all(|w| w[0].order <= w[1].order));
        assert_eq!(all.last().unwrap().name, "logits");
        let (half, _) = Fp16(Default::default()).run(m).unwrap();
        let names: Vec<String> = all.iter().map(|t| t.name.clone()).collect();
        let (marked, _) = MarkOutputs { names }.run(half).unwrap();
        let out = &marked.graph().output;
        assert_eq!(out[0].name, "logits", "the graph's own output stays first");
        let flat = out.iter().find(|v| v.name == "flat").unwrap();
        let t = crate::onnx::tensor_info::tensor_type(flat).unwrap();
        assert_eq!(t.elem_type, DataType::Float16 as i32);
        let nope = MarkOutputs {
            names: vec!["nope".into()],
        };
        assert!(nope.run(marked).is_err());
    }
}
