//! How close an FP16 variant of a model stays to the float model, on real samples: the variant
//! is the FP16 rewrite with some nodes kept in float32 (beside the op types and nodes the user
//! keeps), opened on the reference backend and scored against the float model's first output
//! through [`Reference`], as the INT8 evaluator scores its variants. The candidates are the
//! nodes the FP16 graph computes in float16, less those that only move values.
//!
//! **Ranking.** The nodes whose float32 output on the tuning samples passes ±65504 lead the
//! ranking ([`Variants::leading`]): in float16 that output is infinite whatever the rest of the
//! graph does, so no other node can make up for it, and the overflow is a fact read off one run
//! of the float model, not a score subject to the samples' noise. The rest follow by a
//! sensitivity scan (each node alone kept in float32, scored end to end), the INT8 search's
//! ranking: it measures what the goal measures, where a layerwise error would rank by a
//! tensor's error that the layers after it may damp or blow up.
//!
//! **CPU backends.** tract and ONNX Runtime's CPU build widen float16 arithmetic to float32, so
//! an FP16 variant's overflow and rounding would not show there: every variant is scored through
//! [`emulate_fp16`], which rounds each float16 tensor to float16 as a GPU computes it. The model
//! written is the plain FP16 one.

use crate::backend::mac_count::model_macs;
use crate::backend::Device;
use crate::metrics::bootstrap::IntervalScores as Score;
use crate::onnx::macs::MacsCount;
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::rewrite::fp16::{Fp16, Fp16Options};
use crate::onnx::rewrite::fp16_emulate::Fp16Emulation;
use crate::onnx::rewrite::pass::{run_pass, Pass, PassReport};
use crate::onnx::rewrite::plan::{node_label, node_op};
use crate::onnx::rewrite::types::infer_elem_types;
use crate::onnx::OnnxModel;
use crate::quantize::eval_config::EvalConfig;
use crate::quantize::reference::{Reference, SampleUse};
use crate::quantize::search::Variants;
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// The largest finite float16 value.
pub(crate) const F16_MAX: f64 = 65504.0;

/// Ops that only move, pick or reshape values: computed in float16 they round nothing that was
/// not already float16, so keeping one in float32 cannot change the output. They are no
/// candidates (a search over them would measure variants that cannot differ).
const MOVES_VALUES: &[&str] = &[
    "Reshape",
    "Transpose",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Concat",
    "Slice",
    "Split",
    "Gather",
    "GatherElements",
    "GatherND",
    "Identity",
    "Shape",
    "Size",
    "Cast",
    "Expand",
    "Tile",
    "Pad",
    "Constant",
    "ConstantOfShape",
    "DepthToSpace",
    "SpaceToDepth",
];

/// The float model, the FP16 options, the candidates and what overflows, and the samples.
pub(crate) struct Fp16Evaluator {
    /// The float model (every node named: an unnamed one by its `#INDEX` label).
    pub model: OnnxModel,
    /// The FP16 rewrite's options every variant starts from.
    options: Fp16Options,
    candidates: Vec<usize>,
    /// The candidates whose float32 output passes ±65504 on the tuning samples, with the
    /// largest magnitude seen.
    pub overflow: BTreeMap<usize, f64>,
    macs: MacsCount,
    reference: Reference,
    /// Whether the variants are scored with their float16 arithmetic emulated (on a CPU).
    pub emulated: bool,
}

impl Fp16Evaluator {
    /// Reads the samples, runs the float `model` (loaded from `config.model`) on them, finds the
    /// candidates of the FP16 rewrite with `options` and which of them overflow.
    pub fn new(mut model: OnnxModel, config: &EvalConfig, options: &Fp16Options) -> Result<Self> {
        model.inline_external_data()?;
        let g = model.graph_mut();
        for i in 0..g.node.len() {
            if g.node[i].name.is_empty() {
                g.node[i].name = node_label(g, i);
            }
        }
        let (candidates, kept) =
            float16_nodes(&model, options).with_context(|| config.model.display().to_string())?;
        // The user's names and patterns, resolved once (a pattern that matches nothing is said
        // once, not for every variant).
        let options = Fp16Options {
            keep_nodes: kept,
            keep_regex: vec![],
            ..options.clone()
        };
        let reference = Reference::new(&model, config)?;
        let macs = model_macs(&model, &config.backend.input_shapes).unwrap_or_default();
        let mut me = Fp16Evaluator {
            overflow: BTreeMap::new(),
            options,
            candidates,
            macs,
            reference,
            emulated: config.backend.device == Device::Cpu,
            model,
        };
        me.overflow = me.overflowing()?;
        Ok(me)
    }

