//! Where INT8 quantization goes, following TensorRT's Q/DQ placement guidance.
//!
//! Quantized (a Q/DQ pair on the input, so TensorRT runs the op in INT8):
//! - the activation inputs of Conv, ConvTranspose, Gemm and MatMul (both MatMul operands
//!   when neither is a weight), and their weights per output channel;
//! - the residual input of an Add that joins a convolution branch with a skip branch: the
//!   input *not* produced by Conv/BatchNormalization (if both are, input 1). TensorRT fuses
//!   the Add into the convolution and reads the skip tensor in INT8 only when that input
//!   carries a Q/DQ pair; the convolution's own output stays unquantized so the fusion holds.
//!
//! Not quantized: graph outputs, biases (left float; TensorRT folds them), non-float tensors.

use super::types::infer_elem_types;
use crate::onnx::attributes::int_attr;
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::GraphProto;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap, HashSet};

/// One activation tensor to quantize and the node inputs that will read its Q/DQ output.
#[derive(Clone, Debug, PartialEq)]
pub struct ActivationSite {
    /// Tensor name.
    pub tensor: String,
    /// `(node index, input index)` of every consumer that reads the dequantized tensor.
    pub(crate) consumers: Vec<(usize, usize)>,
}

/// One weight initializer to quantize per channel.
#[derive(Clone, Debug, PartialEq)]
pub struct WeightSite {
    /// Initializer name.
    pub tensor: String,
    /// `(node index, input index)` of the consumer.
    pub(crate) consumer: (usize, usize),
    /// The output-channel axis (one scale per index along it).
    pub axis: i64,
}

/// Everything the INT8 rewrite quantizes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuantPlan {
    /// Activations, in graph order.
    pub activations: Vec<ActivationSite>,
    /// Weights, in graph order.
    pub weights: Vec<WeightSite>,
}

impl QuantPlan {
    /// Whether the model has nothing to quantize.
    pub fn is_empty(&self) -> bool {
        self.activations.is_empty()
    }

    /// Names of the activation tensors, in graph order.
    pub(crate) fn activation_names(&self) -> Vec<String> {
        self.activations.iter().map(|a| a.tensor.clone()).collect()
    }

    /// The nodes that read a quantized input (activation or weight), ascending: the nodes that
    /// run in INT8.
    pub(crate) fn quantized_nodes(&self) -> BTreeSet<usize> {
        self.activations
            .iter()
            .flat_map(|a| a.consumers.iter().map(|c| c.0))
            .chain(self.weights.iter().map(|w| w.consumer.0))
            .collect()
    }

    /// The plan with the nodes of `float` left in float: none of their inputs is quantized, and
    /// an activation no other node reads quantized loses its Q/DQ pair.
    pub fn without(&self, float: &BTreeSet<usize>) -> QuantPlan {
        QuantPlan {
            activations: self
                .activations
                .iter()
                .filter_map(|a| {
                    let consumers: Vec<(usize, usize)> = a
                        .consumers
                        .iter()
                        .copied()
                        .filter(|c| !float.contains(&c.0))
                        .collect();
                    (!consumers.is_empty()).then(|| ActivationSite {
                        tensor: a.tensor.clone(),
                        consumers,
                    })
                })
                .collect(),
            weights: self
                .weights
                .iter()
                .filter(|w| !float.contains(&w.consumer.0))
                .cloned()
                .collect(),
        }
    }

    /// The plan with only the nodes of `int8` quantized.
    pub fn only(&self, int8: &BTreeSet<usize>) -> QuantPlan {
        let rest = self.quantized_nodes().difference(int8).copied().collect();
        self.without(&rest)
    }
}

/// How a node is named in reports and in an exclusion: its name, or `#INDEX` when the model
/// left it unnamed.
pub(crate) fn node_label(graph: &GraphProto, index: usize) -> String {
    match graph.node.get(index) {
        Some(n) if !n.name.is_empty() => n.name.clone(),
        _ => format!("#{index}"),
    }
}

