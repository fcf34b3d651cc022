//! The precision recipe, made once and applied alike by `quantize` (which writes the rewritten
//! ONNX) and `build` (which hands it to TensorRT): FP16 autocast with its kept nodes, or INT8
//! Q/DQ with the scales of a calibration (or a cache), the nodes left in float, what those
//! compute in, and how the weights' ranges are chosen. TensorRT 11 and TensorRT-RTX have no
//! precision flags, so this rewrite is what makes an engine FP16 or INT8.

use super::already_quantized::refuse_quantized;
use crate::backend::mac_count::model_macs;
use crate::calibration::request::{CalibrateConfig, CalibrateReport};
use crate::onnx::deferred_weights::DeferredWeights;
use crate::onnx::rewrite::constant_weights::LiftConstantWeights;
use crate::onnx::rewrite::fp16::{to_fp16_deferred, Fp16, Fp16Options, Fp16Report};
use crate::onnx::rewrite::pass::{run_pass, Pass, PassReport};
use crate::onnx::rewrite::plan::{node_label, plan_int8, Exclusion, QuantPlan};
use crate::onnx::rewrite::qdq::{Qdq, WeightClipping, WeightQuant};
use crate::onnx::OnnxModel;
use crate::quantize::search_float_nodes::FloatNodesOfSearch;
use crate::tensor::Precision;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What the nodes left out of INT8 compute in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fallback {
    /// float32: the Q/DQ graph as it is.
    #[default]
    Fp32,
    /// float16 wherever the graph is not INT8 (what a strongly typed engine of the model runs):
    /// the Q/DQ nodes and the nodes that read them stay float32, so TensorRT still fuses them.
    Fp16,
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Fallback::Fp32 => "fp32",
            Fallback::Fp16 => "fp16",
        })
    }
}

/// Where INT8 scales come from.
#[derive(Clone, Debug)]
pub enum Int8Source {
    /// Calibrate (or reuse the keyed cache of an earlier calibration with the same key).
    Calibrate(Box<CalibrateConfig>),
    /// A calibration cache given by hand (TensorRT's text format).
    Cache(PathBuf),
}

/// One precision recipe: what `quantize` writes and `build` builds from the same options, each
/// precision holding only what it needs (INT8 scales can only be given to an INT8 plan).
#[derive(Clone, Debug)]
pub enum PrecisionPlan {
    /// No rewrite: the model as it is.
    Fp32,
    /// The FP16 autocast.
    Fp16(Fp16Plan),
    /// INT8 Q/DQ.
    Int8(Int8Plan),
}

/// The FP16 recipe.
#[derive(Clone, Debug, Default)]
pub struct Fp16Plan {
    /// The ops and nodes kept in float32, and whether the graph's I/O is float16 too.
    pub options: Fp16Options,
    /// A target search's result (its JSON report, or the result it kept): the nodes it left in
    /// float are kept in float32 here too. Read by [`PrecisionPlan::with_search_result`].
    pub(crate) search_result: Option<PathBuf>,
}

/// The INT8 recipe.
#[derive(Clone, Debug)]
pub struct Int8Plan {
    /// Where the scales come from.
    pub scales: Int8Source,
    /// The nodes left in float.
    pub exclude: Exclusion,
    /// What the nodes left in float compute in.
    pub fallback: Fallback,
    /// How each weight channel's range is chosen.
    pub(crate) weight_clip: WeightClipping,
    /// A target search's result: the nodes it left in float are left out of INT8 here too.
    pub(crate) search_result: Option<PathBuf>,
}

impl Int8Plan {
    /// The INT8 recipe with its scales from `scales` and every other option at its default.
    pub fn new(scales: Int8Source) -> Int8Plan {
        Int8Plan {
            scales,
            exclude: Exclusion::default(),
            fallback: Fallback::default(),
            weight_clip: WeightClipping::default(),
            search_result: None,
        }
    }

    /// Warns of each per-op weight clip rule that no quantized weight of `plan` takes (an op
    /// type misspelt, or one left in float).
    fn warn_unused_clip_rules(&self, model: &OnnxModel, plan: &QuantPlan) {
        let graph = model.graph();
        let clipped: BTreeSet<&str> = plan
            .weights
            .iter()
            .map(|w| graph.node[w.consumer.0].op_type.as_str())
            .collect();
        for op in self.weight_clip.by_op.keys() {
            if !clipped.contains(op.as_str()) {
                tracing::warn!(
                    "{}: the weight clip rule of op type '{op}' changes nothing: no INT8 weight is read by a node of that type",
                    model.path.display()
                );
            }
        }
    }

