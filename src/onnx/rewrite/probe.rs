//! A scale probe: a small model that computes one node reading a quantized activation, once in
//! float and once for each candidate scale of that activation, with its input and weights
//! quantized exactly as the INT8 rewrite ([`super::qdq`]) would quantize them. Running it on
//! captured activations tells which scale keeps the node's output closest to the float one.

use super::pass::Pass;
use super::plan::{ActivationSite, QuantPlan, WeightSite};
use super::qdq::{Qdq, WeightClipping, WeightQuant};
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::{GraphProto, ModelProto, NodeProto};
use crate::onnx::tensor_info::{unshaped_value_info, value_info};
use crate::onnx::OnnxModel;
use crate::tensor::Dim;
use anyhow::Result;
use std::collections::{BTreeMap, HashSet};

/// Builds the probe of `consumer` (`(node, input slot)` of `model`) reading `tensor`, whose
/// captured values have shape `dims`, for each scale of `scales`.
///
/// The probe's only input is `tensor`; output 0 is the node's float output, output `1 + k` its
/// output with the input quantized at `scales[k]` and its weights as `plan` and `clip` say.
/// `None` when the node is not one the probe can isolate: it must read `tensor` at `slot`,
/// have one output, take every other input from an initializer, and have weights `plan`
/// quantizes (an Add reading a residual, or a MatMul of two activations, has none).
pub(crate) fn scale_probe(
    model: &OnnxModel,
    plan: &QuantPlan,
    tensor: &str,
    consumer: (usize, usize),
    dims: &[usize],
    scales: &[f32],
    clip: impl Into<WeightClipping>,
) -> Result<Option<OnnxModel>> {
    let g = model.graph();
    let (ni, slot) = consumer;
    let Some(node) = g.node.get(ni) else {
        return Ok(None);
    };
    let weights: Vec<&WeightSite> = plan.weights.iter().filter(|w| w.consumer.0 == ni).collect();
    let initializers: HashSet<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
    let others_constant = node
        .input
        .iter()
        .enumerate()
        .all(|(i, name)| i == slot || name.is_empty() || initializers.contains(name.as_str()));
    if weights.is_empty()
        || node.output.len() != 1
        || node.input.get(slot).map(String::as_str) != Some(tensor)
        || !others_constant
    {
        return Ok(None);
    }
    let out = &node.output[0];
    let read: HashSet<&str> = node.input.iter().map(String::as_str).collect();
    let mut probe = GraphProto {
        name: format!("probe of {tensor}"),
        input: vec![value_info(
            tensor,
            DataType::Float as i32,
            &dims
                .iter()
                .map(|&d| Dim::Fixed(d as i64))
                .collect::<Vec<_>>(),
        )],
        initializer: g
            .initializer
            .iter()
            .filter(|t| read.contains(t.name.as_str()) && t.name != tensor)
            .cloned()
            .collect(),
        node: vec![node.clone()],
        output: vec![unshaped_value_info(out, DataType::Float as i32)],
        ..Default::default()
    };
    let mut probe_plan = QuantPlan::default();
    let mut probe_scales = BTreeMap::new();
    for (k, &scale) in scales.iter().enumerate() {
        let (input, output) = (format!("{tensor}_probe{k}"), format!("{out}_probe{k}"));
        probe.node.push(NodeProto {
            name: format!("{tensor}_probe{k}_Identity"),
            op_type: "Identity".into(),
            input: vec![tensor.to_string()],
            output: vec![input.clone()],
            ..Default::default()
        });
        let mut copy = node.clone();
        copy.name = format!("{}_probe{k}", node.name);
        copy.input[slot] = input.clone();
        copy.output = vec![output.clone()];
        probe.node.push(copy);
        let at = probe.node.len() - 1;
        probe
            .output
            .push(unshaped_value_info(&output, DataType::Float as i32));
        probe_plan.activations.push(ActivationSite {
            tensor: input.clone(),
            consumers: vec![(at, slot)],
        });
        probe_plan
            .weights
            .extend(weights.iter().map(|w| WeightSite {
                consumer: (at, w.consumer.1),
                ..(*w).clone()
            }));
        probe_scales.insert(input, scale);
    }
    let proto = ModelProto {
        graph: Some(probe),
        ..model.proto.clone()
    };
    let (probe, _) = Qdq {
        plan: probe_plan,
        scales: probe_scales,
        weights: WeightQuant::nearest(clip.into()),
    }
    .run(OnnxModel::from_proto(proto, &model.path))?;
    Ok(Some(probe))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::tract::{TractBackend, TractOptions};
    use crate::backend::Backend;
    use crate::onnx::rewrite::plan::plan_int8;
    use crate::onnx::rewrite::qdq::WeightClip;
    use crate::onnx::test_models;
    use crate::tensor::{HostTensor, TensorData};

    /// The probe's float output is the conv's; a coarse scale puts its quantized output
    /// further from it than a fine one, and a scale that clips everything further still.
    #[test]
    fn a_probe_computes_the_node_at_each_scale() {
        let m = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
        let plan = plan_int8(m.graph());
        let conv = m
            .graph()
            .node
            .iter()
            .position(|n| n.op_type == "Conv")
            .unwrap();
        let probe = scale_probe(
            &m,
            &plan,
            "input",
            (conv, 0),
            &[2, 3, 16, 16],
            &[1.0 / 127.0, 0.5, 0.001],
            WeightClip::Max,
        )
        .unwrap()
        .expect("a conv with quantized weights is probed");
        let ops = |op: &str| {
            probe
                .graph()
                .node
                .iter()
                .filter(|n| n.op_type == op)
                .count()
        };
        assert_eq!(ops("Conv"), 4);
        assert_eq!(ops("QuantizeLinear"), 3);
        let mut b = TractBackend::load(&probe, &TractOptions::default()).unwrap();
        let x = HostTensor::new(
            "input",
            vec![2, 3, 16, 16],
            TensorData::F32(test_models::deterministic_weights(7, 1536, 1.0)),
        )
        .unwrap();
        let out = b.run(&[x]).unwrap().outputs;
        assert_eq!(out.len(), 4);
        let float = out[0].data.to_f64();
        let err = |k: usize| -> f64 {
            let q = out[k].data.to_f64();
            q.iter().zip(&float).map(|(a, b)| (a - b).powi(2)).sum()
        };
        assert!(err(1) > 0.0);
        assert!(err(1) < err(2), "{} vs {}", err(1), err(2));
        assert!(err(2) < err(3), "{} vs {}", err(2), err(3));
        // A node that reads no weights (the model's Relu) has no probe.
        let relu = m
            .graph()
            .node
            .iter()
            .position(|n| n.op_type == "Relu")
            .unwrap();
        let input = m.graph().node[relu].input[0].clone();
        assert!(
            scale_probe(&m, &plan, &input, (relu, 0), &[2], &[1.0], WeightClip::Max)
                .unwrap()
                .is_none()
        );
    }
}