/// The op type of the node at `index`, empty past the last node (beside [`node_label`], for the
/// same reports).
pub(crate) fn node_op(graph: &GraphProto, index: usize) -> String {
    graph
        .node
        .get(index)
        .map(|n| n.op_type.clone())
        .unwrap_or_default()
}

/// Nodes to leave in float: by name (or `#INDEX`, any node's place in the graph), by op type,
/// or by a regular expression over the names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exclusion {
    /// Node names or `#INDEX`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Op types (`Conv`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ops: Vec<String>,
    /// Regular expressions, each matched against whole node names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) patterns: Vec<String>,
}

impl Exclusion {
    /// Whether nothing is excluded.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.ops.is_empty() && self.patterns.is_empty()
    }

    /// The indices of the nodes of `graph` it names. A name no node has, an op no node is, a
    /// pattern that matches nothing or does not parse is an error (a typo would otherwise
    /// exclude nothing, silently).
    pub(crate) fn resolve(&self, graph: &GraphProto) -> Result<BTreeSet<usize>> {
        let mut out = BTreeSet::new();
        let labels: Vec<String> = (0..graph.node.len())
            .map(|i| node_label(graph, i))
            .collect();
        let by_index = |name: &str| {
            name.strip_prefix('#')
                .and_then(|i| i.parse::<usize>().ok())
                .filter(|&i| i < labels.len())
        };
        for name in &self.nodes {
            let Some(i) = labels
                .iter()
                .position(|l| l == name)
                .or_else(|| by_index(name))
            else {
                let near: Vec<&str> = labels
                    .iter()
                    .filter(|l| l.contains(name.as_str()) || name.contains(l.as_str()))
                    .take(5)
                    .map(String::as_str)
                    .collect();
                bail!(
                    "no node is named '{name}'{}",
                    if near.is_empty() {
                        String::new()
                    } else {
                        format!(" (similar: {})", near.join(", "))
                    }
                );
            };
            out.insert(i);
        }
        for op in &self.ops {
            let before = out.len();
            out.extend(
                graph
                    .node
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| &n.op_type == op)
                    .map(|(i, _)| i),
            );
            if out.len() == before && !graph.node.iter().any(|n| &n.op_type == op) {
                bail!("no node is a '{op}' op");
            }
        }
        for pattern in &self.patterns {
            let re = regex::Regex::new(&format!("^(?:{pattern})$"))
                .with_context(|| format!("'{pattern}' is not a regular expression"))?;
            let matched: Vec<usize> = labels
                .iter()
                .enumerate()
                .filter(|(_, l)| re.is_match(l))
                .map(|(i, _)| i)
                .collect();
            if matched.is_empty() {
                bail!("no node name matches '{pattern}'");
            }
            out.extend(matched);
        }
        Ok(out)
    }
}