    /// The candidates whose first output's magnitude passes ±65504 on the tuning samples, with
    /// the largest finite magnitude seen.
    fn overflowing(&self) -> Result<BTreeMap<usize, f64>> {
        let g = self.model.graph();
        let outputs: BTreeMap<String, usize> = self
            .candidates
            .iter()
            .filter_map(|&i| Some((g.node[i].output.first()?.clone(), i)))
            .collect();
        let mut largest: BTreeMap<usize, f64> = BTreeMap::new();
        self.reference.capture(
            &self.model,
            outputs.keys().cloned().collect(),
            self.reference.tune.count,
            |name, t| {
                if let Some(&node) = outputs.get(name) {
                    let m = t
                        .data
                        .to_f64()
                        .into_iter()
                        .filter(|v| v.is_finite())
                        .fold(0.0f64, |m, v| m.max(v.abs()));
                    let e = largest.entry(node).or_insert(0.0);
                    *e = e.max(m);
                }
                Ok(())
            },
        )?;
        largest.retain(|_, m| *m > F16_MAX);
        Ok(largest)
    }

    /// The FP16 model with the nodes of `float` kept in float32 too (the model written).
    pub fn variant(&self, float: &BTreeSet<usize>) -> Result<OnnxModel> {
        let mut options = self.options.clone();
        options
            .keep_nodes
            .extend(float.iter().map(|&i| self.label(i)));
        run_pass(self.model.clone(), &Fp16(options))
    }

    /// The variant as it is scored: with its float16 arithmetic emulated on a CPU backend.
    fn measured(&self, float: &BTreeSet<usize>) -> Result<OnnxModel> {
        let variant = self.variant(float)?;
        if self.emulated {
            run_pass(variant, &Fp16Emulation)
        } else {
            Ok(variant)
        }
    }

    /// A node's op type.
    pub fn op(&self, node: usize) -> String {
        node_op(self.model.graph(), node)
    }
}

/// The nodes of `model` (all named) that its FP16 rewrite with `options` computes in float16:
/// those with a float16 output in the rewritten graph (a Gemm is found by the MatMul it becomes),
/// less the ops that only move values; and the names of the nodes the options keep by name or
/// pattern.
fn float16_nodes(model: &OnnxModel, options: &Fp16Options) -> Result<(Vec<usize>, Vec<String>)> {
    let (half, report) = Fp16(options.clone()).run(model.clone())?;
    let PassReport::Fp16(report) = report else {
        bail!("the FP16 pass gave no FP16 report");
    };
    let types = infer_elem_types(half.graph());
    let computes16: HashSet<&str> = half
        .graph()
        .node
        .iter()
        .filter(|n| {
            n.output
                .iter()
                .any(|o| types.get(o) == Some(&DataType::Float16))
        })
        .map(|n| n.name.as_str())
        .collect();
    let candidates = model
        .graph()
        .node
        .iter()
        .enumerate()
        .filter(|(_, n)| !MOVES_VALUES.contains(&n.op_type.as_str()))
        .filter(|(_, n)| {
            computes16.contains(n.name.as_str())
                || computes16.contains(format!("{}_matmul", n.name).as_str())
        })
        .map(|(i, _)| i)
        .collect();
    Ok((candidates, report.kept_nodes))
}

impl Variants for Fp16Evaluator {
    fn candidates(&self) -> Vec<usize> {
        self.candidates.clone()
    }

    fn score(&self, float: &BTreeSet<usize>) -> Result<Score> {
        self.reference.score(&self.measured(float)?)
    }

    fn check_score(&self, float: &BTreeSet<usize>) -> Result<Option<Score>> {
        if self.reference.check.is_none() {
            return Ok(None);
        }
        self.reference.check_score(&self.measured(float)?)
    }

    fn label(&self, node: usize) -> String {
        node_label(self.model.graph(), node)
    }

    fn share(&self, float: &BTreeSet<usize>) -> Option<f64> {
        let half = self.candidates.iter().filter(|n| !float.contains(n));
        (self.macs.total > 0).then(|| self.macs.share(half.copied()))
    }

    fn sample_use(&self) -> SampleUse {
        self.reference.sample_use()
    }

    fn leading(&self) -> BTreeSet<usize> {
        self.overflow.keys().copied().collect()
    }
}
