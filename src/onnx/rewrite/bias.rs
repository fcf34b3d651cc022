//! Bias correction (Nagel et al., "Data-Free Quantization", 2019): quantizing a convolution's
//! weights shifts the mean of its output by `ΔW · E[x]` per output channel (`ΔW` the rounding
//! error of the weights, `E[x]` the mean of each input channel over real samples). Subtracting
//! that shift from the bias removes the weights' systematic error; the activations' is left.

use super::plan::QuantPlan;
use super::qdq::WeightQuant;
use crate::onnx::attributes::int_attr;
use crate::onnx::graph_builder::tensor_f32;
use crate::onnx::OnnxModel;
use anyhow::{bail, Result};
use std::collections::HashMap;

use super::initializer::read_f32;

/// For every Conv whose weights `plan` quantizes and whose input's channel means are in
/// `means` (tensor name → one mean per channel), a new bias that cancels the mean shift of
/// the weights quantized as `weights` says (a Conv without a bias gets one). Returns the corrected nodes' names.
pub(crate) fn correct_biases(
    model: &mut OnnxModel,
    plan: &QuantPlan,
    means: &HashMap<String, Vec<f64>>,
    weights: &WeightQuant,
) -> Result<Vec<String>> {
    let mut corrected = vec![];
    for site in &plan.weights {
        let (ni, slot) = site.consumer;
        let graph = model.graph();
        let node = &graph.node[ni];
        if node.op_type != "Conv" || slot != 1 || site.axis != 0 {
            continue;
        }
        let Some(mu) = node.input.first().and_then(|x| means.get(x)) else {
            continue;
        };
        let Some(w) = graph.initializer.iter().find(|t| t.name == site.tensor) else {
            continue;
        };
        let dims = w.dims.clone();
        let values = read_f32(w)?;
        let group = int_attr(node, "group").map_or(1, |g| g.max(1)) as usize;
        let (cout, cin_g) = (dims[0] as usize, dims[1] as usize);
        let kernel: usize = dims[2..].iter().product::<i64>() as usize;
        if cin_g * group != mu.len() || cout % group != 0 {
            bail!(
                "node '{}': {} input channel means for {group} groups of {cin_g}",
                node.name,
                mu.len()
            );
        }
        let (q, scales) = weights.quantize(&site.tensor, &node.op_type, &values, &dims, 0);
        let per_group = cout / group;
        let shift: Vec<f64> = (0..cout)
            .map(|o| {
                let g = o / per_group;
                (0..cin_g)
                    .map(|j| {
                        let at = (o * cin_g + j) * kernel;
                        let dw: f64 = (at..at + kernel)
                            .map(|i| (q[i] as f32 * scales[o] - values[i]) as f64)
                            .sum();
                        dw * mu[g * cin_g + j]
                    })
                    .sum()
            })
            .collect();
        let old: Vec<f32> = match node.input.get(2).filter(|b| !b.is_empty()) {
            Some(b) => match graph.initializer.iter().find(|t| &t.name == b) {
                Some(t) => read_f32(t)?,
                None => continue,
            },
            None => vec![0.0; cout],
        };
        let name = format!("{}.bias_corrected", node.name);
        let new: Vec<f32> = old
            .iter()
            .zip(&shift)
            .map(|(b, s)| (*b as f64 - s) as f32)
            .collect();
        corrected.push(node.name.clone());
        let g = model.graph_mut();
        g.initializer.push(tensor_f32(&name, &[cout as i64], &new));
        let node = &mut g.node[ni];
        node.input.resize(3, String::new());
        node.input[2] = name;
    }
    Ok(corrected)
}
