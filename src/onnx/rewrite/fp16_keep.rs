//! Which nodes the FP16 rewrite must keep in float32 beyond the op list a user gives: the nodes
//! named (or matched by a regular expression) by the user, a BatchNormalization whose statistics
//! do not fit float16, and Constant nodes that no float16 node reads.

use super::initializer::read_f32;
use super::plan::node_label;
use crate::error::{Hint, Setting, TypedError};
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::{GraphProto, NodeProto};
use std::collections::{HashMap, HashSet};
use std::fmt;

/// A node to keep in float32 that the model does not have, or a pattern that does not parse: a
/// mistake in what the user asked for, not a failure of the rewrite. As an `anyhow` error it is
/// a [`TypedError`] whose hint says the kept nodes are wrong.
#[derive(Debug)]
pub struct KeepNodeError(pub String);

impl fmt::Display for KeepNodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<KeepNodeError> for anyhow::Error {
    fn from(e: KeepNodeError) -> anyhow::Error {
        TypedError::hinted(Hint::Wrong(Setting::KeepFp32Nodes), e.0).into()
    }
}

/// The names of the nodes kept in float32 by name (a node's name, or `#INDEX` for any node's
/// place in the graph) or by a regular expression over whole names, and a warning for each
/// pattern that matches nothing. An unnamed node that is kept gets its `#INDEX` label as its
/// name, so the rewrite can find it. A name no node has, or a pattern that does not parse, is a
/// [`KeepNodeError`].
pub(crate) fn resolve_kept_nodes(
    g: &mut GraphProto,
    names: &[String],
    patterns: &[String],
) -> Result<(Vec<String>, Vec<String>), KeepNodeError> {
    let labels: Vec<String> = (0..g.node.len()).map(|i| node_label(g, i)).collect();
    let mut kept: Vec<usize> = vec![];
    for name in names {
        let by_index = name
            .strip_prefix('#')
            .and_then(|i| i.parse::<usize>().ok())
            .filter(|&i| i < labels.len());
        match labels.iter().position(|l| l == name).or(by_index) {
            Some(i) => kept.push(i),
            None => {
                return Err(KeepNodeError(format!(
                    "no node is named '{name}' to keep in float32"
                )))
            }
        }
    }
    let mut warnings = vec![];
    for pattern in patterns {
        let re = regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
            KeepNodeError(format!(
                "'{pattern}' is not a regular expression ({})",
                e.to_string().lines().last().unwrap_or_default().trim()
            ))
        })?;
        let before = kept.len();
        kept.extend((0..labels.len()).filter(|&i| re.is_match(&labels[i])));
        if kept.len() == before {
            warnings.push(format!(
                "no node name matches '{pattern}': it keeps nothing in float32"
            ));
        }
    }
    kept.sort_unstable();
    kept.dedup();
    Ok((
        kept.into_iter()
            .map(|i| {
                if g.node[i].name.is_empty() {
                    g.node[i].name = labels[i].clone();
                }
                g.node[i].name.clone()
            })
            .collect(),
        warnings,
    ))
}

/// The names a kept node goes by after the rewrite: a Gemm becomes a MatMul `NAME_matmul` and
/// its bias an Add `NAME_bias`, both kept with it.
pub(crate) fn kept_names(names: &[String]) -> HashSet<String> {
    names
        .iter()
        .flat_map(|n| [n.clone(), format!("{n}_matmul"), format!("{n}_bias")])
        .collect()
}

/// The largest finite float16 value.
const F16_MAX: f32 = 65504.0;

/// The float32 values of the initializers and Constant nodes' tensors named in `wanted`, by
/// name (only those: reading every weight of a ResNet-50 to look at its BatchNormalization
/// statistics cost a copy of all 97 MB).
fn constant_values<'a>(g: &'a GraphProto, wanted: &HashSet<&str>) -> HashMap<&'a str, Vec<f32>> {
    let mut values: HashMap<&str, Vec<f32>> = g
        .initializer
        .iter()
        .filter(|t| t.data_type == DataType::Float as i32 && wanted.contains(t.name.as_str()))
        .filter_map(|t| Some((t.name.as_str(), read_f32(t).ok()?)))
        .collect();
    for node in g.node.iter().filter(|n| n.op_type == "Constant") {
        let tensor = node.attribute.iter().find_map(|a| a.t.as_ref());
        if let (Some(out), Some(t)) = (node.output.first(), tensor) {
            if t.data_type == DataType::Float as i32 && wanted.contains(out.as_str()) {
                if let Ok(v) = read_f32(t) {
                    values.insert(out.as_str(), v);
                }
            }
        }
    }
    values
}

