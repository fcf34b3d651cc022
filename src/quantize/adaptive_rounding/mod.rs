//! Adaptive weight rounding, in the spirit of AdaRound (Nagel et al., "Up or Down? Adaptive
//! Rounding for Post-Training Quantization", 2020): each weight's int8 value is chosen between
//! rounding `w / s` down and up so that the layer's *output* error on real inputs is small,
//! rather than each weight's own error (what rounding to nearest minimises).
//!
//! Per layer, with the per-channel scales `s` of [`quantize_weights`] (the given
//! [`WeightClip`]) and the captured float inputs, the error is `E = Σ_o δ_oᵀ H δ_o`: `δ_o` is
//! output channel `o`'s rounding error (`s_o·q_o − w_o`, a vector over the inputs it reads)
//! and `H = Σ p pᵀ` the Gram matrix of the input patches `p` it multiplies (one per group of a
//! grouped convolution; see [`patches`]). Coordinate descent from nearest rounding
//! flips a weight to its other candidate whenever that lowers `E`, for at most [`MAX_SWEEPS`]
//! sweeps; a channel whose error would come out higher keeps nearest, so the result is never
//! worse than nearest on the patches used. Unlike AdaRound there is no relaxation, no
//! regularizer and no activation in the objective: the layer's linear output only.
//!
//! Handled: a 2-D `Conv` (any group, stride, dilation, padding, `auto_pad`) and a dense
//! `MatMul` or `Gemm` (not `transA`) whose weight is a rank-2 initializer in input 1 and whose
//! input 0 is an activation. Every other quantized weight (ConvTranspose, 1-D or 3-D Conv,
//! batched MatMul weights, …) stays rounded to nearest; the report lists them with the reason.
//! A weight read by several nodes is rounded for the inputs of the first of them handled here
//! only (the others read the same int8 values).

pub(crate) mod patches;
mod solve;

use self::patches::{sample_patches, Conv2d, LayerInput, Padding};
use self::solve::{gram, solve, Problem};
use crate::onnx::attributes::{int_attr, ints_attr, string_attr};
use crate::onnx::pb::NodeProto;
use crate::onnx::rewrite::initializer::read_f32;
use crate::onnx::rewrite::plan::{node_label, QuantPlan, WeightSite};
use crate::onnx::rewrite::qdq::{quantize_weights, Int8Weight, WeightClip, WeightClipping};
use crate::onnx::OnnxModel;
use crate::tensor::{HostTensor, TensorData};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};

/// The most input patches (positions of all captured samples, evenly spread) a layer's error
/// is built from; its Gram matrix costs `patches × fan_in²`.
pub(crate) const MAX_PATCHES: usize = 4096;

/// The fewest input patches per input a layer's weights are rounded from: with fewer, the Gram
/// matrix is (nearly) singular and the descent fits the rounding to the captured samples, not
/// to the layer (a classifier's last Gemm sees one row a sample), so the layer keeps nearest.
pub(crate) const MIN_PATCHES_PER_INPUT: usize = 4;

/// What adaptive rounding did for one layer. The errors are relative: `Σ |ΔW p|²` over the
/// patches divided by `Σ |W p|²` (the float outputs' energy), so layers compare.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerRounding {
    /// The node (its name, or `#INDEX`).
    pub node: String,
    /// Its op type.
    pub op: String,
    /// The weight tensor.
    pub weight: String,
    /// Input patches the error was built from.
    pub(crate) patches: usize,
    /// Weights in the tensor.
    pub weights: usize,
    /// Weights whose int8 value differs from nearest rounding.
    pub changed: usize,
    /// Relative output error with nearest rounding.
    pub nearest_error: f64,
    /// Relative output error with the chosen values (never above `nearest_error`).
    pub adaptive_error: f64,
}

/// A quantized weight left at nearest rounding, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeptNearest {
    /// The node (its name, or `#INDEX`).
    pub node: String,
    /// Its op type.
    pub op: String,
    /// The weight tensor.
    pub weight: String,
    /// Why it was not rounded adaptively.
    pub reason: String,
}

