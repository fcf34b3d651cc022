//! The INT8 rewrite: QuantizeLinear/DequantizeLinear pairs with calibrated activation scales
//! (per tensor, symmetric, zero point 0) and per-output-channel weight scales.
//!
//! Weights become int8 initializers followed by a DequantizeLinear (the form ONNX Runtime's
//! QDQ quantizer writes and TensorRT's explicit quantization reads); biases stay float.

use super::initializer::{read_f32, tensor_i8};
use super::opset::raise_opset;
use super::pass::{Pass, PassReport};
use super::plan::QuantPlan;
use crate::onnx::graph_builder::{attr_int, tensor_f32};
use crate::onnx::pb::{GraphProto, NodeProto};
use crate::onnx::OnnxModel;
use anyhow::{bail, Result};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// The lowest opset with per-axis QuantizeLinear/DequantizeLinear.
pub(crate) const MIN_OPSET: i64 = 13;

/// The symmetric INT8 scale of a threshold `amax` (`amax / 127`, zero point 0); a zero or
/// non-finite threshold, or one whose scale would be subnormal, gets scale 1 (all values are 0).
///
/// Calibration turns its thresholds into scales with this too, so the cache and the weights
/// use one rule.
pub(crate) fn scale_of(amax: f32) -> f32 {
    let scale = amax / 127.0;
    // Caches refuse subnormal scales when read, so none is written.
    if amax > 0.0 && amax.is_finite() && scale.is_normal() {
        scale
    } else {
        1.0
    }
}

/// How a weight channel's INT8 range is chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightClip {
    /// The channel's largest magnitude: nothing is clipped.
    #[default]
    Max,
    /// The fraction of it (0.50–1.00, in steps of 0.01) with the least squared error between
    /// the channel's weights and their INT8 values: a few outliers are clipped so the rest get
    /// finer steps.
    Mse,
}

/// How every weight's channel ranges are chosen: one rule, and the op types whose weights take
/// their own (`--weight-clip mse --weight-clip-op Gemm=max`: MSE-clipped convolutions, a
/// classifier head at its full range). Written in keys as 0.1.0 wrote a lone rule (`"max"`) when
/// no op type has its own, so keys made before per-op rules existed still match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WeightClipping {
    /// The rule of every weight whose consumer's op type is not in `by_op`.
    pub all: WeightClip,
    /// Op types (`Gemm`, `Conv`) whose weights take their own rule.
    pub by_op: BTreeMap<String, WeightClip>,
}

impl WeightClipping {
    /// One rule for every weight.
    pub(crate) fn uniform(all: WeightClip) -> WeightClipping {
        WeightClipping {
            all,
            by_op: BTreeMap::new(),
        }
    }

    /// The rule of a weight read by a node of type `op`.
    pub fn of_op(&self, op: &str) -> WeightClip {
        self.by_op.get(op).copied().unwrap_or(self.all)
    }
}

impl From<WeightClip> for WeightClipping {
    fn from(all: WeightClip) -> WeightClipping {
        WeightClipping::uniform(all)
    }
}

impl serde::Serialize for WeightClipping {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        if self.by_op.is_empty() {
            return self.all.serialize(s);
        }
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("all", &self.all)?;
        map.serialize_entry("by_op", &self.by_op)?;
        map.end()
    }
}

/// A weight's INT8 form: its int8 values (in the weight's own layout) and one scale per
/// output channel.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Int8Weight {
    /// The int8 values.
    pub values: Vec<i8>,
    /// One scale per channel along the weight's channel axis.
    pub scales: Vec<f32>,
}

/// How the weights become INT8: each channel's range (`clip`), and the weights whose int8
/// values were chosen before the pass (adaptive rounding), by tensor name; every other weight
/// is rounded to nearest.
#[derive(Clone, Debug, Default)]
pub(crate) struct WeightQuant {
    /// How each channel's range is chosen.
    pub clip: WeightClipping,
    /// Int8 values chosen for some weights, shared by the many variants of one search.
    pub chosen: Arc<BTreeMap<String, Int8Weight>>,
}