    /// The INT8 rewrite of `model` (its weights all in memory, Constant weights lifted).
    fn rewrite(
        &self,
        model: &OnnxModel,
        scales: &Int8Scales,
        int8_share: bool,
    ) -> Result<(OnnxModel, Int8Applied)> {
        // The full plan must have something to quantize, whatever is excluded.
        let full = int8_pass(model, &scales.scales)?.plan;
        let (plan, float) =
            plan_without(model, &self.exclude).with_context(|| model.path.display().to_string())?;
        let quantized = plan.quantized_nodes();
        self.warn_unused_clip_rules(model, &plan);
        let report = Int8Applied {
            activations: plan.activations.len(),
            weights: plan.weights.len(),
            float_nodes: full
                .quantized_nodes()
                .intersection(&float)
                .map(|&i| node_label(model.graph(), i))
                .collect(),
            fallback: self.fallback,
            int8_share: int8_share
                .then(|| model_macs(model, &Default::default()).ok())
                .flatten()
                .filter(|m| m.total > 0)
                .map(|m| m.share(quantized.iter().copied())),
        };
        let rewritten = int8_model(
            model,
            plan,
            &scales.scales,
            self.fallback,
            &WeightQuant::nearest(self.weight_clip.clone()),
        )
        .with_context(|| format!("{} with {}", model.path.display(), scales.cache))?;
        Ok((rewritten, report))
    }
}

/// The INT8 scales a plan resolved, and where they came from.
#[derive(Clone, Debug)]
pub struct Int8Scales {
    /// The scale of each activation tensor, by name.
    pub scales: BTreeMap<String, f32>,
    /// The calibration cache they were read from or written to.
    pub cache: String,
    /// The SHA-256 of what identifies them: the cache's bytes, or the calibration's key.
    pub(crate) key_hash: String,
    /// The calibration run (absent for a cache given by hand).
    pub calibration: Option<CalibrateReport>,
}

/// What the INT8 rewrite did.
#[derive(Clone, Debug)]
pub struct Int8Applied {
    /// Activation tensors given a Q/DQ pair.
    pub activations: usize,
    /// Weights quantized per channel.
    pub weights: usize,
    /// The nodes the full INT8 plan would quantize that were left in float, by label.
    pub float_nodes: Vec<String>,
    /// What they compute in.
    pub fallback: Fallback,
    /// Share of the Conv/ConvTranspose/Gemm/MatMul MACs with INT8 inputs, in [0, 1] (when asked
    /// for and the shapes could be inferred).
    pub int8_share: Option<f64>,
}

/// The INT8 part of the `quantize` and `build` reports (flattened into each, so their JSON keeps
/// its keys where they were): what the Q/DQ rewrite did, each part absent where it was not done
/// (an engine reused, a rewrite that is not INT8).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Int8Rewrite {
    /// Activation tensors given a Q/DQ pair.
    pub quantized_activations: Option<usize>,
    /// Weights quantized per channel.
    pub quantized_weights: Option<usize>,
    /// The nodes the INT8 plan would quantize that were left in float.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub float_nodes: Option<Vec<String>>,
    /// What the nodes left in float compute in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Fallback>,
}

/// A model after its plan was applied.
pub struct Applied {
    /// The rewritten model (the input itself, all its weights in it, for FP32).
    pub model: OnnxModel,
    /// FP16: what the rewrite did.
    pub fp16: Option<Fp16Report>,
    /// INT8: what the rewrite did.
    pub int8: Option<Int8Applied>,
}

/// The weights of a model decoded with its large weights left in the file's bytes (see
/// [`crate::onnx::deferred_weights`]), and those bytes.
pub(crate) type FileWeights<'a> = (DeferredWeights, &'a [u8]);

impl PrecisionPlan {
    /// The precision the rewritten model computes in.
    pub fn precision(&self) -> Precision {
        match self {
            PrecisionPlan::Fp32 => Precision::Fp32,
            PrecisionPlan::Fp16(_) => Precision::Fp16,
            PrecisionPlan::Int8(_) => Precision::Int8,
        }
    }

    /// The FP16 recipe, for an FP16 plan.
    pub(crate) fn fp16(&self) -> Option<&Fp16Plan> {
        match self {
            PrecisionPlan::Fp16(p) => Some(p),
            _ => None,
        }
    }

    /// The INT8 recipe, for an INT8 plan.
    pub(crate) fn int8(&self) -> Option<&Int8Plan> {
        match self {
            PrecisionPlan::Int8(p) => Some(p),
            _ => None,
        }
    }

    /// The target search result the plan takes its float nodes from, if any.
    pub(crate) fn search_result(&self) -> Option<&Path> {
        match self {
            PrecisionPlan::Fp32 => None,
            PrecisionPlan::Fp16(p) => p.search_result.as_deref(),
            PrecisionPlan::Int8(p) => p.search_result.as_deref(),
        }
    }

