//! Folding a BatchNormalization that follows a convolution into the convolution's weights and
//! bias (inference form: `k = γ / √(σ² + ε)`, `W' = W·k` per output channel,
//! `b' = (b − μ)·k + β`). TensorRT folds it when it builds; trtkit folds it where a rewrite has
//! to see the convolution's real weights, such as cross-layer equalisation.

use super::initializer::read_f32;
use super::pass::{Pass, PassReport};
use crate::onnx::attributes::float_attr;
use crate::onnx::graph_builder::tensor_f32;
use crate::onnx::pb::GraphProto;
use crate::onnx::OnnxModel;
use anyhow::{bail, Result};

/// The folding pass.
#[derive(Clone, Debug, Default)]
pub(crate) struct FoldBatchNorm;

/// How many readers `tensor` has in `graph`, counting graph outputs.
fn reader_count(graph: &GraphProto, tensor: &str) -> usize {
    graph
        .node
        .iter()
        .flat_map(|n| &n.input)
        .filter(|i| i.as_str() == tensor)
        .count()
        + graph.output.iter().filter(|o| o.name == tensor).count()
}

/// The `(conv, batch norm)` node indices of the next foldable pair: a Conv whose output only a
/// one-output BatchNormalization reads, its parameters initializers, the conv's weights (and
/// bias) initializers only it reads.
fn next_pair(graph: &GraphProto) -> Option<(usize, usize)> {
    let is_init = |name: &str| graph.initializer.iter().any(|t| t.name == name);
    graph.node.iter().enumerate().find_map(|(b, bn)| {
        if bn.op_type != "BatchNormalization" || bn.output.len() != 1 || bn.input.len() != 5 {
            return None;
        }
        let x = &bn.input[0];
        let c = graph
            .node
            .iter()
            .position(|n| n.op_type == "Conv" && n.output.len() == 1 && &n.output[0] == x)?;
        let conv = &graph.node[c];
        let own = |name: &String| is_init(name) && reader_count(graph, name) == 1;
        let ok = reader_count(graph, x) == 1
            && bn.input[1..].iter().all(|p| is_init(p))
            && conv.input.get(1).is_some_and(own)
            && conv.input.get(2).is_none_or(|b| b.is_empty() || own(b));
        ok.then_some((c, b))
    })
}

/// Folds the batch norm `b` into the conv `c`; the conv then writes the batch norm's output.
fn fold(graph: &mut GraphProto, c: usize, b: usize) -> Result<()> {
    let bn = graph.node[b].clone();
    let values = |name: &str| -> Result<Vec<f32>> {
        read_f32(
            graph
                .initializer
                .iter()
                .find(|t| t.name == name)
                .expect("checked"),
        )
    };
    let (gamma, beta, mean, var) = (
        values(&bn.input[1])?,
        values(&bn.input[2])?,
        values(&bn.input[3])?,
        values(&bn.input[4])?,
    );
    let eps = float_attr(&bn, "epsilon").unwrap_or(1e-5);
    let conv = graph.node[c].clone();
    let w_name = conv.input[1].clone();
    let w_dims = graph
        .initializer
        .iter()
        .find(|t| t.name == w_name)
        .expect("checked")
        .dims
        .clone();
    let mut w = values(&w_name)?;
    let channels = w_dims[0] as usize;
    if [&gamma, &beta, &mean, &var]
        .iter()
        .any(|v| v.len() != channels)
    {
        bail!(
            "BatchNormalization '{}': parameters do not have the {channels} channels of '{}'",
            bn.name,
            conv.name
        );
    }
    let k: Vec<f32> = gamma
        .iter()
        .zip(&var)
        .map(|(g, v)| g / (v + eps).sqrt())
        .collect();
    let per = w.len() / channels;
    for (i, x) in w.iter_mut().enumerate() {
        *x *= k[i / per];
    }
    let bias_name = match conv.input.get(2).filter(|s| !s.is_empty()) {
        Some(name) => name.clone(),
        None => format!("{}_folded_bias", conv.output[0]),
    };
    let bias_old = match conv.input.get(2).filter(|s| !s.is_empty()) {
        Some(name) => values(name)?,
        None => vec![0.0; channels],
    };
    let bias: Vec<f32> = (0..channels)
        .map(|i| (bias_old[i] - mean[i]) * k[i] + beta[i])
        .collect();
    graph
        .initializer
        .retain(|t| t.name != w_name && t.name != bias_name);
    graph.initializer.push(tensor_f32(&w_name, &w_dims, &w));
    graph
        .initializer
        .push(tensor_f32(&bias_name, &[channels as i64], &bias));
    let node = &mut graph.node[c];
    node.input.truncate(2);
    node.input.push(bias_name);
    node.output[0] = bn.output[0].clone();
    graph.node.remove(b);
    // The batch norm's parameters go too, unless something else reads them.
    for p in &bn.input[1..] {
        if reader_count(graph, p) == 0 {
            graph.initializer.retain(|t| &t.name != p);
        }
    }
    Ok(())
}

impl Pass for FoldBatchNorm {
    fn name(&self) -> &'static str {
        "fold-batch-norm"
    }

    fn run(&self, model: OnnxModel) -> Result<(OnnxModel, PassReport)> {
        let mut model = model;
        let mut folded = vec![];
        while let Some((c, b)) = next_pair(model.graph()) {
            folded.push(model.graph().node[b].name.clone());
            fold(model.graph_mut(), c, b)?;
        }
        Ok((model, PassReport::FoldBatchNorm { folded }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::tract::first_output;
    use crate::onnx::test_models;

    fn logits(m: &OnnxModel) -> Vec<f64> {
        first_output(m, "input", &[2, 3, 16, 16], 9)
    }

    /// The test classifier's Conv → BatchNormalization becomes one Conv with a bias, and the
    /// model computes what it computed.
    #[test]
    fn a_folded_batch_norm_leaves_the_function_as_it_was() {
        let m = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
        let (folded, report) = FoldBatchNorm.run(m.clone()).unwrap();
        let PassReport::FoldBatchNorm { folded: names } = report else {
            panic!("{report:?}")
        };
        assert_eq!(names.len(), 1);
        let ops: Vec<&str> = folded
            .graph()
            .node
            .iter()
            .map(|n| n.op_type.as_str())
            .collect();
        assert!(!ops.contains(&"BatchNormalization"), "{ops:?}");
        assert_eq!(folded.graph().node[0].input.len(), 3);
        assert!(!folded
            .graph()
            .initializer
            .iter()
            .any(|t| t.name.starts_with("bn.")));
        let (a, b) = (logits(&m), logits(&folded));
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-4 * (1.0 + x.abs()), "{x} vs {y}");
        }
    }
}
