//! The transformer fusion on the way into ONNX Runtime (`--transformer-fusion`): exported
//! encoders' attention blocks and residual LayerNorms become ONNX Runtime's fused operators
//! before a session opens (see [`crate::onnx::rewrite::transformer_fusion`]), on its CPU build
//! (float32 blocks) and its CUDA provider (float32 and float16). TensorRT never gets the fused
//! graph: it fuses attention itself and cannot parse `com.microsoft` operators.

use crate::onnx::rewrite::pass::{Pass, PassReport};
use crate::onnx::rewrite::transformer_fusion::TransformerFusion;
use crate::onnx::OnnxModel;
use anyhow::Result;

/// Whether ONNX Runtime backends fuse exported transformer blocks before they run a model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TransformerFusionPolicy {
    /// Fused wherever the blocks match (a model without them is unchanged).
    #[default]
    On,
    /// The graph as the file has it.
    Off,
}

/// `model` with its transformer blocks fused for ONNX Runtime (`float16`: the CUDA provider,
/// which has float16 kernels for them), and a note for the report when anything was fused or
/// left alone; `model` unchanged with no note when there is nothing to fuse.
pub(crate) fn fuse_for_ort(model: OnnxModel, float16: bool) -> Result<(OnnxModel, Option<String>)> {
    let (fused, report) = TransformerFusion { float16 }.run(model)?;
    let PassReport::TransformerFusion(report) = report else {
        return Ok((fused, None));
    };
    for why in &report.left_alone {
        tracing::info!("transformer fusion: attention at {why}; left unfused");
    }
    if report.attention + report.skip_layer_norms + report.left_alone.len() == 0 {
        return Ok((fused, None));
    }
    let mut note = format!(
        "transformer fusion: {} attention block(s) fused into com.microsoft.Attention, {} residual LayerNorm(s) into SkipLayerNormalization",
        report.attention, report.skip_layer_norms
    );
    if !report.left_alone.is_empty() {
        note += &format!(
            ", {} attention block(s) left unfused (-v says why)",
            report.left_alone.len()
        );
    }
    Ok((fused, Some(note)))
}