    /// The plan with the nodes its search result left in float among those it keeps in float
    /// (what [`Self::tag`] and [`Self::apply`] then see); the plan itself when it has none. The
    /// result must be of a search at the plan's precision.
    pub(crate) fn with_search_result(&self) -> Result<PrecisionPlan> {
        let Some(path) = self.search_result() else {
            return Ok(self.clone());
        };
        let shown = path.display();
        let bytes = std::fs::read(path).with_context(|| format!("{shown}: cannot read"))?;
        let result: serde_json::Value =
            serde_json::from_slice(&bytes).with_context(|| format!("{shown}: not JSON"))?;
        let result: FloatNodesOfSearch = serde_json::from_value(result).map_err(|e| {
            anyhow::anyhow!("{shown}: not the result of a target search (quantize --target-cosine or --target-agreement): {e}")
        })?;
        let searched = result.precision();
        if searched != self.precision() {
            bail!(
                "{shown}: the result of an {} target search, for an {} model",
                searched.to_string().to_uppercase(),
                self.precision().to_string().to_uppercase()
            );
        }
        let nodes = result.float_nodes;
        let mut plan = self.clone();
        let kept = match &mut plan {
            PrecisionPlan::Int8(p) => {
                p.search_result = None;
                &mut p.exclude.nodes
            }
            PrecisionPlan::Fp16(p) => {
                p.search_result = None;
                &mut p.options.keep_nodes
            }
            PrecisionPlan::Fp32 => return Ok(plan),
        };
        for node in nodes {
            if !kept.contains(&node) {
                kept.push(node);
            }
        }
        Ok(plan)
    }

    /// What tells this rewrite from another of the same precision, for an engine's key; `None`
    /// for FP32 and for INT8 with every option at its default (engines built before those
    /// options existed keep their keys). Written as 0.1.0 wrote it, so keys stay byte-identical.
    pub(crate) fn tag(&self) -> Option<String> {
        match self {
            PrecisionPlan::Fp32 => None,
            PrecisionPlan::Fp16(p) => {
                let f = &p.options;
                let mut tag = format!("keep_fp32={} fp16_io={}", f.keep_fp32.join(","), f.fp16_io);
                if !f.keep_nodes.is_empty() || !f.keep_regex.is_empty() {
                    tag += &format!(
                        " keep_nodes={} keep_regex={}",
                        f.keep_nodes.join(","),
                        f.keep_regex.join("\u{1f}")
                    );
                }
                Some(tag)
            }
            PrecisionPlan::Int8(p) => {
                let e = &p.exclude;
                let default = e.is_empty()
                    && p.fallback == Fallback::default()
                    && p.weight_clip == WeightClipping::default();
                (!default).then(|| {
                    format!(
                        "exclude={} exclude_op={} exclude_regex={} fallback={} weight_clip={}",
                        e.nodes.join(","),
                        e.ops.join(","),
                        e.patterns.join("\u{1f}"),
                        p.fallback,
                        serde_json::to_string(&p.weight_clip).unwrap_or_default()
                    )
                })
            }
        }
    }

    /// Applies the plan to `model`. `scales`: the INT8 ones (`jobs::calibrate::int8_scales`);
    /// `weights`: where the model's large weights are still in its file's bytes (the FP16
    /// rewrite converts them straight from there), `None` when the model holds them all;
    /// `int8_share`: also count the share of MACs that run in INT8 (infers every shape).
    pub fn apply(
        &self,
        model: OnnxModel,
        scales: Option<&Int8Scales>,
        weights: Option<FileWeights>,
        int8_share: bool,
    ) -> Result<Applied> {
        let mut model = model;
        if self.precision() != Precision::Fp32 {
            refuse_quantized(&model, &self.precision().to_string().to_uppercase())?;
        }
        match self {
            PrecisionPlan::Fp32 => {
                if let Some((mut deferred, file)) = weights {
                    deferred.restore(model.graph_mut(), file);
                }
                Ok(Applied {
                    model,
                    fp16: None,
                    int8: None,
                })
            }
            PrecisionPlan::Fp16(p) => {
                let (model, report) = match weights {
                    Some((deferred, file)) => to_fp16_deferred(model, &p.options, deferred, file)?,
                    None => match Fp16(p.options.clone()).run(model)? {
                        (m, PassReport::Fp16(r)) => (m, r),
                        _ => bail!("the FP16 pass made no FP16 report"),
                    },
                };
                Ok(Applied {
                    model,
                    fp16: Some(report),
                    int8: None,
                })
            }
            PrecisionPlan::Int8(p) => {
                let scales = scales.context("INT8 needs its scales resolved first")?;
                if let Some((mut deferred, file)) = weights {
                    deferred.restore(model.graph_mut(), file);
                }
                let model = run_pass(model, &LiftConstantWeights)?;
                let (model, report) = p.rewrite(&model, scales, int8_share)?;
                Ok(Applied {
                    model,
                    fp16: None,
                    int8: Some(report),
                })
            }
        }
    }
}

