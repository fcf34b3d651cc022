//! Multiply-accumulates per node: the compute that INT8 or FP16 can speed up, counted for the
//! ops that carry nearly all of it (Conv, ConvTranspose, Gemm, MatMul), from tensor shapes the
//! caller inferred (one sample). Every other op counts 0; FLOPs are twice the MACs.

use super::attributes::{attribute, int_attr, ints_attr, string_attr};
use super::pb::{GraphProto, NodeProto};
use crate::tensor::UnfixedAxis;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The ops whose MACs are counted.
pub(crate) const COUNTED_OPS: [&str; 4] = ["Conv", "ConvTranspose", "Gemm", "MatMul"];

/// The MACs of one node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeMacs {
    /// Index of the node in the graph.
    pub node: usize,
    /// Node name (may be empty in the model).
    pub name: String,
    /// Op type.
    pub op: String,
    /// Multiply-accumulates for one sample.
    pub macs: u64,
}

/// The MACs of a model for one sample.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MacsCount {
    /// Every counted node with a known count, in graph order.
    pub nodes: Vec<NodeMacs>,
    /// Their sum.
    pub total: u64,
    /// Counted ops whose shapes were not known (their MACs are missing from the total).
    pub unknown: Vec<String>,
    /// Per op type with nodes left out of the total: how many, of how many.
    #[serde(default)]
    pub left_out: Vec<OpsLeftOut>,
}

/// The nodes of one op type whose MACs are missing from the total (their shapes unknown).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpsLeftOut {
    /// Op type.
    pub op: String,
    /// Nodes left out.
    pub count: usize,
    /// Nodes of this op type in the graph.
    pub of: usize,
}

/// Why a model's MACs could not be counted at all.
#[derive(Clone, Debug, thiserror::Error)]
pub(crate) enum MacsUnknown {
    /// An input axis other than the batch has no size: every count would depend on it.
    #[error("input '{}' axis {} is not fixed", .0.tensor, .0.axis)]
    Unfixed(UnfixedAxis),
    /// An input declares no shape at all.
    #[error("input '{0}' declares no shape")]
    Undeclared(String),
    /// The shapes could not be inferred (the short reason).
    #[error("could not infer shapes: {0}")]
    Inference(String),
}

impl MacsCount {
    /// The MACs of the node at `index` (0 for an op that is not counted).
    pub(crate) fn node_macs(&self, index: usize) -> u64 {
        self.nodes
            .iter()
            .find(|n| n.node == index)
            .map_or(0, |n| n.macs)
    }

    /// Share of the total that the nodes at `indices` carry, in [0, 1].
    pub fn share(&self, indices: impl IntoIterator<Item = usize>) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let part = indices
            .into_iter()
            .fold(0u64, |sum, i| sum.saturating_add(self.node_macs(i)));
        part as f64 / self.total as f64
    }
}

/// The product of `dims`, saturating: shapes from a user's flags can be absurdly large, and a
/// count pinned at `u64::MAX` is better than an overflow.
fn product(dims: &[usize]) -> u64 {
    dims.iter().fold(1u64, |p, &d| p.saturating_mul(d as u64))
}

/// A Conv's output shape from its input and weight shapes and its attributes (for outputs whose
/// shape the inference left unnamed).
fn conv_output(node: &NodeProto, x: &[usize], w: &[usize]) -> Option<Vec<usize>> {
    let spatial = x.len().checked_sub(2)?;
    let kernel = w.get(2..)?;
    let mut out = vec![*x.first()?, *w.first()?];
    let auto_pad = string_attr(node, "auto_pad").unwrap_or_default();
    for i in 0..spatial {
        let at = |name: &str, default: i64| {
            ints_attr(node, name)
                .and_then(|v| v.get(i).copied())
                .unwrap_or(default)
        };
        let (input, stride, dilation) = (x[2 + i] as i64, at("strides", 1), at("dilations", 1));
        let size = if auto_pad.starts_with("SAME") {
            (input + stride - 1) / stride
        } else {
            let pads = if auto_pad == "VALID" {
                0
            } else {
                at("pads", 0)
                    + ints_attr(node, "pads")
                        .and_then(|v| v.get(spatial + i).copied())
                        .unwrap_or(0)
            };
            let span = dilation * (*kernel.get(i)? as i64 - 1) + 1;
            (input + pads - span) / stride + 1
        };
        out.push(usize::try_from(size).ok()?);
    }
    Some(out)
}

