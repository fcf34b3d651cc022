//! Cross-layer equalisation (Nagel et al., "Data-Free Quantization", 2019): for two
//! convolutions in a row with nothing but a Relu between them, output channel `c` of the first
//! is divided by `s_c` and input channel `c` of the second multiplied by it. Relu commutes
//! with a positive scale, so the model computes the same function; with `s_c = √(r1_c / r2_c)`
//! (`r1_c` the largest weight magnitude of the first conv's output channel `c`, `r2_c` that of
//! the second conv's weights reading channel `c`) both become `√(r1_c r2_c)`, so channels whose
//! ranges differed by orders of magnitude share one range, and so does the tensor between.
//!
//! BatchNormalizations after convolutions are folded first ([`super::fold_bn`]), so
//! Conv → BatchNormalization → Relu → Conv is a pair. The model stays float: equalise, then
//! calibrate the equalised model, then quantize it.

use super::fold_bn::FoldBatchNorm;
use super::initializer::read_f32;
use super::pass::{Pass, PassReport};
pub(crate) use super::report::EqualizeReport;
use crate::onnx::attributes::int_attr;
use crate::onnx::graph_builder::tensor_f32;
use crate::onnx::pb::GraphProto;
use crate::onnx::OnnxModel;
use anyhow::{bail, Result};
use std::collections::HashMap;

/// Sweeps over every pair at most; a sweep that moves no scale by more than [`SETTLED`]
/// (relative) ends the pass early.
pub(crate) const SWEEPS: usize = 20;

/// A scale within this of 1 counts as no change.
pub(crate) const SETTLED: f32 = 1e-4;

/// The equalisation pass.
#[derive(Clone, Debug, Default)]
pub(crate) struct Equalize;

/// Two convolutions equalised together (node indices).
#[derive(Clone, Debug, PartialEq)]
struct Pair {
    first: usize,
    second: usize,
}

/// Where each tensor is read: `(node, input slot)` per reader.
fn readers(graph: &GraphProto) -> HashMap<&str, Vec<(usize, usize)>> {
    let mut out: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
    for (i, n) in graph.node.iter().enumerate() {
        for (slot, name) in n.input.iter().enumerate() {
            out.entry(name.as_str()).or_default().push((i, slot));
        }
    }
    out
}

/// The pairs the pass may equalise: a Conv whose only reader is a Relu whose only reader is a
/// Conv (or a Conv read only by a Conv), neither tensor a graph output, both weights
/// initializers read by that conv alone, the channel counts matching.
fn pairs(graph: &GraphProto) -> Vec<Pair> {
    let readers = readers(graph);
    let outputs: Vec<&str> = graph.output.iter().map(|v| v.name.as_str()).collect();
    let only_reader = |tensor: &str| -> Option<(usize, usize)> {
        match readers.get(tensor).map(Vec::as_slice) {
            Some([one]) if !outputs.contains(&tensor) => Some(*one),
            _ => None,
        }
    };
    let weights_of = |node: usize| -> Option<&[i64]> {
        let n = &graph.node[node];
        let w = n.input.get(1)?;
        if readers.get(w.as_str()).map(Vec::len) != Some(1) {
            return None;
        }
        if let Some(b) = n.input.get(2).filter(|b| !b.is_empty()) {
            if readers.get(b.as_str()).map(Vec::len) != Some(1)
                || !graph.initializer.iter().any(|t| &t.name == b)
            {
                return None;
            }
        }
        graph
            .initializer
            .iter()
            .find(|t| &t.name == w)
            .map(|t| t.dims.as_slice())
            .filter(|d| d.len() >= 3)
    };
    let mut out = vec![];
    for (first, n) in graph.node.iter().enumerate() {
        if n.op_type != "Conv" || n.output.len() != 1 {
            continue;
        }
        let Some(mut next) = only_reader(&n.output[0]) else {
            continue;
        };
        let between = &graph.node[next.0];
        if between.op_type == "Relu" {
            let Some(after) = only_reader(&between.output[0]) else {
                continue;
            };
            next = after;
        }
        let second = next.0;
        if graph.node[second].op_type != "Conv" || next.1 != 0 {
            continue;
        }
        let (Some(w1), Some(w2)) = (weights_of(first), weights_of(second)) else {
            continue;
        };
        let group = int_attr(&graph.node[second], "group").map_or(1, |g| g.max(1));
        if w1[0] == w2[1] * group {
            out.push(Pair { first, second });
        }
    }
    out
}

