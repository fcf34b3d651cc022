//! The precision rewrites a strongly typed TensorRT build needs, chosen in one place: FP16
//! autocast, or INT8 Q/DQ with calibrated scales where the INT8 plan says. `build` runs the pass
//! before building; the `quantize` job runs it alone and writes the rewritten ONNX.

use crate::backend::mac_count::model_macs;
use crate::backend::tract::{TractBackend, TractOptions};
use crate::calibration::cache::{check_cache_model, CalibrationTable};
use crate::onnx::model::file_sha256;
use crate::onnx::rewrite::constant_weights::lift_constant_weights;
use crate::onnx::rewrite::equalize::{Equalize, EqualizeReport};
use crate::onnx::rewrite::fp16::{Fp16, Fp16Options, Fp16Report};
use crate::onnx::rewrite::pass::{Pass, PassReport};
use crate::onnx::rewrite::plan::{node_label, plan_int8, Exclusion, QuantPlan};
use crate::onnx::rewrite::qdq::{Qdq, WeightClip, WeightQuant};
use crate::onnx::OnnxModel;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

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

/// The INT8 form of `model` with Q/DQ where `plan` says (a plan of the model, possibly with
/// nodes left out), with `scales`, its float part in `fallback`.
pub fn int8_model(
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
    let (model, _) = Qdq {
        plan,
        scales: scales.clone(),
        weights: weights.clone(),
    }
    .run(model)?;
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
            Fp16(options).run(model)?.0
        }
    })
}