/// What adaptive rounding did for a model: per layer, and in total.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RoundingReport {
    /// The layers rounded adaptively, in plan order.
    pub layers: Vec<LayerRounding>,
    /// The quantized weights left at nearest rounding.
    pub kept_nearest: Vec<KeptNearest>,
    /// Weights rounded adaptively (all layers).
    pub weights: usize,
    /// Of those, the ones whose value differs from nearest rounding.
    pub changed: usize,
    /// The mean over layers of the relative error with nearest rounding.
    pub mean_nearest_error: f64,
    /// The mean over layers of the relative error with the chosen values.
    pub mean_adaptive_error: f64,
}

/// One layer to round: its plan site and how it reads its input.
struct Layer<'a> {
    site: &'a WeightSite,
    node: &'a NodeProto,
    label: String,
    input: LayerInput,
}

/// The activation tensors adaptive rounding needs captured (input 0 of each layer it handles),
/// each once, in plan order. Layers whose attributes cannot be read are left out here and
/// reported by [`round_adaptively`].
pub(crate) fn rounding_inputs(model: &OnnxModel, plan: &QuantPlan) -> Vec<String> {
    let mut names = Vec::new();
    if let Ok((layers, _)) = layers(model, plan) {
        for layer in layers {
            let name = &layer.node.input[0];
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    names
}

/// Chooses the int8 values of the weights of every layer of `plan` it handles (see the module
/// doc) for the least output error on `inputs` (each handled layer's input 0, by name, as
/// captured float32 batches; see [`rounding_inputs`]), within the per-channel ranges `clip`
/// gives each layer's op type. Returns the chosen values by weight name (what
/// [`WeightQuant::chosen`](crate::onnx::rewrite::qdq::WeightQuant) takes) and the report.
pub(crate) fn round_adaptively(
    model: &OnnxModel,
    plan: &QuantPlan,
    clip: impl Into<WeightClipping>,
    inputs: &BTreeMap<String, Vec<HostTensor>>,
) -> Result<(BTreeMap<String, Int8Weight>, RoundingReport)> {
    let clip = clip.into();
    let (layers, kept_nearest) = layers(model, plan)?;
    let mut chosen = BTreeMap::new();
    let mut report = RoundingReport {
        kept_nearest,
        ..Default::default()
    };
    for layer in &layers {
        let (weight, rounding) =
            match round_layer(model, layer, clip.of_op(&layer.node.op_type), inputs)
                .with_context(|| format!("adaptive rounding of layer '{}'", layer.label))?
            {
                Rounded::Chosen(weight, rounding) => (weight, rounding),
                Rounded::Kept(reason) => {
                    report.kept_nearest.push(KeptNearest {
                        node: layer.label.clone(),
                        op: layer.node.op_type.clone(),
                        weight: layer.site.tensor.clone(),
                        reason,
                    });
                    continue;
                }
            };
        report.weights += rounding.weights;
        report.changed += rounding.changed;
        report.mean_nearest_error += rounding.nearest_error;
        report.mean_adaptive_error += rounding.adaptive_error;
        report.layers.push(rounding);
        chosen.insert(layer.site.tensor.clone(), weight);
    }
    let counted = report.layers.len().max(1) as f64;
    report.mean_nearest_error /= counted;
    report.mean_adaptive_error /= counted;
    Ok((chosen, report))
}

/// The plan's weight sites split into layers to round and weights kept at nearest.
fn layers<'a>(
    model: &'a OnnxModel,
    plan: &'a QuantPlan,
) -> Result<(Vec<Layer<'a>>, Vec<KeptNearest>)> {
    let graph = model.graph();
    let constants: HashSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let mut first_reader: BTreeMap<&str, String> = BTreeMap::new();
    let (mut layers, mut kept) = (Vec::new(), Vec::new());
    for site in &plan.weights {
        let (ni, slot) = site.consumer;
        let Some(node) = graph.node.get(ni) else {
            bail!("the INT8 plan names node #{ni}, which the model does not have");
        };
        let label = node_label(graph, ni);
        let Some(init) = graph.initializer.iter().find(|t| t.name == site.tensor) else {
            bail!(
                "layer '{label}': weight '{}' is not an initializer",
                site.tensor
            );
        };
        let kind = layer_input(node, slot, &init.dims, site.axis)
            .with_context(|| format!("layer '{label}' (weight '{}')", site.tensor))?;
        let input = node.input.first().map_or("", String::as_str);
        let kind = match (kind, first_reader.get(site.tensor.as_str())) {
            (Ok(_), Some(first)) => Err(format!(
                "the weight is rounded for '{first}', which reads it too"
            )),
            (Ok(_), None) if input.is_empty() || constants.contains(input) => {
                Err("its input 0 is not an activation".to_string())
            }
            (kind, _) => kind,
        };
        match kind {
            Ok(input) => {
                first_reader.insert(&site.tensor, label.clone());
                layers.push(Layer {
                    site,
                    node,
                    label,
                    input,
                });
            }
            Err(reason) => kept.push(KeptNearest {
                node: label,
                op: node.op_type.clone(),
                weight: site.tensor.clone(),
                reason,
            }),
        }
    }
    Ok((layers, kept))
}

/// How `node` reads its input, given its weight (input `slot`, dims `dims`, channels along
/// `axis`): `Err` with the reason for a layer adaptive rounding does not handle; an error for
/// a convolution whose attributes make no sense.
fn layer_input(
    node: &NodeProto,
    slot: usize,
    dims: &[i64],
    axis: i64,
) -> Result<std::result::Result<LayerInput, String>> {
    let unhandled = |why: &str| Ok(Err(why.to_string()));
    if dims.iter().any(|&d| d <= 0) {
        return unhandled("the weight is empty");
    }
    let d: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    match (node.op_type.as_str(), slot, d.len(), axis) {
        ("Conv", 1, 4, 0) => Ok(Ok(LayerInput::Conv2d(conv2d(node, &d)?))),
        ("Conv", 1, rank, _) if rank != 4 => unhandled("only 2-D convolutions are handled"),
        ("MatMul", 1, 2, 1) => Ok(Ok(LayerInput::Dense { fan_in: d[0] })),
        ("Gemm", 1, 2, _) if int_attr(node, "transA").unwrap_or(0) != 0 => {
            unhandled("a Gemm with transA is not handled")
        }
        ("Gemm", 1, 2, 0) => Ok(Ok(LayerInput::Dense { fan_in: d[1] })),
        ("Gemm", 1, 2, 1) => Ok(Ok(LayerInput::Dense { fan_in: d[0] })),
        (op, _, rank, _) => unhandled(&format!(
            "{op} with a rank-{rank} weight in input {slot}, channels on axis {axis}, is not handled"
        )),
    }
}

/// A 2-D convolution's geometry from its attributes and weight dims `[Cout, Cin/group, kh, kw]`.
fn conv2d(node: &NodeProto, dims: &[usize]) -> Result<Conv2d> {
    let group = int_attr(node, "group").unwrap_or(1);
    if group < 1 || !dims[0].is_multiple_of(group as usize) {
        bail!(
            "group {group} does not divide the {} output channels",
            dims[0]
        );
    }
    let pair = |name: &str| -> Result<[usize; 2]> {
        match ints_attr(node, name) {
            None => Ok([1, 1]),
            Some(&[a, b]) if a >= 1 && b >= 1 => Ok([a as usize, b as usize]),
            Some(v) => bail!("{name} {v:?} is not two positive values"),
        }
    };
    if let Some(k) = ints_attr(node, "kernel_shape") {
        if k.len() != 2 || k[0] as usize != dims[2] || k[1] as usize != dims[3] {
            bail!("kernel_shape {k:?} disagrees with the weight's dims {dims:?}");
        }
    }
    let padding = match string_attr(node, "auto_pad").as_deref() {
        None | Some("NOTSET") | Some("") => match ints_attr(node, "pads") {
            None => Padding::Explicit([0; 4]),
            Some(p) if p.len() == 4 && p.iter().all(|&v| v >= 0) => {
                Padding::Explicit([p[0], p[1], p[2], p[3]].map(|v| v as usize))
            }
            Some(p) => bail!("pads {p:?} are not four non-negative values"),
        },
        Some("VALID") => Padding::Explicit([0; 4]),
        Some("SAME_UPPER") => Padding::SameUpper,
        Some("SAME_LOWER") => Padding::SameLower,
        Some(other) => bail!("auto_pad '{other}' is not an ONNX padding mode"),
    };
    Ok(Conv2d {
        group: group as usize,
        in_per_group: dims[1],
        kernel: [dims[2], dims[3]],
        strides: pair("strides")?,
        dilations: pair("dilations")?,
        padding,
    })
}

/// `values` (a weight in its own layout, dims `dims`, channels along `axis`) with each
/// channel's weights contiguous, in the order of its input patch: a `[K, N]` weight
/// (channels on axis 1) is transposed; the others are already so. `back` undoes it.
fn channel_major<T: Copy>(values: &[T], dims: &[i64], axis: usize, back: bool) -> Vec<T> {
    if axis != 1 || dims.len() != 2 {
        return values.to_vec();
    }
    let (k, n) = (dims[0] as usize, dims[1] as usize);
    let (rows, cols) = if back { (n, k) } else { (k, n) };
    (0..values.len())
        .map(|i| values[(i % rows) * cols + i / rows])
        .collect()
}

/// What rounding one layer gave: its chosen values and report, or why it keeps nearest.
enum Rounded {
    Chosen(Int8Weight, LayerRounding),
    Kept(String),
}

/// Rounds one layer: its weights, their nearest values and scales, its input patches, the
/// descent; the chosen values back in the weight's layout. A layer with fewer than
/// [`MIN_PATCHES_PER_INPUT`] patches per input keeps nearest.
fn round_layer(
    model: &OnnxModel,
    layer: &Layer,
    clip: WeightClip,
    inputs: &BTreeMap<String, Vec<HostTensor>>,
) -> Result<Rounded> {
    let name = &layer.node.input[0];
    let batches = match inputs.get(name) {
        Some(b) if !b.is_empty() => b,
        _ => bail!("no captured batches of its input '{name}'"),
    };
    let mut views = Vec::with_capacity(batches.len());
    for t in batches {
        let TensorData::F32(v) = &t.data else {
            bail!("captured input '{name}' is {}, not float32", t.elem_type());
        };
        views.push((v.as_slice(), t.shape.as_slice()));
    }
    let init = model
        .graph()
        .initializer
        .iter()
        .find(|t| t.name == layer.site.tensor)
        .context("the weight is not an initializer")?;
    let (w, dims, axis) = (read_f32(init)?, &init.dims, layer.site.axis as usize);
    if w.len() != dims.iter().product::<i64>() as usize {
        bail!(
            "weight '{}' has {} values for dims {dims:?}",
            init.name,
            w.len()
        );
    }
    let (nearest, scales) = quantize_weights(&w, dims, axis, clip);
    let patches = sample_patches(&layer.input, &views, MAX_PATCHES)?;
    let fan_in = layer.input.fan_in();
    if patches.count < MIN_PATCHES_PER_INPUT * fan_in {
        return Ok(Rounded::Kept(format!(
            "{} input patches for {fan_in} inputs a channel: too few to tell its rounding from the samples' (needs {}×)",
            patches.count, MIN_PATCHES_PER_INPUT
        )));
    }
    let grams = patches
        .groups
        .iter()
        .map(|p| gram(p, patches.count, fan_in))
        .collect::<Result<Vec<_>>>()?;
    let weights = channel_major(&w, dims, axis, false);
    let problem = Problem {
        weights: &weights,
        scales: &scales,
        nearest: &channel_major(&nearest, dims, axis, false),
        grams: &grams,
    };
    let solution = solve(&problem)?;
    let relative = |e: f64| {
        if solution.reference > 0.0 {
            e / solution.reference
        } else {
            0.0
        }
    };
    let rounding = LayerRounding {
        node: layer.label.clone(),
        op: layer.node.op_type.clone(),
        weight: init.name.clone(),
        patches: patches.count,
        weights: w.len(),
        changed: solution.changed,
        nearest_error: relative(solution.nearest_error),
        adaptive_error: relative(solution.adaptive_error),
    };
    let values = channel_major(&solution.values, dims, axis, true);
    Ok(Rounded::Chosen(Int8Weight { values, scales }, rounding))
}

#[cfg(test)]
mod tests;