/// The MACs of `node` for the batch the `shapes` were inferred at, when its shapes are known.
fn node_macs(node: &NodeProto, shape: &dyn Fn(&str) -> Option<Vec<usize>>) -> Option<u64> {
    let input = |i: usize| node.input.get(i).and_then(|n| shape(n));
    let output = || node.output.first().and_then(|n| shape(n));
    match node.op_type.as_str() {
        // Each output element sums over (input channels / group) × kernel.
        "Conv" => {
            let w = input(1)?;
            let out = output().or_else(|| conv_output(node, &input(0)?, &w))?;
            Some(product(&out).saturating_mul(product(w.get(1..)?)))
        }
        // Each input element spreads over (output channels / group) × kernel.
        "ConvTranspose" => {
            let w = input(1)?;
            Some(product(&input(0)?).saturating_mul(product(w.get(1..)?)))
        }
        "Gemm" => {
            let a = input(0)?;
            let k = if int_attr(node, "transA").unwrap_or(0) != 0 {
                *a.first()?
            } else {
                *a.get(1)?
            };
            Some(product(&output()?).saturating_mul(k as u64))
        }
        "MatMul" => {
            let a = input(0)?;
            Some(product(&output()?).saturating_mul(*a.last()? as u64))
        }
        _ => None,
    }
}

/// Counts the MACs of `graph` from `shapes` (tensor name → dims at batch `batch`; the dims of
/// initializers and of `Constant` nodes' values are read from the graph), divided by the batch.
pub(crate) fn count_macs(
    graph: &GraphProto,
    shapes: &HashMap<String, Vec<usize>>,
    batch: usize,
) -> MacsCount {
    let inits: HashMap<&str, Vec<usize>> = graph
        .initializer
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.dims.iter().map(|&d| d as usize).collect(),
            )
        })
        .chain(
            graph
                .node
                .iter()
                .filter(|n| n.op_type == "Constant")
                .filter_map(|n| {
                    let t = attribute(n, "value")?.t.as_ref()?;
                    let dims = t.dims.iter().map(|&d| d as usize).collect();
                    Some((n.output.first()?.as_str(), dims))
                }),
        )
        .collect();
    let shape = |name: &str| -> Option<Vec<usize>> {
        inits
            .get(name)
            .cloned()
            .or_else(|| shapes.get(name).cloned())
    };
    let mut out = MacsCount::default();
    for (i, node) in graph.node.iter().enumerate() {
        if !COUNTED_OPS.contains(&node.op_type.as_str()) {
            continue;
        }
        match node_macs(node, &shape) {
            Some(macs) => {
                let macs = macs / batch.max(1) as u64;
                out.total = out.total.saturating_add(macs);
                out.nodes.push(NodeMacs {
                    node: i,
                    name: node.name.clone(),
                    op: node.op_type.clone(),
                    macs,
                });
            }
            None => {
                out.unknown.push(if node.name.is_empty() {
                    format!("{} #{i}", node.op_type)
                } else {
                    node.name.clone()
                });
                match out.left_out.iter_mut().find(|l| l.op == node.op_type) {
                    Some(l) => l.count += 1,
                    None => out.left_out.push(OpsLeftOut {
                        op: node.op_type.clone(),
                        count: 1,
                        of: graph
                            .node
                            .iter()
                            .filter(|n| n.op_type == node.op_type)
                            .count(),
                    }),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::product;

    #[test]
    fn a_product_too_large_for_u64_saturates_instead_of_overflowing() {
        assert_eq!(product(&[2, 3, 4]), 24);
        assert_eq!(product(&[]), 1);
        assert_eq!(product(&[99_999_999_999, 99_999_999_999, 3]), u64::MAX);
    }
}