/// The INT8 plan of `model` with the nodes `exclude` names left in float, and those nodes.
pub fn plan_without(
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
pub fn int8_pass(model: &OnnxModel, scales: &BTreeMap<String, f32>) -> Result<Qdq> {
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

/// Which rewrite `quantize` applies.
#[derive(Clone, Debug)]
pub enum Rewrite {
    /// FP16 autocast with these options.
    Fp16(Fp16Options),
    /// Cross-layer equalisation: the model stays float32 (calibrate the result, then quantize
    /// it).
    Equalize,
    /// INT8 Q/DQ with the scales of this calibration cache (made for this model).
    Int8 {
        /// The calibration cache (TensorRT's text format, with trtkit's key beside it).
        cache: PathBuf,
        /// Nodes left in float.
        exclude: Exclusion,
        /// What the nodes left in float compute in.
        fallback: Fallback,
        /// How the weights' per-channel ranges are chosen.
        weight_clip: WeightClip,
    },
}

/// Everything `quantize` needs.
#[derive(Clone, Debug)]
pub struct QuantizeConfig {
    /// The FP32 ONNX model.
    pub model: PathBuf,
    /// The rewrite.
    pub rewrite: Rewrite,
    /// Where the rewritten model goes.
    pub output: PathBuf,
    /// Load the result in the reference backend (tract) before writing it, as a check.
    pub check: bool,
}

/// What `quantize` did.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QuantizeReport {
    /// Input model.
    pub model: String,
    /// Written model.
    pub output: String,
    /// `int8` or `fp16`.
    pub precision: String,
    /// INT8: activation tensors with a Q/DQ pair.
    pub quantized_activations: Option<usize>,
    /// INT8: weights quantized per channel.
    pub quantized_weights: Option<usize>,
    /// INT8: the nodes left in float that the plan would quantize.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub float_nodes: Option<Vec<String>>,
    /// INT8: what the float part computes in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Fallback>,
    /// INT8: share of the Conv/ConvTranspose/Gemm/MatMul MACs that run with INT8 inputs, in
    /// [0, 1] (absent when the shapes cannot be inferred).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int8_share: Option<f64>,
    /// FP16: what the rewrite did.
    pub fp16: Option<Fp16Report>,
    /// FP16: the ops kept in float32.
    pub keep_fp32: Option<Vec<String>>,
    /// Equalisation: what it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equalize: Option<EqualizeReport>,
    /// Whether the result was loaded in tract as a check.
    pub checked: bool,
}

/// The rewritten model failed to load in the reference backend, so it was not written.
#[derive(Debug, thiserror::Error)]
#[error("the rewritten model does not load in the reference backend; nothing written")]
pub struct RewriteDoesNotLoad;

/// Rewrites `config.model` and writes the result (atomically) to `config.output`.
pub fn quantize(config: &QuantizeConfig) -> Result<QuantizeReport> {
    let shown = config.model.display().to_string();
    let mut model = OnnxModel::load(&config.model)?;
    model.inline_external_data()?;
    let mut report = QuantizeReport {
        model: shown.clone(),
        output: config.output.display().to_string(),
        precision: String::new(),
        quantized_activations: None,
        quantized_weights: None,
        float_nodes: None,
        fallback: None,
        int8_share: None,
        fp16: None,
        keep_fp32: None,
        equalize: None,
        checked: config.check,
    };
    let rewritten = match &config.rewrite {
        Rewrite::Int8 {
            cache,
            exclude,
            fallback,
            weight_clip,
        } => {
            let table = CalibrationTable::load(cache)?;
            check_cache_model(cache, &config.model, &file_sha256(&config.model)?)?;
            lift_constant_weights(&mut model);
            // The full plan must have something to quantize, whatever is excluded.
            let full = int8_pass(&model, &table.scales)?.plan;
            let (plan, float) = plan_without(&model, exclude).with_context(|| shown.clone())?;
            let quantized = plan.quantized_nodes();
            report.precision = "int8".into();
            report.quantized_activations = Some(plan.activations.len());
            report.quantized_weights = Some(plan.weights.len());
            report.float_nodes = Some(
                full.quantized_nodes()
                    .intersection(&float)
                    .map(|&i| node_label(model.graph(), i))
                    .collect(),
            );
            report.fallback = Some(*fallback);
            report.int8_share = model_macs(&model, &Default::default())
                .ok()
                .filter(|m| m.total > 0)
                .map(|m| m.share(quantized.iter().copied()));
            int8_model(
                &model,
                plan,
                &table.scales,
                *fallback,
                &WeightQuant::nearest(*weight_clip),
            )
            .with_context(|| format!("{shown} with {}", cache.display()))?
        }
        Rewrite::Equalize => {
            let (m, r) = Equalize.run(model).with_context(|| shown.clone())?;
            report.precision = "fp32".into();
            if let PassReport::Equalize(r) = r {
                report.equalize = Some(r);
            }
            m
        }
        Rewrite::Fp16(options) => {
            let (m, r) = Fp16(options.clone())
                .run(model)
                .with_context(|| shown.clone())?;
            report.precision = "fp16".into();
            if let PassReport::Fp16(r) = r {
                report.fp16 = Some(r);
            }
            report.keep_fp32 = Some(options.keep_fp32.clone());
            m
        }
    };
    let out = OnnxModel::from_proto(rewritten.proto, &config.output);
    if config.check {
        TractBackend::load(
            &out,
            &TractOptions {
                batch: Some(1),
                ..Default::default()
            },
        )
        .context(RewriteDoesNotLoad)?;
    }
    out.save(&config.output)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::rewrite::fp16::DEFAULT_KEEP_FP32;
    use crate::onnx::test_models;

    #[test]
    fn fp16_quantize_writes_a_model_that_loads_and_a_report_that_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("c.onnx");
        OnnxModel::from_proto(test_models::classifier(None), &model)
            .save(&model)
            .unwrap();
        let config = QuantizeConfig {
            model,
            rewrite: Rewrite::Fp16(Fp16Options {
                keep_fp32: DEFAULT_KEEP_FP32.iter().map(|s| s.to_string()).collect(),
                fp16_io: false,
                keep_nodes: vec![],
                keep_regex: vec![],
            }),
            output: dir.path().join("c-fp16.onnx"),
            check: true,
        };
        let report = quantize(&config).unwrap();
        assert_eq!(report.precision, "fp16");
        assert!(report.fp16.as_ref().unwrap().converted_initializers > 0);
        assert!(OnnxModel::load(&config.output).is_ok());
        let text = serde_json::to_string(&report).unwrap();
        let back: QuantizeReport = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        // No quantizable op: no INT8 pass.
        let relu = OnnxModel::from_proto(test_models::classifier(None), "r.onnx");
        let mut bare = relu.clone();
        bare.graph_mut()
            .node
            .retain(|n| n.op_type != "Conv" && n.op_type != "Gemm");
        assert!(int8_pass(&bare, &BTreeMap::new()).is_err());
        assert!(int8_pass(&relu, &BTreeMap::new()).is_ok());
    }
}