/// A conv's weights (and bias) as values, with what the equalisation needs of its shape.
struct ConvWeights {
    name: String,
    dims: Vec<i64>,
    values: Vec<f32>,
    bias: Option<(String, Vec<f32>)>,
    group: usize,
}

impl ConvWeights {
    fn read(graph: &GraphProto, node: usize) -> Result<ConvWeights> {
        let n = &graph.node[node];
        let find = |name: &str| graph.initializer.iter().find(|t| t.name == name);
        let w = find(&n.input[1]).expect("pairs() checked the weights");
        let bias = match n.input.get(2).filter(|b| !b.is_empty()) {
            Some(b) => Some((b.clone(), read_f32(find(b).expect("pairs() checked"))?)),
            None => None,
        };
        Ok(ConvWeights {
            name: w.name.clone(),
            dims: w.dims.clone(),
            values: read_f32(w)?,
            bias,
            group: int_attr(n, "group").map_or(1, |g| g.max(1)) as usize,
        })
    }

    /// Elements per output channel.
    fn per_output(&self) -> usize {
        self.values.len() / self.dims[0] as usize
    }

    /// The input channel (of the whole input) that element `i` reads.
    fn input_channel(&self, i: usize) -> usize {
        let (cout, cin_g) = (self.dims[0] as usize, self.dims[1] as usize);
        let kernel = self.per_output() / cin_g;
        let out = i / self.per_output();
        let group = out / (cout / self.group);
        group * cin_g + (i / kernel) % cin_g
    }

    fn write(self, graph: &mut GraphProto) {
        let mut put = |name: &str, dims: &[i64], values: &[f32]| {
            if let Some(t) = graph.initializer.iter_mut().find(|t| t.name == name) {
                *t = tensor_f32(name, dims, values);
            }
        };
        put(&self.name, &self.dims, &self.values);
        if let Some((name, b)) = &self.bias {
            put(name, &[b.len() as i64], b);
        }
    }
}

/// Equalises one pair; returns the largest relative change of a scale.
fn equalize_pair(graph: &mut GraphProto, pair: &Pair) -> Result<f32> {
    let mut a = ConvWeights::read(graph, pair.first)?;
    let mut b = ConvWeights::read(graph, pair.second)?;
    let channels = a.dims[0] as usize;
    let mut r1 = vec![0f32; channels];
    for (i, v) in a.values.iter().enumerate() {
        let c = i / a.per_output();
        r1[c] = r1[c].max(v.abs());
    }
    let mut r2 = vec![0f32; channels];
    for (i, v) in b.values.iter().enumerate() {
        let c = b.input_channel(i);
        r2[c] = r2[c].max(v.abs());
    }
    let s: Vec<f32> = r1
        .iter()
        .zip(&r2)
        .map(|(&x, &y)| {
            if x > 0.0 && y > 0.0 {
                (x / y).sqrt()
            } else {
                1.0
            }
        })
        .collect();
    let per = a.per_output();
    for (i, v) in a.values.iter_mut().enumerate() {
        *v /= s[i / per];
    }
    if let Some((_, bias)) = &mut a.bias {
        for (v, sc) in bias.iter_mut().zip(&s) {
            *v /= sc;
        }
    }
    for i in 0..b.values.len() {
        let c = b.input_channel(i);
        b.values[i] *= s[c];
    }
    a.write(graph);
    b.write(graph);
    Ok(s.iter().map(|v| (v - 1.0).abs()).fold(0.0, f32::max))
}