/// Decides what to quantize in `graph`.
pub(crate) fn plan_int8(graph: &GraphProto) -> QuantPlan {
    let types = infer_elem_types(graph);
    let inits: HashMap<&str, usize> = graph
        .initializer
        .iter()
        .map(|t| (t.name.as_str(), t.dims.len()))
        .collect();
    let constants: HashSet<&str> = graph
        .node
        .iter()
        .filter(|n| n.op_type == "Constant")
        .flat_map(|n| n.output.iter().map(String::as_str))
        .collect();
    let producer: HashMap<&str, &str> = graph
        .node
        .iter()
        .flat_map(|n| {
            n.output
                .iter()
                .map(move |o| (o.as_str(), n.op_type.as_str()))
        })
        .collect();
    let is_float_activation = |name: &str| {
        !name.is_empty()
            && !inits.contains_key(name)
            && !constants.contains(name)
            && types.get(name).is_none_or(|&t| t == DataType::Float)
    };
    let mut activations: Vec<ActivationSite> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut weights = Vec::new();
    let mut add_act = |name: &str, site: (usize, usize)| {
        let i = *index.entry(name.to_string()).or_insert_with(|| {
            activations.push(ActivationSite {
                tensor: name.to_string(),
                consumers: vec![],
            });
            activations.len() - 1
        });
        activations[i].consumers.push(site);
    };
    for (ni, node) in graph.node.iter().enumerate() {
        let inp = |i: usize| node.input.get(i).map(String::as_str).unwrap_or("");
        let mut weight = |i: usize, axis: i64| {
            let name = inp(i);
            if let Some(&rank) = inits.get(name) {
                if types.get(name) == Some(&DataType::Float) && rank >= 2 {
                    weights.push(WeightSite {
                        tensor: name.to_string(),
                        consumer: (ni, i),
                        axis,
                    });
                }
                true
            } else {
                false
            }
        };
        match node.op_type.as_str() {
            "Conv" | "ConvTranspose" => {
                let axis = if node.op_type == "Conv" { 0 } else { 1 };
                if is_float_activation(inp(0)) {
                    add_act(inp(0), (ni, 0));
                }
                weight(1, axis);
            }
            "Gemm" => {
                if is_float_activation(inp(0)) {
                    add_act(inp(0), (ni, 0));
                }
                let axis = if int_attr(node, "transB").unwrap_or(0) != 0 {
                    0
                } else {
                    1
                };
                if !weight(1, axis) && is_float_activation(inp(1)) {
                    add_act(inp(1), (ni, 1));
                }
            }
            "MatMul" => {
                for i in 0..2 {
                    let rank = inits.get(inp(i)).copied().unwrap_or(0) as i64;
                    if i == 1 && weight(1, rank - 1) {
                        continue;
                    }
                    if is_float_activation(inp(i)) {
                        add_act(inp(i), (ni, i));
                    }
                }
            }
            "Add" => {
                let (a, b) = (inp(0), inp(1));
                if !(is_float_activation(a) && is_float_activation(b)) {
                    continue;
                }
                let from_conv = |n: &str| {
                    matches!(producer.get(n), Some(&"Conv") | Some(&"BatchNormalization"))
                };
                match (from_conv(a), from_conv(b)) {
                    (true, false) => add_act(b, (ni, 1)),
                    (false, true) => add_act(a, (ni, 0)),
                    (true, true) => add_act(b, (ni, 1)),
                    (false, false) => {}
                }
            }
            _ => {}
        }
    }
    QuantPlan {
        activations,
        weights,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::test_models;

    #[test]
    fn classifier_plan() {
        let m = test_models::classifier(None);
        let p = plan_int8(m.graph.as_ref().unwrap());
        assert_eq!(p.activation_names(), vec!["input", "flat"]);
        assert_eq!(p.activations[0].consumers, vec![(0, 0)]);
        let w: Vec<_> = p
            .weights
            .iter()
            .map(|w| (w.tensor.as_str(), w.axis))
            .collect();
        assert_eq!(w, vec![("conv.weight", 0), ("fc.weight", 0)]);
    }

    #[test]
    fn attention_quantizes_the_matmul_inputs() {
        let m = test_models::token_classifier();
        let p = plan_int8(m.graph.as_ref().unwrap());
        // The projections read the normalized tokens through one Q/DQ pair; both operands of
        // the two activation-by-activation MatMuls (scores, context) are quantized; the
        // classifier's input too. The mask arithmetic, Softmax and LayerNorm stay float.
        let mut acts = p.activation_names();
        acts.sort();
        assert_eq!(acts, ["attn", "context", "k_t", "pooled", "q", "v", "x"]);
        let x = &p.activations.iter().find(|a| a.tensor == "x").unwrap();
        assert_eq!(x.consumers.len(), 3);
        let w: Vec<_> = p
            .weights
            .iter()
            .map(|w| (w.tensor.as_str(), w.axis))
            .collect();
        assert_eq!(
            w,
            [("wq", 1), ("wk", 1), ("wv", 1), ("wo", 1), ("fc.weight", 0)]
        );
    }

    #[test]
    fn two_input_model_has_nothing_to_quantize() {
        let m = test_models::two_input(None);
        assert!(plan_int8(m.graph.as_ref().unwrap()).is_empty());
    }
}