/// The first outputs of the BatchNormalization nodes whose scale, bias, mean or variance holds
/// a value beyond ±65504: computed in float16 their variance is infinite (or clamped, and the
/// normalisation wrong), so they stay float32. Seen in Paddle exports (PP-OCRv4's text detector
/// has running variances above 10⁵), where float16 turned its text map to noise.
pub(crate) fn wide_batchnorms(g: &GraphProto) -> HashSet<String> {
    let batchnorms = || g.node.iter().filter(|n| n.op_type == "BatchNormalization");
    let statistics: HashSet<&str> = batchnorms()
        .flat_map(|n| n.input.iter().skip(1).map(String::as_str))
        .collect();
    let values = constant_values(g, &statistics);
    batchnorms()
        .filter(|n| {
            n.input.iter().skip(1).any(|i| {
                values
                    .get(i.as_str())
                    .is_some_and(|v| v.iter().any(|x| x.is_finite() && x.abs() > F16_MAX))
            })
        })
        .filter_map(|n| n.output.first().cloned())
        .collect()
}

/// The tensors some node reads in float16: every input of a node that `kept` does not keep,
/// except the slots that must stay float32 (`fp32_slot`).
pub(crate) fn float16_reads(
    g: &GraphProto,
    kept: &impl Fn(&NodeProto) -> bool,
    fp32_slot: impl Fn(&str, usize) -> bool,
) -> HashSet<String> {
    g.node
        .iter()
        .filter(|n| !kept(n))
        .flat_map(|n| {
            n.input
                .iter()
                .enumerate()
                .filter(|(slot, _)| !fp32_slot(&n.op_type, *slot))
                .map(|(_, i)| i.clone())
        })
        .collect()
}

/// Whether a Constant (or ConstantOfShape) is read by no float16 node: it stays float32
/// rather than being rounded to float16 and cast back.
pub(crate) fn unread_constant(node: &NodeProto, float16_reads: &HashSet<String>) -> bool {
    matches!(node.op_type.as_str(), "Constant" | "ConstantOfShape")
        && !node.output.iter().any(|o| float16_reads.contains(o))
}

#[cfg(test)]
mod tests {
    use super::super::fp16::Fp16;
    use super::super::pass::Pass;
    use super::super::types::infer_elem_types;
    use crate::onnx::graph_builder::{attr_ints, tensor_f32, GraphBuilder};
    use crate::onnx::pb::tensor_proto::DataType;
    use crate::onnx::pb::AttributeProto;
    use crate::onnx::OnnxModel;
    use crate::tensor::Dim;

    /// Conv → BatchNormalization (its variance, from a Constant node, is `variance`) → Relu.
    fn conv_bn(variance: f32) -> OnnxModel {
        let d = |v| Dim::Fixed(v);
        let mut g = GraphBuilder::new("bn");
        let var = tensor_f32("", &[2], &[variance, 1.0]);
        g.input("x", DataType::Float, &[d(1), d(2), d(4), d(4)])
            .output("y", DataType::Float, &[d(1), d(2), d(4), d(4)])
            .initializer(tensor_f32("w", &[2, 2, 1, 1], &[1.0, 0.0, 0.0, 1.0]))
            .initializer(tensor_f32("scale", &[2], &[1.0, 1.0]))
            .initializer(tensor_f32("bias", &[2], &[0.0, 0.0]))
            .initializer(tensor_f32("mean", &[2], &[0.0, 0.0]))
            .node(
                "Constant",
                &[],
                &["var"],
                vec![AttributeProto {
                    name: "value".into(),
                    r#type: crate::onnx::pb::attribute_proto::AttributeType::Tensor as i32,
                    t: Some(var),
                    ..Default::default()
                }],
            )
            .node(
                "Conv",
                &["x", "w"],
                &["c"],
                vec![attr_ints("kernel_shape", &[1, 1])],
            )
            .node(
                "BatchNormalization",
                &["c", "scale", "bias", "mean", "var"],
                &["n"],
                vec![],
            )
            .node("Relu", &["n"], &["y"], vec![]);
        OnnxModel::from_proto(g.build(), "bn.onnx")
    }

    #[test]
    fn a_batchnorm_with_a_variance_beyond_float16_stays_float32_with_its_constant() {
        let (wide, _) = Fp16::default().run(conv_bn(2e5)).unwrap();
        let types = infer_elem_types(wide.graph());
        assert_eq!(types["c"], DataType::Float16);
        assert_eq!(types["n"], DataType::Float);
        // The variance is read by the float32 BatchNormalization alone: it is not rounded.
        assert_eq!(types["var"], DataType::Float);
        let (narrow, _) = Fp16::default().run(conv_bn(2.0)).unwrap();
        let types = infer_elem_types(narrow.graph());
        assert_eq!(
            (types["n"], types["var"]),
            (DataType::Float16, DataType::Float16)
        );
    }
}
