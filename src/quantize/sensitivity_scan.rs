//! Which INT8 nodes break a model: for every node the INT8 plan quantizes, the score when it
//! alone is INT8 (its own damage) and when it alone stays float (what leaving it out recovers),
//! against the float model on real samples ([`crate::quantize::evaluate`]).

use crate::onnx::rewrite::plan::Exclusion;
use crate::progress::Progress;
use crate::quantize::evaluate::{EvalConfig, Evaluator, SampleUse, Score};
use crate::quantize::scale_search::ScaleSearchReport;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::time::Instant;

/// One quantized node of the scan.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeSensitivity {
    /// Index in the graph.
    pub node: usize,
    /// Name (or `#INDEX`).
    pub name: String,
    /// Op type.
    pub op: String,
    /// MACs per sample (0 for an op that is not counted, such as a residual Add).
    pub macs: u64,
    /// Share of the model's counted MACs, %.
    pub(crate) macs_pct: f64,
    /// The model with only this node in INT8.
    pub alone: Score,
    /// The baseline (every other node in INT8, the excluded ones in float) with this one in
    /// float too.
    pub left_float: Score,
    /// What leaving it in float buys over the full INT8 model: the gain in cosine.
    pub recovery: f64,
}

/// What the scan found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SensitivityReport {
    /// The model.
    pub model: String,
    /// The calibration cache.
    pub cache: String,
    /// The evaluation data.
    pub(crate) eval_data: String,
    /// The samples: the scan scores on the tuning part only.
    pub samples: SampleUse,
    /// What the float part computed in.
    pub fallback: String,
    /// Every node of the plan in INT8 but the excluded ones.
    pub full_int8: Score,
    /// Quantizable nodes left in float in every variant (by `--exclude`…).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<String>,
    /// What the activation scale search changed (when asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_search: Option<ScaleSearchReport>,
    /// The nodes, most damaging alone first.
    pub nodes: Vec<NodeSensitivity>,
    /// Variants measured.
    pub variants: usize,
    /// Wall time, seconds.
    pub wall_s: f64,
}

/// The alone-damage order: lowest cosine alone first (a NaN one, from NaN or ±Inf outputs,
/// lowest of all), then the largest recovery.
pub fn rank(nodes: &mut [NodeSensitivity]) {
    let alone = |n: &NodeSensitivity| match n.alone.cosine {
        c if c.is_nan() => f64::NEG_INFINITY,
        c => c,
    };
    nodes.sort_by(|a, b| {
        alone(a)
            .total_cmp(&alone(b))
            .then(b.recovery.total_cmp(&a.recovery))
    });
}

/// Scans every quantized node of `config.model` that `exclude` leaves in INT8; the nodes it
/// names stay float in every variant but the alone-in-INT8 ones (the baseline is the model
/// with them in float).
pub fn sensitivity(
    config: &EvalConfig,
    exclude: &Exclusion,
    progress: &dyn Progress,
) -> Result<SensitivityReport> {
    let start = Instant::now();
    let eval = Evaluator::new(config, progress)?;
    let excluded = exclude.resolve(eval.model.graph())?;
    let all: BTreeSet<usize> = eval.quantized_nodes().into_iter().collect();
    let nodes: Vec<usize> = all.difference(&excluded).copied().collect();
    progress.start("variants", Some(1 + 2 * nodes.len() as u64));
    let full = eval.score(&excluded)?;
    progress.advance(1);
    let mut out = vec![];
    for &node in &nodes {
        progress.status(eval.label(node));
        let mut others = all.clone();
        others.remove(&node);
        let alone = eval.score(&others)?;
        progress.advance(1);
        let mut float = excluded.clone();
        float.insert(node);
        let left_float = eval.score(&float)?;
        progress.advance(1);
        let macs = eval.macs.node_macs(node);
        out.push(NodeSensitivity {
            node,
            name: eval.label(node),
            op: eval.op(node),
            macs,
            macs_pct: 100.0 * eval.macs.share([node]),
            alone,
            left_float,
            recovery: left_float.cosine - full.cosine,
        });
    }
    progress.finish();
    rank(&mut out);
    Ok(SensitivityReport {
        model: config.model.display().to_string(),
        cache: config.cache.display().to_string(),
        eval_data: config.eval_data.clone(),
        samples: eval.sample_use(),
        fallback: config.fallback.to_string(),
        full_int8: full,
        excluded: all
            .intersection(&excluded)
            .map(|&i| eval.label(i))
            .collect(),
        scale_search: eval.scale_search.clone(),
        variants: 1 + 2 * nodes.len(),
        nodes: out,
        wall_s: start.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(node: usize, alone_cosine: f64) -> NodeSensitivity {
        NodeSensitivity {
            node,
            name: format!("#{node}"),
            op: "Conv".into(),
            macs: 0,
            macs_pct: 0.0,
            alone: Score {
                cosine: alone_cosine,
                ..Default::default()
            },
            left_float: Score::default(),
            recovery: 0.0,
        }
    }

    #[test]
    fn a_nan_cosine_alone_ranks_as_the_most_damaging() {
        let mut nodes = vec![node(0, 0.99), node(1, f64::NAN), node(2, 0.5)];
        rank(&mut nodes);
        let order: Vec<usize> = nodes.iter().map(|n| n.node).collect();
        assert_eq!(order, [1, 2, 0]);
    }
}