/// The INT8 form of `model` with Q/DQ where `plan` says (a plan of the model, possibly with
/// nodes left out), with `scales`, its float part in `fallback`.
pub(crate) fn int8_model(
    model: &OnnxModel,
    plan: QuantPlan,
    scales: &BTreeMap<String, f32>,
    fallback: Fallback,
    weights: &WeightQuant,
) -> Result<OnnxModel> {
    let mut model = model.clone();
    let mut keep_nodes = vec![];
    if fallback == Fallback::Fp16 {
        // The INT8 nodes are kept float32 by name: unnamed ones get their label as a name.
        let graph = model.graph_mut();
        for i in 0..graph.node.len() {
            if graph.node[i].name.is_empty() {
                graph.node[i].name = node_label(graph, i);
            }
        }
        keep_nodes = plan
            .quantized_nodes()
            .into_iter()
            .map(|i| graph.node[i].name.clone())
            .collect();
    }
    let qdq = Qdq {
        plan,
        scales: scales.clone(),
        weights: weights.clone(),
    };
    let model = run_pass(model, &qdq)?;
    Ok(match fallback {
        Fallback::Fp32 => model,
        Fallback::Fp16 => {
            let mut options = Fp16Options {
                keep_nodes,
                ..Default::default()
            };
            options
                .keep_fp32
                .extend(["QuantizeLinear", "DequantizeLinear"].map(String::from));
            run_pass(model, &Fp16(options))?
        }
    })
}

/// The INT8 plan of `model` with the nodes `exclude` names left in float, and those nodes.
pub(crate) fn plan_without(
    model: &OnnxModel,
    exclude: &Exclusion,
) -> Result<(QuantPlan, BTreeSet<usize>)> {
    let plan = plan_int8(model.graph());
    if exclude.is_empty() {
        return Ok((plan, BTreeSet::new()));
    }
    let float = exclude.resolve(model.graph())?;
    Ok((plan.without(&float), float))
}

/// The INT8 pass for `model`: Q/DQ pairs with `scales` wherever the INT8 plan puts them. A
/// model without quantizable ops is an error (its INT8 form would be the FP32 one).
pub(crate) fn int8_pass(model: &OnnxModel, scales: &BTreeMap<String, f32>) -> Result<Qdq> {
    refuse_quantized(model, "INT8")?;
    let plan = plan_int8(model.graph());
    if plan.is_empty() {
        bail!(
            "{}: no quantizable ops (Conv, ConvTranspose, Gemm, MatMul); its INT8 form would be the FP32 one",
            model.path.display()
        );
    }
    Ok(Qdq {
        plan,
        scales: scales.clone(),
        weights: WeightQuant::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_result_adds_its_float_nodes_at_its_own_precision() {
        let dir = tempfile::tempdir().unwrap();
        let fp16 = dir.path().join("fp16.json");
        std::fs::write(&fp16, r#"{"full_fp16": {}, "float_nodes": ["a", "b"]}"#).unwrap();
        let plan = PrecisionPlan::Fp16(Fp16Plan {
            options: Fp16Options {
                keep_nodes: vec!["a".into()],
                ..Fp16Options::default()
            },
            search_result: Some(fp16.clone()),
        });
        let resolved = plan.with_search_result().unwrap();
        assert_eq!(resolved.fp16().unwrap().options.keep_nodes, ["a", "b"]);
        assert!(resolved.search_result().is_none());
        assert!(resolved.tag().unwrap().contains("keep_nodes=a,b"));

        let int8 = dir.path().join("int8.json");
        std::fs::write(&int8, r#"{"full_int8": {}, "float_nodes": ["conv_2"]}"#).unwrap();
        let int8_plan = |search_result| {
            PrecisionPlan::Int8(Int8Plan {
                search_result,
                ..Int8Plan::new(Int8Source::Cache("c.cache".into()))
            })
        };
        let resolved = int8_plan(Some(int8)).with_search_result().unwrap();
        assert_eq!(resolved.int8().unwrap().exclude.nodes, ["conv_2"]);
        assert!(resolved.fp16().is_none());
        assert!(resolved.tag().unwrap().contains("exclude=conv_2"));
        assert!(int8_plan(None).tag().is_none());

        let wrong = int8_plan(Some(fp16));
        let err = format!("{:#}", wrong.with_search_result().unwrap_err());
        assert!(
            err.contains("an FP16 target search, for an INT8 model"),
            "{err}"
        );
    }
}
