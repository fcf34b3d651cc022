//! What `inspect` reports about a model: I/O, opsets, op counts, parameters, weight bytes, and
//! the MACs per node and in total when the caller could count them.

use super::attributes::attribute;
use super::dtype::{dtype_name, packed_bytes};
use super::external::{element_count, external_ref, is_external};
use super::macs::{MacsCount, MacsUnknown};
use super::model::OnnxModel;
use super::pb::TensorProto;
use super::rewrite::constant_weights::weight_constants;
use super::shape::{model_inputs, model_outputs};
use super::tensor_info::TensorInfo;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How many initializers the summary lists as "largest".
pub(crate) const LARGEST_SHOWN: usize = 10;

/// One imported operator set.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Opset {
    /// Domain; `ai.onnx` for the default one.
    pub(crate) domain: String,
    /// Version.
    pub version: i64,
}

/// Count of nodes of one op type.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OpCount {
    /// Op type, prefixed with its domain when not the default one.
    pub op: String,
    /// Number of nodes.
    pub count: usize,
}

/// One initializer, for the "largest" list.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InitializerInfo {
    /// Name.
    pub name: String,
    /// Element type.
    pub dtype: String,
    /// Dims.
    pub dims: Vec<i64>,
    /// Bytes of data.
    pub bytes: u64,
    /// Whether the data sits in an external file.
    pub external: bool,
}

/// One node, for `--layers`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Layer {
    /// Node name (may be empty in the model).
    pub name: String,
    /// Op type.
    pub op: String,
    /// Input tensor names.
    pub inputs: Vec<String>,
    /// Output tensor names.
    pub outputs: Vec<String>,
    /// Multiply-accumulates per sample (counted ops only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub macs: Option<u64>,
}

/// The whole summary of a model.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ModelSummary {
    /// Path of the model file.
    pub path: String,
    /// Size of the model file in bytes (external data not included).
    pub(crate) file_bytes: u64,
    /// Producer name and version.
    pub(crate) producer: String,
    /// ONNX IR version.
    pub ir_version: i64,
    /// Imported opsets.
    pub opsets: Vec<Opset>,
    /// Graph name.
    pub(crate) graph_name: String,
    /// Real inputs (initializers listed as inputs are left out).
    pub inputs: Vec<TensorInfo>,
    /// Outputs.
    pub outputs: Vec<TensorInfo>,
    /// Number of nodes in the main graph.
    pub node_count: usize,
    /// Node count per op type, most frequent first.
    pub ops: Vec<OpCount>,
    /// Number of initializers.
    pub(crate) initializer_count: usize,
    /// The parameter count: total elements over all initializers and the weights held in
    /// `Constant` nodes.
    pub parameters: u64,
    /// Of which held in `Constant` nodes that feed a Conv, ConvTranspose, Gemm or MatMul weight
    /// or a Conv bias (as Paddle exports keep them); the FP16 and INT8 rewrites treat them as
    /// weights.
    #[serde(default)]
    pub constant_parameters: u64,
    /// How many `Constant` nodes hold those weights.
    #[serde(default)]
    pub constant_weights: usize,
    /// Total bytes of all initializers (external data included) and Constant weights.
    pub(crate) weight_bytes: u64,
    /// Of which stored in external data files.
    pub external_weight_bytes: u64,
    /// The largest initializers, by bytes.
    pub largest_initializers: Vec<InitializerInfo>,
    /// Every node, when asked for (`--layers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layers: Option<Vec<Layer>>,
    /// MACs per sample of Conv, ConvTranspose, Gemm and MatMul, per node and in total; `null`
    /// when they cannot be counted (`macs_missing` says why).
    #[serde(default)]
    pub macs: Option<MacsCount>,
    /// Why there are no MACs (an input axis not fixed, shapes that could not be inferred).
    #[serde(default)]
    pub macs_missing: Option<String>,
    /// The flags that would let the MACs be counted, when there are such.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub macs_fix: Option<String>,
    /// The typed reason behind `macs_missing`, for the command line's hint.
    #[serde(skip)]
    pub(crate) macs_unknown: Option<MacsUnknown>,
}

impl ModelSummary {
    /// The summary with the MACs counted for its model (or why they could not be).
    pub(crate) fn with_macs(mut self, macs: anyhow::Result<MacsCount>) -> Self {
        match macs {
            Ok(m) => {
                if let Some(layers) = &mut self.layers {
                    for n in &m.nodes {
                        if let Some(l) = layers.get_mut(n.node) {
                            l.macs = Some(n.macs);
                        }
                    }
                }
                self.macs = Some(m);
            }
            Err(e) => {
                self.macs_unknown = e.chain().find_map(|c| c.downcast_ref().cloned());
                self.macs_missing = Some(match &self.macs_unknown {
                    Some(why) => why.to_string(),
                    None => format!("{e:#}"),
                });
            }
        }
        self
    }

    /// MACs per op type, largest first.
    pub(crate) fn macs_by_op(&self) -> Vec<(String, u64)> {
        let mut by: BTreeMap<String, u64> = BTreeMap::new();
        for n in self.macs.iter().flat_map(|m| &m.nodes) {
            let sum = by.entry(n.op.clone()).or_default();
            *sum = sum.saturating_add(n.macs);
        }
        let mut out: Vec<(String, u64)> = by.into_iter().collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }
}

