//! The precision rewrites a strongly typed TensorRT build needs, chosen in one place: FP16
//! autocast, or INT8 Q/DQ with calibrated scales where the INT8 plan says. `build` runs the pass
//! before building; the `quantize` job runs it alone and writes the rewritten ONNX.

use crate::backend::tract::{TractBackend, TractOptions};
use crate::calibration::cache::{check_cache_model, CalibrationTable};
use crate::onnx::model::file_sha256;
use crate::onnx::rewrite::fp16::{Fp16, Fp16Options, Fp16Report};
use crate::onnx::rewrite::pass::{Pass, PassReport};
use crate::onnx::rewrite::plan::plan_int8;
use crate::onnx::rewrite::qdq::Qdq;
use crate::onnx::OnnxModel;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

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
    })
}

/// Which rewrite `quantize` applies.
#[derive(Clone, Debug)]
pub enum Rewrite {
    /// FP16 autocast with these options.
    Fp16(Fp16Options),
    /// INT8 Q/DQ with the scales of this calibration cache (made for this model).
    Int8 {
        /// The calibration cache (TensorRT's text format, with trtkit's key beside it).
        cache: PathBuf,
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
    /// FP16: what the rewrite did.
    pub fp16: Option<Fp16Report>,
    /// FP16: the ops kept in float32.
    pub keep_fp32: Option<Vec<String>>,
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
        fp16: None,
        keep_fp32: None,
        checked: config.check,
    };
    let rewritten = match &config.rewrite {
        Rewrite::Int8 { cache } => {
            let table = CalibrationTable::load(cache)?;
            check_cache_model(cache, &config.model, &file_sha256(&config.model)?)?;
            let pass = int8_pass(&model, &table.scales)?;
            report.precision = "int8".into();
            report.quantized_activations = Some(pass.plan.activations.len());
            report.quantized_weights = Some(pass.plan.weights.len());
            pass.run(model)
                .with_context(|| format!("{shown} with {}", cache.display()))?
                .0
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
