//! Which INT8 nodes break a model: for every node the INT8 plan quantizes, the score when it
//! alone is INT8 (its own damage) and when it alone stays float (what leaving it out recovers),
//! against the float model on real samples ([`super::int8_eval`]).

use super::int8_eval::{EvalConfig, Evaluator, Score};
use super::progress::Progress;
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
    pub macs_pct: f64,
    /// The model with only this node in INT8.
    pub alone: Score,
    /// The model with every other node in INT8 and this one in float.
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
    pub eval_data: String,
    /// Samples measured on.
    pub samples: usize,
    /// What the float part computed in.
    pub fallback: String,
    /// Every node of the plan in INT8.
    pub full_int8: Score,
    /// The nodes, most damaging alone first.
    pub nodes: Vec<NodeSensitivity>,
    /// Variants measured.
    pub variants: usize,
    /// Wall time, seconds.
    pub wall_s: f64,
}

/// The alone-damage order: lowest cosine alone first, then the largest recovery.
pub fn rank(nodes: &mut [NodeSensitivity]) {
    nodes.sort_by(|a, b| {
        a.alone
            .cosine
            .total_cmp(&b.alone.cosine)
            .then(b.recovery.total_cmp(&a.recovery))
    });
}

/// Scans every quantized node of `config.model`.
pub fn sensitivity(config: &EvalConfig, progress: &dyn Progress) -> Result<SensitivityReport> {
    let start = Instant::now();
    let eval = Evaluator::new(config)?;
    let nodes = eval.quantized_nodes();
    let all: BTreeSet<usize> = nodes.iter().copied().collect();
    progress.start("variants", Some(1 + 2 * nodes.len() as u64));
    let full = eval.score(&BTreeSet::new())?;
    progress.advance(1);
    let mut out = vec![];
    for &node in &nodes {
        progress.status(eval.label(node));
        let mut others = all.clone();
        others.remove(&node);
        let alone = eval.score(&others)?;
        progress.advance(1);
        let left_float = eval.score(&BTreeSet::from([node]))?;
        progress.advance(1);
        let macs = eval.macs.of(node);
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
        samples: eval.samples,
        fallback: config.fallback.to_string(),
        full_int8: full,
        variants: 1 + 2 * nodes.len(),
        nodes: out,
        wall_s: start.elapsed().as_secs_f64(),
    })
}