impl WeightQuant {
    /// Rounds to nearest within ranges chosen by `clip`.
    pub fn nearest(clip: WeightClipping) -> WeightQuant {
        WeightQuant {
            clip,
            chosen: Arc::default(),
        }
    }

    /// The int8 values and per-channel scales of weight `name` read by a node of type `op`
    /// (values `w`, dims `dims`, channels along `axis`): the chosen ones when there are (and
    /// they fit), else [`quantize_weights`] with `op`'s rule.
    pub fn quantize(
        &self,
        name: &str,
        op: &str,
        w: &[f32],
        dims: &[i64],
        axis: usize,
    ) -> (Vec<i8>, Vec<f32>) {
        match self.chosen.get(name) {
            Some(c) if c.values.len() == w.len() && c.scales.len() == dims[axis] as usize => {
                (c.values.clone(), c.scales.clone())
            }
            _ => quantize_weights(w, dims, axis, self.clip.of_op(op)),
        }
    }
}

/// The INT8 pass: Q/DQ pairs where `plan` says, with the calibrated activation `scales`.
///
/// The plan must have been made ([`plan_int8`](super::plan::plan_int8)) for the model the
/// pass runs on: its sites are node indices. Every planned activation needs a scale; a scale
/// for a tensor the model lacks is an error (the cache was made for another model).
#[derive(Clone, Debug)]
pub(crate) struct Qdq {
    /// Where to quantize.
    pub plan: QuantPlan,
    /// The scale of each activation tensor, by name.
    pub scales: BTreeMap<String, f32>,
    /// How the weights become INT8.
    pub weights: WeightQuant,
}

impl Pass for Qdq {
    fn name(&self) -> &'static str {
        "qdq"
    }

    fn run(&self, model: OnnxModel) -> Result<(OnnxModel, PassReport)> {
        let model = insert_qdq(model, &self.plan, &self.scales, &self.weights)?;
        let report = PassReport::Qdq {
            activations: self.plan.activations.len(),
            weights: self.plan.weights.len(),
        };
        Ok((model, report))
    }
}

fn node(op: &str, name: String, inputs: &[&str], output: &str, axis: Option<i64>) -> NodeProto {
    NodeProto {
        name,
        op_type: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.to_string()],
        attribute: axis.map(|a| vec![attr_int("axis", a)]).unwrap_or_default(),
        ..Default::default()
    }
}

#[cfg(test)]
/// Symmetric per-channel int8 quantization of `w` (dims `dims`) along `axis`: the int8 values
/// and one scale per channel.
pub(crate) fn quantize_per_channel(w: &[f32], dims: &[i64], axis: usize) -> (Vec<i8>, Vec<f32>) {
    quantize_weights(w, dims, axis, WeightClip::Max)
}

/// The squared error of `values` quantized with `scale`.
fn rounding_error(values: &[f32], scale: f32) -> f64 {
    values
        .iter()
        .map(|&v| {
            let q = (v / scale).round().clamp(-127.0, 127.0) * scale;
            ((v - q) as f64).powi(2)
        })
        .sum()
}

