//! The `quantize` job: a model's precision rewrite (its [`PrecisionPlan`], the one `build` also
//! applies) or its cross-layer equalisation, checked on the default CPU backend (where such a
//! model runs, [`crate::quantize::load_check`]) and written as ONNX; [`request`] is the one entry
//! that runs any quantize request (a rewrite, a measurement, a search or a sensitivity scan).

pub mod request;

use crate::digest::file_sha256;
use crate::jobs::calibrate::int8_scales;
use crate::onnx::rewrite::equalize::{Equalize, EqualizeReport};
use crate::onnx::rewrite::fp16::Fp16Report;
use crate::onnx::rewrite::pass::{Pass, PassReport};
use crate::onnx::shape::{InputShapes, ShapeRequest};
use crate::onnx::OnnxModel;
use crate::progress::NoProgress;
use crate::quantize::already_quantized::refuse_quantized;
use crate::quantize::load_check::check_loads;
use crate::quantize::plan::{Int8Rewrite, PrecisionPlan};
use crate::tensor::Precision;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Which rewrite `quantize` applies.
#[derive(Clone, Debug)]
pub enum Rewrite {
    /// The precision recipe: FP16, or INT8 Q/DQ with the scales of its calibration cache (made
    /// for this model). An FP32 plan rewrites nothing and is refused.
    Precision(Box<PrecisionPlan>),
    /// Cross-layer equalisation: the model stays float32 (calibrate the result, then quantize
    /// it).
    Equalize,
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
    /// Open the result on the default CPU backend (ONNX Runtime where installed, else tract)
    /// before writing it, as a check.
    pub check: bool,
    /// The input shapes the check opens the result at (its batch is 1): sizes for the axes a
    /// model leaves free, where the backend needs them. The written model keeps its own shapes.
    pub check_shapes: ShapeRequest,
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
    /// INT8: what the rewrite did.
    #[serde(flatten)]
    pub int8: Int8Rewrite,
    /// INT8: share of the Conv/ConvTranspose/Gemm/MatMul MACs that run with INT8 inputs, in
    /// [0, 1] (absent when the shapes cannot be inferred).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int8_share: Option<f64>,
    /// FP16: what the rewrite did.
    pub fp16: Option<Fp16Report>,
    /// FP16: the ops kept in float32.
    pub(crate) keep_fp32: Option<Vec<String>>,
    /// Equalisation: what it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equalize: Option<EqualizeReport>,
    /// Whether the result was opened on a backend as a check before it was written.
    pub checked: bool,
    /// The backend that opened it (`ort-cpu`, `tract-cpu`), when checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_on: Option<String>,
}

/// Rewrites `config.model` and writes the result (atomically) to `config.output`.
pub fn quantize(config: &QuantizeConfig) -> Result<QuantizeReport> {
    let shown = config.model.display().to_string();
    let mut model = OnnxModel::load(&config.model)?;
    model.inline_external_data()?;
    if config.check && !config.check_shapes.is_empty() {
        // Shapes that do not fit the model are said as such, not as a failed check.
        InputShapes(config.check_shapes.clone())
            .run(model.clone())
            .with_context(|| shown.clone())?;
    }
    let mut report = QuantizeReport {
        model: shown.clone(),
        output: config.output.display().to_string(),
        precision: String::new(),
        int8: Int8Rewrite::default(),
        int8_share: None,
        fp16: None,
        keep_fp32: None,
        equalize: None,
        checked: config.check,
        checked_on: None,
    };
    let rewritten = match &config.rewrite {
        Rewrite::Precision(plan) => apply_plan(plan, model, config, &mut report)?,
        Rewrite::Equalize => {
            let (m, r) = Equalize.run(model).with_context(|| shown.clone())?;
            report.precision = "fp32".into();
            if let PassReport::Equalize(r) = r {
                report.equalize = Some(r);
            }
            m
        }
    };
    let out = OnnxModel::from_proto(rewritten.proto, &config.output);
    if config.check {
        report.checked_on = Some(check_loads(&out, &config.check_shapes)?);
    }
    out.save(&config.output)?;
    Ok(report)
}

/// `plan` applied to `model` (all its weights in memory), what it did recorded in `report`.
fn apply_plan(
    plan: &PrecisionPlan,
    model: OnnxModel,
    config: &QuantizeConfig,
    report: &mut QuantizeReport,
) -> Result<OnnxModel> {
    let shown = config.model.display().to_string();
    if plan.precision() == Precision::Fp32 {
        bail!("{shown}: an FP32 plan rewrites nothing; give FP16 or INT8");
    }
    refuse_quantized(&model, &plan.precision().to_string().to_uppercase())?;
    let plan = &plan.with_search_result()?;
    let model_sha256 = match plan.precision() {
        Precision::Int8 => file_sha256(&config.model)?,
        _ => String::new(),
    };
    let scales = int8_scales(plan, &config.model, &model_sha256, &NoProgress)?;
    let applied = plan.apply(model, scales.as_ref(), None, true);
    let applied = match plan.precision() {
        // The INT8 rewrite names the model (and its cache) in its own errors.
        Precision::Int8 => applied?,
        _ => applied.with_context(|| shown.clone())?,
    };
    report.precision = plan.precision().to_string();
    if let (Some(fp16), Some(p)) = (applied.fp16, plan.fp16()) {
        report.fp16 = Some(fp16);
        report.keep_fp32 = Some(p.options.keep_fp32.clone());
    }
    if let Some(int8) = applied.int8 {
        report.int8 = Int8Rewrite {
            quantized_activations: Some(int8.activations),
            quantized_weights: Some(int8.weights),
            float_nodes: Some(int8.float_nodes),
            fallback: Some(int8.fallback),
        };
        report.int8_share = int8.int8_share;
    }
    Ok(applied.model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::rewrite::fp16::{Fp16Options, DEFAULT_KEEP_FP32};
    use crate::onnx::test_models;
    use crate::quantize::plan::int8_pass;
    use crate::quantize::plan::Fp16Plan;
    use std::collections::BTreeMap;

    #[test]
    fn fp16_quantize_writes_a_model_that_loads_and_a_report_that_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("c.onnx");
        OnnxModel::from_proto(test_models::classifier(None), &model)
            .save(&model)
            .unwrap();
        let config = QuantizeConfig {
            model,
            rewrite: Rewrite::Precision(Box::new(PrecisionPlan::Fp16(Fp16Plan {
                options: Fp16Options {
                    keep_fp32: DEFAULT_KEEP_FP32.iter().map(|s| s.to_string()).collect(),
                    fp16_io: false,
                    keep_nodes: vec![],
                    keep_regex: vec![],
                },
                search_result: None,
            }))),
            output: dir.path().join("c-fp16.onnx"),
            check: true,
            check_shapes: ShapeRequest::default(),
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