/// The ratio of the largest to the smallest per-channel weight range over the output
/// channels of the pairs' first convs, the worst pair's (1 when there are none).
fn worst_spread(graph: &GraphProto, pairs: &[Pair]) -> Result<f32> {
    let mut worst = 1f32;
    for p in pairs {
        let a = ConvWeights::read(graph, p.first)?;
        let per = a.per_output();
        let ranges: Vec<f32> = a
            .values
            .chunks(per)
            .map(|c| c.iter().fold(0f32, |m, v| m.max(v.abs())))
            .filter(|&r| r > 0.0)
            .collect();
        let (lo, hi) = ranges
            .iter()
            .fold((f32::MAX, 0f32), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        if hi > 0.0 {
            worst = worst.max(hi / lo);
        }
    }
    Ok(worst)
}

impl Pass for Equalize {
    fn name(&self) -> &'static str {
        "equalize"
    }

    fn run(&self, model: OnnxModel) -> Result<(OnnxModel, PassReport)> {
        let (mut model, folded) = FoldBatchNorm.run(model)?;
        let PassReport::FoldBatchNorm { folded } = folded else {
            bail!("the batch norm folding reported something else");
        };
        let pairs = pairs(model.graph());
        let spread_before = worst_spread(model.graph(), &pairs)?;
        let mut sweeps = 0;
        while sweeps < SWEEPS && !pairs.is_empty() {
            sweeps += 1;
            let mut moved = 0f32;
            for p in &pairs {
                moved = moved.max(equalize_pair(model.graph_mut(), p)?);
            }
            if moved < SETTLED {
                break;
            }
        }
        let report = PassReport::Equalize(EqualizeReport {
            folded_batch_norms: folded.len(),
            pairs: pairs
                .iter()
                .map(|p| {
                    let g = model.graph();
                    (g.node[p.first].name.clone(), g.node[p.second].name.clone())
                })
                .collect(),
            sweeps,
            spread_before,
            spread_after: worst_spread(model.graph(), &pairs)?,
        });
        Ok((model, report))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::tract::first_output;
    use crate::onnx::test_models;

    fn logits(m: &OnnxModel) -> Vec<f64> {
        first_output(m, "input", &[2, 4, 8, 8], 3)
    }

    /// Multiplies `name`'s values whose flat index `pick` selects by `k`.
    fn scale_where(m: &mut OnnxModel, name: &str, k: f32, pick: impl Fn(usize) -> bool) {
        let t = m
            .graph_mut()
            .initializer
            .iter_mut()
            .find(|t| t.name == name)
            .unwrap();
        let mut v = read_f32(t).unwrap();
        for (i, x) in v.iter_mut().enumerate() {
            if pick(i) {
                *x *= k;
            }
        }
        *t = tensor_f32(name, &t.dims.clone(), &v);
    }

    /// The channel-scaled model's `conv_2` → Relu → `conv_4` pair, unbalanced the way folded
    /// BatchNorm leaves it (output channel 0 of `conv_2` ×100, what `conv_4` reads of it
    /// ÷100: the same function): equalised, its channel ranges come together and the model
    /// computes what it computed.
    #[test]
    fn equalising_keeps_the_function_and_evens_the_channel_ranges() {
        let mut m = OnnxModel::from_proto(test_models::channel_scaled_convs(), "s.onnx");
        scale_where(&mut m, "w2", 100.0, |i| i < 72);
        scale_where(&mut m, "w3", 0.01, |i| i % 8 == 0);
        let (eq, report) = Equalize.run(m.clone()).unwrap();
        let PassReport::Equalize(EqualizeReport {
            pairs,
            spread_before,
            spread_after,
            ..
        }) = report
        else {
            panic!("{report:?}")
        };
        assert_eq!(pairs, vec![("conv_2".to_string(), "conv_4".to_string())]);
        assert!(spread_before > 50.0, "{spread_before}");
        assert!(spread_after < 5.0, "{spread_before} -> {spread_after}");
        let (a, b) = (logits(&m), logits(&eq));
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-4 * (1.0 + x.abs()), "{x} vs {y}");
        }
        // Ranges of conv_2's output channels equal those of conv_4's input channels.
        let g = eq.graph();
        let first = ConvWeights::read(g, 2).unwrap();
        let second = ConvWeights::read(g, 4).unwrap();
        let mut r2 = [0f32; 8];
        for (i, v) in second.values.iter().enumerate() {
            let c = second.input_channel(i);
            r2[c] = r2[c].max(v.abs());
        }
        for (c, chunk) in first.values.chunks(first.per_output()).enumerate() {
            let r1 = chunk.iter().fold(0f32, |m, v| m.max(v.abs()));
            assert!(
                (r1 - r2[c]).abs() <= 1e-5 * r1,
                "channel {c}: {r1} vs {}",
                r2[c]
            );
        }
    }

    /// A depthwise conv reads input channel `c` with output channel `c` only.
    #[test]
    fn a_grouped_convs_input_channels_follow_its_groups() {
        let w = ConvWeights {
            name: "w".into(),
            dims: vec![4, 2, 1, 1],
            values: vec![0.0; 8],
            bias: None,
            group: 2,
        };
        let channels: Vec<usize> = (0..8).map(|i| w.input_channel(i)).collect();
        assert_eq!(channels, vec![0, 1, 0, 1, 2, 3, 2, 3]);
        let depthwise = ConvWeights {
            dims: vec![3, 1, 2, 2],
            values: vec![0.0; 12],
            group: 3,
            ..w
        };
        let channels: Vec<usize> = (0..12).map(|i| depthwise.input_channel(i)).collect();
        assert_eq!(channels, vec![0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
    }
}