/// [`quantize_per_channel`] with each channel's range chosen by `clip`.
pub(crate) fn quantize_weights(
    w: &[f32],
    dims: &[i64],
    axis: usize,
    clip: WeightClip,
) -> (Vec<i8>, Vec<f32>) {
    let channels = dims[axis] as usize;
    let inner: usize = dims[axis + 1..].iter().product::<i64>() as usize;
    let channel_of = |i: usize| (i / inner) % channels;
    let mut amax = vec![0f32; channels];
    for (i, v) in w.iter().enumerate() {
        let c = channel_of(i);
        amax[c] = amax[c].max(v.abs());
    }
    if clip == WeightClip::Mse {
        let mut members: Vec<Vec<f32>> = vec![vec![]; channels];
        for (i, &v) in w.iter().enumerate() {
            members[channel_of(i)].push(v);
        }
        for (a, values) in amax.iter_mut().zip(&members) {
            let full = *a;
            *a = (50..=100)
                .map(|pct| full * pct as f32 / 100.0)
                .map(|cand| (rounding_error(values, scale_of(cand)), cand))
                .min_by(|x, y| x.0.total_cmp(&y.0))
                .map_or(full, |best| best.1);
        }
    }
    let scales: Vec<f32> = amax.iter().map(|&a| scale_of(a)).collect();
    let q = w
        .iter()
        .enumerate()
        .map(|(i, v)| (v / scales[channel_of(i)]).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (q, scales)
}

/// Inserts Q/DQ pairs into `model` as `plan` says, with `scales` (per activation tensor).
fn insert_qdq(
    model: OnnxModel,
    plan: &QuantPlan,
    scales: &BTreeMap<String, f32>,
    weights: &WeightQuant,
) -> Result<OnnxModel> {
    let mut out = model;
    if let Some(from) = raise_opset(&mut out, MIN_OPSET)? {
        tracing::info!("raised the model's opset {from} to {MIN_OPSET} for per-channel Q/DQ");
    }
    check_qdq_inputs(&out, plan, scales)?;
    let g = out.graph_mut();
    // Rewire consumers first (indices refer to the original node list).
    let mut after: HashMap<String, Vec<NodeProto>> = HashMap::new();
    let mut at_start: Vec<NodeProto> = Vec::new();
    quantize_activations(g, plan, scales, &mut after, &mut at_start);
    let replaced_weights = dequantize_weights(g, plan, weights, &mut at_start)?;
    // Drop float weights nothing reads any more.
    let still_read: HashSet<String> = g
        .node
        .iter()
        .flat_map(|n| n.input.iter().cloned())
        .collect();
    g.initializer
        .retain(|t| !replaced_weights.contains(&t.name) || still_read.contains(&t.name));
    g.input
        .retain(|v| !replaced_weights.contains(&v.name) || still_read.contains(&v.name));
    // Rebuild the node list in topological order: Q/DQ right after their producer.
    let old = std::mem::take(&mut g.node);
    let mut nodes = at_start;
    for n in old {
        let outs = n.output.clone();
        nodes.push(n);
        for o in &outs {
            if let Some(extra) = after.remove(o) {
                nodes.extend(extra);
            }
        }
    }
    if let Some(name) = after.keys().next() {
        bail!("Q/DQ insertion: tensor '{name}' is produced by no node");
    }
    g.node = nodes;
    g.value_info.clear();
    Ok(out)
}

/// Refuses what Q/DQ insertion cannot do: an opset before [`MIN_OPSET`], a model already
/// quantized, a cache that names tensors the model lacks or lacks a scale the plan needs, a
/// plan made for another graph.
fn check_qdq_inputs(
    model: &OnnxModel,
    plan: &QuantPlan,
    scales: &BTreeMap<String, f32>,
) -> Result<()> {
    if model.opset() < MIN_OPSET {
        bail!(
            "INT8 Q/DQ needs opset {MIN_OPSET} or newer, the model has opset {}; re-export it with a newer opset",
            model.opset()
        );
    }
    if model
        .graph()
        .node
        .iter()
        .any(|n| n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear")
    {
        bail!("the model already has QuantizeLinear/DequantizeLinear nodes (already quantized)");
    }
    let planned: HashSet<&str> = plan.activations.iter().map(|a| a.tensor.as_str()).collect();
    let known: HashSet<&str> = model
        .graph()
        .node
        .iter()
        .flat_map(|n| n.output.iter().chain(&n.input))
        .chain(model.graph().input.iter().map(|v| &v.name))
        .map(String::as_str)
        .collect();
    for name in scales.keys() {
        if !known.contains(name.as_str()) {
            bail!("tensor '{name}' named in the calibration cache is not in the model (was the cache made for another model?)");
        }
    }
    for a in &plan.activations {
        if !scales.contains_key(&a.tensor) {
            bail!(
                "the calibration cache has no scale for tensor '{}', which INT8 quantizes; recalibrate",
                a.tensor
            );
        }
    }
    let _ = planned;
    let slots = |(ni, ii): (usize, usize)| {
        model
            .graph()
            .node
            .get(ni)
            .is_some_and(|n| ii < n.input.len())
    };
    let sites = plan
        .activations
        .iter()
        .flat_map(|a| a.consumers.iter().copied());
    if !sites
        .chain(plan.weights.iter().map(|w| w.consumer))
        .all(slots)
    {
        bail!("the INT8 plan names nodes the model does not have (it was made for another graph)");
    }
    Ok(())
}

/// A Quantize/DequantizeLinear pair on each planned activation, its scale from `scales`, its
/// consumers rewired to the dequantized tensor; pairs on graph inputs go to `at_start`, the
/// others to `after` (by the tensor they follow).
fn quantize_activations(
    g: &mut GraphProto,
    plan: &QuantPlan,
    scales: &BTreeMap<String, f32>,
    after: &mut HashMap<String, Vec<NodeProto>>,
    at_start: &mut Vec<NodeProto>,
) {
    let graph_inputs: HashSet<String> = g.input.iter().map(|v| v.name.clone()).collect();
    for a in &plan.activations {
        let t = &a.tensor;
        let (s, zp, q, dq) = (
            format!("{t}_scale"),
            format!("{t}_zero_point"),
            format!("{t}_quantized"),
            format!("{t}_dequantized"),
        );
        g.initializer.push(tensor_f32(&s, &[], &[scales[t]]));
        g.initializer.push(tensor_i8(&zp, &[], &[0]));
        let pair = vec![
            node(
                "QuantizeLinear",
                format!("{t}_QuantizeLinear"),
                &[t, &s, &zp],
                &q,
                None,
            ),
            node(
                "DequantizeLinear",
                format!("{t}_DequantizeLinear"),
                &[&q, &s, &zp],
                &dq,
                None,
            ),
        ];
        if graph_inputs.contains(t) {
            at_start.extend(pair);
        } else {
            after.entry(t.clone()).or_default().extend(pair);
        }
        for &(ni, ii) in &a.consumers {
            g.node[ni].input[ii] = dq.clone();
        }
    }
}

/// Each planned weight quantized per channel into an int8 initializer with a DequantizeLinear
/// (in `at_start`) its consumer reads instead; returns the float weights replaced.
fn dequantize_weights(
    g: &mut GraphProto,
    plan: &QuantPlan,
    weights: &WeightQuant,
    at_start: &mut Vec<NodeProto>,
) -> Result<HashSet<String>> {
    let mut replaced_weights = HashSet::new();
    for w in &plan.weights {
        let Some(init) = g.initializer.iter().find(|t| t.name == w.tensor) else {
            bail!("weight '{}' is not an initializer", w.tensor);
        };
        let dims = init.dims.clone();
        let values = read_f32(init)?;
        let axis = if w.axis < 0 {
            w.axis + dims.len() as i64
        } else {
            w.axis
        } as usize;
        if axis >= dims.len() {
            bail!(
                "weight '{}': channel axis {} out of range",
                w.tensor,
                w.axis
            );
        }
        let op = g.node[w.consumer.0].op_type.clone();
        let (q, wscales) = weights.quantize(&w.tensor, &op, &values, &dims, axis);
        let t = &w.tensor;
        let (qn, s, zp, dq) = (
            format!("{t}_int8"),
            format!("{t}_scale"),
            format!("{t}_zero_point"),
            format!("{t}_dequantized"),
        );
        if !replaced_weights.insert(t.clone()) {
            g.node[w.consumer.0].input[w.consumer.1] = dq;
            continue;
        }
        let channels = dims[axis];
        g.initializer.push(tensor_i8(&qn, &dims, &q));
        g.initializer.push(tensor_f32(&s, &[channels], &wscales));
        g.initializer
            .push(tensor_i8(&zp, &[channels], &vec![0; channels as usize]));
        at_start.push(node(
            "DequantizeLinear",
            format!("{t}_DequantizeLinear"),
            &[&qn, &s, &zp],
            &dq,
            Some(axis as i64),
        ));
        g.node[w.consumer.0].input[w.consumer.1] = dq;
    }
    Ok(replaced_weights)
}

#[cfg(test)]
mod tests;