/// Bytes of one initializer's data, wherever it is stored.
pub(crate) fn initializer_bytes(t: &TensorProto) -> u64 {
    if is_external(t) {
        return external_ref(t).map(|r| r.length).unwrap_or(0);
    }
    if !t.raw_data.is_empty() {
        return t.raw_data.len() as u64;
    }
    if !t.string_data.is_empty() {
        return t.string_data.iter().map(|s| s.len() as u64).sum();
    }
    packed_bytes(t.data_type, element_count(t)).unwrap_or(0)
}

/// Computes the summary of a loaded model; `layers` adds the per-node list.
pub fn summarize(model: &OnnxModel, layers: bool) -> ModelSummary {
    let graph = model.graph();
    let p = &model.proto;
    let mut ops: BTreeMap<String, usize> = BTreeMap::new();
    for node in &graph.node {
        let op = if node.domain.is_empty() || node.domain == "ai.onnx" {
            node.op_type.clone()
        } else {
            format!("{}::{}", node.domain, node.op_type)
        };
        *ops.entry(op).or_default() += 1;
    }
    let mut ops: Vec<OpCount> = ops
        .into_iter()
        .map(|(op, count)| OpCount { op, count })
        .collect();
    ops.sort_by(|a, b| b.count.cmp(&a.count).then(a.op.cmp(&b.op)));

    let mut inits: Vec<InitializerInfo> = graph
        .initializer
        .iter()
        .map(|t| InitializerInfo {
            name: t.name.clone(),
            dtype: dtype_name(t.data_type),
            dims: t.dims.clone(),
            bytes: initializer_bytes(t),
            external: is_external(t),
        })
        .collect();
    let constants: Vec<&TensorProto> = weight_constants(graph)
        .into_iter()
        .filter_map(|i| attribute(&graph.node[i], "value")?.t.as_ref())
        .collect();
    let constant_parameters: u64 = constants.iter().map(|t| element_count(t)).sum();
    let parameters = model.parameters() + constant_parameters;
    let weight_bytes = inits.iter().map(|i| i.bytes).sum::<u64>()
        + constants.iter().map(|t| initializer_bytes(t)).sum::<u64>();
    let external_weight_bytes = inits.iter().filter(|i| i.external).map(|i| i.bytes).sum();
    inits.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.name.cmp(&b.name)));
    inits.truncate(LARGEST_SHOWN);

    let producer = match (p.producer_name.as_str(), p.producer_version.as_str()) {
        ("", _) => "(unknown)".to_string(),
        (name, "") => name.to_string(),
        (name, version) => format!("{name} {version}"),
    };
    ModelSummary {
        path: model.path.display().to_string(),
        file_bytes: std::fs::metadata(&model.path).map(|m| m.len()).unwrap_or(0),
        producer,
        ir_version: p.ir_version,
        opsets: p
            .opset_import
            .iter()
            .map(|o| Opset {
                domain: if o.domain.is_empty() {
                    "ai.onnx".into()
                } else {
                    o.domain.clone()
                },
                version: o.version,
            })
            .collect(),
        graph_name: graph.name.clone(),
        inputs: model_inputs(model),
        outputs: model_outputs(model),
        node_count: graph.node.len(),
        ops,
        initializer_count: graph.initializer.len(),
        parameters,
        constant_parameters,
        constant_weights: constants.len(),
        weight_bytes,
        external_weight_bytes,
        largest_initializers: inits,
        macs: None,
        macs_missing: None,
        macs_fix: None,
        macs_unknown: None,
        layers: layers.then(|| {
            graph
                .node
                .iter()
                .map(|n| Layer {
                    name: n.name.clone(),
                    op: n.op_type.clone(),
                    inputs: n.input.clone(),
                    outputs: n.output.clone(),
                    macs: None,
                })
                .collect()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::test_models;

    #[test]
    fn classifier_summary_counts_ops_and_parameters() {
        let model = OnnxModel::from_proto(test_models::classifier(None), "classifier.onnx");
        let s = summarize(&model, true);
        assert_eq!(s.node_count, 6);
        assert_eq!(s.inputs.len(), 1);
        assert_eq!(s.inputs[0].shape_string(), "batch×3×16×16");
        assert_eq!(s.outputs[0].shape_string(), "batch×10");
        // conv 8*3*9 + 8, bn 4*8, shape 2, fc 10*512 + 10
        assert_eq!(s.parameters, 216 + 8 + 32 + 2 + 5120 + 10);
        assert_eq!(s.weight_bytes, (216 + 8 + 32 + 5120 + 10) * 4 + 2 * 8);
        assert_eq!(s.largest_initializers[0].name, "fc.weight");
        assert_eq!(s.layers.as_ref().unwrap().len(), 6);
        assert!(s.ops.iter().all(|o| o.count == 1));
        assert_eq!((s.constant_parameters, s.constant_weights), (0, 0));
    }

    #[test]
    fn weights_in_constant_nodes_are_parameters() {
        use crate::tensor::Dim;
        let proto = test_models::paddle_style(Dim::Unknown, Dim::Unknown, Dim::Unknown);
        let s = summarize(&OnnxModel::from_proto(proto, "p.onnx"), false);
        assert_eq!(s.initializer_count, 0);
        assert_eq!(s.parameters, 216 + 8 + 576 + 32);
        assert_eq!(s.constant_parameters, s.parameters);
        assert_eq!(s.constant_weights, 4);
        assert_eq!(s.weight_bytes, s.parameters * 4);
    }
}
